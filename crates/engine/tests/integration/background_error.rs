//! A background failure (here: the disk refuses new tables) stops writes with that error instead of
//! hanging them, while reads keep working; a reopen on a healthy disk recovers everything.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::CreateHook;
use strata_engine::{Db, Error, Options, StdFileSystem};

#[test]
fn a_failed_flush_fails_writes_promptly_and_reads_keep_working() {
    let dir = crate::common::tempdir();
    // The real filesystem, except that creating `.sst` files fails with ENOSPC while `full` is set.
    let full = Arc::new(AtomicBool::new(false));
    let disk = {
        let full = full.clone();
        Arc::new(CreateHook::new(Arc::new(StdFileSystem), move |path| {
            if full.load(Ordering::SeqCst) && path.extension().is_some_and(|e| e == "sst") {
                return Err(Error::Io {
                    context: format!("create {}", path.display()),
                    source: std::io::Error::from_raw_os_error(libc::ENOSPC),
                });
            }
            Ok(())
        }))
    };
    let opts = {
        let mut o = Options::default();
        o.write_buffer_size = 16 << 10;
        o.filesystem = disk;
        o
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for i in 0..100u32 {
        db.put(format!("before{i:03}"), "v").unwrap();
    }
    db.flush().unwrap();
    full.store(true, Ordering::SeqCst);

    db.put("unflushed", "still readable").unwrap();
    let flush = db.flush();
    assert!(
        matches!(flush, Err(Error::Background(_)) | Err(Error::Io { .. })),
        "{flush:?}"
    );
    // Every later write fails with the background error instead of waiting for a flush that
    // cannot happen (a hang here would hang the test).
    let mut failures = 0;
    for i in 0..10_000u32 {
        match db.put(format!("after{i:05}"), [0u8; 100]) {
            Ok(()) => {}
            Err(Error::Background(msg)) => {
                assert!(msg.contains("No space left"), "{msg}");
                failures += 1;
            }
            Err(e) => panic!("unexpected error {e}"),
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
    drop(db);

    // The disk has room again: a reopen replays the WAL and loses nothing acknowledged.
    full.store(false, Ordering::SeqCst);
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(
        db.get("unflushed").unwrap().unwrap(),
        &b"still readable"[..]
    );
    assert_eq!(db.get("before099").unwrap().unwrap(), &b"v"[..]);
    db.put("healthy", "again").unwrap();
}
