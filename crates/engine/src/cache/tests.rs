use std::path::Path;
use std::sync::Arc;

use super::*;

/// A block of `size` bytes whose first 16 bytes name `key`, so a test can tell which block a
/// lookup returned.
fn block_for(key: CacheKey, size: usize) -> CachedBlock {
    let mut data = vec![0u8; size.max(24)];
    data[..8].copy_from_slice(&key.0.to_le_bytes());
    data[8..16].copy_from_slice(&key.1.to_le_bytes());
    let n = data.len();
    data[n - 4..].copy_from_slice(&1u32.to_le_bytes());
    CachedBlock::Block(Arc::new(Block::new(data, Path::new("t")).unwrap()))
}

fn key_of(b: &CachedBlock) -> CacheKey {
    match b {
        CachedBlock::Block(b) => {
            let d = b.data();
            (
                u64::from_le_bytes(d[..8].try_into().unwrap()),
                u64::from_le_bytes(d[8..16].try_into().unwrap()),
            )
        }
        _ => panic!("not a data block"),
    }
}

const KINDS: [CacheKind; 2] = [CacheKind::Lru, CacheKind::Clock];

#[test]
fn capacity_is_respected_and_hot_blocks_stay() {
    for kind in KINDS {
        let cache = BlockCache::new(20_000, 0, kind, 0.5);
        for i in 0..200u64 {
            cache.insert((1, i), block_for((1, i), 1000), Priority::Low);
            assert!(cache.usage().usage <= 20_000, "{kind:?}");
            // Keep block 0 hot: it must survive the churn.
            assert!(
                cache.lookup((1, 0)).is_some(),
                "{kind:?}: hot block evicted at {i}"
            );
        }
        assert!(cache.lookup((1, 1)).is_none(), "{kind:?}");
        assert!(cache.lookup((1, 199)).is_some(), "{kind:?}");
        assert!(cache.usage().entries < 20, "{kind:?}");
    }
}

#[test]
fn a_pinned_block_is_not_evicted() {
    for kind in KINDS {
        let cache = BlockCache::new(8000, 0, kind, 0.5);
        cache.insert((7, 0), block_for((7, 0), 1000), Priority::Low);
        let held = cache.lookup((7, 0)).unwrap();
        for i in 1..100u64 {
            cache.insert((7, i), block_for((7, i), 1000), Priority::Low);
        }
        let u = cache.usage();
        assert!(u.usage <= 8000, "{kind:?}");
        assert_eq!(u.pinned_usage, 1000 + ENTRY_OVERHEAD, "{kind:?}");
        let again = cache.lookup((7, 0)).expect("pinned block still cached");
        assert_eq!(key_of(&again), (7, 0));
        drop((held, again));
        assert_eq!(cache.usage().pinned_usage, 0, "{kind:?}");
        // Read twice, the block earned the high-priority pool: churn it with blocks of that class.
        for i in 100..200u64 {
            cache.insert((7, i), block_for((7, i), 1000), Priority::High);
        }
        assert!(
            cache.lookup((7, 0)).is_none(),
            "{kind:?}: released block evictable"
        );
    }
}

#[test]
fn pinned_entries_may_exceed_capacity_but_inserts_succeed() {
    for kind in KINDS {
        let cache = BlockCache::new(4000, 0, kind, 0.5);
        let held: Vec<_> = (0..8u64)
            .map(|i| {
                cache.insert((1, i), block_for((1, i), 1000), Priority::High);
                cache.lookup((1, i)).unwrap()
            })
            .collect();
        assert!(cache.usage().usage > 4000, "{kind:?}");
        for b in &held {
            assert!(cache.lookup(key_of(b)).is_some(), "{kind:?}");
        }
        drop(held);
        cache.insert((2, 0), block_for((2, 0), 1000), Priority::Low);
        assert!(cache.usage().usage <= 4000, "{kind:?}: back under capacity");
    }
}

#[test]
fn oversized_blocks_are_not_cached_and_reinsert_replaces() {
    for kind in KINDS {
        let cache = BlockCache::new(100_000, 1, kind, 0.5);
        cache.insert((8, 0), block_for((8, 0), 100_000), Priority::Low);
        assert!(cache.lookup((8, 0)).is_none(), "{kind:?}");
        cache.insert((1, 1), block_for((1, 1), 100), Priority::Low);
        cache.insert((1, 1), block_for((1, 1), 200), Priority::Low);
        match cache.lookup((1, 1)).unwrap() {
            CachedBlock::Block(b) => assert_eq!(b.size(), 200),
            _ => panic!(),
        }
        assert_eq!(cache.usage().usage, 200 + ENTRY_OVERHEAD, "{kind:?}");
    }
}

#[test]
fn high_priority_blocks_survive_a_scan() {
    for kind in KINDS {
        let cache = BlockCache::new(40_000, 0, kind, 0.5);
        for i in 0..10u64 {
            cache.insert((1, i), block_for((1, i), 1000), Priority::High);
        }
        // A scan: many data blocks, each read once, while lookups use the index blocks rarely:
        // after more data blocks than the cache holds (37).
        for i in 0..1000u64 {
            cache.insert((2, i), block_for((2, i), 1000), Priority::Low);
            if i % 40 == 39 {
                (0..10u64).for_each(|j| assert!(cache.lookup((1, j)).is_some(), "{kind:?}"));
            }
        }
        for i in 0..10u64 {
            assert!(
                cache.lookup((1, i)).is_some(),
                "{kind:?}: index block {i} lost to a scan"
            );
        }
    }
}

#[test]
fn lru_promotes_blocks_hit_twice_above_a_scan() {
    let cache = BlockCache::new(40_000, 0, CacheKind::Lru, 0.5);
    for i in 0..10u64 {
        cache.insert((1, i), block_for((1, i), 1000), Priority::Low);
        cache.lookup((1, i));
    }
    for i in 0..1000u64 {
        cache.insert((2, i), block_for((2, i), 1000), Priority::Low);
    }
    assert!((0..10u64).all(|i| cache.lookup((1, i)).is_some()));
}

#[test]
fn filters_are_cached_and_charged() {
    for kind in KINDS {
        let cache = BlockCache::new(100_000, 0, kind, 0.5);
        cache.insert(
            (3, 9),
            CachedBlock::Filter(Arc::new(vec![7u8; 5000])),
            Priority::High,
        );
        match cache.lookup((3, 9)) {
            Some(CachedBlock::Filter(f)) => assert_eq!(f.len(), 5000),
            _ => panic!("{kind:?}: filter lost"),
        }
        assert_eq!(cache.usage().usage, 5000 + ENTRY_OVERHEAD);
    }
}

#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
#[test]
fn concurrent_readers_and_writers_never_see_a_wrong_block() {
    for kind in KINDS {
        // Small enough that blocks are evicted constantly.
        let cache = Arc::new(BlockCache::new(64 << 10, 2, kind, 0.5));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    let mut x = t.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                    let (mut hits, mut held) = (0u64, Vec::new());
                    for _ in 0..50_000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let key = (x % 4, (x >> 8) % 512);
                        match cache.lookup(key) {
                            Some(b) => {
                                assert_eq!(key_of(&b), key, "{kind:?}");
                                hits += 1;
                                if x % 16 == 0 {
                                    held.push(b);
                                }
                                if held.len() > 2 {
                                    held.remove(0);
                                }
                            }
                            None => {
                                let priority = if x % 5 == 0 {
                                    Priority::High
                                } else {
                                    Priority::Low
                                };
                                cache.insert(
                                    key,
                                    block_for(key, 900 + (x % 300) as usize),
                                    priority,
                                )
                            }
                        }
                    }
                    hits
                })
            })
            .collect();
        let hits: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(hits > 0, "{kind:?}");
        let u = cache.usage();
        assert!(u.usage <= 64 << 10, "{kind:?}: {u:?}");
        assert_eq!(u.pinned_usage, 0, "{kind:?}");
    }
}

#[test]
fn default_shards_grow_with_capacity() {
    assert_eq!(default_shard_bits(0), 0);
    assert_eq!(default_shard_bits(1 << 20), 1);
    assert_eq!(default_shard_bits(8 << 20), 4);
    assert_eq!(default_shard_bits(1 << 30), 6);
}
