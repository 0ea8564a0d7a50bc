//! A CLOCK shard. Every entry carries a small countdown. A lookup takes the shard lock shared and
//! only raises the countdown (an atomic store), so readers of one shard proceed together; an
//! insert takes the lock exclusively and sweeps a hand over the entries, decrementing countdowns
//! and evicting the first entry found at zero that no one holds. High-priority entries start, and
//! are restored on a hit, with a higher countdown: they survive more sweeps.

use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::RwLock;

use super::slots::{self, Policy, Slots};
use super::{CacheKey, CacheUsage, CachedBlock, Evicted, Priority};

struct Countdown {
    /// What a hit restores.
    weight: u8,
    clock: AtomicU8,
}

impl Priority {
    /// (countdown at insert, countdown after a hit): a data block read once gets one sweep of
    /// grace, one read again gets two, an index or filter block five (fewer, and a scan sweeping
    /// the hand round fast evicts them as soon as data blocks read twice).
    fn countdowns(self) -> (u8, u8) {
        match self {
            Priority::High => (5, 5),
            Priority::Low => (1, 2),
        }
    }
}

struct Inner {
    s: Slots<Countdown>,
    hand: usize,
}

pub(super) struct ClockShard(RwLock<Inner>);

impl ClockShard {
    pub(super) fn new(capacity: usize) -> Self {
        ClockShard(RwLock::new(Inner {
            s: Slots::new(capacity, Vec::new()),
            hand: 0,
        }))
    }

    pub(super) fn lookup(&self, key: CacheKey) -> Option<CachedBlock> {
        let inner = self.0.read();
        let slot = &inner.s.slots[inner.s.find(key)? as usize];
        let c = &slot.policy;
        if c.clock.load(Ordering::Relaxed) < c.weight {
            c.clock.store(c.weight, Ordering::Relaxed);
        }
        slot.block.clone()
    }

    pub(super) fn insert(
        &self,
        key: CacheKey,
        block: CachedBlock,
        charge: usize,
        priority: Priority,
    ) -> Evicted {
        slots::insert(&mut *self.0.write(), key, block, charge, priority)
    }

    pub(super) fn usage(&self) -> CacheUsage {
        self.0.read().s.usage()
    }
}

impl Policy for Inner {
    type Links = Countdown;

    fn slots(&self) -> &Slots<Countdown> {
        &self.s
    }

    fn remove(&mut self, i: u32) -> Option<CachedBlock> {
        self.s.take(i)
    }

    fn admit(&mut self, key: CacheKey, block: CachedBlock, charge: usize, priority: Priority) {
        let (initial, weight) = priority.countdowns();
        let countdown = Countdown {
            weight,
            clock: AtomicU8::new(initial),
        };
        self.s.place(key, block, charge, countdown);
    }

    /// Sweeps the hand until `charge` more bytes fit. Every countdown reaches zero within
    /// `max countdown + 1` turns, so the sweep is bounded; entries in use are passed over, and a
    /// shard full of them exceeds its capacity rather than fail the insert.
    fn make_room(&mut self, charge: usize, evicted: &mut Evicted) {
        let n = self.s.slots.len();
        let mut steps = n * (Priority::High.countdowns().1 as usize + 2);
        while self.s.usage + charge > self.s.capacity && steps > 0 {
            steps -= 1;
            if self.hand >= n {
                self.hand = 0;
            }
            let i = self.hand;
            self.hand += 1;
            let slot = &self.s.slots[i];
            if slot.block.is_none() || slot.in_use() {
                continue;
            }
            let c = slot.policy.clock.load(Ordering::Relaxed);
            if c > 0 {
                slot.policy.clock.store(c - 1, Ordering::Relaxed);
            } else {
                evicted.extend(self.s.take(i as u32));
            }
        }
    }
}
