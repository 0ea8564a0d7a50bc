//! Mounting a [`StrataFs`]: the kernel options, in the foreground or on background threads.

use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use fuser::{BackgroundSession, Config, MountOption, Session, SessionACL};

use crate::fs::StrataFs;
use crate::invalidate::Invalidator;
use crate::serving::Serving;

/// How a filesystem is mounted.
#[derive(Debug, Clone)]
pub struct MountConfig {
    /// Threads answering the kernel (default: the core count, at least [`MIN_THREADS`]).
    pub threads: usize,
    /// Mount read-only in the kernel too.
    pub read_only: bool,
    /// Let users other than the one mounting in (needs `user_allow_other` in
    /// `/etc/fuse.conf` unless root).
    pub allow_other: bool,
    /// The mount's source, as `mount` and `df` show it and [`mount_source`] reads it back
    /// (no commas: it travels in the kernel's option string).
    pub source: String,
}

/// Threads a mount answers with at least, however few cores: the kernel sends requests no
/// caller waits for (`release`, `forget`, read-ahead) that occupy a thread while a caller's next
/// request queues behind them. Each costs a stack and a read buffer that grows to the largest
/// request seen (1 MiB writes). On 2 cores, fs-bench with 4 / 8 / 16 threads: create
/// 7.8-8.0k / 7.7-7.8k / 8.4k files/s, stat 44-55k / 51-57k / 56-57k/s, unlink 8.4-9.2k /
/// 14.9-16.7k / 16.6-18.0k/s.
pub const MIN_THREADS: usize = 16;

impl Default for MountConfig {
    fn default() -> Self {
        MountConfig {
            threads: std::thread::available_parallelism()
                .map_or(MIN_THREADS, |n| n.get().max(MIN_THREADS)),
            read_only: false,
            allow_other: false,
            source: "strata".into(),
        }
    }
}

/// Whether this machine can mount a FUSE filesystem: `Err` says what is missing.
pub fn check_fuse() -> Result<(), String> {
    if !Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse is missing: load the fuse module, or install fuse3".into());
    }
    match std::process::Command::new("fusermount3")
        .arg("--version")
        .output()
    {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("fusermount3 cannot run ({e}): install fuse3")),
    }
}

/// Whether the kernel lists `mnt` as a mount point.
pub fn is_mounted(mnt: &Path) -> bool {
    mount_entry(mnt).is_some()
}

/// The source of the mount at `mnt` ([`MountConfig::source`] for a Strata mount), if any.
pub fn mount_source(mnt: &Path) -> Option<String> {
    let line = mount_entry(mnt)?;
    let (_, after) = line.split_once(" - ")?;
    after.split(' ').nth(1).map(unescape_mountinfo)
}

/// The `/proc/self/mountinfo` line whose mount point is `mnt`; the last one when mounts stack.
fn mount_entry(mnt: &Path) -> Option<String> {
    let abs = std::fs::canonicalize(mnt).ok()?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = abs.to_string_lossy().into_owned();
    table
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(4).map(unescape_mountinfo).as_deref() == Some(want.as_str()))
        .map(str::to_string)
}

/// Undoes the kernel's octal escapes (`\040` for a space) in a mountinfo field.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn config(c: &MountConfig) -> Config {
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::FSName(c.source.clone()),
        MountOption::Subtype("strata".into()),
        // The kernel checks modes against the attributes the mount reports.
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
        if c.read_only {
            MountOption::RO
        } else {
            MountOption::RW
        },
    ];
    if c.allow_other {
        cfg.acl = SessionACL::All;
    }
    cfg.n_threads = Some(c.threads.max(1));
    // One descriptor for all threads, not a clone each: its flags are shared, so a burst makes
    // every thread's reads poll with one `fcntl` (crate::serving).
    cfg.clone_fd = false;
    cfg
}

/// Mounts `fs`, its serving threads not yet started.
fn session(fs: StrataFs, mountpoint: &Path, c: &MountConfig) -> io::Result<Session<StrataFs>> {
    let serving = fs.serving();
    let config = config(c);
    let session = Session::new(fs, mountpoint, &config)?;
    if let Some(serving) = serving {
        serving.attach(session.as_fd().try_clone_to_owned()?, c.threads.max(1));
    }
    Ok(session)
}

/// A filesystem mounted and served on background threads.
#[derive(Debug)]
pub struct Mounted {
    session: BackgroundSession,
    fs: StrataFs,
    mountpoint: PathBuf,
    invalidator: Invalidator,
    serving: Option<Arc<Serving>>,
}

/// How [`Mounted::stop`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Unmounted, and every serving thread has ended: the store may close.
    Unmounted,
    /// Told to force while these files were still open: their writes so far are stored and
    /// synced, but the mount lives on (detached) until they close or the process ends, so the
    /// store must not be closed; end the process instead.
    Forced { open: Vec<String> },
}

/// How often a stop waiting for open files looks again.
const STOP_POLL: Duration = Duration::from_millis(50);

impl Mounted {
    /// Tells the kernel about keys changed by other faces in this process.
    pub fn invalidator(&self) -> Invalidator {
        self.invalidator.clone()
    }

    /// Whether the serving threads have ended (the mount was unmounted from outside).
    pub fn ended(&self) -> bool {
        self.session.guard.is_finished()
    }

    /// Stops the mount without losing a write: stores every open file's writes (synced), then
    /// unmounts, lazily when files are still open (the mount leaves the namespace at once and
    /// serves its open files until they close), and waits for the serving threads to end. When
    /// `force` turns true meanwhile, stores the open files' writes again and returns
    /// [`Stopped::Forced`], naming them.
    pub fn stop(self, force: impl Fn() -> bool) -> io::Result<Stopped> {
        if let Err(e) = self.fs.store_open_files() {
            log::error!(target: "strata::fs", "storing open files before unmounting: {e}");
        }
        if let Some(serving) = &self.serving
            && let Err(e) = serving.close()
        {
            log::warn!(target: "strata::fs", "serving threads cannot stop polling /dev/fuse: {e}");
        }
        if !self.ended() {
            match unmount(&self.mountpoint, false) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    let open = self.fs.open_paths();
                    log::warn!(
                        target: "strata::fs",
                        "{} busy ({} files open: {}): unmounted lazily; the mount ends when they \
                         close (stop again to force)",
                        self.mountpoint.display(),
                        open.len(),
                        open.join(", ")
                    );
                    unmount(&self.mountpoint, true)?;
                }
                Err(e) => return Err(e),
            }
        }
        while !self.ended() {
            if force() {
                self.fs.store_open_files().map_err(io::Error::other)?;
                return Ok(Stopped::Forced {
                    open: self.fs.open_paths(),
                });
            }
            std::thread::sleep(STOP_POLL);
        }
        self.session.join()?;
        Ok(Stopped::Unmounted)
    }

    /// [`Mounted::stop`], waiting for open files however long they stay open.
    pub fn unmount(self) -> io::Result<()> {
        self.stop(|| false).map(|_| ())
    }

    /// Waits until the filesystem is unmounted from outside (`strata umount`).
    pub fn join(self) -> io::Result<()> {
        self.session.join()
    }
}

/// Unmounts the FUSE filesystem at `mnt` (`lazy`: detached now, ended when its last open file
/// closes): with `umount2` as root, else with `fusermount3`, as an unprivileged user must. A
/// mount still in use answers `EBUSY` unless lazy.
pub fn unmount(mnt: &Path, lazy: bool) -> io::Result<()> {
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } == 0 {
        let path =
            std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
        let flags = if lazy { libc::MNT_DETACH } else { 0 };
        // SAFETY: `path` is NUL-terminated and lives across the call.
        if unsafe { libc::umount2(path.as_ptr(), flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(());
    }
    let mut cmd = Command::new("fusermount3");
    cmd.arg(if lazy { "-uz" } else { "-u" }).arg(mnt);
    let out = cmd
        .output()
        .map_err(|e| io::Error::other(format!("cannot run fusermount3 (install fuse3): {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if why.contains("busy") {
        return Err(io::Error::from_raw_os_error(libc::EBUSY));
    }
    Err(io::Error::other(format!("fusermount3: {why}")))
}

/// Mounts `fs` at `mountpoint` and serves it on background threads until unmounted.
pub fn spawn(fs: StrataFs, mountpoint: &Path, c: &MountConfig) -> io::Result<Mounted> {
    let invalidator = fs.invalidator();
    let serving = fs.serving();
    let session = session(fs.clone(), mountpoint, c)?.spawn()?;
    invalidator.attach(session.notifier());
    Ok(Mounted {
        session,
        fs,
        mountpoint: mountpoint.to_path_buf(),
        invalidator,
        serving,
    })
}

/// Mounts `fs` at `mountpoint` and serves it on this thread until it is unmounted.
pub fn run(fs: StrataFs, mountpoint: &Path, c: &MountConfig) -> io::Result<()> {
    session(fs, mountpoint, c)?.run()
}

#[cfg(test)]
mod tests {
    use super::unescape_mountinfo;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mountinfo("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape_mountinfo("/x\\011y\\134z"), "/x\ty\\z");
        assert_eq!(unescape_mountinfo("strata:42"), "strata:42");
        // A backslash not followed by three octal digits stays as it is.
        assert_eq!(unescape_mountinfo("a\\9b\\"), "a\\9b\\");
    }
}
