//! A background failure (here: the disk refuses new tables) stops writes with that error instead of
//! hanging them, while reads keep working. A full disk (ENOSPC) resumes by itself once it has room
//! again; any other failure stops writes until a reopen, which recovers everything.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::HookedFs;
use strata_engine::{Db, Error, ErrorKind, Options, StdFileSystem};

/// The real filesystem, except that creating `.sst` files fails with `errno` while `failing` is set.
fn refusing_tables(errno: i32, failing: Arc<AtomicBool>) -> Options {
    let disk = Arc::new(HookedFs::new(Arc::new(StdFileSystem), move |path| {
        if failing.load(Ordering::SeqCst) && path.extension().is_some_and(|e| e == "sst") {
            return Err(Error::Io {
                context: format!("create {}", path.display()),
                source: std::io::Error::from_raw_os_error(errno),
            });
        }
        Ok(())
    }));
    let mut o = Options::default();
    o.write_buffer_size = 16 << 10;
    o.filesystem = disk;
    o
}

/// Fills a store, then makes its disk refuse tables with `errno` and has a flush fail. Returns
/// the store, its options and the switch.
fn a_failed_flush(errno: i32, dir: &std::path::Path) -> (Db, Options, Arc<AtomicBool>) {
    let failing = Arc::new(AtomicBool::new(false));
    let opts = refusing_tables(errno, failing.clone());
    let db = Db::open(dir, opts.clone()).unwrap();
    for i in 0..100u32 {
        db.put(format!("before{i:03}"), "v").unwrap();
    }
    db.flush().unwrap();
    failing.store(true, Ordering::SeqCst);

    db.put("unflushed", "still readable").unwrap();
    let flush = db.flush();
    assert!(
        matches!(flush, Err(Error::Background(_)) | Err(Error::Io { .. })),
        "{flush:?}"
    );
    (db, opts, failing)
}

/// Writes 10,000 keys, each refused with an error of `kind` that carries the OS's text for
/// `errno` (the platform's own: WASI's differ from Linux's).
fn every_write_fails(db: &Db, kind: ErrorKind, errno: i32) {
    let says = std::io::Error::from_raw_os_error(errno).to_string();
    let mut failures = 0;
    for i in 0..10_000u32 {
        match db.put(format!("after{i:05}"), [0u8; 100]) {
            Ok(()) => {}
            Err(e) => {
                assert_eq!(e.kind(), kind, "{e}");
                assert!(e.to_string().contains(&says), "{e} lacks {says}");
                failures += 1;
            }
        }
    }
    assert_eq!(
        failures, 10_000,
        "no write is accepted after the background error"
    );
    assert!(db.properties().background_error.is_some());
    assert_eq!(db.get("before050").unwrap().unwrap(), &b"v"[..]);
    assert_eq!(
        db.get("unflushed").unwrap().unwrap(),
        &b"still readable"[..]
    );
}

#[test]
fn a_failed_flush_fails_writes_promptly_and_reads_keep_working() {
    let dir = crate::common::tempdir();
    let (db, opts, failing) = a_failed_flush(libc::EIO, dir.path());
    // Every later write fails with the background error instead of waiting for a flush that
    // cannot happen (a hang here would hang the test).
    every_write_fails(&db, ErrorKind::Background, libc::EIO);
    // A healthy disk does not clear an I/O error: only a reopen does.
    failing.store(false, Ordering::SeqCst);
    assert_eq!(db.put("x", "y").unwrap_err().kind(), ErrorKind::Background);
    assert_eq!(db.resume().unwrap_err().kind(), ErrorKind::Background);
    drop(db);

    // A reopen replays the WAL and loses nothing acknowledged.
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(
        db.get("unflushed").unwrap().unwrap(),
        &b"still readable"[..]
    );
    assert_eq!(db.get("before099").unwrap().unwrap(), &b"v"[..]);
    db.put("healthy", "again").unwrap();
}

#[test]
fn a_full_disk_stops_writes_until_it_has_room_then_they_resume() {
    let dir = crate::common::tempdir();
    let (db, opts, failing) = a_failed_flush(libc::ENOSPC, dir.path());
    every_write_fails(&db, ErrorKind::NoSpace, libc::ENOSPC);
    assert_eq!(db.resume().unwrap_err().kind(), ErrorKind::NoSpace);

    // Room again: the next write flushes what the failed flush left and goes through.
    failing.store(false, Ordering::SeqCst);
    db.put("resumed", "yes").unwrap();
    assert!(db.properties().background_error.is_none());
    assert!(
        common::tables_on_disk(dir.path()) >= 2,
        "the memtable that failed to flush was flushed by the resume"
    );
    for i in 0..2_000u32 {
        db.put(format!("later{i:05}"), [1u8; 100]).unwrap();
    }
    db.flush().unwrap();
    drop(db);

    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(
        db.get("unflushed").unwrap().unwrap(),
        &b"still readable"[..]
    );
    assert_eq!(db.get("resumed").unwrap().unwrap(), &b"yes"[..]);
    assert_eq!(db.get("later01999").unwrap().unwrap(), &[1u8; 100][..]);
    assert!(
        db.get("after00000").unwrap().is_none(),
        "a refused write never happened"
    );
}
