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
//!   lock is let go, since no later hold can list a file that was obsolete before it;
//! - holds are revoked, and what they kept removed at once, when more than
//!   `Options::max_held_deletion_bytes` wait or the disk fills: a revoked hold keeps nothing
//!   and says why, so its backup fails (a file it had not opened yet is gone) instead of
//!   filling the disk; a file it has open reads on whole, so no backup is ever wrong.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::FileSystem;
use crate::error::Result;

/// The store's deletions of files it no longer needs.
pub(crate) struct Deletions {
    fs: Arc<dyn FileSystem>,
    /// Bytes that may wait for holds to end before they are revoked; 0: no bound.
    limit: u64,
    state: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// Holds of the current generation: those that still keep files.
    holds: usize,
    deferred: Vec<PathBuf>,
    deferred_bytes: u64,
    /// Raised by each revocation: a hold of an older one keeps nothing any more.
    generation: u64,
    /// Why each of the last revocations happened, by the generation it ended (a few kept: a
    /// hold asks soon after, and revocations are rare).
    revoked_because: VecDeque<(u64, String)>,
}

impl Held {
    /// Every deferred deletion, taken to be done now.
    fn take_deferred(&mut self) -> Vec<PathBuf> {
        self.deferred_bytes = 0;
        std::mem::take(&mut self.deferred)
    }
}

/// What waits for holds to end (`Db::properties`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Deferred {
    pub files: usize,
    pub bytes: u64,
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
    /// Deletions in `fs`; holds are revoked once more than `limit` bytes wait (0: never).
    pub(crate) fn new(fs: Arc<dyn FileSystem>, limit: u64) -> Arc<Deletions> {
        Arc::new(Deletions {
            fs,
            limit,
            state: Mutex::new(Held::default()),
        })
    }

    /// Removes `path` now, or once the last hold ends. `Ok` means it is gone or will be.
    pub(crate) fn remove(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        if st.holds == 0 {
            return self.fs.remove(path);
        }
        // A file that cannot be measured still waits; it counts for nothing.
        let bytes = self.fs.open_random(path).and_then(|f| f.len()).unwrap_or(0);
        st.deferred.push(path.to_path_buf());
        st.deferred_bytes += bytes;
        if self.limit > 0 && st.deferred_bytes > self.limit {
            let why = format!(
                "{} bytes of deleted files waited for it, past the store's limit of {} \
                 (max_held_deletion_bytes)",
                st.deferred_bytes, self.limit
            );
            let doomed = revoke_locked(&mut st, why);
            drop(st);
            // Not on this caller's thread, which may hold the WAL or the version lock: the
            // unlinks of a long backup's worth of files must not stall writes. Where no thread
            // can start (WASI), here after all.
            let fs = self.fs.clone();
            let doomed = std::sync::Arc::new(Mutex::new(doomed));
            let handed = doomed.clone();
            let started = std::thread::Builder::new()
                .name("strata-deletions".into())
                .spawn(move || remove_all(fs.as_ref(), std::mem::take(&mut *handed.lock())));
            if started.is_err() {
                remove_all(self.fs.as_ref(), std::mem::take(&mut *doomed.lock()));
            }
        }
        Ok(())
    }

    /// Holds every deletion back until the guard is dropped or the hold is revoked.
    pub(crate) fn hold(self: &Arc<Self>) -> DeletionHold {
        let mut st = self.state.lock();
        st.holds += 1;
        DeletionHold {
            deletions: self.clone(),
            generation: st.generation,
        }
    }

    /// Ends every hold now and removes what they kept (`why` says what needs the room, such
    /// as a full disk): a backup holding them fails rather than fill the disk. Whether any
    /// hold was revoked.
    pub(crate) fn revoke(&self, why: &str) -> bool {
        let mut st = self.state.lock();
        // Holds that keep nothing free nothing: they stay.
        if st.holds == 0 || st.deferred.is_empty() {
            return false;
        }
        let doomed = revoke_locked(&mut st, why.to_string());
        drop(st);
        remove_all(self.fs.as_ref(), doomed);
        true
    }

    /// What waits for holds to end.
    pub(crate) fn deferred(&self) -> Deferred {
        let st = self.state.lock();
        Deferred {
            files: st.deferred.len(),
            bytes: st.deferred_bytes,
        }
    }
}

/// Outside the lock, which the write path takes to delete a WAL: thousands of unlinks after a
/// long backup must not stall writes. A hold taken meanwhile lists none of these: each was
/// obsolete before it. Failing to remove leaves an orphan that the next open deletes, as for
/// any deletion.
fn remove_all(fs: &dyn FileSystem, doomed: Vec<PathBuf>) {
    for path in doomed {
        let _ = fs.remove(&path);
    }
}

/// Revocation reasons kept for the holds they ended.
const REASONS_KEPT: usize = 16;

/// Ends the current generation of holds; what they kept, to remove outside the lock.
fn revoke_locked(st: &mut Held, why: String) -> Vec<PathBuf> {
    st.holds = 0;
    if st.revoked_because.len() == REASONS_KEPT {
        st.revoked_because.pop_front();
    }
    st.revoked_because.push_back((st.generation, why));
    st.generation += 1;
    st.take_deferred()
}

/// Deletions wait while this lives (`Deletions::hold`), unless it is revoked.
pub(crate) struct DeletionHold {
    deletions: Arc<Deletions>,
    generation: u64,
}

impl DeletionHold {
    /// Why this hold no longer keeps files, once it was revoked.
    pub(crate) fn revoked(&self) -> Option<String> {
        let st = self.deletions.state.lock();
        match st.generation == self.generation {
            true => None,
            false => Some(
                st.revoked_because
                    .iter()
                    .find(|(g, _)| *g == self.generation)
                    .map_or_else(|| "revoked long ago".to_string(), |(_, why)| why.clone()),
            ),
        }
    }
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
            if st.generation != self.generation {
                // Revoked: it was let go of then.
                return;
            }
            st.holds -= 1;
            match st.holds {
                0 => st.take_deferred(),
                _ => Vec::new(),
            }
        };
        remove_all(self.deletions.fs.as_ref(), doomed);
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
        let d = Deletions::new(Arc::new(StdFileSystem), 0);
        let first = d.hold();
        let second = d.hold();
        d.remove(&path).unwrap();
        assert!(path.exists());
        assert_eq!(d.deferred(), Deferred { files: 1, bytes: 1 });
        drop(first);
        assert!(path.exists(), "a hold is still alive");
        drop(second);
        assert!(!path.exists());
        assert_eq!(d.deferred(), Deferred::default());
        std::fs::write(&path, b"x").unwrap();
        d.remove(&path).unwrap();
        assert!(!path.exists(), "no hold: removed at once");
    }

    #[test]
    fn a_revoked_hold_keeps_nothing_and_a_later_one_keeps_again() {
        let dir = crate::test_dir::tempdir();
        let file = |n: u32| {
            let path = dir.path().join(format!("{n:06}.sst"));
            std::fs::write(&path, [7u8; 100]).unwrap();
            path
        };
        let d = Deletions::new(Arc::new(StdFileSystem), 250);
        let old = d.hold();
        let (a, b, c) = (file(1), file(2), file(3));
        d.remove(&a).unwrap();
        d.remove(&b).unwrap();
        assert!(a.exists() && b.exists() && old.revoked().is_none());
        // Past the limit: every held file goes (from a thread of its own), and the hold says
        // why.
        d.remove(&c).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while a.exists() || b.exists() || c.exists() {
            assert!(std::time::Instant::now() < deadline, "held files stayed");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(old.revoked().unwrap().contains("300 bytes"));
        assert_eq!(d.deferred(), Deferred::default());
        // A hold taken since keeps again; the revoked one ending changes nothing. Revoking
        // while it keeps nothing frees nothing: it stays.
        let new = d.hold();
        assert!(!d.revoke("the disk is full"));
        assert!(new.revoked().is_none());
        let e = file(4);
        d.remove(&e).unwrap();
        drop(old);
        assert!(e.exists() && new.revoked().is_none());
        assert!(d.revoke("the disk is full"));
        assert!(!e.exists());
        assert_eq!(new.revoked().as_deref(), Some("the disk is full"));
        // Each hold keeps the reason that ended it, not a later one's.
        assert!(old_reason_is_kept(&d));
        assert!(!d.revoke("nothing held"));
        drop(new);
        let f = file(5);
        d.remove(&f).unwrap();
        assert!(!f.exists(), "no hold: removed at once");
    }

    /// A hold revoked for one reason says that one after a later revocation for another.
    fn old_reason_is_kept(d: &Arc<Deletions>) -> bool {
        let dir = crate::test_dir::tempdir();
        let file = |n: u32| {
            let path = dir.path().join(format!("{n:06}.log"));
            std::fs::write(&path, b"x").unwrap();
            path
        };
        let first = d.hold();
        d.remove(&file(1)).unwrap();
        d.revoke("first");
        let second = d.hold();
        d.remove(&file(2)).unwrap();
        d.revoke("second");
        first.revoked().as_deref() == Some("first") && second.revoked().as_deref() == Some("second")
    }
}
