//! Open files: buffered reads and writes that reach the store at flush, fsync and release, and
//! attribute changes (chmod, chown, utimens, truncate).

use super::*;
use crate::buffer::{Spill, SpillTo};

/// How much of a value file is copied at a time when a renamed file needs a new one.
const COPY_CHUNK: usize = 1 << 20;

#[derive(Debug)]
pub(super) struct OpenFile {
    pub(super) ino: u64,
    pub(super) writable: bool,
    /// Loaded on first use; a writer's changes live here until flushed.
    pub(super) buffer: Option<Buffer>,
    pub(super) dirty: bool,
    /// A direct write asked for the set-user-ID and set-group-ID bits to be cleared: the
    /// kernel leaves that to the file system when it bypasses its page cache.
    pub(super) kill_suidgid: bool,
}

impl OpenFile {
    /// A handle with nothing written through it yet.
    pub(super) fn new(ino: u64, writable: bool, buffer: Option<Buffer>) -> OpenFile {
        OpenFile {
            ino,
            writable,
            buffer,
            dirty: false,
            kill_suidgid: false,
        }
    }
}

/// How the kernel handles an open file's I/O. A file opened write-only bypasses the page
/// cache (`FOPEN_DIRECT_IO`): it cannot be read or mapped through that descriptor, so there is
/// nothing to cache, and a cached write would cost a `security.capability` lookup per `write`
/// call (the kernel asks before every write that goes through its cache).
pub(super) fn write_only_flags(acc_mode: OpenAccMode) -> FopenFlags {
    if acc_mode == OpenAccMode::O_WRONLY {
        FopenFlags::FOPEN_DIRECT_IO
    } else {
        FopenFlags::empty()
    }
}

impl StrataFs {
    /// The length an open writer's unflushed contents give the file.
    pub(super) fn unflushed_len(&self, ino: u64) -> Option<u64> {
        let files: Vec<_> = self.files.lock().values().cloned().collect();
        files.iter().find_map(|f| {
            let f = f.lock();
            (f.ino == ino && f.dirty).then(|| f.buffer.as_ref().map_or(0, Buffer::len))
        })
    }

    pub(super) fn do_setattr(
        &self,
        ino: u64,
        fh: Option<u64>,
        change: AttrChange,
    ) -> Result<FileAttr> {
        let _tree = self.tree.read();
        let _record = self.record_lock(ino);
        let key = self.key_of(ino)?;
        let e = self.entry(&key, Some(ino))?;
        let now = SystemTime::now();
        if change.is_empty() {
            return Ok(self.attr(ino, &e));
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
                        b.set_len(size, &self.spill(&key))?;
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

    /// Where an open file of `key` spills: a value file when the mounted column family keeps
    /// blob files (it does unless another face created it without them).
    pub(super) fn spill<'a>(&'a self, key: &'a [u8]) -> Spill<'a> {
        let to = if self.store.data.options().enable_blob_files {
            SpillTo::ValueFile {
                db: &self.store.db,
                cf: &self.store.data,
                key,
            }
        } else {
            SpillTo::TempFile(&self.spill_dir)
        };
        Spill {
            at: self.config.spill_at,
            to,
        }
    }

    /// Fills an open file's buffer from the store, once.
    pub(super) fn load(&self, key: &[u8], f: &mut OpenFile) -> Result<()> {
        if f.buffer.is_none() {
            f.buffer = Some(match self.store.get_value(key)? {
                Some(v) => Buffer::Stored(v),
                None => Buffer::Memory(Vec::new()),
            });
        }
        Ok(())
    }

    /// Writes an open file's changes to the store: its bytes and its record in one batch.
    pub(super) fn commit(&self, f: &mut OpenFile, sync: bool) -> Result<()> {
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
                let meta = self.file_record(&key, SystemTime::now())?;
                self.store.put_meta(&mut batch, &key, &meta);
                self.write("fsync", &key, batch, true)?;
            }
            return Ok(());
        }
        let now = SystemTime::now();
        let mut meta = self.file_record(&key, now)?;
        meta.mtime = now;
        meta.ctime = now;
        if f.kill_suidgid {
            meta.clear_suidgid();
        }
        match f.buffer.take() {
            None => return Ok(()),
            Some(Buffer::Value(value)) => {
                // The value file goes into the store whole: whatever happens, this handle's
                // changes are no longer pending (a failure is reported to the flush or fsync,
                // as a failed write-back is).
                f.dirty = false;
                let value = self.value_file_for(value, &key)?;
                let mut batch = WriteBatch::new();
                self.store.put_meta(&mut batch, &key, &meta);
                self.store.write_with_value_file(batch, value, sync)?;
                self.wrote("write", &key);
            }
            Some(buffer) => {
                let buffer = f.buffer.insert(buffer);
                // Room for the file and its record: its bytes are copied once, into memory
                // faulted in up front.
                let mut batch =
                    WriteBatch::with_capacity(buffer.len() as usize + 2 * key.len() + 256);
                batch.put_cf(&self.store.data, &key, &*buffer.contents()?);
                self.store.put_meta(&mut batch, &key, &meta);
                self.write("write", &key, batch, sync)?;
                f.dirty = false;
            }
        }
        self.inodes.lock().changed(f.ino);
        Ok(())
    }

    /// `value`, or, if the file was renamed since it spilled, a copy made for its key now: a
    /// value file holds its key.
    fn value_file_for(&self, value: ValueFile, key: &[u8]) -> Result<ValueFile> {
        if value.key() == key {
            return Ok(value);
        }
        let mut copy = self.store.db.create_value_file(&self.store.data, key)?;
        let mut chunk = vec![0; COPY_CHUNK.min(value.len() as usize)];
        let mut at = 0;
        while at < value.len() {
            let n = value.read_at(at, &mut chunk)?;
            copy.write_at(at, &chunk[..n])?;
            at += n as u64;
        }
        Ok(copy)
    }

    /// Opens `ino`: a handle, and whether the kernel may keep the pages it cached of the file
    /// (close-to-open: only if nothing changed the file since it last opened it).
    pub(super) fn open_file(&self, ino: u64, flags: OpenFlags) -> Result<(u64, FopenFlags)> {
        let key = self.key_of(ino)?;
        let e = self.entry(&key, Some(ino))?;
        if e.kind == Kind::Dir {
            return Err(FsError::posix(libc::EISDIR, "is a directory"));
        }
        let writable = flags.acc_mode() != OpenAccMode::O_RDONLY;
        if writable {
            self.check_writable()?;
        }
        let mut f = OpenFile::new(ino, writable, None);
        if writable && flags.0 & libc::O_TRUNC != 0 {
            f.buffer = Some(Buffer::Memory(Vec::new()));
            f.dirty = true;
        }
        let truncated = f.dirty;
        let fh = self.new_handle();
        self.files.lock().insert(fh, Arc::new(Mutex::new(f)));
        let mut flags = write_only_flags(flags.acc_mode());
        if !truncated && self.inodes.lock().open_keeps_cache(ino) {
            flags |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        if !writable {
            // A reader has nothing to flush: its close costs no round trip for one.
            flags |= FopenFlags::FOPEN_NOFLUSH;
        }
        Ok((fh, flags))
    }

    pub(super) fn file(&self, fh: u64) -> Result<Arc<Mutex<OpenFile>>> {
        self.files
            .lock()
            .get(&fh)
            .cloned()
            .ok_or_else(|| FsError::posix(libc::EBADF, "unknown file handle"))
    }

    /// Answers a read from the open file's contents, loading them from the store once.
    pub(super) fn do_read(&self, fh: u64, offset: u64, size: u32, reply: ReplyData) {
        let f = match self.file(fh) {
            Ok(f) => f,
            Err(e) => return reply.error(self.failed("read", &e)),
        };
        let tree = self.tree.read();
        let mut f = f.lock();
        if f.buffer.is_none() {
            let loaded = self.key_of(f.ino).and_then(|key| self.load(&key, &mut f));
            if let Err(e) = loaded {
                return reply.error(self.failed("read", &e));
            }
        }
        drop(tree);
        let Some(b) = f.buffer.as_ref() else {
            return reply.data(&[]);
        };
        match b.read(offset, size as usize) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(self.failed("read", &e)),
        }
    }

    pub(super) fn do_write(
        &self,
        fh: u64,
        offset: u64,
        data: &[u8],
        kill_suidgid: bool,
    ) -> Result<u32> {
        let f = self.file(fh)?;
        let _tree = self.tree.read();
        let mut f = f.lock();
        if !f.writable {
            return Err(FsError::posix(libc::EBADF, "not open for writing"));
        }
        if offset + data.len() as u64 > MAX_VALUE_SIZE {
            return Err(FsError::posix(libc::EFBIG, "past the largest value"));
        }
        let key = self.key_of(f.ino)?;
        self.load(&key, &mut f)?;
        if let Some(b) = f.buffer.as_mut() {
            b.write(offset, data, &self.spill(&key))?;
        }
        f.dirty = true;
        f.kill_suidgid |= kill_suidgid;
        Ok(data.len() as u32)
    }

    pub(super) fn flush_handle(&self, fh: u64, sync: bool) -> Result<()> {
        let f = self.file(fh)?;
        let _tree = self.tree.read();
        // A handle's inode never changes: asked first, so that the record lock comes before
        // the file's, as setattr takes them.
        let ino = f.lock().ino;
        let _record = self.record_lock(ino);
        let mut f = f.lock();
        self.commit(&mut f, sync)
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
