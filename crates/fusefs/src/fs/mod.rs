//! [`StrataFs`]: the FUSE operations over a [`Store`], each answered from the store or turned
//! into one atomic write batch.

mod files;
mod kernel;
mod listing;
mod statfs;
mod tree;
mod xattr;

use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use parking_lot::{Mutex, RwLock};
use strata_engine::{
    Db, ErrorKind, MAX_VALUE_SIZE, PinnableValue, ReadOptions, ValueReader, WriteBatch,
};

use crate::awake::{BURST, CPU_LATENCY_DEVICE, KeepAwake};
use crate::error::{FsError, Result};
use crate::inodes::{InodeTable, is_orphan, orphan_key};
use crate::invalidate::Invalidator;
use crate::meta::{Kind, Meta};
use crate::path::{self, NameError, Position};
use crate::serving::{Answering, Serving};
use crate::store::{Entry, Store, meta_key};
use files::{AttrChange, OpenFiles};
use listing::{FIRST_COOKIE, OpenDir};

/// How long the kernel may keep an entry or its attributes without asking again. Every change
/// to the mounted column family goes through this process (the store is locked to it): the
/// mount's own changes update the kernel as they happen, and other doors in the process call
/// [`StrataFs::invalidator`]'s methods, which drop what the kernel cached at once. So a `stat`
/// or a path walk is answered from the kernel's caches, as on a local file system, and a long
/// time costs nothing in freshness. A value written with a TTL is kept no longer than it lives.
/// What changes without a write (a blob file evicted by its column family's FIFO limit) shows
/// after at most this long.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// How long the kernel keeps a directory that exists only because keys lie below it.
const IMPLIED_DIR_TTL: Duration = Duration::from_secs(1);

/// Bytes of writes an open file holds in memory before they go to the store.
pub const WRITE_BACK: u64 = 4 << 20;

/// Bytes of writes all open files together hold before each write goes to the store at once.
pub const WRITE_BACK_TOTAL: u64 = 64 << 20;

/// Stripes of [`StrataFs`]'s record locks: changes to different entries rarely wait on each
/// other.
const RECORD_STRIPES: usize = 64;

/// Counters a mount keeps; read with [`StrataFs::stats`].
#[derive(Debug, Default)]
pub struct FsStats {
    /// Keys a listing stepped over because they name no valid path (an empty, `.` or `..`
    /// component, a NUL, a component over 255 bytes) or lie below a file of the same name.
    pub hidden_entries: AtomicU64,
    /// Batches written.
    pub writes: AtomicU64,
    /// Bytes of writes open files hold, not yet in the store (at most about
    /// [`FsConfig::write_back_total`]).
    pub write_back_held: AtomicU64,
    /// Operations that failed for a reason other than the caller's (engine or I/O errors).
    pub errors: AtomicU64,
    /// Bursts of requests during which the mount kept CPUs awake
    /// ([`FsConfig::keep_cpus_awake`]).
    pub awake_bursts: AtomicU64,
    /// Times a serving thread, done with a request during a burst, parked because another
    /// thread was reading the device.
    pub serving_parks: AtomicU64,
}

/// Where a mount keeps its files and how it behaves.
#[derive(Debug, Clone)]
pub struct FsConfig {
    /// The data column family mounted (`default` unless given).
    pub column_family: String,
    /// Refuse every change with `EROFS`.
    pub read_only: bool,
    /// Owner of entries that carry no record (keys another face wrote).
    pub uid: u32,
    pub gid: u32,
    /// Bytes of writes an open file holds before they go to the store ([`WRITE_BACK`]).
    pub write_back: u64,
    /// Bytes of writes all open files hold together ([`WRITE_BACK_TOTAL`]): past it, a file's
    /// writes go to the store as they come, so however many files are open for writing, this
    /// bounds the mount's memory for them.
    pub write_back_total: u64,
    /// How long the kernel keeps entries and attributes ([`DEFAULT_TTL`]).
    pub ttl: Duration,
    /// During a burst of requests ([`BURST`]), take the wake-ups off each round trip: one
    /// serving thread polls `/dev/fuse` for the next request rather than sleeping until it
    /// comes, and (root only) the kernel is asked to idle CPUs by polling rather than halting
    /// (a 0 µs wake-up latency request on [`CPU_LATENCY_DEVICE`]). Where waking a thread on a
    /// halted CPU is slow (a VM that halts idle vCPUs at once), this nearly triples small-file
    /// creates, at the cost of a polling thread, and idle CPUs spinning, during the burst.
    pub keep_cpus_awake: bool,
}

impl Default for FsConfig {
    fn default() -> Self {
        // SAFETY: getuid and getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        FsConfig {
            column_family: "default".into(),
            read_only: false,
            uid,
            gid,
            write_back: WRITE_BACK,
            write_back_total: WRITE_BACK_TOTAL,
            ttl: DEFAULT_TTL,
            keep_cpus_awake: true,
        }
    }
}

/// A Strata column family as a filesystem: keys are paths, values are file contents. Cheap to
/// share: the mount serves one, and [`StrataFs::stopper`] hands out another view of the same
/// state, so that a shutdown can store every open file before it unmounts.
#[derive(Debug, Clone)]
pub struct StrataFs {
    core: Arc<FsCore>,
}

impl std::ops::Deref for StrataFs {
    type Target = FsCore;
    fn deref(&self) -> &FsCore {
        &self.core
    }
}

/// What a [`StrataFs`] is made of (reached through it; not nameable outside the crate).
#[derive(Debug)]
pub struct FsCore {
    store: Store,
    config: FsConfig,
    /// Times shown for entries without a record: the mount's start, stable while mounted.
    epoch: SystemTime,
    inodes: Arc<Mutex<InodeTable>>,
    /// The one the mount attaches its notifier to, so the filesystem can use it too.
    invalidator: Invalidator,
    /// Shared by every change that finds an inode's key and then reads or writes under it (a
    /// flush, a write's first load, setattr, xattrs); exclusive for changes to which key names
    /// which inode (create, unlink, rename). Without it a flush racing a rename wrote the file
    /// back under its old name. Taken before an open file's pending writes.
    tree: RwLock<()>,
    /// Serialise the read-modify-writes of one entry's record (setattr, xattrs, and a flush,
    /// which sets the times): without them a chmod racing a flush of the same file was lost.
    /// Striped by inode; taken after `tree` and after an open file's pending writes.
    records: [Mutex<()>; RECORD_STRIPES],
    /// Open descriptors and the files they share. Held only to find or change them, never
    /// across a store operation.
    files: Mutex<OpenFiles>,
    dirs: Mutex<HashMap<u64, Arc<Mutex<OpenDir>>>>,
    next_handle: AtomicU64,
    stats: Arc<FsStats>,
    awake: KeepAwake,
    /// `None` when the mount was told not to keep CPUs awake.
    serving: Option<Arc<Serving>>,
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        Kind::CharDevice => FileType::CharDevice,
        Kind::BlockDevice => FileType::BlockDevice,
    }
}

/// The mode of an entry without a record: 0755 for a directory, 0644 for anything else.
fn default_perm(kind: Kind) -> u16 {
    if kind == Kind::Dir { 0o755 } else { 0o644 }
}

fn name_error(e: NameError) -> FsError {
    match e {
        NameError::TooLong => FsError::posix(libc::ENAMETOOLONG, "name longer than 255 bytes"),
        NameError::Invalid => FsError::posix(libc::EINVAL, "not a valid file name"),
    }
}

/// A new entry: its attributes, generation and (when opened) descriptor.
type Made = (FileAttr, Generation, Option<u64>);

fn enoent(key: &[u8]) -> FsError {
    // An inode whose path is gone (unlinked or renamed over, and not open): the kernel looks
    // the name up again on ESTALE, and finds whatever is there now.
    if is_orphan(key) {
        return FsError::posix(libc::ESTALE, "the entry was replaced or removed");
    }
    FsError::posix(
        libc::ENOENT,
        format!("no entry {}", String::from_utf8_lossy(key)),
    )
}

fn resolve_time(t: TimeOrNow, now: SystemTime) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => now,
    }
}

impl StrataFs {
    /// A filesystem over column family `config.column_family` of `db` (created, with its
    /// metadata column family, if missing and writable).
    pub fn new(db: Arc<Db>, config: FsConfig) -> Result<StrataFs> {
        Ok(StrataFs {
            core: Arc::new(FsCore::new(db, config)?),
        })
    }
}

impl FsCore {
    fn new(db: Arc<Db>, config: FsConfig) -> Result<FsCore> {
        let store = Store::new(db, &config.column_family, config.read_only)?;
        if !config.read_only {
            // Files unlinked while open when the last mount stopped without closing them.
            store.reclaim_orphans()?;
        }
        let serving = config.keep_cpus_awake.then(Arc::<Serving>::default);
        let inodes = Arc::new(Mutex::new(InodeTable::default()));
        let awake = match &serving {
            Some(serving) => KeepAwake::new(CPU_LATENCY_DEVICE, BURST, serving.clone()),
            None => KeepAwake::off(),
        };
        Ok(FsCore {
            store,
            config,
            epoch: SystemTime::now(),
            inodes: inodes.clone(),
            invalidator: Invalidator::new(inodes),
            tree: RwLock::new(()),
            records: std::array::from_fn(|_| Mutex::new(())),
            files: Mutex::new(OpenFiles::default()),
            dirs: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            stats: Arc::new(FsStats::default()),
            awake,
            serving,
        })
    }

    /// Notes a request that a caller waits for, answered until the returned guard drops: the
    /// first of a burst keeps idle CPUs awake.
    fn busy(&self) -> Option<Answering<'_>> {
        if self.awake.busy() {
            self.stats.awake_bursts.fetch_add(1, Ordering::Relaxed);
        }
        self.serving
            .as_deref()
            .and_then(|s| s.request(&self.stats.serving_parks))
    }

    /// The serving threads' bookkeeping, which the mount attaches its device to; `None` when
    /// told not to keep CPUs awake.
    pub(crate) fn serving(&self) -> Option<Arc<Serving>> {
        self.serving.clone()
    }

    /// Held while the record of `ino` is read, changed and written back.
    fn record_lock(&self, ino: u64) -> parking_lot::MutexGuard<'_, ()> {
        self.records[ino as usize % RECORD_STRIPES].lock()
    }

    /// The mount's counters, shared: readable while the filesystem runs.
    pub fn stats(&self) -> Arc<FsStats> {
        self.stats.clone()
    }

    /// A handle other faces in this process use to tell the kernel which keys they changed.
    pub fn invalidator(&self) -> Invalidator {
        self.invalidator.clone()
    }

    /// Inodes the kernel holds now (the root among them): what the mount's memory follows.
    pub fn inodes_held(&self) -> usize {
        self.inodes.lock().len()
    }

    fn key_of(&self, ino: u64) -> Result<Vec<u8>> {
        self.inodes
            .lock()
            .key(ino)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| FsError::posix(libc::ESTALE, format!("inode {ino} is not known")))
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<Vec<u8>> {
        let dir = self.key_of(parent)?;
        path::child_key(&dir, name.as_bytes()).map_err(name_error)
    }

    fn attr(&self, ino: u64, e: &Entry) -> FileAttr {
        let (uid, gid) = (self.config.uid, self.config.gid);
        let m = e.meta.as_ref();
        let t = |f: fn(&Meta) -> SystemTime| m.map(f).unwrap_or(self.epoch);
        FileAttr {
            ino: INodeNo(ino),
            size: e.size,
            blocks: e.size.div_ceil(512),
            atime: t(|m| m.atime),
            mtime: t(|m| m.mtime),
            ctime: t(|m| m.ctime),
            crtime: t(|m| m.crtime),
            kind: file_type(e.kind),
            perm: m.map_or(default_perm(e.kind), |m| m.perm),
            nlink: if e.kind == Kind::Dir { 2 } else { 1 },
            uid: m.map_or(uid, |m| m.uid),
            gid: m.map_or(gid, |m| m.gid),
            rdev: m.map_or(0, |m| m.rdev),
            blksize: 4096,
            flags: 0,
        }
    }

    /// The entry at `key`, with an open writer's unflushed length.
    fn entry(&self, key: &[u8], ino: Option<u64>) -> Result<Entry> {
        let mut e = self.store.resolve(key)?.ok_or_else(|| enoent(key))?;
        if let Some(ino) = ino
            && e.kind == Kind::File
            && let Some(len) = self.unflushed_len(ino)
        {
            e.size = len;
        }
        Ok(e)
    }

    fn write(&self, what: &str, key: &[u8], batch: WriteBatch, sync: bool) -> Result<()> {
        self.store.write(batch, sync)?;
        self.wrote(what, key);
        Ok(())
    }

    /// Counts and logs a mutation of `key` the store took.
    fn wrote(&self, what: &str, key: &[u8]) {
        self.stats.writes.fetch_add(1, Ordering::Relaxed);
        log::info!(target: "strata::fs", "{what} {}", String::from_utf8_lossy(key));
    }

    fn check_writable(&self) -> Result<()> {
        self.store.check_writable()
    }

    fn new_handle(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// How long the kernel may keep `e` and its attributes: the mount's TTL, but never past
    /// the moment its value expires.
    fn ttl_of(&self, e: &Entry) -> Duration {
        // A directory no `mkdir` made exists while keys lie below it: when the last goes (an
        // unlink or rename here, a delete or an expiry elsewhere) nothing tells the kernel.
        if e.kind == Kind::Dir && e.meta.is_none() {
            return self.config.ttl.min(IMPLIED_DIR_TTL);
        }
        if e.expires == 0 {
            return self.config.ttl;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Duration::from_secs(e.expires)
            .saturating_sub(now)
            .min(self.config.ttl)
    }

    fn looked_up(&self, key: &[u8], e: &Entry) -> (FileAttr, Generation) {
        let ino = self.inodes.lock().lookup(key);
        (self.attr(ino, e), Generation(0))
    }

    /// The record of an entry that has none (a key another face wrote): the default mode, the
    /// mount's owner, and `time`.
    fn default_record(&self, kind: Kind, time: SystemTime) -> Meta {
        Meta::new(
            kind,
            default_perm(kind),
            self.config.uid,
            self.config.gid,
            time,
        )
    }

    /// An entry's record, or the defaults it shows with.
    fn record_of(&self, e: &Entry) -> Meta {
        e.meta
            .clone()
            .unwrap_or_else(|| self.default_record(e.kind, self.epoch))
    }

    /// A regular file's record for a write at `now`: its own, or new defaults.
    fn file_record(&self, key: &[u8], now: SystemTime) -> Result<Meta> {
        Ok(self
            .store
            .get_meta(key)?
            .filter(|m| m.kind == Kind::File)
            .unwrap_or_else(|| self.default_record(Kind::File, now)))
    }

    /// Logs a failure the store caused (not one the caller did) and counts it.
    fn failed(&self, op: &str, e: &FsError) -> Errno {
        if !e.is_expected() {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            log::error!(target: "strata::fs", "{op}: {e}");
        } else {
            log::debug!(target: "strata::fs", "{op}: {e}");
        }
        e.errno()
    }
}
