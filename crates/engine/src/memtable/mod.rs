//! The memtable: recent writes in a concurrent skiplist, until a flush turns them into an L0 table.

mod skiplist;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::bloom::{MemtableBloom, key_hash};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, KIND_FOR_SEEK, Lookup, SequenceNumber, ValueKind};
use crate::range_del::{FragmentedTombstones, RangeTombstone};
pub(crate) use skiplist::Finger;
use skiplist::{Node, SkipList};

pub(crate) struct MemTable {
    list: SkipList,
    /// Increasing per column family: tells `flush` which memtables are older than the one it waits for.
    pub(crate) id: u64,
    entries: AtomicU64,
    bloom: Option<MemtableBloom>,
    /// Range tombstones, kept apart from point entries (as RocksDB's separate range-del table).
    range_dels: Mutex<Vec<RangeTombstone>>,
    /// `range_dels.len()`, readable without the lock: most memtables have none.
    range_del_count: AtomicUsize,
    range_del_bytes: AtomicUsize,
    /// The fragmented form readers use, built on first read after a tombstone is added.
    fragmented: RwLock<Option<Arc<FragmentedTombstones>>>,
    /// Bytes of blob records (by file) that this memtable's entries borrow: logged by the flush
    /// that persists them (the blob store counted them when they were added).
    borrowed: Mutex<std::collections::BTreeMap<u64, u64>>,
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("id", &self.id)
            .field("entries", &self.num_entries())
            .field("bytes", &self.memory_usage())
            .finish()
    }
}

impl MemTable {
    /// An empty memtable numbered `id`, sized for `write_buffer_size`,
    /// with a whole-key Bloom filter of `bloom_ratio * write_buffer_size` bytes when the ratio is
    /// positive.
    pub(crate) fn new(id: u64, write_buffer_size: usize, bloom_ratio: f64) -> Self {
        MemTable {
            list: SkipList::new(write_buffer_size),
            id,
            entries: AtomicU64::new(0),
            bloom: (bloom_ratio > 0.0)
                .then(|| MemtableBloom::for_memtable(write_buffer_size, bloom_ratio)),
            range_dels: Mutex::new(Vec::new()),
            range_del_count: AtomicUsize::new(0),
            range_del_bytes: AtomicUsize::new(0),
            fragmented: RwLock::new(None),
            borrowed: Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    /// Notes `bytes` of blob file `file` borrowed by an entry added.
    pub(crate) fn note_borrowed(&self, file: u64, bytes: u64) {
        *self.borrowed.lock().entry(file).or_default() += bytes;
    }

    /// The bytes borrowed by this memtable's entries, by blob file.
    pub(crate) fn borrowed(&self) -> Vec<(u64, u64)> {
        self.borrowed.lock().iter().map(|(n, b)| (*n, *b)).collect()
    }

    pub(crate) fn add_range_tombstone(&self, t: RangeTombstone) {
        let bytes = t.start.len() + t.end.len() + 32;
        let mut all = self.range_dels.lock();
        all.push(t);
        // Under the list's lock, so that a reader building the fragmented form after this sees
        // the new tombstone or finds the cache cleared.
        *self.fragmented.write() = None;
        self.range_del_count.store(all.len(), Ordering::Release);
        self.range_del_bytes.fetch_add(bytes, Ordering::Relaxed);
        drop(all);
        self.entries.fetch_add(1, Ordering::Relaxed);
    }

    /// The range tombstones in fragmented form; `None` when there are none.
    pub(crate) fn range_tombstones(&self) -> Option<Arc<FragmentedTombstones>> {
        if self.range_del_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        if let Some(f) = self.fragmented.read().as_ref() {
            return Some(f.clone());
        }
        let all = self.range_dels.lock();
        let mut cached = self.fragmented.write();
        let f = cached
            .get_or_insert_with(|| Arc::new(FragmentedTombstones::new(all.clone())))
            .clone();
        Some(f)
    }

    /// Range tombstones added.
    pub(crate) fn num_range_tombstones(&self) -> usize {
        self.range_del_count.load(Ordering::Acquire)
    }

    /// The range tombstones as written (flush keeps them all).
    pub(crate) fn range_tombstones_as_written(&self) -> Vec<RangeTombstone> {
        self.range_dels.lock().clone()
    }

    /// Whether the memtable keeps a filter (`may_contain` needs the key's hash).
    #[inline]
    pub(crate) fn has_filter(&self) -> bool {
        self.bloom.is_some()
    }

    /// What the filter says of the key with `hash`; `None` when the memtable has no filter.
    #[inline]
    pub(crate) fn may_contain(&self, hash: u64) -> Option<bool> {
        self.bloom.as_ref().map(|b| b.may_contain(hash))
    }

    pub(crate) fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        if let Some(b) = &self.bloom {
            b.add(key_hash(user_key));
        }
        self.list
            .insert(user_key, key::pack_trailer(seq, kind as u8), value);
        self.entries.fetch_add(1, Ordering::Relaxed);
    }

    /// The newest entry for `user_key` visible at `seq`; an entry older than `covered_below` (the
    /// newest range tombstone covering the key) reads as deleted.
    pub(crate) fn get(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        covered_below: SequenceNumber,
    ) -> Lookup<&[u8]> {
        self.get_by(user_key, seq, covered_below, |target| {
            self.list.seek_ge(target)
        })
    }

    /// [`MemTable::get`] for the next of a run of ascending keys: the search starts where the
    /// one before ended (`finger`, from [`MemTable::finger`]).
    pub(crate) fn get_after<'a>(
        &'a self,
        finger: &mut Finger<'a>,
        user_key: &[u8],
        seq: SequenceNumber,
        covered_below: SequenceNumber,
    ) -> Lookup<&'a [u8]> {
        self.get_by(user_key, seq, covered_below, |target| {
            self.list.seek_ge_after(finger, target)
        })
    }

    /// A finger for a run of ascending [`MemTable::get_after`]s.
    pub(crate) fn finger(&self) -> Finger<'_> {
        self.list.finger()
    }

    /// The entry of `user_key` at `seq`, found by `seek` (the first node at or after a lookup
    /// key).
    fn get_by(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        covered_below: SequenceNumber,
        seek: impl FnOnce(&[u8]) -> *const Node,
    ) -> Lookup<&[u8]> {
        let mut target = [0u8; 64];
        let node = if user_key.len() + 8 <= target.len() {
            let n = user_key.len();
            target[..n].copy_from_slice(user_key);
            target[n..n + 8].copy_from_slice(&key::pack_trailer(seq, KIND_FOR_SEEK).to_le_bytes());
            seek(&target[..n + 8])
        } else {
            seek(&key::lookup_key(user_key, seq))
        };
        if node.is_null() {
            return Lookup::NotFound;
        }
        let found = self.list.node_key(node);
        if key::user_key(found) != user_key {
            return Lookup::NotFound;
        }
        if key::sequence(found) < covered_below {
            return Lookup::Deleted;
        }
        match ValueKind::from_u8(key::kind_byte(found)) {
            Some(ValueKind::Put) => Lookup::Found(self.list.node_value(node)),
            Some(ValueKind::BlobIndex) => Lookup::Indexed(self.list.node_value(node)),
            _ => Lookup::Deleted,
        }
    }

    /// Bytes held: the skiplist's arena, the range tombstones, and the filter, which counts
    /// toward `write_buffer_size`.
    pub(crate) fn memory_usage(&self) -> usize {
        self.list.memory_usage()
            + self.range_del_bytes.load(Ordering::Relaxed)
            + self.bloom.as_ref().map_or(0, |b| b.bytes())
    }

    pub(crate) fn num_entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.num_entries() == 0
    }

    pub(crate) fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            mem: self.clone(),
            node: std::ptr::null(),
        }
    }
}

/// Iterates a memtable; holds it alive.
pub(crate) struct MemTableIter {
    mem: Arc<MemTable>,
    node: *const Node,
}

// SAFETY: the node pointer refers into `mem`'s skiplist, which this iterator keeps alive and which is
// safe to read from any thread.
unsafe impl Send for MemTableIter {}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        !self.node.is_null()
    }
    fn seek_to_first(&mut self) {
        self.node = self.mem.list.first();
    }
    fn seek_to_last(&mut self) {
        self.node = self.mem.list.seek_lt(None);
    }
    fn seek(&mut self, target: &[u8]) {
        self.node = self.mem.list.seek_ge(target);
    }
    fn next(&mut self) {
        self.node = self.mem.list.next_node(self.node);
    }
    fn prev(&mut self) {
        let key = self.mem.list.node_key(self.node);
        self.node = self.mem.list.seek_lt(Some(key));
    }
    fn key(&self) -> &[u8] {
        self.mem.list.node_key(self.node)
    }
    fn value(&self) -> &[u8] {
        self.mem.list.node_value(self.node)
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::testutil::{collect_backward, collect_forward};

    #[test]
    fn get_respects_snapshots_and_deletes() {
        let m = MemTable::new(1, 1 << 20, 0.0);
        m.add(1, ValueKind::Put, b"a", b"a1");
        m.add(2, ValueKind::Put, b"a", b"a2");
        m.add(3, ValueKind::Delete, b"a", b"");
        m.add(4, ValueKind::Put, &[b'x'; 100], b"long key");
        assert_eq!(m.get(b"a", 1, 0), Lookup::Found(&b"a1"[..]));
        assert_eq!(m.get(b"a", 2, 0), Lookup::Found(&b"a2"[..]));
        assert_eq!(m.get(b"a", 3, 0), Lookup::Deleted);
        assert_eq!(m.get(b"a", 0, 0), Lookup::NotFound);
        assert_eq!(m.get(b"b", 9, 0), Lookup::NotFound);
        assert_eq!(m.get(&[b'x'; 100], 9, 0), Lookup::Found(&b"long key"[..]));
        // A covering tombstone newer than the entry found hides it; an older one does not.
        assert_eq!(m.get(b"a", 2, 3), Lookup::Deleted);
        assert_eq!(m.get(b"a", 2, 2), Lookup::Found(&b"a2"[..]));
        assert_eq!(m.num_entries(), 4);
    }

    #[test]
    fn the_filter_never_hides_a_key() {
        let m = MemTable::new(1, 1 << 20, 0.1);
        for i in 0..5000u32 {
            m.add(i as u64 + 1, ValueKind::Put, &i.to_be_bytes(), b"v");
        }
        for i in 0..5000u32 {
            assert_eq!(m.may_contain(key_hash(&i.to_be_bytes())), Some(true));
            assert_eq!(
                m.get(&i.to_be_bytes(), u64::MAX >> 8, 0),
                Lookup::Found(&b"v"[..])
            );
        }
        let rejected = (5000..105_000u32)
            .filter(|i| m.may_contain(key_hash(&i.to_be_bytes())) == Some(false))
            .count();
        assert!(
            rejected > 95_000,
            "the filter rules out most absent keys: {rejected}"
        );
        assert_eq!(MemTable::new(1, 1 << 20, 0.0).may_contain(1), None);
    }

    #[test]
    fn range_tombstones_are_kept_apart_and_refragmented() {
        let m = MemTable::new(1, 1 << 20, 0.0);
        assert!(m.range_tombstones().is_none());
        m.add(1, ValueKind::Put, b"c", b"v");
        m.add_range_tombstone(RangeTombstone::new(b"b", b"d", 2));
        let first = m.range_tombstones().unwrap();
        assert_eq!(first.max_covering_seq(b"c", 9), Some(2));
        assert!(
            Arc::ptr_eq(&first, &m.range_tombstones().unwrap()),
            "cached"
        );
        m.add_range_tombstone(RangeTombstone::new(b"a", b"z", 3));
        let second = m.range_tombstones().unwrap();
        assert_eq!(second.max_covering_seq(b"c", 9), Some(3));
        assert_eq!(second.max_covering_seq(b"c", 2), Some(2));
        assert_eq!(
            first.max_covering_seq(b"x", 9),
            None,
            "old readers keep their view"
        );
        assert_eq!(m.num_range_tombstones(), 2);
        assert_eq!(m.num_entries(), 3);
        // Point entries do not include the tombstones.
        assert_eq!(collect_forward(&mut Arc::new(m).iter()).len(), 1);
    }

    #[test]
    fn iterates_both_ways() {
        let m = Arc::new(MemTable::new(1, 1 << 20, 0.0));
        for i in 0..100u32 {
            m.add(
                i as u64 + 1,
                ValueKind::Put,
                &i.to_be_bytes(),
                &i.to_le_bytes(),
            );
        }
        let fwd = collect_forward(&mut m.iter());
        assert_eq!(fwd.len(), 100);
        assert_eq!(fwd, collect_backward(&mut m.iter()));
        let mut it = m.iter();
        it.seek_for_prev(&key::lookup_key(&50u32.to_be_bytes(), 0));
        assert_eq!(key::user_key(it.key()), 50u32.to_be_bytes());
        it.seek_for_prev(&key::internal_key(&50u32.to_be_bytes(), 99, 1));
        assert_eq!(key::user_key(it.key()), 49u32.to_be_bytes());
    }
}
