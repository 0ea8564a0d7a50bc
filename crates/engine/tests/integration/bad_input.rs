//! Bad input through the public API: every entry point answers it with a typed error of the
//! right kind, and nothing is written.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use strata_engine::fs::{FaultError, FaultInjectionFs, FsOp};
use strata_engine::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

use crate::db::small_options;

#[test]
fn bad_input_gets_typed_errors() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let big_key = vec![0u8; strata_engine::MAX_KEY_SIZE + 1];
    assert!(matches!(
        db.put(&big_key, "v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(db.get(&big_key), Err(Error::InvalidArgument(_))));
    let bad = {
        let mut o = Options::default();
        o.write_buffer_size = 10;
        o
    };
    assert!(matches!(
        Db::open(dir.path().join("other"), bad),
        Err(Error::InvalidArgument(_))
    ));
    let missing = {
        let mut o = Options::default();
        o.create_if_missing = false;
        o
    };
    assert!(matches!(
        Db::open(dir.path().join("missing"), missing),
        Err(Error::InvalidArgument(_))
    ));
    let exists = {
        let mut o = Options::default();
        o.error_if_exists = true;
        o
    };
    drop(db);
    assert!(matches!(
        Db::open(dir.path(), exists),
        Err(Error::InvalidArgument(_))
    ));
}

/// Every public entry point given bad arguments answers with a typed error, never a panic: empty
/// and inverted ranges, a TTL of zero, unknown and dropped column families, and any call after
/// close.
#[test]
fn every_entry_point_refuses_bad_arguments_with_a_typed_error() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let invalid = |r: strata_engine::Result<()>, what: &str| match r {
        Err(Error::InvalidArgument(msg)) => assert!(!msg.is_empty(), "{what}"),
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    };
    invalid(db.delete_range("b", "b"), "empty range");
    invalid(db.delete_range("b", "a"), "inverted range");
    invalid(db.put_with_ttl(&db.default_cf(), "k", "v", 0), "TTL of 0");
    invalid(db.cf("no such family").map(|_| ()), "unknown column family");
    invalid(
        db.create_cf("default", Default::default()).map(|_| ()),
        "existing name",
    );
    invalid(db.drop_cf(&db.default_cf()), "dropping the default");
    let inverted = ReadOptions {
        lower_bound: Some(b"z".to_vec()),
        upper_bound: Some(b"a".to_vec()),
        ..Default::default()
    };
    match db.iter(&inverted) {
        Err(Error::InvalidArgument(_)) => {}
        Ok(mut it) => {
            it.seek_to_first();
            assert!(!it.valid(), "inverted bounds yield nothing");
        }
        Err(e) => panic!("inverted bounds: {e:?}"),
    }

    let cf = db.create_cf("doomed", Default::default()).unwrap();
    db.drop_cf(&cf).unwrap();
    let dropped = |r: strata_engine::Result<()>, what: &str| {
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{what} on a dropped column family: {r:?}"
        )
    };
    dropped(db.put_cf(&cf, "k", "v"), "put");
    dropped(db.get_cf(&cf, "k").map(|_| ()), "get");
    dropped(db.iter_cf(&ReadOptions::default(), &cf).map(|_| ()), "iter");
    dropped(db.flush_cf(&cf), "flush");
    dropped(db.compact_range_cf(&cf, None, None), "compact");
    dropped(db.properties_cf(&cf).map(|_| ()), "properties");
    dropped(db.drop_cf(&cf), "drop again");

    db.close().unwrap();
    let closed = |r: strata_engine::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::Closed)), "{what} after close: {r:?}")
    };
    let default = db.default_cf();
    closed(db.put("k", "v"), "put");
    closed(db.delete("k"), "delete");
    closed(db.delete_range("a", "b"), "delete_range");
    closed(
        db.write(WriteBatch::new(), &WriteOptions::default()),
        "write",
    );
    closed(db.put_with_ttl(&default, "k", "v", 10), "put_with_ttl");
    closed(db.get("k").map(|_| ()), "get");
    closed(
        db.get_expiration(&default, "k").map(|_| ()),
        "get_expiration",
    );
    for r in db.multi_get(&ReadOptions::default(), &["a", "b"]) {
        closed(r.map(|_| ()), "multi_get");
    }
    closed(db.iter(&ReadOptions::default()).map(|_| ()), "iter");
    closed(db.flush(), "flush");
    closed(db.compact_range(None, None), "compact_range");
    closed(
        db.create_cf("late", Default::default()).map(|_| ()),
        "create_cf",
    );
}

/// Each error maps to one kind, which the faces translate; a full disk is `NoSpace`.
#[test]
fn errors_have_kinds() {
    use strata_engine::ErrorKind;
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let err = db.delete_range("b", "a").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let busy = Db::open(dir.path(), small_options()).unwrap_err();
    assert_eq!(busy.kind(), ErrorKind::Busy);
    db.close().unwrap();
    assert_eq!(db.put("a", "1").unwrap_err().kind(), ErrorKind::Closed);
    drop(db);

    let fault = FaultInjectionFs::new();
    let mut opts = small_options();
    opts.filesystem = std::sync::Arc::new(fault.clone());
    let db = Db::open(dir.path(), opts).unwrap();
    fault.fail_after(&[FsOp::Sync], 0, FaultError::NoSpace);
    let full = db
        .put_with(
            &WriteOptions {
                sync: true,
                ..Default::default()
            },
            "a",
            "1",
        )
        .unwrap_err();
    assert_eq!(full.kind(), ErrorKind::NoSpace, "{full}");
}
