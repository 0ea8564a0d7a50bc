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
use strata_engine::{Db, ErrorKind, Options, WriteBatch};

use crate::common::synced;

fn options(fs: &FaultInjectionFs) -> Options {
    let mut o = Options::default();
    o.filesystem = Arc::new(fs.clone());
    o.write_buffer_size = 64 << 10;
    o
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
/// A store holding the synced key "kept", whose synced write of "refused" then failed with
/// ENOSPC when the log was synced (the record had reached the OS); the fault stays on.
fn a_refused_synced_write(dir: &std::path::Path, fs: &FaultInjectionFs) -> Db {
    let db = Db::open(dir, options(fs)).unwrap();
    db.put_with(&synced(), "kept", "1").unwrap();
    fs.fail_after(&[FsOp::Sync], 0, FaultError::NoSpace);
    let e = db.put_with(&synced(), "refused", "1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    db
}

#[test]
fn a_write_refused_by_a_full_log_never_happened() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let db = a_refused_synced_write(dir.path(), &fs);
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
#[cfg(target_os = "linux")]
struct SmallDisk {
    _disk: strata_engine::fs::SmallDisk,
    dir: tempfile::TempDir,
}

#[cfg(target_os = "linux")]
impl SmallDisk {
    fn mount(bytes: u64) -> Option<SmallDisk> {
        let dir = crate::common::tempdir();
        let disk = strata_engine::fs::SmallDisk::for_test(dir.path(), bytes)?;
        Some(SmallDisk { _disk: disk, dir })
    }
}

/// A real full disk (a 6 MiB tmpfs): writes fail with `NoSpace` while reads go on, and once a
/// file beside the store is removed, writes resume by themselves; every acknowledged write is
/// there after a reopen.
#[test]
#[cfg(target_os = "linux")]
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
    let (acked, refused) = fill_the_disk(&db, 0);
    // Reads go on while writes are refused.
    assert!(db.get(key(acked[0])).unwrap().is_some());

    std::fs::remove_file(&filler).unwrap();
    db.put_with(&synced(), "after", "room again").unwrap();
    for i in 0..200u64 {
        db.put(key(1_000_000 + i), [3u8; 1000]).unwrap();
    }
    drop(db);

    let db = Db::open(&store, o).unwrap();
    for &i in &acked {
        assert!(db.get(key(i)).unwrap().is_some(), "acknowledged write {i}");
    }
    for &i in &refused {
        assert!(db.get(key(i)).unwrap().is_none(), "refused write {i}");
    }
    assert_eq!(db.get("after").unwrap().unwrap(), &b"room again"[..]);
    assert!(db.get(key(1_000_199)).unwrap().is_some());
}

/// Writes 1000-byte values under fresh keys until 20 in a row are refused for a full disk;
/// returns the keys acknowledged and those refused.
#[cfg(target_os = "linux")]
fn fill_the_disk(db: &Db, first: u64) -> (Vec<u64>, Vec<u64>) {
    // A refusal frees what the failed write had taken, so a later one may fit again. Each key
    // is written once.
    let (mut acked, mut refused, mut in_a_row) = (Vec::new(), Vec::new(), 0);
    for i in first..first + 100_000 {
        // Bytes that do not compress, so the tables fill the disk too.
        let value: Vec<u8> = (0..1000u64)
            .map(|j| ((i * 1000 + j).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
            .collect();
        match db.put_with(&synced(), key(i), value) {
            Ok(()) => {
                acked.push(i);
                in_a_row = 0;
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
                refused.push(i);
                in_a_row += 1;
                if in_a_row == 20 {
                    break;
                }
            }
        }
    }
    assert_eq!(in_a_row, 20, "the disk never filled");
    assert!(!acked.is_empty());
    (acked, refused)
}

/// A store that filled its disk can shrink: with a disk reserve, two threads delete every key
/// while data writes are still refused; the reserve is given up for the deletions alone, a
/// compaction frees the deleted keys' room, writes go on, and the reserve is held again.
#[test]
#[cfg(target_os = "linux")]
fn deletions_go_through_on_a_full_disk_and_free_its_room() {
    let Some(disk) = SmallDisk::mount(8 << 20) else {
        return;
    };
    let store = disk.dir.path().join("store");
    let reserve = store.join("RESERVE");
    let mut o = Options::default();
    o.write_buffer_size = 256 << 10;
    o.reserved_disk_bytes = 1 << 20;
    let db = Arc::new(Db::open(&store, o.clone()).unwrap());
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), 1 << 20);
    let (acked, refused) = fill_the_disk(&db, 0);
    // A data write on the full disk does not get the reserve.
    let e = db.put_with(&synced(), "more", [1u8; 1000]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    assert!(reserve.exists());
    assert_eq!(db.statistics().disk_reserve_releases, 0);

    let deleters: Vec<_> = acked
        .chunks(acked.len().div_ceil(2))
        .map(|keys| {
            let (db, keys) = (db.clone(), keys.to_vec());
            std::thread::spawn(move || {
                for part in keys.chunks(50) {
                    let mut batch = WriteBatch::new();
                    for &i in part {
                        batch.delete(key(i));
                    }
                    db.write(batch, &synced()).unwrap();
                }
            })
        })
        .collect();
    for d in deleters {
        d.join().unwrap();
    }
    // Given up once (compactions the resume queued may have written it again since).
    assert_eq!(db.statistics().disk_reserve_releases, 1);
    db.compact_range(None, None).unwrap();
    // The compaction freed the room, and the reserve is held again.
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), 1 << 20);
    // The room is back: data writes go on.
    for i in 0..500u64 {
        db.put_with(&synced(), key(500_000 + i), [3u8; 1000])
            .unwrap();
    }
    drop(Arc::into_inner(db).unwrap());
    // The next open holds the reserve again, and nothing acknowledged is lost.
    let db = Db::open(&store, o).unwrap();
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), 1 << 20);
    for &i in acked.iter().chain(&refused) {
        assert!(db.get(key(i)).unwrap().is_none(), "deleted or refused {i}");
    }
    for i in 0..500u64 {
        assert!(
            db.get(key(500_000 + i)).unwrap().is_some(),
            "acknowledged {i}"
        );
    }
}

/// A write refused by a failed log sync, then a close with no resume in between: the close cuts
/// the record off instead of syncing it, so the next open does not replay it.
#[test]
fn a_refused_write_stays_refused_when_the_store_closes_without_resuming() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let db = a_refused_synced_write(dir.path(), &fs);
    drop(db);
    fs.clear_faults();

    let db = Db::open(dir.path(), options(&fs)).unwrap();
    assert_eq!(db.get("kept").unwrap().unwrap(), &b"1"[..]);
    assert!(db.get("refused").unwrap().is_none());
}

/// The default column family's first write after a flush fails while another column family has
/// data in the log: nothing of the refused write is in the damaged log, so once the other one
/// flushes, the resume lets go of that log (deletes it) instead of keeping it live for it.
#[test]
fn a_resume_lets_go_of_the_damaged_log_a_refused_write_had_pinned() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let options = || {
        let mut o = options(&fs);
        o.create_missing_column_families = true;
        o.column_families.insert(
            "other".into(),
            strata_engine::ColumnFamilyOptions::default(),
        );
        o
    };
    let db = Db::open(dir.path(), options()).unwrap();
    db.put("before", "1").unwrap();
    db.flush().unwrap();
    db.put_cf(&db.cf("other").unwrap(), "elsewhere", "3")
        .unwrap();
    fs.fail_after(&[FsOp::Write], 0, FaultError::NoSpace);
    assert_eq!(
        db.put("refused", "1").unwrap_err().kind(),
        ErrorKind::NoSpace
    );
    fs.clear_faults();
    db.put_with(&synced(), "after", "2").unwrap();
    let logs = crate::common::files_with_extension(dir.path(), "log");
    assert_eq!(logs.len(), 1, "only the new log is live: {logs:?}");
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get("before").unwrap().unwrap(), &b"1"[..]);
    assert_eq!(db.get("after").unwrap().unwrap(), &b"2"[..]);
    let other = db.get_cf(&db.cf("other").unwrap(), "elsewhere").unwrap();
    assert_eq!(other.unwrap(), &b"3"[..]);
    assert!(db.get("refused").unwrap().is_none());
}

/// A full disk takes back first what a backup keeps past its use (`Db::live_files`): the files
/// go before writes resume, and the list says the disk filled.
#[test]
fn a_full_disk_takes_back_what_a_backup_keeps() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let mut o = options(&fs);
    o.cf.disable_auto_compactions = true;
    let db = Db::open(dir.path(), o).unwrap();
    for round in 0..3 {
        for i in 0..100 {
            db.put(key(i), format!("round {round}")).unwrap();
        }
        db.flush().unwrap();
    }
    let live = db.live_files(false).unwrap();
    db.compact_range(None, None).unwrap();
    let kept: Vec<_> = live
        .files
        .iter()
        .filter(|f| f.name.ends_with(".sst"))
        .map(|f| dir.path().join(&f.name))
        .collect();
    assert_eq!(kept.len(), 3);
    assert!(kept.iter().all(|p| p.exists()) && db.properties().held_deletions >= 3);
    fs.fail_after(&[FsOp::Write], 0, FaultError::NoSpace);
    let e = db.put_with(&synced(), "full", "x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    // The next write tries to resume: the held files go first.
    let _ = db.put_with(&synced(), "full", "x");
    assert!(
        kept.iter().all(|p| !p.exists()),
        "a full disk left {kept:?}"
    );
    let e = live.still_kept().unwrap_err();
    assert!(e.to_string().contains("the disk filled"), "{e}");
    fs.clear_faults();
    db.put_with(&synced(), "room", "again").unwrap();
    assert_eq!(db.get(key(7)).unwrap().unwrap(), &b"round 2"[..]);
}
