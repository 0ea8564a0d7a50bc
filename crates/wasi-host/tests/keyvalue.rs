//! The component's `wasi:keyvalue` exports (store, batch, atomics) driven from the host, as a
//! component importing `wasi:keyvalue` would drive them: buckets are column families, keys are the
//! same bytes every other face sees.
#![allow(clippy::unwrap_used)]

use strata_engine::{ColumnFamilyOptions, Db, Options};
use strata_wasi_host::{Error, Limits, WasiDb, default_options};

fn limits() -> Limits {
    Limits {
        cache_dir: None,
        ..Limits::default()
    }
}

fn open(dir: &std::path::Path) -> WasiDb {
    WasiDb::open(dir, limits(), default_options()).unwrap()
}

#[test]
fn a_bucket_reads_and_writes_the_stores_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let bucket = db.bucket("default").unwrap();
    assert_eq!(bucket.get("users/alice.json").unwrap(), None);
    assert!(!bucket.exists("users/alice.json").unwrap());
    bucket.set("users/alice.json", b"{\"age\":30}").unwrap();
    assert_eq!(
        bucket.get("users/alice.json").unwrap().as_deref(),
        Some(&b"{\"age\":30}"[..])
    );
    assert!(bucket.exists("users/alice.json").unwrap());
    // The same key through strata:kv, and the other way round: one keyspace.
    assert_eq!(
        db.get("users/alice.json").unwrap().as_deref(),
        Some(&b"{\"age\":30}"[..])
    );
    db.put("from/strata-kv", "hello").unwrap();
    assert_eq!(
        db.bucket("")
            .unwrap()
            .get("from/strata-kv")
            .unwrap()
            .as_deref(),
        Some(&b"hello"[..])
    );
    bucket.delete("users/alice.json").unwrap();
    assert!(!bucket.exists("users/alice.json").unwrap());
    assert_eq!(db.get("users/alice.json").unwrap(), None);
    // Deleting what is not there is not an error.
    bucket.delete("never/written").unwrap();
}

#[test]
fn buckets_are_column_families_and_an_unknown_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let native = Db::open(dir.path(), Options::default()).unwrap();
        native
            .create_cf("sessions", ColumnFamilyOptions::default())
            .unwrap();
        native.close().unwrap();
    }
    let db = open(dir.path());
    let e = db.bucket("no-such-family").unwrap_err();
    assert_eq!(e, Error::NoSuchBucket("no-such-family".into()));
    let sessions = db.bucket("sessions").unwrap();
    sessions.set("s1", b"token").unwrap();
    // Not in the default column family.
    assert_eq!(db.get("s1").unwrap(), None);
    assert_eq!(db.bucket("default").unwrap().get("s1").unwrap(), None);
    drop(sessions);
    db.close().unwrap();
    drop(db);
    let native = Db::open(dir.path(), Options::default()).unwrap();
    let cf = native.cf("sessions").unwrap();
    assert_eq!(
        native.get_cf(&cf, "s1").unwrap().map(|v| v.to_vec()),
        Some(b"token".to_vec())
    );
    assert_eq!(native.get("s1").unwrap().map(|v| v.to_vec()), None);
}

#[test]
fn list_keys_pages_with_cursors_and_skips_keys_that_are_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let bucket = db.bucket("default").unwrap();
    let want: Vec<String> = (0..2500).map(|i| format!("key/{i:05}")).collect();
    for chunk in want.chunks(500) {
        let pairs: Vec<(String, Vec<u8>)> =
            chunk.iter().map(|k| (k.clone(), b"v".to_vec())).collect();
        bucket.set_many(&pairs).unwrap();
    }
    // Written by another face: not UTF-8, so it has no name here.
    db.put(b"key/\xff\xfe", "binary").unwrap();
    db.flush().unwrap();

    let mut got = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = bucket.list_keys(cursor).unwrap();
        pages += 1;
        got.extend(page.keys);
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(got, want);
    assert_eq!(pages, 3, "1000 keys a page");
    // A cursor is good once, and a made-up one is refused.
    let first = bucket.list_keys(None).unwrap();
    let c = first.cursor.unwrap();
    assert_eq!(bucket.list_keys(Some(c)).unwrap().keys[0], "key/01000");
    assert!(matches!(bucket.list_keys(Some(c)), Err(Error::Other(m)) if m.contains("cursor")));
    assert!(matches!(
        bucket.list_keys(Some(999_999)),
        Err(Error::Other(_))
    ));
    // An empty bucket lists nothing, and no cursor.
    db.delete_range("", "\u{10ffff}").unwrap();
    let empty = bucket.list_keys(None).unwrap();
    assert!(empty.keys.is_empty() && empty.cursor.is_none(), "{empty:?}");
}

#[test]
fn batches_read_at_one_snapshot_and_write_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let bucket = db.bucket("default").unwrap();
    let pairs: Vec<(String, Vec<u8>)> = (0..100)
        .map(|i| (format!("b/{i:03}"), format!("value {i}").into_bytes()))
        .collect();
    bucket.set_many(&pairs).unwrap();
    let asked = vec![
        "b/042".to_string(),
        "missing".to_string(),
        "b/007".to_string(),
    ];
    assert_eq!(
        bucket.get_many(&asked).unwrap(),
        vec![
            Some(("b/042".to_string(), b"value 42".to_vec())),
            None,
            Some(("b/007".to_string(), b"value 7".to_vec())),
        ]
    );
    let doomed: Vec<String> = (0..50).map(|i| format!("b/{i:03}")).collect();
    bucket.delete_many(&doomed).unwrap();
    let all: Vec<String> = pairs.iter().map(|(k, _)| k.clone()).collect();
    let left = bucket.get_many(&all).unwrap();
    assert!(left[..50].iter().all(Option::is_none));
    assert!(left[50..].iter().all(Option::is_some));
    // A batch with one bad entry (a key past the engine's 8 MiB limit) writes nothing.
    let bad = vec![
        ("b/new".to_string(), b"x".to_vec()),
        ("k".repeat(strata_engine::MAX_KEY_SIZE + 1), b"y".to_vec()),
    ];
    let e = bucket.set_many(&bad).unwrap_err();
    assert!(
        matches!(&e, Error::Other(m) if m.contains("exceeds the limit")),
        "{e}"
    );
    assert_eq!(bucket.get("b/new").unwrap(), None);
    // The batch survives a reopen.
    drop(bucket);
    db.close().unwrap();
    drop(db);
    let db = open(dir.path());
    assert_eq!(
        db.bucket("default")
            .unwrap()
            .get("b/099")
            .unwrap()
            .as_deref(),
        Some(&b"value 99"[..])
    );
}

#[test]
fn increment_keeps_a_decimal_counter_and_refuses_what_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let bucket = db.bucket("default").unwrap();
    assert_eq!(bucket.increment("hits", 5).unwrap(), 5);
    assert_eq!(bucket.increment("hits", 37).unwrap(), 42);
    assert_eq!(bucket.increment("hits", 0).unwrap(), 42);
    // Text every face can read.
    assert_eq!(db.get("hits").unwrap().as_deref(), Some(&b"42"[..]));
    bucket.set("name", b"alice").unwrap();
    let e = bucket.increment("name", 1).unwrap_err();
    assert!(
        matches!(&e, Error::Other(m) if m.contains("not a decimal")),
        "{e}"
    );
    assert_eq!(bucket.get("name").unwrap().as_deref(), Some(&b"alice"[..]));
    bucket.set("full", u64::MAX.to_string().as_bytes()).unwrap();
    let e = bucket.increment("full", 1).unwrap_err();
    assert!(
        matches!(&e, Error::Other(m) if m.contains("overflow")),
        "{e}"
    );
    assert_eq!(
        bucket.get("full").unwrap(),
        Some(u64::MAX.to_string().into_bytes())
    );
}

#[test]
fn a_bucket_of_a_closed_store_answers_an_error_not_a_trap() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let bucket = db.bucket("default").unwrap();
    bucket.set("k", b"v").unwrap();
    db.close().unwrap();
    assert!(matches!(bucket.get("k"), Err(Error::Closed)));
}

/// 63 writes of 1.5 KiB into 64 KiB memtables (one memtable full, none flushed yet), then an
/// increment: the 64th write, after which the host runs background work.
fn fill_then_increment(db: &WasiDb) -> strata_wasi_host::Result<u64> {
    let bucket = db.bucket("default").unwrap();
    for i in 0..63 {
        bucket.set(&format!("fill{i:02}"), &[7u8; 1536]).unwrap();
    }
    bucket.increment("hits", 1)
}

fn options() -> strata_wasi_host::OpenOptions {
    strata_wasi_host::OpenOptions {
        write_buffer_size: 64 << 10,
        ..default_options()
    }
}

fn quiet_limits() -> Limits {
    // No timer: background work runs only after writes, where the test puts it.
    Limits {
        maintenance_interval: None,
        ..limits()
    }
}

/// A write's answer is what happened to the write: when the background work the host runs
/// after it fails (here the flush, its table's name taken by a directory), the increment that
/// committed still answers its count, so a caller never retries it and counts twice; the
/// failure is reported by the next `maintenance`, and later writes meet it.
#[test]
fn a_committed_write_answers_ok_though_the_work_after_it_fails() {
    // Which table the first flush writes, learnt on a twin store.
    let twin = tempfile::tempdir().unwrap();
    let db = WasiDb::open(twin.path(), quiet_limits(), options()).unwrap();
    assert_eq!(fill_then_increment(&db).unwrap(), 1);
    db.close().unwrap();
    drop(db);
    let table = std::fs::read_dir(twin.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .min()
        .expect("the host's background work flushed a table");

    let dir = tempfile::tempdir().unwrap();
    let db = WasiDb::open(dir.path(), quiet_limits(), options()).unwrap();
    std::fs::create_dir(dir.path().join(&table)).unwrap();
    assert_eq!(
        fill_then_increment(&db).unwrap(),
        1,
        "the increment committed"
    );
    let bucket = db.bucket("default").unwrap();
    assert_eq!(bucket.get("hits").unwrap().as_deref(), Some(&b"1"[..]));
    let e = db.maintenance(8).unwrap_err();
    assert!(e.to_string().contains(&table), "{e}");
    assert!(bucket.increment("hits", 1).is_err(), "writes stopped");
}

/// One `maintenance` call runs at most its steps (a memtable's flush or one compaction each),
/// however much is due: before, one call drained every queued job under one call deadline.
#[test]
fn maintenance_runs_at_most_its_steps() {
    let dir = tempfile::tempdir().unwrap();
    let small = || ColumnFamilyOptions {
        write_buffer_size: 16 << 10,
        ..ColumnFamilyOptions::default()
    };
    {
        let native = Db::open(dir.path(), Options::default()).unwrap();
        native.create_cf("a", small()).unwrap();
        native.create_cf("b", small()).unwrap();
        native.close().unwrap();
    }
    let options = strata_wasi_host::OpenOptions {
        write_buffer_size: 16 << 10,
        ..default_options()
    };
    let db = WasiDb::open(dir.path(), quiet_limits(), options).unwrap();
    // A full memtable in each column family, the default's last, in fewer than the 64 writes
    // after which the host runs background work itself: three flushes queued, in that order.
    for name in ["a", "b", "default"] {
        let bucket = db.bucket(name).unwrap();
        for i in 0..20 {
            bucket.set(&format!("k{i:02}"), &[5u8; 1024]).unwrap();
        }
    }
    let l0 = |db: &WasiDb| db.properties().unwrap().levels[0].files;
    assert_eq!(l0(&db), 0);
    // One step each: a's flush, then b's, then the default column family's.
    assert!(db.maintenance(1).unwrap());
    assert!(db.maintenance(1).unwrap());
    assert_eq!(
        l0(&db),
        0,
        "two steps flushed the default column family too"
    );
    db.maintenance(1).unwrap();
    assert_eq!(l0(&db), 1);
    let bucket = db.bucket("b").unwrap();
    assert_eq!(
        bucket.get("k00").unwrap().as_deref(),
        Some(&[5u8; 1024][..])
    );
}
