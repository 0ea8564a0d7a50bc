//! A real small disk for tests of a full disk: a tmpfs of a few MiB mounted on a directory,
//! unmounted when dropped. The counterpart of [`super::FaultInjectionFs`]'s injected `ENOSPC`:
//! here the space runs out, and comes back, as it does on a real machine. Mounting needs root.
//! It is mounted with the syscall, not a `mount` process: a fork while other tests hold their
//! stores' locks would carry those locks into the child until it execs.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A tmpfs mounted on a directory for as long as it lives.
#[derive(Debug)]
pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` (mode 0700) on `dir`, an existing directory.
    pub fn mount(dir: &Path, bytes: u64) -> std::io::Result<SmallDisk> {
        let target = CString::new(dir.as_os_str().as_bytes())?;
        let options = CString::new(format!("size={bytes},mode=0700"))?;
        // SAFETY: every pointer is a NUL-terminated string that outlives the call; mount(2)
        // only reads them. Exercised by the full-disk tests of the engine and the mount
        // whenever they run as root (CI does).
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                options.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(SmallDisk {
            dir: dir.to_path_buf(),
        })
    }

    /// For a test: the disk, or `None` where this process may not mount (not root), said on
    /// stderr; when `CI` is set that fails the run instead, so nothing skips there.
    pub fn for_test(dir: &Path, bytes: u64) -> Option<SmallDisk> {
        match SmallDisk::mount(dir, bytes) {
            Ok(disk) => Some(disk),
            Err(why) if std::env::var_os("CI").is_some() => {
                panic!("CI is set but a tmpfs cannot be mounted for a full-disk test: {why}")
            }
            Err(why) => {
                eprintln!("skipped: cannot mount a tmpfs: {why}");
                None
            }
        }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.dir.as_os_str().as_bytes()) {
            // SAFETY: `target` is a NUL-terminated path that outlives the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}
