//! Durability barriers (`Db::sync_wal`, a synced empty batch) against power loss, and writes
//! resuming after the log itself hit a full disk, with writers running at the time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use strata_engine::fs::{FaultError, FaultInjectionFs, FsOp};
use strata_engine::{Db, ErrorKind, Options, WriteBatch, WriteOptions};

fn options(fs: &FaultInjectionFs) -> Options {
    let mut o = Options::default();
    o.filesystem = Arc::new(fs.clone());
    o.write_buffer_size = 64 << 10;
    o
}

fn synced() -> WriteOptions {
    WriteOptions {
        sync: true,
        ..Default::default()
    }
}

/// Power goes: every later call fails, and the disk keeps only what was synced.
fn power_loss(fs: &FaultInjectionFs, db: Db) {
    fs.deactivate();
    drop(db);
    fs.drop_unsynced_data().unwrap();
    fs.clear_faults();
}

fn key(i: u64) -> String {
    format!("key{i:06}")
}

/// Unsynced writes are lost by a power loss unless a barrier follows them; `barrier` is the one
/// under test.
fn a_barrier_makes_earlier_writes_durable(barrier: impl Fn(&Db)) {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    for i in 0..100 {
        db.put(key(i), "before").unwrap();
    }
    barrier(&db);
    for i in 100..200 {
        db.put(key(i), "after").unwrap();
    }
    power_loss(&fs, db);

    let db = Db::open(dir.path(), options(&fs)).unwrap();
    for i in 0..100 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), &b"before"[..], "{i}");
    }
    assert!(
        db.get(key(150)).unwrap().is_none(),
        "unsynced writes after the barrier were lost: the power loss was real"
    );
}

#[test]
fn sync_wal_makes_every_earlier_write_durable() {
    a_barrier_makes_earlier_writes_durable(|db| db.sync_wal().unwrap());
}

#[test]
fn a_synced_empty_batch_is_a_barrier_too() {
    a_barrier_makes_earlier_writes_durable(|db| db.write(WriteBatch::new(), &synced()).unwrap());
}

/// One thread writes without sync while another calls `sync_wal`: whatever was acknowledged
/// before a barrier began survives the power loss right after it returns.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_barrier_covers_another_threads_acknowledged_writes() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let db = Arc::new(Db::open(dir.path(), options(&fs)).unwrap());
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) && i < 200_000 {
                db.put(key(i), [7u8; 64]).unwrap();
                i += 1;
                acked.store(i, Ordering::SeqCst);
            }
        })
    };
    while acked.load(Ordering::SeqCst) < 2_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut covered = 0;
    for _ in 0..20 {
        covered = acked.load(Ordering::SeqCst);
        db.sync_wal().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let db = Arc::into_inner(db).unwrap();
    power_loss(&fs, db);

    let db = Db::open(dir.path(), options(&fs)).unwrap();
    for i in 0..covered {
        assert!(db.get(key(i)).unwrap().is_some(), "write {i} of {covered}");
    }
}

/// The log's appends fail with ENOSPC (two writers at it): writes fail with `NoSpace`, reads go
/// on; once the disk has room the next write cuts the failed group from the log, moves to a new
/// log and is accepted. Every acknowledged synced write survives a power loss, and no refused
/// write is ever seen.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_full_log_resumes_once_space_returns_and_loses_nothing() {
    for op in [FsOp::Write, FsOp::Sync] {
        let dir = crate::common::tempdir();
        let fs = FaultInjectionFs::new();
        let db = Arc::new(Db::open(dir.path(), options(&fs)).unwrap());
        for i in 0..50 {
            db.put_with(&synced(), key(i), "early").unwrap();
        }
        fs.fail_after(&[op], 0, FaultError::NoSpace);
        let full_errors = Arc::new(AtomicU64::new(0));
        // Two writers, each retrying its key until it is acknowledged.
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let (db, full_errors) = (db.clone(), full_errors.clone());
                std::thread::spawn(move || {
                    let mut refused = Vec::new();
                    for n in 0..200u64 {
                        let i = 1_000 + w * 1_000 + n;
                        let value = format!("writer{w}");
                        loop {
                            match db.put_with(&synced(), key(i), &value) {
                                Ok(()) => break,
                                Err(e) => {
                                    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
                                    full_errors.fetch_add(1, Ordering::SeqCst);
                                    refused.push(i);
                                    std::thread::sleep(Duration::from_millis(1));
                                }
                            }
                        }
                    }
                    refused
                })
            })
            .collect();
        while full_errors.load(Ordering::SeqCst) < 20 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Reads keep working while writes are stopped.
        assert_eq!(db.get(key(10)).unwrap().unwrap(), &b"early"[..]);
        assert!(db.properties().background_error.is_some());
        fs.clear_faults();
        for w in writers {
            w.join().unwrap();
        }
        assert!(db.properties().background_error.is_none(), "{op:?}");
        db.put_with(&synced(), "last", "synced").unwrap();
        let db = Arc::into_inner(db).unwrap();
        power_loss(&fs, db);

        let db = Db::open(dir.path(), options(&fs)).unwrap();
        for i in 0..50 {
            assert_eq!(db.get(key(i)).unwrap().unwrap(), &b"early"[..]);
        }
        for w in 0..2u64 {
            for n in 0..200u64 {
                let got = db.get(key(1_000 + w * 1_000 + n)).unwrap();
                assert_eq!(got.unwrap(), format!("writer{w}").as_bytes(), "{op:?}");
            }
        }
        assert_eq!(db.get("last").unwrap().unwrap(), &b"synced"[..]);
    }
}

/// A write refused by a full log changes nothing: after the resume and a reopen its key is
/// absent, though its record had been handed to the OS before the sync failed.
#[test]
fn a_write_refused_by_a_full_log_never_happened() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    db.put_with(&synced(), "kept", "1").unwrap();
    fs.fail_after(&[FsOp::Sync], 0, FaultError::NoSpace);
    let e = db.put_with(&synced(), "refused", "1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    assert!(db.get("refused").unwrap().is_none());
    let still = db.put("also refused", "1").unwrap_err();
    assert_eq!(still.kind(), ErrorKind::NoSpace, "{still}");
    fs.clear_faults();
    db.resume().unwrap();
    db.sync_wal().unwrap();
    drop(db);

    let db = Db::open(dir.path(), options(&fs)).unwrap();
    assert_eq!(db.get("kept").unwrap().unwrap(), &b"1"[..]);
    assert!(db.get("refused").unwrap().is_none());
    assert!(db.get("also refused").unwrap().is_none());
}

/// A tmpfs of `bytes` mounted on a new temporary directory, unmounted on drop; `None` where
/// this process may not mount (not root), which fails the run when `CI` is set.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(bytes: u64) -> Option<SmallDisk> {
        let dir = crate::common::tempdir();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}")])
            .args(["tmpfs".as_ref(), dir.path().as_os_str()])
            .output()
            .is_ok_and(|o| o.status.success());
        if !mounted {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but a tmpfs cannot be mounted for the full-disk test"
            );
            eprintln!("skipped: cannot mount a tmpfs (not root)");
            return None;
        }
        Some(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// A real full disk (a 6 MiB tmpfs): writes fail with `NoSpace` while reads go on, and once a
/// file beside the store is removed, writes resume by themselves; every acknowledged write is
/// there after a reopen.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs a process to mount a tmpfs")]
fn a_real_full_disk_stops_writes_and_they_resume_when_space_is_freed() {
    let Some(disk) = SmallDisk::mount(6 << 20) else {
        return;
    };
    let store = disk.dir.path().join("store");
    let filler = disk.dir.path().join("filler");
    let mut o = Options::default();
    o.write_buffer_size = 256 << 10;
    let db = Db::open(&store, o.clone()).unwrap();
    // Leave little room: the store fills it within a few hundred writes.
    std::fs::write(&filler, vec![1u8; 4 << 20]).unwrap();
    let mut acked = 0u64;
    let mut full = None;
    for i in 0..100_000u64 {
        match db.put_with(&synced(), key(i), [9u8; 1000]) {
            Ok(()) => acked = i + 1,
            Err(e) => {
                full = Some(e);
                break;
            }
        }
    }
    let full = full.expect("the disk never filled");
    assert_eq!(full.kind(), ErrorKind::NoSpace, "{full}");
    assert!(acked > 0);
    assert_eq!(db.get(key(0)).unwrap().unwrap(), &[9u8; 1000][..]);
    let again = db.put("still full", "x").unwrap_err();
    assert_eq!(again.kind(), ErrorKind::NoSpace, "{again}");

    std::fs::remove_file(&filler).unwrap();
    db.put_with(&synced(), "after", "room again").unwrap();
    for i in 0..200u64 {
        db.put(key(1_000_000 + i), [3u8; 1000]).unwrap();
    }
    drop(db);

    let db = Db::open(&store, o).unwrap();
    for i in 0..acked {
        assert!(db.get(key(i)).unwrap().is_some(), "acknowledged write {i}");
    }
    assert_eq!(db.get("after").unwrap().unwrap(), &b"room again"[..]);
    assert!(db.get("still full").unwrap().is_none());
    assert!(db.get(key(1_000_199)).unwrap().is_some());
}
