//! Column families: many of them, created, written, dropped and reopened; options recorded in the
//! MANIFEST; one WAL shared by all of them, kept exactly as long as some column family needs it;
//! typed errors for every misuse.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use strata_engine::{
    ColumnFamily, ColumnFamilyOptions, Compression, Db, Error, Options, ReadOptions, WriteBatch,
    WriteOptions,
};

fn small_cf() -> ColumnFamilyOptions {
    ColumnFamilyOptions {
        write_buffer_size: 64 << 10,
        ..Default::default()
    }
}

fn options() -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 64 << 10;
    o.cache_size = 1 << 20;
    o
}

use crate::common;
use common::tables_on_disk;

fn scan(db: &Db, cf: &ColumnFamily) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::collect(db.iter_cf(&ReadOptions::default(), cf).unwrap())
}

/// Flushes run in the background: waits until none is running or waiting.
fn wait_for_flushes(db: &Db) {
    for _ in 0..2000 {
        crate::common::background_work(db);
        let p = db.properties();
        if p.flushes_running == 0 && p.column_families.iter().all(|c| c.immutable_memtables == 0) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("flushes did not finish: {:?}", db.properties());
}

#[test]
fn two_thousand_column_families_survive_drop_and_reopen() {
    const N: usize = 2000;
    let dir = crate::common::tempdir();
    let name = |i: usize| format!("cf{i:04}");
    let dropped = |i: usize| i % 7 == 3;
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let cfs: Vec<ColumnFamily> = (0..N)
            .map(|i| db.create_cf(&name(i), small_cf()).unwrap())
            .collect();
        // One batch writes a key into every column family: atomic across all of them.
        let mut b = WriteBatch::new();
        for (i, cf) in cfs.iter().enumerate() {
            b.put_cf(cf, "shared", format!("v{i}"));
        }
        db.write(b, &WriteOptions::default()).unwrap();
        for (i, cf) in cfs.iter().enumerate() {
            for j in 0..4 {
                db.put_cf(cf, format!("k{j}"), format!("{i}-{j}")).unwrap();
            }
            if i % 100 == 0 {
                db.flush_cf(cf).unwrap();
            }
        }
        for (i, cf) in cfs.iter().enumerate().filter(|(i, _)| dropped(*i)) {
            db.drop_cf(cf).unwrap();
            assert!(matches!(
                db.get_cf(cf, "k0"),
                Err(Error::InvalidArgument(m)) if m.contains(&name(i))
            ));
        }
        assert_eq!(
            db.properties().column_families.len(),
            1 + N - (0..N).filter(|i| dropped(*i)).count()
        );
    }
    let db = Db::open(dir.path(), options()).unwrap();
    let expected: Vec<String> = std::iter::once("default".to_string())
        .chain((0..N).filter(|i| !dropped(*i)).map(name))
        .collect();
    assert_eq!(db.list_cf(), expected, "creation order, dropped ones gone");
    for i in 0..N {
        if dropped(i) {
            assert!(matches!(db.cf(&name(i)), Err(Error::InvalidArgument(_))));
            continue;
        }
        let cf = db.cf(&name(i)).unwrap();
        assert_eq!(cf.options().write_buffer_size, 64 << 10, "options restored");
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = (0..4)
            .map(|j| {
                (
                    format!("k{j}").into_bytes(),
                    format!("{i}-{j}").into_bytes(),
                )
            })
            .collect();
        want.push((b"shared".to_vec(), format!("v{i}").into_bytes()));
        assert_eq!(scan(&db, &cf), want, "column family {i}");
    }
    assert!(
        db.get("shared").unwrap().is_none(),
        "nothing leaked into default"
    );
    // Ids are never reused, and a recreated name starts empty.
    let again = db.create_cf(&name(3), small_cf()).unwrap();
    assert!(again.id() as usize > N);
    assert!(scan(&db, &again).is_empty());
}

#[test]
fn a_flushed_column_family_does_not_replay_its_old_wal_records() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let other = db.create_cf("other", small_cf()).unwrap();
        db.put("k", "v1").unwrap();
        // `other` keeps this WAL alive...
        db.put_cf(&other, "x", "1").unwrap();
        db.flush().unwrap();
        // ...while the default column family deletes `k` and flushes again. The deletion skips the
        // WAL, so only the table holds it.
        let no_wal = WriteOptions {
            disable_wal: true,
            ..Default::default()
        };
        db.delete_with(&no_wal, "k").unwrap();
        db.flush().unwrap();
        // A later write is replayed into the same memtable as a wrongly replayed `k = v1` would
        // be, so that memtable's table would sort above the deletion's.
        db.put("later", "x").unwrap();
        assert_eq!(db.get("k").unwrap(), None);
    }
    let db = Db::open(dir.path(), options()).unwrap();
    // Replaying `k = v1` from the old WAL into the memtable would bring it back.
    assert_eq!(db.get("k").unwrap(), None);
    let other = db.cf("other").unwrap();
    assert_eq!(db.get_cf(&other, "x").unwrap().unwrap(), &b"1"[..]);
}

#[test]
fn an_idle_column_family_cannot_hold_the_wal_hostage() {
    let dir = crate::common::tempdir();
    let mut o = options();
    o.max_total_wal_size = 256 << 10;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let idle = db
        .create_cf("idle", ColumnFamilyOptions::default())
        .unwrap();
    db.put_cf(&idle, "only", "write").unwrap();
    let mut most_wals = 0;
    for i in 0..40_000u32 {
        db.put(format!("key{i:06}"), [7u8; 40]).unwrap();
        if i % 64 == 0 {
            crate::common::background_work(&db);
        }
        most_wals = most_wals.max(db.properties().live_wal_files);
    }
    wait_for_flushes(&db);
    let p = db.properties_cf(&idle).unwrap();
    assert!(
        p.total_files >= 1,
        "the idle column family was flushed to free the oldest WAL: {p:?}"
    );
    assert!(p.oldest_wal_needed.is_none());
    // 40k writes of ~50 bytes are ~2.4 MB of WAL in ~40 files: without the limit every one would
    // stay. With it, the WALs within the limit (about 5) stay, plus those written while the idle
    // column family's flush waits behind the others (a loaded machine saw 9).
    assert!(most_wals <= 14, "{most_wals} WAL files were live at once");
    assert!(
        db.properties().live_wal_files <= 2,
        "every flush done, yet {} WAL files are live",
        db.properties().live_wal_files
    );
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    let idle = db.cf("idle").unwrap();
    assert_eq!(db.get_cf(&idle, "only").unwrap().unwrap(), &b"write"[..]);
    assert_eq!(db.get("key039999").unwrap().unwrap(), &[7u8; 40][..]);
}

#[test]
fn a_wal_past_the_limit_is_released_even_when_no_memtable_fills() {
    let dir = crate::common::tempdir();
    let mut o = options();
    o.max_total_wal_size = 512 << 10;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    // Big memtables that never fill: only the WAL limit can make these column families flush.
    let cfs: Vec<ColumnFamily> = (0..50)
        .map(|i| {
            db.create_cf(&format!("c{i}"), ColumnFamilyOptions::default())
                .unwrap()
        })
        .collect();
    let mut most_wal_bytes = 0;
    for i in 0..20_000u32 {
        db.put_cf(&cfs[i as usize % 50], format!("k{i:06}"), [1u8; 80])
            .unwrap();
        if i % 64 == 0 {
            crate::common::background_work(&db);
        }
        most_wal_bytes = most_wal_bytes.max(db.properties().live_wal_bytes);
    }
    // ~2 MB were logged; the live WALs stay near the limit (plus what flushes have not released).
    assert!(
        most_wal_bytes < 2 << 20,
        "{most_wal_bytes} bytes of live WAL"
    );
    wait_for_flushes(&db);
    let flushed = cfs
        .iter()
        .filter(|cf| db.properties_cf(cf).unwrap().total_files > 0)
        .count();
    assert_eq!(
        flushed, 50,
        "every column family was flushed to release the WAL"
    );
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    for i in (0..20_000u32).step_by(997) {
        let cf = db.cf(&format!("c{}", i % 50)).unwrap();
        assert!(db.get_cf(&cf, format!("k{i:06}")).unwrap().is_some());
    }
}

#[test]
fn options_are_recorded_and_can_be_replaced_at_open() {
    let dir = crate::common::tempdir();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let cf = ColumnFamilyOptions {
            write_buffer_size: 128 << 10,
            compression: Compression::None,
            disable_auto_compactions: true,
            bloom_bits_per_key: 0,
            ..Default::default()
        };
        db.create_cf("tuned", cf).unwrap();
    }
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let o = db.cf("tuned").unwrap().options().clone();
        assert_eq!(o.write_buffer_size, 128 << 10);
        assert_eq!(o.compression, Compression::None);
        assert!(o.disable_auto_compactions);
        assert_eq!(o.bloom_bits_per_key, 0);
    }
    // Named at open: those options win, and are what the MANIFEST records from then on.
    let mut o = options();
    o.column_families.insert(
        "tuned".into(),
        ColumnFamilyOptions {
            write_buffer_size: 256 << 10,
            ..Default::default()
        },
    );
    drop(Db::open(dir.path(), o).unwrap());
    let db = Db::open(dir.path(), options()).unwrap();
    let o = db.cf("tuned").unwrap().options().clone();
    assert_eq!(o.write_buffer_size, 256 << 10);
    assert!(!o.disable_auto_compactions);
}

#[test]
fn misuse_gets_typed_errors() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let a = db.create_cf("a", small_cf()).unwrap();
    let invalid = |r: strata_engine::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(db.create_cf("a", small_cf()).map(|_| ())));
    assert!(invalid(db.create_cf("", small_cf()).map(|_| ())));
    assert!(invalid(
        db.create_cf(&"x".repeat(5000), small_cf()).map(|_| ())
    ));
    let bad = ColumnFamilyOptions {
        write_buffer_size: 10,
        ..Default::default()
    };
    assert!(invalid(db.create_cf("b", bad).map(|_| ())));
    assert!(invalid(db.drop_cf(&db.default_cf())));
    assert!(invalid(db.cf("nope").map(|_| ())));

    // A handle from another store is refused, even where the id exists here.
    let other_dir = crate::common::tempdir();
    let other = Db::open(other_dir.path(), options()).unwrap();
    let foreign = other.create_cf("a", small_cf()).unwrap();
    assert!(invalid(db.put_cf(&foreign, "k", "v")));
    assert!(invalid(db.get_cf(&foreign, "k").map(|_| ())));

    db.put_cf(&a, "k", "v").unwrap();
    db.drop_cf(&a).unwrap();
    assert!(invalid(db.drop_cf(&a)));
    assert!(invalid(db.put_cf(&a, "k", "v")));
    assert!(invalid(db.flush_cf(&a)));
    assert!(invalid(db.compact_range_cf(&a, None, None)));
    assert!(invalid(db.iter_cf(&ReadOptions::default(), &a).map(|_| ())));
    assert!(invalid(db.properties_cf(&a).map(|_| ())));
    let mut b = WriteBatch::new();
    b.put("fine", "x");
    b.put_cf(&a, "k", "v");
    assert!(invalid(db.write(b, &WriteOptions::default())));
    assert_eq!(
        db.get("fine").unwrap(),
        None,
        "a refused batch writes nothing"
    );
    drop(db);

    let mut o = options();
    o.column_families.insert("missing".into(), small_cf());
    assert!(matches!(
        Db::open(dir.path(), o.clone()),
        Err(Error::InvalidArgument(m)) if m.contains("missing")
    ));
    o.create_missing_column_families = true;
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.list_cf(), vec!["default", "missing"]);
}

#[test]
fn a_dropped_column_family_stays_readable_by_its_iterators_then_its_files_go() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    // No compaction replaces its tables behind the test's back.
    let still = ColumnFamilyOptions {
        disable_auto_compactions: true,
        ..small_cf()
    };
    let cf = db.create_cf("doomed", still).unwrap();
    for i in 0..2000u32 {
        db.put_cf(&cf, format!("k{i:05}"), [1u8; 100]).unwrap();
    }
    db.flush_cf(&cf).unwrap();
    db.put("keep", "me").unwrap();
    db.flush().unwrap();
    let tables_before = tables_on_disk(dir.path());
    assert!(tables_before >= 2);
    let mut it = db.iter_cf(&ReadOptions::default(), &cf).unwrap();
    db.drop_cf(&cf).unwrap();
    // The iterator still reads the tables it was made over.
    let mut n = 0;
    it.seek_to_first();
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(n, 2000);
    assert_eq!(tables_on_disk(dir.path()), tables_before);
    drop(it);
    db.close().unwrap();
    assert_eq!(
        tables_on_disk(dir.path()),
        1,
        "only the default column family's table is left"
    );
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get("keep").unwrap().unwrap(), &b"me"[..]);
    assert_eq!(db.list_cf(), vec!["default"]);
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn column_families_flush_and_compact_side_by_side() {
    let dir = crate::common::tempdir();
    let mut o = options();
    o.max_background_jobs = 4;
    let tiny = ColumnFamilyOptions {
        write_buffer_size: 32 << 10,
        level0_file_num_compaction_trigger: 2,
        max_bytes_for_level_base: 128 << 10,
        target_file_size_base: 32 << 10,
        ..Default::default()
    };
    let db = std::sync::Arc::new(Db::open(dir.path(), o).unwrap());
    let cfs: Vec<ColumnFamily> = (0..4)
        .map(|i| db.create_cf(&format!("w{i}"), tiny.clone()).unwrap())
        .collect();
    std::thread::scope(|s| {
        for (t, cf) in cfs.iter().enumerate() {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..15_000u32 {
                    db.put_cf(
                        cf,
                        format!("k{:06}", (i * 7919) % 15_000),
                        format!("{t}-{i}"),
                    )
                    .unwrap();
                }
            });
        }
    });
    let stats = db.statistics();
    assert!(stats.compactions > 4, "{stats:?}");
    for (t, cf) in cfs.iter().enumerate() {
        let rows = scan(&db, cf);
        assert_eq!(rows.len(), 15_000, "column family {t}");
        // The last write of key k was at the i with (i * 7919) % 15000 == k.
        let (k, v) = &rows[1];
        assert_eq!(k, b"k000001");
        let i = (0..15_000u32).find(|i| (i * 7919) % 15_000 == 1).unwrap();
        assert_eq!(v, format!("{t}-{i}").as_bytes());
        db.compact_range_cf(cf, None, None).unwrap();
        assert_eq!(scan(&db, cf), rows);
        let p = db.properties_cf(cf).unwrap();
        assert_eq!(p.levels[0].files, 0);
    }
}
