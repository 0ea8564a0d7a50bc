//! Deletions of the store's files, held back while a backup copies them (`Db::live_files`).
//!
//! Invariants:
//! - every deletion of a table, WAL, blob file or MANIFEST the store stops needing goes through
//!   [`Deletions::remove`]; files that were never named (a failed flush's output, a WAL whose
//!   creation failed) are removed directly, since no backup can have listed them;
//! - while a [`DeletionHold`] lives, such a deletion only records the path; the last hold to end
//!   removes what was recorded, so a file a backup listed stays whole until its copy is done;
//! - the check and the removal happen under one lock, so no deletion that began before a hold
//!   completes after the hold's owner listed the files; the deferred removals run after the
//!   lock is let go, since no later hold can list a file that was obsolete before it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::FileSystem;
use crate::error::Result;

/// The store's deletions of files it no longer needs.
pub(crate) struct Deletions {
    fs: Arc<dyn FileSystem>,
    state: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    holds: usize,
    deferred: Vec<PathBuf>,
}

impl std::fmt::Debug for Deletions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("Deletions")
            .field("holds", &st.holds)
            .field("deferred", &st.deferred.len())
            .finish()
    }
}

impl Deletions {
    pub(crate) fn new(fs: Arc<dyn FileSystem>) -> Arc<Deletions> {
        Arc::new(Deletions {
            fs,
            state: Mutex::new(Held::default()),
        })
    }

    /// Removes `path` now, or once the last hold ends. `Ok` means it is gone or will be.
    pub(crate) fn remove(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        if st.holds > 0 {
            st.deferred.push(path.to_path_buf());
            return Ok(());
        }
        self.fs.remove(path)
    }

    /// Holds every deletion back until the guard is dropped.
    pub(crate) fn hold(self: &Arc<Self>) -> DeletionHold {
        self.state.lock().holds += 1;
        DeletionHold {
            deletions: self.clone(),
        }
    }

    /// How many deletions wait for a hold to end.
    #[cfg(test)]
    pub(crate) fn deferred(&self) -> usize {
        self.state.lock().deferred.len()
    }
}

/// Deletions wait while this lives (`Deletions::hold`).
pub(crate) struct DeletionHold {
    deletions: Arc<Deletions>,
}

impl std::fmt::Debug for DeletionHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeletionHold")
    }
}

impl Drop for DeletionHold {
    fn drop(&mut self) {
        let doomed = {
            let mut st = self.deletions.state.lock();
            st.holds -= 1;
            match st.holds {
                0 => std::mem::take(&mut st.deferred),
                _ => Vec::new(),
            }
        };
        // Outside the lock, which the write path takes to delete a WAL: thousands of unlinks
        // after a long backup must not stall writes. A hold taken meanwhile lists none of
        // these: each was obsolete before it.
        // Failing to remove leaves an orphan that the next open deletes, as for any deletion.
        for path in doomed {
            let _ = self.deletions.fs.remove(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::StdFileSystem;

    #[test]
    fn a_held_deletion_happens_when_the_last_hold_ends() {
        let dir = crate::test_dir::tempdir();
        let path = dir.path().join("000001.sst");
        std::fs::write(&path, b"x").unwrap();
        let d = Deletions::new(Arc::new(StdFileSystem));
        let first = d.hold();
        let second = d.hold();
        d.remove(&path).unwrap();
        assert!(path.exists());
        assert_eq!(d.deferred(), 1);
        drop(first);
        assert!(path.exists(), "a hold is still alive");
        drop(second);
        assert!(!path.exists());
        assert_eq!(d.deferred(), 0);
        std::fs::write(&path, b"x").unwrap();
        d.remove(&path).unwrap();
        assert!(!path.exists(), "no hold: removed at once");
    }
}
