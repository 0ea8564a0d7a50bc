//! `strata fs-bench`: the mount against a plain directory of the same file system, one workload
//! at a time, printed as `strata bench` lines.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_engine::{Db, Options};
use strata_fusefs::MountConfig;

#[derive(clap::Args, Debug)]
pub struct FsBenchArgs {
    /// Small files created, stat'ed, read, renamed and unlinked.
    #[arg(long, default_value_t = 10_000)]
    files: u64,
    /// Bytes written to each small file.
    #[arg(long, default_value_t = 4096)]
    file_size: usize,
    /// Files in the directory `ls -l` lists.
    #[arg(long, default_value_t = 100_000)]
    list_files: u64,
    /// Size of the large file written and read sequentially, in MiB.
    #[arg(long, default_value_t = 1024)]
    big_mib: u64,
    /// Files in the directory that is renamed.
    #[arg(long, default_value_t = 10_000)]
    dir_files: u64,
    /// Keys below one child of the directory listed by `ls-deep` (the store's side only): a
    /// listing steps over them with one seek.
    #[arg(long, default_value_t = 1_000_000)]
    deep_keys: u64,
    /// Threads answering the kernel (default: the core count, at least 16).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    awake: crate::mount::KeepAwakeArg,
    /// The plain directory compared with (default: DB.plain, on the same file system).
    #[arg(long)]
    plain: Option<PathBuf>,
}

/// One side of the comparison.
struct Side<'a> {
    name: &'static str,
    root: &'a Path,
}

fn io(what: &str, p: &Path) -> impl Fn(std::io::Error) -> String {
    let p = p.display().to_string();
    let what = what.to_string();
    move |e| format!("{what} {p}: {e}")
}

fn line(name: &str, side: &str, ops: u64, bytes: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let mut l = format!(
        "{:<20} : {:11.3} micros/op {:.0} ops/sec;",
        format!("{name}.{side}"),
        secs * 1e6 / ops.max(1) as f64,
        ops as f64 / secs
    );
    if bytes > 0 {
        l.push_str(&format!(" {:8.1} MB/s", bytes as f64 / 1e6 / secs));
    }
    l
}

pub fn run(db_dir: &Path, args: FsBenchArgs) -> Result<(), String> {
    crate::mount::tune_malloc();
    if db_dir.exists()
        && std::fs::read_dir(db_dir)
            .map_err(io("read", db_dir))?
            .next()
            .is_some()
    {
        return Err(format!(
            "{} is not empty: fs-bench needs a new store",
            db_dir.display()
        ));
    }
    let plain = args
        .plain
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.plain", db_dir.display())));
    let mnt = PathBuf::from(format!("{}.mnt", db_dir.display()));
    for d in [&plain, &mnt] {
        std::fs::create_dir_all(d).map_err(io("create", d))?;
    }
    let mut opts = Options::default();
    strata_fusefs::prepare_options(&mut opts, "default");
    let db = Arc::new(Db::open(db_dir, opts).map_err(|e| e.to_string())?);
    let fs = crate::mount::filesystem(&db, "default", false, args.awake.keep_cpus_awake())?;
    let mut config = MountConfig::default();
    if let Some(t) = args.threads {
        config.threads = t;
    }
    let mounted = strata_fusefs::spawn(fs, &mnt, &config)
        .map_err(|e| format!("cannot mount at {}: {e}", mnt.display()))?;
    println!(
        "fs-bench: {} files of {} bytes, ls -l of {}, {} MiB sequential, rename of a directory of {}",
        args.files, args.file_size, args.list_files, args.big_mib, args.dir_files
    );
    println!(
        "plain: {}; strata: {} on {}",
        plain.display(),
        mnt.display(),
        db_dir.display()
    );
    let sides = [
        Side {
            name: "plain",
            root: &plain,
        },
        Side {
            name: "strata",
            root: &mnt,
        },
    ];
    let result = workloads(&sides, &args).and_then(|()| deep_listing(&db, &mnt, &args));
    println!(
        "peak RSS of this process (mount included): {:.1} MiB",
        proc_status_kib("VmHWM:") as f64 / 1024.0
    );
    let unmounted = mounted.unmount().map_err(|e| format!("unmount: {e}"));
    db.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&plain);
    let _ = std::fs::remove_dir(&mnt);
    result.and(unmounted)
}

fn timed(f: impl FnOnce() -> Result<(), String>) -> Result<Duration, String> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
}

fn workloads(sides: &[Side<'_>], a: &FsBenchArgs) -> Result<(), String> {
    let payload: Vec<u8> = (0..a.file_size).map(|i| (i * 131 % 251) as u8).collect();
    let small = |root: &Path, i: u64| root.join("small").join(format!("f{i:07}"));
    for s in sides {
        std::fs::create_dir_all(s.root.join("small")).map_err(io("create", s.root))?;
        let t = timed(|| {
            for i in 0..a.files {
                let p = small(s.root, i);
                let mut f = std::fs::File::create(&p).map_err(io("create", &p))?;
                f.write_all(&payload).map_err(io("write", &p))?;
            }
            Ok(())
        })?;
        let bytes = a.files * a.file_size as u64;
        println!("{}", line("create", s.name, a.files, bytes, t));
    }
    // The first stat of a file just written asks the mount (the kernel's write path marks a
    // FUSE file's size and times stale); a second, within the mount's attribute TTL (a minute),
    // is answered from the kernel's cache, as for a file that was not written since.
    for name in ["stat", "restat"] {
        for s in sides {
            let t = timed(|| {
                for i in 0..a.files {
                    let p = small(s.root, i);
                    std::fs::symlink_metadata(&p).map_err(io("stat", &p))?;
                }
                Ok(())
            })?;
            println!("{}", line(name, s.name, a.files, 0, t));
        }
    }
    for s in sides {
        let mut buf = Vec::with_capacity(a.file_size);
        let t = timed(|| {
            for i in 0..a.files {
                let p = small(s.root, i);
                buf.clear();
                std::fs::File::open(&p)
                    .and_then(|mut f| f.read_to_end(&mut buf))
                    .map_err(io("read", &p))?;
                if buf != payload {
                    return Err(format!("{} read back wrong", p.display()));
                }
            }
            Ok(())
        })?;
        let bytes = a.files * a.file_size as u64;
        println!("{}", line("read", s.name, a.files, bytes, t));
    }
    for s in sides {
        let t = timed(|| {
            for i in 0..a.files {
                let (from, to) = (
                    small(s.root, i),
                    s.root.join("small").join(format!("g{i:07}")),
                );
                std::fs::rename(&from, &to).map_err(io("rename", &from))?;
            }
            Ok(())
        })?;
        println!("{}", line("rename", s.name, a.files, 0, t));
    }
    for s in sides {
        let t = timed(|| {
            for i in 0..a.files {
                let p = s.root.join("small").join(format!("g{i:07}"));
                std::fs::remove_file(&p).map_err(io("unlink", &p))?;
            }
            Ok(())
        })?;
        println!("{}", line("unlink", s.name, a.files, 0, t));
    }
    for s in sides {
        let dir = s.root.join("list");
        std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        for i in 0..a.list_files {
            let p = dir.join(format!("entry-{i:08}"));
            std::fs::write(&p, b"x").map_err(io("create", &p))?;
        }
    }
    for s in sides {
        let dir = s.root.join("list");
        let mut seen = 0u64;
        // What `ls -l` does: read the directory, then lstat every entry.
        let t = timed(|| {
            for e in std::fs::read_dir(&dir).map_err(io("list", &dir))? {
                let e = e.map_err(io("list", &dir))?;
                std::fs::symlink_metadata(e.path()).map_err(io("stat", &e.path()))?;
                seen += 1;
            }
            Ok(())
        })?;
        if seen != a.list_files {
            return Err(format!("ls -l of {} saw {seen} entries", dir.display()));
        }
        println!("{}", line("ls-l", s.name, seen, 0, t));
    }
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    for s in sides {
        let p = s.root.join("big.bin");
        let t = timed(|| {
            let mut f = std::fs::File::create(&p).map_err(io("create", &p))?;
            for _ in 0..a.big_mib {
                f.write_all(&chunk).map_err(io("write", &p))?;
            }
            drop(f);
            Ok(())
        })?;
        println!(
            "{}",
            line("write-seq", s.name, a.big_mib, a.big_mib << 20, t)
        );
    }
    for s in sides {
        let p = s.root.join("big.bin");
        let mut buf = vec![0u8; 1 << 20];
        let mut read_all = || -> Result<Duration, String> {
            timed(|| {
                let mut f = std::fs::File::open(&p).map_err(io("open", &p))?;
                let mut total = 0u64;
                loop {
                    let n = f.read(&mut buf).map_err(io("read", &p))?;
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
                if total != a.big_mib << 20 {
                    return Err(format!("{} read {total} bytes", p.display()));
                }
                Ok(())
            })
        };
        read_all()?;
        let t = read_all()?;
        println!(
            "{}",
            line("read-seq", s.name, a.big_mib, a.big_mib << 20, t)
        );
    }
    large_file(sides)?;
    for s in sides {
        let dir = s.root.join("tree");
        std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        for i in 0..a.dir_files {
            let p = dir.join(format!("f{i:07}"));
            std::fs::write(&p, &payload[..64.min(payload.len())]).map_err(io("create", &p))?;
        }
        let to = s.root.join("tree-renamed");
        let t = timed(|| std::fs::rename(&dir, &to).map_err(io("rename", &dir)))?;
        println!(
            "{} ({} files)",
            line("rename-dir", s.name, 1, 0, t),
            a.dir_files
        );
    }
    Ok(())
}

/// A figure of `/proc/self/status` in KiB (0 if absent).
fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes this process has caused to be written to storage so far (`write_bytes` of
/// `/proc/self/io`: pages dirtied, the mount's own threads included).
fn written_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("write_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Appends, concurrent appenders, random reads and a move on the large file the sequential
/// workloads left, each with the bytes the process wrote for it.
fn large_file(sides: &[Side<'_>]) -> Result<(), String> {
    const APPENDS: u64 = 1000;
    const READS: u64 = 10_000;
    let with_written = |l: String, written: u64| format!("{l} {:>10} bytes written", written);
    for s in sides {
        let p = s.root.join("big.bin");
        let before = written_bytes();
        let t = timed(|| {
            for _ in 0..APPENDS {
                // As `echo ... >> big.bin` does: open to append, write, close.
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&p)
                    .map_err(io("append", &p))?;
                f.write_all(&[b'a'; 100]).map_err(io("append", &p))?;
            }
            Ok(())
        })?;
        let l = line("append-100B", s.name, APPENDS, APPENDS * 100, t);
        println!("{}", with_written(l, written_bytes() - before));
    }
    for s in sides {
        let p = s.root.join("log");
        let t = timed(|| {
            std::thread::scope(|scope| {
                let appenders: Vec<_> = (0..2)
                    .map(|_| {
                        scope.spawn(|| -> Result<(), String> {
                            let mut f = std::fs::OpenOptions::new()
                                .create(true)
                                .append(true)
                                .open(&p)
                                .map_err(io("append", &p))?;
                            for _ in 0..APPENDS {
                                f.write_all(&[b'l'; 99]).map_err(io("append", &p))?;
                                f.write_all(b"\n").map_err(io("append", &p))?;
                            }
                            Ok(())
                        })
                    })
                    .collect();
                appenders
                    .into_iter()
                    .try_for_each(|h| h.join().map_err(|_| "an appender panicked".to_string())?)
            })
        })?;
        let len = std::fs::metadata(&p).map_err(io("stat", &p))?.len();
        if len != 2 * APPENDS * 100 {
            return Err(format!("{}: {len} bytes after two appenders", p.display()));
        }
        println!("{}", line("append-2fd", s.name, 2 * APPENDS, len, t));
    }
    for s in sides {
        let p = s.root.join("big.bin");
        let len = std::fs::metadata(&p).map_err(io("stat", &p))?.len();
        let f = std::fs::File::open(&p).map_err(io("open", &p))?;
        let mut buf = vec![0u8; 4096];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut read = || -> Result<(), String> {
            for _ in 0..READS {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % (len / 4096)) * 4096;
                std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, at)
                    .map_err(io("read", &p))?;
            }
            Ok(())
        };
        // The first pass fills the caches; the second is timed.
        read()?;
        let t = timed(read)?;
        println!("{}", line("randread-4K", s.name, READS, READS * 4096, t));
    }
    for s in sides {
        let (from, to) = (s.root.join("big.bin"), s.root.join("big.moved"));
        let before = written_bytes();
        let t = timed(|| std::fs::rename(&from, &to).map_err(io("rename", &from)))?;
        let written = written_bytes() - before;
        std::fs::rename(&to, &from).map_err(io("rename", &to))?;
        println!("{}", with_written(line("mv-big", s.name, 1, 0, t), written));
    }
    Ok(())
}

/// Lists a directory of 1000 files and one subdirectory, once with one key below that
/// subdirectory and once with `deep_keys`: the two should take the same time.
fn deep_listing(db: &Db, mnt: &Path, a: &FsBenchArgs) -> Result<(), String> {
    let cf = db.default_cf();
    for (name, below) in [("flat", 1), ("deep", a.deep_keys)] {
        let mut batch = strata_engine::WriteBatch::new();
        for i in 0..1000 {
            batch.put_cf(&cf, format!("{name}/f{i:04}"), b"x");
        }
        for i in 0..below {
            batch.put_cf(&cf, format!("{name}/child/{i:09}"), b"x");
            if batch.len() >= 100_000 {
                db.write(std::mem::take(&mut batch), &Default::default())
                    .map_err(|e| e.to_string())?;
            }
        }
        db.write(batch, &Default::default())
            .map_err(|e| e.to_string())?;
        let dir = mnt.join(name);
        let mut seen = 0u64;
        let rounds = 20;
        let t = timed(|| {
            for _ in 0..rounds {
                seen = std::fs::read_dir(&dir).map_err(io("list", &dir))?.count() as u64;
            }
            Ok(())
        })?;
        if seen != 1001 {
            return Err(format!("{} listed {seen} entries", dir.display()));
        }
        println!(
            "{} ({below} keys below one child)",
            line(&format!("ls-{name}"), "strata", rounds * seen, 0, t)
        );
    }
    Ok(())
}
