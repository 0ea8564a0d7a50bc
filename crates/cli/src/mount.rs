//! `strata mount` and `strata umount`: the store's column family as a FUSE filesystem.

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
            eprintln!(
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

/// Opens the store for a face that may mount `cf`: blob files for `cf`, and `listeners`.
pub fn open_store(
    db_dir: &Path,
    cf: &str,
    read_only: bool,
    listeners: Vec<Arc<dyn strata_engine::EventListener>>,
) -> Result<Arc<Db>, String> {
    let mut opts = Options {
        create_if_missing: !read_only,
        ..Options::default()
    };
    strata_fusefs::prepare_options(&mut opts, cf);
    opts.listeners = listeners;
    let opened = if read_only {
        Db::open_read_only(db_dir, opts)
    } else {
        Db::open(db_dir, opts)
    };
    Ok(Arc::new(opened.map_err(|e| {
        format!("cannot open {}: {e}", db_dir.display())
    })?))
}

/// The filesystem over column family `cf` of an open store.
pub fn filesystem(db: &Arc<Db>, cf: &str, read_only: bool) -> Result<StrataFs, String> {
    let config = FsConfig {
        column_family: cf.to_string(),
        read_only,
        ..FsConfig::default()
    };
    StrataFs::new(db.clone(), config).map_err(|e| e.to_string())
}

fn serve(db_dir: &Path, cf: &str, args: &MountArgs) -> Result<(), String> {
    init_logging();
    let db = open_store(db_dir, cf, args.read_only, Vec::new())?;
    let fs = filesystem(&db, cf, args.read_only)?;
    let mut config = MountConfig {
        read_only: args.read_only,
        allow_other: args.allow_other,
        ..MountConfig::default()
    };
    if let Some(t) = args.threads {
        config.threads = t;
    }
    let stats = fs.stats();
    let session = strata_fusefs::spawn(fs, &args.mountpoint, &config)
        .map_err(|e| format!("cannot mount at {}: {e}", args.mountpoint.display()))?;
    log::info!(target: "strata::fs", "mounted at {}", args.mountpoint.display());
    // SIGINT and SIGTERM unmount; the session then ends and the store closes cleanly.
    let mnt = args.mountpoint.clone();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(|e| format!("cannot watch signals: {e}"))?;
    let handle = signals.handle();
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = unmount(&mnt);
        }
    });
    let joined = session.join();
    handle.close();
    db.close().map_err(|e| format!("closing the store: {e}"))?;
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    log::info!(
        target: "strata::fs",
        "unmounted; store closed ({} batches written, {} hidden entries stepped over, {} errors)",
        count(&stats.writes),
        count(&stats.hidden_entries),
        count(&stats.errors)
    );
    joined.map_err(|e| format!("the mount ended with an error: {e}"))
}

fn init_logging() {
    let env = env_logger::Env::default().default_filter_or("info");
    let _ = env_logger::Builder::from_env(env).try_init();
}

/// `fusermount3 -u`, as an unprivileged user unmounts a FUSE filesystem.
pub fn unmount(mnt: &Path) -> Result<(), String> {
    let out = Command::new("fusermount3")
        .arg("-u")
        .arg(mnt)
        .output()
        .map_err(|e| format!("cannot run fusermount3 (install fuse3): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cannot unmount {}: {}",
            mnt.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
