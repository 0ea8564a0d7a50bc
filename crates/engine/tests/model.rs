//! A randomized model test: a seeded stream of operations runs against the store and against a
//! `BTreeMap`, and every read must agree. Tiny write buffers and level targets make flushes and
//! compactions of every kind constant, so reads cross memtables, L0 and several levels while
//! snapshots and iterators are held across compactions. Snapshots taken along the way keep
//! a copy of the model and are checked until released; reopen checks recovery. Range deletions
//! come in every shape (narrow, wide, single-key, adjacent to and nested in the previous one) and
//! land across memtables, flushes and compactions.
//!
//! `STRATA_MODEL_OPS` (default 100000) and `STRATA_MODEL_SEED` (default: random) control a run; the
//! seed is printed on failure.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use strata_engine::{
    Clock, Db, ManualClock, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEY_SPACE: u32 = 3000;

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:05}", rng.random_range(0..KEY_SPACE)).into_bytes()
}

fn value(rng: &mut StdRng, op: u64) -> Vec<u8> {
    let len = if rng.random_ratio(1, 50) {
        rng.random_range(1000..5000)
    } else {
        rng.random_range(0..40)
    };
    let mut v = format!("{op}:").into_bytes();
    v.resize(v.len() + len, b'a' + (op % 26) as u8);
    v
}

/// Tiny buffers and level targets: flushes, L0 compactions, level compactions and trivial moves
/// happen all the time. `dynamic` switches RocksDB's dynamic level sizing. With a clock, values of
/// 30 bytes or more go to small blob files that garbage collection keeps relocating, and TTLs are
/// judged by that clock.
fn options(dynamic: bool, clock: Option<&Arc<ManualClock>>) -> Options {
    {
        let mut o = Options::default();
        if let Some(clock) = clock {
            o.clock = clock.clone();
            o.enable_blob_files = true;
            o.min_blob_size = 30;
            o.blob_file_size = 16 << 10;
            o.ttl_range_secs = 50;
            o.blob_garbage_collection_age_cutoff = 0.5;
        }
        o.write_buffer_size = 32 << 10;
        o.max_write_buffer_number = 3;
        o.block_size = 512;
        // Odd seeds: a cache small enough to churn, holding index and filter blocks (pinned at
        // L0), evicting by CLOCK; even seeds: the defaults.
        if !dynamic {
            o.cache_size = 64 << 10;
            o.cache_kind = strata_engine::CacheKind::Clock;
            o.cache_index_and_filter_blocks = true;
            o.pin_l0_filter_and_index_blocks_in_cache = true;
        } else {
            o.cache_size = 4 << 20;
        }
        o.level0_file_num_compaction_trigger = 2;
        o.level0_slowdown_writes_trigger = 6;
        o.level0_stop_writes_trigger = 10;
        // Range deletions keep the live set small: a small base level still makes it deep.
        o.max_bytes_for_level_base = 32 << 10;
        o.max_bytes_for_level_multiplier = 4;
        o.target_file_size_base = 16 << 10;
        o.level_compaction_dynamic_level_bytes = dynamic;
        o
    }
}

struct Run {
    rng: StdRng,
    dir: tempfile::TempDir,
    db: Option<Db>,
    model: Model,
    snapshots: Vec<(Snapshot, Model)>,
    checks: u64,
    dynamic: bool,
    /// Statistics of earlier opens, summed.
    flushes: u64,
    compactions: u64,
    trivial_moves: u64,
    range_deletes: u64,
    /// The last range deleted, by key index: the next one may sit beside it or inside it.
    last_range: (u32, u32),
    /// Blob files and TTL: the test clock, and each TTL value's expiration (values are unique).
    clock: Option<Arc<ManualClock>>,
    expirations: HashMap<Vec<u8>, u64>,
    ttl_puts: u64,
    expired: u64,
    /// Blob statistics of earlier opens, summed: values separated, relocated by GC, blob files
    /// deleted, expired entries compactions removed.
    blob_counts: [u64; 4],
}

fn key_at(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

impl Run {
    /// A range to delete, `[start, end)`, in one of several shapes.
    fn range(&mut self) -> (Vec<u8>, Vec<u8>) {
        let (last_from, last_to) = self.last_range;
        let rng = &mut self.rng;
        let from = rng.random_range(0..KEY_SPACE);
        let (from, to) = match rng.random_range(0..12) {
            0..=6 => (from, from + rng.random_range(1..30)),
            7 => (from, from + rng.random_range(30..300)),
            8 => {
                // A single key: up to the key followed by a zero byte.
                let k = key_at(from);
                let mut end = k.clone();
                end.push(0);
                return (k, end);
            }
            9 => (last_to, last_to + rng.random_range(1..30)),
            _ => {
                let a = rng.random_range(last_from..last_to);
                (a, rng.random_range(a + 1..=last_to))
            }
        };
        self.last_range = (from, to);
        (key_at(from), key_at(to))
    }

    fn model_delete_range(model: &mut Model, start: &[u8], end: &[u8]) {
        let doomed: Vec<Vec<u8>> = model
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            model.remove(&k);
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("open")
    }

    fn check_get(&mut self, at: Option<usize>) {
        let k = key(&mut self.rng);
        let (opts, model) = self.view(at);
        let got = self.db().get_with(&opts, &k).unwrap().map(|v| v.into_vec());
        assert_eq!(
            got,
            model.get(&k).cloned(),
            "get {:?} at snapshot {at:?}",
            String::from_utf8_lossy(&k)
        );
        self.checks += 1;
    }

    /// A batch of keys (some repeated) through `multi_get`, each checked against the model.
    fn check_multi_get(&mut self, at: Option<usize>) {
        let n = self.rng.random_range(1..40);
        let mut keys: Vec<Vec<u8>> = (0..n).map(|_| key(&mut self.rng)).collect();
        keys.push(keys[0].clone());
        let (opts, model) = self.view(at);
        let got = self.db().multi_get(&opts, &keys);
        assert_eq!(got.len(), keys.len());
        for (k, v) in keys.iter().zip(got) {
            assert_eq!(
                v.unwrap().map(|v| v.into_vec()),
                model.get(k).cloned(),
                "multi_get {:?} at snapshot {at:?}",
                String::from_utf8_lossy(k)
            );
            self.checks += 1;
        }
    }

    fn view(&self, at: Option<usize>) -> (ReadOptions, Model) {
        match at {
            Some(i) => (
                ReadOptions {
                    snapshot: Some(self.snapshots[i].0.clone()),
                    ..Default::default()
                },
                self.snapshots[i].1.clone(),
            ),
            None => (ReadOptions::default(), self.model.clone()),
        }
    }

    fn check_iter(&mut self, at: Option<usize>) {
        let (mut opts, model) = self.view(at);
        if self.rng.random_ratio(1, 2) {
            opts.lower_bound = Some(key(&mut self.rng));
        }
        if self.rng.random_ratio(1, 2) {
            opts.upper_bound = Some(key(&mut self.rng));
        }
        let lower = opts
            .lower_bound
            .clone()
            .map_or(Bound::Unbounded, Bound::Included);
        let upper = opts
            .upper_bound
            .clone()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let in_range: Vec<(&Vec<u8>, &Vec<u8>)> = match (&lower, &upper) {
            (Bound::Included(l), Bound::Excluded(u)) if l >= u => Vec::new(),
            _ => model.range::<Vec<u8>, _>((lower, upper)).collect(),
        };
        let mut it = self.db().iter(&opts).unwrap();
        let target = key(&mut self.rng);
        // Start somewhere, then walk a random number of steps in a random direction (switching
        // direction now and then), comparing every position with the model.
        let mut pos: Option<usize> = match self.rng.random_range(0..4) {
            0 => {
                it.seek_to_first();
                (!in_range.is_empty()).then_some(0)
            }
            1 => {
                it.seek_to_last();
                in_range.len().checked_sub(1)
            }
            2 => {
                it.seek(&target);
                let i = in_range.partition_point(|(k, _)| k.as_slice() < target.as_slice());
                (i < in_range.len()).then_some(i)
            }
            _ => {
                it.seek_for_prev(&target);
                in_range
                    .partition_point(|(k, _)| k.as_slice() <= target.as_slice())
                    .checked_sub(1)
            }
        };
        let steps = self.rng.random_range(0..60);
        let mut forward = self.rng.random_ratio(1, 2);
        for _ in 0..steps {
            match pos {
                None => {
                    assert!(!it.valid(), "iterator valid past the model's end at {at:?}");
                    break;
                }
                Some(i) => {
                    assert!(it.valid(), "iterator ended early at model index {i}");
                    assert_eq!(it.key(), in_range[i].0.as_slice());
                    assert_eq!(it.value(), in_range[i].1.as_slice());
                    self.checks += 1;
                }
            }
            if self.rng.random_ratio(1, 10) {
                forward = !forward;
            }
            let i = pos.unwrap_or_default();
            if forward {
                it.next();
                pos = (i + 1 < in_range.len()).then_some(i + 1);
            } else {
                it.prev();
                pos = i.checked_sub(1);
            }
        }
        if pos.is_none() {
            assert!(!it.valid());
        }
        it.status().unwrap();
    }

    fn step(&mut self, op: u64) {
        let choice = self.rng.random_range(0..1000);
        match choice {
            0..=49 if self.clock.is_some() => {
                let (k, v) = (key(&mut self.rng), value(&mut self.rng, op));
                let ttl = self.rng.random_range(1..200);
                let db = self.db.as_ref().expect("open");
                db.put_with_ttl(&db.default_cf(), &k, &v, ttl).unwrap();
                let now = self.clock.as_ref().map_or(0, |c| c.now_secs());
                self.expirations.insert(v.clone(), now + ttl);
                self.model.insert(k, v);
                self.ttl_puts += 1;
            }
            50..=54 if self.clock.is_some() => self.advance_clock(),
            0..=399 => {
                let (k, v) = (key(&mut self.rng), value(&mut self.rng, op));
                let sync = self.rng.random_ratio(1, 100);
                self.db()
                    .put_with(
                        &WriteOptions {
                            sync,
                            disable_wal: false,
                        },
                        &k,
                        &v,
                    )
                    .unwrap();
                self.model.insert(k, v);
            }
            400..=484 => {
                let k = key(&mut self.rng);
                self.db().delete(&k).unwrap();
                self.model.remove(&k);
            }
            485..=499 => {
                let (start, end) = self.range();
                self.db().delete_range(&start, &end).unwrap();
                Self::model_delete_range(&mut self.model, &start, &end);
                self.range_deletes += 1;
            }
            500..=559 => {
                let mut b = WriteBatch::new();
                for _ in 0..self.rng.random_range(1..20) {
                    let k = key(&mut self.rng);
                    if self.rng.random_ratio(1, 100) {
                        let (start, end) = self.range();
                        b.delete_range(&start, &end);
                        Self::model_delete_range(&mut self.model, &start, &end);
                        self.range_deletes += 1;
                    } else if self.rng.random_ratio(1, 4) {
                        b.delete(&k);
                        self.model.remove(&k);
                    } else {
                        let v = value(&mut self.rng, op);
                        b.put(&k, &v);
                        self.model.insert(k, v);
                    }
                }
                self.db().write(b, &WriteOptions::default()).unwrap();
            }
            560..=759 => {
                let at = self.pick_snapshot();
                self.check_get(at);
            }
            760..=799 => {
                let at = self.pick_snapshot();
                self.check_multi_get(at);
            }
            800..=899 => {
                let at = self.pick_snapshot();
                self.check_iter(at);
            }
            900..=929 => {
                if self.snapshots.len() < 6 {
                    let s = self.db().snapshot();
                    self.snapshots.push((s, self.model.clone()));
                }
            }
            930..=964 => {
                if !self.snapshots.is_empty() {
                    let i = self.rng.random_range(0..self.snapshots.len());
                    self.snapshots.swap_remove(i);
                }
            }
            965..=984 => self.db().flush().unwrap(),
            985..=988 => {
                // Manual compaction of a random range, snapshots and iterators notwithstanding.
                let (a, b) = (key(&mut self.rng), key(&mut self.rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                self.db().compact_range(Some(&lo), Some(&hi)).unwrap();
            }
            989..=990 => self.db().compact_range(None, None).unwrap(),
            991..=996 => {
                // An iterator held across writes, flushes and compactions still sees its moment.
                let at = self.pick_snapshot();
                let (opts, model) = self.view(at);
                let mut it = self.db().iter(&opts).unwrap();
                for i in 0..200u32 {
                    let k = format!("key{:05}", (i * 7919) % KEY_SPACE).into_bytes();
                    self.db().put(&k, b"later").unwrap();
                    self.model.insert(k, b"later".to_vec());
                }
                self.db().flush().unwrap();
                self.db().compact_range(None, None).unwrap();
                it.seek_to_first();
                for (k, v) in &model {
                    assert!(it.valid(), "held iterator ended early");
                    assert_eq!(
                        (it.key(), it.value()),
                        (k.as_slice(), v.as_slice()),
                        "held iterator"
                    );
                    it.next();
                }
                assert!(!it.valid());
                it.status().unwrap();
                self.checks += model.len() as u64;
            }
            _ => {
                // Snapshots do not survive a reopen.
                self.snapshots.clear();
                self.reopen();
            }
        }
    }

    /// Moves the test clock; every value whose expiration passes vanishes from the model and from
    /// every snapshot's copy (expiry is by the clock, not by snapshot).
    fn advance_clock(&mut self) {
        let Some(clock) = &self.clock else { return };
        clock.advance(self.rng.random_range(1..60));
        let now = clock.now_secs();
        let exp = &self.expirations;
        let live = |v: &Vec<u8>| exp.get(v).is_none_or(|e| *e > now);
        let before = self.model.len();
        self.model.retain(|_, v| live(v));
        self.expired += (before - self.model.len()) as u64;
        for (_, m) in &mut self.snapshots {
            m.retain(|_, v| live(v));
        }
    }

    fn reopen(&mut self) {
        let db = self.db.take().unwrap();
        let s = db.statistics();
        self.flushes += s.flushes;
        self.compactions += s.compactions;
        self.trivial_moves += s.trivial_moves;
        for (sum, n) in self.blob_counts.iter_mut().zip([
            s.blob_values_written,
            s.blob_gc_relocated_keys,
            s.blob_files_deleted,
            s.compaction_keys_expired,
        ]) {
            *sum += n;
        }
        db.close().unwrap();
        self.db =
            Some(Db::open(self.dir.path(), options(self.dynamic, self.clock.as_ref())).unwrap());
    }

    fn pick_snapshot(&mut self) -> Option<usize> {
        if self.snapshots.is_empty() || self.rng.random_ratio(1, 2) {
            None
        } else {
            Some(self.rng.random_range(0..self.snapshots.len()))
        }
    }
}

#[test]
fn store_agrees_with_a_btreemap_model() {
    run_model(false);
}

/// The same, with values in blob files (relocated by garbage collection) and one operation in
/// twenty a put with a TTL while a test clock moves.
#[test]
fn store_with_blob_files_and_ttl_agrees_with_a_btreemap_model() {
    run_model(true);
}

fn run_model(blobs: bool) {
    let ops: u64 = std::env::var("STRATA_MODEL_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let seed: u64 = std::env::var("STRATA_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().next_u64());
    let dir = tempfile::tempdir().unwrap();
    let dynamic = seed.is_multiple_of(2);
    let clock = blobs.then(|| Arc::new(ManualClock::new(1_700_000_000)));
    let db = Db::open(dir.path(), options(dynamic, clock.as_ref())).unwrap();
    let mut run = Run {
        rng: StdRng::seed_from_u64(seed),
        dir,
        db: Some(db),
        model: Model::new(),
        snapshots: Vec::new(),
        checks: 0,
        dynamic,
        flushes: 0,
        compactions: 0,
        trivial_moves: 0,
        range_deletes: 0,
        last_range: (0, 1),
        clock,
        expirations: HashMap::new(),
        ttl_puts: 0,
        expired: 0,
        blob_counts: [0; 4],
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for op in 0..ops {
            run.step(op);
        }
    }));
    if let Err(e) = outcome {
        eprintln!("model test failed: rerun with STRATA_MODEL_SEED={seed} STRATA_MODEL_OPS={ops}");
        std::panic::resume_unwind(e);
    }
    // A last full comparison after a final reopen.
    run.snapshots.clear();
    run.reopen();
    let db = run.db.take().unwrap();
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    for (k, v) in &run.model {
        assert!(
            it.valid(),
            "seed {seed}: store ends before {:?}",
            String::from_utf8_lossy(k)
        );
        assert_eq!(
            (it.key(), it.value()),
            (k.as_slice(), v.as_slice()),
            "seed {seed}"
        );
        it.next();
    }
    assert!(!it.valid(), "seed {seed}: store has extra keys");
    let props = db.properties_cf(&db.default_cf()).unwrap();
    let deepest = props.levels.iter().rposition(|l| l.files > 0).unwrap_or(0);
    println!(
        "model test: seed {seed}, {ops} operations ({} range deletions), {} reads checked; {} \
         flushes, {} compactions, {} trivial moves; {} keys and {} tables at the end, deepest \
         level L{deepest}",
        run.range_deletes,
        run.checks,
        run.flushes,
        run.compactions,
        run.trivial_moves,
        run.model.len(),
        props.total_files
    );
    if blobs {
        let [written, relocated, deleted, expired] = run.blob_counts;
        println!(
            "  blobs: {} TTL puts, {} values expired in the model, {} values in blob files, {} \
             relocated by GC, {} blob files deleted, {} expired entries removed by compaction",
            run.ttl_puts, run.expired, written, relocated, deleted, expired
        );
        if ops >= 50_000 {
            assert!(
                relocated > 0 && deleted > 0 && expired > 0,
                "blob work should happen"
            );
        }
    }
    if ops >= 50_000 {
        assert!(run.flushes > 500, "the run should flush constantly");
        assert!(run.compactions > 100, "the run should compact constantly");
        assert!(deepest >= 2, "data should reach deeper levels");
    }
}
