//! The block cache: uncompressed blocks keyed by (table file, offset), sharded by key hash so that
//! concurrent readers rarely meet on one lock; each shard is an LRU bounded by the bytes it charges.
//! Blocks are handed out as `Arc`s: a block a reader still holds stays alive after eviction.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::sst::Block;

/// (table file number, block offset).
pub(crate) type CacheKey = (u64, u64);

/// A multiply-xorshift hasher for the two-integer keys: SipHash would cost more than the lookup.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(29) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

fn hash_key(key: CacheKey) -> u64 {
    let mut h = KeyHasher::default();
    h.write_u64(key.0);
    h.write_u64(key.1);
    h.finish()
}

const NIL: u32 = 0; // slot 0 is the list sentinel

struct Slot {
    key: CacheKey,
    block: Option<Arc<Block>>,
    charge: usize,
    prev: u32,
    next: u32,
}

struct Shard {
    map: HashMap<CacheKey, u32, BuildHasherDefault<KeyHasher>>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    usage: usize,
    capacity: usize,
}

impl Shard {
    fn new(capacity: usize) -> Self {
        Shard {
            map: HashMap::default(),
            slots: vec![Slot {
                key: (0, 0),
                block: None,
                charge: 0,
                prev: NIL,
                next: NIL,
            }],
            free: Vec::new(),
            usage: 0,
            capacity,
        }
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.slots[i as usize].prev, self.slots[i as usize].next);
        self.slots[p as usize].next = n;
        self.slots[n as usize].prev = p;
    }

    /// Links `i` as most recently used (right after the sentinel).
    fn push_front(&mut self, i: u32) {
        let first = self.slots[NIL as usize].next;
        self.slots[i as usize].prev = NIL;
        self.slots[i as usize].next = first;
        self.slots[first as usize].prev = i;
        self.slots[NIL as usize].next = i;
    }

    fn lookup(&mut self, key: CacheKey) -> Option<Arc<Block>> {
        let i = *self.map.get(&key)?;
        self.unlink(i);
        self.push_front(i);
        self.slots[i as usize].block.clone()
    }

    fn remove_slot(&mut self, i: u32) {
        self.unlink(i);
        let slot = &mut self.slots[i as usize];
        self.usage -= slot.charge;
        slot.block = None;
        self.map.remove(&slot.key);
        self.free.push(i);
    }

    fn insert(&mut self, key: CacheKey, block: Arc<Block>) {
        let charge = block.size() + std::mem::size_of::<Slot>();
        if let Some(&i) = self.map.get(&key) {
            self.remove_slot(i);
        }
        if charge > self.capacity {
            return; // larger than the whole shard: caching it would only flush everything else
        }
        while self.usage + charge > self.capacity {
            let lru = self.slots[NIL as usize].prev;
            if lru == NIL {
                break;
            }
            self.remove_slot(lru);
        }
        let slot = Slot {
            key,
            block: Some(block),
            charge,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        self.map.insert(key, i);
        self.push_front(i);
        self.usage += charge;
    }
}

/// A sharded LRU cache of blocks.
pub(crate) struct BlockCache {
    shards: Box<[Mutex<Shard>]>,
    shard_shift: u32,
    capacity: usize,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage())
            .finish()
    }
}

impl BlockCache {
    /// A cache of `capacity` bytes over 2^`shard_bits` shards.
    pub(crate) fn new(capacity: usize, shard_bits: u32) -> Self {
        let n = 1usize << shard_bits;
        let per_shard = capacity.div_ceil(n);
        BlockCache {
            shards: (0..n).map(|_| Mutex::new(Shard::new(per_shard))).collect(),
            shard_shift: 64 - shard_bits,
            capacity,
        }
    }

    fn shard(&self, key: CacheKey) -> &Mutex<Shard> {
        let idx = if self.shards.len() == 1 {
            0
        } else {
            (hash_key(key) >> self.shard_shift) as usize
        };
        &self.shards[idx]
    }

    pub(crate) fn lookup(&self, key: CacheKey) -> Option<Arc<Block>> {
        self.shard(key).lock().lookup(key)
    }

    pub(crate) fn insert(&self, key: CacheKey, block: Arc<Block>) {
        self.shard(key).lock().insert(key, block)
    }

    /// Bytes charged by cached blocks.
    pub(crate) fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage).sum()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn block(size: usize) -> Arc<Block> {
        let mut data = vec![0u8; size.max(8)];
        let n = data.len();
        data[n - 4..].copy_from_slice(&1u32.to_le_bytes());
        Arc::new(Block::new(data, Path::new("t")).unwrap())
    }

    #[test]
    fn capacity_is_respected_and_lru_evicted() {
        let cache = BlockCache::new(10_000, 0);
        for i in 0..100u64 {
            cache.insert((1, i), block(1000));
            assert!(cache.usage() <= 10_000);
            // Keep block 0 hot: it must survive the churn.
            assert!(cache.lookup((1, 0)).is_some(), "hot block evicted at {i}");
        }
        assert!(cache.lookup((1, 1)).is_none());
        assert!(cache.lookup((1, 99)).is_some());
    }

    #[test]
    fn held_blocks_outlive_eviction() {
        let cache = BlockCache::new(4000, 2);
        cache.insert((7, 0), block(500));
        let held = cache.lookup((7, 0)).unwrap();
        for i in 1..100u64 {
            cache.insert((7, i * 4096), block(500));
        }
        assert_eq!(held.size(), 500);
        assert!(cache.usage() <= 4000);
        cache.insert((8, 0), block(100_000));
        assert!(
            cache.lookup((8, 0)).is_none(),
            "an oversized block is not cached"
        );
    }

    #[test]
    fn reinsert_replaces() {
        let cache = BlockCache::new(100_000, 1);
        cache.insert((1, 1), block(100));
        cache.insert((1, 1), block(200));
        assert_eq!(cache.lookup((1, 1)).unwrap().size(), 200);
        assert_eq!(cache.usage(), 200 + std::mem::size_of::<Slot>());
    }
}
