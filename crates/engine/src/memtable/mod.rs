//! The memtable: recent writes in a concurrent skiplist, until a flush turns them into an L0 table.

mod skiplist;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
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
    /// The WAL file that holds this memtable's writes.
    pub(crate) log_number: u64,
    entries: AtomicU64,
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("log_number", &self.log_number)
            .field("entries", &self.num_entries())
            .field("bytes", &self.memory_usage())
            .finish()
    }
}

impl MemTable {
    /// An empty memtable for the writes logged in WAL `log_number`, sized for `write_buffer_size`.
    pub(crate) fn new(log_number: u64, write_buffer_size: usize) -> Self {
        MemTable {
            list: SkipList::new(write_buffer_size),
            log_number,
            entries: AtomicU64::new(0),
        }
    }

    pub(crate) fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
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

    pub(crate) fn memory_usage(&self) -> usize {
        self.list.memory_usage()
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
        let m = MemTable::new(1, 1 << 20);
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
    fn iterates_both_ways() {
        let m = Arc::new(MemTable::new(1, 1 << 20));
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
