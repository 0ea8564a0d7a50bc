//! Partial writes, copies and renames: checked against a byte vector per key, with two writers
//! at one key, a rename racing appends, snapshots held across writes, reopen and power loss, and
//! blob garbage collection while several keys share records.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::fs::FaultInjectionFs;
use strata_engine::{
    Compression, Db, ErrorKind, MAX_VALUE_SIZE, Options, ReadOptions, WriteBatch, WriteOptions,
};

use crate::common::synced;

fn options(blob_files: bool) -> Options {
    let mut o = Options::default();
    o.enable_blob_files = blob_files;
    o.min_blob_size = 4096;
    o.blob_compression = Compression::None;
    o.write_buffer_size = 256 << 10;
    o
}

fn write(db: &Db, f: impl FnOnce(&mut WriteBatch)) -> strata_engine::Result<()> {
    let mut b = WriteBatch::new();
    f(&mut b);
    db.write(b, &WriteOptions::default())
}

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..len).map(|_| rng.random()).collect()
}

/// Every key of `model` reads as its bytes: whole, by length, and by a few ranges.
fn check(db: &Db, model: &BTreeMap<String, Vec<u8>>, opts: &ReadOptions) {
    for (k, want) in model {
        let got = db
            .get_with(opts, k)
            .unwrap()
            .unwrap_or_else(|| panic!("{k} missing"));
        assert!(
            got.as_ref() == &want[..],
            "{k}: {} vs {} bytes",
            got.len(),
            want.len()
        );
        let n = want.len() as u64;
        for (off, len) in [(0, 10), (n / 3, 5000), (n.saturating_sub(7), 100)] {
            let r = db
                .read_range_cf(opts, &db.default_cf(), k, off, len)
                .unwrap()
                .unwrap();
            assert_eq!(r.value_len, n, "{k}");
            let (s, e) = (off.min(n) as usize, (off + len).min(n) as usize);
            assert!(r.bytes.as_ref() == &want[s..e], "{k} range {off}+{len}");
        }
    }
}

/// Random partial writes, copies and renames against a byte vector per key, read back as they
/// go, at a snapshot held across them, after a flush and compaction, and after reopening.
#[test]
fn partial_writes_match_a_byte_vector_model() {
    for blob_files in [true, false] {
        let dir = crate::common::tempdir();
        let db = Db::open(dir.path(), options(blob_files)).unwrap();
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut rng = StdRng::seed_from_u64(42);
        let mut held = None;
        for step in 0..600u64 {
            let k = format!("k{}", rng.random_range(0..6));
            let other = format!("k{}", rng.random_range(0..6));
            let len = match rng.random_range(0..10) {
                0..=5 => rng.random_range(1..200),
                6..=8 => rng.random_range(200..9000),
                _ => rng.random_range(9000..70_000),
            };
            let data = bytes(len, step);
            let exists = model.contains_key(&k);
            match rng.random_range(0..8) {
                0 => {
                    db.put(&k, &data).unwrap();
                    model.insert(k, data);
                }
                1 | 2 => {
                    write(&db, |b| b.append(&k, &data)).unwrap();
                    model.entry(k).or_default().extend_from_slice(&data);
                }
                3 | 4 => {
                    let cur = model.get(&k).map_or(0, Vec::len);
                    let off = rng.random_range(0..cur as u64 + 5000);
                    let r = write(&db, |b| b.write_at(&k, off, &data));
                    if !exists {
                        assert_eq!(r.unwrap_err().kind(), ErrorKind::NotFound);
                        continue;
                    }
                    r.unwrap();
                    let v = model.get_mut(&k).unwrap();
                    let end = off as usize + data.len();
                    if v.len() < end {
                        v.resize(end, 0);
                    }
                    v[off as usize..end].copy_from_slice(&data);
                }
                5 => {
                    let to = rng.random_range(0..80_000u64);
                    let r = write(&db, |b| b.truncate(&k, to));
                    if !exists {
                        assert_eq!(r.unwrap_err().kind(), ErrorKind::NotFound);
                        continue;
                    }
                    r.unwrap();
                    model.get_mut(&k).unwrap().resize(to as usize, 0);
                }
                6 if k != other => {
                    let r = write(&db, |b| b.copy(&k, &other));
                    match model.get(&k).cloned() {
                        Some(v) => {
                            r.unwrap();
                            model.insert(other, v);
                        }
                        None => assert_eq!(r.unwrap_err().kind(), ErrorKind::NotFound),
                    }
                }
                7 if k != other => {
                    let r = write(&db, |b| b.rename(&k, &other));
                    match model.remove(&k) {
                        Some(v) => {
                            r.unwrap();
                            model.insert(other, v);
                        }
                        None => assert_eq!(r.unwrap_err().kind(), ErrorKind::NotFound),
                    }
                }
                _ => {}
            }
            if step % 97 == 0 {
                check(&db, &model, &ReadOptions::default());
            }
            if step == 200 {
                held = Some((db.snapshot(), model.clone()));
            }
            if step % 150 == 149 {
                db.flush().unwrap();
            }
        }
        check(&db, &model, &ReadOptions::default());
        let (snap, then) = held.take().unwrap();
        let at = ReadOptions {
            snapshot: Some(snap.clone()),
            ..Default::default()
        };
        check(&db, &then, &at);
        db.compact_range(None, None).unwrap();
        check(&db, &then, &at);
        drop(at);
        drop(snap);
        check(&db, &model, &ReadOptions::default());
        drop(db);
        let db = Db::open(dir.path(), options(blob_files)).unwrap();
        check(&db, &model, &ReadOptions::default());
        // Whatever keys remain: the iterator agrees too.
        let all = crate::common::collect(db.iter(&ReadOptions::default()).unwrap());
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
            .collect();
        assert!(all == want, "iterator disagrees");
    }
}

/// Two threads append to one key at once: every append lands whole, once, in each thread's
/// order.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn two_appenders_to_one_key_lose_nothing() {
    let dir = crate::common::tempdir();
    let db = Arc::new(Db::open(dir.path(), options(true)).unwrap());
    let threads: Vec<_> = (0..2u8)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..400u32 {
                    let piece = format!("[{t}:{i:04}{}]", "x".repeat(40 + (i % 7) as usize * 30));
                    write(&db, |b| b.append("log", piece.as_bytes())).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let v = String::from_utf8(db.get("log").unwrap().unwrap().into_vec()).unwrap();
    for t in 0..2 {
        let mut seen = 0;
        for piece in v.split('[').skip(1) {
            if let Some(rest) = piece.strip_prefix(&format!("{t}:")) {
                assert_eq!(rest[..4].parse::<u32>().unwrap(), seen, "thread {t} order");
                seen += 1;
            }
        }
        assert_eq!(seen, 400, "thread {t}");
    }
}

/// Appends with and without the WAL from two threads share write groups, where WAL-less writes
/// take the later sequence numbers: each is resolved in that order, so none is lost.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn appends_with_and_without_the_wal_in_one_group_lose_nothing() {
    let dir = crate::common::tempdir();
    let db = Arc::new(Db::open(dir.path(), options(true)).unwrap());
    let threads: Vec<_> = [false, true]
        .into_iter()
        .map(|disable_wal| {
            let db = db.clone();
            std::thread::spawn(move || {
                let opts = WriteOptions {
                    disable_wal,
                    ..Default::default()
                };
                let mark = if disable_wal { b"n" } else { b"w" };
                for _ in 0..2000 {
                    let mut b = WriteBatch::new();
                    b.append("k", mark);
                    db.write(b, &opts).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let v = db.get("k").unwrap().unwrap();
    let count = |c: u8| v.iter().filter(|&&b| b == c).count();
    assert_eq!((count(b'w'), count(b'n')), (2000, 2000));
}

/// One thread appends to `src` while another renames it away again and again: each append is
/// found exactly once, in order, across the renamed keys and `src`.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_rename_racing_appends_drops_none() {
    let dir = crate::common::tempdir();
    let db = Arc::new(Db::open(dir.path(), options(true)).unwrap());
    let appender = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..1000u32 {
                write(&db, |b| b.append("src", format!("{i};").as_bytes())).unwrap();
            }
        })
    };
    let mut renamed = 0u32;
    while !appender.is_finished() || renamed == 0 {
        match write(&db, |b| b.rename("src", format!("dst{renamed:05}"))) {
            Ok(()) => renamed += 1,
            Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound),
        }
    }
    appender.join().unwrap();
    let mut all = String::new();
    for j in 0..renamed {
        let v = db.get(format!("dst{j:05}")).unwrap().unwrap();
        all.push_str(std::str::from_utf8(&v).unwrap());
    }
    if let Some(v) = db.get("src").unwrap() {
        all.push_str(std::str::from_utf8(&v).unwrap());
    }
    let want: String = (0..1000).map(|i| format!("{i};")).collect();
    assert_eq!(all, want, "after {renamed} renames");
}

/// Renaming a large blob value writes a few hundred bytes, not the value; the new key reads it
/// whole and by range, its expiration goes with it, and the old key is gone.
#[test]
fn a_rename_of_a_large_value_writes_almost_nothing() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options(true)).unwrap();
    let value = bytes(8 << 20, 1);
    db.put("big", &value).unwrap();
    let cf = db.default_cf();
    db.put_until(&cf, "ttl", bytes(9000, 2), u64::MAX / 2)
        .unwrap();
    let before = db.statistics();
    write(&db, |b| {
        b.rename("big", "moved");
        b.copy("ttl", "ttl-copy");
    })
    .unwrap();
    let after = db.statistics();
    let written = (after.wal_bytes - before.wal_bytes)
        + (after.blob_bytes_written - before.blob_bytes_written);
    assert!(written < 1024, "{written} bytes written for a rename");
    assert!(db.get("big").unwrap().is_none());
    assert!(db.get("moved").unwrap().unwrap().as_ref() == &value[..]);
    let r = db.read_range("moved", 5 << 20, 4096).unwrap().unwrap();
    assert!(r.bytes.as_ref() == &value[5 << 20..(5 << 20) + 4096]);
    assert_eq!(
        db.get_expiration(&cf, "ttl-copy").unwrap(),
        db.get_expiration(&cf, "ttl").unwrap()
    );
}

/// A batch of many moves (a directory renamed by the mount): each resolves against the records
/// before it in the batch, chained moves and a range deletion between them included.
#[test]
fn moves_in_one_batch_see_the_records_before_them() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options(true)).unwrap();
    const KEYS: usize = 5000;
    for i in 0..KEYS {
        db.put(format!("a/{i:05}"), bytes(10 + i % 9000, i as u64))
            .unwrap();
    }
    write(&db, |b| {
        for i in 0..KEYS {
            b.rename(format!("a/{i:05}"), format!("t/{i:05}"));
        }
        // Put aside, then into place: each move finds the one before it.
        for i in 0..KEYS {
            b.rename(format!("t/{i:05}"), format!("b/{i:05}"));
        }
        b.put("c/kept", "1");
        b.delete_range("c/", "c0");
        b.put("c/after", "2");
    })
    .unwrap();
    for i in 0..KEYS {
        assert!(db.get(format!("a/{i:05}")).unwrap().is_none());
        assert!(db.get(format!("t/{i:05}")).unwrap().is_none());
        let v = db.get(format!("b/{i:05}")).unwrap().unwrap();
        assert!(
            v.as_ref() == &bytes(10 + i % 9000, i as u64)[..],
            "b/{i:05}"
        );
    }
    // A move of a key the batch deleted by range fails the batch, and writes nothing.
    let e = write(&db, |b| {
        b.put("c/x", "1");
        b.delete_range("c/", "c0");
        b.rename("c/x", "d/x");
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(db.get("c/x").unwrap().is_none());
    assert_eq!(db.get("c/after").unwrap().unwrap().as_ref(), b"2");
    assert!(db.get("c/kept").unwrap().is_none());
}

/// Bad partial writes fail with a typed error and change nothing, not even the rest of their
/// batch; a key under a range tombstone has no value to write into.
#[test]
fn bad_partial_writes_are_refused_and_change_nothing() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options(true)).unwrap();
    db.put("a", "abc").unwrap();
    db.put("r1", "old").unwrap();
    db.delete_range("r", "s").unwrap();
    type Case = (Box<dyn Fn(&mut WriteBatch)>, ErrorKind);
    let cases: Vec<Case> = vec![
        (
            Box::new(|b| b.write_at("nope", 0, "x")),
            ErrorKind::NotFound,
        ),
        (Box::new(|b| b.write_at("r1", 0, "x")), ErrorKind::NotFound),
        (Box::new(|b| b.truncate("nope", 3)), ErrorKind::NotFound),
        (Box::new(|b| b.rename("nope", "b")), ErrorKind::NotFound),
        (Box::new(|b| b.rename("a", "a")), ErrorKind::InvalidArgument),
        (Box::new(|b| b.copy("a", "a")), ErrorKind::InvalidArgument),
        (
            Box::new(|b| b.write_at("a", u64::MAX - 1, "xyz")),
            ErrorKind::InvalidArgument,
        ),
        (
            Box::new(|b| b.write_at("a", MAX_VALUE_SIZE, "x")),
            ErrorKind::InvalidArgument,
        ),
        (
            Box::new(|b| b.truncate("a", MAX_VALUE_SIZE + 1)),
            ErrorKind::InvalidArgument,
        ),
    ];
    for (i, (make, kind)) in cases.iter().enumerate() {
        let mut b = WriteBatch::new();
        b.put("side", format!("{i}"));
        make(&mut b);
        let e = db.write(b, &WriteOptions::default()).unwrap_err();
        assert_eq!(e.kind(), *kind, "case {i}: {e}");
        assert!(
            db.get("side").unwrap().is_none(),
            "case {i} wrote its batch"
        );
    }
    assert_eq!(db.get("a").unwrap().unwrap().as_ref(), b"abc");
    assert!(db.get("r1").unwrap().is_none());
    // Appending creates, even under the tombstone; the old bytes do not come back.
    write(&db, |b| b.append("r1", "new")).unwrap();
    assert_eq!(db.get("r1").unwrap().unwrap().as_ref(), b"new");
}

/// A refused batch leaves nothing live behind in the blob files: the records its partial
/// writes appended are garbage at once (and after a reopen), and the references its copies
/// counted are given back. Two threads are refused at once, so refusals share groups.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn refused_partial_writes_leave_no_live_bytes_behind() {
    let dir = crate::common::tempdir();
    let db = Arc::new(Db::open(dir.path(), options(true)).unwrap());
    db.put("a", bytes(40_000, 1)).unwrap();
    let live = |db: &Db| -> u64 {
        let files = db.properties_cf(&db.default_cf()).unwrap().blob_files;
        files.iter().map(|f| f.live_bytes).sum()
    };
    let before = live(&db);
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..20u64 {
                    let e = write(&db, |b| {
                        b.append(format!("new{t}-{i}"), bytes(20_000, i));
                        b.copy("a", format!("copy{t}-{i}"));
                        b.write_at("nope", 0, "x");
                    })
                    .unwrap_err();
                    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(live(&db), before, "refused writes left live bytes");
    assert!(db.get("new0-0").unwrap().is_none() && db.get("copy1-3").unwrap().is_none());
    drop(Arc::into_inner(db).unwrap());
    let db = Db::open(dir.path(), options(true)).unwrap();
    assert_eq!(live(&db), before, "after a reopen");
}

/// Synced partial writes and renames survive a power loss right after they return; unsynced
/// ones after the last synced write may go, but never leave half a write.
#[test]
fn synced_partial_writes_survive_power_loss() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let mut o = options(true);
    o.filesystem = Arc::new(fs.clone());
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let mut model = Vec::new();
    db.put_with(&synced(), "f", bytes(20_000, 9)).unwrap();
    model.extend(bytes(20_000, 9));
    for i in 0..50u64 {
        let piece = bytes(100 + (i as usize * 997) % 6000, 100 + i);
        let mut b = WriteBatch::new();
        b.append("f", &piece);
        db.write(b, &synced()).unwrap();
        model.extend_from_slice(&piece);
    }
    let mut b = WriteBatch::new();
    b.write_at("f", 7, "patched");
    b.rename("f", "g");
    db.write(b, &synced()).unwrap();
    model[7..14].copy_from_slice(b"patched");
    // Unsynced appends after the last synced write.
    for i in 0..10u64 {
        write(&db, |b| b.append("g", bytes(3000, 900 + i))).unwrap();
    }
    fs.deactivate();
    drop(db);
    fs.drop_unsynced_data().unwrap();
    fs.clear_faults();
    let db = Db::open(dir.path(), o).unwrap();
    assert!(db.get("f").unwrap().is_none());
    let got = db.get("g").unwrap().unwrap();
    assert!(got.len() >= model.len() && (got.len() - model.len()).is_multiple_of(3000));
    assert!(got[..model.len()] == model[..], "synced bytes lost");
}

/// Keys copied and renamed share blob records: compaction and blob housekeeping never free a
/// record an entry (or a snapshot) still names, and free the file once none does.
#[test]
fn shared_records_are_freed_only_when_no_entry_names_them() {
    let dir = crate::common::tempdir();
    let mut o = options(true);
    o.blob_file_size = 64 << 10;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let value = bytes(40_000, 5);
    db.put("a", &value).unwrap();
    // Fill the file so that it is sealed and can be judged.
    db.put("filler", bytes(40_000, 6)).unwrap();
    write(&db, |b| b.copy("a", "b")).unwrap();
    write(&db, |b| b.rename("b", "c")).unwrap();
    write(&db, |b| b.append("c", "tail")).unwrap();
    let snap = db.snapshot();
    db.delete("a").unwrap();
    db.delete("filler").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    crate::common::background_work(&db);
    let mut want = value.clone();
    want.extend_from_slice(b"tail");
    assert!(db.get("c").unwrap().unwrap().as_ref() == &want[..]);
    let at = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    assert!(db.get_with(&at, "a").unwrap().unwrap().as_ref() == &value[..]);
    drop(at);
    drop(snap);
    // Reopened: the borrowed references were logged with the flush. With the snapshot gone a
    // compaction drops `a` and `filler`: every record the file's footer counts is garbage, yet
    // `c` still names one of them.
    drop(db);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let compact_all = |db: &Db| {
        // Inside the bottom table's range, so that compaction rewrites it.
        db.put("b", "x").unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        crate::common::background_work(db);
    };
    compact_all(&db);
    let file = |db: &Db| db.properties_cf(&db.default_cf()).unwrap().blob_files;
    let first = file(&db)[0].clone();
    assert!(
        first.garbage_bytes >= first.record_bytes,
        "the test must make the footer's records garbage: {first:?}"
    );
    assert!(db.get("c").unwrap().unwrap().as_ref() == &want[..]);
    // Once `c` goes too, nothing names the file: it is deleted.
    db.delete("c").unwrap();
    compact_all(&db);
    assert!(
        file(&db).iter().all(|f| f.number != first.number),
        "a file no entry names was kept: {:?}",
        file(&db)
    );
    let sealed_garbage = file(&db)
        .iter()
        .filter(|f| f.live_bytes == 0 && f.state == strata_engine::BlobFileState::Sealed)
        .count();
    assert_eq!(sealed_garbage, 0, "a wholly garbage sealed file was kept");
}

/// Garbage collection moves the pieces of extent lists out of the files it collects, so a file
/// a copy once shared is deleted once its own keys are gone; the moved value reads the same,
/// after a reopen too, and a snapshot taken before still reads the old one.
#[test]
fn garbage_collection_moves_extent_lists_out_of_the_files_it_collects() {
    let dir = crate::common::tempdir();
    let mut o = options(true);
    o.blob_file_size = 64 << 10;
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 1.0;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let value = bytes(40_000, 7);
    db.put("a", &value).unwrap();
    // Fills the first file, so that it is sealed.
    db.put("filler", bytes(40_000, 8)).unwrap();
    write(&db, |b| b.copy("a", "b")).unwrap();
    let tail = bytes(6_000, 9);
    write(&db, |b| b.append("b", &tail)).unwrap();
    let mut want = value.clone();
    want.extend_from_slice(&tail);
    let files = |db: &Db| db.properties_cf(&db.default_cf()).unwrap().blob_files;
    let first = files(&db)[0].number;
    db.delete("a").unwrap();
    db.delete("filler").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    crate::common::background_work(&db);
    assert!(db.get("b").unwrap().unwrap().as_ref() == &want[..]);
    assert!(
        files(&db).iter().all(|f| f.number != first),
        "the collected file was kept for the list that borrowed it: {:?}",
        files(&db)
    );
    assert!(db.statistics().blob_gc_relocated_keys >= 1);
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    assert!(db.get("b").unwrap().unwrap().as_ref() == &want[..]);
    let got = db.read_range("b", 39_990, 20).unwrap().unwrap();
    assert_eq!(got.bytes.as_ref(), &want[39_990..40_010]);
    assert!(files(&db).iter().all(|f| f.number != first));
}

/// Drops values that begin with "drop", and counts the values it saw.
#[derive(Debug, Default)]
struct DropMarked(std::sync::atomic::AtomicU64);

impl strata_engine::CompactionFilter for DropMarked {
    fn filter(&self, _: usize, _: &[u8], value: &[u8]) -> strata_engine::FilterDecision {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match value.starts_with(b"drop") {
            true => strata_engine::FilterDecision::Remove,
            false => strata_engine::FilterDecision::Keep,
        }
    }
}

/// A compaction filter reads whole blob values and extent lists that garbage collection moves in
/// the same compaction (from where they were, as the moved copy is not readable until the
/// compaction lands), and what it keeps reads back whole.
#[test]
fn a_compaction_filter_sees_values_garbage_collection_moves() {
    let dir = crate::common::tempdir();
    let mut o = options(true);
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 1.0;
    // Small files, sealed as they fill: garbage collection takes sealed files.
    o.blob_file_size = 16 << 10;
    let filter = Arc::new(DropMarked::default());
    o.compaction_filter = Some(filter.clone());
    let db = Db::open(dir.path(), o).unwrap();
    let whole = bytes(20_000, 1);
    db.put("whole", &whole).unwrap();
    db.put("source", bytes(20_000, 2)).unwrap();
    write(&db, |b| b.copy("source", "list")).unwrap();
    write(&db, |b| b.append("list", bytes(3_000, 3))).unwrap();
    let mut marked = b"drop".to_vec();
    marked.extend_from_slice(&bytes(20_000, 4));
    db.put("gone", &marked).unwrap();
    let list = db.get("list").unwrap().unwrap().to_vec();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(db.properties().background_error.is_none());
    assert!(filter.0.load(std::sync::atomic::Ordering::Relaxed) >= 4);
    let s = db.statistics();
    assert!(s.blob_gc_relocated_keys >= 3, "{s:?}");
    assert!(db.get("whole").unwrap().unwrap().as_ref() == &whole[..]);
    assert!(db.get("list").unwrap().unwrap().as_ref() == &list[..]);
    assert!(db.get("gone").unwrap().is_none());
}

/// Repair rebuilds the MANIFEST without the old one's accounting: it counts what the tables
/// name afresh, so a record two keys share outlives the source's deletion.
#[test]
fn repair_keeps_records_that_copies_share() {
    let dir = crate::common::tempdir();
    let mut o = options(true);
    o.blob_file_size = 64 << 10;
    let value = bytes(40_000, 7);
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        db.put("a", &value).unwrap();
        db.put("filler", bytes(40_000, 8)).unwrap();
        write(&db, |b| b.copy("a", "c")).unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.starts_with("MANIFEST") || name == "CURRENT" {
            std::fs::remove_file(dir.path().join(name)).unwrap();
        }
    }
    strata_engine::repair_store(dir.path(), &o).unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    db.delete("a").unwrap();
    db.delete("filler").unwrap();
    db.put("b", "inside the table's range").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    crate::common::background_work(&db);
    let f = &db.properties_cf(&db.default_cf()).unwrap().blob_files[0];
    assert!(
        f.garbage_bytes >= f.record_bytes,
        "both originals are garbage: {f:?}"
    );
    assert!(db.get("c").unwrap().unwrap().as_ref() == &value[..]);
}
