//! Damaged WALs: a WAL a newer one replaced is held to its seal, and a WAL cut between records
//! or lost fails the open, naming the file.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::path::{Path, PathBuf};

use strata_engine::{Db, Error, repair_store, verify_store};

use crate::common;
use crate::damage::{copy_store, key, options, value};

/// A store with four WALs on disk: column family `side` is never flushed, so it keeps every WAL
/// alive while the default one is flushed three times, each flush starting a new WAL. Returns
/// the WALs, oldest first.
fn build_with_wals(dir: &Path) -> Vec<PathBuf> {
    let db = Db::open(dir, options()).unwrap();
    let side = db.create_cf("side", Default::default()).unwrap();
    for round in 0..4 {
        for i in 0..20 {
            db.put(key(i), value(i, round)).unwrap();
            db.put_cf(&side, key(i), value(i, round)).unwrap();
        }
        if round < 3 {
            db.flush().unwrap();
        }
    }
    db.close().unwrap();
    let wals = common::files_with_extension(dir, "log");
    assert_eq!(wals.len(), 4, "{wals:?}");
    wals
}

/// The offsets at which a record of a small log (under one 32 KiB block) ends.
fn record_ends(log: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0;
    while at + 7 <= log.len() {
        at += 7 + u16::from_le_bytes([log[at + 4], log[at + 5]]) as usize;
        ends.push(at);
    }
    ends
}

fn corruption_naming(result: Result<Db, Error>, file: &Path, what: &str) {
    let name = file.file_name().unwrap().to_str().unwrap();
    match result {
        Err(e @ Error::Corruption { .. }) => {
            assert!(
                e.to_string().contains(name),
                "{what}: {e} does not name {name}"
            )
        }
        Err(e) => panic!("{what}: {e}, not corruption"),
        Ok(_) => panic!("{what}: opened"),
    }
}

/// A flush of another column family replaces the WAL the default column family's writes (and
/// their blob records) are still in: the WAL is sealed and synced with its blob file, and the
/// newer WAL stays empty. Losing the WAL's end or the blob file's records is damage then.
#[test]
fn a_wal_replaced_by_another_column_familys_flush_is_held_to_its_seal() {
    let pristine = crate::common::tempdir();
    let mut o = options();
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 64;
    let db = Db::open(pristine.path(), o.clone()).unwrap();
    let side = db.create_cf("side", Default::default()).unwrap();
    for i in 0..20 {
        db.put(key(i), value(i, 0).repeat(8)).unwrap();
        db.put_cf(&side, key(i), value(i, 0)).unwrap();
    }
    db.flush_cf(&side).unwrap();
    db.close().unwrap();
    let with_ext = |ext: &str| common::files_with_extension(pristine.path(), ext);
    let wals = with_ext("log");
    let blobs = with_ext("blob");
    let sizes: Vec<u64> = wals
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(
        (wals.len(), blobs.len()),
        (2, 1),
        "{wals:?} {sizes:?} {blobs:?}"
    );
    let (wal, newer) = (&wals[0], &wals[1]);
    assert_eq!(std::fs::metadata(newer).unwrap().len(), 0, "{sizes:?}");

    let bytes = std::fs::read(wal).unwrap();
    let ends = record_ends(&bytes);
    for cut in [ends[0], ends[ends.len() / 2], ends[ends.len() - 2]] {
        let dir = copy_store(pristine.path());
        let path = dir.path().join(wal.file_name().unwrap());
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let what = format!("WAL cut to {cut} of {}", bytes.len());
        assert!(!verify_store(dir.path(), &o).unwrap().is_ok(), "{what}");
        corruption_naming(Db::open(dir.path(), o.clone()), &path, &what);
    }

    let blob = std::fs::read(&blobs[0]).unwrap();
    for cut in [32, blob.len() / 2] {
        let dir = copy_store(pristine.path());
        let path = dir.path().join(blobs[0].file_name().unwrap());
        std::fs::write(&path, &blob[..cut]).unwrap();
        let what = format!("blob file cut to {cut} of {}", blob.len());
        // The sealed WAL vouches for the records: verify blames the blob file as the open does.
        let report = verify_store(dir.path(), &o).unwrap();
        let name = path.file_name().unwrap().to_string_lossy();
        let damaged: Vec<&str> = report.damaged().map(|f| f.name.as_str()).collect();
        assert_eq!(damaged, [name.as_ref()], "{what}");
        corruption_naming(Db::open(dir.path(), o.clone()), &path, &what);
    }

    // Undamaged, every write is there.
    let dir = copy_store(pristine.path());
    let db = Db::open(dir.path(), o).unwrap();
    let side = db.cf("side").unwrap();
    for i in 0..20 {
        let got = db.get(key(i)).unwrap().map(|v| v.to_vec());
        assert_eq!(got, Some(value(i, 0).repeat(8)));
        assert!(db.get_cf(&side, key(i)).unwrap().is_some());
    }
}

#[test]
fn a_wal_cut_between_records_or_lost_fails_the_open() {
    let pristine = crate::common::tempdir();
    let wals = build_with_wals(pristine.path());
    let newest = wals.len() - 1;
    for (i, wal) in wals.iter().enumerate().take(newest) {
        let bytes = std::fs::read(wal).unwrap();
        let ends = record_ends(&bytes);
        assert_eq!(ends.last(), Some(&bytes.len()));
        // Every cut between two records: the one before the seal too. Cut to nothing, the
        // oldest WAL looks like none (the documented gap), so its cuts start after a record.
        let first = if i == 0 { 1 } else { 0 };
        for cut in [0]
            .into_iter()
            .chain(ends[..ends.len() - 1].iter().copied())
            .skip(first)
        {
            let dir = copy_store(pristine.path());
            let name = wal.file_name().unwrap();
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let what = format!("{name:?} cut to {cut} of {}", bytes.len());
            let report = verify_store(dir.path(), &options()).unwrap();
            assert!(!report.is_ok(), "{what}: verify passed");
            corruption_naming(Db::open(dir.path(), options()), &path, &what);
        }
        if i > 0 {
            // A WAL lost in the middle: the seal before it names it.
            let dir = copy_store(pristine.path());
            let path = dir.path().join(wal.file_name().unwrap());
            std::fs::remove_file(&path).unwrap();
            corruption_naming(
                Db::open(dir.path(), options()),
                &path,
                "a middle WAL removed",
            );
        }
    }

    // The newest WAL lost whole: the seal before it names it.
    let dir = copy_store(pristine.path());
    let path = dir.path().join(wals[newest].file_name().unwrap());
    std::fs::remove_file(&path).unwrap();
    assert!(!verify_store(dir.path(), &options()).unwrap().is_ok());
    corruption_naming(
        Db::open(dir.path(), options()),
        &path,
        "the newest WAL removed",
    );

    // The newest WAL may end anywhere (a crash); an empty WAL after it is a crash during a
    // rotation. Both open.
    let bytes = std::fs::read(&wals[newest]).unwrap();
    for cut in [0, 1, bytes.len() / 2, bytes.len()] {
        let dir = copy_store(pristine.path());
        let name = wals[newest].file_name().unwrap();
        std::fs::write(dir.path().join(name), &bytes[..cut]).unwrap();
        std::fs::write(dir.path().join("999999.log"), b"").unwrap();
        let db = Db::open(dir.path(), options())
            .unwrap_or_else(|e| panic!("newest WAL cut to {cut}: {e}"));
        let side = db.cf("side").unwrap();
        // Writes alternate between the column families: round 2's are all in an older WAL.
        let expected = value(19, if cut == bytes.len() { 3 } else { 2 });
        let got = db.get_cf(&side, key(19)).unwrap().map(|v| v.to_vec());
        assert_eq!(got, Some(expected), "newest WAL cut to {cut}");
        db.close().unwrap();
    }

    // Repair replays what is intact around the hole.
    let dir = copy_store(pristine.path());
    let middle = dir.path().join(wals[1].file_name().unwrap());
    let bytes = std::fs::read(&middle).unwrap();
    std::fs::write(&middle, &bytes[..record_ends(&bytes)[0]]).unwrap();
    repair_store(dir.path(), &options()).unwrap();
    assert!(verify_store(dir.path(), &options()).unwrap().is_ok());
    let db = Db::open(dir.path(), options()).unwrap();
    let side = db.cf("side").unwrap();
    let read = |v: Option<strata_engine::PinnableValue>| v.map(|v| v.to_vec());
    assert_eq!(read(db.get_cf(&side, key(19)).unwrap()), Some(value(19, 3)));
    assert_eq!(read(db.get(key(19)).unwrap()), Some(value(19, 3)));
}
