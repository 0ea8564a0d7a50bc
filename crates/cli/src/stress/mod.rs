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

mod args;
mod crash;
mod expected;
mod worker;

pub use args::StressArgs;
use crash::crash_test;
use expected::{Expected, NONE, key_bytes, stored_number};
use worker::{reopener, worker};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};
use std::time::Instant;

use strata_engine::{ColumnFamily, ColumnFamilyOptions, Db, Options};

/// The state file cannot be trusted any more: stop at once.
fn fatal(msg: &str) -> ! {
    eprintln!("strata stress: {msg}");
    std::process::exit(2)
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
