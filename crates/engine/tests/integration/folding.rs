//! Extent lists kept short without copying large pieces: a value written in large steps and
//! then appended to (a file the mount wrote, then `echo x >> file`) never has its pieces copied.

#![allow(clippy::unwrap_used, clippy::field_reassign_with_default)]

use strata_engine::{Compression, Db, Options, WriteBatch, WriteOptions};

#[test]
fn writes_and_appends_to_a_value_of_many_large_pieces_copy_none_of_them() {
    let dir = crate::common::tempdir();
    let mut o = Options::default();
    o.enable_blob_files = true;
    o.min_blob_size = 4096;
    o.blob_compression = Compression::None;
    let db = Db::open(dir.path(), o).unwrap();
    let step = vec![7u8; 1 << 20];
    db.put("f", b"").unwrap();
    let start = db.statistics().blob_bytes_written;
    // More pieces than a list is folded at, each as large as a fold leaves alone.
    const PIECES: u64 = 300;
    for i in 0..PIECES {
        let mut b = WriteBatch::new();
        b.write_at("f", i << 20, &step);
        db.write(b, &WriteOptions::default()).unwrap();
    }
    let written = db.statistics().blob_bytes_written - start;
    assert!(
        written < (PIECES << 20) + (4 << 20),
        "{written} bytes written to write {PIECES} MiB"
    );
    let before = db.statistics().blob_bytes_written;
    for _ in 0..100 {
        let mut b = WriteBatch::new();
        b.append("f", [b'x'; 100]);
        db.write(b, &WriteOptions::default()).unwrap();
    }
    let copied = db.statistics().blob_bytes_written - before;
    assert!(
        copied < 1 << 20,
        "{copied} bytes written by 100 appends of 100 bytes"
    );
    let len = PIECES << 20;
    assert_eq!(
        db.value_size_cf(&db.default_cf(), "f").unwrap(),
        Some(len + 100 * 100)
    );
    let tail = db.read_range("f", len - 2, 4).unwrap().unwrap();
    assert_eq!(tail.bytes.as_ref(), &[7, 7, b'x', b'x']);
}
