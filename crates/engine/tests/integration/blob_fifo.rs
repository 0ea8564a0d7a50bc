//! FIFO eviction of blob files: the oldest files go first once the store passes its size limit,
//! and what they held reads as absent, never as outdated values.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::sync::Arc;

use strata_engine::{BlobDeletionReason, Db, ManualClock, Options, WriteBatch, WriteOptions};

use crate::blob::{BlobEvents, NOW, big, options};

/// Small blob files, and a FIFO limit of eight of them, without garbage collection.
fn fifo_options(clock: &Arc<ManualClock>) -> Options {
    let mut o = options(clock);
    o.blob_file_size = 8 << 10;
    o.max_db_size = 64 << 10;
    o.enable_blob_garbage_collection = false;
    o
}

/// `fifo_options`, uncompressed (sizes are exact), with no background threads: a file filled by
/// a put is sealed by that put; one filled by an appended piece waits for `maintenance`, or for
/// eviction.
fn inline_fifo_options(clock: &Arc<ManualClock>) -> Options {
    let mut o = fifo_options(clock);
    o.blob_compression = strata_engine::Compression::None;
    o.executor = strata_engine::Executor::Inline;
    o
}

#[test]
fn fifo_eviction_drops_the_oldest_files_first_and_keeps_newer_values() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let mut o = fifo_options(&clock);
    let events = BlobEvents::attach(&mut o);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    db.put("small", "inline values are never evicted").unwrap();
    let n = 600u32;
    for i in 0..n {
        db.put(format!("k{i:04}"), big(i, b'e')).unwrap();
    }
    // A full file waits for the flush job to seal it and counts as live meanwhile: the limit
    // holds once that job has run (on a loaded machine it may not have, as the puts return).
    db.flush().unwrap();
    let s = db.statistics();
    assert!(s.blob_fifo_evicted_files > 0, "{s:?}");
    assert_eq!(
        events.deleted(BlobDeletionReason::Evicted),
        (s.blob_fifo_evicted_files, s.blob_fifo_evicted_keys)
    );
    let props = db.properties_cf(&db.default_cf()).unwrap();
    assert!(props.live_bytes <= o.max_db_size, "{props:?}");
    // Evicted keys read as absent, from the oldest on; the newest survive; nothing is wrong.
    let present: Vec<bool> = (0..n)
        .map(|i| match db.get(format!("k{i:04}")).unwrap() {
            Some(v) => {
                assert_eq!(v.as_ref(), big(i, b'e').as_slice());
                true
            }
            None => false,
        })
        .collect();
    let first_present = present.iter().position(|p| *p).unwrap();
    assert!(first_present > 0);
    assert!(
        present[first_present..].iter().all(|p| *p),
        "eviction left a hole"
    );
    assert!(db.get("small").unwrap().is_some());
    // An overwrite of an evicted key lives on, through compaction and reopen.
    db.put("k0000", "rewritten").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(db.statistics().compaction_blob_indexes_evicted > 0);
    assert_eq!(db.get("k0000").unwrap().unwrap().as_ref(), b"rewritten");
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.get("k0000").unwrap().unwrap().as_ref(), b"rewritten");
    assert!(
        db.get("k0001").unwrap().is_none(),
        "eviction survives reopen"
    );
    assert!(db.get(format!("k{:04}", n - 1)).unwrap().is_some());
}

/// A value whose first piece lies in a file FIFO evicts and whose appended piece lies in a newer
/// file: once a compaction turns the entry into a deletion, the newer file counts the appended
/// piece as garbage (else that file could never go).
#[test]
fn an_evicted_extent_list_frees_its_pieces_in_files_still_present() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    // Files are sealed, and evicted, on the write that fills them. With background threads a
    // file waiting for its seal counts as live, so a loaded machine's eviction could take the
    // piece's file along with x's in one pass.
    let o = inline_fifo_options(&clock);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    db.put("x", crate::common::noise(1, 6_000)).unwrap();
    // Seals x's file, so the appended piece goes to a newer one.
    for i in 0..20 {
        db.put(format!("a{i:02}"), big(i, b'a')).unwrap();
    }
    let newest = |db: &Db| {
        let files = db.properties_cf(&db.default_cf()).unwrap().blob_files;
        files.iter().map(|f| f.number).max().unwrap()
    };
    let mut batch = WriteBatch::new();
    batch.append("x", crate::common::noise(2, 2_000));
    db.write(batch, &WriteOptions::default()).unwrap();
    let piece_file = newest(&db);
    // Newer values until x's first file is evicted (but not the piece's).
    let mut i = 0;
    while db.get("x").unwrap().is_some() {
        db.put(format!("k{i:04}"), big(i, b'e')).unwrap();
        i += 1;
        assert!(i < 10_000, "x's file was never evicted");
    }
    let garbage_of = |db: &Db| {
        let files = db.properties_cf(&db.default_cf()).unwrap().blob_files;
        files
            .iter()
            .find(|f| f.number == piece_file)
            .map(|f| f.garbage_bytes)
    };
    let before = garbage_of(&db).expect("the piece's file was evicted too");
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(db.statistics().compaction_blob_indexes_evicted > 0);
    // The piece's record: header, key, and 2000 bytes.
    let after = garbage_of(&db).expect("the piece's file was evicted too");
    assert_eq!(after - before, 21 + 1 + 2_000);
}

/// A file filled by appended pieces waits for the flush job's seal (here, with no background
/// threads, for `maintenance`), and it holds the oldest values: eviction seals it and takes it
/// first, never a newer file around it, and the store keeps to its limit meanwhile.
#[test]
fn a_full_file_waiting_for_its_seal_goes_before_newer_ones() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let o = inline_fifo_options(&clock);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let mut order = Vec::new();
    for i in 0..12u32 {
        let key = format!("p{i:02}");
        db.put(&key, crate::common::noise(u64::from(i), 3_000))
            .unwrap();
        let mut batch = WriteBatch::new();
        batch.append(&key, crate::common::noise(u64::from(i) + 100, 2_000));
        db.write(batch, &WriteOptions::default()).unwrap();
        order.push(key);
    }
    for i in 0..300u32 {
        let key = format!("k{i:04}");
        db.put(&key, big(i, b'e')).unwrap();
        order.push(key);
        let live = db.properties_cf(&db.default_cf()).unwrap().live_bytes;
        // A file being written may take the store past its limit until it is full, and a
        // piece may take a file past `blob_file_size` by a value and a piece.
        assert!(
            live <= o.max_db_size + 2 * o.blob_file_size,
            "{live} after {i} puts"
        );
    }
    assert!(db.statistics().blob_fifo_evicted_files > 0);
    let present: Vec<bool> = order.iter().map(|k| db.get(k).unwrap().is_some()).collect();
    let first_present = present.iter().position(|p| *p).unwrap();
    assert!(first_present > 0, "nothing was evicted: {present:?}");
    assert!(
        present[first_present..].iter().all(|p| *p),
        "eviction left a hole: {present:?}"
    );
}
