//! Who may open a store: one writer at a time (the directory lock, released at close, naming
//! the process that holds it), and read-only opens beside it that change nothing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use strata_engine::{Db, Error, ReadOptions, WriteBatch, WriteOptions};

use crate::db::{keys, small_options};

#[test]
fn a_second_open_is_busy_and_close_releases_the_lock() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    db.put("k", "v").unwrap();
    match Db::open(dir.path(), small_options()) {
        Err(Error::Busy(msg)) => assert!(msg.contains("LOCK"), "{msg}"),
        other => panic!("expected Busy, got {other:?}"),
    }
    db.close().unwrap();
    assert!(matches!(db.put("k", "v"), Err(Error::Closed)));
    assert!(matches!(db.get("k"), Err(Error::Closed)));
    assert!(matches!(
        db.iter(&ReadOptions::default()),
        Err(Error::Closed)
    ));
    db.close().unwrap();
    let again = Db::open(dir.path(), small_options()).unwrap();
    assert_eq!(again.get("k").unwrap().unwrap(), &b"v"[..]);
}

/// A read-only open beside a writer: it sees what the writer made durable (tables and WAL), takes
/// no lock, changes no file, and refuses every mutation with `ReadOnly`.
#[test]
fn a_read_only_open_reads_beside_a_writer_and_changes_nothing() {
    use strata_engine::ErrorKind;
    let dir = crate::common::tempdir();
    let writer = Db::open(dir.path(), small_options()).unwrap();
    writer.put("a", "1").unwrap();
    writer.flush().unwrap();
    writer
        .put_with(
            &WriteOptions {
                sync: true,
                ..Default::default()
            },
            "b",
            "2",
        )
        .unwrap();
    let listing = || crate::common::list_dir(dir.path());
    let before = listing();
    let reader = Db::open_read_only(dir.path(), small_options()).unwrap();
    assert_eq!(reader.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(
        reader.get("b").unwrap().as_deref(),
        Some(&b"2"[..]),
        "from the WAL"
    );
    assert_eq!(keys(&reader, &ReadOptions::default()).len(), 2);
    let cf = reader.default_cf();
    let refused = [
        reader.put("c", "3").unwrap_err(),
        reader
            .write(WriteBatch::new(), &WriteOptions::default())
            .unwrap_err(),
        reader.delete_range("a", "z").unwrap_err(),
        reader.flush().unwrap_err(),
        reader.compact_range(None, None).unwrap_err(),
        reader.create_cf("x", Default::default()).unwrap_err(),
        reader.drop_cf(&cf).unwrap_err(),
        reader.maintenance().unwrap_err(),
    ];
    for e in refused {
        assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
    }
    reader.close().unwrap();
    drop(reader);
    assert_eq!(
        listing(),
        before,
        "the read-only open changed the directory"
    );
    writer.put("c", "3").unwrap();
    drop(writer);

    let missing = Db::open_read_only(dir.path().join("nope"), small_options()).unwrap_err();
    assert!(missing.to_string().contains("no store at"), "{missing}");
}

/// A second writer is told which process holds the store.
#[test]
#[cfg_attr(
    target_os = "wasi",
    ignore = "no processes or OS file locks (the host holds the lock)"
)]
fn a_busy_store_names_the_process_holding_it() {
    let dir = crate::common::tempdir();
    let _writer = Db::open(dir.path(), small_options()).unwrap();
    let busy = Db::open(dir.path(), small_options()).unwrap_err();
    let pid = std::process::id();
    assert!(
        busy.to_string()
            .contains(&format!("in use by process {pid}")),
        "{busy}"
    );
}
