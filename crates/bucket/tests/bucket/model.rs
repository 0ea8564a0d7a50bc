//! A seeded stream of puts, deletes, range deletes, flushes, compactions and reopens (from the
//! same cache, from an empty one, after a crash that drops the process) on a bucket store,
//! checked against a `BTreeMap` after every step that can lose something. At `bucket`
//! durability every synced write must survive any reopen; at `local`, a reopen from an empty
//! cache keeps exactly what was flushed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_bucket::{BucketFs, Durability};
use strata_engine::{Db, ReadOptions};

use crate::support::seaweed::{self, Seaweed};
use crate::support::{open_db, synced};

/// `actual` equals `expected`, or the keys where they differ (not the whole maps).
fn assert_same(
    actual: &BTreeMap<Vec<u8>, Vec<u8>>,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
    what: &str,
) {
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
    assert!(
        missing.is_empty() && extra.is_empty() && changed.is_empty(),
        "{what}: missing {missing:?}, extra {extra:?}, changed {changed:?}"
    );
}

fn scan(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    out
}

struct Run<'a> {
    s: &'a Seaweed,
    url: strata_bucket::BucketUrl,
    durability: Durability,
    tmp: tempfile::TempDir,
    caches: usize,
}

impl Run<'_> {
    fn cache(&mut self, fresh: bool) -> PathBuf {
        if fresh {
            self.caches += 1;
        }
        self.tmp.path().join(format!("cache-{}", self.caches))
    }

    fn open(&mut self, fresh: bool) -> Db {
        let cache = self.cache(fresh);
        open_db(BucketFs::open(&self.s.config(&self.url, cache, self.durability)).unwrap())
    }
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
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    // What a reopen from nothing must show at `local`: the model as of the last flush.
    let mut flushed = model.clone();
    let key = |rng: &mut StdRng| format!("k{:03}", rng.random_range(0..200)).into_bytes();
    for step in 0..ops {
        let what = rng.random_range(0..100);
        match what {
            0..50 => {
                let k = key(&mut rng);
                let len = if rng.random_bool(0.05) {
                    70_000
                } else {
                    rng.random_range(1..200)
                };
                let v = vec![rng.random::<u8>(); len];
                db.put_with(&synced(), &k, &v).unwrap();
                model.insert(k, v);
            }
            50..65 => {
                let k = key(&mut rng);
                db.delete_with(&synced(), &k).unwrap();
                model.remove(&k);
            }
            65..68 => {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                db.delete_range_with(&synced(), &a, &b).unwrap();
                model.retain(|k, _| !(k.as_slice() >= a.as_slice() && k.as_slice() < b.as_slice()));
            }
            68..78 => {
                db.flush().unwrap();
                flushed = model.clone();
            }
            78..81 => {
                db.compact_range(None, None).unwrap();
                flushed = model.clone(); // a compaction flushes the memtable first
            }
            81..88 => {
                // A clean reopen through the same cache: everything.
                drop(db);
                db = run.open(false);
                assert_same(
                    &scan(&db),
                    &model,
                    &format!("{durability:?} step {step}: reopen from the same cache"),
                );
                // An open for writing turns what it replays from the WAL into tables.
                flushed = model.clone();
            }
            88..94 => {
                // Another machine: at `bucket` every synced write, at `local` what was flushed.
                drop(db);
                db = run.open(true);
                let expected = match durability {
                    Durability::Remote => &model,
                    Durability::Local => &flushed,
                };
                assert_same(
                    &scan(&db),
                    expected,
                    &format!("{durability:?} step {step}: reopen from an empty cache"),
                );
                model = expected.clone();
            }
            _ => {
                let k = key(&mut rng);
                let got = db.get(&k).unwrap().map(|v| v.len());
                assert_eq!(
                    got,
                    model.get(&k).map(Vec::len),
                    "{durability:?} step {step}: get {k:?}"
                );
            }
        }
    }
    assert_same(&scan(&db), &model, &format!("{durability:?} at the end"));
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
