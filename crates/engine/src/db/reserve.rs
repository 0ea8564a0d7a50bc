//! The disk reserve: a file of zeros (`RESERVE`) the store writes at open and gives back when the
//! disk fills, so that deletions can still be logged and compactions can run to free space.
//!
//! Without it a store that filled its disk could never shrink: a delete needs a log record and
//! the flush after the resume needs room for a table. With it (`Options::reserved_disk_bytes`):
//! - at open, and whenever writes resume because space came back, the reserve is written (real
//!   blocks, synced) unless it is there; a disk too full for it is no error, only no reserve;
//! - while a full disk stops writes, a group holding only deletions and range deletions removes
//!   the reserve and resumes in the room it leaves: the damaged log is cut and replaced, the
//!   memtables flush and compactions are queued, so the deleted keys' space is reclaimed;
//! - a group holding any data gets the `NoSpace` error as before: only deletions release the
//!   reserve. Once they have resumed the store, every write is accepted in the room left, as
//!   after any resume (data writes racing the deletions' flush may take some of it);
//! - the reserve is written again at the next open, or when a later resume succeeds without
//!   it; not yet after the compactions that freed the room.
//! - The reserve is zeros: a filesystem that compresses or dedupes them holds little room.

use std::path::PathBuf;

use parking_lot::Mutex;

use crate::error::{ErrorKind, Result};
use crate::fs::FileSystem;

/// The reserve file's name in the store's directory.
pub(crate) const RESERVE: &str = "RESERVE";

/// Written a piece at a time, so memory is bounded whatever the reserve's size.
const PIECE: usize = 1 << 20;

#[derive(Debug)]
pub(crate) struct DiskReserve {
    path: PathBuf,
    dir: PathBuf,
    bytes: u64,
    /// Whether the reserve is on disk, whole; held while it is written or removed.
    present: Mutex<bool>,
}

impl DiskReserve {
    pub(crate) fn new(dir: PathBuf, bytes: u64) -> Self {
        DiskReserve {
            path: dir.join(RESERVE),
            dir,
            bytes,
            present: Mutex::new(false),
        }
    }

    /// Writes the reserve unless it is there. `Ok(false)` when the disk has no room for it (what
    /// was written of it is removed again); other I/O errors are returned.
    pub(crate) fn ensure(&self, fs: &dyn FileSystem) -> Result<bool> {
        let mut present = self.present.lock();
        if self.bytes == 0 && fs.exists(&self.path) {
            // Left by an open that kept a reserve: this one keeps none, so the room goes back.
            fs.remove(&self.path)?;
        }
        if *present || self.bytes == 0 {
            return Ok(*present);
        }
        match self.write(fs) {
            Ok(()) => {
                *present = true;
                Ok(true)
            }
            Err(e) => {
                let _ = fs.remove(&self.path);
                match e.kind() {
                    ErrorKind::NoSpace => Ok(false),
                    _ => Err(e),
                }
            }
        }
    }

    fn write(&self, fs: &dyn FileSystem) -> Result<()> {
        if fs.exists(&self.path) {
            // Left by an earlier run: its length is checked, not trusted.
            let file = fs.open_random(&self.path)?;
            if file.len()? == self.bytes {
                return Ok(());
            }
        }
        let mut file = fs.create(&self.path)?;
        let zeros = vec![0u8; PIECE.min(self.bytes as usize)];
        let mut left = self.bytes;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            file.append(&zeros[..n])?;
            left -= n as u64;
        }
        file.finish()?;
        fs.sync_dir(&self.dir)
    }

    /// Removes the reserve to give its room to the store; true when there was one to remove.
    pub(crate) fn release(&self, fs: &dyn FileSystem) -> bool {
        let mut present = self.present.lock();
        if !*present {
            return false;
        }
        *present = false;
        // A reserve that cannot be removed frees nothing; the caller's resume says so.
        fs.remove(&self.path).is_ok()
    }

    /// Whether the reserve is on disk.
    pub(crate) fn is_present(&self) -> bool {
        *self.present.lock()
    }
}
