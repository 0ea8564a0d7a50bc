//! [`StrataFs`]: the FUSE operations over a [`Store`], each answered from the store or turned
//! into one atomic write batch.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;
use strata_engine::{Db, MAX_VALUE_SIZE, WriteBatch};

use crate::buffer::Buffer;
use crate::error::{FsError, Result};
use crate::inodes::InodeTable;
use crate::invalidate::Invalidator;
use crate::meta::{Kind, Meta};
use crate::path::{self, NameError, Position};
use crate::store::{Entry, Store, meta_key};

/// How long the kernel may keep an entry or its attributes without asking again. Every change
/// to the mounted column family goes through this process (the store is locked to it): the
/// mount's own changes update the kernel as they happen, and other faces in the process call
/// [`StrataFs::invalidator`]'s methods, so a longer time costs nothing in freshness. One second
/// bounds what a face that forgets to notify can leave stale.
pub const DEFAULT_TTL: Duration = Duration::from_secs(1);

/// Bytes an open file holds in memory before it spills to a temporary file.
pub const SPILL_AT: u64 = 64 << 20;

/// Counters a mount keeps; read with [`StrataFs::stats`].
#[derive(Debug, Default)]
pub struct FsStats {
    /// Keys a listing stepped over because they name no valid path (an empty, `.` or `..`
    /// component, a NUL, a component over 255 bytes) or lie below a file of the same name.
    pub hidden_entries: AtomicU64,
    /// Batches written.
    pub writes: AtomicU64,
    /// Operations that failed for a reason other than the caller's (engine or I/O errors).
    pub errors: AtomicU64,
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
    /// Bytes an open file buffers in memory before spilling to disk.
    pub spill_at: u64,
    /// How long the kernel keeps entries and attributes ([`DEFAULT_TTL`]).
    pub ttl: Duration,
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
            spill_at: SPILL_AT,
            ttl: DEFAULT_TTL,
        }
    }
}

#[derive(Debug)]
struct OpenFile {
    ino: u64,
    writable: bool,
    /// Loaded on first use; a writer's changes live here until flushed.
    buffer: Option<Buffer>,
    dirty: bool,
}

#[derive(Debug)]
struct OpenDir {
    key: Vec<u8>,
    /// The positions recent entries were listed at, by the offset handed to the kernel: it
    /// resumes after one of the last batch's entries.
    cookies: VecDeque<(u64, Position)>,
    next_cookie: u64,
}

/// Offsets 1 and 2 are `.` and `..`; listed children count from here.
const FIRST_COOKIE: u64 = 3;
/// Cookies kept per open directory: more than two replies' worth of entries.
const COOKIES_KEPT: usize = 4096;

/// A Strata column family as a filesystem: keys are paths, values are file contents.
#[derive(Debug)]
pub struct StrataFs {
    store: Store,
    config: FsConfig,
    /// Times shown for entries without a record: the mount's start, stable while mounted.
    epoch: SystemTime,
    inodes: Arc<Mutex<InodeTable>>,
    files: Mutex<HashMap<u64, Arc<Mutex<OpenFile>>>>,
    dirs: Mutex<HashMap<u64, Arc<Mutex<OpenDir>>>>,
    next_handle: AtomicU64,
    spill_dir: PathBuf,
    stats: Arc<FsStats>,
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

fn name_error(e: NameError) -> FsError {
    match e {
        NameError::TooLong => FsError::posix(libc::ENAMETOOLONG, "name longer than 255 bytes"),
        NameError::Invalid => FsError::posix(libc::EINVAL, "not a valid file name"),
    }
}

fn enoent(key: &[u8]) -> FsError {
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

/// A stable inode number for a listed entry the kernel does not hold yet (high bit set, so it
/// never equals an assigned one).
fn listing_ino(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h | (1 << 63)
}

impl StrataFs {
    /// A filesystem over column family `config.column_family` of `db` (created, with its
    /// metadata column family, if missing and writable).
    pub fn new(db: Arc<Db>, config: FsConfig) -> Result<StrataFs> {
        let spill_dir = db.path().to_path_buf();
        let store = Store::new(db, &config.column_family, config.read_only)?;
        Ok(StrataFs {
            store,
            config,
            epoch: SystemTime::now(),
            inodes: Arc::new(Mutex::new(InodeTable::default())),
            files: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            spill_dir,
            stats: Arc::new(FsStats::default()),
        })
    }

    /// The mount's counters, shared: readable while the filesystem runs.
    pub fn stats(&self) -> Arc<FsStats> {
        self.stats.clone()
    }

    /// A handle other faces in this process use to tell the kernel which keys they changed.
    pub fn invalidator(&self) -> Invalidator {
        Invalidator::new(self.inodes.clone())
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
        let default_perm = if e.kind == Kind::Dir { 0o755 } else { 0o644 };
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
            perm: m.map_or(default_perm, |m| m.perm),
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

    fn unflushed_len(&self, ino: u64) -> Option<u64> {
        let files: Vec<_> = self.files.lock().values().cloned().collect();
        files.iter().find_map(|f| {
            let f = f.lock();
            (f.ino == ino && f.dirty).then(|| f.buffer.as_ref().map_or(0, Buffer::len))
        })
    }

    fn write(&self, what: &str, key: &[u8], batch: WriteBatch, sync: bool) -> Result<()> {
        self.store.write(batch, sync)?;
        self.stats.writes.fetch_add(1, Ordering::Relaxed);
        log::info!(target: "strata::fs", "{what} {}", String::from_utf8_lossy(key));
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        if self.config.read_only {
            return Err(FsError::posix(libc::EROFS, "mounted read-only"));
        }
        Ok(())
    }

    fn new_handle(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    fn looked_up(&self, key: &[u8], e: &Entry) -> (FileAttr, Generation) {
        let ino = self.inodes.lock().lookup(key);
        (self.attr(ino, e), Generation(0))
    }

    /// Makes a new non-directory entry `name` in `parent` holding `meta` (and, for a file, no
    /// bytes yet).
    fn make(&self, parent: u64, name: &OsStr, meta: Meta) -> Result<(Vec<u8>, Entry)> {
        self.check_writable()?;
        let key = self.child(parent, name)?;
        if self.store.resolve(&key)?.is_some() {
            return Err(FsError::posix(libc::EEXIST, "exists"));
        }
        let mut batch = WriteBatch::new();
        if meta.kind == Kind::File {
            batch.put_cf(&self.store.data, &key, b"");
        }
        self.store.put_meta(&mut batch, &key, &meta);
        let what = match meta.kind {
            Kind::File => "create",
            Kind::Dir => "mkdir",
            Kind::Symlink => "symlink",
            _ => "mknod",
        };
        self.write(what, &key, batch, false)?;
        let size = meta.target.len() as u64;
        Ok((
            key,
            Entry {
                kind: meta.kind,
                size,
                meta: Some(meta),
            },
        ))
    }

    fn do_setattr(&self, ino: u64, fh: Option<u64>, change: AttrChange) -> Result<FileAttr> {
        let key = self.key_of(ino)?;
        let e = self.entry(&key, Some(ino))?;
        let now = SystemTime::now();
        if change.is_empty() {
            return Ok(self.attr(ino, &e));
        }
        self.check_writable()?;
        let mut meta = match e.meta.clone() {
            Some(m) => m,
            None if e.kind == Kind::Dir => Meta::new(
                Kind::Dir,
                0o755,
                self.config.uid,
                self.config.gid,
                self.epoch,
            ),
            None => Meta::new(e.kind, 0o644, self.config.uid, self.config.gid, self.epoch),
        };
        if let Some(mode) = change.mode {
            meta.perm = (mode & 0o7777) as u16;
        }
        if let Some(uid) = change.uid {
            meta.uid = uid;
        }
        if let Some(gid) = change.gid {
            meta.gid = gid;
        }
        if let Some(t) = change.atime {
            meta.atime = resolve_time(t, now);
        }
        if let Some(t) = change.mtime {
            meta.mtime = resolve_time(t, now);
        }
        meta.ctime = now;
        let mut batch = WriteBatch::new();
        if let Some(size) = change.size {
            if e.kind != Kind::File {
                return Err(FsError::posix(libc::EISDIR, "truncate of a non-file"));
            }
            if size > MAX_VALUE_SIZE {
                return Err(FsError::posix(libc::EFBIG, "past the largest value"));
            }
            if change.mtime.is_none() {
                meta.mtime = now;
            }
            let open = fh.and_then(|fh| self.files.lock().get(&fh).cloned());
            match open {
                Some(f) => {
                    // The writer's buffer takes it; the store sees it at flush.
                    let mut f = f.lock();
                    self.load(&key, &mut f)?;
                    if let Some(b) = f.buffer.as_mut() {
                        b.set_len(size).map_err(|e| FsError::io("truncate", e))?;
                    }
                    f.dirty = true;
                }
                None => {
                    let mut value = self.store.get_data(&key)?.unwrap_or_default();
                    value.resize(size as usize, 0);
                    batch.put_cf(&self.store.data, &key, &value);
                }
            }
        }
        self.store.put_meta(&mut batch, &key, &meta);
        self.write("setattr", &key, batch, false)?;
        let e = self.entry(&key, Some(ino))?;
        Ok(self.attr(ino, &e))
    }

    /// Fills an open file's buffer from the store, once.
    fn load(&self, key: &[u8], f: &mut OpenFile) -> Result<()> {
        if f.buffer.is_none() {
            let value = self.store.get_data(key)?.unwrap_or_default();
            f.buffer = Some(Buffer::Memory(value));
        }
        Ok(())
    }

    /// Writes an open file's changes to the store: its bytes and its record in one batch.
    fn commit(&self, f: &mut OpenFile, sync: bool) -> Result<()> {
        let key = match self.inodes.lock().key(f.ino) {
            Some(k) if !k.starts_with(b"\0") => k.to_vec(),
            // Unlinked while open: its writes go with it.
            _ => {
                f.dirty = false;
                return Ok(());
            }
        };
        if !f.dirty {
            if sync && !self.config.read_only {
                // Makes every earlier write durable: a synced write syncs the WAL before it.
                let mut batch = WriteBatch::new();
                let meta = self
                    .store
                    .file_meta(&key, self.owner(), SystemTime::now())?;
                self.store.put_meta(&mut batch, &key, &meta);
                self.write("fsync", &key, batch, true)?;
            }
            return Ok(());
        }
        let now = SystemTime::now();
        let mut meta = self.store.file_meta(&key, self.owner(), now)?;
        meta.mtime = now;
        meta.ctime = now;
        let mut batch = WriteBatch::new();
        {
            let Some(buffer) = f.buffer.as_ref() else {
                return Ok(());
            };
            let bytes = buffer
                .contents()
                .map_err(|e| FsError::io("spill file", e))?;
            batch.put_cf(&self.store.data, &key, &bytes);
        }
        self.store.put_meta(&mut batch, &key, &meta);
        self.write("write", &key, batch, sync)?;
        f.dirty = false;
        Ok(())
    }

    fn owner(&self) -> (u32, u32) {
        (self.config.uid, self.config.gid)
    }

    fn open_file(&self, ino: u64, flags: OpenFlags) -> Result<u64> {
        let key = self.key_of(ino)?;
        let e = self.entry(&key, Some(ino))?;
        if e.kind == Kind::Dir {
            return Err(FsError::posix(libc::EISDIR, "is a directory"));
        }
        let writable = flags.acc_mode() != OpenAccMode::O_RDONLY;
        if writable {
            self.check_writable()?;
        }
        let mut f = OpenFile {
            ino,
            writable,
            buffer: None,
            dirty: false,
        };
        if writable && flags.0 & libc::O_TRUNC != 0 {
            f.buffer = Some(Buffer::Memory(Vec::new()));
            f.dirty = true;
        }
        let fh = self.new_handle();
        self.files.lock().insert(fh, Arc::new(Mutex::new(f)));
        Ok(fh)
    }

    fn file(&self, fh: u64) -> Result<Arc<Mutex<OpenFile>>> {
        self.files
            .lock()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::posix(libc::EBADF, "unknown file handle"))
    }

    fn do_read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        let f = self.file(fh)?;
        let mut f = f.lock();
        if f.buffer.is_none() {
            let key = self.key_of(f.ino)?;
            self.load(&key, &mut f)?;
        }
        let Some(b) = f.buffer.as_ref() else {
            return Ok(Vec::new());
        };
        b.read(offset, size as usize)
            .map_err(|e| FsError::io("spill file", e))
    }

    fn do_write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32> {
        let f = self.file(fh)?;
        let mut f = f.lock();
        if !f.writable {
            return Err(FsError::posix(libc::EBADF, "not open for writing"));
        }
        if offset + data.len() as u64 > MAX_VALUE_SIZE {
            return Err(FsError::posix(libc::EFBIG, "past the largest value"));
        }
        if f.buffer.is_none() {
            let key = self.key_of(f.ino)?;
            self.load(&key, &mut f)?;
        }
        if let Some(b) = f.buffer.as_mut() {
            b.write(offset, data, self.config.spill_at, &self.spill_dir)
                .map_err(|e| FsError::io("spill file", e))?;
        }
        f.dirty = true;
        Ok(data.len() as u32)
    }

    fn flush_handle(&self, fh: u64, sync: bool) -> Result<()> {
        let f = self.file(fh)?;
        let mut f = f.lock();
        self.commit(&mut f, sync)
    }

    fn do_unlink(&self, parent: u64, name: &OsStr, dir: bool) -> Result<()> {
        self.check_writable()?;
        let key = self.child(parent, name)?;
        let e = self.store.resolve(&key)?.ok_or_else(|| enoent(&key))?;
        match (dir, e.kind == Kind::Dir) {
            (true, false) => return Err(FsError::posix(libc::ENOTDIR, "not a directory")),
            (false, true) => return Err(FsError::posix(libc::EISDIR, "is a directory")),
            (true, true) if self.store.dir_has_children(&key)? => {
                return Err(FsError::posix(libc::ENOTEMPTY, "directory not empty"));
            }
            _ => {}
        }
        let mut batch = WriteBatch::new();
        if dir {
            batch.delete_cf(&self.store.meta, meta_key(&key, Kind::Dir));
        } else {
            self.store.delete_entry(&mut batch, &key, e.kind);
        }
        self.write(if dir { "rmdir" } else { "unlink" }, &key, batch, false)?;
        self.inodes.lock().detach_subtree(&key);
        Ok(())
    }

    fn do_rename(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        flags: RenameFlags,
    ) -> Result<()> {
        self.check_writable()?;
        let from = self.child(parent, name)?;
        let to = self.child(new_parent, new_name)?;
        if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return Err(FsError::posix(
                libc::EINVAL,
                "RENAME_WHITEOUT is not supported",
            ));
        }
        let src = self.store.resolve(&from)?.ok_or_else(|| enoent(&from))?;
        if from == to {
            return Ok(());
        }
        if src.kind == Kind::Dir && path::is_within(&to, &from) {
            return Err(FsError::posix(
                libc::EINVAL,
                "a directory cannot move into itself",
            ));
        }
        let dst = self.store.resolve(&to)?;
        let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
        if let Some(d) = &dst {
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                return Err(FsError::posix(libc::EEXIST, "target exists"));
            }
            if !exchange {
                match (src.kind == Kind::Dir, d.kind == Kind::Dir) {
                    (true, false) => return Err(FsError::posix(libc::ENOTDIR, "not a directory")),
                    (false, true) => return Err(FsError::posix(libc::EISDIR, "is a directory")),
                    (true, true) if self.store.dir_has_children(&to)? => {
                        return Err(FsError::posix(libc::ENOTEMPTY, "target not empty"));
                    }
                    _ => {}
                }
            }
        } else if exchange {
            return Err(enoent(&to));
        }
        if exchange
            && let Some(d) = &dst
            && d.kind == Kind::Dir
            && path::is_within(&from, &to)
        {
            return Err(FsError::posix(
                libc::EINVAL,
                "a directory cannot move into itself",
            ));
        }
        let mut batch = WriteBatch::new();
        let moving = self.store.collect(&from, src.kind)?;
        let coming = match (&dst, exchange) {
            (Some(d), true) => Some(self.store.collect(&to, d.kind)?),
            _ => None,
        };
        self.store.delete_entry(&mut batch, &from, src.kind);
        if let Some(d) = &dst {
            self.store.delete_entry(&mut batch, &to, d.kind);
            if d.kind == Kind::Dir {
                batch.delete_cf(&self.store.meta, meta_key(&to, Kind::Dir));
            }
        }
        if src.kind == Kind::Dir {
            batch.delete_cf(&self.store.meta, meta_key(&from, Kind::Dir));
        }
        let mut put = |m: &crate::store::Moved, a: &[u8], b: &[u8]| {
            for (k, v) in &m.data {
                batch.put_cf(&self.store.data, path::rebase(k, a, b), v);
            }
            for (k, v) in &m.meta {
                batch.put_cf(&self.store.meta, path::rebase(k, a, b), v);
            }
        };
        put(&moving, &from, &to);
        if let Some(c) = &coming {
            put(c, &to, &from);
        }
        // A directory made by mkdir carries its record along; an implied one needs none.
        self.write(
            if exchange { "exchange" } else { "rename" },
            &from,
            batch,
            false,
        )?;
        let mut inodes = self.inodes.lock();
        if exchange {
            inodes.exchange(&from, &to);
        } else {
            inodes.rename(&from, &to);
        }
        Ok(())
    }

    fn do_readdir(&self, ino: u64, fh: u64, offset: u64, reply: &mut ReplyDirectory) -> Result<()> {
        let d = self
            .dirs
            .lock()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::posix(libc::EBADF, "unknown directory handle"))?;
        let mut d = d.lock();
        if offset < 1 && reply.add(INodeNo(ino), 1, FileType::Directory, ".") {
            return Ok(());
        }
        if offset < 2 && reply.add(INodeNo(ino), 2, FileType::Directory, "..") {
            return Ok(());
        }
        let mut after = if offset < FIRST_COOKIE {
            None
        } else {
            let found = d.cookies.iter().find(|(c, _)| *c == offset);
            match found {
                Some((_, pos)) => Some(pos.clone()),
                None => {
                    return Err(FsError::posix(libc::EINVAL, "stale directory offset"));
                }
            }
        };
        let mut cursor = self.store.cursor(&d.key)?;
        let mut hidden = 0;
        let result = loop {
            let next = self
                .store
                .next_child(&mut cursor, after.as_ref(), &mut hidden);
            let (pos, kind) = match next {
                Ok(Some(c)) => c,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let key = [&path::dir_prefix(&d.key)[..], pos.name()].concat();
            let child_ino = self
                .inodes
                .lock()
                .peek(&key)
                .unwrap_or_else(|| listing_ino(&key));
            let cookie = d.next_cookie;
            let name = OsStr::from_bytes(pos.name());
            if reply.add(INodeNo(child_ino), cookie, file_type(kind), name) {
                break Ok(());
            }
            d.next_cookie += 1;
            d.cookies.push_back((cookie, pos.clone()));
            if d.cookies.len() > COOKIES_KEPT {
                d.cookies.pop_front();
            }
            after = Some(pos);
        };
        self.stats
            .hidden_entries
            .fetch_add(hidden, Ordering::Relaxed);
        result
    }

    fn do_statfs(&self) -> Result<(u64, u64, u64, u64, u64)> {
        let path = std::ffi::CString::new(self.store.db.path().as_os_str().as_bytes())
            .map_err(|_| FsError::posix(libc::EINVAL, "store path holds NUL"))?;
        let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: `path` is NUL-terminated and `s` is valid for one statvfs to be written.
        let rc = unsafe { libc::statvfs(path.as_ptr(), s.as_mut_ptr()) };
        if rc != 0 {
            return Err(FsError::io("statvfs", std::io::Error::last_os_error()));
        }
        // SAFETY: statvfs returned 0, so it filled the struct.
        let s = unsafe { s.assume_init() };
        let frsize = s.f_frsize.max(1);
        let props = self.store.db.properties_cf(&self.store.data)?;
        let used = (props.total_sst_bytes
            + props.blobs.blob_file_bytes
            + props.memtable_bytes
            + props.immutable_memtable_bytes)
            / frsize;
        let free = s.f_bavail;
        let keys = props.estimate_num_keys;
        Ok((used + free, free, keys, u64::from(u32::MAX), frsize))
    }

    fn meta_for_xattr(&self, ino: u64) -> Result<(Vec<u8>, Entry, Meta)> {
        let key = self.key_of(ino)?;
        let e = self.entry(&key, Some(ino))?;
        let meta = e.meta.clone().unwrap_or_else(|| {
            let perm = if e.kind == Kind::Dir { 0o755 } else { 0o644 };
            Meta::new(e.kind, perm, self.config.uid, self.config.gid, self.epoch)
        });
        Ok((key, e, meta))
    }

    fn do_setxattr(&self, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> Result<()> {
        check_user_xattr(name)?;
        self.check_writable()?;
        let (key, _, mut meta) = self.meta_for_xattr(ino)?;
        let exists = meta.xattr(name.as_bytes()).is_some();
        if flags & libc::XATTR_CREATE != 0 && exists {
            return Err(FsError::posix(libc::EEXIST, "attribute exists"));
        }
        if flags & libc::XATTR_REPLACE != 0 && !exists {
            return Err(FsError::posix(libc::ENODATA, "no such attribute"));
        }
        meta.set_xattr(name.as_bytes(), value);
        meta.ctime = SystemTime::now();
        let mut batch = WriteBatch::new();
        self.store.put_meta(&mut batch, &key, &meta);
        self.write("setxattr", &key, batch, false)
    }

    fn do_removexattr(&self, ino: u64, name: &OsStr) -> Result<()> {
        check_user_xattr(name)?;
        self.check_writable()?;
        let (key, _, mut meta) = self.meta_for_xattr(ino)?;
        if !meta.remove_xattr(name.as_bytes()) {
            return Err(FsError::posix(libc::ENODATA, "no such attribute"));
        }
        let mut batch = WriteBatch::new();
        self.store.put_meta(&mut batch, &key, &meta);
        self.write("removexattr", &key, batch, false)
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

/// Only `user.*` attributes are stored; the kernel keeps the others' meaning.
fn check_user_xattr(name: &OsStr) -> Result<()> {
    if name.as_bytes().starts_with(b"user.") {
        Ok(())
    } else {
        Err(FsError::posix(
            libc::EOPNOTSUPP,
            "only user.* attributes are stored",
        ))
    }
}

/// What a `setattr` changes.
#[derive(Debug, Default)]
struct AttrChange {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

impl AttrChange {
    fn is_empty(&self) -> bool {
        self.mode.is_none()
            && self.uid.is_none()
            && self.gid.is_none()
            && self.size.is_none()
            && self.atime.is_none()
            && self.mtime.is_none()
    }
}

fn xattr_reply(reply: ReplyXattr, data: &[u8], size: u32) {
    if size == 0 {
        reply.size(data.len() as u32);
    } else if data.len() > size as usize {
        reply.error(Errno::from_i32(libc::ERANGE));
    } else {
        reply.data(data);
    }
}

impl Filesystem for StrataFs {
    fn init(&mut self, _req: &Request, _config: &mut KernelConfig) -> std::io::Result<()> {
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self.child(parent.0, name).and_then(|key| {
            let e = self.entry(&key, None)?;
            Ok(self.looked_up(&key, &e))
        });
        match r {
            Ok((attr, generation)) => reply.entry(&self.config.ttl, &attr, generation),
            Err(e) => reply.error(self.failed("lookup", &e)),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.inodes.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let r = self
            .key_of(ino.0)
            .and_then(|key| self.entry(&key, Some(ino.0)));
        match r {
            Ok(e) => reply.attr(&self.config.ttl, &self.attr(ino.0, &e)),
            Err(e) => reply.error(self.failed("getattr", &e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let change = AttrChange {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.do_setattr(ino.0, fh.map(|f| f.0), change) {
            Ok(attr) => reply.attr(&self.config.ttl, &attr),
            Err(e) => reply.error(self.failed("setattr", &e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = self.key_of(ino.0).and_then(|key| {
            let e = self.entry(&key, None)?;
            match e.meta {
                Some(m) if m.kind == Kind::Symlink => Ok(m.target),
                _ => Err(FsError::posix(libc::EINVAL, "not a symlink")),
            }
        });
        match r {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(self.failed("readlink", &e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = match Kind::from_mode(mode) {
            None | Some(Kind::Dir) | Some(Kind::Symlink) => {
                Err(FsError::posix(libc::EINVAL, "mknod of this kind"))
            }
            Some(kind) => {
                let mut meta = Meta::new(
                    kind,
                    (mode & !umask) as u16,
                    req.uid(),
                    req.gid(),
                    SystemTime::now(),
                );
                meta.rdev = rdev;
                self.make(parent.0, name, meta)
            }
        };
        match r {
            Ok((key, e)) => {
                let (attr, generation) = self.looked_up(&key, &e);
                reply.entry(&self.config.ttl, &attr, generation)
            }
            Err(e) => reply.error(self.failed("mknod", &e)),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let meta = Meta::new(
            Kind::Dir,
            (mode & !umask) as u16,
            req.uid(),
            req.gid(),
            SystemTime::now(),
        );
        match self.make(parent.0, name, meta) {
            Ok((key, e)) => {
                let (attr, generation) = self.looked_up(&key, &e);
                reply.entry(&self.config.ttl, &attr, generation)
            }
            Err(e) => reply.error(self.failed("mkdir", &e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.do_unlink(parent.0, name, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("unlink", &e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.do_unlink(parent.0, name, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("rmdir", &e)),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let mut meta = Meta::new(
            Kind::Symlink,
            0o777,
            req.uid(),
            req.gid(),
            SystemTime::now(),
        );
        meta.target = target.as_os_str().as_bytes().to_vec();
        match self.make(parent.0, link_name, meta) {
            Ok((key, e)) => {
                let (attr, generation) = self.looked_up(&key, &e);
                reply.entry(&self.config.ttl, &attr, generation)
            }
            Err(e) => reply.error(self.failed("symlink", &e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        match self.do_rename(parent.0, name, newparent.0, newname, flags) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("rename", &e)),
        }
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        // A key has one path: a second name would be a second, independent copy.
        reply.error(Errno::from_i32(libc::EPERM));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.open_file(ino.0, flags) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(self.failed("open", &e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.do_read(fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(self.failed("read", &e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.do_write(fh.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(self.failed("write", &e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.flush_handle(fh.0, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("flush", &e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.flush_handle(fh.0, false);
        self.files.lock().remove(&fh.0);
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("release", &e)),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.flush_handle(fh.0, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("fsync", &e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = self.key_of(ino.0).and_then(|key| {
            let e = self.entry(&key, None)?;
            if e.kind != Kind::Dir {
                return Err(FsError::posix(libc::ENOTDIR, "not a directory"));
            }
            let fh = self.new_handle();
            let d = OpenDir {
                key,
                cookies: VecDeque::new(),
                next_cookie: FIRST_COOKIE,
            };
            self.dirs.lock().insert(fh, Arc::new(Mutex::new(d)));
            Ok(fh)
        });
        match r {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(self.failed("opendir", &e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.do_readdir(ino.0, fh.0, offset, &mut reply) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("readdir", &e)),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs.lock().remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Directory changes are batches in the WAL: a synced empty-change write makes them
        // durable.
        let r = if self.config.read_only {
            Ok(())
        } else {
            self.store.write(WriteBatch::new(), true)
        };
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("fsyncdir", &e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.do_statfs() {
            Ok((blocks, free, files, ffree, frsize)) => reply.statfs(
                blocks,
                free,
                free,
                files,
                ffree,
                frsize as u32,
                path::NAME_MAX as u32,
                frsize as u32,
            ),
            Err(e) => reply.error(self.failed("statfs", &e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        match self.do_setxattr(ino.0, name, value, flags) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("setxattr", &e)),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        // Asked before every write; only user.* attributes are ever stored.
        if !name.as_bytes().starts_with(b"user.") {
            reply.error(Errno::from_i32(libc::ENODATA));
            return;
        }
        match self.meta_for_xattr(ino.0) {
            Ok((_, _, meta)) => match meta.xattr(name.as_bytes()) {
                Some(v) => xattr_reply(reply, v, size),
                None => reply.error(Errno::from_i32(libc::ENODATA)),
            },
            Err(e) => reply.error(self.failed("getxattr", &e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.meta_for_xattr(ino.0) {
            Ok((_, _, meta)) => {
                let mut list = Vec::new();
                for (name, _) in &meta.xattrs {
                    list.extend_from_slice(name);
                    list.push(0);
                }
                xattr_reply(reply, &list, size)
            }
            Err(e) => reply.error(self.failed("listxattr", &e)),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.do_removexattr(ino.0, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.failed("removexattr", &e)),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // The mount uses `default_permissions`: the kernel checks modes itself.
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let meta = Meta::new(
            Kind::File,
            (mode & !umask) as u16,
            req.uid(),
            req.gid(),
            SystemTime::now(),
        );
        let r = self.make(parent.0, name, meta).map(|(key, e)| {
            let (attr, generation) = self.looked_up(&key, &e);
            let fh = self.new_handle();
            let f = OpenFile {
                ino: attr.ino.0,
                writable: (flags & libc::O_ACCMODE) != libc::O_RDONLY,
                buffer: Some(Buffer::Memory(Vec::new())),
                dirty: false,
            };
            self.files.lock().insert(fh, Arc::new(Mutex::new(f)));
            (attr, generation, fh)
        });
        match r {
            Ok((attr, generation, fh)) => reply.created(
                &self.config.ttl,
                &attr,
                generation,
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(self.failed("create", &e)),
        }
    }
}
