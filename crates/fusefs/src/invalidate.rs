//! Telling the kernel that keys changed under the mount: another face in the same process wrote
//! or deleted them, so the kernel's cached entries and attributes for them are dropped at once.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, OnceLock};

use fuser::{INodeNo, Notifier};
use parking_lot::Mutex;

use crate::inodes::InodeTable;
use crate::path;

/// Where `pages_changed` sends (inode, first stale byte): to the thread that tells the kernel.
type PageRanges = Arc<OnceLock<Mutex<Sender<(u64, u64)>>>>;

/// Cheap to clone; calls before the filesystem is mounted do nothing.
#[derive(Clone)]
pub struct Invalidator {
    inodes: Arc<Mutex<InodeTable>>,
    notifier: Arc<OnceLock<Notifier>>,
    /// Page ranges to drop, sent by a thread of their own (`pages_changed`).
    pages: PageRanges,
}

impl std::fmt::Debug for Invalidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invalidator")
            .field("mounted", &self.notifier.get().is_some())
            .finish()
    }
}

impl Invalidator {
    pub(crate) fn new(inodes: Arc<Mutex<InodeTable>>) -> Invalidator {
        Invalidator {
            inodes,
            notifier: Arc::new(OnceLock::new()),
            pages: Arc::new(OnceLock::new()),
        }
    }

    pub(crate) fn attach(&self, notifier: Notifier) {
        let _ = self.notifier.set(notifier);
    }

    /// Key `key` of the mounted column family was written or deleted: the kernel forgets what
    /// it cached of it and of the directories it implies.
    pub fn key_changed(&self, key: &[u8]) {
        let Some(n) = self.notifier.get() else { return };
        let targets = {
            let mut inodes = self.inodes.lock();
            if let Some(ino) = inodes.peek(key) {
                inodes.changed(ino);
            }
            let mut t = Vec::new();
            collect_path(&inodes, key, &mut t);
            t
        };
        send(n, &targets);
    }

    /// The mount wrote inode `ino` from byte `from` on without the kernel's page cache (a
    /// write-only or appending descriptor): the kernel drops the pages it cached there, and
    /// keeps the rest, so appending to a large file does not cost its readers their cache. Sent
    /// from a thread of its own: a request being answered (a read that flushed pending writes)
    /// may hold the very pages the kernel must drop.
    pub(crate) fn pages_changed(&self, ino: u64, from: u64) {
        let Some(n) = self.notifier.get() else { return };
        let sender = self.pages.get_or_init(|| {
            let (tx, rx) = channel::<(u64, u64)>();
            let n = n.clone();
            std::thread::spawn(move || {
                for (ino, from) in rx {
                    // ENOENT only says the kernel had nothing cached.
                    let _ = n.inval_inode(INodeNo(ino), from as i64, 0);
                }
            });
            Mutex::new(tx)
        });
        let _ = sender.lock().send((ino, from));
    }

    /// Anything may have changed (a replica caught up with its writer, and which keys moved is
    /// not known): the kernel forgets every entry, attribute and page it cached, and no open
    /// keeps the pages it had. The work is one notice per inode the kernel holds.
    pub fn everything_changed(&self) {
        let Some(n) = self.notifier.get() else { return };
        let targets = {
            let mut inodes = self.inodes.lock();
            let all = inodes.all();
            let mut t = Vec::with_capacity(all.len() * 2);
            for (key, ino) in all {
                inodes.changed(ino);
                t.push(Target::Inode(ino));
                if !key.is_empty() {
                    let (parent, name) = path::split_parent(&key);
                    if let Some(p) = inodes.peek(parent) {
                        t.push(Target::Entry(p, name.to_vec()));
                    }
                }
            }
            t
        };
        send(n, &targets);
    }

    /// Every key in `[start, end)` was deleted.
    pub fn range_deleted(&self, start: &[u8], end: &[u8]) {
        let Some(n) = self.notifier.get() else { return };
        let targets = {
            let inodes = self.inodes.lock();
            let mut t = Vec::new();
            for (key, _) in inodes.range(start, end) {
                collect_path(&inodes, &key, &mut t);
            }
            // Directories only the deleted keys implied.
            collect_path(&inodes, start.strip_suffix(b"/").unwrap_or(start), &mut t);
            t
        };
        send(n, &targets);
    }
}

/// What to drop for `key`: the entry of `key` and of each of its ancestors in their parents
/// (when the kernel holds the parent), and the attributes and pages of `key` itself.
fn collect_path(inodes: &InodeTable, key: &[u8], out: &mut Vec<Target>) {
    if let Some(ino) = inodes.peek(key) {
        out.push(Target::Inode(ino));
    }
    let mut k = key;
    while !k.is_empty() {
        let (parent, name) = path::split_parent(k);
        if let Some(p) = inodes.peek(parent) {
            out.push(Target::Entry(p, name.to_vec()));
        }
        k = parent;
    }
}

enum Target {
    Inode(u64),
    Entry(u64, Vec<u8>),
}

fn send(n: &Notifier, targets: &[Target]) {
    for t in targets {
        // ENOENT only says the kernel had nothing cached.
        let _ = match t {
            Target::Inode(ino) => n.inval_inode(INodeNo(*ino), 0, 0),
            Target::Entry(parent, name) => n.inval_entry(INodeNo(*parent), OsStr::from_bytes(name)),
        };
    }
}

/// Tells a mount over a replica that the store moved on (`EventListener::on_caught_up`): made
/// before the store opens, attached to the mount once it is up. The kernel is told from a
/// thread of its own, not the replica's: a pass costs a notice per inode the kernel holds, and
/// a notice may wait on a request of this very mount, while the replica's next round must not.
/// Rounds that end while a pass waits share it; one that ends during a pass gets another.
/// `shows` says whether the passes got as far as a sequence, so a reader that waited for it
/// through another door (REST's `min_seq`) can wait for the mount to show it too.
#[derive(Debug, Default)]
pub struct ReplicaInvalidation {
    invalidator: OnceLock<Invalidator>,
    /// One pass asked for at most: a full channel means one is already waiting.
    passes: OnceLock<SyncSender<()>>,
    progress: Arc<PassProgress>,
}

/// The newest sequence a round moved the store to, and the newest every cache was dropped for.
#[derive(Debug, Default)]
struct PassProgress {
    asked: AtomicU64,
    done: AtomicU64,
}

impl ReplicaInvalidation {
    /// Tells the mount's kernel through `invalidator` from now on. Call it before the mount
    /// serves, with `shown`, the sequence the store shows then: nothing the kernel caches can
    /// be older.
    pub fn attach(&self, invalidator: Invalidator, shown: u64) {
        self.progress.done.fetch_max(shown, Ordering::AcqRel);
        let _ = self.invalidator.set(invalidator);
    }

    /// Whether the mount shows sequence `seq`: the store showed it when the mount was
    /// attached, or a pass that began after a round reached it has dropped what the kernel
    /// cached from before. A round publishes its sequence a moment before it tells this
    /// listener: meanwhile the answer is no.
    pub fn shows(&self, seq: u64) -> bool {
        self.progress.done.load(Ordering::Acquire) >= seq
    }
}

impl strata_engine::EventListener for ReplicaInvalidation {
    fn on_caught_up(&self, info: &strata_engine::CaughtUp) {
        let progress = &self.progress;
        progress.asked.fetch_max(info.to, Ordering::AcqRel);
        let Some(i) = self.invalidator.get() else {
            progress.done.fetch_max(info.to, Ordering::AcqRel);
            return;
        };
        let passes = self.passes.get_or_init(|| {
            let (tx, rx) = sync_channel::<()>(1);
            let (i, progress) = (i.clone(), progress.clone());
            // Ends when the listener goes, with the sender.
            std::thread::spawn(move || {
                for () in rx {
                    // Read before the pass: a round that ends during it asks for another.
                    let through = progress.asked.load(Ordering::Acquire);
                    // A pass that panicked must not end every later one, nor hold readers
                    // waiting on it (the next round's pass drops the caches again).
                    let pass = std::panic::AssertUnwindSafe(|| i.everything_changed());
                    let _ = std::panic::catch_unwind(pass);
                    progress.done.fetch_max(through, Ordering::AcqRel);
                }
            });
            tx
        });
        let _ = passes.try_send(());
    }
}

#[cfg(test)]
mod tests {
    use strata_engine::{CaughtUp, EventListener};

    use super::*;

    #[test]
    fn a_sequence_shows_once_the_pass_for_its_round_is_done() {
        let r = ReplicaInvalidation::default();
        // Before the mount is up nothing is cached: every round shows at once.
        r.on_caught_up(&CaughtUp { from: 0, to: 5 });
        assert!(r.shows(5));
        let inodes = Arc::new(Mutex::new(InodeTable::default()));
        r.attach(Invalidator::new(inodes), 7);
        // What the store showed when the mount came: nothing older is cached.
        assert!(r.shows(7));
        // Published by a round that has not told the listener yet: not shown.
        assert!(!r.shows(9));
        r.on_caught_up(&CaughtUp { from: 7, to: 9 });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !r.shows(9) {
            assert!(std::time::Instant::now() < deadline, "the pass never ended");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(r.progress.done.load(Ordering::Acquire), 9);
    }
}
