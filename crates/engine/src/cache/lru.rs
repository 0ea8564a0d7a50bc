//! An LRU shard with a high-priority pool. Entries sit on one of two lists, each most recent
//! first: the high-priority pool (index and filter blocks, and data blocks hit at least twice) and
//! the low-priority list (data blocks seen once). When the pool outgrows its share of the shard,
//! its least recent entries move down to the head of the low list; eviction takes from the tail of
//! the low list first. New data blocks therefore enter at the midpoint, and a scan that touches
//! each block once cannot push out blocks that are read again and again.
//!
//! A hit on an entry the pool took in recently does not move it again: it is already far from
//! eviction, and the move would cost cache misses on its list neighbours at every read.

use parking_lot::Mutex;

use super::slots::{self, Policy, Slot, Slots};
use super::{CacheKey, CacheUsage, CachedBlock, Evicted, Priority};

/// Sentinels of the two lists.
const HIGH: u32 = 0;
const LOW: u32 = 1;

struct Links {
    in_high_pool: bool,
    prev: u32,
    next: u32,
    /// `Inner::inserts` when the entry last moved to the head of its list.
    moved_at: u64,
}

fn sentinel(i: u32) -> Slot<Links> {
    Slot {
        key: (u64::MAX, u64::MAX),
        block: None,
        charge: 0,
        policy: Links {
            in_high_pool: i == HIGH,
            prev: i,
            next: i,
            moved_at: 0,
        },
    }
}

struct Inner {
    s: Slots<Links>,
    high_usage: usize,
    high_capacity: usize,
    /// Entries inserted so far: the clock `moved_at` is read against.
    inserts: u64,
}

pub(super) struct LruShard(Mutex<Inner>);

impl LruShard {
    pub(super) fn new(capacity: usize, high_pri_pool_ratio: f64) -> Self {
        LruShard(Mutex::new(Inner {
            s: Slots::new(capacity, vec![sentinel(HIGH), sentinel(LOW)]),
            high_usage: 0,
            high_capacity: (capacity as f64 * high_pri_pool_ratio.clamp(0.0, 1.0)) as usize,
            inserts: 0,
        }))
    }

    pub(super) fn lookup(&self, key: CacheKey) -> Option<CachedBlock> {
        let mut inner = self.0.lock();
        let i = inner.s.find(key)?;
        if inner.recently_moved(i) {
            return inner.s.slots[i as usize].block.clone();
        }
        // A second hit earns a place in the pool.
        inner.unlink(i);
        let promote = inner.high_capacity > 0;
        inner.push_front(i, promote);
        inner.fit_high_pool();
        inner.s.slots[i as usize].block.clone()
    }

    pub(super) fn insert(
        &self,
        key: CacheKey,
        block: CachedBlock,
        charge: usize,
        priority: Priority,
    ) -> Evicted {
        slots::insert(&mut *self.0.lock(), key, block, charge, priority)
    }

    pub(super) fn usage(&self) -> CacheUsage {
        self.0.lock().s.usage()
    }
}

impl Inner {
    /// True for a pool entry moved to the head within the last quarter-shard of inserts: fewer
    /// than a quarter of the entries can have gone ahead of it since, so it is nowhere near the
    /// tail.
    fn recently_moved(&self, i: u32) -> bool {
        let links = &self.s.slots[i as usize].policy;
        links.in_high_pool && self.inserts - links.moved_at < (self.s.entries() / 4) as u64
    }

    fn links(&mut self, i: u32) -> &mut Links {
        &mut self.s.slots[i as usize].policy
    }

    fn unlink(&mut self, i: u32) {
        let Links {
            prev,
            next,
            in_high_pool,
            ..
        } = self.s.slots[i as usize].policy;
        self.links(prev).next = next;
        self.links(next).prev = prev;
        if in_high_pool {
            self.high_usage -= self.s.slots[i as usize].charge;
        }
    }

    /// Links `i` as the most recent entry of the pool or of the low list.
    fn push_front(&mut self, i: u32, high: bool) {
        let head = if high { HIGH } else { LOW };
        let first = self.links(head).next;
        let moved_at = self.inserts;
        *self.links(i) = Links {
            in_high_pool: high,
            prev: head,
            next: first,
            moved_at,
        };
        if high {
            self.high_usage += self.s.slots[i as usize].charge;
        }
        self.links(first).prev = i;
        self.links(head).next = i;
    }

    /// Moves the pool's least recent entries down until it fits its share.
    fn fit_high_pool(&mut self) {
        while self.high_usage > self.high_capacity {
            let oldest = self.links(HIGH).prev;
            self.unlink(oldest);
            self.push_front(oldest, false);
        }
    }
}

impl Policy for Inner {
    type Links = Links;

    fn slots(&self) -> &Slots<Links> {
        &self.s
    }

    fn remove(&mut self, i: u32) -> Option<CachedBlock> {
        self.unlink(i);
        self.s.take(i)
    }

    /// Evicts least recent entries, low list first, until `charge` more bytes fit. Entries in use
    /// are passed over, so a shard full of pinned entries exceeds its capacity rather than fail
    /// the insert.
    fn make_room(&mut self, charge: usize, evicted: &mut Evicted) {
        for head in [LOW, HIGH] {
            let mut cur = self.links(head).prev;
            while cur != head && self.s.usage + charge > self.s.capacity {
                let older = self.links(cur).prev;
                if !self.s.slots[cur as usize].in_use() {
                    evicted.extend(self.remove(cur));
                }
                cur = older;
            }
        }
    }

    fn admit(&mut self, key: CacheKey, block: CachedBlock, charge: usize, priority: Priority) {
        self.inserts += 1;
        let links = Links {
            in_high_pool: false,
            prev: LOW,
            next: LOW,
            moved_at: 0,
        };
        let i = self.s.place(key, block, charge, links);
        let high = priority == Priority::High && self.high_capacity > 0;
        self.push_front(i, high);
        self.fit_high_pool();
    }
}
