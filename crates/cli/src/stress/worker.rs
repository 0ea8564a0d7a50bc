//! The workers: a mix of operations, each read checked against the expected state.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::{Clock, ColumnFamily, Db, ReadOptions, Snapshot, WriteBatch, WriteOptions};

use super::expected::{NONE, key_bytes, stored_number, value_bytes};
use super::{Shared, open_db};

fn next_number(n: u32) -> u32 {
    match n.wrapping_add(1) {
        0 | NONE => 1,
        m => m,
    }
}

pub(super) fn worker(shared: &Shared<'_>, seed: u64) {
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
pub(super) fn write(
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
pub(super) fn reopener(shared: &Shared<'_>) {
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
