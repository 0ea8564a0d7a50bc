//! The files of a live store as a backup copies them (`Db::live_files`): a copy cut to the
//! listed lengths opens to every write acknowledged before the list, while writers, flushes,
//! compactions and blob housekeeping go on; and nothing listed is deleted until the list ends.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use strata_engine::{Db, Error, ErrorKind, LiveFiles, Options, WriteBatch, WriteOptions};

use crate::common::synced;
use crate::db::small_options;

fn busy_options() -> Options {
    let mut o = small_options();
    o.create_if_missing = true;
    o.cf.write_buffer_size = 64 << 10;
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 1024;
    o
}

/// `busy_options` on a disk that fails when told to.
fn on_faulty_disk() -> (strata_engine::fs::FaultInjectionFs, Options) {
    let fs = strata_engine::fs::FaultInjectionFs::new();
    let mut o = busy_options();
    o.filesystem = Arc::new(fs.clone());
    (fs, o)
}

fn value(i: u64) -> Vec<u8> {
    // Every third value goes to a blob file.
    let len = if i.is_multiple_of(3) { 1500 } else { 40 };
    format!("{i:08}-").repeat(len / 9 + 1).into_bytes()[..len].to_vec()
}

/// Copies the image into `to`, each file cut to its listed length, `pause` between files.
fn copy_image(live: &LiveFiles, to: &Path, pause: &dyn Fn()) {
    std::fs::create_dir_all(to).unwrap();
    for f in &live.files {
        let mut from = std::fs::File::open(live.dir.join(&f.name))
            .unwrap_or_else(|e| panic!("{} listed but gone: {e}", f.name));
        let mut bytes = vec![0u8; f.len as usize];
        from.read_exact(&mut bytes)
            .unwrap_or_else(|e| panic!("{} shorter than listed: {e}", f.name));
        std::fs::write(to.join(&f.name), bytes).unwrap();
        pause();
    }
    std::fs::write(to.join("CURRENT"), &live.current).unwrap();
}

/// The listed prefix of every file still holds what was copied: a listed length past the bytes
/// a writer fills (pages reserved ahead, a footer to come) shows here.
fn assert_unchanged(live: &LiveFiles, copy: &Path) {
    for f in &live.files {
        let mut now = std::fs::File::open(live.dir.join(&f.name)).unwrap();
        let mut bytes = vec![0u8; f.len as usize];
        now.read_exact(&mut bytes).unwrap();
        assert!(
            bytes == std::fs::read(copy.join(&f.name)).unwrap(),
            "{} changed within its listed {} bytes during the copy",
            f.name,
            f.len
        );
    }
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_copy_of_a_busy_store_opens_to_every_write_acknowledged_before_the_list() {
    let dir = crate::common::tempdir();
    let db = Arc::new(Db::open(dir.path(), busy_options()).unwrap());
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let writing = {
        let (db, acked, done) = (db.clone(), acked.clone(), done.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !done.load(Ordering::Acquire) {
                let mut batch = WriteBatch::new();
                batch.put(format!("k{i:08}"), value(i));
                // One value grows by appends, its extents in blob files.
                batch.append("log", format!("{i:08}\n").repeat(150));
                db.write(batch, &WriteOptions::default()).unwrap();
                acked.store(i + 1, Ordering::Release);
                i += 1;
            }
        })
    };
    // Column families made and written to while backups list: each one a listed WAL names is
    // in the listed MANIFEST.
    let families = Arc::new(AtomicU64::new(0));
    let creating = {
        let (db, families, done) = (db.clone(), families.clone(), done.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(Ordering::Acquire) && n < 200 {
                let cf = db
                    .create_cf(&format!("cf{n:03}"), Default::default())
                    .unwrap();
                db.put_cf(&cf, "made", value(n)).unwrap();
                n += 1;
                families.store(n, Ordering::Release);
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
        })
    };
    let churn = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                db.compact_range(None, None).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    for round in 0..3 {
        while acked.load(Ordering::Acquire) < 2_000 * (round + 1) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let before = acked.load(Ordering::Acquire);
        let made = families.load(Ordering::Acquire);
        let live = db.live_files(false).unwrap();
        let copy = dir.path().join(format!("copy{round}"));
        // Slowly, so compactions replace what was listed while it is copied.
        copy_image(&live, &copy, &|| {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        assert_unchanged(&live, &copy);
        drop(live);
        let restored = Db::open(&copy, small_options()).unwrap();
        for i in 0..before {
            let got = restored.get(format!("k{i:08}")).unwrap();
            assert!(
                got.as_deref() == Some(&value(i)[..]),
                "round {round}: k{i:08} of {before} acknowledged is {}",
                if got.is_none() { "missing" } else { "wrong" }
            );
        }
        for n in 0..made {
            let cf = restored.cf(&format!("cf{n:03}")).unwrap();
            let got = restored.get_cf(&cf, "made").unwrap();
            assert!(
                got.as_deref() == Some(&value(n)[..]),
                "round {round}: cf{n:03}"
            );
        }
        let log = restored.get("log").unwrap().unwrap();
        assert!(
            log.len() >= before as usize * 1350,
            "the appended value lost appends"
        );
        assert_eq!(log.len() % 1350, 0, "a torn append");
        for (n, line) in log.chunks(1350).enumerate() {
            assert!(
                line == format!("{n:08}\n").repeat(150).as_bytes(),
                "append {n} is wrong"
            );
        }
        restored.close().unwrap();
    }
    done.store(true, Ordering::Release);
    writing.join().unwrap();
    creating.join().unwrap();
    churn.join().unwrap();
    assert!(
        db.statistics().tables_deleted > 0,
        "compactions deleted nothing: the test proves little"
    );
}

#[test]
fn listed_files_stay_until_the_list_is_dropped() {
    let dir = crate::common::tempdir();
    let mut o = busy_options();
    o.cf.disable_auto_compactions = true;
    let db = Db::open(dir.path(), o).unwrap();
    for round in 0..4u64 {
        for i in 0..200u64 {
            db.put(format!("k{i:04}"), value(round * 1000 + i)).unwrap();
        }
        db.flush().unwrap();
    }
    let live = db.live_files(false).unwrap();
    let tables: Vec<_> = live
        .files
        .iter()
        .filter(|f| f.name.ends_with(".sst"))
        .map(|f| f.name.clone())
        .collect();
    assert_eq!(tables.len(), 4, "{:?}", live.files);
    // Replaces every listed table and makes the old blob values garbage.
    db.compact_range(None, None).unwrap();
    for f in &live.files {
        let len = std::fs::metadata(dir.path().join(&f.name))
            .unwrap_or_else(|e| panic!("{} deleted while listed: {e}", f.name))
            .len();
        assert!(len >= f.len, "{} shrank", f.name);
    }
    let copy = dir.path().join("copy");
    copy_image(&live, &copy, &|| {});
    drop(live);
    for t in tables {
        assert!(!dir.path().join(&t).exists(), "{t} outlived the list");
    }
    let restored = Db::open(&copy, small_options()).unwrap();
    for i in 0..200u64 {
        assert!(restored.get(format!("k{i:04}")).unwrap().as_deref() == Some(&value(3000 + i)[..]));
    }
}

/// Past `max_held_deletion_bytes` the store takes back what a backup keeps: the files go, the
/// properties count them until then, and the list says why it no longer keeps them.
#[test]
fn a_hold_past_its_limit_is_revoked_and_says_why() {
    let dir = crate::common::tempdir();
    let mut o = busy_options();
    o.cf.disable_auto_compactions = true;
    let fill = |db: &Db, round: u64| {
        for i in 0..200u64 {
            db.put(format!("k{i:04}"), value(round * 1000 + i)).unwrap();
        }
        db.flush().unwrap();
    };
    let sizes = {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        (0..2).for_each(|r| fill(&db, r));
        db.properties().total_sst_bytes
    };
    // Room for one round's tables, not for two.
    o.max_held_deletion_bytes = sizes * 3 / 4;
    let db = Db::open(dir.path(), o).unwrap();
    let live = db.live_files(false).unwrap();
    live.still_kept().unwrap();
    fill(&db, 2);
    db.compact_range(None, None).unwrap();
    let e = live.still_kept().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy);
    assert!(e.to_string().contains("max_held_deletion_bytes"), "{e}");
    // Deleted from a thread of their own, not the compaction's.
    let gone = || {
        live.files
            .iter()
            .filter(|f| f.name.ends_with(".sst"))
            .filter(|f| !dir.path().join(&f.name).exists())
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while gone() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the revoked hold still kept its tables"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let p = db.properties();
    assert_eq!((p.held_deletions, p.held_deletion_bytes), (0, 0));
    // A new list keeps again, and counts what it keeps (the WAL a flush lets go of).
    drop(live);
    let again = db.live_files(false).unwrap();
    db.put("small", "x").unwrap();
    db.flush().unwrap();
    again.still_kept().unwrap();
    let p = db.properties();
    assert!(p.held_deletions > 0 && p.held_deletion_bytes > 0, "{p:?}");
    drop(again);
    assert_eq!(db.properties().held_deletions, 0);
}

#[test]
fn a_flush_first_puts_unlogged_writes_in_the_image() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), busy_options()).unwrap();
    let unlogged = WriteOptions {
        disable_wal: true,
        ..WriteOptions::default()
    };
    db.put_with(&unlogged, "unlogged", "v").unwrap();
    db.put("logged", "v").unwrap();
    for (flush, has_unlogged) in [(false, false), (true, true)] {
        let live = db.live_files(flush).unwrap();
        let copy = dir.path().join(format!("copy-{flush}"));
        copy_image(&live, &copy, &|| {});
        let restored = Db::open(&copy, small_options()).unwrap();
        assert!(restored.get("logged").unwrap().is_some());
        assert_eq!(
            restored.get("unlogged").unwrap().is_some(),
            has_unlogged,
            "flush {flush}"
        );
    }
}

#[test]
fn a_closed_store_lists_nothing() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), busy_options()).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
    assert!(matches!(db.live_files(false), Err(Error::Closed)));
}

#[test]
fn a_read_only_store_has_no_live_files_to_give() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), busy_options()).unwrap();
    db.put("k", "v").unwrap();
    let reader = Db::open_read_only(dir.path(), small_options()).unwrap();
    assert!(matches!(reader.live_files(false), Err(Error::ReadOnly(_))));
    drop(db);
}

/// Writes stopped on an I/O error (only a reopen resumes them) leave every acknowledged write
/// on disk: the store still lists them as an image, cut before the refused write, so it can
/// be backed up while it waits for its operator.
#[test]
fn a_store_whose_writes_stopped_is_listed_as_it_stands() {
    use strata_engine::fs::{FaultError, FsOp};
    let dir = crate::common::tempdir();
    let (fs, o) = on_faulty_disk();
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..300 {
        db.put(format!("k{i:04}"), value(i)).unwrap();
    }
    db.put_with(&synced(), "last", "acknowledged").unwrap();
    fs.fail_after(&[FsOp::Write, FsOp::Sync], 0, FaultError::Eio);
    db.put_with(&synced(), "refused", "no").unwrap_err();
    let e = db.put("after", "no").unwrap_err();
    assert!(!e.kind().is_transient(), "{e}");

    let live = db.live_files(false).unwrap();
    let copy = dir.path().join("copy");
    copy_image(&live, &copy, &|| {});
    drop(live);
    let restored = Db::open(&copy, small_options()).unwrap();
    for i in 0..300 {
        let got = restored.get(format!("k{i:04}")).unwrap();
        assert_eq!(got.as_deref(), Some(&value(i)[..]), "k{i:04}");
    }
    assert_eq!(
        restored.get("last").unwrap().as_deref(),
        Some(&b"acknowledged"[..])
    );
    assert_eq!(restored.get("refused").unwrap(), None);
    assert_eq!(restored.get("after").unwrap(), None);
}

/// After a failed sync the system may have dropped bytes it had accepted: the store refuses to
/// list an image it cannot trust, and says to reopen it first; reopened, it lists again.
#[test]
fn a_store_stopped_by_a_failed_sync_lists_nothing_until_reopened() {
    use strata_engine::fs::{FaultError, FsOp};
    let dir = crate::common::tempdir();
    let (fs, o) = on_faulty_disk();
    let db = Db::open(dir.path(), o.clone()).unwrap();
    db.put("k", "v").unwrap();
    fs.fail_after(&[FsOp::Sync], 0, FaultError::Eio);
    db.put_with(&synced(), "refused", "no").unwrap_err();
    let e = db.live_files(false).unwrap_err();
    assert!(e.to_string().contains("failed sync"), "{e}");
    assert!(e.to_string().contains("reopen"), "{e}");
    fs.clear_faults();
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    let live = db.live_files(false).unwrap();
    assert!(live.files.iter().any(|f| f.name.ends_with(".log")));
}

/// A hold revoked while the listing reads an older WAL's length (the store deleted it for
/// room meanwhile) fails the listing `Busy`, saying why, as a copy that found it gone would;
/// never `NotFound`, which would read as damage.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_hold_revoked_while_listing_fails_it_busy() {
    use std::sync::OnceLock;
    let dir = crate::common::tempdir();
    let db_slot: Arc<OnceLock<Arc<Db>>> = Arc::new(OnceLock::new());
    let fs = crate::common::HookedFs::new(Arc::new(strata_engine::fs::StdFileSystem), |_| Ok(()))
        .on_open({
            let db_slot = db_slot.clone();
            let fired = Arc::new(AtomicBool::new(false));
            move |path: &Path| {
                let Some(db) = db_slot.get() else {
                    return Ok(());
                };
                // The oldest WAL, which only family "a" still needs: its flush lets it go, past
                // a limit of one byte, so the hold is revoked and the WAL deleted.
                if path.extension().is_some_and(|e| e == "log")
                    && !fired.swap(true, Ordering::SeqCst)
                {
                    let a = db.cf("a").unwrap();
                    db.flush_cf(&a).unwrap();
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while path.exists() {
                        assert!(std::time::Instant::now() < deadline, "never deleted");
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                }
                Ok(())
            }
        });
    let mut o = small_options();
    o.create_if_missing = true;
    o.max_held_deletion_bytes = 1;
    o.filesystem = Arc::new(fs);
    let db = Arc::new(Db::open(dir.path(), o).unwrap());
    let a = db.create_cf("a", Default::default()).unwrap();
    db.put_cf(&a, "in a", "v").unwrap();
    // The default family moves to a new WAL; the old one stays for "a".
    db.put("k", "v").unwrap();
    db.flush_cf(&db.default_cf()).unwrap();
    let _ = db_slot.set(db.clone());
    let e = db.live_files(false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert!(e.to_string().contains("max_held_deletion_bytes"), "{e}");
}
