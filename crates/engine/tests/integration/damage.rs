//! Damaged stores: an open never destroys data, a read never returns outdated values, and
//! `repair_store` is the way out. Each case is a class: cut lengths, flipped positions, levels.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use strata_engine::fs::{FaultError, FaultInjectionFs, FsOp};
use strata_engine::{Db, Error, Options, ReadOptions, WriteOptions, repair_store, verify_store};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Entries = Vec<(Vec<u8>, Vec<u8>)>;
type Damage<'a> = (&'a str, &'a dyn Fn(&Path));

pub(crate) fn options() -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 16 << 10;
    o.block_size = 512;
    o.compression = strata_engine::Compression::None;
    o.disable_auto_compactions = true;
    o
}

pub(crate) fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

pub(crate) fn value(i: u64, round: u64) -> Vec<u8> {
    format!("value-{i}-round-{round}-{}", "x".repeat(40)).into_bytes()
}

/// A store of several tables: `rounds` passes over keys 0..n, each overwriting every key and
/// flushed to its own L0 table, and a tail left in the WAL. Returns what it holds.
fn build(dir: &Path, n: u64, rounds: u64) -> Model {
    let db = Db::open(dir, options()).unwrap();
    let mut model = Model::new();
    for round in 0..rounds {
        for i in 0..n {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
        db.flush().unwrap();
    }
    for i in 0..n / 10 {
        db.put(key(i), value(i, 99)).unwrap();
        model.insert(key(i), value(i, 99));
    }
    db.close().unwrap();
    model
}

/// Everything a full scan returns, or the error it stopped at (with what it gave before).
fn scan(db: &Db) -> (Entries, Result<(), Error>) {
    let mut it = match db.iter(&ReadOptions::default()) {
        Ok(it) => it,
        Err(e) => return (Vec::new(), Err(e)),
    };
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    (out, it.status())
}

/// The data files (tables, blob files) in `dir` and in its `lost/`, by name.
fn data_files(dir: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for d in [dir.to_path_buf(), dir.join("lost")] {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let name = e.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".sst") || name.ends_with(".blob") {
                names.insert(name);
            }
        }
    }
    names
}

fn manifest(dir: &Path) -> PathBuf {
    let current = std::fs::read_to_string(dir.join("CURRENT")).unwrap();
    dir.join(current.trim_end())
}

pub(crate) fn copy_store(from: &Path) -> tempfile::TempDir {
    let to = crate::common::tempdir();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.path().join(e.file_name())).unwrap();
        }
    }
    to
}

/// The open either fails with `Corruption`, or gives back exactly `model`; either way no table
/// is gone (it may be in `lost/`). Returns whether it opened.
fn open_fails_or_is_whole(dir: &Path, model: &Model, what: &str) -> bool {
    let before = data_files(dir);
    let opened = match Db::open(dir, options()) {
        Ok(db) => {
            let (got, status) = scan(&db);
            status.unwrap_or_else(|e| panic!("{what}: the scan failed: {e}"));
            let got: Model = got.into_iter().collect();
            assert!(got == *model, "{what}: opened with other data than written");
            db.close().unwrap();
            true
        }
        Err(Error::Corruption { .. }) => false,
        Err(e) => panic!("{what}: failed with {e}, not a corruption error"),
    };
    let after = data_files(dir);
    let gone: Vec<_> = before.difference(&after).collect();
    // A successful open may delete tables it proved obsolete; one that failed deletes nothing.
    if !opened {
        assert!(gone.is_empty(), "{what}: the failed open deleted {gone:?}");
    }
    opened
}

/// `repair_store`, then `verify_store` passes and every key reads back.
fn repair_restores(dir: &Path, model: &Model, what: &str) {
    let report = repair_store(dir, &options()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let verified = verify_store(dir, &options()).unwrap();
    assert!(verified.is_ok(), "{what}: after repair: {verified:?}");
    let db = Db::open(dir, options()).unwrap();
    let (got, status) = scan(&db);
    status.unwrap();
    let got: Model = got.into_iter().collect();
    assert!(got == *model, "{what}: repair lost data: {report:?}");
    db.close().unwrap();
}

#[test]
fn a_cut_short_manifest_never_loses_tables() {
    let pristine = crate::common::tempdir();
    let model = build(pristine.path(), 400, 4);
    let len = std::fs::metadata(manifest(pristine.path())).unwrap().len();
    for cut in [1, 10, 37, 100, len / 2, len - 8] {
        let dir = copy_store(pristine.path());
        let path = manifest(dir.path());
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - cut).unwrap();
        drop(f);
        let what = format!("MANIFEST cut by {cut} of {len} bytes");
        open_fails_or_is_whole(dir.path(), &model, &what);
        repair_restores(dir.path(), &model, &what);
    }
}

#[test]
fn a_manifest_of_one_snapshot_cut_short_fails_the_open() {
    // Reopened, the MANIFEST is one snapshot: the store, whose cut tail held every table.
    let dir = crate::common::tempdir();
    let model = build(dir.path(), 400, 3);
    Db::open(dir.path(), options()).unwrap().close().unwrap();
    let tables = common::tables_on_disk(dir.path());
    let path = manifest(dir.path());
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    match Db::open(dir.path(), options()) {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, path);
            assert!(detail.contains("snapshot is cut short"), "{detail}");
        }
        other => panic!("opened: {:?}", other.map(|_| ())),
    }
    assert_eq!(
        common::tables_on_disk(dir.path()),
        tables,
        "tables were deleted"
    );
    repair_restores(dir.path(), &model, "one-snapshot MANIFEST cut by 10");
}

#[test]
fn a_flipped_manifest_byte_fails_the_open_or_changes_nothing() {
    let pristine = crate::common::tempdir();
    let model = build(pristine.path(), 300, 3);
    let good = std::fs::read(manifest(pristine.path())).unwrap();
    let step = (good.len() / 40).max(1);
    for pos in (0..good.len()).step_by(step).chain([good.len() - 1]) {
        let dir = copy_store(pristine.path());
        let mut bad = good.clone();
        bad[pos] ^= 0x10;
        std::fs::write(manifest(dir.path()), &bad).unwrap();
        let what = format!("MANIFEST byte {pos} of {} flipped", good.len());
        if !open_fails_or_is_whole(dir.path(), &model, &what) {
            repair_restores(dir.path(), &model, &what);
        }
    }
}

#[test]
fn a_missing_or_bad_current_never_creates_a_new_store() {
    let pristine = crate::common::tempdir();
    let model = build(pristine.path(), 300, 2);
    let damage: [Damage<'_>; 4] = [
        ("CURRENT removed", &|d| {
            std::fs::remove_file(d.join("CURRENT")).unwrap()
        }),
        ("CURRENT empty", &|d| {
            std::fs::write(d.join("CURRENT"), "").unwrap()
        }),
        ("CURRENT garbled", &|d| {
            std::fs::write(d.join("CURRENT"), "MANIFEST-0x\n").unwrap()
        }),
        ("CURRENT names a missing MANIFEST", &|d| {
            std::fs::write(d.join("CURRENT"), "MANIFEST-999999\n").unwrap()
        }),
    ];
    for (what, hurt) in damage {
        let dir = copy_store(pristine.path());
        hurt(dir.path());
        let tables = data_files(dir.path());
        match Db::open(dir.path(), options()) {
            Err(Error::Corruption { file, .. }) => {
                assert_eq!(file, dir.path().join("CURRENT"), "{what}")
            }
            other => panic!("{what}: {:?}", other.map(|_| ())),
        }
        assert_eq!(data_files(dir.path()), tables, "{what}: files changed");
        repair_restores(dir.path(), &model, what);
    }
}

/// The case and its neighbours: a damaged block in a table at the top (L0, newest data)
/// or at the bottom level, under a scan. What the scan yields before it stops is current data,
/// and it stops with the error naming the table.
#[test]
fn a_scan_stops_at_a_damaged_table_at_any_level() {
    let pristine = crate::common::tempdir();
    {
        let db = Db::open(pristine.path(), options()).unwrap();
        for round in 0..2 {
            for i in 0..600 {
                db.put(key(i), value(i, round)).unwrap();
            }
            db.flush().unwrap();
        }
        db.compact_range(None, None).unwrap();
        for round in 2..4 {
            for i in (0..600).step_by(2) {
                db.put(key(i), value(i, round)).unwrap();
            }
            db.flush().unwrap();
        }
        db.close().unwrap();
    }
    let mut model = Model::new();
    for i in 0..600u64 {
        model.insert(key(i), value(i, if i % 2 == 0 { 3 } else { 1 }));
    }
    let mut tables = common::files_with_extension(pristine.path(), "sst");
    tables.sort();
    assert!(tables.len() >= 3, "{tables:?}");
    // The oldest number is the bottom level's, the newest the top L0 table's.
    for table in [tables[0].clone(), tables[tables.len() - 1].clone()] {
        let name = table.file_name().unwrap().to_owned();
        for at in [600usize, 3000, 9000] {
            let dir = copy_store(pristine.path());
            let path = dir.path().join(&name);
            let mut bytes = std::fs::read(&path).unwrap();
            if at >= bytes.len() / 2 {
                continue;
            }
            bytes[at] ^= 0x40;
            std::fs::write(&path, &bytes).unwrap();
            let what = format!("{name:?} byte {at}");
            let db = Db::open(dir.path(), options()).unwrap();
            let (got, status) = scan(&db);
            for (k, v) in &got {
                assert_eq!(
                    model.get(k),
                    Some(v),
                    "{what}: outdated value for {}",
                    String::from_utf8_lossy(k)
                );
            }
            match status {
                Err(Error::Corruption { file, .. }) => assert_eq!(file, path, "{what}"),
                other => panic!("{what}: the scan ended with {other:?} after {}", got.len()),
            }
            // Backwards too.
            let mut it = db.iter(&ReadOptions::default()).unwrap();
            it.seek_to_last();
            while it.valid() {
                assert_eq!(model.get(it.key()), Some(&it.value().to_vec()), "{what}");
                it.prev();
            }
            assert!(
                it.status().is_err(),
                "{what}: backwards scan passed the damage"
            );
        }
    }
}

/// 300 values of 207 bytes, flushed: with `o`'s blob options, all in blob files.
fn build_with_blobs(dir: &Path, o: &Options) -> Model {
    let mut model = Model::new();
    let db = Db::open(dir, o.clone()).unwrap();
    for i in 0..300 {
        let v = format!("{i:06}-{}", "b".repeat(200)).into_bytes();
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.flush().unwrap();
    db.close().unwrap();
    model
}

#[test]
fn a_scan_stops_at_a_damaged_blob_record() {
    let dir = crate::common::tempdir();
    let mut o = options();
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 64;
    let model = build_with_blobs(dir.path(), &o);
    let blob = common::files_with_extension(dir.path(), "blob")
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&blob).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&blob, &bytes).unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    let (got, status) = scan(&db);
    assert!(got.len() < model.len());
    for (k, v) in &got {
        assert_eq!(model.get(k), Some(v));
    }
    assert!(matches!(status, Err(Error::Corruption { file, .. }) if file == blob));
}

#[test]
fn a_ttl_past_the_end_of_time_never_expires() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let cf = db.default_cf();
    db.put_with_ttl(&cf, "a", "1", u64::MAX).unwrap();
    db.put_until(&cf, "b", "2", u64::MAX).unwrap();
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"2"[..]));
    db.flush().unwrap();
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
}

/// Each open that fails on a full disk (here: every write after the first few) leaves the
/// directory as it found it, so the space it freed is there for the next attempt.
#[test]
fn a_failed_open_on_a_full_disk_leaves_no_files_behind() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..2000 {
            db.put_with(
                &WriteOptions {
                    sync: i % 500 == 0,
                    ..Default::default()
                },
                key(i),
                value(i, 0),
            )
            .unwrap();
        }
        // No flush: the open must replay the WAL into tables.
        db.close().unwrap();
    }
    let listing = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "LOCK")
            .collect();
        v.sort();
        v
    };
    let before = listing(dir.path());
    // Every point of the open fails once, in order, until one open gets through: the replay's
    // tables, the new MANIFEST, the temporary CURRENT, the new WAL.
    let mut opened = false;
    for n in 0..1000 {
        let fault = FaultInjectionFs::new();
        fault.fail_after(&[FsOp::Write, FsOp::Sync], n, FaultError::NoSpace);
        let mut o = options();
        o.filesystem = std::sync::Arc::new(fault.clone());
        match Db::open(dir.path(), o) {
            Err(_) => assert_eq!(listing(dir.path()), before, "after {n} writes"),
            Ok(db) => {
                // Enough writes got through: the store opened whole.
                drop(db);
                opened = true;
                break;
            }
        }
    }
    assert!(opened, "an open with room for every write succeeds");
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(
        db.get(key(1999)).unwrap().as_deref(),
        Some(&value(1999, 0)[..])
    );
}

/// A crash's unfinished table, which no MANIFEST names, is a note in the report, not damage.
#[test]
fn verify_calls_crash_leftovers_what_they_are() {
    let dir = crate::common::tempdir();
    build(dir.path(), 200, 1);
    let table = common::files_with_extension(dir.path(), "sst").remove(0);
    let bytes = std::fs::read(&table).unwrap();
    std::fs::write(dir.path().join("000900.sst"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(dir.path().join("000901.sst"), b"").unwrap();
    let report = verify_store(dir.path(), &options()).unwrap();
    assert!(report.is_ok(), "{report:?}");
    for name in ["000900.sst", "000901.sst"] {
        let f = report.files.iter().find(|f| f.name == name).unwrap();
        assert!(f.note.as_deref().unwrap().contains("unreferenced"), "{f:?}");
    }
    // A named table that is damaged is still damage.
    let mut bad = bytes.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    std::fs::write(&table, bad).unwrap();
    assert!(!verify_store(dir.path(), &options()).unwrap().is_ok());
}

/// A damaged table: `repair` keeps it aside, and every key of the intact tables reads back.
#[test]
fn repair_keeps_a_damaged_table_aside_and_the_rest_whole() {
    let dir = crate::common::tempdir();
    let mut intact = Model::new();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..300 {
            db.put(key(i), value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        let first = common::files_with_extension(dir.path(), "sst");
        for i in 300..600 {
            db.put(key(i), value(i, 0)).unwrap();
            intact.insert(key(i), value(i, 0));
        }
        db.flush().unwrap();
        db.close().unwrap();
        for table in first {
            let mut bytes = std::fs::read(&table).unwrap();
            let at = bytes.len() / 3;
            bytes[at] ^= 0x08;
            std::fs::write(&table, bytes).unwrap();
        }
    }
    assert!(!verify_store(dir.path(), &options()).unwrap().is_ok());
    let report = repair_store(dir.path(), &options()).unwrap();
    assert!(!report.lost.is_empty(), "{report:?}");
    assert!(dir.path().join("lost").exists());
    assert!(verify_store(dir.path(), &options()).unwrap().is_ok());
    let db = Db::open(dir.path(), options()).unwrap();
    let (got, status) = scan(&db);
    status.unwrap();
    let got: Model = got.into_iter().collect();
    assert_eq!(got, intact);
}

/// A damaged blob file: `repair` keeps it aside and records it as evicted, so its values read
/// as absent instead of failing every scan; the other values read back.
#[test]
fn repair_turns_a_damaged_blob_file_into_absent_values() {
    let dir = crate::common::tempdir();
    let mut o = options();
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 64;
    o.cf.blob_file_size = 8 << 10;
    let model = build_with_blobs(dir.path(), &o);
    let blobs = common::files_with_extension(dir.path(), "blob");
    assert!(blobs.len() >= 2, "{blobs:?}");
    let mut bytes = std::fs::read(&blobs[0]).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&blobs[0], bytes).unwrap();
    let report = repair_store(dir.path(), &o).unwrap();
    assert_eq!(report.lost.len(), 1, "{report:?}");
    assert!(verify_store(dir.path(), &o).unwrap().is_ok());
    let db = Db::open(dir.path(), o).unwrap();
    let (got, status) = scan(&db);
    status.unwrap();
    assert!(!got.is_empty() && got.len() < model.len(), "{}", got.len());
    for (k, v) in &got {
        assert_eq!(model.get(k), Some(v));
    }
}

/// `Entries` over a damaged table ends with the error as its last item, after current values.
#[test]
fn entries_end_with_the_error() {
    let dir = crate::common::tempdir();
    let model = build(dir.path(), 400, 1);
    let table = common::files_with_extension(dir.path(), "sst").remove(0);
    let mut bytes = std::fs::read(&table).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x20;
    std::fs::write(&table, bytes).unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for reverse in [false, true] {
        let it = db.iter(&ReadOptions::default()).unwrap();
        let items: Vec<_> = if reverse { it.backward() } else { it.forward() }.collect();
        let (last, entries) = items.split_last().unwrap();
        let err = last.as_ref().unwrap_err();
        assert_eq!(err.kind(), strata_engine::ErrorKind::Corruption);
        for e in entries {
            let (k, v) = e.as_ref().unwrap();
            assert_eq!(model.get(k), Some(v));
        }
    }
}

/// Random damage (a cut or a flipped byte) in a random file of a closed store of keys written
/// in order: the open fails, or a scan stops with an error after current values only, or the
/// store holds exactly the first j writes for some j.
#[test]
fn random_damage_fails_or_leaves_a_valid_prefix() {
    let pristine = crate::common::tempdir();
    let n = 1500u64;
    {
        let db = Db::open(pristine.path(), options()).unwrap();
        for i in 0..n {
            db.put(key(i), value(i, 0)).unwrap();
            if i % 400 == 399 {
                db.flush().unwrap();
            }
        }
        db.close().unwrap();
    }
    let files: Vec<String> = std::fs::read_dir(pristine.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "LOCK")
        .collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..60 {
        let dir = copy_store(pristine.path());
        let name = &files[(next() % files.len() as u64) as usize];
        let path = dir.path().join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        if bytes.is_empty() {
            continue;
        }
        let at = (next() % bytes.len() as u64) as usize;
        let cut = next() % 2 == 0;
        if cut {
            bytes.truncate(at);
        } else {
            bytes[at] ^= 1 << (next() % 8);
        }
        std::fs::write(&path, &bytes).unwrap();
        let what = format!(
            "round {round}: {name} {} at {at}",
            if cut { "cut" } else { "flipped" }
        );
        let tables = data_files(dir.path());
        let Ok(db) = Db::open(dir.path(), options()) else {
            assert_eq!(data_files(dir.path()), tables, "{what}: files changed");
            continue;
        };
        let (got, status) = scan(&db);
        for (i, (k, v)) in got.iter().enumerate() {
            if status.is_ok() {
                assert_eq!(k, &key(i as u64), "{what}: not a prefix");
            }
            assert_eq!(
                v,
                &value(String::from_utf8_lossy(&k[3..]).parse().unwrap(), 0)
            );
        }
    }
}

use crate::common;
