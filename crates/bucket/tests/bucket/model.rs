//! The engine's model test on the bucket backend: a seeded stream of puts (small values, values in
//! blob files, values past an upload piece), deletes and range deletes in two column families, at
//! every durability a write may ask for (unsynced, `local`, `bucket`, the store's own), with
//! snapshots, iterators held across flushes and compactions, the second column family dropped and
//! created again, blob garbage collection, reopens through the same cache and takeovers from an
//! empty one (after a clean close, or from a writer that hangs on and is fenced). It runs
//! against a `BTreeMap` per column family after every step that can lose something:
//! - a reopen through the same cache has every write;
//! - a takeover has, per column family, everything up to the last write the bucket vouched for
//!   (a `bucket` write, or a flush of both column families), then some prefix of the writes
//!   after it (a column family's drop or creation always: it is a MANIFEST record of its own).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_bucket::{BucketFs, Durability};
use strata_engine::{ColumnFamily, ColumnFamilyOptions, Db, Options, ReadOptions, WriteBatch};
use strata_engine::{DbIterator, Snapshot, WriteOptions};

use crate::support::seaweed::{self, Seaweed};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// `actual` equals `expected`, or the keys where they differ (not the whole maps).
fn differences(actual: &Model, expected: &Model) -> Option<String> {
    let show = |k: &Vec<u8>| String::from_utf8_lossy(k).into_owned();
    let missing: Vec<String> = expected
        .keys()
        .filter(|k| !actual.contains_key(*k))
        .map(show)
        .collect();
    let extra: Vec<String> = actual
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .map(show)
        .collect();
    let changed: Vec<String> = expected
        .iter()
        .filter(|(k, v)| actual.get(*k).is_some_and(|a| a != *v))
        .map(|(k, v)| {
            format!(
                "{} ({} bytes, expected {})",
                show(k),
                actual[k].len(),
                v.len()
            )
        })
        .collect();
    (!(missing.is_empty() && extra.is_empty() && changed.is_empty()))
        .then(|| format!("missing {missing:?}, extra {extra:?}, changed {changed:?}"))
}

fn assert_same(actual: &Model, expected: &Model, what: &str) {
    if let Some(diff) = differences(actual, expected) {
        panic!("{what}: {diff}");
    }
}

/// Walks `it` from the first key to the end.
fn walk(mut it: DbIterator) -> Model {
    it.seek_to_first();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    out
}

fn scan(db: &Db, cf: &ColumnFamily) -> Model {
    walk(db.iter_cf(&ReadOptions::default(), cf).unwrap())
}

/// Tiny buffers, files and levels: flushes, compactions and blob garbage collection all the time.
fn cf_options() -> ColumnFamilyOptions {
    let mut o = Options::default().cf;
    o.write_buffer_size = 32 << 10;
    o.target_file_size_base = 16 << 10;
    o.max_bytes_for_level_base = 64 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.enable_blob_files = true;
    o.min_blob_size = 100;
    o.blob_file_size = 16 << 10;
    o.blob_garbage_collection_age_cutoff = 0.5;
    o
}

/// One change to one column family's model, as the takeover's prefix check replays it.
#[derive(Clone, Debug)]
enum Change {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    DeleteRange(Vec<u8>, Vec<u8>),
    /// Dropped (and, when the stream creates it again, empty).
    Cleared,
}

impl Change {
    fn apply(&self, model: &mut Model) {
        match self {
            Change::Put(k, v) => {
                model.insert(k.clone(), v.clone());
            }
            Change::Delete(k) => {
                model.remove(k);
            }
            Change::DeleteRange(a, b) => model.retain(|k, _| !(k >= a && k < b)),
            Change::Cleared => model.clear(),
        }
    }

    /// A MANIFEST record of its own: in the bucket once done, whatever else is not.
    fn is_durable_alone(&self) -> bool {
        matches!(self, Change::Cleared)
    }
}

/// One column family's model: what the bucket vouches for, and the changes since.
#[derive(Default)]
struct Tracked {
    model: Model,
    vouched: Model,
    since: Vec<Change>,
}

impl Tracked {
    fn change(&mut self, c: Change) {
        c.apply(&mut self.model);
        self.since.push(c);
    }

    fn vouch(&mut self) {
        self.vouched = self.model.clone();
        self.since.clear();
    }

    /// The state a takeover found must be the vouched one and a prefix of the changes since
    /// (changes durable alone applied wherever they fall); it becomes the model.
    fn taken_over(&mut self, found: Model, what: &str) {
        let mut first_diff = None;
        for cut in 0..=self.since.len() {
            let mut candidate = self.vouched.clone();
            for (i, c) in self.since.iter().enumerate() {
                if i < cut || c.is_durable_alone() {
                    c.apply(&mut candidate);
                }
            }
            match differences(&found, &candidate) {
                None => {
                    self.model = found;
                    self.vouch();
                    return;
                }
                Some(d) => {
                    first_diff.get_or_insert(d);
                }
            }
        }
        panic!(
            "{what}: no prefix of the {} changes since the last vouched write matches; against \
             the vouched state alone: {}",
            self.since.len(),
            first_diff.unwrap_or_default()
        );
    }
}

struct Run<'a> {
    s: &'a Seaweed,
    url: strata_bucket::BucketUrl,
    durability: Durability,
    tmp: tempfile::TempDir,
    caches: usize,
}

impl Run<'_> {
    fn open(&mut self, fresh: bool) -> Db {
        if fresh {
            self.caches += 1;
        }
        let cache: PathBuf = self.tmp.path().join(format!("cache-{}", self.caches));
        let fs = BucketFs::open(&self.s.config(&self.url, cache, self.durability)).unwrap();
        let root = fs.root().to_path_buf();
        let mut opts = Options {
            create_if_missing: true,
            filesystem: Arc::new(fs),
            ..Options::default()
        };
        opts.cf = cf_options();
        Db::open(&root, opts).unwrap()
    }
}

/// How a write asks to be kept, and whether the bucket then vouches for it (and all before it).
fn write_options(rng: &mut StdRng, store: Durability) -> (WriteOptions, bool) {
    let (sync, durability) = match rng.random_range(0..4) {
        0 => (false, None),
        1 => (true, Some(Durability::Local)),
        2 => (true, Some(Durability::Remote)),
        _ => (true, None),
    };
    let vouched = sync && durability.unwrap_or(store) == Durability::Remote;
    let opts = WriteOptions {
        sync,
        durability,
        ..WriteOptions::default()
    };
    (opts, vouched)
}

fn model_run(s: &Seaweed, durability: Durability, seed: u64, ops: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut run = Run {
        s,
        url: s.fresh_url(&format!("model-{durability:?}").to_lowercase()),
        durability,
        tmp: tempfile::tempdir().unwrap(),
        caches: 0,
    };
    let mut db = run.open(true);
    let mut side = Some(db.create_cf("side", cf_options()).unwrap());
    let mut cfs = [Tracked::default(), Tracked::default()];
    // Each with the models as it was taken; a column family dropped since is not read at it.
    let mut snapshots: Vec<(Snapshot, [Option<Model>; 2])> = Vec::new();
    let key = |rng: &mut StdRng| format!("k{:03}", rng.random_range(0..200)).into_bytes();
    for step in 0..ops {
        let what = rng.random_range(0..100);
        let at = format!("{durability:?} seed {seed} step {step}");
        let cf_index = if side.is_some() && rng.random_bool(0.4) {
            1
        } else {
            0
        };
        let cf = match cf_index {
            0 => db.default_cf(),
            _ => side.clone().unwrap(),
        };
        match what {
            0..58 => {
                let k = key(&mut rng);
                let change = match rng.random_range(0..20) {
                    0..14 => {
                        let len = match rng.random_range(0..100) {
                            // Past an upload piece of a WAL at `bucket` (8 MiB) now and then.
                            0 => 9 << 20,
                            1..6 => 70_000,
                            _ => rng.random_range(1..300),
                        };
                        Change::Put(k, vec![rng.random::<u8>(); len])
                    }
                    14..18 => Change::Delete(k),
                    _ => {
                        let b = key(&mut rng);
                        let (a, b) = if k <= b { (k, b) } else { (b, k) };
                        Change::DeleteRange(a, b)
                    }
                };
                let mut batch = WriteBatch::new();
                match &change {
                    Change::Put(k, v) => batch.put_cf(&cf, k, v),
                    Change::Delete(k) => batch.delete_cf(&cf, k),
                    Change::DeleteRange(a, b) => batch.delete_range_cf(&cf, a, b),
                    Change::Cleared => unreachable!(),
                }
                let (opts, vouched) = write_options(&mut rng, durability);
                db.write(batch, &opts).unwrap();
                cfs[cf_index].change(change);
                if vouched {
                    cfs.iter_mut().for_each(Tracked::vouch);
                }
            }
            58..64 => {
                // Both column families flushed: every write so far is in tables the bucket has.
                db.flush().unwrap();
                if let Some(side) = &side {
                    db.flush_cf(side).unwrap();
                }
                cfs.iter_mut().for_each(Tracked::vouch);
            }
            64..67 => db.compact_range_cf(&cf, None, None).unwrap(),
            67..70 => {
                let models = [Some(cfs[0].model.clone()), Some(cfs[1].model.clone())];
                snapshots.push((db.snapshot(), models));
            }
            70..75 if !snapshots.is_empty() => {
                let i = rng.random_range(0..snapshots.len());
                let (snap, models) = &snapshots[i];
                let read = ReadOptions {
                    snapshot: Some(snap.clone()),
                    ..ReadOptions::default()
                };
                if let Some(model) = &models[cf_index] {
                    let seen = walk(db.iter_cf(&read, &cf).unwrap());
                    assert_same(&seen, model, &format!("{at}: snapshot {i}"));
                }
                if rng.random_bool(0.5) {
                    snapshots.swap_remove(i);
                }
            }
            75..77 => {
                // An iterator held while writes, a flush and a compaction replace its files.
                let held = db.iter_cf(&ReadOptions::default(), &cf).unwrap();
                let expected = cfs[cf_index].model.clone();
                for i in 0..40u32 {
                    let k = format!("held{i:02}").into_bytes();
                    let v = vec![b'h'; 150];
                    db.put_cf(&cf, &k, &v).unwrap();
                    cfs[cf_index].change(Change::Put(k, v));
                }
                db.flush_cf(&cf).unwrap();
                db.compact_range_cf(&cf, None, None).unwrap();
                assert_same(&walk(held), &expected, &format!("{at}: held iterator"));
            }
            77..79 => match side.take() {
                Some(handle) => {
                    db.drop_cf(&handle).unwrap();
                    cfs[1].change(Change::Cleared);
                    snapshots
                        .iter_mut()
                        .for_each(|(_, models)| models[1] = None);
                }
                None => side = Some(db.create_cf("side", cf_options()).unwrap()),
            },
            79..85 => {
                // A clean reopen through the same cache: every write. Handles keep the store
                // open.
                snapshots.clear();
                drop((cf, side.take()));
                drop(db);
                db = run.open(false);
                side = db.cf("side").ok();
                for (i, t) in cfs.iter().enumerate() {
                    let found = match (i, &side) {
                        (0, _) => scan(&db, &db.default_cf()),
                        (_, Some(side)) => scan(&db, side),
                        (_, None) => Model::new(),
                    };
                    assert_same(
                        &found,
                        &t.model,
                        &format!("{at}: reopen, column family {i}"),
                    );
                }
            }
            85..91 => {
                // Another machine takes the store over: after a clean close, or from a writer
                // that hangs on (its later work is fenced).
                snapshots.clear();
                drop((cf, side.take()));
                if rng.random_bool(0.5) {
                    drop(db);
                } else {
                    std::mem::forget(db);
                }
                db = run.open(true);
                side = db.cf("side").ok();
                let found = [
                    scan(&db, &db.default_cf()),
                    side.as_ref()
                        .map(|side| scan(&db, side))
                        .unwrap_or_default(),
                ];
                for (i, (t, found)) in cfs.iter_mut().zip(found).enumerate() {
                    t.taken_over(found, &format!("{at}: takeover, column family {i}"));
                }
            }
            _ => {
                let k = key(&mut rng);
                let got = db.get_cf(&cf, &k).unwrap().map(|v| v.len());
                let expected = cfs[cf_index].model.get(&k).map(Vec::len);
                assert_eq!(got, expected, "{at}: get {k:?}");
            }
        }
    }
    assert_same(
        &scan(&db, &db.default_cf()),
        &cfs[0].model,
        &format!("{durability:?} at the end"),
    );
}

#[test]
fn a_random_stream_agrees_with_a_model_at_both_durabilities() {
    let Some(s) = seaweed::shared() else { return };
    let ops: usize = std::env::var("STRATA_BUCKET_MODEL_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let seed: u64 = std::env::var("STRATA_BUCKET_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    for durability in [Durability::Remote, Durability::Local] {
        model_run(s, durability, seed, ops);
    }
}
