//! The lock that keeps a second writer out of a store: an OS file lock on `LOCK`, holding the
//! writer's process id so that a refused open can say who has the store. Where the OS has no
//! file locks (WASI) the embedder confines the store, and this process refuses a second open.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::{FileLock, io_err, open_private};
use crate::error::{Error, Result};

#[derive(Debug)]
struct StdFileLock {
    _file: File,
    /// Where the OS has no file locks (WASI): the path this process holds in [`HELD_IN_PROCESS`].
    held_in_process: Option<PathBuf>,
}
impl FileLock for StdFileLock {}

impl Drop for StdFileLock {
    fn drop(&mut self) {
        if let Some(path) = &self.held_in_process {
            HELD_IN_PROCESS.lock().remove(path);
        }
    }
}

/// Lock files this process holds where the OS cannot lock (WASI). Across processes the embedder
/// confines the store (the WASI host holds the OS lock); within one, two `Db`s on a directory
/// would both append to its WAL and MANIFEST, so the second open is `Busy`, as natively.
static HELD_IN_PROCESS: parking_lot::Mutex<std::collections::BTreeSet<PathBuf>> =
    parking_lot::Mutex::new(std::collections::BTreeSet::new());

/// Takes the lock `path` (made if missing); `Busy`, naming the holder, when another process has it.
pub(super) fn lock_file(path: &Path) -> Result<Box<dyn FileLock>> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    let file = open_private(&mut opts, path, "open lock file")?;
    match file.try_lock() {
        Ok(()) => {
            record_holder(&file);
            Ok(Box::new(StdFileLock {
                _file: file,
                held_in_process: None,
            }))
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .map_or("another process".to_string(), |pid| {
                    format!("process {pid}")
                });
            Err(Error::Busy(format!(
                "the store is in use by {holder}, which holds {} and has it open for \
                 writing (a read-only open works beside it)",
                path.display()
            )))
        }
        // Platforms without locking (WASI) still open: the embedder confines the store.
        Err(std::fs::TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {
            let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
            if !HELD_IN_PROCESS.lock().insert(path.clone()) {
                return Err(Error::Busy(format!(
                    "the store is already open in this process ({} is held)",
                    path.display()
                )));
            }
            Ok(Box::new(StdFileLock {
                _file: file,
                held_in_process: Some(path),
            }))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io_err("lock", path, e)),
    }
}

/// Writes this process's id into the lock file it holds, so a second writer can say who holds it.
/// Best effort: the lock, not the text, is what excludes.
fn record_holder(file: &File) {
    #[cfg(unix)]
    {
        let mut writer = file;
        let _ = file.set_len(0);
        let _ =
            std::io::Write::write_all(&mut writer, format!("{}\n", std::process::id()).as_bytes());
    }
    #[cfg(not(unix))]
    let _ = file;
}

#[cfg(test)]
mod tests {
    use super::super::{FileSystem, StdFileSystem};
    use crate::error::Error;

    #[cfg_attr(
        target_os = "wasi",
        ignore = "WASI has no file locks: the host holds them"
    )]
    #[test]
    fn second_lock_is_busy() {
        let dir = crate::test_dir::tempdir();
        let fs = StdFileSystem;
        let p = dir.path().join("LOCK");
        let l = fs.lock(&p).unwrap();
        assert!(matches!(fs.lock(&p), Err(Error::Busy(_))));
        drop(l);
        fs.lock(&p).unwrap();
    }
}
