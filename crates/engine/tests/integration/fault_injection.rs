//! Power loss and failing disks, simulated by `FaultInjectionFs`.
//!
//! Every batch writes a progress key holding its own number, so after a crash the store says how
//! far it got: it must then equal, in every column family, the model after exactly that many
//! batches (a prefix, never a hole), and that prefix must reach the last batch acknowledged with
//! `sync`. Small buffers keep flushes, compactions, blob-file seals and MANIFEST rewrites in flight
//! when the power goes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::fs::{FaultError, FaultInjectionFs, FsOp};
use strata_engine::{
    ColumnFamilyOptions, Db, Error, Options, ReadOptions, WriteBatch, WriteOptions,
};

const CFS: [&str; 3] = ["default", "blobs", "other"];
const PROGRESS: &[u8] = b"~progress";

type Model = Vec<BTreeMap<Vec<u8>, Vec<u8>>>;

/// Rounds each test runs: `STRATA_FAULT_ROUNDS`, or the quick default.
fn rounds(default: u64) -> u64 {
    std::env::var("STRATA_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone)]
enum Op {
    Put(usize, Vec<u8>, Vec<u8>),
    Delete(usize, Vec<u8>),
    DeleteRange(usize, Vec<u8>, Vec<u8>),
}

#[derive(Debug, Clone)]
struct Batch {
    number: u64,
    ops: Vec<Op>,
    sync: bool,
}

fn options(fs: &FaultInjectionFs) -> Options {
    let mut o = Options::default();
    o.filesystem = Arc::new(fs.clone());
    o.write_buffer_size = 16 << 10;
    o.target_file_size_base = 16 << 10;
    o.max_bytes_for_level_base = 64 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.block_size = 512;
    o.create_missing_column_families = true;
    for name in &CFS[1..] {
        let cf = ColumnFamilyOptions {
            write_buffer_size: 8 << 10,
            enable_blob_files: *name == "blobs",
            min_blob_size: 40,
            blob_file_size: 16 << 10,
            enable_blob_garbage_collection: true,
            blob_garbage_collection_age_cutoff: 0.5,
            ..Default::default()
        };
        o.column_families.insert(name.to_string(), cf);
    }
    o
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:04}", rng.random_range(0..600)).into_bytes()
}

fn random_batch(rng: &mut StdRng, number: u64) -> Batch {
    let ops = (0..rng.random_range(1..8))
        .map(|_| {
            let cf = rng.random_range(0..CFS.len());
            match rng.random_range(0..20) {
                0 => {
                    let (a, b) = (key(rng), key(rng));
                    let end = [a.clone().max(b.clone()), b"~".to_vec()].concat();
                    Op::DeleteRange(cf, a.min(b), end)
                }
                1..=3 => Op::Delete(cf, key(rng)),
                _ => {
                    let len = rng.random_range(0..120);
                    let v = format!("{number}:{}", "v".repeat(len)).into_bytes();
                    Op::Put(cf, key(rng), v)
                }
            }
        })
        .collect();
    Batch {
        number,
        ops,
        sync: rng.random_ratio(1, 6),
    }
}

fn apply(model: &mut Model, b: &Batch) {
    for op in &b.ops {
        match op {
            Op::Put(cf, k, v) => {
                model[*cf].insert(k.clone(), v.clone());
            }
            Op::Delete(cf, k) => {
                model[*cf].remove(k);
            }
            Op::DeleteRange(cf, a, z) => {
                let doomed: Vec<Vec<u8>> = model[*cf]
                    .range(a.clone()..z.clone())
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in doomed {
                    model[*cf].remove(&k);
                }
            }
        }
    }
    model[0].insert(PROGRESS.to_vec(), b.number.to_string().into_bytes());
}

fn write(db: &Db, b: &Batch) -> strata_engine::Result<()> {
    let cfs: Vec<_> = CFS.iter().map(|n| db.cf(n).unwrap()).collect();
    let mut batch = WriteBatch::new();
    for op in &b.ops {
        match op {
            Op::Put(cf, k, v) => batch.put_cf(&cfs[*cf], k, v),
            Op::Delete(cf, k) => batch.delete_cf(&cfs[*cf], k),
            Op::DeleteRange(cf, a, z) => batch.delete_range_cf(&cfs[*cf], a, z),
        }
    }
    batch.put(PROGRESS, b.number.to_string());
    let opts = WriteOptions {
        sync: b.sync,
        ..Default::default()
    };
    db.write(batch, &opts)
}

/// The store's whole contents, every column family.
fn contents(db: &Db) -> Model {
    CFS.iter()
        .map(|n| {
            let cf = db.cf(n).unwrap();
            common::collect(db.iter_cf(&ReadOptions::default(), &cf).unwrap())
                .into_iter()
                .collect()
        })
        .collect()
}

/// Checks the recovered store against `base` plus a prefix of `tried`: the prefix its progress key
/// names, which must reach `must_reach`. Returns the recovered model and that batch number.
fn check_prefix(
    db: &Db,
    base: &Model,
    tried: &[Batch],
    must_reach: u64,
    what: &str,
) -> (Model, u64) {
    let got = contents(db);
    let progress: u64 = got[0]
        .get(PROGRESS)
        .map(|v| std::str::from_utf8(v).unwrap().parse().unwrap())
        .unwrap_or(0);
    assert!(
        progress >= must_reach,
        "{what}: recovered through batch {progress}, but batch {must_reach} was synced"
    );
    let mut want = base.clone();
    for b in tried.iter().take_while(|b| b.number <= progress) {
        apply(&mut want, b);
    }
    for (i, name) in CFS.iter().enumerate() {
        assert!(
            got[i] == want[i],
            "{what}: column family {name} after batch {progress} differs from the model \
             ({} keys against {})",
            got[i].len(),
            want[i].len()
        );
    }
    (got, progress)
}

/// Power fails at a random moment, again and again, on one store. Half the crashes lose every
/// unsynced byte; the other half keep a random share of each file's unsynced tail, often cutting
/// a record in two.
#[test]
fn power_loss_keeps_every_synced_batch_and_a_prefix_of_the_rest() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut base: Model = vec![BTreeMap::new(); CFS.len()];
    let mut number = 0u64;
    let (mut crashes, mut batches, mut lost) = (0u64, 0u64, 0u64);
    for cycle in 0..rounds(40) {
        let db = Db::open(dir.path(), options(&fs)).unwrap();
        if cycle > 0 {
            // Recovery itself writes (a new WAL and MANIFEST): it must leave the same contents.
            assert!(
                contents(&db) == base,
                "cycle {cycle}: reopen changed the contents"
            );
        }
        let mut tried = Vec::new();
        let mut synced = base[0]
            .get(PROGRESS)
            .map(|v| std::str::from_utf8(v).unwrap().parse().unwrap())
            .unwrap_or(0);
        for _ in 0..rng.random_range(20..400) {
            number += 1;
            let b = random_batch(&mut rng, number);
            write(&db, &b).unwrap();
            if b.sync {
                synced = b.number;
            }
            tried.push(b);
        }
        fs.deactivate();
        drop(db);
        if cycle % 2 == 0 {
            fs.drop_unsynced_data().unwrap();
        } else {
            fs.drop_random_unsynced_data(rng.random()).unwrap();
        }
        crashes += 1;
        batches += tried.len() as u64;
        let db = Db::open(dir.path(), options(&fs)).unwrap();
        let (recovered, progress) =
            check_prefix(&db, &base, &tried, synced, &format!("cycle {cycle}"));
        lost += tried.iter().filter(|b| b.number > progress).count() as u64;
        base = recovered;
        // The next cycle's batches continue the numbering; a lost batch's number is simply gone.
        db.close().unwrap();
    }
    eprintln!("{crashes} simulated power losses, {batches} batches, {lost} unsynced ones lost");
}

/// The disk fails (EIO or ENOSPC) at random on one kind of operation at a time. The engine returns
/// typed errors, stops writing once it cannot vouch for its log, keeps answering reads, resumes
/// writes once a full disk has room again (an I/O error stops them until a reopen), and after a
/// crash and a reopen on a healthy disk holds a prefix of the batches that reaches every
/// acknowledged synced one.
#[test]
fn failing_disk_operations_return_errors_and_lose_no_synced_batch() {
    let kinds: [&[FsOp]; 7] = [
        &[FsOp::Write],
        &[FsOp::Sync],
        &[FsOp::Create],
        &[FsOp::Rename, FsOp::SyncDir],
        &[FsOp::Remove],
        &[FsOp::Read],
        &FsOp::ALL,
    ];
    let mut injected = 0;
    let seeds = rounds(42);
    for seed in 0..seeds {
        let dir = crate::common::tempdir();
        let fs = FaultInjectionFs::new();
        let mut rng = StdRng::seed_from_u64(seed);
        let db = Db::open(dir.path(), options(&fs)).unwrap();
        let base: Model = vec![BTreeMap::new(); CFS.len()];
        let ops = kinds[seed as usize % kinds.len()];
        let error = if seed % 2 == 0 {
            FaultError::Eio
        } else {
            FaultError::NoSpace
        };
        fs.fail_randomly(ops, rng.random_range(20..200), error, seed);
        let (mut tried, mut synced, mut refused) = (Vec::new(), 0, 0);
        let mut failed = None;
        let mut model = base.clone();
        for number in 1..=600 {
            let b = random_batch(&mut rng, number);
            match write(&db, &b) {
                Ok(()) => {
                    if b.sync {
                        synced = number;
                    }
                    apply(&mut model, &b);
                    tried.push(b);
                }
                Err(e) => {
                    assert!(
                        matches!(e, Error::Io { .. } | Error::Background(_)),
                        "seed {seed}: a failing disk gave {e:?}"
                    );
                    if db.properties().background_error.is_some() {
                        // The failed batch may or may not be in the log; nothing after it is.
                        failed = Some(b);
                        break;
                    }
                    // Refused before it reached the log (a blob file failed): it never happened.
                    refused += 1;
                }
            }
        }
        // Reads under a failing disk: the right value or an I/O error, never a wrong value.
        let cfs: Vec<_> = CFS.iter().map(|n| db.cf(n).unwrap()).collect();
        for (i, cf) in cfs.iter().enumerate() {
            for (k, v) in model[i].iter().take(50) {
                match db.get_cf(cf, k) {
                    Ok(got) => assert_eq!(got.map(|g| g.into_vec()).as_ref(), Some(v)),
                    Err(e) => assert!(
                        matches!(e, Error::Io { .. }),
                        "seed {seed}: read gave {e:?}"
                    ),
                }
            }
        }
        if db.properties().background_error.is_some() {
            fs.clear_faults();
            let after = random_batch(&mut rng, 601);
            match error {
                FaultError::Eio => {
                    let e = write(&db, &after).unwrap_err();
                    assert!(matches!(e, Error::Background(_)), "seed {seed}: {e:?}");
                }
                _ => {
                    // Space is back: the next write resumes the store. The failed batch was cut
                    // from the log (or never reached it), so it never happened.
                    write(&db, &after).unwrap_or_else(|e| panic!("seed {seed}: no resume: {e}"));
                    assert!(db.properties().background_error.is_none());
                    failed = None;
                    apply(&mut model, &after);
                    if after.sync {
                        synced = after.number;
                    }
                    tried.push(after);
                    for (i, cf) in cfs.iter().enumerate() {
                        for (k, v) in &model[i] {
                            let got = db.get_cf(cf, k).unwrap().map(|g| g.into_vec());
                            assert_eq!(got.as_ref(), Some(v), "seed {seed}: after the resume");
                        }
                    }
                }
            }
        }
        tried.extend(failed);
        injected += fs.injected();
        fs.clear_faults();
        fs.deactivate();
        drop(db);
        if seed % 3 == 0 {
            fs.drop_random_unsynced_data(seed).unwrap();
        } else {
            fs.drop_unsynced_data().unwrap();
        }
        let db = Db::open(dir.path(), options(&fs))
            .unwrap_or_else(|e| panic!("seed {seed}: reopen after {ops:?} faults failed: {e}"));
        check_prefix(
            &db,
            &base,
            &tried,
            synced,
            &format!("seed {seed} ({refused} refused)"),
        );
    }
    assert!(injected > seeds, "only {injected} faults were injected");
    eprintln!("{seeds} failing disks, {injected} faults injected");
}

/// A flush makes what it flushes durable, WAL or not: the blob records its table points at are
/// synced before the table is logged, or a power loss would leave indexes to nowhere.
/// A flush that fails at any of its syncs (the WAL's seal, the table's, the MANIFEST's) on a
/// full disk, writes resuming once there is room, then a power loss: the failed flush's table
/// is gone by then (at once, or once a new MANIFEST superseded the failed one), the next open
/// accepts the store, and it holds every write, those made without the WAL included.
#[test]
fn a_flush_failing_at_any_sync_then_resumed_never_fails_the_next_open() {
    for n in 0..4 {
        let dir = common::tempdir();
        let fs = FaultInjectionFs::new();
        let mut o = Options::default();
        o.filesystem = Arc::new(fs.clone());
        let db = Db::open(dir.path(), o.clone()).unwrap();
        let synced = WriteOptions {
            sync: true,
            ..Default::default()
        };
        db.put_with(&synced, "synced", "kept").unwrap();
        // Without the WAL: only the flush can make them durable.
        let no_wal = WriteOptions {
            disable_wal: true,
            ..Default::default()
        };
        for i in 0..100 {
            db.put_with(&no_wal, format!("unsynced{i:03}"), "kept")
                .unwrap();
        }
        fs.fail_after(&[FsOp::Sync], n, FaultError::NoSpace);
        let flushed = db.flush();
        fs.clear_faults();
        if flushed.is_err() {
            db.resume().unwrap();
        }
        db.flush().unwrap();
        // The failed flush's table is gone: only live tables are on disk.
        let props = db.properties_cf(&db.default_cf()).unwrap();
        let live: usize = props.levels.iter().map(|l| l.files).sum();
        assert_eq!(common::tables_on_disk(dir.path()), live, "after {n} syncs");
        fs.deactivate();
        drop(db);
        fs.drop_unsynced_data().unwrap();
        fs.clear_faults();
        let db = Db::open(dir.path(), o)
            .unwrap_or_else(|e| panic!("a flush failing after {n} syncs ({flushed:?}): {e}"));
        assert_eq!(db.get("synced").unwrap().unwrap().as_ref(), b"kept");
        for i in 0..100 {
            let got = db.get(format!("unsynced{i:03}")).unwrap();
            assert!(got.is_some(), "after {n} syncs ({flushed:?}): key {i} lost");
        }
    }
}

/// A flush whose MANIFEST write failed leaves its table on disk (the edit may have reached the
/// disk). Once writes resume and a new MANIFEST supersedes the failed one, that table is
/// deleted: kept, it would outlive its writes' compaction and look to a later open like the only
/// copy of writes a lost edit named.
#[test]
fn a_table_whose_edit_failed_goes_once_a_new_manifest_supersedes_it() {
    let dir = common::tempdir();
    let fs = FaultInjectionFs::new();
    let mut o = Options::default();
    o.filesystem = Arc::new(fs.clone());
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let no_wal = WriteOptions {
        disable_wal: true,
        ..Default::default()
    };
    for i in 0..100 {
        db.put_with(&no_wal, format!("k{i:03}"), "first").unwrap();
    }
    // The table's sync, then the MANIFEST's fails: the disk is full.
    fs.fail_after(&[FsOp::Sync], 1, FaultError::NoSpace);
    let e = db.flush().unwrap_err();
    assert!(e.to_string().contains("MANIFEST"), "{e}");
    assert_eq!(common::tables_on_disk(dir.path()), 1);
    fs.clear_faults();
    db.resume().unwrap();
    // The same keys again, so compaction drops the first writes wholly.
    for i in 0..100 {
        db.put(format!("k{i:03}"), "second").unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let props = db.properties_cf(&db.default_cf()).unwrap();
    let live: usize = props.levels.iter().map(|l| l.files).sum();
    assert_eq!(common::tables_on_disk(dir.path()), live, "{props:?}");
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.get("k042").unwrap().unwrap().as_ref(), b"second");
}

#[test]
fn a_flush_makes_its_blob_values_durable_even_without_a_wal() {
    let dir = crate::common::tempdir();
    let fs = FaultInjectionFs::new();
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let cf = db.cf("blobs").unwrap();
    let no_wal = WriteOptions {
        disable_wal: true,
        ..Default::default()
    };
    let value = |i: u32| format!("{i:04}-{}", "b".repeat(100)).into_bytes();
    for i in 0..40u32 {
        let mut b = WriteBatch::new();
        b.put_cf(&cf, format!("k{i:04}"), value(i));
        db.write(b, &no_wal).unwrap();
    }
    db.flush_cf(&cf).unwrap();
    fs.deactivate();
    drop(db);
    fs.drop_unsynced_data().unwrap();

    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let cf = db.cf("blobs").unwrap();
    for i in 0..40u32 {
        let got = db.get_cf(&cf, format!("k{i:04}")).unwrap();
        assert_eq!(got.map(|v| v.into_vec()), Some(value(i)), "key {i}");
    }
}
