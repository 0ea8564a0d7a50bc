//! `strata replica-bench --db s3://BUCKET/PREFIX`: a writer and a replica of one new store in
//! one process, each with its own working copy. First a burst (1 GiB unless told), then how long
//! the replica takes to show it, beside the floor (one poll), and a scan of it on each side;
//! then a steady load, with how long each sampled write took to become visible on the replica,
//! second by second, beside the floor (half a poll on average).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strata_engine::{Db, FileSystem, ReadOptions, WriteBatch, WriteOptions};

#[derive(clap::Args, Debug)]
pub struct ReplicaBenchArgs {
    /// MiB written in the burst.
    #[arg(long, default_value_t = 1024)]
    burst_mib: u64,
    /// Bytes of each value.
    #[arg(long, default_value_t = 4096)]
    value_size: usize,
    /// The steady load's rate, in MB per second.
    #[arg(long, default_value_t = 10.0)]
    load_mbps: f64,
    /// How long the steady load runs, in seconds.
    #[arg(long, default_value_t = 30)]
    load_secs: u64,
    /// How often the replica looks for new versions, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    poll_ms: u64,
}

/// Values per synced batch: at `bucket` durability each batch is one log record.
const BATCH: usize = 64;

pub fn run(cache_dir: &Path, args: &ReplicaBenchArgs) -> Result<(), String> {
    if !crate::store::is_bucket() {
        return Err("replica-bench runs on a store in a bucket (--db s3://BUCKET/PREFIX)".into());
    }
    let (fs, opts) = crate::store::bucket_options(false)?;
    let fresh = fs
        .list(fs.root())
        .map_err(|e| e.to_string())?
        .iter()
        .all(|n| n != "CURRENT");
    if !fresh {
        return Err(format!(
            "{} already holds a store: the benchmark starts from an empty one (pick a fresh \
             prefix)",
            crate::store::describe(cache_dir)
        ));
    }
    let writer = Db::open(
        cache_dir,
        strata_engine::Options {
            create_if_missing: true,
            ..opts
        },
    )
    .map_err(|e| format!("opening the writer: {e}"))?;
    writer
        .put_with(&synced(), b"replica-bench", b"start")
        .map_err(|e| e.to_string())?;
    let replica_dir = with_suffix(cache_dir, "@replica-bench");
    let (_, ropts) = crate::store::bucket_options_in(true, replica_dir.clone())?;
    let poll = Duration::from_millis(args.poll_ms.max(1));
    let replica = Arc::new(
        Db::open_replica(&replica_dir, ropts, poll)
            .map_err(|e| format!("opening the replica: {e}"))?,
    );
    println!(
        "writer in {}, replica in {}, polling every {} ms",
        cache_dir.display(),
        replica_dir.display(),
        args.poll_ms
    );
    burst(&writer, &replica, args, poll)?;
    cold_open(
        &with_suffix(cache_dir, "@replica-bench-cold"),
        writer.latest_sequence(),
        poll,
    )?;
    steady(&writer, &replica, args, poll)?;
    replica.close().map_err(|e| e.to_string())?;
    writer.close().map_err(|e| e.to_string())
}

fn synced() -> WriteOptions {
    WriteOptions {
        sync: true,
        ..WriteOptions::default()
    }
}

fn with_suffix(dir: &Path, suffix: &str) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn value(i: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; len];
    v[..8.min(len)].copy_from_slice(&i.to_le_bytes()[..8.min(len)]);
    v
}

/// The burst: written in synced batches, then the wait until the replica shows its last write.
fn burst(writer: &Db, replica: &Db, args: &ReplicaBenchArgs, poll: Duration) -> Result<(), String> {
    let values = (args.burst_mib << 20) / args.value_size.max(1) as u64;
    let started = Instant::now();
    let mut shown = Instant::now();
    let mut i = 0;
    while i < values {
        let mut batch = WriteBatch::new();
        for j in i..(i + BATCH as u64).min(values) {
            batch.put(format!("burst/{j:012}"), value(j, args.value_size));
        }
        writer.write(batch, &synced()).map_err(|e| e.to_string())?;
        i = (i + BATCH as u64).min(values);
        if shown.elapsed() > Duration::from_secs(1) {
            eprint!(
                "\rburst: {} of {} MiB",
                (i * args.value_size as u64) >> 20,
                args.burst_mib
            );
            shown = Instant::now();
        }
    }
    let wrote = started.elapsed();
    eprintln!();
    let last = writer.latest_sequence();
    let acked = Instant::now();
    replica
        .wait_for_sequence(last, Duration::from_secs(3600))
        .map_err(|e| format!("the replica never showed the burst: {e}"))?;
    let caught_up = acked.elapsed();
    let mb = (values * args.value_size as u64) as f64 / 1e6;
    println!(
        "burst.write         : {:9.3} s for {values} values, {mb:.1} MB ({:.1} MB/s)",
        wrote.as_secs_f64(),
        mb / wrote.as_secs_f64().max(1e-9)
    );
    println!(
        "burst.visible       : {:9.3} s from the last write's answer to the replica showing it (a reader that waits asks at once; one that does not waits up to a poll, {:.3} s, more)",
        caught_up.as_secs_f64(),
        poll.as_secs_f64()
    );
    for (side, db) in [("writer", writer), ("replica", replica)] {
        let started = Instant::now();
        let mut it = db
            .iter(&ReadOptions::default())
            .map_err(|e| e.to_string())?;
        it.seek(b"burst/");
        let mut n = 0u64;
        while it.valid() && it.key().starts_with(b"burst/") {
            n += 1;
            it.next();
        }
        it.status().map_err(|e| e.to_string())?;
        if n != values {
            return Err(format!(
                "the {side} scanned {n} of the burst's {values} values"
            ));
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "burst.scan.{side:<8} : {secs:9.3} s for {n} values ({:.1} MB/s)",
            mb / secs.max(1e-9)
        );
    }
    Ok(())
}

/// A replica opened after the burst from an empty working copy: how long until it shows the
/// burst's last write (tables are fetched when first read).
fn cold_open(dir: &Path, last: u64, poll: Duration) -> Result<(), String> {
    let started = Instant::now();
    let (_, opts) = crate::store::bucket_options_in(true, dir.to_path_buf())?;
    let cold = Db::open_replica(dir, opts, poll).map_err(|e| format!("opening a replica: {e}"))?;
    cold.wait_for_sequence(last, Duration::from_secs(3600))
        .map_err(|e| e.to_string())?;
    println!(
        "burst.cold-open     : {:9.3} s for a replica on an empty working copy to open and show the burst",
        started.elapsed().as_secs_f64()
    );
    cold.close().map_err(|e| e.to_string())
}

/// The steady load, and per second how long its writes took to show on the replica.
fn steady(
    writer: &Db,
    replica: &Arc<Db>,
    args: &ReplicaBenchArgs,
    poll: Duration,
) -> Result<(), String> {
    let batch_bytes = (BATCH * args.value_size) as f64;
    let every = Duration::from_secs_f64(batch_bytes / (args.load_mbps.max(0.01) * 1e6));
    let span = Duration::from_secs(args.load_secs);
    // Each write's sequence and answer time, for the watcher to time its arrival.
    let (tx, rx) = std::sync::mpsc::channel::<(u64, Instant)>();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (replica, done) = (replica.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seen: Vec<(Instant, Duration)> = Vec::new();
            let mut waiting: std::collections::VecDeque<(u64, Instant)> = Default::default();
            loop {
                waiting.extend(rx.try_iter());
                let at = replica.latest_sequence();
                while let Some(&(seq, acked)) = waiting.front() {
                    if seq > at {
                        break;
                    }
                    seen.push((acked, acked.elapsed()));
                    waiting.pop_front();
                }
                if done.load(Ordering::Acquire) && waiting.is_empty() {
                    return seen;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let started = Instant::now();
    let mut next = started;
    let mut i = 0u64;
    while started.elapsed() < span {
        let mut batch = WriteBatch::new();
        for _ in 0..BATCH {
            batch.put(
                format!("steady/{:012}", i % 100_000),
                value(i, args.value_size),
            );
            i += 1;
        }
        writer.write(batch, &synced()).map_err(|e| e.to_string())?;
        let _ = tx.send((writer.latest_sequence(), Instant::now()));
        next += every;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let wrote = started.elapsed();
    done.store(true, Ordering::Release);
    drop(tx);
    let seen = watcher
        .join()
        .map_err(|_| "the watcher thread panicked".to_string())?;
    let mb = (i * args.value_size as u64) as f64 / 1e6;
    println!(
        "steady.write        : {:9.3} s, {mb:.1} MB ({:.1} MB/s asked {:.1}), {} synced batches",
        wrote.as_secs_f64(),
        mb / wrote.as_secs_f64().max(1e-9),
        args.load_mbps,
        seen.len()
    );
    let mut all: Vec<f64> = seen.iter().map(|(_, d)| d.as_secs_f64()).collect();
    all.sort_by(f64::total_cmp);
    let pct = |p: usize| all.get((all.len() * p / 100).min(all.len().saturating_sub(1)));
    if let (Some(p50), Some(p99), Some(max)) = (pct(50), pct(99), all.last()) {
        println!(
            "steady.visible      : p50 {p50:.3} s, p99 {p99:.3} s, max {max:.3} s from a write's answer to the replica showing it (floor: half a poll, {:.3} s, on average)",
            poll.as_secs_f64() / 2.0
        );
    }
    // Second by second: the worst arrival, as a bar against the poll interval.
    let width = 40.0;
    let scale = poll.as_secs_f64() * 2.0;
    for second in 0..args.load_secs {
        let worst = seen
            .iter()
            .filter(|(at, _)| at.duration_since(started).as_secs() == second)
            .map(|(_, d)| d.as_secs_f64())
            .fold(0.0, f64::max);
        let bar = "#".repeat(((worst / scale).min(1.0) * width).round() as usize);
        println!("steady.lag t={second:>3}s  : {worst:6.3} s |{bar:<40}|");
    }
    Ok(())
}
