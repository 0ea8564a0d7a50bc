//! The block cache: uncompressed data and index blocks and filter blocks, keyed by (table file,
//! offset) and sharded by key hash so that concurrent readers rarely meet on one lock. Each shard
//! is bounded by the bytes it charges and evicts by LRU (with a high-priority pool) or by CLOCK.
//!
//! Entries are handed out as `Arc`s: the handle is the reference count. A reader holding one keeps
//! the block alive, and the shard never evicts an entry whose count shows an outside holder (it is
//! "pinned"), so a block in use also stays findable by the next reader. Shards free what they evict
//! only after releasing their lock.

mod clock;
mod lru;
mod slots;

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::block::Block;
use crate::options::CacheKind;

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

type KeyMap = std::collections::HashMap<CacheKey, u32, BuildHasherDefault<KeyHasher>>;

fn hash_key(key: CacheKey) -> u64 {
    let mut h = KeyHasher::default();
    h.write_u64(key.0);
    h.write_u64(key.1);
    h.finish()
}

/// Where an entry starts: index and filter blocks are costlier to lose than data blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    High,
    Low,
}

/// What the cache holds.
#[derive(Clone)]
pub(crate) enum CachedBlock {
    /// A data or index block.
    Block(Arc<Block>),
    /// A table's filter block.
    Filter(Arc<Vec<u8>>),
    /// A value read from a blob file (keyed by blob file number and record offset: file numbers
    /// are shared by tables and blob files, so the keys never collide).
    Blob(Arc<Vec<u8>>),
}

impl CachedBlock {
    /// Memory the entry keeps alive.
    fn size(&self) -> usize {
        match self {
            CachedBlock::Block(b) => b.memory(),
            CachedBlock::Filter(f) | CachedBlock::Blob(f) => f.len(),
        }
    }

    /// Hands the entry's buffer to this thread's reads (`fs::buffers`) if the cache held it
    /// alone; otherwise the last holder frees it.
    fn recycle(self) {
        let buf = match self {
            CachedBlock::Block(b) => Arc::into_inner(b).map(Block::into_data),
            CachedBlock::Filter(f) | CachedBlock::Blob(f) => Arc::into_inner(f),
        };
        if let Some(buf) = buf {
            crate::fs::buffers::give(buf);
        }
    }

    /// True while someone besides the cache holds the entry.
    fn in_use(&self) -> bool {
        match self {
            CachedBlock::Block(b) => Arc::strong_count(b) > 1,
            CachedBlock::Filter(f) | CachedBlock::Blob(f) => Arc::strong_count(f) > 1,
        }
    }
}

/// Per-entry bookkeeping charged on top of the block itself.
const ENTRY_OVERHEAD: usize = 64;

/// Entries a shard evicted, dropped by the caller once the shard lock is released.
type Evicted = Vec<CachedBlock>;

/// The figures the properties report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CacheUsage {
    pub usage: usize,
    pub pinned_usage: usize,
    pub entries: usize,
}

enum Shards {
    Lru(Box<[lru::LruShard]>),
    Clock(Box<[clock::ClockShard]>),
}

/// A sharded cache of blocks.
pub(crate) struct BlockCache {
    shards: Shards,
    shard_shift: u32,
    single_shard: bool,
    capacity: usize,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("kind", &self.kind())
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// Shards for a capacity when the caller leaves it to us: about one per 512 KiB, at most 64, as
/// RocksDB picks them, so a small cache still gives each shard room for many blocks.
pub(crate) fn default_shard_bits(capacity: usize) -> u32 {
    let mut bits = 0;
    while bits < 6 && (capacity >> (bits + 1)) >= 512 << 10 {
        bits += 1;
    }
    bits
}

impl BlockCache {
    /// A cache of `capacity` bytes over 2^`shard_bits` shards. `high_pri_pool_ratio` is the share
    /// of each LRU shard kept for high-priority entries (CLOCK weighs them instead).
    pub(crate) fn new(
        capacity: usize,
        shard_bits: u32,
        kind: CacheKind,
        high_pri_pool_ratio: f64,
    ) -> Self {
        let n = 1usize << shard_bits;
        let per_shard = capacity.div_ceil(n);
        let shards = match kind {
            CacheKind::Lru => Shards::Lru(
                (0..n)
                    .map(|_| lru::LruShard::new(per_shard, high_pri_pool_ratio))
                    .collect(),
            ),
            CacheKind::Clock => {
                Shards::Clock((0..n).map(|_| clock::ClockShard::new(per_shard)).collect())
            }
        };
        BlockCache {
            shards,
            shard_shift: 64 - shard_bits,
            single_shard: n == 1,
            capacity,
        }
    }

    #[inline]
    fn shard_index(&self, key: CacheKey) -> usize {
        if self.single_shard {
            0
        } else {
            (hash_key(key) >> self.shard_shift) as usize
        }
    }

    pub(crate) fn lookup(&self, key: CacheKey) -> Option<CachedBlock> {
        let i = self.shard_index(key);
        match &self.shards {
            Shards::Lru(s) => s[i].lookup(key),
            Shards::Clock(s) => s[i].lookup(key),
        }
    }

    /// Caches `block` under `key`, replacing what was there. A block larger than a whole shard is
    /// not cached: it would only flush everything else.
    pub(crate) fn insert(&self, key: CacheKey, block: CachedBlock, priority: Priority) {
        let charge = block.size() + ENTRY_OVERHEAD;
        let i = self.shard_index(key);
        let evicted = match &self.shards {
            Shards::Lru(s) => s[i].insert(key, block, charge, priority),
            Shards::Clock(s) => s[i].insert(key, block, charge, priority),
        };
        evicted.into_iter().for_each(CachedBlock::recycle);
    }

    /// Bytes charged, bytes charged by entries in use, and entries, summed over the shards.
    pub(crate) fn usage(&self) -> CacheUsage {
        let mut total = CacheUsage::default();
        let mut add = |u: CacheUsage| {
            total.usage += u.usage;
            total.pinned_usage += u.pinned_usage;
            total.entries += u.entries;
        };
        match &self.shards {
            Shards::Lru(s) => s.iter().for_each(|s| add(s.usage())),
            Shards::Clock(s) => s.iter().for_each(|s| add(s.usage())),
        }
        total
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn kind(&self) -> CacheKind {
        match self.shards {
            Shards::Lru(_) => CacheKind::Lru,
            Shards::Clock(_) => CacheKind::Clock,
        }
    }
}

#[cfg(test)]
mod tests;
