//! `readrange`: 4 KiB reads at random offsets (aligned to 4 KiB, then not) of one value of
//! --value_size bytes (GiBs work: it is written in steps, never held whole), each looking the key
//! up and then through one value reader, printed beside the same reads with `pread` on a plain
//! file of the same bytes in the store's directory. Put `dropcache` before it for cold reads.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{BenchArgs, BenchEngine};

const KEY: &[u8] = b"readrange/value";
const PEER: &str = "readrange-pread.bin";
const READ: u64 = 4096;
/// The line of reads through one value reader, the key looked up once (as an open file reads).
const READER: &str = "  reader";
const PREAD: &str = "  pread";

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

/// The report lines: the store's ranged reads (each looking the key up, then through one value
/// reader), then `pread`'s at the same offsets; first at
/// offsets aligned to 4 KiB (as fio's `randread` with `bs=4k` reads), then at any offset, where
/// a read spans two of the store's 4 KiB chunks and must read and verify both.
/// After `dropcache` (`cold`) the page cache lets go of the store's files and the plain file
/// again before each timed part, so that every part reads from the device.
pub fn run(
    engine: &dyn BenchEngine,
    dir: &Path,
    args: &BenchArgs,
    cold: bool,
) -> Result<String, String> {
    let len = args.value_size as u64;
    if len < READ {
        return Err(format!("readrange needs --value_size of at least {READ}"));
    }
    prepare(engine, dir, len)?;
    let peer = dir.join(PEER);
    let file = std::fs::File::open(&peer).map_err(|e| format!("{}: {e}", peer.display()))?;
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x4a4a);
    let mut report = Vec::new();
    for (what, align) in [("aligned", READ), ("unaligned", 1)] {
        let offsets: Vec<u64> = (0..args.reads())
            .map(|_| rng.random_range(0..=(len - READ) / align) * align)
            .collect();
        let drop_if_cold = || match cold {
            true => super::page_cache::drop_page_cache(dir).map(drop),
            false => Ok(()),
        };
        drop_if_cold()?;
        let looked_up = time(&offsets, |offset| {
            whole_read(engine.read_range(KEY, offset, READ)?, offset)
        })?;
        let reader = engine.range_reader(KEY)?;
        drop_if_cold()?;
        let pinned = time(&offsets, |offset| whole_read(reader(offset, READ)?, offset))?;
        let mut buf = vec![0u8; READ as usize];
        drop_if_cold()?;
        let pread = time(&offsets, |offset| {
            file.read_exact_at(&mut buf, offset)
                .map_err(|e| format!("{}: {e}", peer.display()))
        })?;
        let line = |name: &str, secs: f64| {
            let reads = offsets.len() as f64;
            let vs = match name {
                PREAD => String::new(),
                _ => format!(" ({:.2}x pread's time)", secs / pread),
            };
            format!(
                "{name:<12} : {:11.3} micros/op {:.0} ops/sec; {:6.1} MB/s (4 KiB at random {what} offsets of {len} bytes){vs}",
                secs * 1e6 / reads,
                reads / secs,
                reads * READ as f64 / 1048576.0 / secs
            )
        };
        report.push(line("readrange", looked_up));
        report.push(line(READER, pinned));
        report.push(line(PREAD, pread));
    }
    Ok(report.join("\n"))
}

/// A read of `n` bytes at `offset` that should have read all of [`READ`].
fn whole_read(n: usize, offset: u64) -> Result<(), String> {
    match n as u64 == READ {
        true => Ok(()),
        false => Err(format!("read {n} bytes at {offset}, not {READ}")),
    }
}

/// Seconds `read` takes at every offset, in order.
fn time(offsets: &[u64], mut read: impl FnMut(u64) -> Result<(), String>) -> Result<f64, String> {
    let started = Instant::now();
    for &offset in offsets {
        read(offset)?;
    }
    Ok(started.elapsed().as_secs_f64())
}
