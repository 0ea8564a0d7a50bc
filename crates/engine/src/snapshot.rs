//! Snapshots: a sequence number that reads can be pinned to, registered while alive so that
//! compaction keeps the versions it can see. On a replica the writer's compactions do not know
//! the replica's snapshots, so a snapshot there also holds the views it was taken in
//! (`db::read::PinnedViews`): the versions its sequence number is read against.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::SequenceNumber;

/// What a replica's snapshot holds besides its sequence: the views it reads against
/// (`db::read::PinnedViews`, kept opaque here so that this module does not depend on `db`).
pub(crate) type HeldViews = Arc<dyn std::any::Any + Send + Sync>;

/// The live snapshots' sequence numbers, with counts.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<SequenceNumber, usize>>,
}

impl SnapshotList {
    /// A snapshot at `seq`, read against `views` when given (a replica's).
    pub(crate) fn acquire(
        self: &Arc<Self>,
        seq: SequenceNumber,
        views: Option<HeldViews>,
    ) -> Snapshot {
        *self.live.lock().entry(seq).or_insert(0) += 1;
        Snapshot {
            inner: Arc::new(SnapshotInner {
                seq,
                list: self.clone(),
                views,
            }),
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.live.lock().values().sum()
    }

    /// The live snapshots' sequence numbers, ascending, without repeats.
    pub(crate) fn sequences(&self) -> Vec<SequenceNumber> {
        self.live.lock().keys().copied().collect()
    }

    pub(crate) fn oldest(&self) -> Option<SequenceNumber> {
        self.live.lock().keys().next().copied()
    }
}

#[derive(Debug)]
struct SnapshotInner {
    seq: SequenceNumber,
    list: Arc<SnapshotList>,
    views: Option<HeldViews>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        let mut live = self.list.live.lock();
        if let Some(n) = live.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                live.remove(&self.seq);
            }
        }
    }
}

/// A consistent point-in-time view. Reads given it in [`crate::ReadOptions::snapshot`] see the store
/// as it was when it was taken. Cheap to clone; released when the last clone drops.
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number of the last write the snapshot sees.
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.seq
    }

    /// The views a replica's snapshot reads against.
    pub(crate) fn views(&self) -> Option<&HeldViews> {
        self.inner.views.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_until_last_clone_drops() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(5, None);
        let b = list.acquire(5, None);
        let c = list.acquire(9, None);
        let a2 = a.clone();
        assert_eq!(list.count(), 3);
        assert_eq!(list.oldest(), Some(5));
        drop(a);
        drop(b);
        assert_eq!(list.oldest(), Some(5), "a clone still holds it");
        drop(a2);
        assert_eq!(list.oldest(), Some(9));
        drop(c);
        assert_eq!(list.count(), 0);
    }
}
