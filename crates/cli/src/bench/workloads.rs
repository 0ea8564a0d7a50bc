//! The workloads, timed and reported as db_bench prints them:
//! `name : X micros/op Y ops/sec; Z MB/s`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{BenchArgs, BenchEngine};

/// Keys are zero-padded decimal numbers of `--key_size` bytes, so they sort numerically.
pub fn make_key(n: u64, size: usize) -> Vec<u8> {
    // By hand rather than `format!`: key making is part of every measured operation.
    let digits = n.checked_ilog10().map_or(1, |d| d as usize + 1);
    let mut key = vec![b'0'; size.max(digits)];
    let mut rest = n;
    for b in key.iter_mut().rev().take(digits) {
        *b = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    key
}

/// Values come from a buffer that zstd compresses to about half, like db_bench's generator.
struct ValueSource {
    data: Vec<u8>,
}

impl ValueSource {
    /// A source for values of up to `value_size` bytes, each starting at a different offset.
    fn new(seed: u64, value_size: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let len = (1 << 20).max(value_size.saturating_mul(2));
        let mut data = Vec::with_capacity(len + 100);
        while data.len() < len {
            // 50 random bytes then 50 copies of one byte: compresses to roughly 50%.
            data.extend((0..50).map(|_| rng.random_range(b' '..=b'~')));
            let b = rng.random_range(b' '..=b'~');
            data.extend(std::iter::repeat_n(b, 50));
        }
        ValueSource { data }
    }

    fn value(&self, i: u64, size: usize) -> &[u8] {
        let size = size.min(self.data.len());
        let start = (i as usize).wrapping_mul(97) % (self.data.len() - size + 1);
        &self.data[start..start + size]
    }
}

enum Order {
    Sequential,
    Random,
}

struct Outcome {
    ops: u64,
    bytes: u64,
    found: Option<u64>,
}

/// Runs `per_thread(thread index, ops for it)` on `--threads` threads; returns the merged outcome
/// and the wall time.
fn parallel<F>(args: &BenchArgs, total: u64, per_thread: F) -> Result<(Outcome, f64), String>
where
    F: Fn(usize, u64, u64) -> Result<Outcome, String> + Sync,
{
    let threads = args.threads as u64;
    let start = Instant::now();
    let results: Vec<Result<Outcome, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let f = &per_thread;
                let begin = total * t / threads;
                let end = total * (t + 1) / threads;
                s.spawn(move || f(t as usize, begin, end))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a bench thread panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut merged = Outcome {
        ops: 0,
        bytes: 0,
        found: None,
    };
    for r in results {
        let r = r?;
        merged.ops += r.ops;
        merged.bytes += r.bytes;
        if let Some(f) = r.found {
            merged.found = Some(merged.found.unwrap_or(0) + f);
        }
    }
    Ok((merged, elapsed))
}

fn report(name: &str, out: &Outcome, elapsed: f64, threads: usize) -> String {
    let ops = out.ops.max(1);
    let micros = elapsed * 1e6 * threads as f64 / ops as f64;
    let rate = ops as f64 / elapsed;
    let mut line = format!("{name:<12} : {micros:11.3} micros/op {:.0} ops/sec;", rate);
    if out.bytes > 0 {
        line.push_str(&format!(
            " {:6.1} MB/s",
            out.bytes as f64 / 1048576.0 / elapsed
        ));
    }
    if let Some(found) = out.found {
        line.push_str(&format!(" ({found} of {} found)", out.ops));
    }
    line
}

/// Range deletions interleaved with a fill's writes, as db_bench's `--writes_per_range_tombstone`
/// and related flags ask.
struct RangeDeletions<'a> {
    args: &'a BenchArgs,
    /// Written so far, over every thread and fill workload.
    written: &'a AtomicU64,
}

impl RangeDeletions<'_> {
    /// After the `n`-th write of a thread (from 1): one range deletion of
    /// `--range_tombstone_width` keys from a random key, when one is due and the budget allows;
    /// as point deletions with `--expand_range_tombstones`.
    fn after_write(
        &self,
        n: u64,
        engine: &dyn BenchEngine,
        rng: &mut StdRng,
    ) -> Result<(), String> {
        let a = self.args;
        if a.writes_per_range_tombstone == 0
            || n <= a.writes_before_delete_range
            || !(n - a.writes_before_delete_range).is_multiple_of(a.writes_per_range_tombstone)
        {
            return Ok(());
        }
        if self.written.fetch_add(1, Ordering::Relaxed) >= a.max_num_range_tombstones {
            return Ok(());
        }
        let first = rng.random_range(0..a.num);
        let width = a.range_tombstone_width.max(1);
        if a.expand_range_tombstones {
            let keys: Vec<Vec<u8>> = (first..first + width)
                .map(|k| make_key(k, a.key_size))
                .collect();
            engine.delete(&keys)
        } else {
            engine.delete_range(
                &make_key(first, a.key_size),
                &make_key(first + width, a.key_size),
            )
        }
    }
}

fn fill(
    engine: &dyn BenchEngine,
    args: &BenchArgs,
    order: Order,
    range_deletions_written: &AtomicU64,
) -> Result<(Outcome, f64), String> {
    let values = ValueSource::new(args.seed, args.value_size);
    let deletions = RangeDeletions {
        args,
        written: range_deletions_written,
    };
    parallel(args, args.num, |t, begin, end| {
        let mut rng = StdRng::seed_from_u64(args.seed ^ ((t as u64 + 1) * 0x9e37));
        let mut bytes = 0;
        let per_batch = args.write_batch();
        let mut batch = Vec::with_capacity(per_batch as usize);
        for i in begin..end {
            let k = match order {
                Order::Sequential => i,
                Order::Random => rng.random_range(0..args.num),
            };
            let key = make_key(k, args.key_size);
            let value = values.value(i, args.value_size);
            bytes += (key.len() + value.len()) as u64;
            batch.push((key, value));
            if batch.len() as u64 == per_batch || i + 1 == end {
                engine.write(&batch)?;
                batch.clear();
            }
            deletions.after_write(i - begin + 1, engine, &mut rng)?;
        }
        Ok(Outcome {
            ops: end - begin,
            bytes,
            found: None,
        })
    })
}

/// `--threads` readers run readrandom while one more thread overwrites random keys until they
/// finish, as db_bench's readwhilewriting does; only the reads are reported.
fn read_while_writing(
    engine: &dyn BenchEngine,
    args: &BenchArgs,
    user_bytes: &AtomicU64,
) -> Result<(Outcome, f64), String> {
    let done = AtomicBool::new(false);
    let values = ValueSource::new(args.seed ^ 0xabc, args.value_size);
    std::thread::scope(|s| {
        let writer = s.spawn(|| -> Result<u64, String> {
            let mut rng = StdRng::seed_from_u64(args.seed ^ 0xdead);
            let started = Instant::now();
            let mut written = 0u64;
            while !done.load(Ordering::Relaxed) {
                let key = make_key(rng.random_range(0..args.num), args.key_size);
                user_bytes.fetch_add((key.len() + args.value_size) as u64, Ordering::Relaxed);
                engine.write(&[(key, values.value(written, args.value_size))])?;
                written += 1;
                if args.benchmark_write_rate_limit > 0 {
                    let due = std::time::Duration::from_secs_f64(
                        written as f64 / args.benchmark_write_rate_limit as f64,
                    );
                    if let Some(wait) = due.checked_sub(started.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
            }
            Ok(written)
        });
        let reads = run_reads(engine, args, false);
        done.store(true, Ordering::Relaxed);
        writer
            .join()
            .map_err(|_| "the writer thread panicked".to_string())??;
        reads
    })
}

/// readrandom (or, with `missing`, readmissing) on `--threads` threads.
fn run_reads(
    engine: &dyn BenchEngine,
    args: &BenchArgs,
    missing: bool,
) -> Result<(Outcome, f64), String> {
    parallel(args, args.reads(), |t, begin, end| {
        let mut rng = StdRng::seed_from_u64(args.seed ^ 0x5151 ^ t as u64);
        let (mut found, mut bytes) = (0, 0);
        for _ in begin..end {
            let mut key = make_key(rng.random_range(0..args.num), args.key_size);
            if missing {
                // Sorts right after an existing key, so the filter, not the key range, rejects it.
                key.push(b'.');
            }
            if let Some(len) = engine.get(&key)? {
                found += 1;
                bytes += (key.len() + len) as u64;
            }
        }
        Ok(Outcome {
            ops: end - begin,
            bytes,
            found: Some(found),
        })
    })
}

/// multireadrandom: batches of `--batch_size` keys (random, or strided from a random first key),
/// through the engine's MultiGet or, without `--multiread_batched`, a loop of gets.
fn run_multi_reads(engine: &dyn BenchEngine, args: &BenchArgs) -> Result<(Outcome, f64), String> {
    parallel(args, args.reads(), |t, begin, end| {
        let mut rng = StdRng::seed_from_u64(args.seed ^ 0x3131 ^ t as u64);
        let (mut found, mut bytes) = (0, 0);
        let span = args.multiread_stride * args.multiread_batch();
        let mut done = begin;
        while done < end {
            let n = args.multiread_batch().min(end - done);
            let keys: Vec<Vec<u8>> = if args.multiread_stride > 0 {
                let first = rng.random_range(0..args.num.saturating_sub(span).max(1));
                (0..n)
                    .map(|i| make_key(first + i * args.multiread_stride, args.key_size))
                    .collect()
            } else {
                (0..n)
                    .map(|_| make_key(rng.random_range(0..args.num), args.key_size))
                    .collect()
            };
            let lens = if args.multiread_batched {
                engine.multi_get(&keys)?
            } else {
                keys.iter()
                    .map(|k| engine.get(k))
                    .collect::<Result<Vec<_>, String>>()?
            };
            for (k, len) in keys.iter().zip(lens) {
                if let Some(len) = len {
                    found += 1;
                    bytes += (k.len() + len) as u64;
                }
            }
            done += n;
        }
        Ok(Outcome {
            ops: end - begin,
            bytes,
            found: Some(found),
        })
    })
}

/// Times one call of a single-shot workload (flush, compact, waitforcompaction).
fn once(op: impl FnOnce() -> Result<(), String>) -> Result<(Outcome, f64), String> {
    let start = Instant::now();
    op()?;
    let out = Outcome {
        ops: 1,
        bytes: 0,
        found: None,
    };
    Ok((out, start.elapsed().as_secs_f64()))
}

/// Bytes this process handed to write calls so far (Linux's `wchar`): WAL, tables, MANIFEST, logs
/// and the report itself, counted the same way whichever engine wrote them.
fn written_by_process() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|n| n.trim().parse().ok())
}

/// What the workloads of one `strata bench` run count together.
#[derive(Debug, Default)]
pub struct RunCounters {
    /// Key and value bytes every workload wrote, for write amplification.
    pub user_bytes: AtomicU64,
    /// Range deletions written (toward `--max_num_range_tombstones`).
    pub range_deletions: AtomicU64,
    /// The workload just run was `dropcache`: the next one is meant to read from the device.
    pub cold: AtomicBool,
}

/// Runs one named workload on the store in `dir` and returns its report line.
pub fn run(
    name: &str,
    engine: &dyn BenchEngine,
    dir: &Path,
    args: &BenchArgs,
    counters: &RunCounters,
) -> Result<String, String> {
    let user_bytes = &counters.user_bytes;
    let reads = args.reads();
    let cold = counters.cold.swap(name == "dropcache", Ordering::Relaxed);
    let (out, elapsed) = match name {
        "fillseq" | "fillrandom" | "overwrite" => {
            let order = if name == "fillseq" {
                Order::Sequential
            } else {
                Order::Random
            };
            let (out, elapsed) = fill(engine, args, order, &counters.range_deletions)?;
            user_bytes.fetch_add(out.bytes, Ordering::Relaxed);
            (out, elapsed)
        }
        "readrandom" | "readmissing" => run_reads(engine, args, name == "readmissing")?,
        "multireadrandom" => run_multi_reads(engine, args)?,
        "seekrandom" => parallel(args, reads, |t, begin, end| {
            let mut rng = StdRng::seed_from_u64(args.seed ^ 0x7777 ^ t as u64);
            let mut next = || make_key(rng.random_range(0..args.num), args.key_size);
            let found = engine.seek_random(end - begin, &mut next)?;
            Ok(Outcome {
                ops: end - begin,
                bytes: 0,
                found: Some(found),
            })
        })?,
        "readseq" => parallel(args, args.threads as u64, |_, _, _| {
            let (n, bytes) = engine.scan()?;
            Ok(Outcome {
                ops: n,
                bytes,
                found: None,
            })
        })?,
        "flush" => once(|| engine.flush())?,
        "waitforcompaction" => once(|| engine.wait_for_compaction())?,
        "compact" => once(|| engine.compact())?,
        "dropcache" => once(|| super::page_cache::drop_page_cache(dir).map(drop))?,
        "readwhilewriting" => read_while_writing(engine, args, user_bytes)?,
        "readrange" => return super::ranges::run(engine, dir, args, cold),
        "appendrandom" => return super::appends::run(engine, dir, args),
        "stats" => {
            let user = user_bytes.load(Ordering::Relaxed);
            let wamp = match engine.disk_bytes_written() {
                Some(disk) if user > 0 => format!(
                    "{:.2} ({} bytes to disk for {user} bytes of keys and values: WAL {}, \
                     flushes {}, compactions {}, blob files {})",
                    disk.total() as f64 / user as f64,
                    disk.total(),
                    disk.wal,
                    disk.flush,
                    disk.compaction,
                    disk.blob
                ),
                _ => "n/a".into(),
            };
            let os = match written_by_process() {
                Some(w) if user > 0 => format!(
                    "\nwritten by this process (write calls, /proc/self/io wchar): {w} bytes, {:.2} per byte of keys and values",
                    w as f64 / user as f64
                ),
                _ => String::new(),
            };
            return Ok(format!(
                "{}\nwrite amplification: {wamp}{os}",
                engine.stats()
            ));
        }
        other => return Err(format!("unknown benchmark {other}")),
    };
    Ok(report(name, &out, elapsed, args.threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_numerically_and_values_have_the_asked_size() {
        assert_eq!(make_key(42, 16), b"0000000000000042");
        assert!(make_key(9, 16) < make_key(10, 16));
        assert_eq!(make_key(0, 3), b"000");
        assert_eq!(
            make_key(123_456, 3),
            b"123456",
            "never truncated, as format! would not"
        );
        assert_eq!(make_key(u64::MAX, 0), u64::MAX.to_string().as_bytes());
        let v = ValueSource::new(1, 100);
        assert_eq!(v.value(12345, 100).len(), 100);
        assert_eq!(v.value(0, 4096).len(), 4096);
        // Values larger than the default buffer (a division by zero once).
        let big = 1_048_600;
        let v = ValueSource::new(1, big);
        for i in [0, 1, u64::MAX] {
            assert_eq!(v.value(i, big).len(), big);
        }
    }

    #[test]
    fn report_line_has_db_bench_shape() {
        let line = report(
            "fillseq",
            &Outcome {
                ops: 1000,
                bytes: 116_000,
                found: None,
            },
            0.5,
            1,
        );
        assert!(
            line.starts_with("fillseq      :     500.000 micros/op 2000 ops/sec;"),
            "{line}"
        );
        assert!(line.ends_with("MB/s"));
        let line = report(
            "readrandom",
            &Outcome {
                ops: 10,
                bytes: 0,
                found: Some(7),
            },
            1.0,
            1,
        );
        assert!(line.ends_with("(7 of 10 found)"), "{line}");
    }
}
