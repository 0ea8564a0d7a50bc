//! The block cache as the store uses it: index and filter blocks in the cache, L0 pinning,
//! per-type counters, and a small cache under concurrent load.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::sync::Arc;

use strata_engine::{CacheKind, Db, Options, ReadOptions};

fn key(i: u32) -> String {
    format!("key{i:07}")
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat((i % 50) as usize)).into_bytes()
}

fn options(cache_size: usize) -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 128 << 10;
    o.cache_size = cache_size;
    o.cache_index_and_filter_blocks = true;
    o.disable_auto_compactions = true;
    o.compression = strata_engine::Compression::None;
    o
}

fn fill(db: &Db, n: u32, flush_every: u32) {
    for i in 0..n {
        db.put(key(i), value(i)).unwrap();
        if i % flush_every == flush_every - 1 {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
}

#[test]
fn index_and_filter_blocks_are_read_through_the_cache() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options(8 << 20)).unwrap();
    fill(&db, 20_000, 5_000);
    db.compact_range(None, None).unwrap();
    let before = db.statistics();
    for i in (0..20_000).step_by(7) {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), &value(i)[..]);
        assert!(db.get(format!("{}-absent", key(i))).unwrap().is_none());
    }
    let s = db.statistics();
    let d = |a: u64, b: u64| a - b;
    assert!(d(s.block_cache_index_hit, before.block_cache_index_hit) > 2_000);
    assert!(d(s.block_cache_filter_hit, before.block_cache_filter_hit) > 4_000);
    assert!(d(s.block_cache_data_hit, before.block_cache_data_hit) > 0);
    assert_eq!(
        s.block_cache_hit,
        s.block_cache_data_hit + s.block_cache_index_hit + s.block_cache_filter_hit
    );
    assert_eq!(
        s.block_cache_miss,
        s.block_cache_data_miss + s.block_cache_index_miss + s.block_cache_filter_miss
    );
    let cache = db.properties().block_cache.unwrap();
    assert_eq!(cache.kind, CacheKind::Lru);
    assert!(cache.usage > 0 && cache.usage <= cache.capacity);
    assert_eq!(cache.pinned_usage, 0, "nothing is held between reads");
}

#[test]
fn l0_index_and_filter_blocks_are_pinned() {
    for pin in [false, true] {
        let dir = crate::common::tempdir();
        // A cache far smaller than the data: every read evicts something.
        let mut o = options(256 << 10);
        o.cache_shard_bits = Some(0);
        o.pin_l0_filter_and_index_blocks_in_cache = pin;
        let db = Db::open(dir.path(), o).unwrap();
        fill(&db, 30_000, 10_000);
        assert!(db.properties().column_families[0].levels[0].files >= 3);
        let before = db.statistics();
        for i in (0..30_000).step_by(3) {
            assert_eq!(db.get(key(i)).unwrap().unwrap(), &value(i)[..]);
        }
        let s = db.statistics();
        let cache = db.properties().block_cache.unwrap();
        if pin {
            assert!(
                cache.pinned_usage > 0,
                "the readers hold their index and filter blocks"
            );
            assert_eq!(
                (s.block_cache_index_miss, s.block_cache_filter_miss),
                (
                    before.block_cache_index_miss,
                    before.block_cache_filter_miss
                ),
                "pinned blocks are never looked up again, so never missed"
            );
            assert_eq!(s.block_cache_index_hit, before.block_cache_index_hit);
        } else {
            assert_eq!(cache.pinned_usage, 0);
            assert!(s.block_cache_index_hit > before.block_cache_index_hit);
        }
        assert!(s.block_cache_data_miss > before.block_cache_data_miss);
    }
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_small_cache_under_concurrent_load_never_returns_a_wrong_value() {
    for kind in [CacheKind::Lru, CacheKind::Clock] {
        let dir = crate::common::tempdir();
        let mut o = options(48 << 10);
        o.cache_kind = kind;
        o.cache_shard_bits = Some(2);
        o.pin_l0_filter_and_index_blocks_in_cache = true;
        let db = Arc::new(Db::open(dir.path(), o).unwrap());
        let n = 20_000u32;
        fill(&db, n / 2, 5_000);
        db.compact_range(None, None).unwrap();
        // The second half stays in L0 tables (pinned) over the compacted first half (cached).
        for i in n / 2..n {
            db.put(key(i), value(i)).unwrap();
        }
        db.flush().unwrap();
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut x = 0x9e37_79b9u32.wrapping_mul(t + 1) | 1;
                    let mut next = move || {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x
                    };
                    for round in 0..3_000 {
                        let i = next() % (n + 100); // a few absent keys
                        match db.get(key(i)).unwrap() {
                            Some(v) => assert_eq!(&*v, &value(i)[..], "{kind:?}"),
                            None => assert!(i >= n, "{kind:?}: key {i} lost"),
                        }
                        if round % 10 == 0 {
                            let ks: Vec<u32> = (0..16).map(|_| next() % n).collect();
                            let names: Vec<String> = ks.iter().map(|&i| key(i)).collect();
                            let got = db.multi_get(&ReadOptions::default(), &names);
                            for (i, r) in ks.iter().zip(got) {
                                assert_eq!(&*r.unwrap().unwrap(), &value(*i)[..], "{kind:?}");
                            }
                        }
                        if round % 100 == 0 {
                            let start = next() % n;
                            let mut it = db.iter(&ReadOptions::default()).unwrap();
                            it.seek(key(start).as_bytes());
                            for i in start..(start + 50).min(n) {
                                assert!(it.valid());
                                assert_eq!(it.key(), key(i).as_bytes(), "{kind:?}");
                                assert_eq!(it.value(), &value(i)[..], "{kind:?}");
                                it.next();
                            }
                            it.status().unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = db.statistics();
        assert!(
            s.block_cache_data_miss > 0,
            "{kind:?}: the cache was too big to churn"
        );
        let cache = db.properties().block_cache.unwrap();
        assert_eq!(cache.kind, kind);
        assert!(
            cache.pinned_usage > 0,
            "{kind:?}: L0 index and filter stay pinned"
        );
    }
}
