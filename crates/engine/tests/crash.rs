//! Crash test: a child process writes with `sync = true` and prints each acknowledged write; the
//! parent SIGKILLs it at a random moment, reopens the store and checks that every acknowledged write
//! is there, that nothing unacknowledged forms a hole, and that each batch is all-or-nothing. Each
//! batch spans three column families that flush at different rates, so the kill finds them with
//! different amounts of the WAL flushed: recovery must still apply every batch whole or not at all.
//! Each batch also writes a `doomed` key and range-deletes the previous batch's one, so range
//! tombstones are recovered from the WAL and from tables alike. One column family keeps its values
//! in blob files, so synced values must survive in blob files a kill may leave unsealed.
//!
//! The child is this same test binary, re-run with `STRATA_CRASH_CHILD_DIR` set.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use strata_engine::{
    ColumnFamily, ColumnFamilyOptions, Db, Options, ReadOptions, WriteBatch, WriteOptions,
};

const CHILD_DIR: &str = "STRATA_CRASH_CHILD_DIR";
const CHILD_START: &str = "STRATA_CRASH_CHILD_START";
const KEYS_PER_BATCH: u64 = 3;

/// The column families a batch's keys go to, key `j` to `CFS[j]`.
const CFS: [&str; KEYS_PER_BATCH as usize] = ["default", "fast-flush", "slow-flush"];

fn options() -> Options {
    // Small buffers: the kill often lands during a flush or memtable switch.
    let mut o = Options::default();
    o.write_buffer_size = 64 << 10;
    o.create_missing_column_families = true;
    for (name, buffer) in [(CFS[1], 16 << 10), (CFS[2], 1 << 20)] {
        // The fast-flushing column family keeps its values in blob files (small ones, so many
        // files are sealed and begun while the kills land): synced values must survive there too.
        let blobs = name == CFS[1];
        let cf = ColumnFamilyOptions {
            write_buffer_size: buffer,
            enable_blob_files: blobs,
            min_blob_size: 16,
            blob_file_size: 32 << 10,
            ..Default::default()
        };
        o.column_families.insert(name.to_string(), cf);
    }
    o
}

fn handles(db: &Db) -> Vec<ColumnFamily> {
    CFS.iter().map(|n| db.cf(n).unwrap()).collect()
}

fn batch_keys(i: u64) -> impl Iterator<Item = (String, String)> {
    (0..KEYS_PER_BATCH).map(move |j| {
        (
            format!("batch{i:08}-{j}"),
            format!("value-{i}-{j}-{}", "x".repeat((i % 50) as usize)),
        )
    })
}

fn doomed(i: u64) -> String {
    format!("doomed{i:08}")
}

/// The child: writes batches forever, acknowledging each on stdout after `write` returns.
#[test]
#[cfg_attr(
    target_os = "wasi",
    ignore = "needs processes; the WASI host's own tests stop guests mid-write"
)]
fn crash_child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let start: u64 = std::env::var(CHILD_START).unwrap().parse().unwrap();
    let db = Db::open(&dir, options()).unwrap();
    let cfs = handles(&db);
    let stdout = std::io::stdout();
    for i in start.. {
        let mut b = WriteBatch::new();
        for ((k, v), cf) in batch_keys(i).zip(&cfs) {
            b.put_cf(cf, k, v);
        }
        b.put(doomed(i), "doomed");
        if i > 0 {
            b.delete_range(doomed(i - 1), doomed(i));
        }
        // Every few batches unsynced, to exercise the rule that a later synced write syncs them too.
        db.write(
            b,
            &WriteOptions {
                sync: i % 4 != 1,
                disable_wal: false,
                ..Default::default()
            },
        )
        .unwrap();
        let mut out = stdout.lock();
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
#[cfg_attr(
    target_os = "wasi",
    ignore = "needs processes; the WASI host's own tests stop guests mid-write"
)]
fn sigkill_loses_no_acknowledged_write() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rng();
    let mut next = 0u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut cycles = 0;
    while cycles < 8 && Instant::now() < deadline {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_START, next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("ack ") {
                    last = Some(n.parse::<u64>().unwrap());
                }
            }
            last
        });
        std::thread::sleep(Duration::from_millis(rng.random_range(100..600)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acked = reader.join().unwrap();

        let db = Db::open(dir.path(), options()).unwrap();
        let cfs = handles(&db);
        let mut present = 0u64;
        for i in 0.. {
            let values: Vec<_> = batch_keys(i)
                .zip(&cfs)
                .map(|((k, _), cf)| db.get_cf(cf, k).unwrap().map(|v| v.into_vec()))
                .collect();
            let found = values.iter().filter(|v| v.is_some()).count();
            assert!(
                found == 0 || found == KEYS_PER_BATCH as usize,
                "batch {i} is torn: {found} of {KEYS_PER_BATCH} keys"
            );
            if found == 0 {
                break;
            }
            for ((_, want), got) in batch_keys(i).zip(values) {
                assert_eq!(
                    got.unwrap(),
                    want.into_bytes(),
                    "batch {i} holds a wrong value"
                );
            }
            present = i + 1;
        }
        // Each surviving batch range-deleted the doomed key of the one before it.
        for i in present.saturating_sub(50)..present {
            let want_present = i + 1 == present;
            assert_eq!(
                db.get(doomed(i)).unwrap().is_some(),
                want_present,
                "cycle {cycles}: doomed key {i} of {present} batches"
            );
        }
        if let Some(a) = acked {
            assert!(
                present > a,
                "cycle {cycles}: batch {a} was acknowledged but only {present} batches survived"
            );
        }
        // Nothing after the surviving prefix, in any column family: no holes.
        for cf in &cfs {
            let mut it = db.iter_cf(&ReadOptions::default(), cf).unwrap();
            it.seek(format!("batch{present:08}").as_bytes());
            assert!(
                !(it.valid() && it.key().starts_with(b"batch")),
                "cycle {cycles}: data after the surviving prefix in {}",
                cf.name()
            );
        }
        db.close().unwrap();
        next = present;
        cycles += 1;
    }
    assert!(cycles >= 3, "ran only {cycles} crash cycles");
    assert!(next > 0, "the child never wrote anything");
    println!("crash test: {cycles} SIGKILL cycles, {next} batches survived and verified");
}
