//! A store in a real SeaweedFS bucket: reopened from its cache and from nothing, fenced by a newer
//! writer, claimed by two racing writers of which only one acknowledges.

use std::path::Path;
use std::sync::{Arc, Barrier};

use crate::support::seaweed::{self, Seaweed};
use crate::support::{get, noise, open_db, synced};
use strata_bucket::{BucketFs, Durability};
use strata_engine::ErrorKind;

fn sw() -> Option<&'static Seaweed> {
    seaweed::shared()
}

fn open(s: &Seaweed, url: &strata_bucket::BucketUrl, cache: &Path, d: Durability) -> BucketFs {
    BucketFs::open(&s.config(url, cache.to_path_buf(), d)).unwrap()
}

#[test]
fn a_store_reopens_from_its_cache_and_from_an_empty_one() {
    let Some(s) = sw() else { return };
    for durability in [Durability::Local, Durability::Remote] {
        let url = s.fresh_url("reopen");
        let tmp = tempfile::tempdir().unwrap();
        let first = tmp.path().join("first");
        {
            let db = open_db(open(s, &url, &first, durability));
            db.put_with(&synced(), b"flushed", b"in a table").unwrap();
            db.flush().unwrap();
            db.put_with(&synced(), b"synced", b"in the WAL").unwrap();
            let big = vec![7u8; 300 << 10];
            db.put_with(&synced(), b"big", &big).unwrap();
        }
        // The same cache: everything, the local WAL included.
        {
            let db = open_db(open(s, &url, &first, durability));
            assert_eq!(get(&db, "flushed").as_deref(), Some(&b"in a table"[..]));
            assert_eq!(get(&db, "synced").as_deref(), Some(&b"in the WAL"[..]));
            assert_eq!(get(&db, "big").map(|v| v.len()), Some(300 << 10));
        }
        // Another machine: what reached the bucket.
        let db = open_db(open(s, &url, &tmp.path().join("second"), durability));
        assert_eq!(
            get(&db, "flushed").as_deref(),
            Some(&b"in a table"[..]),
            "{durability:?}"
        );
        // The first reopen flushed nothing, but closing flushed... or not: what the bucket must
        // hold depends on the level. At `bucket`, every synced write is there.
        if durability == Durability::Remote {
            assert_eq!(get(&db, "synced").as_deref(), Some(&b"in the WAL"[..]));
            assert_eq!(get(&db, "big").map(|v| v.len()), Some(300 << 10));
        }
    }
}

#[test]
fn a_newer_writer_fences_the_older_one() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("fence");
    let tmp = tempfile::tempdir().unwrap();
    let old = open_db(open(s, &url, &tmp.path().join("old"), Durability::Remote));
    old.put_with(&synced(), b"before", b"1").unwrap();
    let new = open_db(open(s, &url, &tmp.path().join("new"), Durability::Remote));
    assert_eq!(get(&new, "before").as_deref(), Some(&b"1"[..]));
    let e = old.put_with(&synced(), b"after", b"2").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    // It stays fenced, and says so, for every later write.
    let e = old.put_with(&synced(), b"again", b"3").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    new.put_with(&synced(), b"new", b"4").unwrap();
    new.flush().unwrap();
    drop(old);
    drop(new);
    let check = open_db(open(s, &url, &tmp.path().join("check"), Durability::Remote));
    assert_eq!(get(&check, "before").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&check, "new").as_deref(), Some(&b"4"[..]));
    assert_eq!(get(&check, "after"), None);
}

#[test]
fn at_local_durability_a_newer_writer_fences_the_older_within_its_lease() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("fence-local");
    let tmp = tempfile::tempdir().unwrap();
    let old = open_db(open(s, &url, &tmp.path().join("old"), Durability::Local));
    old.put_with(&synced(), b"before", b"1").unwrap();
    let started = std::time::Instant::now();
    let new = open_db(open(s, &url, &tmp.path().join("new"), Durability::Local));
    // The newcomer waited out the lease before it could acknowledge anything.
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    // The old writer's local WAL would take this write, unsynced or not, but its lease is past
    // half: it asks the bucket, finds the newer claim, and acknowledges nothing more.
    let e = old.put(b"after-unsynced", b"2").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    let e = old.put_with(&synced(), b"after", b"2").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    new.put_with(&synced(), b"new", b"3").unwrap();
    new.flush().unwrap();
    drop(old);
    drop(new);
    let check = open_db(open(s, &url, &tmp.path().join("check"), Durability::Local));
    assert_eq!(get(&check, "new").as_deref(), Some(&b"3"[..]));
    assert_eq!(get(&check, "after"), None);
}

/// Leases differ between processes: a newcomer with a short one still waits out the lease of
/// the writer it takes over from (named in that writer's claim), so while the old writer may
/// still acknowledge `local` syncs without asking the bucket, the new one acknowledges nothing.
#[test]
fn a_newcomer_with_a_shorter_lease_waits_out_the_old_writers() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("fence-lease");
    let tmp = tempfile::tempdir().unwrap();
    let config = |dir: &str, lease_ms: u64| strata_bucket::BucketConfig {
        lease: std::time::Duration::from_millis(lease_ms),
        ..s.config(&url, tmp.path().join(dir), Durability::Local)
    };
    let old = Arc::new(open_db(BucketFs::open(&config("old", 3_000)).unwrap()));
    old.put_with(&synced(), b"before", b"1").unwrap();
    // The old writer acknowledges `local` syncs until it is fenced, noting when each returned.
    let writer = {
        let old = old.clone();
        std::thread::spawn(move || {
            let mut last_ack = None;
            for i in 0u64.. {
                match old.put_with(&synced(), format!("old{i}").as_bytes(), b"v") {
                    Ok(()) => last_ack = Some(std::time::Instant::now()),
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
                        return last_ack;
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            unreachable!()
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let new = open_db(BucketFs::open(&config("new", 100)).unwrap());
    new.put_with(&synced(), b"new", b"v").unwrap();
    let first_new_ack = std::time::Instant::now();
    let last_old_ack = writer
        .join()
        .unwrap()
        .expect("the old writer acknowledged writes");
    assert!(
        last_old_ack < first_new_ack,
        "the old writer acknowledged a write {:?} after the new one's first",
        last_old_ack - first_new_ack
    );
}

#[test]
fn of_two_writers_racing_to_open_exactly_one_acknowledges() {
    let Some(s) = sw() else { return };
    let rounds: usize = std::env::var("STRATA_BUCKET_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let url = s.fresh_url("race");
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..rounds {
        let barrier = Arc::new(Barrier::new(2));
        let acked: Vec<Option<String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|w| {
                    let barrier = barrier.clone();
                    let dir = tmp.path().join(format!("round-{round}-writer-{w}"));
                    let url = url.clone();
                    scope.spawn(move || {
                        // The rival may claim the store while this one's open still writes its
                        // MANIFEST: that open then fails, fenced, and acknowledges nothing.
                        // A short lease: each round takes over from the last one's writer.
                        let config = strata_bucket::BucketConfig {
                            lease: std::time::Duration::from_millis(20),
                            ..s.config(&url, dir, Durability::Remote)
                        };
                        let opened = BucketFs::open(&config).and_then(|fs| {
                            let root = fs.root().to_path_buf();
                            let opts = strata_engine::Options {
                                create_if_missing: true,
                                filesystem: Arc::new(fs),
                                ..strata_engine::Options::default()
                            };
                            strata_engine::Db::open(&root, opts)
                        });
                        barrier.wait();
                        let db = match opened {
                            Ok(db) => db,
                            Err(e) => {
                                assert_eq!(e.kind(), ErrorKind::Fenced, "round {round}: {e}");
                                return None;
                            }
                        };
                        let key = format!("round-{round}-writer-{w}");
                        db.put_with(&synced(), key.as_bytes(), b"x")
                            .ok()
                            .map(|()| key)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<&String> = acked.iter().flatten().collect();
        assert_eq!(winners.len(), 1, "round {round}: {acked:?}");
        let check = open_db(open(s, &url, &tmp.path().join("check"), Durability::Remote));
        assert!(
            get(&check, winners[0]).is_some(),
            "round {round}: {} lost",
            winners[0]
        );
    }
}

#[test]
fn seaweedfs_passes_the_conformance_check() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("probe");
    let client =
        strata_bucket::Client::connect(&url, Some(&s.endpoint), Some(&seaweed::credentials()))
            .unwrap();
    strata_bucket::check_conformance(&client, "test").unwrap();
}

#[test]
fn checkpoints_bound_the_log_and_garbage_goes_without_losing_data() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("gc");
    let tmp = tempfile::tempdir().unwrap();
    let fs = open(s, &url, &tmp.path().join("writer"), Durability::Remote);
    let handle = fs.clone();
    let db = open_db(fs);
    let key = |i: usize| format!("key-{i:05}");
    for i in 0..300 {
        db.put_with(&synced(), key(i).as_bytes(), format!("v{i}").as_bytes())
            .unwrap();
        if i % 100 == 99 {
            db.flush().unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    // The records that placed the compacted tables pass out of the log (two checkpoints on).
    for i in 300..500 {
        db.put_with(&synced(), key(i).as_bytes(), format!("v{i}").as_bytes())
            .unwrap();
    }
    let client =
        strata_bucket::Client::connect(&url, Some(&s.endpoint), Some(&seaweed::credentials()))
            .unwrap();
    let records = client.list("log/").unwrap().len();
    let checkpoints = client.list("checkpoint/").unwrap().len();
    // 500 synced writes and a few flushes: a record each, but only those since the checkpoint
    // before last are kept.
    eprintln!("{records} records and {checkpoints} checkpoints kept of 500+ records");
    assert!(records < 400, "{records} records kept");
    assert!((1..=2).contains(&checkpoints), "{checkpoints} checkpoints");
    let report = handle.collect_garbage(std::time::Duration::ZERO).unwrap();
    assert!(report.deleted > 0, "{report:?}");
    assert_eq!(report.young, 0);
    let again = handle.collect_garbage(std::time::Duration::ZERO).unwrap();
    assert_eq!(again.deleted, 0, "{again:?}");
    db.put_with(&synced(), b"after-gc", b"1").unwrap();
    drop(db);
    drop(handle);
    // Another machine, from nothing: every key, through the checkpoint and what followed it.
    let db = open_db(open(
        s,
        &url,
        &tmp.path().join("reader"),
        Durability::Remote,
    ));
    for i in 0..500 {
        assert_eq!(
            get(&db, &key(i)),
            Some(format!("v{i}").into_bytes()),
            "{}",
            key(i)
        );
    }
    assert_eq!(get(&db, "after-gc").as_deref(), Some(&b"1"[..]));
}

#[test]
fn a_cold_read_fetches_pages_not_files_and_a_bounded_cache_lets_idle_files_go() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("cache");
    let tmp = tempfile::tempdir().unwrap();
    let key = |t: usize, i: usize| format!("t{t}-{i:03}");
    // Small values in tables of a few hundred KiB (no blob files), written unsynced and flushed.
    // 360 bytes no compressor shrinks, the same for the same key.
    let value = |t: usize, i: usize| noise((t * 1_000_003 + i) as u64, 360);
    let mut table_bytes = 0;
    {
        let db = open_db(open(s, &url, &tmp.path().join("writer"), Durability::Local));
        for t in 0..3 {
            for i in 0..2000 {
                db.put(key(t, i).as_bytes(), value(t, i)).unwrap();
            }
            db.flush().unwrap();
        }
        let st = db
            .storage_stats()
            .expect("a bucket store reports its storage");
        assert!(st.location.starts_with("s3://strata-test/cache-"), "{st:?}");
        assert_eq!(st.durability, "local");
        assert!(
            st.writer_epoch >= 1 && st.puts >= 3 && st.bytes_up > 0,
            "{st:?}"
        );
        table_bytes = table_bytes.max(st.bytes_up / 3);
    }
    // Another machine, whose cache may hold one byte of tables.
    let config = strata_bucket::BucketConfig {
        cache_size: Some(1),
        ..s.config(&url, tmp.path().join("small"), Durability::Local)
    };
    let db = open_db(BucketFs::open(&config).unwrap());
    let before = db.storage_stats().unwrap();
    assert_eq!(get(&db, &key(1, 500)), Some(value(1, 500)));
    let one = db.storage_stats().unwrap();
    let (gets, down) = (one.gets - before.gets, one.bytes_down - before.bytes_down);
    eprintln!("one cold read: {gets} GETs, {down} bytes down, of a {table_bytes}-byte table");
    // The footer, the index and filter, and the data block's page: not the table.
    assert!(
        down < table_bytes / 2,
        "{down} bytes fetched for one read of a {table_bytes}-byte table"
    );
    for t in 0..3 {
        for i in (0..2000).step_by(13) {
            assert_eq!(get(&db, &key(t, i)), Some(value(t, i)), "{}", key(t, i));
        }
    }
    let st = db.storage_stats().unwrap();
    assert!(st.cache_misses >= 1, "{st:?}");
    drop(db);
    // Closed, nothing holds the tables: the next open, past the bound, lets them go.
    let fs = BucketFs::open(&config).unwrap();
    let cached: Vec<_> = std::fs::read_dir(fs.root())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    assert!(cached.is_empty(), "kept past the bound: {cached:?}");
    let db = open_db(fs);
    assert_eq!(get(&db, &key(2, 1999)), Some(value(2, 1999)));
}

#[test]
fn a_file_past_a_piece_goes_up_in_parts_and_comes_back_whole() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("multipart");
    let tmp = tempfile::tempdir().unwrap();
    // 20 MiB no compressor shrinks: a blob file of three pieces (8 + 8 + 4 MiB).
    let big = noise(0x9e37_79b9_7f4a_7c15, 20 << 20);
    let plan = strata_bucket::FaultPlan::new();
    let config = strata_bucket::BucketConfig {
        faults: Some(plan.clone()),
        ..s.config(&url, tmp.path().join("writer"), Durability::Local)
    };
    {
        let db = open_db(BucketFs::open(&config).unwrap());
        db.put_with(&synced(), b"big", &big).unwrap();
        let before = db.storage_stats().unwrap();
        // The first upload try is refused: the whole upload is tried again.
        plan.inject(
            strata_bucket::Request::Put,
            "/data/",
            strata_bucket::Fault::Refuse,
            1,
        );
        db.flush().unwrap();
        let after = db.storage_stats().unwrap();
        assert_eq!(plan.injected(), 1);
        // Starting the upload, three parts, completing it: one request each.
        assert!(
            after.puts - before.puts >= 5,
            "{} PUTs to place a 20 MiB blob file",
            after.puts - before.puts
        );
        assert!(after.bytes_up - before.bytes_up >= 20 << 20);
    }
    let db = open_db(open(s, &url, &tmp.path().join("other"), Durability::Local));
    let got = get(&db, "big").expect("the big value");
    assert!(
        got == big,
        "the value read back differs ({} bytes)",
        got.len()
    );
}

#[test]
fn a_failed_engine_open_lets_the_cache_directory_go() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("failed-open");
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let fs = open(s, &url, &cache, Durability::Local);
    let root = fs.root().to_path_buf();
    // No store there, and none to be made: the engine refuses.
    let refused = strata_engine::Db::open(
        &root,
        strata_engine::Options {
            create_if_missing: false,
            filesystem: Arc::new(fs),
            ..strata_engine::Options::default()
        },
    );
    assert!(refused.is_err());
    drop(refused);
    // The next open in this process gets the directory: nothing kept the first one's lock.
    let db = open_db(open(s, &url, &cache, Durability::Local));
    db.put_with(&synced(), b"k", b"v").unwrap();
}

/// The record numbers in the bucket's log, oldest first.
fn log_records(s: &Seaweed, url: &strata_bucket::BucketUrl) -> Vec<u64> {
    let client = strata_bucket::Client::connect(
        url,
        Some(&s.endpoint),
        Some(&crate::support::seaweed::credentials()),
    )
    .unwrap();
    client
        .list("log/")
        .unwrap()
        .iter()
        .filter_map(|k| k.strip_prefix("log/")?.parse().ok())
        .collect()
}

#[test]
fn a_writer_paused_past_its_successors_checkpoints_is_still_fenced() {
    let Some(s) = sw() else { return };
    let url = s.fresh_url("paused");
    let tmp = tempfile::tempdir().unwrap();
    let old = open_db(open(s, &url, &tmp.path().join("old"), Durability::Local));
    old.put_with(&synced(), b"before", b"1").unwrap();
    old.flush().unwrap();
    // The old writer "pauses" here. A successor claims the next record, and writes until its
    // checkpoints have let it delete the records before them, its own claim included.
    let claim = log_records(s, &url).last().copied().unwrap() + 1;
    let new = open_db(open(s, &url, &tmp.path().join("new"), Durability::Remote));
    let mut written = 0;
    while log_records(s, &url)
        .first()
        .is_some_and(|&first| first <= claim)
    {
        for _ in 0..100 {
            new.put_with(&synced(), format!("new{written}").as_bytes(), b"v")
                .unwrap();
            written += 1;
        }
        assert!(written < 20_000, "the successor's claim was never deleted");
    }
    // Back from its pause, the old writer's `bucket` write takes the free record number its
    // successor's deleted claim had: it must not count.
    let late = strata_engine::WriteOptions {
        durability: Some(Durability::Remote),
        ..synced()
    };
    let e = old.put_with(&late, b"late", b"2").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    let e = old.put_with(&synced(), b"later", b"3").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    drop(old);
    drop(new);
    let check = open_db(open(s, &url, &tmp.path().join("check"), Durability::Remote));
    assert_eq!(get(&check, "before").as_deref(), Some(&b"1"[..]));
    assert!(get(&check, &format!("new{}", written - 1)).is_some());
    assert_eq!(get(&check, "late"), None);
}
