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

/// A replica beside its writer holds every table open from before it reads them (so the
/// writer cannot delete one first): held from L0, a table's index and filter are pinned as
/// the writer's own are.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_replica_pins_the_l0_blocks_of_the_tables_it_holds_open() {
    let dir = crate::common::tempdir();
    let mut o = options(256 << 10);
    o.cache_shard_bits = Some(0);
    o.pin_l0_filter_and_index_blocks_in_cache = true;
    let writer = Db::open(dir.path(), o.clone()).unwrap();
    fill(&writer, 30_000, 10_000);
    assert!(writer.properties().column_families[0].levels[0].files >= 3);
    let replica = Db::open_replica(dir.path(), o, std::time::Duration::from_secs(3600)).unwrap();
    let before = replica.statistics();
    for i in (0..30_000).step_by(3) {
        assert_eq!(replica.get(key(i)).unwrap().unwrap(), &value(i)[..]);
    }
    let s = replica.statistics();
    let cache = replica.properties().block_cache.unwrap();
    assert!(cache.pinned_usage > 0, "the held readers pinned nothing");
    assert_eq!(
        (s.block_cache_index_miss, s.block_cache_filter_miss),
        (
            before.block_cache_index_miss,
            before.block_cache_filter_miss
        ),
        "pinned blocks are never looked up again, so never missed"
    );
}

/// A table a replica held from L0 and the writer then moved down without rewriting it (the
/// same file, a trivial move) is opened again at its new level: what the replica pins stays
/// its L0's, as the writer's does, rather than every table it ever held at L0.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_replica_lets_go_of_the_pins_of_tables_moved_out_of_l0() {
    let dir = crate::common::tempdir();
    let mut o = options(4 << 20);
    o.pin_l0_filter_and_index_blocks_in_cache = true;
    o.disable_auto_compactions = false;
    o.level0_file_num_compaction_trigger = 1;
    let settle = |db: &Db| {
        for _ in 0..2000 {
            crate::common::background_work(db);
            let p = db.properties_cf(&db.default_cf()).unwrap();
            if p.compactions_running == 0 && p.immutable_memtables == 0 && p.levels[0].files == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("L0 never emptied");
    };
    // Sequential keys: each flushed table moves down whole.
    let fill = |db: &Db, round: u32| {
        for i in round * 2000..round * 2000 + 2000 {
            db.put(key(i), value(i)).unwrap();
        }
        db.flush().unwrap();
    };
    // The first table stays at L0 until the replica holds it there.
    let mut stopped = o.clone();
    stopped.disable_auto_compactions = true;
    let first = Db::open(dir.path(), stopped).unwrap();
    fill(&first, 0);
    assert!(first.properties().column_families[0].levels[0].files >= 1);
    first.close().unwrap();
    let replica =
        Db::open_replica(dir.path(), o.clone(), std::time::Duration::from_secs(3600)).unwrap();
    assert_eq!(replica.get(key(7)).unwrap().unwrap(), &value(7)[..]);
    let pinned = || replica.properties().block_cache.unwrap().pinned_usage;
    assert!(pinned() > 0, "held at L0, pinned");
    let writer = Db::open(dir.path(), o).unwrap();
    for round in 1..4 {
        fill(&writer, round);
        settle(&writer);
    }
    assert!(
        writer.statistics().trivial_moves > 0,
        "nothing moved down whole"
    );
    replica
        .wait_for_sequence(writer.latest_sequence(), std::time::Duration::from_secs(10))
        .unwrap();
    assert_eq!(replica.get(key(7)).unwrap().unwrap(), &value(7)[..]);
    assert_eq!(pinned(), 0, "a table moved below L0 stayed pinned");
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

/// A cache-only read answers from the memtables, open tables and cached blocks, and fails
/// `Incomplete` where it would read a file, having opened, read and counted nothing; the same
/// read asked again normally then fills the cache, and cache-only reads of it succeed.
#[test]
fn a_cache_only_read_answers_from_memory_or_asks_to_be_asked_again() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), options(8 << 20)).unwrap();
        fill(&db, 20_000, 5_000);
        db.compact_range(None, None).unwrap();
    }
    // Reopened: no table open, nothing cached.
    let db = Db::open(dir.path(), options(8 << 20)).unwrap();
    let cf = db.default_cf();
    let memory = ReadOptions {
        cache_only: true,
        ..Default::default()
    };
    let incomplete = |r: strata_engine::Result<Option<strata_engine::PinnableValue>>| matches!(r, Err(e) if e.kind() == strata_engine::ErrorKind::Incomplete);
    let before = db.statistics();
    assert!(incomplete(db.get_cf_with(&memory, &cf, key(5))));
    let after = db.statistics();
    assert_eq!(after.table_opens, before.table_opens, "a table was opened");
    assert_eq!(after.gets, before.gets, "an incomplete read was counted");
    assert_eq!(after.block_cache_miss, before.block_cache_miss);
    assert_eq!(after.bytes_read_from_disk, before.bytes_read_from_disk);

    // Asked again normally: read from the file, cached; now it is in memory.
    assert_eq!(db.get(key(5)).unwrap().unwrap(), &value(5)[..]);
    assert_eq!(
        db.get_cf_with(&memory, &cf, key(5)).unwrap().unwrap(),
        &value(5)[..]
    );
    let range = db
        .read_range_cf(&memory, &cf, key(5), 1, 3)
        .unwrap()
        .unwrap();
    assert_eq!(&range.bytes[..], &value(5)[1..4]);
    // A key the cached filter rules out is absent without the disk.
    assert!(db.get_cf_with(&memory, &cf, "absent").unwrap().is_none());
    // Another block of the open table is not cached yet.
    assert!(incomplete(db.get_cf_with(&memory, &cf, key(19_000))));
    // What the memtable holds is in memory.
    db.put("fresh", "in the memtable").unwrap();
    assert_eq!(
        db.get_cf_with(&memory, &cf, "fresh").unwrap().unwrap(),
        &b"in the memtable"[..]
    );
    // A value with an expiration is held inline: in memory too.
    db.put_with_ttl(&cf, "expiring", "soon", 3600).unwrap();
    assert_eq!(
        db.get_cf_with(&memory, &cf, "expiring").unwrap().unwrap(),
        &b"soon"[..]
    );
    // A batch answers each key on its own: in memory, absent, or incomplete; one that must be
    // asked again is not counted until it is.
    let gets = db.statistics().gets;
    let got = db.multi_get_cf(&memory, &[(&cf, key(5)), (&cf, key(19_001)), (&cf, key(6))]);
    assert_eq!(got[0].as_ref().unwrap().as_ref().unwrap(), &value(5)[..]);
    assert!(incomplete(got.into_iter().nth(1).unwrap()));
    assert_eq!(db.statistics().gets, gets);
    // A value reader reads blob files step by step: it cannot promise memory either.
    let e = db.value_reader_cf(&memory, &cf, key(5)).err().unwrap();
    assert_eq!(e.kind(), strata_engine::ErrorKind::InvalidArgument);
    // An iterator cannot promise to stay in memory.
    let e = db.iter_cf(&memory, &cf).err().unwrap();
    assert_eq!(e.kind(), strata_engine::ErrorKind::InvalidArgument);
}

/// A value in a blob file is never in memory: a cache-only read of it is incomplete, however
/// often it was read, while its table's entry is cached.
#[test]
fn a_cache_only_read_of_a_value_in_a_blob_file_is_incomplete() {
    let dir = crate::common::tempdir();
    let mut o = options(8 << 20);
    o.enable_blob_files = true;
    o.min_blob_size = 100;
    let db = Db::open(dir.path(), o).unwrap();
    let big = vec![7u8; 4096];
    db.put("big", &big).unwrap();
    db.put("small", "inline").unwrap();
    db.flush().unwrap();
    let cf = db.default_cf();
    let memory = ReadOptions {
        cache_only: true,
        ..Default::default()
    };
    for _ in 0..2 {
        assert_eq!(db.get("big").unwrap().unwrap(), &big[..]);
        let e = db.get_cf_with(&memory, &cf, "big").err().unwrap();
        assert_eq!(e.kind(), strata_engine::ErrorKind::Incomplete);
        let e = db.read_range_cf(&memory, &cf, "big", 0, 10).err().unwrap();
        assert_eq!(e.kind(), strata_engine::ErrorKind::Incomplete);
    }
    assert_eq!(db.get("small").unwrap().unwrap(), &b"inline"[..]);
    assert_eq!(
        db.get_cf_with(&memory, &cf, "small").unwrap().unwrap(),
        &b"inline"[..]
    );
}
