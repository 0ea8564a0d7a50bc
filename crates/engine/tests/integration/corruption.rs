//! A flipped byte anywhere in a table, WAL, MANIFEST, CURRENT or blob file: `verify_store` names
//! the file as damaged, a paranoid open fails with `Corruption` (tables and blob files), and a
//! normal open and full read either returns exactly the original data or an error, never wrong
//! data and never a panic. A flip `verify_store` passes must change nothing that is read.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::collections::BTreeMap;
use std::path::Path;

use strata_engine::{ColumnFamilyOptions, Db, Error, Options, ReadOptions, verify_store};

type Contents = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn options() -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 8 << 10;
    o.block_size = 512;
    o.compression = strata_engine::Compression::None;
    o.create_missing_column_families = true;
    o.column_families.insert(
        "blobs".into(),
        ColumnFamilyOptions {
            enable_blob_files: true,
            min_blob_size: 50,
            blob_file_size: 4 << 10,
            ..Default::default()
        },
    );
    o
}

/// A closed store with tables at two levels, a WAL holding records, a MANIFEST and blob files.
fn build(dir: &Path) -> Contents {
    let db = Db::open(dir, options()).unwrap();
    let blobs = db.cf("blobs").unwrap();
    for i in 0..400u32 {
        db.put(format!("key{i:04}"), format!("value{i:04}"))
            .unwrap();
        if i % 4 == 0 {
            db.put_cf(
                &blobs,
                format!("big{i:04}"),
                format!("{i:04}{}", "x".repeat(120)),
            )
            .unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    for i in 0..30u32 {
        db.put(format!("late{i:02}"), "in the WAL only").unwrap();
    }
    let contents = read_all(&db).unwrap();
    db.close().unwrap();
    contents
}

fn read_all(db: &Db) -> strata_engine::Result<Contents> {
    let mut out = Contents::new();
    for name in db.list_cf() {
        let cf = db.cf(&name)?;
        let mut it = db.iter_cf(&ReadOptions::default(), &cf)?;
        let mut entries = Vec::new();
        it.seek_to_first();
        while it.valid() {
            entries.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status()?;
        out.insert(name, entries);
    }
    Ok(out)
}

/// Byte offsets to flip: every byte of a small file; the head, the tail and an even spread of a
/// large one.
fn positions(len: usize) -> Vec<usize> {
    if len <= 1200 {
        return (0..len).collect();
    }
    let mut p: Vec<usize> = (0..64).chain(len - 64..len).collect();
    p.extend((0..150).map(|i| 64 + i * (len - 128) / 150));
    p
}

#[test]
fn every_flipped_byte_is_reported_by_verify_and_never_read_as_data() {
    let pristine = crate::common::tempdir();
    let want = build(pristine.path());
    assert!(verify_store(pristine.path(), &options()).unwrap().is_ok());

    let mut files: Vec<_> = std::fs::read_dir(pristine.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "LOCK")
        .collect();
    files.sort();
    let kinds = ["sst", "log", "blob", "MANIFEST", "CURRENT"];
    for kind in kinds {
        assert!(
            files.iter().any(|f| f.contains(kind)),
            "no {kind} file in {files:?}"
        );
    }

    let mut summary = BTreeMap::<&str, (u64, u64, u64)>::new();
    for name in &files {
        let kind = kinds
            .iter()
            .find(|k| name.contains(**k))
            .copied()
            .unwrap_or("other");
        let good = std::fs::read(pristine.path().join(name)).unwrap();
        if good.is_empty() {
            continue;
        }
        for pos in positions(good.len()) {
            let dir = crate::common::tempdir();
            for f in &files {
                std::fs::copy(pristine.path().join(f), dir.path().join(f)).unwrap();
            }
            let mut bad = good.clone();
            bad[pos] ^= 0x10;
            std::fs::write(dir.path().join(name), &bad).unwrap();
            let what = format!("{name} byte {pos} of {}", good.len());

            let report = verify_store(dir.path(), &options()).unwrap();
            let flagged = report.damaged().any(|f| &f.name == name);
            let entry = summary.entry(kind).or_default();
            entry.0 += 1;
            if flagged {
                entry.1 += 1;
            } else {
                entry.2 += 1;
                assert!(report.is_ok(), "{what}: another file blamed: {report:?}");
            }

            if kind == "sst" || kind == "blob" {
                let mut paranoid = options();
                paranoid.paranoid_checks = true;
                match Db::open(dir.path(), paranoid) {
                    Err(Error::Corruption { file, .. }) => {
                        assert!(flagged, "{what}: paranoid open failed, verify passed");
                        assert_eq!(file, dir.path().join(name), "{what}");
                    }
                    Err(e) => panic!("{what}: paranoid open gave {e}"),
                    // A damaged blob footer reads as an unsealed file with a torn tail, as a
                    // crash leaves it: every record is still checked when read.
                    Ok(db) => assert_eq!(read_all(&db).unwrap(), want, "{what}"),
                }
            }

            match Db::open(dir.path(), options()).and_then(|db| read_all(&db)) {
                Ok(got) if kind == "log" => {
                    // A flip in the log's last record reads as a torn tail: the record is
                    // dropped, never altered.
                    for (cf, entries) in &got {
                        for e in entries {
                            assert!(want[cf].contains(e), "{what}: {e:?} was never written");
                        }
                    }
                }
                Ok(got) => assert_eq!(got, want, "{what}: wrong data read"),
                Err(Error::Corruption { file, detail }) => {
                    assert!(flagged, "{what}: reads failed ({detail}), verify passed");
                    assert!(
                        file.starts_with(dir.path()),
                        "{what}: corruption names {}",
                        file.display()
                    );
                }
                Err(e) => panic!("{what}: gave {e}"),
            }
        }
    }
    for (kind, (flips, flagged, harmless)) in &summary {
        eprintln!(
            "{kind}: {flips} flips, {flagged} reported by verify, {harmless} changed nothing read"
        );
    }
    for kind in ["log", "blob", "MANIFEST", "CURRENT"] {
        assert_eq!(summary[kind].2, 0, "{kind}: a flip verify missed");
    }
}

/// An open store checks its live tables and blob files while it keeps serving; a flipped byte
/// in one is reported naming the file.
#[test]
fn an_open_store_verifies_its_live_files() {
    let dir = crate::common::tempdir();
    let mut o = options();
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 100;
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..500u32 {
        db.put(
            format!("k{i:04}"),
            format!("{i}-{}", "x".repeat(150 * (i as usize % 2))),
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let mut o = options();
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 100;
    let db = Db::open(dir.path(), o).unwrap();
    let report = strata_engine::verify_live(&db).unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert!(
        report
            .files
            .iter()
            .any(|f| f.kind == "table" && f.entries > 0)
    );
    assert!(
        report
            .files
            .iter()
            .any(|f| f.kind == "blob" && f.entries > 0)
    );
    let table = report.files.iter().find(|f| f.kind == "table").unwrap();
    let path = dir.path().join(&table.name);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let report = strata_engine::verify_live(&db).unwrap();
    let bad: Vec<_> = report.damaged().map(|f| f.name.clone()).collect();
    assert_eq!(bad, std::slice::from_ref(&table.name));
    // Still serving.
    db.put("after", "1").unwrap();
}
