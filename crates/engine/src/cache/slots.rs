//! The storage both eviction policies share: entries in a vector of slots (reused through a free
//! list, so policies link them by index), a map from key to slot, and the bytes they charge.

use super::{CacheKey, CacheUsage, CachedBlock, Evicted, KeyMap, Priority};

/// What an eviction policy adds to the shared storage; [`insert`] drives it.
pub(super) trait Policy {
    type Links;
    fn slots(&self) -> &Slots<Self::Links>;
    /// Takes entry `i` out of the policy's order and the storage.
    fn remove(&mut self, i: u32) -> Option<CachedBlock>;
    /// Evicts until `charge` more bytes fit (or only held entries are left).
    fn make_room(&mut self, charge: usize, evicted: &mut Evicted);
    /// Stores a new entry and gives it its place in the policy's order.
    fn admit(&mut self, key: CacheKey, block: CachedBlock, charge: usize, priority: Priority);
}

/// Caches `block` under `key`, replacing what was there; returns what it evicted, for the caller
/// to drop once the shard lock is released. A block larger than the whole shard is not cached:
/// it would only flush everything else.
pub(super) fn insert<P: Policy>(
    policy: &mut P,
    key: CacheKey,
    block: CachedBlock,
    charge: usize,
    priority: Priority,
) -> Evicted {
    let mut evicted = Evicted::new();
    if let Some(i) = policy.slots().find(key) {
        evicted.extend(policy.remove(i));
    }
    if charge > policy.slots().capacity {
        return evicted;
    }
    policy.make_room(charge, &mut evicted);
    policy.admit(key, block, charge, priority);
    evicted
}

pub(super) struct Slot<P> {
    pub key: CacheKey,
    pub block: Option<CachedBlock>,
    pub charge: usize,
    /// The policy's own bookkeeping (list links, clock countdown).
    pub policy: P,
}

impl<P> Slot<P> {
    /// True while someone besides the cache holds the entry: it must not be evicted.
    pub fn in_use(&self) -> bool {
        self.block.as_ref().is_some_and(CachedBlock::in_use)
    }
}

pub(super) struct Slots<P> {
    map: KeyMap,
    pub slots: Vec<Slot<P>>,
    free: Vec<u32>,
    pub usage: usize,
    pub capacity: usize,
}

impl<P> Slots<P> {
    /// Slots start with `reserved` (policy sentinels that never hold an entry).
    pub fn new(capacity: usize, reserved: Vec<Slot<P>>) -> Self {
        Slots {
            map: KeyMap::default(),
            slots: reserved,
            free: Vec::new(),
            usage: 0,
            capacity,
        }
    }

    pub fn find(&self, key: CacheKey) -> Option<u32> {
        self.map.get(&key).copied()
    }

    /// Stores an entry in a free slot and returns its index.
    pub fn place(&mut self, key: CacheKey, block: CachedBlock, charge: usize, policy: P) -> u32 {
        let slot = Slot {
            key,
            block: Some(block),
            charge,
            policy,
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
        self.usage += charge;
        i
    }

    /// Empties slot `i` (the policy has already unlinked it) and returns its block.
    pub fn take(&mut self, i: u32) -> Option<CachedBlock> {
        let slot = &mut self.slots[i as usize];
        self.usage -= slot.charge;
        slot.charge = 0;
        let block = slot.block.take();
        self.map.remove(&slot.key);
        self.free.push(i);
        block
    }

    pub fn entries(&self) -> usize {
        self.map.len()
    }

    pub fn usage(&self) -> CacheUsage {
        CacheUsage {
            usage: self.usage,
            pinned_usage: self
                .slots
                .iter()
                .filter(|s| s.in_use())
                .map(|s| s.charge)
                .sum(),
            entries: self.map.len(),
        }
    }
}
