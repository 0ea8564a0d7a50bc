//! Faults between the store and a real SeaweedFS: lost answers, refusals, slowness, an
//! unreachable bucket, a server that ignores conditional writes, and SeaweedFS itself stopped
//! under a write load. Nothing acknowledged is lost; a writer is fenced only by another writer.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::seaweed::{self, Seaweed};
use crate::support::{self, synced};
use strata_bucket::{BucketConfig, BucketFs, BucketUrl, Durability, Fault, FaultPlan, Request};
use strata_engine::{Db, ErrorKind, FileSystem};

fn config(s: &Seaweed, url: &BucketUrl, cache: &Path, plan: &Arc<FaultPlan>) -> BucketConfig {
    BucketConfig {
        faults: Some(plan.clone()),
        patience: Duration::from_secs(2),
        ..s.config(url, cache.to_path_buf(), Durability::Remote)
    }
}

fn open_db(config: &BucketConfig) -> Db {
    support::open_db(BucketFs::open(config).unwrap())
}

/// Every key in `keys` is in the store, read through a fresh cache.
fn assert_all_there(s: &Seaweed, url: &BucketUrl, keys: &[String]) {
    let tmp = tempfile::tempdir().unwrap();
    let db = open_db(&s.config(url, tmp.path().join("check"), Durability::Remote));
    for k in keys {
        assert!(
            db.get(k.as_bytes()).unwrap().is_some(),
            "{k} was acknowledged and is lost"
        );
    }
}

#[test]
fn a_lost_answer_is_settled_by_reading_back_never_taken_for_a_fence() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("lost-answer");
    let tmp = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let db = open_db(&config(s, &url, tmp.path(), &plan));
    // The record lands but its answer is lost: the retry finds its own record (a 412, then the
    // same bytes read back).
    plan.inject(Request::Put, "/log/", Fault::LoseAnswer, 1);
    db.put_with(&synced(), b"a", b"1").unwrap();
    // An upload's answer lost: the object is there, with the length sent.
    plan.inject(Request::Put, "/data/", Fault::LoseAnswer, 1);
    db.put_with(&synced(), b"b", b"2").unwrap();
    db.flush().unwrap();
    // Refused outright, then a slow answer: tried again, and on.
    plan.inject(Request::Put, "/log/", Fault::Refuse, 2);
    plan.inject(
        Request::Put,
        "/log/",
        Fault::Delay(Duration::from_millis(300)),
        1,
    );
    db.put_with(&synced(), b"c", b"3").unwrap();
    assert_eq!(plan.injected(), 5);
    drop(db);
    assert_all_there(s, &url, &["a".into(), "b".into(), "c".into()]);
}

#[test]
fn an_unreachable_bucket_holds_writes_back_then_fails_them_and_the_store_resumes() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("unreachable");
    let tmp = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let db = open_db(&config(s, &url, tmp.path(), &plan));
    db.put_with(&synced(), b"before", b"1").unwrap();
    db.flush().unwrap();
    plan.set_unreachable(true);
    // Reads of what the cache holds go on.
    assert!(db.get(b"before").unwrap().is_some());
    let started = Instant::now();
    let e = db.put_with(&synced(), b"during", b"2").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    // Its record went unanswered: the caller is told the write may still appear.
    assert!(e.to_string().contains("may still appear"), "{e}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "not held back: {:?}",
        started.elapsed()
    );
    let e = db.put_with(&synced(), b"during-2", b"2").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    plan.set_unreachable(false);
    // Back: the next write resumes the store by itself.
    db.put_with(&synced(), b"after", b"3").unwrap();
    db.flush().unwrap();
    drop(db);
    assert_all_there(s, &url, &["before".into(), "after".into()]);
}

#[test]
fn a_server_that_ignores_conditional_writes_is_refused_for_writing() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("no-conditions");
    let tmp = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    plan.ignore_conditions(true);
    let e = BucketFs::open(&config(s, &url, tmp.path(), &plan)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotSupported, "{e}");
    assert!(e.to_string().contains("If-None-Match"), "{e}");
    // An honest server whose answer to the probe's first PUT was lost is not taken for one.
    let honest = FaultPlan::new();
    honest.inject(Request::Put, "/probe/", Fault::LoseAnswer, 1);
    let opened = BucketFs::open(&config(s, &url, &tmp.path().join("honest"), &honest));
    assert_eq!(honest.injected(), 1);
    opened.unwrap();
}

#[test]
fn seaweedfs_stopped_under_a_write_load_loses_nothing_acknowledged() {
    // A server of its own, to stop and start.
    let t0 = Instant::now();
    let Some(mut s) = Seaweed::start() else {
        return;
    };
    eprintln!("started in {:?}", t0.elapsed());
    let outage = Duration::from_secs(
        std::env::var("STRATA_BUCKET_OUTAGE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(8),
    );
    let url = s.fresh_url("outage");
    let tmp = tempfile::tempdir().unwrap();
    let cfg = BucketConfig {
        patience: Duration::from_secs(3),
        ..s.config(&url, tmp.path().join("writer"), Durability::Remote)
    };
    let db = Arc::new(open_db(&cfg));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut acked, mut failed) = (Vec::new(), 0usize);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("k{i:06}");
                match db.put_with(&synced(), key.as_bytes(), b"v") {
                    Ok(()) => acked.push(key),
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
                        failed += 1;
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
                if i % 50 == 49 {
                    let _ = db.flush();
                }
                i += 1;
            }
            (acked, failed)
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    s.stop();
    std::thread::sleep(outage);
    s.resume();
    eprintln!("resumed at {:?}", t0.elapsed());
    // Writes go on by themselves once it is back.
    let resumed_at = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let (acked, failed) = writer.join().unwrap();
    eprintln!("writer joined at {:?}", t0.elapsed());
    eprintln!(
        "{} writes acknowledged, {failed} failed during a {outage:?} outage",
        acked.len()
    );
    assert!(failed > 0, "no write failed during the outage");
    db.put_with(&synced(), b"last", b"v").unwrap();
    let _ = resumed_at;
    drop(db);
    let mut keys = acked;
    keys.push("last".into());
    assert_all_there(&s, &url, &keys);
}

#[test]
fn a_read_of_fetched_pages_is_not_held_up_by_another_reads_fetch() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("pages-apart");
    let tmp = tempfile::tempdir().unwrap();
    let key = |i: u32| format!("key{i:06}");
    // About 700 KiB of incompressible values: one table of about a dozen 64 KiB pages.
    let value = |i: u32| -> Vec<u8> {
        (0..100u32)
            .map(|j| ((i.wrapping_mul(2_654_435_761) ^ j.wrapping_mul(40_503)) >> 7) as u8)
            .collect()
    };
    {
        let db = open_db(&s.config(&url, tmp.path().join("writer"), Durability::Local));
        for i in 0..6000 {
            db.put(key(i).as_bytes(), value(i)).unwrap();
        }
        db.flush().unwrap();
    }
    // A new cache: the table is read a page at a time.
    let plan = FaultPlan::new();
    let cfg = BucketConfig {
        patience: Duration::from_secs(5),
        ..config(s, &url, &tmp.path().join("reader"), &plan)
    };
    let db = Arc::new(open_db(&cfg));
    // Its footer, index and filter pages, and the first data page.
    assert_eq!(&*db.get(key(0).as_bytes()).unwrap().unwrap(), &value(0)[..]);
    plan.set_unreachable(true);
    let far = {
        let db = db.clone();
        std::thread::spawn(move || db.get(key(3000).as_bytes()).map(|v| v.map(|v| v.to_vec())))
    };
    while plan.injected() == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Another block of the first page: there already, so answered while the other read waits
    // out the outage (before, it waited for the other read's fetch to give up).
    assert_eq!(
        &*db.get(key(100).as_bytes()).unwrap().unwrap(),
        &value(100)[..]
    );
    assert!(
        !far.is_finished(),
        "the far read gave up before the near one was answered"
    );
    let e = far.join().unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    // Its pages were given up, not lost: the next read fetches them.
    plan.set_unreachable(false);
    assert_eq!(
        &*db.get(key(3000).as_bytes()).unwrap().unwrap(),
        &value(3000)[..]
    );
}

#[test]
fn entries_queue_while_a_record_is_being_written_and_go_in_the_next() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("queue-aside");
    let tmp = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let fs = Arc::new(BucketFs::open(&config(s, &url, tmp.path(), &plan)).unwrap());
    let root = fs.root().to_path_buf();
    let table = |n: u32| root.join(format!("{n:06}.sst"));
    let queued = |fs: &BucketFs| fs.storage_stats().unwrap().upload_queue;
    drop(fs.create(&table(10)).unwrap());
    let before = fs.records_written();
    // The record with that file's entry is held up on its way.
    plan.inject(
        Request::Put,
        "/log/",
        Fault::Delay(Duration::from_secs(2)),
        1,
    );
    let slow = {
        let (fs, root) = (fs.clone(), root.clone());
        std::thread::spawn(move || fs.sync_dir(&root))
    };
    while plan.injected() == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Meanwhile a new file's entry queues at once (before, it waited for that PUT) and counts.
    drop(fs.create(&table(11)).unwrap());
    assert!(
        !slow.is_finished(),
        "the file was created only after the record landed"
    );
    assert_eq!(queued(&fs), 1);
    // Syncs waiting meanwhile: the first writes the next record, the second finds its entries
    // landed with it.
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let (fs, root) = (fs.clone(), root.clone());
            std::thread::spawn(move || fs.sync_dir(&root))
        })
        .collect();
    slow.join().unwrap().unwrap();
    for w in waiting {
        w.join().unwrap().unwrap();
    }
    assert_eq!(fs.records_written() - before, 2);
    assert_eq!(queued(&fs), 0);
}

#[test]
fn records_go_on_while_a_checkpoint_is_being_written() {
    let Some(s) = seaweed::shared() else { return };
    let url = s.fresh_url("checkpoint-aside");
    let tmp = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let fs = Arc::new(BucketFs::open(&config(s, &url, tmp.path(), &plan)).unwrap());
    let root = fs.root().to_path_buf();
    plan.inject(
        Request::Put,
        "/checkpoint/",
        Fault::Delay(Duration::from_secs(5)),
        1,
    );
    // A record per file until one of them is followed by a checkpoint, held up on its way.
    let checkpointing = {
        let (fs, root, plan) = (fs.clone(), root.clone(), plan.clone());
        std::thread::spawn(move || {
            let mut n = 100;
            while plan.injected() == 0 {
                drop(fs.create(&root.join(format!("{n:06}.sst"))).unwrap());
                fs.sync_dir(&root).unwrap();
                n += 1;
            }
        })
    };
    while plan.injected() == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Meanwhile the next record is written (before, it waited for the checkpoint, whose PUT
    // reaches the server only after the delay).
    let client = crate::versions::client(s, &url);
    let checkpoints = || client.list("checkpoint/").unwrap().len();
    let (records, written) = (fs.records_written(), checkpoints());
    drop(fs.create(&root.join("000010.sst")).unwrap());
    fs.sync_dir(&root).unwrap();
    assert_eq!(
        checkpoints(),
        written,
        "the record waited for the checkpoint"
    );
    assert_eq!(fs.records_written(), records + 1);
    checkpointing.join().unwrap();
    assert_eq!(checkpoints(), written + 1);
}
