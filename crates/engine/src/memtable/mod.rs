//! The memtable: recent writes in a concurrent skiplist, until a flush turns them into an L0 table.

mod skiplist;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::filter::{MemtableBloom, key_hash};
use crate::iter::InternalIterator;
use crate::key::{self, KIND_FOR_SEEK, SequenceNumber, ValueKind};
use skiplist::{Node, SkipList};

/// What a memtable (or table) knows about a key at a snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup<T> {
    Found(T),
    Deleted,
    NotFound,
}

pub(crate) struct MemTable {
    list: SkipList,
    /// Increasing per column family: tells `flush` which memtables are older than the one it waits for.
    pub(crate) id: u64,
    entries: AtomicU64,
    bloom: Option<MemtableBloom>,
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
        }
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

    /// The newest entry for `user_key` visible at `seq`.
    pub(crate) fn get(&self, user_key: &[u8], seq: SequenceNumber) -> Lookup<&[u8]> {
        let mut target = [0u8; 64];
        let node = if user_key.len() + 8 <= target.len() {
            let n = user_key.len();
            target[..n].copy_from_slice(user_key);
            target[n..n + 8].copy_from_slice(&key::pack_trailer(seq, KIND_FOR_SEEK).to_le_bytes());
            self.list.seek_ge(&target[..n + 8])
        } else {
            self.list.seek_ge(&key::lookup_key(user_key, seq))
        };
        if node.is_null() {
            return Lookup::NotFound;
        }
        let found = self.list.node_key(node);
        if key::user_key(found) != user_key {
            return Lookup::NotFound;
        }
        match ValueKind::from_u8(key::kind_byte(found)) {
            Some(ValueKind::Put) => Lookup::Found(self.list.node_value(node)),
            _ => Lookup::Deleted,
        }
    }

    /// Bytes held: the skiplist's arena plus the filter, which counts toward `write_buffer_size`.
    pub(crate) fn memory_usage(&self) -> usize {
        self.list.memory_usage() + self.bloom.as_ref().map_or(0, |b| b.bytes())
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
        assert_eq!(m.get(b"a", 1), Lookup::Found(&b"a1"[..]));
        assert_eq!(m.get(b"a", 2), Lookup::Found(&b"a2"[..]));
        assert_eq!(m.get(b"a", 3), Lookup::Deleted);
        assert_eq!(m.get(b"a", 0), Lookup::NotFound);
        assert_eq!(m.get(b"b", 9), Lookup::NotFound);
        assert_eq!(m.get(&[b'x'; 100], 9), Lookup::Found(&b"long key"[..]));
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
                m.get(&i.to_be_bytes(), u64::MAX >> 8),
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
