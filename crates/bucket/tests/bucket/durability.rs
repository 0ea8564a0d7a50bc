//! Durability chosen per write: on a store of either default, a write may ask for less (`Local`:
//! this machine's disk, under the lease) or more (`Remote`: the bucket) than the store's own
//! level. Another machine taking the store over sees exactly the writes that reached the bucket,
//! and every write before each of them (the bucket's copy of a WAL is a prefix of the local one).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::support::seaweed::{self, Seaweed};
use crate::support::{get, open_db};
use strata_bucket::{BucketConfig, BucketFs, BucketUrl, Durability, Fault, FaultPlan, Request};
use strata_engine::{Db, WriteOptions};

fn synced_to(durability: Durability) -> WriteOptions {
    WriteOptions {
        sync: true,
        durability: Some(durability),
        ..WriteOptions::default()
    }
}

fn store_default() -> WriteOptions {
    WriteOptions {
        sync: true,
        ..WriteOptions::default()
    }
}

fn fs(s: &Seaweed, url: &BucketUrl, cache: &Path, d: Durability) -> BucketFs {
    BucketFs::open(&s.config(url, cache.to_path_buf(), d)).unwrap()
}

/// Puts `key` with `opts` and returns how many log records that write added.
fn records_for(db: &Db, fs: &BucketFs, key: &str, opts: &WriteOptions) -> u64 {
    let before = fs.records_written();
    db.put_with(opts, key.as_bytes(), b"v").unwrap();
    fs.records_written() - before
}

/// What another machine sees of `keys` once it takes the store over (the first writer is still
/// running: the loss of its machine, as far as the bucket can tell).
fn seen_by_another_machine(s: &Seaweed, url: &BucketUrl, keys: &[&str]) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(fs(s, url, &tmp.path().join("other"), Durability::Local));
    keys.iter()
        .filter(|k| get(&db, k).is_some())
        .map(|k| k.to_string())
        .collect()
}

#[test]
fn a_write_may_ask_for_more_or_less_than_the_stores_durability() {
    let Some(s) = seaweed::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();

    // A `local` store: its synced writes stay on this disk unless one asks for the bucket.
    let url = s.fresh_url("per-write-local");
    let first = fs(s, &url, &tmp.path().join("a"), Durability::Local);
    let db = open_db(first.clone());
    assert_eq!(records_for(&db, &first, "l1", &store_default()), 0);
    assert_eq!(
        records_for(&db, &first, "l2", &synced_to(Durability::Local)),
        0
    );
    assert!(records_for(&db, &first, "r3", &synced_to(Durability::Remote)) >= 1);
    assert_eq!(records_for(&db, &first, "l4", &store_default()), 0);
    assert_eq!(
        seen_by_another_machine(s, &url, &["l1", "l2", "r3", "l4"]),
        ["l1", "l2", "r3"],
        "a `Remote` write carries the writes before it, and only those"
    );
    drop(db);

    // A `bucket` store: a write may settle for this disk.
    let url = s.fresh_url("per-write-bucket");
    let first = fs(s, &url, &tmp.path().join("b"), Durability::Remote);
    let db = open_db(first.clone());
    assert_eq!(
        records_for(&db, &first, "l1", &synced_to(Durability::Local)),
        0
    );
    assert!(records_for(&db, &first, "b2", &store_default()) >= 1);
    assert_eq!(
        records_for(&db, &first, "l3", &synced_to(Durability::Local)),
        0
    );
    // An empty synced batch is a barrier at the level it asks for.
    let before = first.records_written();
    db.write(Default::default(), &synced_to(Durability::Remote))
        .unwrap();
    assert!(first.records_written() > before);
    db.put_with(&synced_to(Durability::Local), b"l4", b"v")
        .unwrap();
    assert_eq!(
        seen_by_another_machine(s, &url, &["l1", "b2", "l3", "l4"]),
        ["l1", "b2", "l3"]
    );
}

#[test]
fn writes_of_mixed_durability_from_many_threads_each_get_what_they_asked_for() {
    let Some(s) = seaweed::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let url = s.fresh_url("per-write-mixed");
    let db = Arc::new(open_db(fs(
        s,
        &url,
        &tmp.path().join("a"),
        Durability::Local,
    )));
    // Groups form as they will: whatever a group holds, a `Remote` write in it is not
    // acknowledged before the bucket has it.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut remote = Vec::new();
                for i in 0..40 {
                    let key = format!("t{t}-{i}");
                    let d = if (i + t) % 3 == 0 {
                        Durability::Remote
                    } else {
                        Durability::Local
                    };
                    db.put_with(&synced_to(d), key.as_bytes(), b"v").unwrap();
                    if d == Durability::Remote {
                        remote.push(key);
                    }
                }
                remote
            })
        })
        .collect();
    let remote: Vec<String> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let keys: Vec<&str> = remote.iter().map(String::as_str).collect();
    let seen = seen_by_another_machine(s, &url, &keys);
    assert_eq!(
        seen.len(),
        keys.len(),
        "a `Remote` write was acknowledged and lost"
    );
}

#[test]
fn a_wal_resumed_after_a_failed_remote_sync_sends_what_the_bucket_lacks() {
    let Some(s) = seaweed::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let url = s.fresh_url("per-write-resume");
    let plan = FaultPlan::new();
    let config = BucketConfig {
        faults: Some(plan.clone()),
        patience: Duration::from_millis(500),
        ..s.config(&url, tmp.path().join("a"), Durability::Local)
    };
    let first = BucketFs::open(&config).unwrap();
    let db = open_db(first.clone());
    db.put_with(&synced_to(Durability::Local), b"l1", b"v")
        .unwrap();
    // The bucket goes away: the `Remote` write fails and is not acknowledged...
    plan.set_unreachable(true);
    db.put_with(&synced_to(Durability::Remote), b"failed", b"v")
        .unwrap_err();
    plan.set_unreachable(false);
    // ...and once it is back, the store resumes by itself and the next `Remote` write sends
    // the whole WAL the bucket lacks, from where its copy ends, with no gap.
    db.put_with(&synced_to(Durability::Local), b"l2", b"v")
        .unwrap();
    db.put_with(&synced_to(Durability::Remote), b"r3", b"v")
        .unwrap();
    // An upload refused once on the way changes nothing.
    plan.inject(Request::Put, "/log/", Fault::Refuse, 1);
    db.put_with(&synced_to(Durability::Remote), b"r4", b"v")
        .unwrap();
    let seen = seen_by_another_machine(s, &url, &["l1", "l2", "r3", "r4"]);
    assert_eq!(seen, ["l1", "l2", "r3", "r4"]);
}

/// What another machine sees of `keys` in column family `other` (`o…`) and the default one.
fn seen_in_both(s: &Seaweed, url: &BucketUrl, keys: &[&str]) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(fs(s, url, &tmp.path().join("other"), Durability::Local));
    let other = db.cf("other").unwrap();
    keys.iter()
        .filter(|k| match k.starts_with('o') {
            true => db.get_cf(&other, k.as_bytes()).unwrap().is_some(),
            false => get(&db, k).is_some(),
        })
        .map(|k| k.to_string())
        .collect()
}

/// Puts `key` in `cf` synced to `durability`.
fn put_cf_to(db: &Db, cf: &strata_engine::ColumnFamily, key: &str, durability: Durability) {
    let mut b = strata_engine::WriteBatch::new();
    b.put_cf(cf, key, b"v");
    db.write(b, &synced_to(durability)).unwrap();
}

#[test]
fn across_a_wal_rotation_the_buckets_wals_stay_a_chain_and_a_prefix() {
    let Some(s) = seaweed::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let url = s.fresh_url("per-write-rotation");
    let db = open_db(fs(s, &url, &tmp.path().join("a"), Durability::Local));
    let other = db.create_cf("other", Default::default()).unwrap();
    let main = db.default_cf();
    // The first WAL's copy in the bucket begins with a `bucket` write, then goes on locally.
    put_cf_to(&db, &main, "m1", Durability::Remote);
    put_cf_to(&db, &other, "o1", Durability::Local);
    put_cf_to(&db, &main, "m2", Durability::Local);
    // One column family flushes: a new WAL takes the writes, the old one stays for the other,
    // and the MANIFEST's log number passes it.
    db.flush_cf(&main).unwrap();
    // Another machine opens it now: the old WAL's copy must end in its seal.
    assert_eq!(
        seen_in_both(s, &url, &["m1", "o1", "m2"]),
        ["m1", "o1", "m2"],
        "the sealed WAL's copy was completed, and m2 is in a table"
    );
}

#[test]
fn a_bucket_write_in_a_new_wal_carries_the_older_wals_writes() {
    let Some(s) = seaweed::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let url = s.fresh_url("per-write-older");
    let db = open_db(fs(s, &url, &tmp.path().join("a"), Durability::Local));
    let other = db.create_cf("other", Default::default()).unwrap();
    let main = db.default_cf();
    // Nothing of the first WAL reaches the bucket before the rotation...
    put_cf_to(&db, &other, "o1", Durability::Local);
    put_cf_to(&db, &main, "m1", Durability::Local);
    db.flush_cf(&main).unwrap();
    // ...then a `bucket` write in the new WAL: o1, still only in the old WAL, goes up first.
    put_cf_to(&db, &main, "m2", Durability::Remote);
    assert_eq!(
        seen_in_both(s, &url, &["o1", "m1", "m2"]),
        ["o1", "m1", "m2"]
    );
}

#[test]
fn writers_that_come_during_a_commit_interval_share_its_one_record() {
    let Some(s) = seaweed::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let url = s.fresh_url("per-write-interval");
    let config = BucketConfig {
        commit_interval: Duration::from_millis(500),
        ..s.config(&url, tmp.path().join("a"), Durability::Remote)
    };
    let first = BucketFs::open(&config).unwrap();
    let db = Arc::new(open_db(first.clone()));
    // A record now: the next may go only half a second later.
    db.put_with(&store_default(), b"start", b"v").unwrap();
    let before = first.records_written();
    let start = Arc::new(std::sync::Barrier::new(8));
    let writers: Vec<_> = (0..8)
        .map(|t| {
            let (db, start) = (db.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                db.put_with(&store_default(), format!("w{t}").as_bytes(), b"v")
                    .unwrap();
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    // The first writer's group waited for the interval before it was gathered: all eight in it.
    assert_eq!(first.records_written() - before, 1);
    let keys: Vec<String> = (0..8).map(|t| format!("w{t}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    assert_eq!(seen_by_another_machine(s, &url, &keys).len(), 8);
}

/// A flush deletes an old WAL while a `bucket` write sends what that WAL lacks: the removal must
/// wait for the record carrying its bytes (without it, the WAL vanished between two of its pieces
/// and the write failed, stopping the store; or its removal was logged before its bytes,
/// re-creating it in the bucket).
#[test]
fn a_bucket_write_sending_an_old_wal_is_not_cut_off_by_the_flush_that_deletes_it() {
    let Some(s) = seaweed::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let url = s.fresh_url("per-write-wal-removal");
    let plan = FaultPlan::new();
    let config = BucketConfig {
        faults: Some(plan.clone()),
        ..s.config(&url, tmp.path().join("a"), Durability::Local)
    };
    let first = BucketFs::open(&config).unwrap();
    let cache = first.root().to_path_buf();
    let db = Arc::new(open_db(first));
    // More than one upload piece (8 MiB) in the first WAL, none of it in the bucket yet.
    let value = vec![b'l'; 64 << 10];
    for i in 0..150 {
        db.put(format!("l{i:04}"), &value).unwrap();
    }
    let wals = || {
        let mut names: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log"))
            .collect();
        names.sort();
        names
    };
    let old_wal = wals().pop().unwrap();
    // The flush seals that WAL (a `local` one: its bytes stay here), then takes a second to
    // place its table before it deletes the WAL.
    plan.inject(
        Request::Put,
        ".sst",
        Fault::Delay(Duration::from_secs(1)),
        1,
    );
    let flush = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    let started = std::time::Instant::now();
    while wals().last() == Some(&old_wal) {
        assert!(started.elapsed() < Duration::from_secs(10), "no rotation");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A `bucket` write in the new WAL sends the old one first, piece by piece, the first piece
    // slow to go up: the flush deletes the WAL meanwhile.
    plan.inject(
        Request::Put,
        ".log.",
        Fault::Delay(Duration::from_secs(2)),
        1,
    );
    db.put_with(&synced_to(Durability::Remote), b"r1", b"v")
        .expect("the bucket write");
    flush.join().unwrap().unwrap();
    db.put_with(&synced_to(Durability::Remote), b"r2", b"v")
        .expect("a bucket write after the flush");
    assert!(!wals().contains(&old_wal), "the flush deleted {old_wal}");
    let keys = ["l0000", "l0149", "r1", "r2"];
    assert_eq!(seen_by_another_machine(s, &url, &keys), keys);
    drop(db);
    // Its removal was logged after its bytes: the bucket no longer holds it.
    let other = tmp.path().join("b");
    let db = open_db(fs(s, &url, &other, Durability::Local));
    drop(db);
    assert!(!other.join(&old_wal).exists(), "{old_wal} came back");
}
