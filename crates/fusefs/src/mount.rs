//! Mounting a [`StrataFs`]: the kernel options, in the foreground or on background threads.

use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

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
    invalidator: Invalidator,
    serving: Option<Arc<Serving>>,
}

impl Mounted {
    /// Tells the kernel about keys changed by other faces in this process.
    pub fn invalidator(&self) -> Invalidator {
        self.invalidator.clone()
    }

    /// Unmounts and waits for the serving threads to end.
    pub fn unmount(self) -> io::Result<()> {
        if let Some(serving) = &self.serving
            && let Err(e) = serving.close()
        {
            log::warn!(target: "strata::fs", "serving threads cannot stop polling /dev/fuse: {e}");
        }
        self.session.umount_and_join()
    }

    /// Waits until the filesystem is unmounted from outside (`strata umount`).
    pub fn join(self) -> io::Result<()> {
        self.session.join()
    }
}

/// Mounts `fs` at `mountpoint` and serves it on background threads until unmounted.
pub fn spawn(fs: StrataFs, mountpoint: &Path, c: &MountConfig) -> io::Result<Mounted> {
    let invalidator = fs.invalidator();
    let serving = fs.serving();
    let session = session(fs, mountpoint, c)?.spawn()?;
    invalidator.attach(session.notifier());
    Ok(Mounted {
        session,
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
