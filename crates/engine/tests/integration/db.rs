//! Behaviour of the public API: reads and writes across flush and reopen, snapshots, iterators,
//! errors for bad input, the directory lock, and corruption reporting.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use strata_engine::{Db, Error, Executor, Options, ReadOptions, WriteBatch, WriteOptions};

pub(crate) fn small_options() -> Options {
    {
        let mut o = Options::default();
        o.write_buffer_size = 64 << 10;
        o.cache_size = 1 << 20;
        o
    }
}

use crate::common;

pub(crate) fn keys(db: &Db, opts: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::collect(db.iter(opts).unwrap())
}

#[test]
fn put_get_delete_across_flush_and_reopen() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), small_options()).unwrap();
        for i in 0..5000u32 {
            db.put(format!("key{i:05}"), format!("value{i}")).unwrap();
        }
        for i in (0..5000u32).step_by(3) {
            db.delete(format!("key{i:05}")).unwrap();
        }
        assert!(
            db.properties_cf(&db.default_cf()).unwrap().total_files > 0,
            "small buffers flushed tables"
        );
        assert_eq!(db.get("key00001").unwrap().unwrap(), &b"value1"[..]);
        assert_eq!(db.get("key00003").unwrap(), None);
    }
    let db = Db::open(dir.path(), small_options()).unwrap();
    for i in 0..5000u32 {
        let got = db.get(format!("key{i:05}")).unwrap();
        if i % 3 == 0 {
            assert_eq!(got, None, "key{i}");
        } else {
            assert_eq!(got.unwrap().into_vec(), format!("value{i}").into_bytes());
        }
    }
    assert_eq!(keys(&db, &ReadOptions::default()).len(), 5000 - 1667);
    let stats = db.statistics();
    assert!(stats.gets >= 5000);
    assert!(stats.get_hits >= 3333);
}

#[test]
fn values_from_tables_are_pinned_and_outlive_the_cache() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), {
        let mut o = small_options();
        o.cache_size = 64 << 10;
        o
    })
    .unwrap();
    db.put("pinned", vec![7u8; 1000]).unwrap();
    db.flush().unwrap();
    let v = db.get("pinned").unwrap().unwrap();
    assert!(v.is_pinned());
    for i in 0..3000u32 {
        db.put(format!("filler{i:05}"), vec![1u8; 100]).unwrap();
    }
    db.flush().unwrap();
    for i in 0..3000u32 {
        db.get(format!("filler{i:05}")).unwrap();
    }
    assert!(db.properties().block_cache.unwrap().usage <= 64 << 10);
    assert_eq!(
        &*v,
        &[7u8; 1000][..],
        "the block stays alive while the value does"
    );
}

#[test]
fn batches_are_atomic_and_ordered() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let mut b = WriteBatch::new();
    b.put("a", "1");
    b.put("a", "2");
    b.delete("b");
    b.put("c", "3");
    db.put("b", "old").unwrap();
    db.write(
        b,
        &WriteOptions {
            sync: true,
            disable_wal: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        db.get("a").unwrap().unwrap(),
        &b"2"[..],
        "later entries in a batch win"
    );
    assert_eq!(db.get("b").unwrap(), None);
    assert_eq!(db.get("c").unwrap().unwrap(), &b"3"[..]);
    db.write(WriteBatch::new(), &WriteOptions::default())
        .unwrap();
}

#[test]
fn snapshots_see_the_past() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    db.put("k", "v1").unwrap();
    let snap = db.snapshot();
    db.put("k", "v2").unwrap();
    db.delete("gone").unwrap();
    db.put("new", "x").unwrap();
    db.flush().unwrap();
    let at = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    assert_eq!(db.get_with(&at, "k").unwrap().unwrap(), &b"v1"[..]);
    assert_eq!(db.get_with(&at, "new").unwrap(), None);
    assert_eq!(keys(&db, &at), vec![(b"k".to_vec(), b"v1".to_vec())]);
    assert_eq!(db.get("k").unwrap().unwrap(), &b"v2"[..]);
    assert_eq!(db.properties().live_snapshots, 1);
    drop(at);
    drop(snap);
    assert_eq!(db.properties().live_snapshots, 0);
}

/// A flush writes only what some reader can see: of a key's versions in one memtable, the newest
/// in each snapshot stripe. An overwritten value in a blob file is counted as that file's garbage.
#[test]
fn a_flush_keeps_only_the_versions_a_snapshot_or_the_present_sees() {
    let dir = crate::common::tempdir();
    let mut o = small_options();
    o.write_buffer_size = 4 << 20;
    o.enable_blob_files = true;
    o.min_blob_size = 1000;
    let db = Db::open(dir.path(), o).unwrap();
    let big = |c: u8| vec![c; 2000];
    db.put("k", "v1").unwrap();
    db.put("k", "v2").unwrap();
    let snap = db.snapshot();
    db.put("k", "v3").unwrap();
    db.put("k", "v4").unwrap();
    db.put("gone", "x").unwrap();
    db.delete("gone").unwrap();
    db.put("blob", big(b'a')).unwrap();
    db.put("blob", big(b'b')).unwrap();
    db.flush().unwrap();

    let props = db.properties_cf(&db.default_cf()).unwrap();
    let files: Vec<_> = props.levels.iter().flat_map(|l| &l.file_list).collect();
    assert_eq!(files.len(), 1);
    // k: v4, and v2 for the snapshot; gone: its deletion; blob: the second value.
    assert_eq!((files[0].entries, files[0].deletions), (4, 1), "{files:?}");
    assert!(props.blobs.blob_garbage_bytes > 0, "{:?}", props.blobs);
    let at = ReadOptions {
        snapshot: Some(snap),
        ..Default::default()
    };
    assert_eq!(db.get_with(&at, "k").unwrap().unwrap(), &b"v2"[..]);
    assert_eq!(db.get("k").unwrap().unwrap(), &b"v4"[..]);
    assert_eq!(db.get("gone").unwrap(), None);
    assert_eq!(db.get("blob").unwrap().unwrap(), big(b'b').as_slice());
}

#[test]
fn iterators_are_consistent_bounded_and_bidirectional() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}"), format!("v{i}")).unwrap();
        if i == 50 {
            db.flush().unwrap();
        }
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    db.put("k999", "written after the iterator").unwrap();
    db.delete("k010").unwrap();
    it.seek_to_last();
    assert_eq!(it.key(), b"k099", "the iterator does not see later writes");
    it.seek(b"k010");
    assert_eq!(it.key(), b"k010");
    it.seek_for_prev(b"k0505");
    assert_eq!(it.key(), b"k050");
    it.next();
    assert_eq!(it.key(), b"k051");
    it.prev();
    it.prev();
    assert_eq!(it.key(), b"k049");

    let bounded = ReadOptions {
        lower_bound: Some(b"k020".to_vec()),
        upper_bound: Some(b"k030".to_vec()),
        ..Default::default()
    };
    let got: Vec<_> = keys(&db, &bounded).into_iter().map(|(k, _)| k).collect();
    let want: Vec<_> = (20..30).map(|i| format!("k{i:03}").into_bytes()).collect();
    assert_eq!(got, want);
    let mut it = db.iter(&bounded).unwrap();
    it.seek_to_last();
    assert_eq!(it.key(), b"k029");
    it.seek(b"a");
    assert_eq!(it.key(), b"k020");
    it.seek_for_prev(b"z");
    assert_eq!(it.key(), b"k029");
    it.seek(b"k030");
    assert!(!it.valid());
    it.seek_to_first();
    it.prev();
    assert!(!it.valid());
    it.next(); // no-op on an invalid iterator, never a panic
    assert!(!it.valid());
}

#[test]
fn disable_wal_writes_survive_a_flush_but_not_a_crash_without_one() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), small_options()).unwrap();
        let no_wal = WriteOptions {
            sync: false,
            disable_wal: true,
            ..Default::default()
        };
        db.put_with(&no_wal, "flushed", "1").unwrap();
        db.flush().unwrap();
        db.put_with(&no_wal, "unflushed", "2").unwrap();
        assert_eq!(db.get("unflushed").unwrap().unwrap(), &b"2"[..]);
    }
    let db = Db::open(dir.path(), small_options()).unwrap();
    assert_eq!(db.get("flushed").unwrap().unwrap(), &b"1"[..]);
    assert_eq!(
        db.get("unflushed").unwrap(),
        None,
        "no WAL, no flush: gone after reopen"
    );
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn concurrent_writers_share_groups_and_lose_nothing() {
    let dir = crate::common::tempdir();
    let db = std::sync::Arc::new(Db::open(dir.path(), small_options()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut committed_at = Vec::new();
                for i in 0..500u32 {
                    // Synced writes: while a leader waits on fsync, the others queue up behind it.
                    let opts = WriteOptions {
                        sync: true,
                        disable_wal: false,
                        ..Default::default()
                    };
                    // Each thread's batches are of its own size: a writer told another's
                    // sequence leaves a gap or an overlap below.
                    let mut batch = WriteBatch::new();
                    for r in 0..=t {
                        batch.put(format!("t{t}-{i:05}-{r}"), format!("{i}"));
                    }
                    let size = batch.len() as u64;
                    committed_at.push((db.write_sequenced(batch, &opts).unwrap(), size));
                }
                committed_at
            })
        })
        .collect();
    let mut committed_at: Vec<(u64, u64)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let stats = db.statistics();
    assert_eq!(stats.write_batches, 2000);
    assert!(
        stats.write_groups < stats.write_batches,
        "no write was ever grouped: {stats:?}"
    );
    assert_eq!(stats.wal_syncs, stats.write_groups, "one fsync per group");
    // Each writer is told its own batch's last sequence number, not its group's: the batches'
    // spans, each ending there, tile the sequences from the store's first write with no gap
    // and no overlap.
    committed_at.sort_unstable();
    let mut next = 1;
    for &(last, size) in &committed_at {
        assert_eq!(
            last + 1 - size,
            next,
            "a batch of {size} told {last}, after a span ending at {}",
            next - 1
        );
        next = last + 1;
    }
    let total = 500 * (1 + 2 + 3 + 4);
    assert_eq!(next - 1, total);
    drop(db);
    let db = Db::open(dir.path(), small_options()).unwrap();
    assert_eq!(keys(&db, &ReadOptions::default()).len() as u64, total);
    assert_eq!(db.properties().last_sequence, total);
}

/// Writers keep writing while another thread closes the store, with memtables small enough
/// that writes keep moving to new WALs. Every write acknowledged reads back after a reopen, the
/// others failed with `Closed` (so do flushes racing it), and nothing is created in the store's directory once `close`
/// returns: a writer that passed its checks before the close took the WAL never starts a new
/// log behind the closed one.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn writers_racing_a_close_lose_nothing_and_leave_nothing_behind() {
    use std::sync::{Arc, Barrier};
    let mut o = small_options();
    o.write_buffer_size = 16 << 10;
    for round in 0..48u64 {
        let dir = crate::common::tempdir();
        let db = Arc::new(Db::open(dir.path(), o.clone()).unwrap());
        let start = Arc::new(Barrier::new(3));
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let (db, start) = (db.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let mut acknowledged = Vec::new();
                    for i in 0.. {
                        let key = format!("t{t}-{i:06}");
                        match db.put(&key, vec![t as u8 + 1; 700]) {
                            Ok(()) => acknowledged.push(key),
                            Err(Error::Closed) => return acknowledged,
                            Err(e) => panic!("round {round}, {key}: {e}"),
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        // Flushes move to a new WAL too, and one that got past its check before the close
        // reaches the WAL after it.
        let flusher = {
            let db = db.clone();
            std::thread::spawn(move || {
                loop {
                    match db.flush() {
                        Ok(()) => {}
                        Err(Error::Closed) => return,
                        Err(e) => panic!("round {round}, flush: {e}"),
                    }
                }
            })
        };
        start.wait();
        std::thread::sleep(std::time::Duration::from_micros(round * 400));
        db.close().unwrap();
        let after_close = common::list_dir(dir.path());
        // A call the close overtook returns (`Closed`) rather than wait on work that never runs.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !(flusher.is_finished() && writers.iter().all(|w| w.is_finished())) {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: a call racing close hangs"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        flusher.join().unwrap();
        let acknowledged: Vec<String> = writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        assert_eq!(
            common::list_dir(dir.path()),
            after_close,
            "round {round}: files changed after close"
        );
        drop(db);
        let db = Db::open(dir.path(), o.clone())
            .unwrap_or_else(|e| panic!("round {round}: reopen: {e}"));
        for key in &acknowledged {
            assert!(db.get(key).unwrap().is_some(), "round {round}: {key} lost");
        }
    }
}

#[test]
fn inline_executor_flushes_without_threads() {
    let dir = crate::common::tempdir();
    let opts = {
        let mut o = small_options();
        o.executor = Executor::Inline;
        o
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for i in 0..20_000u32 {
        db.put(format!("key{i:06}"), [3u8; 20]).unwrap();
    }
    // Writes that filled every memtable ran the flush themselves; maintenance runs the rest.
    assert!(db.properties_cf(&db.default_cf()).unwrap().levels[0].files > 0);
    db.maintenance().unwrap();
    assert_eq!(
        db.properties_cf(&db.default_cf())
            .unwrap()
            .immutable_memtables,
        0
    );
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(keys(&db, &ReadOptions::default()).len(), 20_000);
}

/// `maintenance_step` runs one job (one memtable's flush, else one compaction), so an embedder
/// can bound each call; `maintenance` drains the queues.
#[test]
fn a_maintenance_step_flushes_one_memtable_at_a_time() {
    let dir = crate::common::tempdir();
    let mut o = small_options();
    o.executor = Executor::Inline;
    o.max_write_buffer_number = 8;
    let db = Db::open(dir.path(), o).unwrap();
    let immutables = |db: &Db| {
        db.properties_cf(&db.default_cf())
            .unwrap()
            .immutable_memtables
    };
    let mut i = 0u32;
    while immutables(&db) < 3 {
        db.put(format!("key{i:06}"), [3u8; 20]).unwrap();
        i += 1;
    }
    let before = immutables(&db);
    let mut steps = 0;
    while db.maintenance_step().unwrap() {
        steps += 1;
        assert!(steps < 1000, "maintenance never ends");
        if steps < before {
            assert_eq!(immutables(&db), before - steps, "step {steps}");
        }
    }
    assert_eq!(immutables(&db), 0);
    assert!(steps >= before, "{steps} steps for {before} memtables");
    assert_eq!(keys(&db, &ReadOptions::default()).len(), i as usize);
}

/// Under the inline executor the full blob files ranged writes queued are sealed by maintenance
/// (they ride on the flush queue), not left open until close.
#[test]
fn maintenance_seals_the_blob_files_writes_filled() {
    let dir = crate::common::tempdir();
    let mut o = small_options();
    o.executor = Executor::Inline;
    o.enable_blob_files = true;
    o.min_blob_size = 100;
    o.blob_file_size = 8 << 10;
    let db = Db::open(dir.path(), o).unwrap();
    // Values no compressor shrinks, so each fills its share of a file.
    for i in 0..40u32 {
        let value = crate::common::noise(u64::from(i), 1000);
        // Appends: ranged writes queue the files they fill for the flush job to seal.
        let mut batch = strata_engine::WriteBatch::new();
        batch.append(format!("key{:03}", i % 4), value);
        db.write(batch, &Default::default()).unwrap();
    }
    while db.maintenance_step().unwrap() {}
    let files = db.properties_cf(&db.default_cf()).unwrap().blob_files;
    let open = files
        .iter()
        .filter(|b| b.state == strata_engine::BlobFileState::Open)
        .count();
    assert!(files.len() >= 4, "{} blob files", files.len());
    assert!(open <= 1, "{open} of {} blob files still open", files.len());
}

#[test]
fn obsolete_wal_files_are_deleted() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    for round in 0..5 {
        db.put(format!("r{round}"), "v").unwrap();
        db.flush().unwrap();
    }
    let logs = common::files_with_extension(dir.path(), "log").len();
    assert_eq!(logs, 1, "only the live WAL remains");
    assert_eq!(db.properties().live_wal_files, 1);
}

#[test]
fn a_flipped_byte_in_a_table_is_reported_naming_the_file() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), {
            let mut o = small_options();
            o.compression = strata_engine::Compression::None;
            o
        })
        .unwrap();
        for i in 0..500u32 {
            db.put(format!("key{i:05}"), format!("value{i:05}"))
                .unwrap();
        }
        db.flush().unwrap();
    }
    let table = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut data = std::fs::read(&table).unwrap();
    let pos = data.windows(10).position(|w| w == b"value00250").unwrap();
    data[pos + 5] ^= 0x20;
    std::fs::write(&table, &data).unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    match db.get("key00250") {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, table),
        other => panic!("expected corruption, got {other:?}"),
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    assert!(it.status().unwrap_err().is_corruption());
    drop(db);
    let paranoid = {
        let mut o = small_options();
        o.paranoid_checks = true;
        o
    };
    assert!(Db::open(dir.path(), paranoid).unwrap_err().is_corruption());
}

#[test]
fn damage_in_the_middle_of_the_wal_fails_open_unless_skipping() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), {
            let mut o = Options::default();
            o.write_buffer_size = 64 << 20;
            o
        })
        .unwrap();
        for i in 0..3000u32 {
            db.put(format!("key{i:05}"), vec![b'v'; 50]).unwrap();
        }
    }
    let wal = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "log") && std::fs::metadata(p).unwrap().len() > 0
        })
        .unwrap();
    let mut data = std::fs::read(&wal).unwrap();
    data[40_000] ^= 0xff;
    std::fs::write(&wal, &data).unwrap();
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, wal);
            assert!(detail.contains("followed by intact records"), "{detail}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    let skip = {
        let mut o = Options::default();
        o.wal_recovery = strata_engine::WalRecovery::SkipCorrupted;
        o
    };
    let db = Db::open(dir.path(), skip).unwrap();
    assert!(db.statistics().wal_records_skipped >= 1);
    assert!(
        db.get("key02999").unwrap().is_some(),
        "records after the damage are replayed"
    );
    assert!(db.get("key00000").unwrap().is_some());
}

#[test]
fn properties_and_statistics_serialize() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    db.put("a", "b").unwrap();
    db.flush().unwrap();
    let p = serde_json::to_value(db.properties()).unwrap();
    assert_eq!(p["column_families"][0]["levels"][0]["files"], 1);
    assert_eq!(p["column_families"][0]["name"], "default");
    assert_eq!(p["last_sequence"], 1);
    let s = serde_json::to_value(db.statistics()).unwrap();
    assert_eq!(s["flushes"], 1);
    assert_eq!(s["keys_written"], 1);
}

#[test]
fn db_and_its_handles_cross_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
    assert_send_sync::<strata_engine::Snapshot>();
    fn assert_send<T: Send>() {}
    assert_send::<strata_engine::DbIterator>();
    assert_send::<strata_engine::PinnableValue>();
}

#[test]
fn memtable_filters_answer_misses_without_changing_results() {
    let dir = crate::common::tempdir();
    let opts = {
        let mut o = small_options();
        o.memtable_bloom_size_ratio = 0.1;
        o.memtable_whole_key_filtering = true;
        o
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for i in 0..2000u32 {
        db.put(format!("key{i:05}"), format!("v{i}")).unwrap();
    }
    db.delete("key00007").unwrap();
    for i in 0..2000u32 {
        let got = db.get(format!("key{i:05}")).unwrap();
        assert_eq!(
            got.map(|v| v.into_vec()),
            (i != 7).then(|| format!("v{i}").into_bytes())
        );
    }
    for i in 0..2000u32 {
        assert_eq!(db.get(format!("absent{i:05}")).unwrap(), None);
    }
    let s = db.statistics();
    assert!(s.memtable_bloom_checked >= 4000);
    assert!(
        s.memtable_bloom_useful > 1500,
        "most absent keys are ruled out by the filter: {s:?}"
    );
    drop(db);
    // Without whole-key filtering the ratio alone builds no filter.
    let db = Db::open(dir.path(), {
        let mut o = opts;
        o.memtable_whole_key_filtering = false;
        o
    })
    .unwrap();
    db.get("absent").unwrap();
    assert_eq!(db.statistics().memtable_bloom_checked, 0);
    assert!(matches!(
        Db::open(dir.path().join("x"), {
            let mut o = Options::default();
            o.memtable_bloom_size_ratio = 0.5;
            o
        }),
        Err(Error::InvalidArgument(_))
    ));
}

/// `forward()` and `backward()` give a scan as one `for` loop, within the bounds, from the first
/// (or last) key or from where a seek placed the cursor.
#[test]
fn entries_iterate_both_ways_within_bounds() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    for i in 0..50u32 {
        db.put(format!("k{i:02}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    let opts = ReadOptions {
        lower_bound: Some(b"k10".to_vec()),
        upper_bound: Some(b"k20".to_vec()),
        ..Default::default()
    };
    let keys = |entries: strata_engine::Entries| -> Vec<String> {
        entries
            .map(|e| String::from_utf8(e.unwrap().0).unwrap())
            .collect()
    };
    let forward = keys(db.iter(&opts).unwrap().forward());
    let want: Vec<String> = (10..20).map(|i| format!("k{i:02}")).collect();
    assert_eq!(forward, want);
    let mut backward = keys(db.iter(&opts).unwrap().backward());
    backward.reverse();
    assert_eq!(backward, want);

    let mut it = db.iter(&opts).unwrap();
    it.seek(b"k15");
    assert_eq!(keys(it.forward()), want[5..]);
    let mut it = db.iter(&opts).unwrap();
    it.seek_for_prev(b"k15");
    let mut down = keys(it.backward());
    down.reverse();
    assert_eq!(down, want[..6]);

    let (k, v) = db.iter(&opts).unwrap().forward().next().unwrap().unwrap();
    assert_eq!((k, v), (b"k10".to_vec(), b"v10".to_vec()));
    let mut past = db.iter(&opts).unwrap();
    past.seek(b"k99");
    assert!(
        past.forward().next().is_none(),
        "a seek past the bounds yields nothing"
    );
}
