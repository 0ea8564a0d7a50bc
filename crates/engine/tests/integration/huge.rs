//! Values past what one write carries (`MAX_WRITE_SIZE`), built by partial writes: a file of
//! several GiB, as the mount makes one, without any write holding it whole.

#![allow(clippy::unwrap_used, clippy::field_reassign_with_default)]

use strata_engine::{
    Compression, Db, ErrorKind, MAX_VALUE_SIZE, MAX_WRITE_SIZE, Options, WriteBatch, WriteOptions,
};

fn write(db: &Db, f: impl FnOnce(&mut WriteBatch)) -> strata_engine::Result<()> {
    let mut b = WriteBatch::new();
    f(&mut b);
    db.write(b, &WriteOptions::default())
}

const SIZE: u64 = 5 << 30;

/// What the value must read as: a hole of zeros, "mid" at 4 GiB, and the last 14 bytes.
fn check(db: &Db, key: &str) {
    let cf = db.default_cf();
    assert_eq!(db.value_size_cf(&cf, key).unwrap(), Some(SIZE + 4));
    let at = |offset: u64, len: u64| db.read_range(key, offset, len).unwrap().unwrap().bytes;
    assert_eq!(at(0, 4).as_ref(), b"head");
    assert_eq!(at(1 << 30, 8).as_ref(), &[0u8; 8]);
    assert_eq!(at(4 << 30, 3).as_ref(), b"mid");
    assert_eq!(at(SIZE - 10, 100).as_ref(), b"0123456789tail");
}

#[test]
fn a_value_past_four_gib_is_built_by_partial_writes() {
    const { assert!(MAX_VALUE_SIZE > SIZE && SIZE > MAX_WRITE_SIZE) };
    let dir = crate::common::tempdir();
    let mut o = Options::default();
    o.enable_blob_files = true;
    o.min_blob_size = 4096;
    o.blob_compression = Compression::None;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    db.put("f", "head").unwrap();
    write(&db, |b| {
        b.truncate("f", SIZE);
        b.write_at("f", 4 << 30, "mid");
        b.write_at("f", SIZE - 10, "0123456789");
        b.append("f", "tail");
    })
    .unwrap();
    check(&db, "f");
    // Moved by reference, and kept across a flush, a compaction and a reopen.
    write(&db, |b| b.rename("f", "g")).unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    check(&db, "g");
    assert!(db.get("f").unwrap().is_none());
    // Too long to read whole: a typed error, not an allocation of 5 GiB.
    let whole = db.get("g").unwrap_err();
    assert_eq!(whole.kind(), ErrorKind::InvalidArgument, "{whole}");
    assert!(whole.to_string().contains("by range"), "{whole}");
    // The limit holds past it.
    for refused in [
        write(&db, |b| b.write_at("g", MAX_VALUE_SIZE, "x")),
        write(&db, |b| b.truncate("g", MAX_VALUE_SIZE + 1)),
    ] {
        assert_eq!(refused.unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
    check(&db, "g");
}
