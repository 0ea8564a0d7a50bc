//! The blob store through the public API: key-value separation, TTL with a test clock, garbage
//! collection, FIFO eviction (damage, crashes and power loss: `blob_crash.rs`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{collect, collect_backward, files_with_extension};
use strata_engine::{
    BlobDeletionReason, BlobFileState, BlobFilesDeletedInfo, BlobGcInfo, CompactionInfo, Db,
    EventListener, Expiration, ManualClock, Options, ReadOptions, WriteBatch, WriteOptions,
};

pub(crate) const NOW: u64 = 1_700_000_000;

pub(crate) fn options(clock: &Arc<ManualClock>) -> Options {
    let mut o = Options::default();
    o.enable_blob_files = true;
    o.min_blob_size = 100;
    o.blob_file_size = 64 << 10;
    o.write_buffer_size = 64 << 10;
    o.ttl_range_secs = 100;
    o.clock = clock.clone();
    o
}

/// A value of 300 to 600 bytes that does not compress, ending in `fill`.
pub(crate) fn big(i: u32, fill: u8) -> Vec<u8> {
    let mut v = format!("value{i}-").into_bytes();
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ fill as u64;
    while v.len() < 300 + (i % 7) as usize * 50 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v.push(fill);
    v
}

/// Records the blob events and the compactions' expired entries.
#[derive(Debug, Default)]
pub(crate) struct BlobEvents {
    gc: Mutex<Vec<BlobGcInfo>>,
    deleted: Mutex<Vec<BlobFilesDeletedInfo>>,
    expired_entries: AtomicU64,
}

impl EventListener for BlobEvents {
    fn on_blob_gc(&self, info: &BlobGcInfo) {
        self.gc.lock().unwrap().push(info.clone());
    }
    fn on_blob_files_deleted(&self, info: &BlobFilesDeletedInfo) {
        self.deleted.lock().unwrap().push(info.clone());
    }
    fn on_compaction_completed(&self, info: &CompactionInfo) {
        self.expired_entries
            .fetch_add(info.entries_expired, Ordering::Relaxed);
    }
}

impl BlobEvents {
    pub(crate) fn attach(o: &mut Options) -> Arc<Self> {
        let events = Arc::new(BlobEvents::default());
        o.listeners.push(events.clone());
        events
    }

    /// Files and records deleted for `reason`, over every event.
    pub(crate) fn deleted(&self, reason: BlobDeletionReason) -> (u64, u64) {
        let deleted = self.deleted.lock().unwrap();
        let of = deleted.iter().filter(|d| d.reason == reason);
        of.fold((0, 0), |(files, records), d| {
            assert_eq!(d.column_family, "default");
            (files + d.files.len() as u64, records + d.records)
        })
    }
}

fn blob_files_on_disk(dir: &Path) -> usize {
    files_with_extension(dir, "blob").len()
}

#[test]
fn large_values_live_in_blob_files_and_read_back_every_way() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let db = Db::open(dir.path(), options(&clock)).unwrap();
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..400u32 {
        let k = format!("k{i:04}").into_bytes();
        // Every third value is small and stays inline.
        let v = if i % 3 == 0 {
            b"small".to_vec()
        } else {
            big(i, b'x')
        };
        db.put(&k, &v).unwrap();
        expected.insert(k, v);
    }
    let mut b = WriteBatch::new();
    b.put("k9999", big(9999, b'b'));
    b.delete("k0001");
    db.write(
        b,
        &WriteOptions {
            sync: true,
            ..Default::default()
        },
    )
    .unwrap();
    expected.insert(b"k9999".to_vec(), big(9999, b'b'));
    expected.remove(b"k0001".as_slice());
    let stats = db.statistics();
    assert_eq!(stats.blob_values_written, 267);
    let check = |db: &Db| {
        let want: Vec<_> = expected.clone().into_iter().collect();
        assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()), want);
        assert_eq!(
            collect_backward(db.iter(&ReadOptions::default()).unwrap()),
            want
        );
        for (k, v) in &expected {
            assert_eq!(db.get(k).unwrap().unwrap().as_ref(), v.as_slice());
        }
        let keys: Vec<Vec<u8>> = expected.keys().rev().cloned().collect();
        for (k, got) in keys
            .iter()
            .zip(db.multi_get(&ReadOptions::default(), &keys))
        {
            assert_eq!(got.unwrap().unwrap().as_ref(), expected[k].as_slice());
        }
        assert!(db.get("k0001").unwrap().is_none());
        // keys_only reads no value at all.
        let ko = ReadOptions {
            keys_only: true,
            ..Default::default()
        };
        assert_eq!(db.get_with(&ko, "k0002").unwrap().unwrap().len(), 0);
        let mut it = db.iter(&ko).unwrap();
        it.seek(b"k0002");
        assert_eq!((it.key(), it.value()), (&b"k0002"[..], &b""[..]));
    };
    check(&db);
    let props = db.properties_cf(&db.default_cf()).unwrap();
    assert!(props.blobs.live_blob_files >= 1);
    assert!(props.blobs.blob_live_bytes > 266 * 300);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    check(&db);
    // Compaction moved indexes, not values: the tables are far smaller than the values.
    let props = db.properties_cf(&db.default_cf()).unwrap();
    assert!(
        props.total_sst_bytes * 5 < props.blobs.blob_file_bytes,
        "{props:?}"
    );
    drop(db);
    let db = Db::open(dir.path(), options(&clock)).unwrap();
    check(&db);
    let files = db.properties_cf(&db.default_cf()).unwrap().blob_files;
    assert!(
        files.iter().all(|f| f.state == BlobFileState::Sealed),
        "{files:?}"
    );
}

#[test]
fn ttl_values_expire_for_every_reader_at_once_and_compaction_removes_them() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let mut o = options(&clock);
    let events = BlobEvents::attach(&mut o);
    let db = Db::open(dir.path(), o).unwrap();
    let cf = db.default_cf();
    db.put("old", "forever").unwrap();
    db.put("shadowed", "older value").unwrap();
    db.put_with_ttl(&cf, "small", "s", 50).unwrap();
    db.put_with_ttl(&cf, "large", big(1, b'l'), 50).unwrap();
    db.put_with_ttl(&cf, "shadowed", big(2, b's'), 50).unwrap();
    db.put_with_ttl(&cf, "later", big(3, b'z'), 500).unwrap();
    assert_eq!(
        db.get_expiration(&cf, "small").unwrap(),
        Some(Expiration::At(NOW + 50))
    );
    assert_eq!(
        db.get_expiration(&cf, "old").unwrap(),
        Some(Expiration::Never)
    );
    assert_eq!(db.get_expiration(&cf, "absent").unwrap(), None);
    assert!(db.put_with_ttl(&cf, "zero", "v", 0).is_err());
    let snapshot = db.snapshot();
    db.flush().unwrap();
    assert_eq!(
        db.get("large").unwrap().unwrap().as_ref(),
        big(1, b'l').as_slice()
    );
    clock.advance(50);
    let alive = vec![
        (b"later".to_vec(), big(3, b'z')),
        (b"old".to_vec(), b"forever".to_vec()),
    ];
    for k in ["small", "large", "shadowed"] {
        assert!(db.get(k).unwrap().is_none(), "{k}");
        assert_eq!(db.get_expiration(&cf, k).unwrap(), None);
        // A snapshot taken before expiry does not bring the value back.
        let at = ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..Default::default()
        };
        assert!(db.get_with(&at, k).unwrap().is_none(), "{k} at snapshot");
    }
    // An expired value hides the older one it replaced.
    let keys = ["small", "large", "shadowed", "old"];
    let got: Vec<_> = db
        .multi_get(&ReadOptions::default(), &keys)
        .into_iter()
        .map(|r| r.unwrap().map(|v| v.into_vec()))
        .collect();
    assert_eq!(got, vec![None, None, None, Some(b"forever".to_vec())]);
    assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()), alive);
    assert_eq!(
        collect_backward(db.iter(&ReadOptions::default()).unwrap()),
        alive
    );
    drop(snapshot);
    db.compact_range(None, None).unwrap();
    let s = db.statistics();
    assert_eq!(s.compaction_keys_expired, 3, "{s:?}");
    assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()), alive);
    // The file of the bucket that expired is deleted whole; the later bucket's stays.
    assert!(s.blob_files_expired >= 1, "{s:?}");
    assert_eq!(blob_files_on_disk(dir.path()), 1);
    assert_eq!(events.expired_entries.load(Ordering::Relaxed), 3);
    assert_eq!(
        events.deleted(BlobDeletionReason::Expired).0,
        s.blob_files_expired
    );
    drop(db);
    let db = Db::open(dir.path(), options(&clock)).unwrap();
    assert_eq!(collect(db.iter(&ReadOptions::default()).unwrap()), alive);
    clock.advance(1000);
    assert!(db.get("later").unwrap().is_none());
}

#[test]
fn garbage_collection_empties_old_files_and_loses_nothing() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let mut o = options(&clock);
    o.blob_file_size = 16 << 10;
    o.blob_garbage_collection_age_cutoff = 1.0;
    let events = BlobEvents::attach(&mut o);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    for round in 0..3u8 {
        for i in 0..200u32 {
            // Round 2 rewrites only half: the other half stays live in round 1's files.
            if round < 2 || i % 2 == 0 {
                db.put(format!("k{i:04}"), big(i, b'a' + round)).unwrap();
            }
        }
        // A table per round: a flush drops the versions its own memtable supersedes, and it is
        // compaction's collection that is under test.
        db.flush().unwrap();
    }
    let before = db.properties_cf(&db.default_cf()).unwrap();
    db.compact_range(None, None).unwrap();
    let s = db.statistics();
    assert!(s.blob_gc_relocated_keys >= 100, "{s:?}");
    {
        let gc = events.gc.lock().unwrap();
        assert_eq!(
            gc.iter().map(|g| g.relocated_keys).sum::<u64>(),
            s.blob_gc_relocated_keys
        );
        assert!(
            gc.iter()
                .all(|g| !g.from_files.is_empty() && !g.to_files.is_empty())
        );
    }
    assert_eq!(
        events.deleted(BlobDeletionReason::Garbage).0,
        s.blob_gc_files_obsolete
    );
    assert!(s.blob_gc_files_obsolete > 0, "{s:?}");
    let after = db.properties_cf(&db.default_cf()).unwrap();
    // Every sealed file is either new (no garbage) or gone; only the file still being written
    // keeps garbage (overwrites within it), as it is not collected until sealed.
    for f in &after.blob_files {
        assert!(
            f.state != BlobFileState::Sealed || f.garbage_bytes == 0,
            "{f:?}"
        );
    }
    assert!(
        after.blobs.blob_file_bytes < before.blobs.blob_file_bytes / 2,
        "{before:?} {after:?}"
    );
    for i in 0..200u32 {
        let want = big(i, if i % 2 == 0 { b'c' } else { b'b' });
        assert_eq!(
            db.get(format!("k{i:04}")).unwrap().unwrap().as_ref(),
            want.as_slice()
        );
    }
    drop(db);
    // Deleted once no reader needed them: only the live files remain on disk, and reopen agrees.
    let db = Db::open(dir.path(), o).unwrap();
    let props = db.properties_cf(&db.default_cf()).unwrap();
    assert_eq!(blob_files_on_disk(dir.path()), props.blobs.live_blob_files);
    assert_eq!(
        collect(db.iter(&ReadOptions::default()).unwrap()).len(),
        200
    );
}

/// Writes 100 values, opens an iterator, overwrites them all and compacts: the files of the
/// first values are collected while the returned iterator still reads them.
fn collected_under_an_iterator(db: &Db) -> strata_engine::DbIterator {
    for i in 0..100u32 {
        db.put(format!("k{i:04}"), big(i, b'a')).unwrap();
    }
    db.flush().unwrap();
    let it = db.iter(&ReadOptions::default()).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:04}"), big(i, b'b')).unwrap();
    }
    db.compact_range(None, None).unwrap();
    assert!(db.statistics().blob_gc_files_obsolete > 0);
    it
}

#[test]
fn an_iterator_keeps_relocated_files_readable() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let mut o = options(&clock);
    o.blob_file_size = 8 << 10;
    o.blob_garbage_collection_age_cutoff = 1.0;
    o.cache_size = 0;
    let db = Db::open(dir.path(), o).unwrap();
    let it = collected_under_an_iterator(&db);
    // The held iterator still reads the old values from files that are now garbage.
    let got = collect(it);
    assert_eq!(got.len(), 100);
    assert!(got.iter().all(|(_, v)| v.ends_with(b"a")));
    // Removed once the iterator went, by the background pool rather than the iterator's thread.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.statistics().blob_files_deleted == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the files were not deleted after the iterator went"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The reader that lets go of the last view of a collected file may be an async server's worker
/// (a GET answered from memory): it removes nothing itself; the background pool removes the
/// file, and a manual compaction returns only once its files are gone.
#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn collected_files_are_removed_by_the_pool_not_by_the_reader_that_lets_go() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let removed_by: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut o = options(&clock);
    o.blob_file_size = 8 << 10;
    o.blob_garbage_collection_age_cutoff = 1.0;
    o.cache_size = 0;
    o.filesystem = {
        let removed_by = removed_by.clone();
        Arc::new(
            common::HookedFs::new(Arc::new(strata_engine::fs::StdFileSystem), |_| Ok(()))
                .on_remove(move |path| {
                    if path.extension().is_some_and(|e| e == "blob") {
                        let me = std::thread::current().name().unwrap_or("").to_string();
                        removed_by.lock().unwrap().push(me);
                    }
                }),
        )
    };
    let db = Db::open(dir.path(), o).unwrap();
    let it = collected_under_an_iterator(&db);
    assert!(
        removed_by.lock().unwrap().is_empty(),
        "the iterator still reads them"
    );
    // The iterator goes on a thread of the test's own.
    std::thread::Builder::new()
        .name("reader".into())
        .spawn(move || drop(it))
        .unwrap()
        .join()
        .unwrap();
    // Every file the collection retired goes.
    let retired = db.statistics().blob_gc_files_obsolete;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.statistics().blob_files_deleted < retired {
        assert!(std::time::Instant::now() < deadline, "never removed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let names = removed_by.lock().unwrap().clone();
    assert_eq!(names.len() as u64, retired);
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("strata-bg")),
        "removed by {names:?}"
    );
    // A manual compaction that collects files returns with them gone, whoever removed them.
    removed_by.lock().unwrap().clear();
    let before = db.statistics().blob_files_deleted;
    for i in 0..100u32 {
        db.put(format!("k{i:04}"), big(i, b'c')).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let deleted = db.statistics().blob_files_deleted - before;
    assert!(deleted > 0);
    assert_eq!(removed_by.lock().unwrap().len() as u64, deleted);
}

/// Values in blob files are written there, not to the WAL: they count in the write
/// amplification, which is never below 1 for a store whose every write reached the disk.
#[test]
fn blob_bytes_count_in_the_write_amplification() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options(&Arc::new(ManualClock::new(NOW)))).unwrap();
    for i in 0..50u32 {
        db.put(format!("k{i}"), big(i, b'a')).unwrap();
    }
    db.flush().unwrap();
    let amp = db.properties().write_amplification;
    assert!(amp >= 1.0, "write amplification {amp}");
}

#[test]
fn column_families_keep_their_own_blob_settings() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let mut o = Options::default();
    o.clock = clock.clone();
    let db = Db::open(dir.path(), o).unwrap();
    let mut cfo = strata_engine::ColumnFamilyOptions::default();
    cfo.enable_blob_files = true;
    cfo.min_blob_size = 10;
    let docs = db.create_cf("docs", cfo).unwrap();
    db.put_cf(&docs, "d", vec![1u8; 50]).unwrap();
    db.put("plain", vec![1u8; 50]).unwrap();
    let s = db.statistics();
    assert_eq!(s.blob_values_written, 1);
    // TTL works without blob files too: the value is kept inline with its expiration.
    db.put_with_ttl(&db.default_cf(), "t", vec![2u8; 5000], 10)
        .unwrap();
    assert_eq!(db.statistics().blob_values_written, 1);
    clock.advance(10);
    assert!(db.get("t").unwrap().is_none());
    assert_eq!(
        db.get_cf(&docs, "d").unwrap().unwrap().as_ref(),
        &[1u8; 50][..]
    );
    assert_eq!(db.properties_cf(&docs).unwrap().blobs.live_blob_files, 1);
    // The store's blob totals add up every column family's.
    let mut cfo = strata_engine::ColumnFamilyOptions::default();
    cfo.enable_blob_files = true;
    cfo.min_blob_size = 100;
    let media = db.create_cf("media", cfo).unwrap();
    db.put_cf(&media, "m", vec![3u8; 300]).unwrap();
    let all = db.properties();
    let (d, m) = (
        db.properties_cf(&docs).unwrap(),
        db.properties_cf(&media).unwrap(),
    );
    assert_eq!(all.blobs.live_blob_files, 2);
    assert!(d.blobs.blob_file_bytes > 0 && m.blobs.blob_file_bytes > 0);
    assert_eq!(
        all.blobs.blob_file_bytes,
        d.blobs.blob_file_bytes + m.blobs.blob_file_bytes
    );
    assert_eq!(
        all.blobs.blob_live_bytes,
        d.blobs.blob_live_bytes + m.blobs.blob_live_bytes
    );
    assert_eq!(all.blobs.blob_garbage_bytes, 0);
    assert_eq!(
        all.live_bytes,
        all.column_families
            .iter()
            .map(|c| c.live_bytes)
            .sum::<u64>()
    );
    assert!(all.live_bytes >= all.blobs.blob_file_bytes);
    // Serialized flat, beside the table totals, as the admin API shows them.
    let json = serde_json::to_value(&all).unwrap();
    assert_eq!(json["live_blob_files"], 2);
    assert_eq!(json["column_families"][1]["live_blob_files"], 1);
    // Dropping a column family deletes its blob files (and no other's) at the next open.
    db.drop_cf(&docs).unwrap();
    drop(db);
    let mut o = Options::default();
    o.clock = clock;
    let _db = Db::open(dir.path(), o).unwrap();
    assert_eq!(blob_files_on_disk(dir.path()), 1, "media's file stays");
}

/// A read-only open that reads a value from a blob file lets go of the file when it closes: the
/// blob store and its epochs hold each other until closing ends them.
#[test]
#[cfg(target_os = "linux")]
fn read_only_opens_let_go_of_their_blob_files() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let o = options(&clock);
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        db.put("k", big(1, b'a')).unwrap();
        db.flush().unwrap();
    }
    for _ in 0..20 {
        let db = Db::open_read_only(dir.path(), o.clone()).unwrap();
        assert_eq!(
            db.get("k").unwrap().unwrap().as_ref(),
            big(1, b'a').as_slice()
        );
        drop(db);
    }
    assert_eq!(
        common::open_files_with_extension(dir.path(), "blob"),
        0,
        "blob files left open by closed read-only stores"
    );
}

/// Every table lists the blob files its entries point into, with counts that add up to the values
/// written there; the MANIFEST keeps the list across a reopen.
#[test]
fn tables_list_the_blob_files_they_point_into() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let references = |db: &Db| {
        let props = db.properties_cf(&db.default_cf()).unwrap();
        let mut per_blob = std::collections::BTreeMap::new();
        for level in &props.levels {
            for f in &level.file_list {
                assert_eq!(f.level, level.level);
                for r in &f.blob_references {
                    *per_blob.entry(r.blob_file).or_insert(0) += r.indexes;
                }
            }
        }
        (per_blob, props.blob_files)
    };
    let db = Db::open(dir.path(), options(&clock)).unwrap();
    for i in 0..200u32 {
        db.put(format!("key{i:04}"), big(i, 1)).unwrap();
        // Small values stay in the tables and point nowhere.
        db.put(format!("small{i:04}"), b"v").unwrap();
    }
    db.flush().unwrap();
    let (per_blob, blob_files) = references(&db);
    assert_eq!(per_blob.values().sum::<u64>(), 200, "{per_blob:?}");
    let on_disk: Vec<u64> = blob_files.iter().map(|b| b.number).collect();
    assert!(
        per_blob.keys().all(|n| on_disk.contains(n)),
        "{per_blob:?} {on_disk:?}"
    );
    db.close().unwrap();
    let db = Db::open(dir.path(), options(&clock)).unwrap();
    assert_eq!(references(&db).0, per_blob);
}

#[test]
fn value_size_measures_every_kind_of_value_without_reading_blobs() {
    let dir = crate::common::tempdir();
    let clock = Arc::new(ManualClock::new(NOW));
    let db = Db::open(dir.path(), options(&clock)).unwrap();
    let cf = db.default_cf();
    let compressible = vec![b'z'; 5000];
    let raw = big(3, 9);
    db.put("small", "abc").unwrap();
    db.put("raw", &raw).unwrap();
    db.put("zipped", &compressible).unwrap();
    db.put_with_ttl(&cf, "inline-ttl", "xy", 50).unwrap();
    db.put_with_ttl(&cf, "blob-ttl", &raw, 50).unwrap();
    db.put("gone", "v").unwrap();
    db.delete("gone").unwrap();
    for round in ["memtable", "tables"] {
        for (key, want) in [
            ("small", Some(3)),
            ("raw", Some(raw.len() as u64)),
            ("zipped", Some(5000)),
            ("inline-ttl", Some(2)),
            ("blob-ttl", Some(raw.len() as u64)),
            ("gone", None),
            ("never", None),
        ] {
            assert_eq!(db.value_size_cf(&cf, key).unwrap(), want, "{round}: {key}");
            // The same lookup tells when the value goes, as `get_expiration` does.
            let info = db.value_info_cf(&cf, key).unwrap();
            assert_eq!(info.map(|i| i.len), want, "{round}: info {key}");
            assert_eq!(
                info.map(|i| i.expiration),
                db.get_expiration(&cf, key).unwrap(),
                "{round}: {key}"
            );
            if key.ends_with("-ttl") {
                assert_eq!(info.unwrap().expiration, Expiration::At(NOW + 50));
            }
            let got = db.get(key).unwrap().map(|v| v.len() as u64);
            assert_eq!(got, want, "{round}: get {key}");
        }
        db.flush().unwrap();
    }
    let reads = db.statistics().blob_reads;
    db.value_size_cf(&cf, "raw").unwrap();
    assert_eq!(
        db.statistics().blob_reads,
        reads,
        "a raw blob's size reads no record"
    );
    clock.advance(60);
    assert_eq!(db.value_size_cf(&cf, "blob-ttl").unwrap(), None);
    assert_eq!(db.value_size_cf(&cf, "inline-ttl").unwrap(), None);
}
