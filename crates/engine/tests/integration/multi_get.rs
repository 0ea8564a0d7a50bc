//! Batched MultiGet agrees with `get` everywhere a key can live, and its pinned values outlive the
//! cache entries and files they came from.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use strata_engine::{ColumnFamilyOptions, Db, Error, Options, ReadOptions, WriteOptions};

fn options() -> Options {
    let mut o = Options::default();
    o.write_buffer_size = 64 << 10;
    o.cache_size = 256 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.max_bytes_for_level_base = 256 << 10;
    o.target_file_size_base = 64 << 10;
    o
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-{}", "x".repeat((i % 40) as usize)).into_bytes()
}

#[test]
fn multi_get_agrees_with_get_across_memtables_levels_deletions_and_snapshots() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    // Round 0 lands deep in the tree, round 1 overwrites a third (in L0 and memtables), and a
    // tenth are deleted; a snapshot in the middle sees round 0 and no deletions.
    for i in 0..6000u32 {
        db.put(format!("k{i:05}"), value(i, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let snap = db.snapshot();
    for i in (0..6000u32).step_by(3) {
        db.put(format!("k{i:05}"), value(i, 1)).unwrap();
    }
    db.flush().unwrap();
    for i in (0..6000u32).step_by(10) {
        db.delete(format!("k{i:05}")).unwrap();
    }
    for i in (1..6000u32).step_by(7) {
        db.put(format!("k{i:05}"), value(i, 2)).unwrap();
    }
    assert!(
        db.properties_cf(&db.default_cf())
            .unwrap()
            .levels
            .iter()
            .skip(1)
            .any(|l| l.files > 0),
        "some keys are below L0"
    );
    // Keys in an unsorted order, duplicates, and absent keys.
    let keys: Vec<String> = (0..7000u32)
        .map(|i| format!("k{:05}", (i * 7919) % 7000))
        .chain(["k00001".to_string(), "k00001".to_string(), String::new()])
        .collect();
    for at in [None, Some(snap.clone())] {
        let opts = ReadOptions {
            snapshot: at,
            ..Default::default()
        };
        let got = db.multi_get(&opts, &keys);
        assert_eq!(got.len(), keys.len());
        for (k, v) in keys.iter().zip(got) {
            let want = db.get_with(&opts, k).unwrap().map(|v| v.into_vec());
            assert_eq!(v.unwrap().map(|v| v.into_vec()), want, "key {k}");
        }
    }
    let stats = db.statistics();
    assert_eq!(stats.multiget_calls, 2);
    assert_eq!(stats.multiget_keys, 2 * keys.len() as u64);
    // An oversized key fails alone.
    let big = vec![b'x'; strata_engine::MAX_KEY_SIZE + 1];
    let got = db.multi_get(&ReadOptions::default(), &[b"k00001".to_vec(), big]);
    assert!(got[0].as_ref().unwrap().is_some());
    assert!(matches!(got[1], Err(Error::InvalidArgument(_))));
}

/// `multi_get_each` lends what `get` returns, in key order: from a memtable of many versions
/// (searched from one key to the next), with deletions and a range deletion in it, with the
/// tables behind it, keys only; a break stops the visits, and a dropped column family fails
/// every key.
#[test]
fn multi_get_each_lends_what_get_returns_and_stops_when_told() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let cf = db.default_cf();
    let key = |i: u32| format!("k{i:05}");
    // Flushed first: a batch that reaches past the memtable takes the tables' path.
    for i in (0..4000u32).step_by(5) {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    for round in 1..4 {
        for i in 0..4000u32 {
            db.put(key(i), value(i, round)).unwrap();
        }
    }
    for i in (0..4000u32).step_by(11) {
        db.delete(key(i)).unwrap();
    }
    db.delete_range(key(1000), key(1100)).unwrap();
    let lent = |opts: &ReadOptions, keys: &[String]| {
        let mut got = Vec::new();
        db.multi_get_each(opts, &cf, keys, |i, found| {
            got.push((i, found.map(|v| v.map(<[u8]>::to_vec))));
            std::ops::ControlFlow::Continue(())
        });
        got
    };
    let in_memtable: Vec<String> = (0..3000u32).map(|i| key((i * 7919) % 3000)).collect();
    let some_flushed: Vec<String> = (3990..4010u32).rev().map(key).collect();
    let with_twins: Vec<String> = ["k00010", "k00010", "k01050", "k00000"]
        .iter()
        .map(|k| k.to_string())
        .collect();
    for keys in [&in_memtable, &some_flushed, &with_twins] {
        for keys_only in [false, true] {
            let opts = ReadOptions {
                keys_only,
                ..Default::default()
            };
            let got = lent(&opts, keys);
            assert_eq!(got.len(), keys.len());
            for ((i, v), k) in got.into_iter().zip(keys.iter()) {
                let want = db.get_with(&opts, k).unwrap().map(|v| v.into_vec());
                assert_eq!(v.unwrap(), want, "key {k} (#{i}), keys only {keys_only}");
            }
        }
    }
    // Told to stop at the third key, it visits three.
    let mut visits = 0;
    db.multi_get_each(&ReadOptions::default(), &cf, &in_memtable, |_, _| {
        visits += 1;
        if visits == 3 {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    });
    assert_eq!(visits, 3);
    let other = db
        .create_cf("other", ColumnFamilyOptions::default())
        .unwrap();
    db.drop_cf(&other).unwrap();
    let mut failed = 0;
    db.multi_get_each(&ReadOptions::default(), &other, &["a", "b"], |_, found| {
        failed += usize::from(matches!(found, Err(Error::InvalidArgument(_))));
        std::ops::ControlFlow::Continue(())
    });
    assert_eq!(failed, 2);
}

/// A batch the memtables answer is counted once, keys, hits and bytes; a cache-only batch with a
/// value in a blob file (its index still in the memtable) is incomplete for that key and counted
/// not at all, to be counted when asked again; a snapshot's batch reads what it saw.
#[test]
fn multi_get_each_counts_what_it_read_and_a_cache_only_batch_asked_again_once() {
    let dir = crate::common::tempdir();
    let mut o = Options::default();
    o.enable_blob_files = true;
    o.min_blob_size = 100;
    let db = Db::open(dir.path(), o).unwrap();
    let cf = db.default_cf();
    db.put("a", "1").unwrap();
    db.put("b", "22").unwrap();
    let snap = db.snapshot();
    db.put("b", "333").unwrap();
    db.put("big", vec![5u8; 1000]).unwrap();
    let read = |opts: &ReadOptions, keys: &[&str]| {
        let mut got = Vec::new();
        db.multi_get_each(opts, &cf, keys, |_, found| {
            got.push(found.map(|v| v.map(<[u8]>::to_vec)));
            std::ops::ControlFlow::Continue(())
        });
        got
    };
    let got = read(&ReadOptions::default(), &["a", "b", "absent"]);
    assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(got[1].as_ref().unwrap().as_deref(), Some(&b"333"[..]));
    assert_eq!(got[2].as_ref().unwrap(), &None);
    let at_snapshot = ReadOptions {
        snapshot: Some(snap),
        ..Default::default()
    };
    let got = read(&at_snapshot, &["b", "big"]);
    assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"22"[..]));
    assert_eq!(got[1].as_ref().unwrap(), &None);
    let s = db.statistics();
    assert_eq!((s.multiget_calls, s.multiget_keys), (2, 5));
    assert_eq!((s.gets, s.get_hits, s.bytes_read), (5, 3, 1 + 3 + 2));
    let memory = ReadOptions {
        cache_only: true,
        ..Default::default()
    };
    let got = read(&memory, &["a", "big"]);
    assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(
        got[1].as_ref().err().map(Error::kind),
        Some(strata_engine::ErrorKind::Incomplete)
    );
    assert_eq!(
        db.statistics().multiget_calls,
        2,
        "an incomplete batch is not counted"
    );
    let got = read(&ReadOptions::default(), &["a", "big"]);
    assert_eq!(got[1].as_ref().unwrap().as_deref(), Some(&[5u8; 1000][..]));
    assert_eq!(db.statistics().multiget_calls, 3);
}

#[test]
fn multi_get_cf_reads_many_column_families_at_one_snapshot() {
    let dir = crate::common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let cfs: Vec<_> = (0..20)
        .map(|i| {
            db.create_cf(&format!("cf{i}"), ColumnFamilyOptions::default())
                .unwrap()
        })
        .collect();
    for (c, cf) in cfs.iter().enumerate() {
        for i in 0..200u32 {
            db.put_cf(cf, format!("k{i:03}"), format!("{c}-{i}"))
                .unwrap();
        }
        if c % 2 == 0 {
            db.flush_cf(cf).unwrap();
        }
    }
    let snap = db.snapshot();
    for cf in &cfs {
        db.put_cf(cf, "k007", "after").unwrap();
    }
    let mut keys = Vec::new();
    for i in (0..220u32).rev() {
        keys.push((&cfs[(i % 20) as usize], format!("k{:03}", i % 210)));
    }
    let opts = ReadOptions {
        snapshot: Some(snap),
        ..Default::default()
    };
    let got = db.multi_get_cf(&opts, &keys);
    for ((cf, k), v) in keys.iter().zip(got) {
        let want = db.get_cf_with(&opts, cf, k).unwrap().map(|v| v.into_vec());
        assert_eq!(v.unwrap().map(|v| v.into_vec()), want, "{} {k}", cf.name());
    }
    // A dropped column family's handle fails the call.
    db.drop_cf(&cfs[3]).unwrap();
    let got = db.multi_get_cf(
        &ReadOptions::default(),
        &[(&cfs[3], "k001"), (&cfs[4], "k001")],
    );
    assert!(
        got.iter()
            .all(|r| matches!(r, Err(Error::InvalidArgument(_))))
    );
}

#[test]
fn values_outlive_the_cache_and_their_file() {
    let dir = crate::common::tempdir();
    let mut o = options();
    o.cache_size = 64 << 10;
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}"), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let keys: Vec<String> = (0..3000u32)
        .step_by(13)
        .map(|i| format!("k{i:05}"))
        .collect();
    let held: Vec<_> = db
        .multi_get(&ReadOptions::default(), &keys)
        .into_iter()
        .map(|v| v.unwrap().unwrap())
        .collect();
    assert!(held.iter().all(|v| v.is_pinned()));
    // Rewrite everything: the cache turns over and compaction deletes the tables read above.
    for i in 0..3000u32 {
        db.put_with(&WriteOptions::default(), format!("k{i:05}"), value(i, 1))
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    for (k, v) in keys.iter().zip(&held) {
        let i: u32 = k[1..].parse().unwrap();
        assert_eq!(&v[..], &value(i, 0)[..]);
    }
}

/// A damaged data block fails the keys it holds, as `get` does, naming the table; the batch's
/// other keys, whose blocks are read together with it, still read. Once with the table in L0
/// (searched table by table) and once in a deeper level (searched level-wide).
#[test]
fn a_damaged_block_fails_its_keys_and_only_them() {
    for deep in [false, true] {
        let dir = crate::common::tempdir();
        let mut o = options();
        o.write_buffer_size = 4 << 20;
        o.target_file_size_base = 4 << 20;
        {
            let db = Db::open(dir.path(), o.clone()).unwrap();
            for i in 0..3000u32 {
                db.put(format!("k{i:05}"), value(i, 0)).unwrap();
            }
            db.flush().unwrap();
            if deep {
                db.compact_range(None, None).unwrap();
            }
            db.close().unwrap();
        }
        let tables = crate::common::files_with_extension(dir.path(), "sst");
        assert_eq!(tables.len(), 1, "{tables:?}");
        let table = &tables[0];
        let name = table.file_name().unwrap().to_string_lossy().into_owned();
        // The first data block starts the file and holds the smallest keys.
        let mut bytes = std::fs::read(table).unwrap();
        bytes[40] ^= 0x10;
        std::fs::write(table, &bytes).unwrap();

        let db = Db::open(dir.path(), o).unwrap();
        let keys = ["k00000", "k00001", "k01500", "k02999"];
        let got = db.multi_get(&ReadOptions::default(), &keys);
        for (k, r) in keys.iter().zip(&got).take(2) {
            match r {
                Err(Error::Corruption { file, .. }) => {
                    assert!(file.ends_with(&name), "{k}: blames {}", file.display())
                }
                other => panic!("{k} (deep: {deep}): {other:?}"),
            }
            assert!(matches!(db.get(k), Err(Error::Corruption { .. })), "{k}");
        }
        for (k, r) in keys.iter().zip(&got).skip(2) {
            let i: u32 = k[1..].parse().unwrap();
            let v = r.as_ref().unwrap().as_ref().unwrap();
            assert_eq!(&v[..], &value(i, 0)[..], "{k} (deep: {deep})");
        }
    }
}
