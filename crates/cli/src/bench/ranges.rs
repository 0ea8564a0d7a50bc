//! `readrange`: 4 KiB reads at random offsets of one value of --value_size bytes (GiBs work: it
//! is written in steps, never held whole), each printed beside the same reads with `pread` on a
//! plain file of the same bytes in the store's directory. Put `dropcache` before it for cold
//! reads of both.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{BenchArgs, BenchEngine};

const KEY: &[u8] = b"readrange/value";
const PEER: &str = "readrange-pread.bin";
const READ: u64 = 4096;

/// The value's byte at `offset`: the same for the store and the plain file.
fn fill(offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        let at = offset + i as u64;
        *b = (at.wrapping_mul(0x9e37_79b9) >> 24) as u8;
    }
}

/// Writes the value into the store and the plain file, unless both are there already.
fn prepare(engine: &dyn BenchEngine, dir: &Path, len: u64) -> Result<(), String> {
    let peer = dir.join(PEER);
    let have = std::fs::metadata(&peer).map(|m| m.len()).ok();
    if have == Some(len) && engine.read_range(KEY, 0, 0).is_ok() {
        return Ok(());
    }
    engine.put_streamed(KEY, len, &mut fill)?;
    let file = std::fs::File::create(&peer).map_err(|e| format!("{}: {e}", peer.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(buf.len() as u64) as usize;
        fill(at, &mut buf[..n]);
        file.write_all_at(&buf[..n], at)
            .map_err(|e| format!("{}: {e}", peer.display()))?;
        at += n as u64;
    }
    file.sync_all()
        .map_err(|e| format!("{}: {e}", peer.display()))
}

/// The report lines: the store's ranged reads, then `pread`'s, at the same offsets.
pub fn run(engine: &dyn BenchEngine, dir: &Path, args: &BenchArgs) -> Result<String, String> {
    let len = args.value_size as u64;
    if len < READ {
        return Err(format!("readrange needs --value_size of at least {READ}"));
    }
    prepare(engine, dir, len)?;
    let reads = args.reads();
    let offsets: Vec<u64> = {
        let mut rng = StdRng::seed_from_u64(args.seed ^ 0x4a4a);
        (0..reads)
            .map(|_| rng.random_range(0..=len - READ))
            .collect()
    };
    let started = Instant::now();
    for &offset in &offsets {
        let n = engine.read_range(KEY, offset, READ)?;
        if n as u64 != READ {
            return Err(format!("read {n} bytes at {offset}, not {READ}"));
        }
    }
    let strata = started.elapsed().as_secs_f64();
    let peer = dir.join(PEER);
    let file = std::fs::File::open(&peer).map_err(|e| format!("{}: {e}", peer.display()))?;
    let mut buf = vec![0u8; READ as usize];
    let started = Instant::now();
    for &offset in &offsets {
        file.read_exact_at(&mut buf, offset)
            .map_err(|e| format!("{}: {e}", peer.display()))?;
    }
    let pread = started.elapsed().as_secs_f64();
    let line = |name: &str, secs: f64| {
        format!(
            "{name:<12} : {:11.3} micros/op {:.0} ops/sec; {:6.1} MB/s (4 KiB at random offsets of {len} bytes)",
            secs * 1e6 / reads as f64,
            reads as f64 / secs,
            (reads * READ) as f64 / 1048576.0 / secs
        )
    };
    Ok(format!(
        "{} ({:.2}x pread's time)\n{}",
        line("readrange", strata),
        strata / pread,
        line("  pread", pread),
    ))
}
