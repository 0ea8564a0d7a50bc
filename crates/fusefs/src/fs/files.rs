//! Open files: buffered reads and writes that reach the store at flush, fsync and release, and
//! attribute changes (chmod, chown, utimens, truncate).

use super::*;

#[derive(Debug)]
pub(super) struct OpenFile {
    pub(super) ino: u64,
    pub(super) writable: bool,
    /// Loaded on first use; a writer's changes live here until flushed.
    pub(super) buffer: Option<Buffer>,
    pub(super) dirty: bool,
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
                        b.set_len(size, self.config.spill_at, &self.spill_dir)
                            .map_err(|e| FsError::io("truncate", e))?;
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
        let Some(buffer) = f.buffer.as_ref() else {
            return Ok(());
        };
        // Room for the file and its record: its bytes are copied once, into memory faulted in
        // up front.
        let mut batch = WriteBatch::with_capacity(buffer.len() as usize + 2 * key.len() + 256);
        {
            let bytes = buffer
                .contents()
                .map_err(|e| FsError::io("spill file", e))?;
            batch.put_cf(&self.store.data, &key, &*bytes);
        }
        self.store.put_meta(&mut batch, &key, &meta);
        self.write("write", &key, batch, sync)?;
        self.inodes.lock().changed(f.ino);
        f.dirty = false;
        Ok(())
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
        let truncated = f.dirty;
        let fh = self.new_handle();
        self.files.lock().insert(fh, Arc::new(Mutex::new(f)));
        let mut flags = FopenFlags::empty();
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
        let mut f = f.lock();
        if f.buffer.is_none() {
            let loaded = self.key_of(f.ino).and_then(|key| self.load(&key, &mut f));
            if let Err(e) = loaded {
                return reply.error(self.failed("read", &e));
            }
        }
        let Some(b) = f.buffer.as_ref() else {
            return reply.data(&[]);
        };
        match b.read(offset, size as usize) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(self.failed("read", &FsError::io("spill file", e))),
        }
    }

    pub(super) fn do_write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32> {
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

    pub(super) fn flush_handle(&self, fh: u64, sync: bool) -> Result<()> {
        let f = self.file(fh)?;
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
