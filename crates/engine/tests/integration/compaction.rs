//! Compaction as users see it: the shape holds under writes, old versions and tombstones go, what a
//! snapshot or a live iterator needs stays, the filter hook, trivial moves, stalls and events.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::sync::{Arc, Mutex};

use strata_engine::{
    CompactionFilter, CompactionInfo, Db, EventListener, FilterDecision, FlushInfo, Options,
    ReadOptions, StallCause,
};

fn small(dir: &std::path::Path, tweak: impl FnOnce(&mut Options)) -> Db {
    let mut o = {
        let mut o = Options::default();
        o.write_buffer_size = 32 << 10;
        o.level0_file_num_compaction_trigger = 2;
        o.max_bytes_for_level_base = 128 << 10;
        o.max_bytes_for_level_multiplier = 4;
        o.target_file_size_base = 32 << 10;
        o
    };
    tweak(&mut o);
    Db::open(dir, o).unwrap()
}

use crate::common;
use common::tables_on_disk;

fn cf_props(db: &Db) -> strata_engine::ColumnFamilyProperties {
    db.properties_cf(&db.default_cf()).unwrap()
}

fn wait_for_compactions(db: &Db) {
    for _ in 0..2000 {
        crate::common::background_work(db);
        let p = cf_props(db);
        if p.compactions_running == 0
            && p.levels.iter().all(|l| l.score < 1.0)
            && p.immutable_memtables == 0
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("compactions did not settle: {:?}", cf_props(db));
}

#[test]
fn the_tree_keeps_its_shape_under_writes() {
    let dir = crate::common::tempdir();
    let db = small(dir.path(), |_| {});
    for round in 0..4 {
        for i in 0..5000u32 {
            db.put(
                format!("key{:06}", (i * 7919) % 20000),
                format!("value-{round}-{i}"),
            )
            .unwrap();
            if i % 64 == 0 {
                common::background_work(&db);
            }
        }
    }
    db.flush().unwrap();
    wait_for_compactions(&db);
    let p = cf_props(&db);
    assert!(p.levels[0].files < 2, "L0 compacted: {:?}", p.levels[0]);
    assert!(db.statistics().compactions > 5);
    assert!(p.levels.iter().skip(1).any(|l| l.files > 0));
    for l in &p.levels[1..6] {
        if l.files > 0 && l.level >= p.base_level {
            assert!(l.score < 1.0, "level {} over target: {l:?}", l.level);
        }
    }
    assert_eq!(
        tables_on_disk(dir.path()),
        p.total_files,
        "obsolete tables were deleted"
    );
    assert!(db.properties().write_amplification > 1.0);
    for i in 0..5000u32 {
        let k = format!("key{:06}", (i * 7919) % 20000);
        assert_eq!(
            db.get(&k).unwrap().unwrap().into_vec(),
            format!("value-3-{i}").into_bytes()
        );
    }
}

#[test]
fn full_compaction_drops_old_versions_and_tombstones_but_not_what_snapshots_see() {
    let dir = crate::common::tempdir();
    let db = small(dir.path(), |o| o.disable_auto_compactions = true);
    for i in 0..1000u32 {
        db.put(format!("k{i:04}"), "v1").unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    for i in 0..1000u32 {
        db.put(format!("k{i:04}"), "v2").unwrap();
    }
    for i in 0..500u32 {
        db.delete(format!("k{i:04}")).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let p = cf_props(&db);
    assert_eq!(p.levels[0].files, 0);
    // The snapshot still needs every v1, and the v2 or tombstone above it.
    let entries: u64 = p.levels.iter().map(|l| l.entries).sum();
    assert_eq!(
        entries, 2000,
        "v1 for the snapshot plus the newest version of each key"
    );
    let at = ReadOptions {
        snapshot: Some(snap.clone()),
        ..Default::default()
    };
    assert_eq!(db.get_with(&at, "k0001").unwrap().unwrap(), &b"v1"[..]);
    assert_eq!(db.get("k0001").unwrap(), None);
    assert_eq!(db.get("k0700").unwrap().unwrap(), &b"v2"[..]);

    drop(at);
    drop(snap);
    db.compact_range(None, None).unwrap();
    let p = cf_props(&db);
    let entries: u64 = p.levels.iter().map(|l| l.entries).sum();
    let deletions: u64 = p.levels.iter().map(|l| l.deletions).sum();
    assert_eq!(
        (entries, deletions),
        (500, 0),
        "only the live v2s remain at the bottom"
    );
    assert_eq!(p.estimate_num_keys, 500);
    // Every v1 and every tombstone; the v2s the tombstones shadow go at the flush when they
    // share a memtable with them (how many do depends on how many entries a memtable holds).
    assert!(db.statistics().compaction_keys_dropped >= 1500);
    assert_eq!(tables_on_disk(dir.path()), p.total_files);
}

#[test]
fn a_live_iterator_keeps_its_tables_until_it_is_dropped() {
    let dir = crate::common::tempdir();
    let db = small(dir.path(), |o| o.disable_auto_compactions = true);
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), format!("old{i}")).unwrap();
    }
    db.flush().unwrap();
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), format!("new{i}")).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let before = db.statistics().tables_deleted;
    // The iterator's tables were compacted away, but their files are still open and present.
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert!(it.value().starts_with(b"old"));
        n += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(n, 2000);
    drop(it);
    db.put("trigger", "x").unwrap();
    db.compact_range(None, None).unwrap();
    assert!(
        db.statistics().tables_deleted > before,
        "released tables are deleted at the next purge"
    );
    assert_eq!(tables_on_disk(dir.path()), cf_props(&db).total_files);
}

#[derive(Debug)]
struct DropTemp;

impl CompactionFilter for DropTemp {
    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> FilterDecision {
        if key.starts_with(b"tmp/") {
            FilterDecision::Remove
        } else if value == b"upper-me" {
            FilterDecision::ChangeValue(b"UPPER-ME".to_vec())
        } else {
            FilterDecision::Keep
        }
    }
}

#[test]
fn the_compaction_filter_removes_and_rewrites() {
    let dir = crate::common::tempdir();
    let db = small(dir.path(), |o| {
        o.disable_auto_compactions = true;
        o.compaction_filter = Some(Arc::new(DropTemp));
    });
    db.put("tmp/a", "1").unwrap();
    db.put("keep", "upper-me").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // Older "tmp/b" sits at the bottom; a newer one filtered away must not let it reappear.
    db.put("tmp/b", "old").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let snap = db.snapshot();
    db.put("tmp/b", "new").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("tmp/a").unwrap(), None);
    assert_eq!(db.get("keep").unwrap().unwrap(), &b"UPPER-ME"[..]);
    assert_eq!(
        db.get("tmp/b").unwrap(),
        None,
        "filtered: no older version shows through"
    );
    let at = ReadOptions {
        snapshot: Some(snap),
        ..Default::default()
    };
    assert_eq!(
        db.get_with(&at, "tmp/b").unwrap(),
        None,
        "the old one was filtered at its own compaction"
    );
}

#[test]
fn sequential_loads_move_tables_without_rewriting_them() {
    let dir = crate::common::tempdir();
    let db = small(dir.path(), |o| o.level0_file_num_compaction_trigger = 1);
    for i in 0..20_000u32 {
        db.put(format!("seq{i:08}"), [b'v'; 40]).unwrap();
        if i % 2000 == 1999 {
            db.flush().unwrap();
            wait_for_compactions(&db);
        }
    }
    wait_for_compactions(&db);
    let s = db.statistics();
    assert!(
        s.trivial_moves > 0,
        "non-overlapping L0 files move down: {s:?}"
    );
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, 20_000);
}

#[derive(Debug, Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
}

impl EventListener for Recorder {
    fn on_flush_completed(&self, info: &FlushInfo) {
        self.events
            .lock()
            .unwrap()
            .push(format!("flush {}", info.entries));
    }
    fn on_compaction_begin(&self, info: &CompactionInfo) {
        self.events
            .lock()
            .unwrap()
            .push(format!("compaction-begin L{}", info.input_level));
    }
    fn on_compaction_completed(&self, info: &CompactionInfo) {
        assert!(!info.input_files.is_empty());
        self.events.lock().unwrap().push(format!(
            "compaction-end L{}->L{}",
            info.input_level, info.output_level
        ));
    }
    fn on_stall_begin(&self, cause: StallCause) {
        self.events.lock().unwrap().push(format!("stall {cause:?}"));
    }
}

#[test]
fn writes_slow_down_instead_of_failing_and_listeners_hear_about_it() {
    let dir = crate::common::tempdir();
    let recorder = Arc::new(Recorder::default());
    let db = small(dir.path(), |o| {
        o.write_buffer_size = 8 << 10;
        o.level0_file_num_compaction_trigger = 2;
        o.level0_slowdown_writes_trigger = 2;
        o.level0_stop_writes_trigger = 3;
        o.max_write_buffer_number = 4;
        o.delayed_write_rate = 1 << 20;
        o.listeners = vec![recorder.clone()];
    });
    for i in 0..20_000u32 {
        db.put(format!("k{:06}", (i * 7919) % 50_000), [b'x'; 50])
            .unwrap();
    }
    let s = db.statistics();
    assert!(
        s.write_slowdowns > 0 || s.write_stops > 0,
        "writes were held back: {s:?}"
    );
    assert!(s.write_stall_micros > 0);
    let events = recorder.events.lock().unwrap().clone();
    assert!(events.iter().any(|e| e.starts_with("flush ")));
    assert!(events.iter().any(|e| e.starts_with("compaction-begin")));
    assert!(events.iter().any(|e| e.starts_with("compaction-end")));
    assert!(events.iter().any(|e| e.starts_with("stall ")));
}

#[test]
fn reopened_stores_keep_their_levels() {
    let dir = crate::common::tempdir();
    {
        let db = small(dir.path(), |_| {});
        for i in 0..10_000u32 {
            db.put(format!("k{i:06}"), format!("{i}")).unwrap();
        }
        db.compact_range(None, None).unwrap();
    }
    let db = small(dir.path(), |_| {});
    let p = cf_props(&db);
    assert_eq!(p.levels[0].files, 0);
    assert!(p.total_files > 0);
    assert_eq!(db.get("k004321").unwrap().unwrap(), &b"4321"[..]);
    assert!(matches!(
        db.compact_range(Some(b"z"), Some(b"a")),
        Err(strata_engine::Error::InvalidArgument(_))
    ));
}

#[test]
fn the_inline_executor_compacts_in_writes_that_hit_the_stop_trigger() {
    let dir = crate::common::tempdir();
    let db = small(dir.path(), |o| {
        o.executor = strata_engine::Executor::Inline;
        o.write_buffer_size = 8 << 10;
        o.level0_file_num_compaction_trigger = 2;
        o.level0_slowdown_writes_trigger = 3;
        o.level0_stop_writes_trigger = 4;
        o.delayed_write_rate = 64 << 20;
    });
    // No thread ever runs background work: writes must flush and compact themselves.
    for i in 0..30_000u32 {
        db.put(format!("k{:06}", (i * 7919) % 40_000), [b'y'; 30])
            .unwrap();
        assert!(
            cf_props(&db).levels[0].files <= 4,
            "L0 grew past the stop trigger at write {i}"
        );
    }
    let s = db.statistics();
    assert!(s.compactions > 0 && s.write_stops > 0, "{s:?}");
    db.maintenance().unwrap();
    assert!(cf_props(&db).levels.iter().all(|l| l.score < 1.0));
    assert_eq!(
        db.get(format!("k{:06}", (29_999u32 * 7919) % 40_000))
            .unwrap()
            .unwrap(),
        &[b'y'; 30][..]
    );
}
