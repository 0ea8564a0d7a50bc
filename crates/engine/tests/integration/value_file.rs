//! Value files: a large value written in place and adopted by the store as a blob file.

use std::sync::Arc;

use strata_engine::fs::FaultInjectionFs;
use strata_engine::{
    ColumnFamilyOptions, Db, ErrorKind, MAX_WRITE_SIZE, Options, WriteBatch, WriteOptions,
    verify_store,
};

use crate::common::{self, files_with_extension, synced};

fn options() -> Options {
    let mut o = Options::default();
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 1024;
    o
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
        .collect()
}

#[test]
fn a_value_written_in_order_is_stored_with_its_batch_and_survives_reopen() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let cf = db.default_cf();
    let value = pattern(3 << 20, 1);
    let mut vf = db.create_value_file(&cf, "big/file").unwrap();
    for chunk in value.chunks(100_000) {
        vf.write_at(vf.len(), chunk).unwrap();
    }
    assert_eq!(files_with_extension(dir.path(), "tmp").len(), 1);
    let mut batch = WriteBatch::new();
    batch.put("big/file.meta", "record");
    // The value file's key is written after the batch, so it wins over this put.
    batch.put("big/file", "older");
    db.write_with_value_file(batch, vf, &WriteOptions::default())
        .unwrap();
    assert!(files_with_extension(dir.path(), "tmp").is_empty());
    assert_eq!(files_with_extension(dir.path(), "blob").len(), 1);
    assert_eq!(db.get("big/file").unwrap().as_deref(), Some(&value[..]));
    assert_eq!(db.value_size_cf(&cf, "big/file").unwrap(), Some(3 << 20));
    assert_eq!(
        db.get("big/file.meta").unwrap().as_deref(),
        Some(&b"record"[..])
    );
    db.close().unwrap();
    drop(db);
    let report = verify_store(dir.path(), &options()).unwrap();
    assert!(report.is_ok(), "{report:?}");
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get("big/file").unwrap().as_deref(), Some(&value[..]));
}

#[test]
fn writes_out_of_order_and_length_changes_give_the_same_bytes_as_a_buffer() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut vf = db.create_value_file(&db.default_cf(), "k").unwrap();
    let mut want: Vec<u8> = Vec::new();
    for (at, data) in [
        (0usize, pattern(50_000, 2)),
        (10_000, pattern(5_000, 3)),
        (90_000, b"past a gap".to_vec()),
    ] {
        vf.write_at(at as u64, &data).unwrap();
        want.resize(want.len().max(at + data.len()), 0);
        want[at..at + data.len()].copy_from_slice(&data);
    }
    vf.set_len(60_000).unwrap();
    vf.set_len(70_000).unwrap();
    want.truncate(60_000);
    want.resize(70_000, 0);
    vf.write_at(0, b"head").unwrap();
    want[..4].copy_from_slice(b"head");
    let mut back = vec![0u8; 80_000];
    assert_eq!(vf.read_at(0, &mut back).unwrap(), 70_000);
    assert_eq!(&back[..70_000], &want[..]);
    assert_eq!(vf.read_at(70_000, &mut back).unwrap(), 0);
    db.write_with_value_file(WriteBatch::new(), vf, &synced())
        .unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&want[..]));
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&want[..]));
}

#[test]
fn an_unwritten_value_file_leaves_nothing_behind() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut vf = db.create_value_file(&db.default_cf(), "gone").unwrap();
    vf.write_at(0, &pattern(10_000, 4)).unwrap();
    drop(vf);
    assert!(files_with_extension(dir.path(), "tmp").is_empty());
    // One a process died with is deleted by the next open.
    let mut vf = db.create_value_file(&db.default_cf(), "orphan").unwrap();
    vf.write_at(0, b"orphaned").unwrap();
    std::mem::forget(vf);
    assert_eq!(files_with_extension(dir.path(), "tmp").len(), 1);
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    assert!(files_with_extension(dir.path(), "tmp").is_empty());
    assert_eq!(db.get("orphan").unwrap(), None);
}

#[test]
fn bad_uses_are_refused_with_invalid_argument() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let plain = db
        .create_cf("plain", ColumnFamilyOptions::default())
        .unwrap();
    let e = db.create_value_file(&plain, "k").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let mut vf = db.create_value_file(&db.default_cf(), "k").unwrap();
    let e = vf.write_at(MAX_WRITE_SIZE, b"x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = vf.set_len(MAX_WRITE_SIZE + 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    db.drop_cf(&plain).unwrap();
    let other = db.create_cf("other", options().cf).unwrap();
    let vf_other = db.create_value_file(&other, "k").unwrap();
    db.drop_cf(&other).unwrap();
    let e = db
        .write_with_value_file(WriteBatch::new(), vf_other, &WriteOptions::default())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    drop(vf);
    let ro = Db::open_read_only(dir.path(), options()).unwrap();
    let e = ro.create_value_file(&ro.default_cf(), "k").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
}

/// An unsynced value file is synced by the next synced write: once the WAL vouches for its
/// index, a power loss must not lose the value.
#[test]
fn a_later_synced_write_makes_an_unsynced_value_file_durable() {
    let dir = common::tempdir();
    let power = FaultInjectionFs::new();
    let mut o = options();
    o.filesystem = Arc::new(power.clone());
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let value = pattern(1 << 20, 5);
    let mut vf = db.create_value_file(&db.default_cf(), "v").unwrap();
    vf.write_at(0, &value).unwrap();
    db.write_with_value_file(WriteBatch::new(), vf, &WriteOptions::default())
        .unwrap();
    db.put_with(&synced(), "after", "synced").unwrap();
    power.deactivate();
    drop(db);
    power.drop_unsynced_data().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"synced"[..]));
    assert_eq!(db.get("v").unwrap().as_deref(), Some(&value[..]));
}

/// A failed sync may drop pages the system had accepted, and a sync that succeeds after it
/// says nothing of them (the kernel forgets the failure): once a value file's sync failed, no
/// later write is acknowledged as synced until the store is reopened, and no live backup
/// lists what may not read back.
#[test]
fn after_a_failed_value_file_sync_no_write_is_acknowledged_as_synced() {
    use strata_engine::fs::{FaultError, FsOp};
    let dir = common::tempdir();
    let disk = FaultInjectionFs::new();
    let mut o = options();
    o.filesystem = Arc::new(disk.clone());
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let unsynced = WriteOptions::default();
    // Unsynced value files wait, open, for the next sync; the 65th syncs the 64 before it.
    let adopt = |i: usize| {
        let mut vf = db
            .create_value_file(&db.default_cf(), format!("v{i:03}"))
            .unwrap();
        vf.write_at(0, &pattern(2048, i as u8)).unwrap();
        vf
    };
    for i in 0..64 {
        db.write_with_value_file(WriteBatch::new(), adopt(i), &unsynced)
            .unwrap();
    }
    let last = adopt(64);
    disk.fail_after(&[FsOp::Sync], 0, FaultError::Eio);
    db.write_with_value_file(WriteBatch::new(), last, &unsynced)
        .unwrap_err();
    disk.clear_faults();
    // The disk answers again, and a sync of the same files would now "succeed".
    let e = db.put_with(&synced(), "after", "x").unwrap_err();
    assert!(e.to_string().contains("until the store is reopened"), "{e}");
    let e = db.live_files(false).unwrap_err();
    assert!(e.to_string().contains("reopened"), "{e}");
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    // The refused write's record never replays: close cut the log before it.
    assert_eq!(db.get("after").unwrap(), None);
    db.put_with(&synced(), "after", "x").unwrap();
    assert_eq!(
        db.get("v007").unwrap().as_deref(),
        Some(&pattern(2048, 7)[..])
    );
}

/// Every value file is a blob file of its own: writing and reading many of them keeps few
/// open (`max_open_files` readers, as for tables, and a bounded number awaiting a sync); a
/// mount spilling its writes made thousands and ran out of descriptors.
#[cfg(target_os = "linux")]
#[test]
fn reading_many_value_files_keeps_few_open() {
    let dir = common::tempdir();
    let mut opts = options();
    opts.max_open_files = 16;
    let db = Db::open(dir.path(), opts).unwrap();
    let cf = db.default_cf();
    const FILES: usize = 200;
    for i in 0..FILES {
        let mut vf = db.create_value_file(&cf, format!("k{i}")).unwrap();
        vf.write_at(0, &pattern(2048, i as u8)).unwrap();
        db.write_with_value_file(WriteBatch::new(), vf, &WriteOptions::default())
            .unwrap();
    }
    assert_eq!(files_with_extension(dir.path(), "blob").len(), FILES);
    for round in 0..2 {
        for i in 0..FILES {
            let got = db.get(format!("k{i}")).unwrap();
            assert_eq!(got.as_deref(), Some(&pattern(2048, i as u8)[..]), "{round}");
        }
    }
    let open_blobs = crate::common::open_files_with_extension(dir.path(), "blob");
    // 16 readers, and the unsynced value files kept for the next sync (at most 64).
    assert!(open_blobs <= 16 + 64, "{open_blobs} blob files open");
}
