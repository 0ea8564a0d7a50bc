//! WALs through crashes: a WAL is created at its expected size and written through a mapping
//! (on Linux), so a crash leaves its records followed by zeros. Recovery takes the zeros for a
//! cut-short end, a WAL that is zeros only (a crash right after an open made it) for an empty
//! one, and zeros with records after them for damage.

#![allow(clippy::unwrap_used, clippy::field_reassign_with_default)]

use std::path::{Path, PathBuf};

use crate::common::{crash_copy, files_with_extension, tempdir};
use strata_engine::{Db, Options};

fn options() -> Options {
    let mut o = Options::default();
    o.cf.write_buffer_size = 1 << 20;
    o
}

fn value(i: u32) -> Vec<u8> {
    format!("value {i} ").repeat(8).into_bytes()
}

/// The live store's files as a kill leaves them, after 500 unsynced puts; and the copy's WAL.
fn crashed_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempdir();
    let copy = tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i:04}"), value(i)).unwrap();
    }
    crash_copy(dir.path(), copy.path());
    drop(db);
    let wal = files_with_extension(copy.path(), "log").remove(0);
    (copy, wal)
}

fn assert_every_put_is_there(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..500u32 {
        assert_eq!(
            db.get(format!("k{i:04}")).unwrap().as_deref(),
            Some(value(i).as_slice()),
            "k{i:04}"
        );
    }
}

#[test]
fn a_crash_keeps_every_write_handed_to_the_wal() {
    let (copy, wal) = crashed_store();
    let data = std::fs::read(&wal).unwrap();
    let end = data.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    assert!(end > 500 * 80, "{end} bytes of records");
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    assert!(
        data.len() > end,
        "a WAL is created at its expected size: {} bytes for {end} of records",
        data.len()
    );
    let report = strata_engine::verify_store(copy.path(), &options()).unwrap();
    assert!(report.is_ok(), "{:?}", report.files);
    assert_every_put_is_there(copy.path());
}

/// An open that recovered a crashed WAL makes a new one before the MANIFEST that retires the
/// old: a crash in between leaves the new WAL all zeros behind the old one's zero tail. That
/// new WAL holds nothing, so the old one is still the newest and may end cut short.
#[test]
fn a_wal_of_zeros_only_is_empty_and_the_one_before_it_may_end_cut_short() {
    let (copy, wal) = crashed_store();
    let number: u64 = wal.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    // Numbered past every file of the store, as the open would have numbered it.
    let zeros = copy.path().join(format!("{:06}.log", number + 100));
    std::fs::write(&zeros, vec![0u8; 2 << 20]).unwrap();
    let report = strata_engine::verify_store(copy.path(), &options()).unwrap();
    assert!(report.is_ok(), "{:?}", report.files);
    assert_every_put_is_there(copy.path());
}

/// Zeros at a WAL's start with records after them are no crash's doing: the open fails,
/// naming the file, rather than skip acknowledged writes.
#[test]
fn zeros_before_records_are_damage() {
    let (copy, wal) = crashed_store();
    let mut data = std::fs::read(&wal).unwrap();
    data[..7].fill(0);
    std::fs::write(&wal, &data).unwrap();
    let e = Db::open(copy.path(), options()).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert!(
        e.to_string()
            .contains(wal.file_name().unwrap().to_str().unwrap()),
        "{e}"
    );
}

/// A power loss with the WAL created at its expected size: the file keeps its size, and a
/// random share of the unsynced bytes (none, some, cut mid-record, all) reads back as zeros.
/// Every synced put is there, the open succeeds in the default mode, and `verify` passes.
#[test]
fn a_power_loss_zeroes_unsynced_bytes_and_keeps_every_synced_put() {
    use std::sync::Arc;
    use strata_engine::WriteOptions;
    use strata_engine::fs::FaultInjectionFs;
    for seed in 1..=12u64 {
        let dir = tempdir();
        let fs = FaultInjectionFs::new();
        let mut o = options();
        o.filesystem = Arc::new(fs.clone());
        let db = Db::open(dir.path(), o.clone()).unwrap();
        let synced = WriteOptions {
            sync: true,
            ..Default::default()
        };
        // Synced every 50th put: the last 20 are not.
        for i in 0..220u32 {
            let w = if i % 50 == 49 {
                &synced
            } else {
                &WriteOptions::default()
            };
            db.put_with(w, format!("k{i:04}"), value(i)).unwrap();
        }
        let wal = files_with_extension(dir.path(), "log").remove(0);
        let end = std::fs::read(&wal)
            .unwrap()
            .iter()
            .rposition(|&b| b != 0)
            .unwrap()
            + 1;
        assert!(
            std::fs::metadata(&wal).unwrap().len() > end as u64,
            "the WAL was created at its expected size"
        );
        fs.deactivate();
        drop(db);
        fs.drop_random_unsynced_data(seed).unwrap();
        let report = strata_engine::verify_store(dir.path(), &o).unwrap();
        assert!(report.is_ok(), "seed {seed}: {:?}", report.files);
        let db = Db::open(dir.path(), o).unwrap();
        for i in 0..200u32 {
            let got = db.get(format!("k{i:04}")).unwrap();
            if i < 200 / 50 * 50 {
                assert_eq!(
                    got.as_deref(),
                    Some(value(i).as_slice()),
                    "seed {seed}: k{i:04}"
                );
            }
        }
    }
}

/// A power loss whose writeback had no order: a random set of the WAL's unsynced 4 KiB pages
/// reached the disk, and those that did not read back as zeros between pages that did. Such a
/// hole can only lie past the last sync (a sync makes every byte before it durable), so what
/// follows it was never synced either: the open succeeds, keeps every synced put, and keeps a
/// prefix of the writes, never a later one without an earlier.
#[test]
fn a_power_loss_that_kept_pages_after_a_hole_keeps_every_synced_put_and_a_prefix() {
    use std::sync::Arc;
    use strata_engine::WriteOptions;
    use strata_engine::fs::FaultInjectionFs;
    const PUTS: u32 = 2000;
    // Synced at 199, 699, 1199 and 1699: 300 unsynced puts (about 30 KiB) end the WAL, and 500
    // unsynced puts (several 32 KiB blocks) precede each sync.
    let is_synced = |i: u32| i % 500 == 199;
    let mut holes_seen = 0;
    for seed in 1..=16u64 {
        let dir = tempdir();
        let fs = FaultInjectionFs::new();
        let mut o = options();
        o.filesystem = Arc::new(fs.clone());
        let db = Db::open(dir.path(), o.clone()).unwrap();
        for i in 0..PUTS {
            let w = WriteOptions {
                sync: is_synced(i),
                ..Default::default()
            };
            db.put_with(&w, format!("k{i:04}"), value(i)).unwrap();
        }
        fs.deactivate();
        drop(db);
        fs.drop_random_unsynced_pages(seed).unwrap();
        let wal = files_with_extension(dir.path(), "log").remove(0);
        let data = std::fs::read(&wal).unwrap();
        let end = data.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        if data[..end]
            .chunks(4096)
            .any(|page| page.iter().all(|&b| b == 0))
        {
            holes_seen += 1;
        }
        let report = strata_engine::verify_store(dir.path(), &o).unwrap();
        assert!(report.is_ok(), "seed {seed}: {:?}", report.files);
        let db = Db::open(dir.path(), o).unwrap();
        let present: Vec<bool> = (0..PUTS)
            .map(|i| db.get(format!("k{i:04}")).unwrap().is_some())
            .collect();
        let kept = present.iter().take_while(|&&p| p).count() as u32;
        assert!(
            kept >= 1700,
            "seed {seed}: only the first {kept} puts are there"
        );
        assert!(
            present[kept as usize..].iter().all(|&p| !p),
            "seed {seed}: a put after k{kept:04} is there without it"
        );
    }
    assert!(holes_seen >= 4, "only {holes_seen} of 16 WALs had a hole");
}
