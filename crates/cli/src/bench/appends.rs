//! `appendrandom`: --appends appends of --append_size random bytes to one value of --value_size
//! bytes (GiBs work: it is written in steps), printed beside the same appends with `write` on a
//! plain file in the store's directory (each followed by `fdatasync` with --sync), with the
//! bytes the store wrote for them (WAL, blob files, tables), which must stay near the bytes
//! appended, not grow with the value.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

use super::{BenchArgs, BenchEngine};

const KEY: &[u8] = b"appendrandom/value";
const PEER: &str = "appendrandom-write.bin";

/// The report lines: the store's appends, then the plain file's.
pub fn run(engine: &dyn BenchEngine, dir: &Path, args: &BenchArgs) -> Result<String, String> {
    let (base, size, count) = (args.value_size as u64, args.append_size, args.appends);
    engine.put_streamed(KEY, base, &mut |at, buf| {
        buf.iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = ((at + i as u64) % 251) as u8)
    })?;
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0xa99e);
    let pieces: Vec<Vec<u8>> = (0..count)
        .map(|_| {
            let mut p = vec![0u8; size];
            rng.fill_bytes(&mut p);
            p
        })
        .collect();
    let before = engine.disk_bytes_written();
    let started = Instant::now();
    for p in &pieces {
        engine.append(KEY, p)?;
    }
    let strata = started.elapsed().as_secs_f64();
    let written = match (before, engine.disk_bytes_written()) {
        (Some(b), Some(a)) => format!(
            "; {:.1} MiB written by the store for {:.1} MiB appended",
            a.total().saturating_sub(b.total()) as f64 / 1048576.0,
            (count * size as u64) as f64 / 1048576.0
        ),
        _ => String::new(),
    };
    // The last append is where it belongs.
    let end = base + count * size as u64;
    if count > 0 && engine.read_range(KEY, end - size as u64, size as u64)? != size {
        return Err(format!("the value does not end at {end} bytes"));
    }
    let peer = dir.join(PEER);
    let bad = |e: std::io::Error| format!("{}: {e}", peer.display());
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&peer)
        .map_err(bad)?;
    file.set_len(base).map_err(bad)?;
    file.sync_all().map_err(bad)?;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&peer)
        .map_err(bad)?;
    let started = Instant::now();
    for p in &pieces {
        file.write_all(p).map_err(bad)?;
        if args.sync {
            file.sync_data().map_err(bad)?;
        }
    }
    let plain = started.elapsed().as_secs_f64();
    let line = |name: &str, secs: f64| {
        format!(
            "{name:<12} : {:11.3} micros/op {:.0} ops/sec ({count} appends of {size} bytes to {base} bytes{})",
            secs * 1e6 / count.max(1) as f64,
            count as f64 / secs,
            if args.sync { ", each synced" } else { "" }
        )
    };
    Ok(format!(
        "{}{written} ({:.2}x write's time)\n{}",
        line("appendrandom", strata),
        strata / plain,
        line("  write", plain),
    ))
}
