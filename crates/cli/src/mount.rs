//! `strata mount` and `strata umount`: the store's column family as a FUSE filesystem.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_engine::{Db, Options};
use strata_fusefs::{FsConfig, MountConfig, StrataFs};

#[derive(clap::Args, Debug)]
pub struct MountArgs {
    /// An existing, empty directory to mount on.
    mountpoint: PathBuf,
    /// Refuse every change (EROFS); the store is opened read-only.
    #[arg(long)]
    read_only: bool,
    /// Stay in the foreground, logging to stderr, until unmounted or interrupted.
    #[arg(long)]
    foreground: bool,
    /// Threads answering the kernel (default: the core count, at least 16).
    #[arg(long)]
    threads: Option<usize>,
    /// Let other users in (needs user_allow_other in /etc/fuse.conf unless root).
    #[arg(long)]
    allow_other: bool,
    #[command(flatten)]
    awake: crate::mount::KeepAwakeArg,
}

/// `--no-keep-awake`, for every command that mounts.
#[derive(clap::Args, Debug)]
pub struct KeepAwakeArg {
    /// Let the mount's threads sleep and idle CPUs halt between requests. By default, while
    /// requests keep coming, one serving thread polls for the next request and (root only)
    /// the kernel is asked to idle CPUs by polling: waking a thread on a halted vCPU is what
    /// makes a FUSE round trip slow in a VM.
    #[arg(long)]
    no_keep_awake: bool,
}

impl KeepAwakeArg {
    /// `FsConfig::keep_cpus_awake`.
    pub fn keep_cpus_awake(&self) -> bool {
        !self.no_keep_awake
    }
}

/// How long a background mount may take to appear before `strata mount` gives up.
const MOUNT_WAIT: Duration = Duration::from_secs(30);

pub fn run(db_dir: &Path, cf: &str, args: MountArgs) -> Result<(), String> {
    strata_fusefs::check_fuse()?;
    check_mountpoint(&args.mountpoint)?;
    if args.foreground {
        return serve(db_dir, cf, &args);
    }
    // The same command in the foreground, detached from this terminal's process group; this
    // process returns once the kernel shows the mount, or reports why the child stopped.
    let exe = std::env::current_exe().map_err(|e| format!("cannot find strata itself: {e}"))?;
    if args.read_only {
        if !db_dir.is_dir() {
            return Err(format!("no store at {}", db_dir.display()));
        }
    } else {
        std::fs::create_dir_all(db_dir)
            .map_err(|e| format!("cannot create {}: {e}", db_dir.display()))?;
    }
    let log_path = db_dir.join("mount.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("cannot write {}: {e}", log_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--db")
        .arg(db_dir)
        .arg("--cf")
        .arg(cf)
        .arg("mount")
        .arg(&args.mountpoint)
        .arg("--foreground");
    if args.read_only {
        cmd.arg("--read-only");
    }
    if args.allow_other {
        cmd.arg("--allow-other");
    }
    if !args.awake.keep_cpus_awake() {
        cmd.arg("--no-keep-awake");
    }
    if let Some(t) = args.threads {
        cmd.arg("--threads").arg(t.to_string());
    }
    let mut child = {
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the mount process: {e}"))?
    };
    let started = Instant::now();
    while started.elapsed() < MOUNT_WAIT {
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(format!(
                "the mount process stopped ({status}): {}",
                log.trim()
            ));
        }
        if strata_fusefs::is_mounted(&args.mountpoint) {
            // Not `eprintln!`: with SIGPIPE ignored (a server's choice) a closed stderr would
            // panic after the mount succeeded.
            let _ = writeln!(
                std::io::stderr(),
                "mounted {} at {} (process {}, log {})",
                db_dir.display(),
                args.mountpoint.display(),
                child.id(),
                log_path.display()
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!(
        "{} did not appear as a mount within {MOUNT_WAIT:?} (log: {})",
        args.mountpoint.display(),
        log_path.display()
    ))
}

fn check_mountpoint(mnt: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(mnt).map_err(|e| format!("mount point {}: {e}", mnt.display()))?;
    if !meta.is_dir() {
        return Err(format!("mount point {} is not a directory", mnt.display()));
    }
    if strata_fusefs::is_mounted(mnt) {
        return Err(format!("{} is already a mount point", mnt.display()));
    }
    Ok(())
}

/// Malloc arenas a long-running door keeps: glibc gives each thread that allocates at once an
/// arena of its own (up to 8 per core), and each keeps the multi-MiB buffers its thread freed
/// (a file's write-back ranges, the batches they become). With the mount's 16 serving threads,
/// copying a 4 GiB file in peaked at 316 MiB of RSS with the default and at 135 MiB with two,
/// at the same speed.
const MALLOC_ARENAS: i32 = 2;

/// Allocations from this size on are mappings of their own, returned when freed. glibc raises
/// its threshold as large blocks are freed (up to 32 MiB); then each serving thread's 16 MiB
/// request buffer (fuser's, zeroed) came from an arena and was resident in full, 256 MiB for
/// 16 threads; mapped, only the pages a request touches are. Below it stay the 4 MiB
/// write-back ranges and batches, reused from the arenas rather than faulted in each time.
const MALLOC_MMAP_FROM: i32 = 8 << 20;

/// Free memory an arena keeps at its top rather than giving back at once: a few write-backs'
/// worth, so a busy mount does not shrink and regrow its heap at every flush.
const MALLOC_TRIM_FROM: i32 = 32 << 20;

/// Sets the allocator up for a long-running door ([`MALLOC_ARENAS`], [`MALLOC_MMAP_FROM`],
/// [`MALLOC_TRIM_FROM`]) before it starts its threads; `MALLOC_ARENA_MAX`,
/// `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` in the environment win.
pub fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    for (var, param, value) in [
        ("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, MALLOC_ARENAS),
        (
            "MALLOC_MMAP_THRESHOLD_",
            libc::M_MMAP_THRESHOLD,
            MALLOC_MMAP_FROM,
        ),
        (
            "MALLOC_TRIM_THRESHOLD_",
            libc::M_TRIM_THRESHOLD,
            MALLOC_TRIM_FROM,
        ),
    ] {
        if std::env::var_os(var).is_none() {
            // SAFETY: mallopt only sets a tunable of the allocator; it is called before the
            // door's threads start. Every test of `strata mount` and `strata serve` runs it.
            unsafe {
                libc::mallopt(param, value);
            }
        }
    }
}

/// Raises this process's soft limit on open descriptors to its hard limit: a replica beside
/// its writer holds every file of its live views open (doc/architecture.md, "Replicas"), and a
/// served store's descriptors follow its size. A limit that cannot be read or raised is left.
pub fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `limit`, which lives across the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads one rlimit from `limit`; raising the soft limit up to the hard
        // one needs no privilege. Every test of `strata serve` and `strata mount` runs it.
        unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Bytes of disk a served or mounted store holds back for deletions on a full disk.
const SERVED_DISK_RESERVE: u64 = 16 << 20;

/// How a served or mounted store opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    Write,
    ReadOnly,
    /// Read-only, following its writer at this interval (`Db::open_replica`).
    Replica(std::time::Duration),
}

/// Opens the store for a face that may mount `cf`: blob files for `cf`, and `listeners`.
pub fn open_store(
    db_dir: &Path,
    cf: &str,
    opening: Opening,
    listeners: Vec<Arc<dyn strata_engine::EventListener>>,
    max_held_deletion_bytes: u64,
) -> Result<Arc<Db>, String> {
    let read_only = opening != Opening::Write;
    let mut opts = Options {
        create_if_missing: !read_only,
        // A long-running store that fills its disk can still take deletions, and so shrink.
        reserved_disk_bytes: SERVED_DISK_RESERVE,
        max_held_deletion_bytes,
        ..crate::store::options(read_only)?
    };
    strata_fusefs::prepare_options(&mut opts, cf);
    opts.listeners = listeners;
    let opened = match opening {
        Opening::Write => Db::open(db_dir, opts),
        Opening::ReadOnly => Db::open_read_only(db_dir, opts),
        Opening::Replica(poll) => Db::open_replica(db_dir, opts, poll),
    };
    Ok(Arc::new(opened.map_err(|e| {
        format!("cannot open {}: {e}", db_dir.display())
    })?))
}

/// The filesystem over column family `cf` of an open store.
pub fn filesystem(
    db: &Arc<Db>,
    cf: &str,
    read_only: bool,
    keep_cpus_awake: bool,
) -> Result<StrataFs, String> {
    let config = FsConfig {
        column_family: cf.to_string(),
        read_only,
        keep_cpus_awake,
        ..FsConfig::default()
    };
    StrataFs::new(db.clone(), config).map_err(|e| e.to_string())
}

fn serve(db_dir: &Path, cf: &str, args: &MountArgs) -> Result<(), String> {
    tune_malloc();
    raise_open_file_limit();
    // Lines go out through a thread of their own until this returns; file names in them are
    // escaped as the API's keys are (`log_format`). fuser warns that its own unmount failed
    // when the mount was already gone, which is how every mount here ends (`strata umount`,
    // or `Mounted::stop` on a signal).
    let _log = crate::log_lines::init("info,fuser::mnt=error");
    let opening = match args.read_only {
        true => Opening::ReadOnly,
        false => Opening::Write,
    };
    // A mount makes no backups: nothing holds deletions back.
    let db = open_store(db_dir, cf, opening, Vec::new(), 0)?;
    let fs = filesystem(&db, cf, args.read_only, args.awake.keep_cpus_awake())?;
    let mut config = MountConfig {
        read_only: args.read_only,
        allow_other: args.allow_other,
        source: format!("{SOURCE_PREFIX}{}", std::process::id()),
        ..MountConfig::default()
    };
    if let Some(t) = args.threads {
        config.threads = t;
    }
    let stats = fs.stats();
    let session = strata_fusefs::spawn(fs, &args.mountpoint, &config)
        .map_err(|e| format!("cannot mount at {}: {e}", args.mountpoint.display()))?;
    log::info!(target: "strata::fs", "mounted at {}", args.mountpoint.display());
    let signals = Stops::watch()?;
    // Until a signal, or an unmount from outside (`strata umount`).
    while !session.ended() && !signals.asked() {}
    let joined = if session.ended() {
        session.join()
    } else {
        log::info!(target: "strata::fs", "stopping: storing open files, then unmounting");
        stop(session, &db, &signals)
    };
    signals.close();
    db.close().map_err(|e| format!("closing the store: {e}"))?;
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    log::info!(
        target: "strata::fs",
        "unmounted; store closed ({} batches written, {} hidden entries stepped over, {} errors, \
         {} bursts with CPUs kept awake)",
        count(&stats.writes),
        count(&stats.hidden_entries),
        count(&stats.errors),
        count(&stats.awake_bursts)
    );
    joined.map_err(|e| format!("the mount ended with an error: {e}"))
}

/// SIGINT and SIGTERM, counted: the first stops the mount, the next forces the stop.
pub struct Stops {
    rx: std::sync::mpsc::Receiver<()>,
    handle: signal_hook::iterator::Handle,
}

impl Stops {
    pub fn watch() -> Result<Stops, String> {
        let mut signals = signal_hook::iterator::Signals::new([
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
        ])
        .map_err(|e| format!("cannot watch signals: {e}"))?;
        let handle = signals.handle();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for _ in signals.forever() {
                if tx.send(()).is_err() {
                    break;
                }
            }
        });
        Ok(Stops { rx, handle })
    }

    /// Whether a signal came since the last call; waits a moment for one.
    pub fn asked(&self) -> bool {
        self.rx.recv_timeout(Duration::from_millis(100)).is_ok()
    }

    pub fn close(self) {
        self.handle.close();
    }
}

/// Stops `mounted` (`Mounted::stop`), forced by a further signal to `signals`; returns once
/// every serving thread has ended, so the store may close. A forced stop ends the process.
pub fn stop(mounted: strata_fusefs::Mounted, db: &Db, signals: &Stops) -> std::io::Result<()> {
    match mounted.stop(|| signals.asked())? {
        strata_fusefs::Stopped::Unmounted => Ok(()),
        strata_fusefs::Stopped::Forced { open } => forced_exit(db, &open),
    }
}

/// A stop forced while files were open: their writes are stored and synced, but the mount
/// still serves them, so the store is left open and the process ends (the kernel then fails
/// their further use with ENOTCONN).
fn forced_exit(db: &Db, open: &[String]) -> ! {
    log::warn!(
        target: "strata::fs",
        "forced while {} files were open ({}): their writes so far are stored",
        open.len(),
        open.join(", ")
    );
    if let Err(e) = db.sync_wal() {
        log::error!(target: "strata::fs", "syncing the store's log: {e}");
    }
    // `exit` runs no destructor: the lines still buffered go out first.
    crate::log_lines::flush_now();
    std::process::exit(1)
}

/// A `strata mount` process names itself in its mount's source, `strata:PID`, so that
/// `strata umount` knows whom to wait for.
const SOURCE_PREFIX: &str = "strata:";

/// How long `strata umount` waits for a mount process to close its store.
const CLOSE_WAIT: Duration = Duration::from_secs(300);

/// `fusermount3 -u`, as an unprivileged user unmounts a FUSE filesystem; then, for a
/// `strata mount` process, waits until it has closed the store and ended, so that whatever
/// runs next may open the store. (A `strata serve --mount` keeps its store and is not waited
/// for.)
pub fn unmount(mnt: &Path) -> Result<(), String> {
    let owner = strata_fusefs::mount_source(mnt)
        .and_then(|s| s.strip_prefix(SOURCE_PREFIX)?.parse::<u32>().ok())
        .filter(|&pid| pid != std::process::id());
    strata_fusefs::unmount(mnt, false)
        .map_err(|e| format!("cannot unmount {}: {e}", mnt.display()))?;
    let Some(pid) = owner else {
        return Ok(());
    };
    let started = Instant::now();
    let mut told = Duration::ZERO;
    while process_running(pid) {
        let waited = started.elapsed();
        if waited >= CLOSE_WAIT {
            return Err(format!(
                "unmounted {}, but its process {pid} has not closed the store after {:?}",
                mnt.display(),
                CLOSE_WAIT
            ));
        }
        if waited >= told + Duration::from_secs(5) {
            told = waited;
            eprintln!(
                "waiting for process {pid} to close the store ({}s)",
                waited.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Whether process `pid` exists and has not ended: a zombie, ended but not yet reaped by
/// its parent, has already released its files and locks.
fn process_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold any byte.
    let state = stat
        .rfind(')')
        .and_then(|end| stat.get(end + 1..))
        .and_then(|rest| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X") | None)
}

#[cfg(test)]
mod tests {
    use super::process_running;

    #[test]
    fn a_process_runs_until_it_ends_even_unreaped() {
        assert!(process_running(std::process::id()));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(process_running(child.id()));
        child.kill().unwrap();
        // Killed and not yet waited for: a zombie, which holds no locks any more.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_running(child.id()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the child never ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.wait().unwrap();
        assert!(!process_running(child.id()));
    }
}
