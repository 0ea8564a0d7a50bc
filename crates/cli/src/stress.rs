//! `strata stress`: db_stress for Strata. Threads run a mix of operations on keys `0..max_key`,
//! every write touching the key in every column family in one batch, and verify every read
//! against an expected-state file.
//!
//! The expected-state file holds, per key, the value number last acknowledged and the one being
//! written (if any). A writer records the pending value before calling the store and commits it
//! after, both with positional writes that survive a SIGKILL; so after a crash, a key with a
//! pending value may hold either, and any other key must hold exactly its committed value. Each
//! run starts by checking every key that way (and that all column families agree, as atomic
//! batches require), then resolves the pending ones to what the store holds.
//!
//! `--crash_test --duration SECS` is the driver: it runs the tool as a child, SIGKILLs it at a
//! random moment, restarts it (the restart verifies), and repeats until the time is up.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::{
    Clock, ColumnFamily, ColumnFamilyOptions, Db, Options, ReadOptions, Snapshot, WriteBatch,
    WriteOptions,
};

/// db_stress's flags (a subset), with db_stress's names.
#[derive(Args, Debug, Clone)]
pub struct StressArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Operations each thread runs.
    #[arg(long = "ops_per_thread", default_value_t = 20_000)]
    pub ops_per_thread: u64,
    /// Keys are 0..max_key.
    #[arg(long = "max_key", default_value_t = 10_000)]
    pub max_key: u64,
    /// Column families every write goes to (the default one included).
    #[arg(long = "column_families", default_value_t = 3)]
    pub column_families: usize,
    /// Percent of operations that are point reads.
    #[arg(long, default_value_t = 40)]
    pub readpercent: u32,
    /// Percent that are puts.
    #[arg(long, default_value_t = 35)]
    pub writepercent: u32,
    /// Percent that are deletes.
    #[arg(long, default_value_t = 10)]
    pub delpercent: u32,
    /// Percent that are range deletions (of up to `--range_width` keys).
    #[arg(long, default_value_t = 5)]
    pub delrangepercent: u32,
    /// Percent that are bounded iterations (forward or backward) over up to `--range_width` keys.
    #[arg(long, default_value_t = 5)]
    pub iterpercent: u32,
    /// Percent that are MultiGets of up to 8 keys.
    #[arg(long, default_value_t = 5)]
    pub multigetpercent: u32,
    /// One operation in this many (per thread) also takes a snapshot and reads a key in every
    /// column family at it, checked against the expected state; the snapshot is held for up to 64
    /// operations and the key read again at it, which must give the same bytes (0: never).
    #[arg(long = "acquire_snapshot_one_in", default_value_t = 20)]
    pub acquire_snapshot_one_in: u32,
    /// Keys a range deletion or an iteration spans at most.
    #[arg(long = "range_width", default_value_t = 10)]
    pub range_width: u64,
    /// Largest value in bytes (values vary from 20 bytes up to this).
    #[arg(long = "value_size", default_value_t = 200)]
    pub value_size: usize,
    /// Closes and reopens the store this many times during the run.
    #[arg(long, default_value_t = 0)]
    pub reopen: u32,
    /// fsync every write.
    #[arg(long)]
    pub sync: bool,
    /// Keep large values in blob files.
    #[arg(long = "enable_blob_files")]
    pub enable_blob_files: bool,
    /// Values at least this long go to blob files.
    #[arg(long = "min_blob_size", default_value_t = 100)]
    pub min_blob_size: u64,
    /// Puts carry this TTL in seconds (at least an hour, so nothing expires during a run).
    #[arg(long)]
    pub ttl: Option<u64>,
    /// The expected-state file (default: the store's directory name plus `.expected`).
    #[arg(long = "expected_state")]
    pub expected_state: Option<PathBuf>,
    /// Seed of the operation stream (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Only verify the store against the expected state, then exit.
    #[arg(long = "verify_only")]
    pub verify_only: bool,
    /// Run the crash-test driver: start, SIGKILL and restart the tool until `--duration` is up.
    #[arg(long = "crash_test")]
    pub crash_test: bool,
    /// Seconds the crash test runs.
    #[arg(long, default_value_t = 120)]
    pub duration: u64,
    /// Longest a child runs before the kill, in seconds (each run is random up to this).
    #[arg(long = "kill_interval", default_value_t = 6)]
    pub kill_interval: u64,
    /// Run until killed (the crash test's children).
    #[arg(long = "until_killed", hide = true)]
    pub until_killed: bool,
}

/// No pending write for this key.
const NONE: u32 = u32::MAX;
const MAGIC: &[u8; 8] = b"STRESS01";
const HEADER: u64 = 16;

/// The expected-state file: per key, (committed value number, pending value number or NONE).
/// Value number 0 means absent.
struct Expected {
    file: File,
    path: PathBuf,
}

impl Expected {
    fn open(path: &Path, max_key: u64, create: bool) -> Result<Expected, String> {
        let err = |e: std::io::Error| format!("expected state {}: {e}", path.display());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(err)?;
        let len = file.metadata().map_err(err)?.len();
        let want = HEADER + max_key * 8;
        if len == 0 {
            file.write_all_at(MAGIC, 0).map_err(err)?;
            file.write_all_at(&max_key.to_le_bytes(), 8).map_err(err)?;
            // Every key absent, nothing pending.
            let mut slot = [0u8; 8];
            slot[4..].copy_from_slice(&NONE.to_le_bytes());
            let body: Vec<u8> = slot.repeat(max_key as usize);
            file.write_all_at(&body, HEADER).map_err(err)?;
        } else {
            let mut head = [0u8; 16];
            file.read_exact_at(&mut head, 0).map_err(err)?;
            let keys = u64::from_le_bytes(head[8..].try_into().unwrap_or_default());
            if &head[..8] != MAGIC || keys != max_key || len != want {
                return Err(format!(
                    "{} is not an expected-state file for --max_key {max_key} (it has {keys})",
                    path.display()
                ));
            }
        }
        Ok(Expected {
            file,
            path: path.to_path_buf(),
        })
    }

    fn get(&self, key: u64) -> (u32, u32) {
        let mut b = [0u8; 8];
        if let Err(e) = self.file.read_exact_at(&mut b, HEADER + key * 8) {
            fatal(&format!("reading {}: {e}", self.path.display()));
        }
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        (word(0), word(4))
    }

    fn write(&self, key: u64, offset: u64, value: u32) {
        if let Err(e) = self
            .file
            .write_all_at(&value.to_le_bytes(), HEADER + key * 8 + offset)
        {
            fatal(&format!("writing {}: {e}", self.path.display()));
        }
    }

    fn set_pending(&self, key: u64, value: u32) {
        self.write(key, 4, value);
    }

    fn commit(&self, key: u64, value: u32) {
        self.write(key, 0, value);
        self.write(key, 4, NONE);
    }
}

/// The state file cannot be trusted any more: stop at once.
fn fatal(msg: &str) -> ! {
    eprintln!("strata stress: {msg}");
    std::process::exit(2)
}

fn key_bytes(key: u64) -> Vec<u8> {
    format!("{key:010}").into_bytes()
}

/// Value number `n` of `key`: self-describing, so a read can be checked by its bytes alone.
fn value_bytes(key: u64, n: u32, max: usize) -> Vec<u8> {
    let head = format!("{key:010}:{n:08x}:");
    let spread = max.saturating_sub(head.len()).max(1) as u64;
    let len = (key.wrapping_mul(7) + u64::from(n).wrapping_mul(13)) % spread;
    let mut v = head.into_bytes();
    v.extend((0..len).map(|i| b'a' + ((key + u64::from(n) * 3 + i) % 26) as u8));
    v
}

/// The value number `key` holds: 0 when absent, else the number its value carries, provided its
/// bytes are exactly what that number writes.
fn stored_number(key: u64, got: Option<&[u8]>, max: usize) -> Result<u32, String> {
    let Some(v) = got else { return Ok(0) };
    v.get(11..19)
        .and_then(|hex| u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok())
        .filter(|&n| value_bytes(key, n, max) == v)
        .ok_or_else(|| format!("malformed value {v:?}"))
}

/// Locks on keys: a key maps to one of a fixed set of stripes; several are taken in order.
struct KeyLocks(Vec<Mutex<()>>);

impl KeyLocks {
    fn lock(&self, keys: impl IntoIterator<Item = u64>) -> Vec<MutexGuard<'_, ()>> {
        let mut stripes: Vec<usize> = keys
            .into_iter()
            .map(|k| (k % self.0.len() as u64) as usize)
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .into_iter()
            .map(|s| self.0[s].lock().unwrap_or_else(|p| p.into_inner()))
            .collect()
    }
}

struct Shared<'a> {
    args: &'a StressArgs,
    dir: &'a Path,
    db: RwLock<Option<(Db, Vec<ColumnFamily>)>>,
    expected: Expected,
    locks: KeyLocks,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    ops: AtomicU64,
    verified_reads: AtomicU64,
    snapshots_checked: AtomicU64,
}

impl Shared<'_> {
    fn fail(&self, msg: String) {
        if !self.failed.swap(true, Ordering::SeqCst) {
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg);
        }
    }
}

fn cf_names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            if i == 0 {
                "default".to_string()
            } else {
                format!("cf{i}")
            }
        })
        .collect()
}

fn db_options(args: &StressArgs) -> Options {
    let cf = ColumnFamilyOptions {
        // Small buffers and levels: flushes and compactions run all the time.
        write_buffer_size: 64 << 10,
        target_file_size_base: 64 << 10,
        max_bytes_for_level_base: 256 << 10,
        level0_file_num_compaction_trigger: 2,
        enable_blob_files: args.enable_blob_files,
        min_blob_size: args.min_blob_size as usize,
        blob_file_size: 256 << 10,
        enable_blob_garbage_collection: true,
        blob_garbage_collection_age_cutoff: 0.25,
        ..Default::default()
    };
    let column_families = cf_names(args.column_families)
        .into_iter()
        .skip(1)
        .map(|name| (name, cf.clone()))
        .collect();
    Options {
        create_missing_column_families: true,
        column_families,
        cf,
        ..Default::default()
    }
}

fn open_db(args: &StressArgs, dir: &Path) -> Result<(Db, Vec<ColumnFamily>), String> {
    let db = Db::open(dir, db_options(args))
        .map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    let cfs = cf_names(args.column_families)
        .iter()
        .map(|n| db.cf(n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok((db, cfs))
}

fn check_args(args: &StressArgs) -> Result<(), String> {
    let total = args.readpercent
        + args.writepercent
        + args.delpercent
        + args.delrangepercent
        + args.iterpercent
        + args.multigetpercent;
    if total != 100 {
        return Err(format!(
            "the operation percentages add up to {total}, not 100"
        ));
    }
    if args.threads == 0 || args.max_key == 0 || args.column_families == 0 {
        return Err("--threads, --max_key and --column_families must be at least 1".into());
    }
    if args.ttl.is_some_and(|t| t < 3600) {
        return Err("--ttl must be at least 3600: nothing may expire during a run".into());
    }
    if args.range_width == 0 || args.range_width > 1000 {
        return Err("--range_width must be 1 to 1000".into());
    }
    Ok(())
}

/// Runs `strata stress` with `args` on the store in `dir`.
pub fn run(dir: &Path, args: StressArgs) -> Result<(), String> {
    check_args(&args)?;
    if args.crash_test {
        return crash_test(dir, &args);
    }
    let state_path = args.expected_state.clone().unwrap_or_else(|| {
        let mut p = dir.as_os_str().to_owned();
        p.push(".expected");
        PathBuf::from(p)
    });
    let fresh = !dir.join("CURRENT").exists();
    if !fresh && !state_path.exists() {
        return Err(format!(
            "{} holds a store but {} is missing: start stress runs on an empty directory",
            dir.display(),
            state_path.display()
        ));
    }
    let expected = Expected::open(&state_path, args.max_key, fresh)?;
    let shared = Shared {
        args: &args,
        dir,
        db: RwLock::new(Some(open_db(&args, dir)?)),
        expected,
        locks: KeyLocks((0..4096).map(|_| Mutex::new(())).collect()),
        failed: AtomicBool::new(false),
        failure: Mutex::new(None),
        ops: AtomicU64::new(0),
        verified_reads: AtomicU64::new(0),
        snapshots_checked: AtomicU64::new(0),
    };
    let (keys, resolved) = verify_all(&shared)?;
    println!("verified {keys} keys ({resolved} in-flight writes resolved)");
    if args.verify_only {
        return Ok(());
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    println!("seed {seed}");
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..args.threads {
            let shared = &shared;
            s.spawn(move || worker(shared, seed.wrapping_add(t as u64)));
        }
        if args.reopen > 0 {
            s.spawn(|| reopener(&shared));
        }
    });
    if let Some(msg) = shared
        .failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        return Err(msg);
    }
    let (keys, _) = verify_all(&shared)?;
    let ops = shared.ops.load(Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();
    println!(
        "stress: {ops} operations in {secs:.1} s ({:.0} ops/sec), {} reads verified, {} snapshots \
         read again, {} reopens, {keys} keys verified at the end",
        ops as f64 / secs,
        shared.verified_reads.load(Ordering::Relaxed),
        shared.snapshots_checked.load(Ordering::Relaxed),
        args.reopen
    );
    Ok(())
}

/// Checks every key in every column family against the expected state and resolves pending
/// writes to what the store holds. Returns (keys checked, pending writes resolved).
fn verify_all(shared: &Shared<'_>) -> Result<(u64, u64), String> {
    let guard = shared.db.read().unwrap_or_else(|p| p.into_inner());
    let Some((db, cfs)) = guard.as_ref() else {
        return Err("the store is not open".into());
    };
    let max = shared.args.value_size;
    let mut resolved = 0;
    for key in 0..shared.args.max_key {
        let (committed, pending) = shared.expected.get(key);
        let mut seen = None;
        for (i, cf) in cfs.iter().enumerate() {
            let got = db
                .get_cf(cf, key_bytes(key))
                .map_err(|e| format!("key {key}: {e}"))?;
            let n = stored_number(key, got.as_deref(), max)
                .map_err(|e| format!("key {key} in column family {i}: {e}"))?;
            match seen {
                None => seen = Some(n),
                Some(first) if first != n => {
                    return Err(format!(
                        "key {key}: column family 0 holds value {first}, column family {i} \
                         holds {n}: a batch was applied to some column families only"
                    ));
                }
                Some(_) => {}
            }
        }
        let n = seen.unwrap_or(0);
        if n == committed && pending == NONE {
            continue;
        }
        if pending != NONE && (n == committed || n == pending) {
            shared.expected.commit(key, n);
            resolved += 1;
            continue;
        }
        let also = if pending == NONE {
            String::new()
        } else {
            format!(" or {pending} (in flight)")
        };
        return Err(format!(
            "key {key}: the store holds value {n}, expected {committed}{also}"
        ));
    }
    Ok((shared.args.max_key, resolved))
}

fn next_number(n: u32) -> u32 {
    match n.wrapping_add(1) {
        0 | NONE => 1,
        m => m,
    }
}

fn worker(shared: &Shared<'_>, seed: u64) {
    let args = shared.args;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut done = 0u64;
    while (args.until_killed || done < args.ops_per_thread)
        && !shared.failed.load(Ordering::Relaxed)
    {
        let guard = shared.db.read().unwrap_or_else(|p| p.into_inner());
        let Some((db, cfs)) = guard.as_ref() else {
            continue;
        };
        // A chunk of operations per read lock, so a reopen can get in between.
        let chunk = if args.until_killed {
            64
        } else {
            (args.ops_per_thread - done).min(64)
        };
        // Snapshots live within a chunk: a reopen must not find the store still held.
        let mut held: Vec<HeldSnapshot> = Vec::new();
        for i in 0..chunk {
            let last = i + 1 == chunk;
            if let Err(msg) = step(shared, db, cfs, &mut rng, &mut held, i, last) {
                shared.fail(msg);
                return;
            }
        }
        done += chunk;
        shared.ops.fetch_add(chunk, Ordering::Relaxed);
    }
}

/// Operation `i` of a chunk: now and then a snapshot first; then one operation; then the checks
/// of the snapshots due (all of them at the chunk's `last` operation).
fn step(
    shared: &Shared<'_>,
    db: &Db,
    cfs: &[ColumnFamily],
    rng: &mut StdRng,
    held: &mut Vec<HeldSnapshot>,
    i: u64,
    last: bool,
) -> Result<(), String> {
    let a = shared.args;
    if a.acquire_snapshot_one_in > 0 && rng.random_ratio(1, a.acquire_snapshot_one_in) {
        let key = rng.random_range(0..a.max_key);
        let release_at = i + rng.random_range(1..=64);
        held.push(take_snapshot(shared, db, cfs, key, release_at)?);
    }
    one_op(shared, db, cfs, rng)?;
    let (due, kept): (Vec<_>, Vec<_>) = std::mem::take(held)
        .into_iter()
        .partition(|h| last || h.release_at <= i);
    *held = kept;
    due.into_iter()
        .try_for_each(|h| check_snapshot(shared, db, cfs, h))
}

fn one_op(
    shared: &Shared<'_>,
    db: &Db,
    cfs: &[ColumnFamily],
    rng: &mut StdRng,
) -> Result<(), String> {
    let a = shared.args;
    let key = rng.random_range(0..a.max_key);
    let roll = rng.random_range(0..100);
    let mut bound = a.readpercent;
    if roll < bound {
        let _g = shared.locks.lock([key]);
        return check_key(shared, db, cfs, key, rng.random_range(0..cfs.len()));
    }
    bound += a.writepercent;
    if roll < bound {
        return write(shared, db, cfs, key, key + 1, false);
    }
    bound += a.delpercent;
    if roll < bound {
        return write(shared, db, cfs, key, key + 1, true);
    }
    bound += a.delrangepercent;
    if roll < bound {
        let end = (key + rng.random_range(1..=a.range_width)).min(a.max_key);
        return write(shared, db, cfs, key, end, true);
    }
    bound += a.iterpercent;
    if roll < bound {
        let end = (key + rng.random_range(1..=a.range_width)).min(a.max_key);
        return check_range(
            shared,
            db,
            &cfs[rng.random_range(0..cfs.len())],
            key,
            end,
            rng,
        );
    }
    let keys: Vec<u64> = (0..rng.random_range(1..=8))
        .map(|_| rng.random_range(0..a.max_key))
        .collect();
    check_multi_get(shared, db, &cfs[rng.random_range(0..cfs.len())], &keys)
}

/// A snapshot and what `key` read at it in every column family.
struct HeldSnapshot {
    snapshot: Snapshot,
    key: u64,
    values: Vec<Option<Vec<u8>>>,
    release_at: u64,
}

/// Takes a snapshot with `key` locked and reads the key at it in every column family: each read
/// must match the expected state (every write is one batch across all column families).
fn take_snapshot(
    shared: &Shared<'_>,
    db: &Db,
    cfs: &[ColumnFamily],
    key: u64,
    release_at: u64,
) -> Result<HeldSnapshot, String> {
    let _g = shared.locks.lock([key]);
    let snapshot = db.snapshot();
    let values = read_at(db, cfs, key, &snapshot)?;
    for v in &values {
        check_value(shared, key, v.as_deref(), "snapshot get")?;
    }
    Ok(HeldSnapshot {
        snapshot,
        key,
        values,
        release_at,
    })
}

/// Reads the key of a held snapshot again, however many writes landed since: the same bytes.
fn check_snapshot(
    shared: &Shared<'_>,
    db: &Db,
    cfs: &[ColumnFamily],
    held: HeldSnapshot,
) -> Result<(), String> {
    let again = read_at(db, cfs, held.key, &held.snapshot)?;
    if again != held.values {
        return Err(format!(
            "key {} read differently at the same snapshot (sequence {})",
            held.key,
            held.snapshot.sequence()
        ));
    }
    shared.snapshots_checked.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

fn read_at(
    db: &Db,
    cfs: &[ColumnFamily],
    key: u64,
    snapshot: &Snapshot,
) -> Result<Vec<Option<Vec<u8>>>, String> {
    let opts = ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..Default::default()
    };
    cfs.iter()
        .map(|cf| {
            db.get_cf_with(&opts, cf, key_bytes(key))
                .map(|v| v.map(|v| v.into_vec()))
                .map_err(|e| format!("snapshot get key {key}: {e}"))
        })
        .collect()
}

/// What value number `key` must hold now (its lock is held, so nothing is in flight).
fn expect(shared: &Shared<'_>, key: u64) -> u32 {
    shared.expected.get(key).0
}

fn check_value(shared: &Shared<'_>, key: u64, got: Option<&[u8]>, how: &str) -> Result<(), String> {
    let want = expect(shared, key);
    let n = stored_number(key, got, shared.args.value_size)
        .map_err(|e| format!("{how} key {key}: {e}"))?;
    shared.verified_reads.fetch_add(1, Ordering::Relaxed);
    if n != want {
        return Err(format!("{how} key {key}: read value {n}, expected {want}"));
    }
    Ok(())
}

fn check_key(
    shared: &Shared<'_>,
    db: &Db,
    cfs: &[ColumnFamily],
    key: u64,
    cf: usize,
) -> Result<(), String> {
    let got = db
        .get_cf(&cfs[cf], key_bytes(key))
        .map_err(|e| format!("get key {key}: {e}"))?;
    check_value(shared, key, got.as_deref(), "get")
}

fn check_multi_get(
    shared: &Shared<'_>,
    db: &Db,
    cf: &ColumnFamily,
    keys: &[u64],
) -> Result<(), String> {
    let _g = shared.locks.lock(keys.iter().copied());
    let encoded: Vec<(&ColumnFamily, Vec<u8>)> = keys.iter().map(|&k| (cf, key_bytes(k))).collect();
    let results = db.multi_get_cf(&ReadOptions::default(), &encoded);
    for (&key, r) in keys.iter().zip(results) {
        let got = r.map_err(|e| format!("multi_get key {key}: {e}"))?;
        check_value(shared, key, got.as_deref(), "multi_get")?;
    }
    Ok(())
}

/// Iterates `[start, end)` within bounds, forward or backward, and compares with the expected
/// state key by key.
fn check_range(
    shared: &Shared<'_>,
    db: &Db,
    cf: &ColumnFamily,
    start: u64,
    end: u64,
    rng: &mut StdRng,
) -> Result<(), String> {
    let _g = shared.locks.lock(start..end);
    let opts = ReadOptions {
        lower_bound: Some(key_bytes(start)),
        upper_bound: Some(key_bytes(end)),
        ..Default::default()
    };
    let mut it = db.iter_cf(&opts, cf).map_err(|e| e.to_string())?;
    let backward = rng.random_bool(0.5);
    let mut got = Vec::new();
    if backward {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        if backward {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status()
        .map_err(|e| format!("iterating [{start}, {end}): {e}"))?;
    if backward {
        got.reverse();
    }
    let want: Vec<u64> = (start..end).filter(|&k| expect(shared, k) != 0).collect();
    let keys: Vec<u64> = got
        .iter()
        .map(|(k, _)| std::str::from_utf8(k).ok().and_then(|s| s.parse().ok()))
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| format!("iterating [{start}, {end}): a malformed key"))?;
    if keys != want {
        return Err(format!(
            "iterating [{start}, {end}) {}: keys {keys:?}, expected {want:?}",
            if backward { "backward" } else { "forward" }
        ));
    }
    for (key, (_, v)) in keys.iter().zip(&got) {
        check_value(shared, *key, Some(v), "iterator")?;
    }
    Ok(())
}

/// Puts a new value of `start` (when `start + 1 == end` and not `delete`), or deletes
/// `[start, end)`, in every column family in one batch.
fn write(
    shared: &Shared<'_>,
    db: &Db,
    cfs: &[ColumnFamily],
    start: u64,
    end: u64,
    delete: bool,
) -> Result<(), String> {
    let _g = shared.locks.lock(start..end);
    let a = shared.args;
    let mut batch = WriteBatch::new();
    let mut new = Vec::new();
    for key in start..end {
        let n = if delete {
            0
        } else {
            next_number(expect(shared, key))
        };
        shared.expected.set_pending(key, n);
        new.push((key, n));
    }
    for cf in cfs {
        if !delete {
            let (k, v) = (key_bytes(start), value_bytes(start, new[0].1, a.value_size));
            match a.ttl {
                Some(ttl) => {
                    let now = strata_engine::SystemClock.now_secs();
                    batch.put_until_cf(cf, k, v, now.saturating_add(ttl));
                }
                None => batch.put_cf(cf, k, v),
            }
        } else if end == start + 1 {
            batch.delete_cf(cf, key_bytes(start));
        } else {
            batch.delete_range_cf(cf, key_bytes(start), key_bytes(end));
        }
    }
    let opts = WriteOptions {
        sync: a.sync,
        ..Default::default()
    };
    db.write(batch, &opts)
        .map_err(|e| format!("write of keys [{start}, {end}): {e}"))?;
    for (key, n) in new {
        shared.expected.commit(key, n);
    }
    Ok(())
}

/// Closes and reopens the store `--reopen` times, spread over the run.
fn reopener(shared: &Shared<'_>) {
    let a = shared.args;
    let total = a.ops_per_thread * a.threads as u64;
    for i in 1..=u64::from(a.reopen) {
        let at = total * i / (u64::from(a.reopen) + 1);
        while shared.ops.load(Ordering::Relaxed) < at {
            if shared.failed.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut guard = shared.db.write().unwrap_or_else(|p| p.into_inner());
        if let Some((db, _)) = guard.take()
            && let Err(e) = db.close()
        {
            shared.fail(format!("closing for reopen: {e}"));
            return;
        }
        match open_db(a, shared.dir) {
            Ok(opened) => *guard = Some(opened),
            Err(e) => {
                shared.fail(format!("reopen: {e}"));
                return;
            }
        }
    }
}

/// The child's command line: ours without the driver's flags, with a new seed.
fn child_args(seed: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in std::env::args().skip(1) {
        if skip_value {
            skip_value = false;
            continue;
        }
        let name = arg.split('=').next().unwrap_or("");
        match name {
            "--crash_test" | "--until_killed" | "--verify_only" => continue,
            "--duration" | "--kill_interval" | "--seed" => {
                skip_value = !arg.contains('=');
                continue;
            }
            _ => out.push(arg),
        }
    }
    out.push("--until_killed".into());
    out.push("--seed".into());
    out.push(seed.to_string());
    out
}

/// The crash-test driver: start, SIGKILL, restart (which verifies), until `--duration` is up; a
/// final run verifies once more.
fn crash_test(dir: &Path, args: &StressArgs) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(args.duration);
    let mut rng = StdRng::seed_from_u64(args.seed.unwrap_or_else(rand::random));
    let (mut cycles, mut resolved) = (0u64, 0u64);
    while Instant::now() < deadline {
        let mut child = Command::new(&exe)
            .args(child_args(rng.random()))
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let run_for =
            Duration::from_millis(rng.random_range(500..=args.kill_interval.max(1) * 1000));
        let started = Instant::now();
        let mut exited = None;
        while started.elapsed() < run_for {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                exited = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if exited.is_none() {
            child.kill().map_err(|e| e.to_string())?; // SIGKILL
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        if let Some(status) = exited {
            return Err(format!(
                "cycle {cycles}: the stress run exited by itself ({status}) instead of being \
                 killed; its output:\n{text}"
            ));
        }
        if !text.contains("verified") {
            // Killed before it finished verifying: the next run verifies the same state.
            cycles += 1;
            continue;
        }
        resolved += text
            .lines()
            .find_map(|l| l.split('(').nth(1)?.split(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0);
        cycles += 1;
    }
    let out = Command::new(&exe)
        .args(child_args(0).into_iter().filter(|a| a != "--until_killed"))
        .arg("--verify_only")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "final verification failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    println!(
        "crash test on {}: {cycles} SIGKILL cycles in {} s, every restart verified {} keys in {} \
         column families ({resolved} in-flight writes resolved); final verification passed",
        dir.display(),
        args.duration,
        args.max_key,
        args.column_families
    );
    Ok(())
}
