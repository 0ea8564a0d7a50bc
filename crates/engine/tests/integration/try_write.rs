//! `Db::try_write`: a batch that needs no wait commits at once, as `write` would; any other is
//! handed back untouched, and writing it then loses nothing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use strata_engine::{Db, Options, TryWrite, WriteBatch, WriteOptions};

fn one(key: &str, value: &[u8]) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(key, value);
    b
}

fn unsynced() -> WriteOptions {
    WriteOptions::default()
}

#[test]
fn a_write_that_needs_no_wait_commits_at_once_and_survives_a_reopen() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..100 {
            let batch = one(&format!("k{i:03}"), format!("v{i}").as_bytes());
            // Each commits at its own sequence number: the store's first write is 1.
            assert!(matches!(
                db.try_write(batch, &unsynced()).unwrap(),
                TryWrite::Committed(seq) if seq == i + 1
            ));
        }
        assert_eq!(db.get("k042").unwrap().unwrap(), &b"v42"[..]);
        assert_eq!(db.statistics().write_batches, 100);
        // An empty batch writes nothing and needs nothing.
        assert!(matches!(
            db.try_write(WriteBatch::new(), &unsynced()).unwrap(),
            TryWrite::Committed(100)
        ));
        // The WAL holds them, unflushed: a read-only open beside the writer replays them.
        let reader = Db::open_read_only(dir.path(), Options::default()).unwrap();
        assert_eq!(db.statistics().flushes, 0);
        for i in 0..100 {
            assert_eq!(
                reader.get(format!("k{i:03}")).unwrap().unwrap(),
                format!("v{i}").as_bytes()
            );
        }
    }
}

#[test]
fn a_write_that_would_wait_is_handed_back_untouched_and_written_then() {
    let dir = crate::common::tempdir();
    let mut o = Options::default();
    o.enable_blob_files = true;
    o.min_blob_size = 1000;
    o.write_buffer_size = 64 << 10;
    // Background work only when asked for: L0 piles up and stays.
    o.executor = strata_engine::Executor::Inline;
    o.level0_file_num_compaction_trigger = 1;
    o.level0_slowdown_writes_trigger = 2;
    o.level0_stop_writes_trigger = 4;
    let db = Db::open(dir.path(), o).unwrap();
    // Each of these must wait: trying again at once would not help.
    let handed_back = |batch: WriteBatch, opts: &WriteOptions, why: &str| {
        let count = batch.len();
        let back = match db.try_write(batch, opts).unwrap() {
            TryWrite::MustWait(back) => back,
            other => panic!("{why}: {other:?}"),
        };
        assert_eq!(back.len(), count, "{why}: changed");
        db.write(back, opts).unwrap();
    };
    let synced = WriteOptions {
        sync: true,
        ..Default::default()
    };
    handed_back(one("synced", b"1"), &synced, "a sync");
    handed_back(
        one("blob", &[7u8; 4000]),
        &unsynced(),
        "a value for a blob file",
    );
    let mut append = WriteBatch::new();
    append.append("synced", "2");
    handed_back(append, &unsynced(), "a partial write");
    assert_eq!(db.get("synced").unwrap().unwrap(), &b"12"[..]);
    assert_eq!(db.get("blob").unwrap().unwrap(), &[7u8; 4000][..]);
    // A full memtable must be switched first.
    let mut i = 0;
    let full = loop {
        let batch = one(&format!("fill{i:06}"), &[1u8; 500]);
        i += 1;
        match db.try_write(batch, &unsynced()).unwrap() {
            TryWrite::Committed(_) => {}
            TryWrite::MustWait(back) => break back,
            TryWrite::Busy(_) => panic!("busy with no other writer"),
        }
        assert!(i < 1000, "the memtable never filled");
    };
    db.write(full, &unsynced()).unwrap();
    assert_eq!(
        db.get(format!("fill{:06}", i - 1)).unwrap().unwrap(),
        &[1u8; 500][..]
    );
    // Writes slowed by tables piling up in L0.
    for n in 0..2 {
        db.put(format!("l0-{n}"), "x").unwrap();
        db.flush().unwrap();
    }
    handed_back(one("stalled", b"s"), &unsynced(), "writes slowed down");
    assert_eq!(db.get("stalled").unwrap().unwrap(), &b"s"[..]);
}

/// Writers that sync (and so lead groups and wait) and writers that try at once, together:
/// every write lands, whichever way it went.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn tries_beside_waiting_writers_lose_nothing() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let handed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..2 {
            let db = &db;
            s.spawn(move || {
                let synced = WriteOptions {
                    sync: true,
                    ..Default::default()
                };
                for i in 0..300 {
                    db.write(one(&format!("w{t}-{i}"), b"w"), &synced).unwrap();
                }
            });
        }
        for t in 0..2 {
            let (db, handed) = (&db, &handed);
            s.spawn(move || {
                for i in 0..2000 {
                    let batch = one(&format!("t{t}-{i}"), b"t");
                    if let Some(back) = db.try_write(batch, &unsynced()).unwrap().into_batch() {
                        handed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        db.write(back, &unsynced()).unwrap();
                    }
                }
            });
        }
    });
    for t in 0..2 {
        for i in 0..300 {
            assert!(db.get(format!("w{t}-{i}")).unwrap().is_some(), "w{t}-{i}");
        }
        for i in 0..2000 {
            assert!(db.get(format!("t{t}-{i}")).unwrap().is_some(), "t{t}-{i}");
        }
    }
    println!(
        "{} of 4000 tries handed back",
        handed.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// A store on a network or FUSE filesystem (as `statfs` tells at open) may wait on a server or
/// another process for any append: every try is handed back to be written where waiting is
/// fine, and writing it then loses nothing.
#[test]
fn a_store_whose_appends_are_not_local_hands_every_try_back() {
    let dir = crate::common::tempdir();
    let mut o = Options::default();
    o.filesystem = std::sync::Arc::new(
        crate::common::HookedFs::new(
            std::sync::Arc::new(strata_engine::fs::StdFileSystem),
            |_| Ok(()),
        )
        .not_local(),
    );
    let db = Db::open(dir.path(), o).unwrap();
    let TryWrite::MustWait(batch) = db.try_write(one("k", b"v"), &unsynced()).unwrap() else {
        panic!("committed on a filesystem that may wait");
    };
    db.write(batch, &unsynced()).unwrap();
    assert_eq!(db.get("k").unwrap().unwrap(), &b"v"[..]);
}
