//! Open files: one state per file, shared by every descriptor of it, whose writes reach the
//! store as byte ranges (at once when synchronous, else batched up to `FsConfig::write_back`
//! bytes), and attribute changes (chmod, chown, utimens, truncate).

use super::*;
use crate::pending::Pending;

/// `OpenInode::pending_len` when nothing is pending.
const NO_PENDING: u64 = u64::MAX;

/// Separate dirty ranges a file holds before they go to the store, whatever their bytes: each
/// is a partial write of the batch, which the engine resolves one by one.
const MAX_RANGES: usize = 1024;

/// How one `write` is to be done, from the descriptor's flags at the time of the call.
#[derive(Debug, Clone, Copy)]
pub(super) struct WriteHow {
    pub(super) kill_suidgid: bool,
    /// `O_SYNC` or `O_DSYNC`: durable when `write` returns.
    pub(super) sync: bool,
    /// `O_APPEND`: at the file's end as the store has it when the write lands.
    pub(super) append: bool,
}

/// A file while any descriptor has it open.
#[derive(Debug)]
pub(super) struct OpenInode {
    pub(super) ino: u64,
    /// Writes not yet in the store, from every descriptor. Taken after `tree` and before the
    /// file's record lock.
    pub(super) pending: Mutex<Pending>,
    /// The length the pending writes give the file: what `stat` shows, without waiting for a
    /// flush in progress.
    pending_len: AtomicU64,
    /// Write-backs that failed, and the errno of the last: as Linux's errseq, every descriptor
    /// open when one failed is told at its next flush, fsync or close, whoever's flush it was.
    errors: AtomicU64,
    last_errno: std::sync::atomic::AtomicI32,
}

impl OpenInode {
    fn new(ino: u64) -> OpenInode {
        OpenInode {
            ino,
            pending: Mutex::new(Pending::default()),
            pending_len: AtomicU64::new(NO_PENDING),
            errors: AtomicU64::new(0),
            last_errno: std::sync::atomic::AtomicI32::new(0),
        }
    }

    fn pending_len(&self) -> Option<u64> {
        let len = self.pending_len.load(Ordering::Acquire);
        (len != NO_PENDING).then_some(len)
    }

    /// Publishes the length `pending` gives the file (none once drained), for `stat`.
    fn show_len(&self, pending: &Pending) {
        let len = pending.len().unwrap_or(NO_PENDING);
        self.pending_len.store(len, Ordering::Release);
    }

    /// Pending writes of the file were lost with a failed batch: every descriptor hears of it.
    fn record_failure(&self, e: &FsError) {
        self.last_errno
            .store(i32::from(e.errno()), Ordering::Release);
        self.errors.fetch_add(1, Ordering::AcqRel);
    }
}

/// One descriptor: what it may do, and the file it shares with the others.
#[derive(Debug)]
pub(super) struct Handle {
    pub(super) file: Arc<OpenInode>,
    writable: bool,
    /// `O_SYNC` or `O_DSYNC` at open: a write is durable when it returns.
    sync: bool,
    /// The file's failed write-backs this descriptor has been told of.
    errors_seen: AtomicU64,
    /// Its I/O bypasses the kernel's page cache ([`uncached_flags`]).
    uncached: bool,
    /// On a read-only mount: the version of the file this descriptor opened, read to the end
    /// whatever the store shows meanwhile (a replica catching up).
    opened: Option<ValueReader>,
}

/// The descriptors open now, and the files they share.
#[derive(Debug, Default)]
pub(super) struct OpenFiles {
    handles: HashMap<u64, Arc<Handle>>,
    /// Each open file with its descriptor count.
    inodes: HashMap<u64, (Arc<OpenInode>, usize)>,
}

impl OpenFiles {
    /// Whether any descriptor has `ino` open.
    pub(super) fn is_open(&self, ino: u64) -> bool {
        self.inodes.contains_key(&ino)
    }

    pub(super) fn inode(&self, ino: u64) -> Option<Arc<OpenInode>> {
        self.inodes.get(&ino).map(|(f, _)| f.clone())
    }
}

/// How the kernel handles an open file's I/O. A file opened write-only bypasses the page
/// cache (`FOPEN_DIRECT_IO`): it cannot be read or mapped through that descriptor, so there is
/// nothing to cache, and a cached write would cost a `security.capability` lookup per `write`
/// call. (An append may land elsewhere than the kernel cached it, if another door moved the
/// end: its flush drops the kernel's pages from there on, so appending descriptors keep the
/// cache, and `mmap`.)
pub(super) fn uncached_flags(flags: OpenFlags) -> FopenFlags {
    if flags.acc_mode() == OpenAccMode::O_WRONLY {
        FopenFlags::FOPEN_DIRECT_IO
    } else {
        FopenFlags::empty()
    }
}

impl FsCore {
    /// The length an open file's pending writes give it.
    pub(super) fn unflushed_len(&self, ino: u64) -> Option<u64> {
        self.files.lock().inode(ino)?.pending_len()
    }

    /// The attributes after the change, and how long the kernel may keep them.
    pub(super) fn do_setattr(&self, ino: u64, change: AttrChange) -> Result<(FileAttr, Duration)> {
        let _tree = self.tree.read();
        let open = self.files.lock().inode(ino);
        let mut pending = open.as_ref().map(|f| f.pending.lock());
        let _record = self.record_lock(ino);
        let key = self.key_of(ino)?;
        let e = self.entry(&key, Some(ino))?;
        let now = SystemTime::now();
        if change.is_empty() {
            return Ok((self.attr(ino, &e), self.ttl_of(&e)));
        }
        self.check_writable()?;
        let mut meta = self.record_of(&e);
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
        // Every check first: a change refused leaves the pending writes as they were.
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
        }
        let mut batch = WriteBatch::new();
        let stale_from = pending.as_ref().and_then(|p| p.stale_from());
        // The file's pending writes land first, in this batch: a flush after it would set the
        // times again (`cp -p` writes, then sets them).
        let drained = pending.as_ref().is_some_and(|p| !p.is_empty());
        if let (Some(p), Some(f)) = (pending.as_mut(), &open)
            && drained
        {
            if change.mtime.is_none() {
                meta.mtime = now;
            }
            // The writes came before this change: a mode it sets stands.
            if p.kill_suidgid && change.mode.is_none() {
                meta.clear_suidgid();
            }
            self.drain(p, &mut batch, &key);
            f.show_len(p);
        }
        if let Some(size) = change.size {
            batch.truncate_cf(&self.store.data, &key, size);
        }
        if !is_orphan(&key) {
            self.store.put_meta(&mut batch, &key, &meta);
        }
        let written = self.write("setattr", &key, batch, false);
        if let (Err(e), Some(f)) = (&written, &open)
            && drained
        {
            f.record_failure(e);
        }
        written?;
        if let Some(from) = stale_from {
            self.invalidator.pages_changed(ino, from);
        }
        if change.size.is_some() {
            self.inodes.lock().changed(ino);
        }
        let e = self.entry(&key, Some(ino))?;
        Ok((self.attr(ino, &e), self.ttl_of(&e)))
    }

    /// Writes `file`'s pending writes to the store with its new times, in one batch (sync:
    /// durable when this returns). With nothing pending, a synced flush is still a barrier:
    /// every write that reached the store before it is durable after it.
    fn flush_file(&self, file: &OpenInode, pending: &mut Pending, sync: bool) -> Result<()> {
        if pending.is_empty() {
            if sync && !self.config.read_only {
                self.store.db.sync_wal()?;
            }
            return Ok(());
        }
        let written = self.write_back(file, pending, sync);
        if let Err(e) = &written {
            file.record_failure(e);
        }
        written
    }

    /// [`FsCore::flush_file`]'s batch: the pending writes and the file's record with new
    /// times. Pending writes are drained only once nothing can fail before the write: landed
    /// or lost (and the loss reported to every descriptor), nothing is pending afterwards.
    fn write_back(&self, file: &OpenInode, pending: &mut Pending, sync: bool) -> Result<()> {
        let key = self.key_of(file.ino)?;
        let stale_from = pending.stale_from();
        let _record = self.record_lock(file.ino);
        let meta = match is_orphan(&key) {
            true => None,
            false => {
                let now = SystemTime::now();
                let mut meta = self.file_record(&key, now)?;
                meta.mtime = now;
                meta.ctime = now;
                if pending.kill_suidgid {
                    meta.clear_suidgid();
                }
                Some(meta)
            }
        };
        let mut batch = WriteBatch::with_capacity(pending.bytes() + 2 * key.len() + 256);
        self.drain(pending, &mut batch, &key);
        file.show_len(pending);
        if let Some(meta) = &meta {
            self.store.put_meta(&mut batch, &key, meta);
        }
        let written = self.write("write", &key, batch, sync);
        if let Some(from) = stale_from {
            self.invalidator.pages_changed(file.ino, from);
        }
        written
    }

    /// Past the mount's total even after a writer's own file went to the store: the files
    /// holding the most go too, until half the total is free. Without it, files open but idle
    /// kept their writes, and every other file wrote through in small pieces until they closed.
    /// A file another thread has busy is passed over; a failed flush reaches its descriptors.
    fn relieve_write_back(&self) {
        let open: Vec<Arc<OpenInode>> = {
            let files = self.files.lock();
            files.inodes.values().map(|(f, _)| Arc::clone(f)).collect()
        };
        let mut holding: Vec<(usize, Arc<OpenInode>)> = open
            .into_iter()
            .filter_map(|f| {
                let bytes = f.pending.try_lock()?.bytes();
                (bytes > 0).then_some((bytes, f))
            })
            .collect();
        holding.sort_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));
        for (_, f) in holding {
            if self.stats.write_back_held.load(Ordering::Relaxed) < self.config.write_back_total / 2
            {
                break;
            }
            if let Some(mut pending) = f.pending.try_lock() {
                let _ = self.flush_file(&f, &mut pending, false);
            }
        }
    }

    /// Moves `pending` into `batch` as partial writes of `key`, and out of the mount's total.
    fn drain(&self, pending: &mut Pending, batch: &mut WriteBatch, key: &[u8]) {
        let bytes = pending.bytes() as u64;
        pending.drain_into(batch, &self.store.data, key);
        self.stats
            .write_back_held
            .fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The file's write-back failures `h` has not been told of yet, as an error (once).
    fn unseen_failure(&self, h: &Handle) -> Result<()> {
        let errors = h.file.errors.load(Ordering::Acquire);
        if h.errors_seen.swap(errors, Ordering::AcqRel) == errors {
            return Ok(());
        }
        Err(FsError::posix(
            h.file.last_errno.load(Ordering::Acquire),
            "an earlier write-back of this file failed",
        ))
    }

    /// Opens `ino`: a handle, and whether the kernel may keep the pages it cached of the file
    /// (close-to-open: only if nothing changed the file since it last opened it).
    pub(super) fn open_file(&self, ino: u64, flags: OpenFlags) -> Result<(u64, FopenFlags)> {
        let writable = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let truncate = writable && flags.0 & libc::O_TRUNC != 0;
        if writable {
            self.check_writable()?;
        }
        if truncate {
            self.do_setattr(
                ino,
                AttrChange {
                    size: Some(0),
                    ..AttrChange::default()
                },
            )?;
        }
        // Checked and attached under one hold of the tree: an unlink or rename either comes
        // before (and the open fails) or after (and finds the file open, so keeps its bytes).
        let fh = {
            let _tree = self.tree.read();
            let key = self.key_of(ino)?;
            let e = self.entry(&key, Some(ino))?;
            if e.kind == Kind::Dir {
                return Err(FsError::posix(libc::EISDIR, "is a directory"));
            }
            // Nothing of this mount's own can change the file: the descriptor keeps the version
            // it opened, and reads it to the end (a replica may move on meanwhile).
            let opened = match self.config.read_only {
                true => self.store.db.value_reader_cf(
                    &ReadOptions::default(),
                    &self.store.data,
                    &key,
                )?,
                false => None,
            };
            self.attach(ino, flags, opened)
        };
        let mut fopen = uncached_flags(flags);
        if self.config.read_only && self.store.db.replica_status().is_some() {
            // On a replica the file changes under an open descriptor, which must read the
            // version it opened to its end: past the kernel's page cache (shared with newer
            // descriptors) and its idea of the file's length (the newest version's).
            fopen |= FopenFlags::FOPEN_DIRECT_IO;
        } else if !truncate && self.inodes.lock().open_keeps_cache(ino) {
            fopen |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        if !writable {
            // A reader has nothing to flush: its close costs no round trip for one.
            fopen |= FopenFlags::FOPEN_NOFLUSH;
        }
        Ok((fh, fopen))
    }

    /// A new descriptor of `ino`, sharing the file's state with any other.
    pub(super) fn attach(&self, ino: u64, flags: OpenFlags, opened: Option<ValueReader>) -> u64 {
        let fh = self.new_handle();
        let mut files = self.files.lock();
        let file = {
            let (file, count) = files
                .inodes
                .entry(ino)
                .or_insert_with(|| (Arc::new(OpenInode::new(ino)), 0));
            *count += 1;
            file.clone()
        };
        let errors = file.errors.load(Ordering::Acquire);
        let handle = Handle {
            file,
            writable: flags.acc_mode() != OpenAccMode::O_RDONLY,
            sync: flags.0 & (libc::O_SYNC | libc::O_DSYNC) != 0,
            errors_seen: AtomicU64::new(errors),
            uncached: !uncached_flags(flags).is_empty(),
            opened,
        };
        files.handles.insert(fh, Arc::new(handle));
        fh
    }

    /// Closes descriptor `fh` after flushing the file. The bytes of a file unlinked or renamed
    /// over go when the kernel forgets its inode ([`FsCore::forgotten`]), which it does only
    /// after the last close; should it have forgotten first, the last close takes them.
    pub(super) fn release_handle(&self, fh: u64) -> Result<()> {
        let flushed = self.flush_handle(fh, false);
        let _tree = self.tree.read();
        let last = {
            let mut files = self.files.lock();
            let Some(handle) = files.handles.remove(&fh) else {
                return flushed;
            };
            let ino = handle.file.ino;
            match files.inodes.get_mut(&ino) {
                Some((_, count)) if *count > 1 => {
                    *count -= 1;
                    None
                }
                _ => files.inodes.remove(&ino).map(|_| handle.file.clone()),
            }
        };
        let Some(file) = last else { return flushed };
        // A flush that failed before taking the writes (reported above) leaves them: they go
        // with the file, and out of the mount's total.
        let left = std::mem::take(&mut *file.pending.lock());
        self.stats
            .write_back_held
            .fetch_sub(left.bytes() as u64, Ordering::Relaxed);
        if !self.config.read_only && self.inodes.lock().key(file.ino).is_none() {
            self.reclaim(&orphan_key(file.ino))?;
        }
        flushed
    }

    /// The kernel forgot `ino`, whose bytes were kept at orphan key `key` when it was unlinked
    /// or renamed over: they go, unless a descriptor still has the file open (then its last
    /// close takes them). A failure leaves them to the next mount's start.
    pub(super) fn forgotten(&self, ino: u64, key: &[u8]) {
        if self.config.read_only || self.files.lock().is_open(ino) {
            return;
        }
        let _tree = self.tree.read();
        if let Err(e) = self.reclaim(key) {
            log::warn!(target: "strata::fs", "reclaiming {}: {e}", String::from_utf8_lossy(key));
        }
    }

    fn reclaim(&self, orphan: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_cf(&self.store.data, orphan);
        self.write("reclaim", orphan, batch, false)
    }

    pub(super) fn handle(&self, fh: u64) -> Result<Arc<Handle>> {
        self.files
            .lock()
            .handles
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::posix(libc::EBADF, "unknown file handle"))
    }

    /// Reads from the store, after the file's pending writes (from any descriptor) land.
    /// `None` when the file's key is gone (another door deleted it).
    pub(super) fn do_read(&self, fh: u64, offset: u64, size: u32) -> Result<Option<PinnableValue>> {
        let h = self.handle(fh)?;
        if let Some(opened) = &h.opened {
            return Ok(Some(opened.read_at(offset, u64::from(size))?.bytes));
        }
        let _tree = self.tree.read();
        {
            let mut pending = h.file.pending.lock();
            self.flush_file(&h.file, &mut pending, false)?;
        }
        let key = self.key_of(h.file.ino)?;
        let range = self.store.db.read_range_cf(
            &ReadOptions::default(),
            &self.store.data,
            &key,
            offset,
            u64::from(size),
        )?;
        Ok(range.map(|r| r.bytes))
    }

    pub(super) fn do_write(&self, fh: u64, offset: u64, data: &[u8], how: WriteHow) -> Result<u32> {
        let h = self.handle(fh)?;
        if !h.writable {
            return Err(FsError::posix(libc::EBADF, "not open for writing"));
        }
        if offset.saturating_add(data.len() as u64) > MAX_VALUE_SIZE {
            return Err(FsError::posix(libc::EFBIG, "past the largest value"));
        }
        let _tree = self.tree.read();
        let key = self.key_of(h.file.ino)?;
        let mut pending = h.file.pending.lock();
        // Bytes of this file already in the mount's total.
        let mut counted = pending.bytes();
        loop {
            // The length the store has is asked only by the first write after a flush.
            let stored_len = match pending.is_empty() {
                true => self.store.db.value_size_cf(&self.store.data, &key)?,
                false => None,
            };
            if pending.push(offset, how.append, data, || stored_len.unwrap_or(0)) {
                break;
            }
            // A positional write after appends: they land first.
            self.flush_file(&h.file, &mut pending, false)?;
            counted = 0;
        }
        pending.kill_suidgid |= how.kill_suidgid;
        pending.uncached |= h.uncached || how.append;
        h.file.show_len(&pending);
        let grew = pending.bytes().saturating_sub(counted);
        let held = self
            .stats
            .write_back_held
            .fetch_add(grew as u64, Ordering::Relaxed)
            + grew as u64;
        let sync = how.sync || h.sync;
        if sync
            || pending.bytes() as u64 >= self.config.write_back
            || held >= self.config.write_back_total
            || pending.ranges() >= MAX_RANGES
        {
            self.flush_file(&h.file, &mut pending, sync)?;
        }
        drop(pending);
        if held >= self.config.write_back_total {
            self.relieve_write_back();
        }
        Ok(data.len() as u32)
    }

    /// Writes the file's pending writes to the store (sync: durable when this returns, with
    /// every earlier write to the file, whichever descriptor made it).
    pub(super) fn flush_handle(&self, fh: u64, sync: bool) -> Result<()> {
        let h = self.handle(fh)?;
        let _tree = self.tree.read();
        let mut pending = h.file.pending.lock();
        match self.flush_file(&h.file, &mut pending, sync) {
            Err(e) => {
                // Told now: not again.
                let _ = self.unseen_failure(&h);
                Err(e)
            }
            Ok(()) => self.unseen_failure(&h),
        }
    }
}

impl FsCore {
    /// Stores the pending writes of every open file, then syncs the WAL: whatever was written
    /// through the mount so far is durable, whether or not its files are ever closed. What a
    /// shutdown does first.
    pub fn store_open_files(&self) -> Result<()> {
        let open: Vec<Arc<OpenInode>> = {
            let files = self.files.lock();
            files.inodes.values().map(|(f, _)| f.clone()).collect()
        };
        let mut first_failure = None;
        for file in open {
            let _tree = self.tree.read();
            let mut pending = file.pending.lock();
            if let Err(e) = self.flush_file(&file, &mut pending, false) {
                log::error!(target: "strata::fs", "storing an open file: {e}");
                first_failure.get_or_insert(e);
            }
        }
        if !self.config.read_only {
            self.store.db.sync_wal()?;
        }
        first_failure.map_or(Ok(()), Err)
    }

    /// The paths of the files open now (an unlinked one shows as its orphan key).
    pub fn open_paths(&self) -> Vec<String> {
        let inos: Vec<u64> = self.files.lock().inodes.keys().copied().collect();
        let inodes = self.inodes.lock();
        inos.into_iter()
            .map(|ino| {
                inodes.key(ino).map_or_else(
                    || format!("inode {ino}"),
                    |k| String::from_utf8_lossy(k).into_owned(),
                )
            })
            .collect()
    }
}

/// What a `setattr` changes.
#[derive(Debug, Default)]
pub(super) struct AttrChange {
    pub(super) mode: Option<u32>,
    pub(super) uid: Option<u32>,
    pub(super) gid: Option<u32>,
    pub(super) size: Option<u64>,
    pub(super) atime: Option<TimeOrNow>,
    pub(super) mtime: Option<TimeOrNow>,
}

impl AttrChange {
    pub(super) fn is_empty(&self) -> bool {
        self.mode.is_none()
            && self.uid.is_none()
            && self.gid.is_none()
            && self.size.is_none()
            && self.atime.is_none()
            && self.mtime.is_none()
    }
}
