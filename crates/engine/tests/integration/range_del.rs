//! DeleteRange as users see it: covered keys vanish from get, MultiGet and iterators (both ways),
//! wherever the tombstone and the keys live (memtable, L0, deeper levels), snapshots still see
//! what they saw, compaction drops what is covered, and tombstones survive a crash.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::collections::BTreeMap;

use strata_engine::{Db, Error, Options, ReadOptions, TombstoneLocation, WriteBatch, WriteOptions};

use crate::common;
use common::{collect, collect_backward};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn open(dir: &std::path::Path) -> Db {
    let mut o = Options::default();
    o.write_buffer_size = 64 << 10;
    o.target_file_size_base = 16 << 10;
    o.max_bytes_for_level_base = 64 << 10;
    o.level0_file_num_compaction_trigger = 2;
    Db::open(dir, o).unwrap()
}

/// A store that never compacts on its own: tables stay where flushes put them.
fn open_without_compactions(dir: &std::path::Path) -> Db {
    let mut o = Options::default();
    o.disable_auto_compactions = true;
    Db::open(dir, o).unwrap()
}

fn get(db: &Db, k: &[u8]) -> Option<Vec<u8>> {
    db.get(k).unwrap().map(|v| v.to_vec())
}

/// Checks get, MultiGet and iterators in both directions against `model`.
fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, probe: impl Iterator<Item = u32>) {
    let probe: Vec<Vec<u8>> = probe.map(key).collect();
    for k in &probe {
        assert_eq!(
            get(db, k),
            model.get(k).cloned(),
            "get {}",
            String::from_utf8_lossy(k)
        );
    }
    let batched = db.multi_get(&ReadOptions::default(), &probe);
    let expected: Vec<Option<Vec<u8>>> = probe.iter().map(|k| model.get(k).cloned()).collect();
    let batched: Vec<Option<Vec<u8>>> = batched
        .into_iter()
        .map(|r| r.unwrap().map(|v| v.to_vec()))
        .collect();
    assert_eq!(batched, expected, "multi_get");
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()), expected);
    let backward = collect_backward(db.iter(&ReadOptions::default()).unwrap());
    assert_eq!(backward, expected, "backward");
}

fn model_delete_range(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, from: u32, to: u32) {
    let doomed: Vec<Vec<u8>> = model
        .range(key(from)..key(to))
        .map(|(k, _)| k.clone())
        .collect();
    for k in doomed {
        model.remove(&k);
    }
}

#[test]
fn empty_or_inverted_ranges_are_refused() {
    let dir = crate::common::tempdir();
    let db = open(dir.path());
    db.put("b", "1").unwrap();
    for (start, end) in [("b", "b"), ("c", "a")] {
        let err = db.delete_range(start, end).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("empty or inverted"), "{err}");
    }
    let mut batch = WriteBatch::new();
    batch.put("x", "1");
    batch.delete_range("z", "y");
    assert!(matches!(
        db.write(batch, &WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        get(&db, b"x"),
        None,
        "nothing of a refused batch is written"
    );
    assert_eq!(get(&db, b"b"), Some(b"1".to_vec()));
}

#[test]
fn covered_keys_vanish_from_every_read_wherever_they_live() {
    let dir = crate::common::tempdir();
    let db = open(dir.path());
    let mut model = BTreeMap::new();
    for i in 0..3000 {
        db.put(key(i), format!("v{i}")).unwrap();
        model.insert(key(i), format!("v{i}").into_bytes());
    }
    db.compact_range(None, None).unwrap();
    // In the memtable, over keys in tables.
    db.delete_range(key(100), key(200)).unwrap();
    model_delete_range(&mut model, 100, 200);
    check(&db, &model, 0..3000);
    let p = db.properties_cf(&db.default_cf()).unwrap();
    assert_eq!(
        (p.memtable_range_deletions, p.total_range_deletions),
        (1, 1)
    );
    // Flushed to L0, over keys below it.
    db.flush().unwrap();
    check(&db, &model, 0..3000);
    // The tombstone-density trigger may already have pushed it down, even dropped it.
    let p = db.properties_cf(&db.default_cf()).unwrap();
    assert_eq!(p.memtable_range_deletions, 0);
    assert!(p.total_range_deletions <= 1);
    // Keys rewritten after the tombstone are visible again.
    for i in 150..160 {
        db.put(key(i), "again").unwrap();
        model.insert(key(i), b"again".to_vec());
    }
    // Overlapping, nested and adjacent ranges.
    db.delete_range(key(500), key(900)).unwrap();
    db.delete_range(key(600), key(700)).unwrap();
    db.delete_range(key(850), key(1200)).unwrap();
    db.delete_range(key(1200), key(1201)).unwrap();
    model_delete_range(&mut model, 500, 1201);
    check(&db, &model, 0..3000);
    db.flush().unwrap();
    check(&db, &model, 0..3000);
    // Compacted all the way down: covered keys are gone from the files too.
    db.compact_range(None, None).unwrap();
    check(&db, &model, 0..3000);
    let s = db.statistics();
    assert!(s.range_deletes >= 5);
    assert!(s.range_del_hidden > 0);
    assert!(s.compaction_keys_range_deleted > 0, "{s:?}");
}

#[test]
fn snapshots_still_see_what_a_later_range_deletion_hides() {
    let dir = crate::common::tempdir();
    let db = open(dir.path());
    for i in 0..1000 {
        db.put(key(i), "old").unwrap();
    }
    let before = db.snapshot();
    db.delete_range(key(0), key(500)).unwrap();
    let after = db.snapshot();
    db.put(key(10), "new").unwrap();
    let reads = |snap: &strata_engine::Snapshot| {
        let mut o = ReadOptions::default();
        o.snapshot = Some(snap.clone());
        let got: Vec<Option<Vec<u8>>> = [5u32, 10, 600]
            .iter()
            .map(|&i| db.get_with(&o, key(i)).unwrap().map(|v| v.to_vec()))
            .collect();
        let count = collect(db.iter(&o).unwrap()).len();
        (got, count)
    };
    let check_all = || {
        assert_eq!(
            reads(&before),
            (
                vec![
                    Some(b"old".to_vec()),
                    Some(b"old".to_vec()),
                    Some(b"old".to_vec())
                ],
                1000
            )
        );
        assert_eq!(
            reads(&after),
            (vec![None, None, Some(b"old".to_vec())], 500)
        );
        assert_eq!(get(&db, &key(10)), Some(b"new".to_vec()));
        assert_eq!(get(&db, &key(11)), None);
    };
    check_all();
    db.flush().unwrap();
    check_all();
    db.compact_range(None, None).unwrap();
    check_all();
    drop((before, after));
    db.compact_range(None, None).unwrap();
    assert_eq!(
        collect(db.iter(&ReadOptions::default()).unwrap()).len(),
        501
    );
}

#[test]
fn range_tombstones_survive_reopen_from_the_wal_and_from_tables() {
    let dir = crate::common::tempdir();
    {
        let db = open(dir.path());
        for i in 0..1000 {
            db.put(key(i), "v").unwrap();
        }
        db.flush().unwrap();
        db.delete_range(key(100), key(300)).unwrap();
        db.flush().unwrap();
        // This one only in the WAL, synced.
        db.delete_range_with(
            &WriteOptions {
                sync: true,
                ..Default::default()
            },
            key(700),
            key(800),
        )
        .unwrap();
        // Closing does not flush: the last tombstone comes back from the WAL. (tests/crash.rs
        // kills a writer process outright.)
        drop(db);
    }
    let db = open(dir.path());
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> =
        (0..1000).map(|i| (key(i), b"v".to_vec())).collect();
    model_delete_range(&mut model, 100, 300);
    model_delete_range(&mut model, 700, 800);
    check(&db, &model, 0..1000);
}

#[test]
fn iterators_skip_long_covered_runs_by_seeking() {
    let dir = crate::common::tempdir();
    let db = open(dir.path());
    for i in 0..20_000 {
        db.put(key(i), "v").unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.delete_range(key(1000), key(19_000)).unwrap();
    let before = db.statistics();
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek(&key(999));
    assert_eq!(it.key(), key(999));
    it.next();
    assert_eq!(it.key(), key(19_000));
    it.prev();
    assert_eq!(it.key(), key(999));
    it.seek_for_prev(&key(18_000));
    assert_eq!(it.key(), key(999));
    let after = db.statistics();
    // A handful of entries noticed as hidden, each followed by a seek past the tombstone: not
    // 18,000 steps.
    let hidden = after.range_del_hidden - before.range_del_hidden;
    assert!(hidden <= 8, "hidden {hidden}");
    assert!(after.range_del_reseeks > before.range_del_reseeks);
}

#[test]
fn range_deletions_in_column_families_stay_apart() {
    let dir = crate::common::tempdir();
    let db = open(dir.path());
    let cf = db.create_cf("other", Default::default()).unwrap();
    for i in 0..100 {
        db.put(key(i), "d").unwrap();
        db.put_cf(&cf, key(i), "o").unwrap();
    }
    db.delete_range_cf(&cf, key(0), key(50)).unwrap();
    assert_eq!(get(&db, &key(10)), Some(b"d".to_vec()));
    assert_eq!(db.get_cf(&cf, key(10)).unwrap(), None);
    assert!(db.get_cf(&cf, key(60)).unwrap().is_some());
    let mut batch = WriteBatch::new();
    batch.delete_range_cf(&cf, key(50), key(100));
    batch.delete_range(key(0), key(10));
    db.write(batch, &WriteOptions::default()).unwrap();
    assert_eq!(
        collect(db.iter_cf(&ReadOptions::default(), &cf).unwrap()).len(),
        0
    );
    assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()).len(), 90);
}

#[test]
fn tables_a_newer_tombstone_covers_whole_are_deleted_without_a_rewrite() {
    let run = |hold_snapshot: bool| {
        let dir = crate::common::tempdir();
        let mut o = Options::default();
        o.executor = strata_engine::Executor::Inline;
        o.compression = strata_engine::Compression::None;
        o.write_buffer_size = 64 << 10;
        o.target_file_size_base = 16 << 10;
        let db = Db::open(dir.path(), o).unwrap();
        for i in 0..5000 {
            db.put(key(i), "some value bytes").unwrap();
        }
        db.compact_range(None, None).unwrap();
        let bottom = db.properties_cf(&db.default_cf()).unwrap();
        assert!(bottom.total_files > 2);
        let snapshot = hold_snapshot.then(|| db.snapshot());
        // Covers every table but the one holding the last keys.
        db.delete_range(key(0), key(4500)).unwrap();
        db.flush().unwrap();
        while db.maintenance().unwrap() {}
        let s = db.statistics();
        let mut all: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for i in 4500..5000 {
            all.insert(key(i), b"some value bytes".to_vec());
        }
        check(&db, &all, (0..5000).step_by(7));
        if let Some(snap) = &snapshot {
            let mut ro = ReadOptions::default();
            ro.snapshot = Some(snap.clone());
            assert_eq!(collect(db.iter(&ro).unwrap()).len(), 5000);
        }
        (s.tables_dropped_by_range_deletion, bottom.total_files)
    };
    let (dropped, files) = run(false);
    assert!(
        dropped > 0 && dropped < files as u64,
        "{dropped} of {files}"
    );
    let (dropped, _) = run(true);
    assert_eq!(dropped, 0, "a snapshot still sees those tables");
}

#[test]
fn flush_leaves_out_what_the_memtables_own_tombstones_hide() {
    let dir = crate::common::tempdir();
    // The flushed tables stay in L0 to be counted.
    let db = open_without_compactions(dir.path());
    let l0_entries = |db: &Db| {
        let p = db.properties_cf(&db.default_cf()).unwrap();
        p.levels[0].file_list.iter().map(|f| f.entries).sum::<u64>()
    };
    for i in 0..100 {
        db.put(key(i), "v").unwrap();
    }
    db.delete_range(key(0), key(60)).unwrap();
    db.put(key(10), "after").unwrap();
    db.flush().unwrap();
    // 40 untouched keys and the rewrite survive; the 60 covered puts are gone.
    assert_eq!(l0_entries(&db), 41);
    assert_eq!(get(&db, &key(10)), Some(b"after".to_vec()));
    assert_eq!(get(&db, &key(11)), None);
    // A snapshot taken before the deletion keeps the covered entries in the table.
    for i in 100..200 {
        db.put(key(i), "v").unwrap();
    }
    let snap = db.snapshot();
    db.delete_range(key(100), key(200)).unwrap();
    db.flush().unwrap();
    assert_eq!(l0_entries(&db), 141);
    let mut o = ReadOptions::default();
    o.snapshot = Some(snap);
    assert_eq!(collect(db.iter(&o).unwrap()).len(), 141);
}

#[test]
fn iterators_agree_with_a_model_over_many_sources_of_tombstones() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let dir = crate::common::tempdir();
    // Several L0 tables and the memtable, each with puts and tombstones over one key range.
    let db = open_without_compactions(dir.path());
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = BTreeMap::new();
    for round in 0..6 {
        for _ in 0..400 {
            let i = rng.random_range(0..2000);
            let v = format!("r{round}-{i}").into_bytes();
            db.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        for _ in 0..40 {
            let from = rng.random_range(0..2000);
            let to = from + rng.random_range(1..80);
            db.delete_range(key(from), key(to)).unwrap();
            model_delete_range(&mut model, from, to);
            // Newer than the tombstone in the same source: must stay visible.
            let i = rng.random_range(from..to);
            db.put(key(i), "newer").unwrap();
            model.insert(key(i), b"newer".to_vec());
        }
        if round < 5 {
            db.flush().unwrap();
        }
    }
    check(&db, &model, 0..2100);
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    for _ in 0..300 {
        let target = key(rng.random_range(0..2100));
        it.seek(&target);
        let want = model.range(target.clone()..).next().map(|(k, _)| k.clone());
        assert_eq!(it.valid().then(|| it.key().to_vec()), want, "seek");
        it.seek_for_prev(&target);
        let want = model.range(..=target).next_back().map(|(k, _)| k.clone());
        assert_eq!(it.valid().then(|| it.key().to_vec()), want, "seek_for_prev");
    }
    it.status().unwrap();
    assert!(db.statistics().range_del_reseeks > 0);
}

#[test]
fn a_flushed_tombstone_is_counted_and_spans_its_table() {
    let dir = crate::common::tempdir();
    let db = open_without_compactions(dir.path());
    db.put(key(0), "v").unwrap();
    db.flush().unwrap();
    db.delete_range(key(100), key(200)).unwrap();
    let p = db.properties_cf(&db.default_cf()).unwrap();
    assert_eq!(
        (p.memtable_range_deletions, p.total_range_deletions),
        (1, 1)
    );
    db.flush().unwrap();
    let p = db.properties_cf(&db.default_cf()).unwrap();
    assert_eq!(
        (p.memtable_range_deletions, p.total_range_deletions),
        (0, 1)
    );
    assert_eq!(p.levels[0].range_deletions, 1);
    let newest = &p.levels[0].file_list[0];
    assert_eq!(newest.range_deletions, 1);
    // No point entry: the table's range is the tombstone's.
    assert_eq!(
        (
            newest.entries,
            newest.smallest_key.as_str(),
            newest.largest_key.as_str()
        ),
        (0, "key000100", "key000200")
    );
}

/// The tombstone listing pages through every tombstone once, wherever it is kept, in order.
#[test]
fn range_tombstones_page_through_memtables_and_tables_in_order() {
    let dir = crate::common::tempdir();
    let db = open_without_compactions(dir.path());
    let cf = db.default_cf();
    for i in 0..25u32 {
        db.put(key(i * 10), b"v").unwrap();
        db.delete_range(key(i * 10), key(i * 10 + 5)).unwrap();
        if i == 9 || i == 19 {
            db.flush().unwrap();
        }
    }
    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = db.range_tombstones_cf(&cf, after.as_ref(), 7).unwrap();
        assert!(page.tombstones.len() <= 7);
        pages += 1;
        after = page.tombstones.last().cloned();
        seen.extend(page.tombstones);
        if !page.more {
            break;
        }
    }
    assert_eq!(pages, 4);
    assert_eq!(seen.len(), 25);
    let starts: Vec<Vec<u8>> = seen.iter().map(|t| t.start.clone()).collect();
    let expected: Vec<Vec<u8>> = (0..25).map(|i| key(i * 10)).collect();
    assert_eq!(starts, expected, "ordered by start key, each once");
    for (i, t) in seen.iter().enumerate() {
        assert_eq!(t.end, key(i as u32 * 10 + 5));
        let in_table = matches!(t.location, TombstoneLocation::Table { level: 0, .. });
        assert_eq!(in_table, i < 20, "tombstone {i} at {:?}", t.location);
    }
    let sequences: std::collections::BTreeSet<u64> = seen.iter().map(|t| t.sequence).collect();
    assert_eq!(sequences.len(), 25);
}

/// A delete-range dry run: the estimate counts memtable keys exactly and table keys by the share
/// of data blocks the range spans.
#[test]
fn range_estimates_follow_the_data() {
    let dir = crate::common::tempdir();
    let mut o = Options::default();
    o.compression = strata_engine::Compression::None;
    o.block_size = 1024;
    let db = Db::open(dir.path(), o).unwrap();
    let cf = db.default_cf();
    for i in 0..20_000u32 {
        db.put(key(i), [b'x'; 100]).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    for i in 20_000..20_100u32 {
        db.put(key(i), [b'y'; 100]).unwrap();
    }
    let whole = db.estimate_range_cf(&cf, key(0), key(30_000)).unwrap();
    assert!(
        (19_000..=21_000).contains(&whole.keys),
        "whole range: {whole:?}"
    );
    let half = db.estimate_range_cf(&cf, key(5_000), key(15_000)).unwrap();
    assert!((8_500..=11_500).contains(&half.keys), "half: {half:?}");
    assert!(half.bytes > 800_000 && half.bytes < 1_400_000, "{half:?}");
    let memtable_only = db.estimate_range_cf(&cf, key(20_000), key(20_050)).unwrap();
    assert_eq!(memtable_only.keys, 50);
    assert_eq!(
        db.estimate_range_cf(&cf, key(40_000), key(50_000)).unwrap(),
        Default::default()
    );
    assert_eq!(
        db.estimate_range_cf(&cf, key(9), key(1)).unwrap(),
        Default::default(),
        "an empty range"
    );
}
