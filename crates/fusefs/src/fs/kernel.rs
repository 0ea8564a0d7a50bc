//! The FUSE entry points: each unpacks its request, calls the operation, and answers with the
//! result or its errno.

use super::listing::Sink;
use super::xattr::xattr_reply;
use super::*;

/// A reply that can carry an errno instead.
trait Failable {
    fn fail(self, e: Errno);
}

macro_rules! failable {
    ($($reply:ty),*) => {
        $(impl Failable for $reply {
            fn fail(self, e: Errno) {
                self.error(e)
            }
        })*
    };
}

failable!(
    ReplyEntry,
    ReplyAttr,
    ReplyData,
    ReplyEmpty,
    ReplyOpen,
    ReplyWrite,
    ReplyCreate,
    ReplyStatfs,
    ReplyXattr,
    ReplyDirectory,
    ReplyDirectoryPlus
);

impl FsCore {
    /// Answers with `ok` on success, else with the failure's errno (logged if the store's).
    fn answer<R: Failable, T>(&self, op: &str, reply: R, r: Result<T>, ok: impl FnOnce(R, T)) {
        match r {
            Ok(v) => ok(reply, v),
            Err(e) => reply.fail(self.failed(op, &e)),
        }
    }

    fn answer_empty(&self, op: &str, reply: ReplyEmpty, r: Result<()>) {
        self.answer(op, reply, r, |reply, ()| reply.ok());
    }

    /// A new entry, already counted as looked up.
    fn answer_entry(&self, op: &str, reply: ReplyEntry, r: Result<Made>) {
        self.answer(op, reply, r, |reply, (attr, generation, _)| {
            reply.entry(&self.config.ttl, &attr, generation);
        });
    }
}

/// A new entry's record: its mode, and the caller as owner.
fn made_by(req: &Request, kind: Kind, mode: u32) -> Meta {
    Meta::new(kind, mode as u16, req.uid(), req.gid(), SystemTime::now())
}

impl Filesystem for StrataFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // `ls -l` gets names and attributes in one request per page of entries; a kernel
        // without it lists and then looks each entry up.
        let plus = InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO;
        if let Err(missing) = config.add_capabilities(plus) {
            log::debug!(target: "strata::fs", "kernel lacks {missing:?}");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _request = self.busy();
        // Shared with flushes and reads; a rename (exclusive) is seen whole: its batch and which
        // inode each key names, never the new bytes under an inode the name no longer has.
        let _tree = self.tree.read();
        let r = self.child(parent.0, name).and_then(|key| {
            // An open file's pending writes give it its length, as the kernel must see it.
            let ino = self.inodes.lock().peek(&key);
            let e = self.entry(&key, ino)?;
            Ok((self.looked_up(&key, &e), self.ttl_of(&e)))
        });
        match r {
            // A name that is not there is cached as such for the TTL (node 0 is the kernel's
            // negative entry), so tools probing for files pay no round trip the second time.
            // A key another face then writes drops it (`Invalidator::key_changed`).
            Err(e) if e.errno() == Errno::ENOENT => {
                let absent = Entry {
                    kind: Kind::File,
                    size: 0,
                    meta: None,
                    expires: 0,
                };
                reply.entry(&self.config.ttl, &self.attr(0, &absent), Generation(0));
            }
            r => self.answer("lookup", reply, r, |reply, ((attr, generation), ttl)| {
                reply.entry(&ttl, &attr, generation)
            }),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let kept = self.inodes.lock().forget(ino.0, nlookup);
        if let Some(orphan) = kept {
            self.forgotten(ino.0, &orphan);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _request = self.busy();
        // As in `lookup`: an inode renamed over mid-rename showed the new file's length.
        let _tree = self.tree.read();
        let r = self
            .key_of(ino.0)
            .and_then(|key| self.entry(&key, Some(ino.0)));
        self.answer("getattr", reply, r, |reply, e| {
            reply.attr(&self.ttl_of(&e), &self.attr(ino.0, &e))
        })
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
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _request = self.busy();
        let change = AttrChange {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        self.answer(
            "setattr",
            reply,
            self.do_setattr(ino.0, change),
            |reply, (attr, ttl)| reply.attr(&ttl, &attr),
        )
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _request = self.busy();
        let r = self.key_of(ino.0).and_then(|key| {
            let e = self.entry(&key, None)?;
            match e.meta {
                Some(m) if m.kind == Kind::Symlink => Ok(m.target),
                _ => Err(FsError::posix(libc::EINVAL, "not a symlink")),
            }
        });
        self.answer("readlink", reply, r, |reply, target| reply.data(&target))
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
        let _request = self.busy();
        let r = match Kind::from_mode(mode) {
            None | Some(Kind::Dir) | Some(Kind::Symlink) => {
                Err(FsError::posix(libc::EINVAL, "mknod of this kind"))
            }
            Some(kind) => {
                let mut meta = made_by(req, kind, mode & !umask);
                meta.rdev = rdev;
                self.make(parent.0, name, meta, None)
            }
        };
        self.answer_entry("mknod", reply, r)
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
        let _request = self.busy();
        let meta = made_by(req, Kind::Dir, mode & !umask);
        self.answer_entry("mkdir", reply, self.make(parent.0, name, meta, None))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _request = self.busy();
        self.answer_empty("unlink", reply, self.do_unlink(parent.0, name, false))
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _request = self.busy();
        self.answer_empty("rmdir", reply, self.do_unlink(parent.0, name, true))
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _request = self.busy();
        let mut meta = made_by(req, Kind::Symlink, 0o777);
        meta.target = target.as_os_str().as_bytes().to_vec();
        self.answer_entry("symlink", reply, self.make(parent.0, link_name, meta, None))
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
        let _request = self.busy();
        self.answer_empty(
            "rename",
            reply,
            self.do_rename(parent.0, name, newparent.0, newname, flags),
        )
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        let _request = self.busy();
        // Not a terminal, and no file-specific ioctls (isatty asks on every open of a stdio
        // stream).
        reply.error(Errno::from_i32(libc::ENOTTY));
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _request = self.busy();
        // A key has one path: a second name would be a second, independent copy.
        reply.error(Errno::from_i32(libc::EPERM));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _request = self.busy();
        self.answer(
            "open",
            reply,
            self.open_file(ino.0, flags),
            |reply, (fh, keep)| reply.opened(FileHandle(fh), keep),
        )
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
        let _request = self.busy();
        match self.do_read(fh.0, offset, size) {
            Ok(data) => reply.data(data.as_deref().unwrap_or_default()),
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
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _request = self.busy();
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        // The descriptor's flags as they are now (`fcntl` may have changed them since open).
        let how = files::WriteHow {
            kill_suidgid: kill,
            sync: flags.0 & (libc::O_SYNC | libc::O_DSYNC) != 0,
            append: flags.0 & libc::O_APPEND != 0,
        };
        self.answer(
            "write",
            reply,
            self.do_write(fh.0, offset, data, how),
            |reply, n| reply.written(n),
        )
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _request = self.busy();
        self.answer_empty("flush", reply, self.flush_handle(fh.0, false))
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
        self.answer_empty("release", reply, self.release_handle(fh.0))
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _request = self.busy();
        self.answer_empty("fsync", reply, self.flush_handle(fh.0, true))
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _request = self.busy();
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
                cursor: None,
                ended_at: None,
            };
            self.dirs.lock().insert(fh, Arc::new(Mutex::new(d)));
            Ok(fh)
        });
        self.answer("opendir", reply, r, |reply, fh| {
            reply.opened(FileHandle(fh), FopenFlags::empty())
        })
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _request = self.busy();
        let r = self.do_readdir(ino.0, fh.0, offset, Sink::Plain(&mut reply));
        self.answer("readdir", reply, r, |reply, ()| reply.ok());
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let _request = self.busy();
        let r = self.do_readdir(ino.0, fh.0, offset, Sink::Plus(&mut reply));
        self.answer("readdirplus", reply, r, |reply, ()| reply.ok());
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
        let _request = self.busy();
        // Directory changes are batches in the WAL: syncing it makes them durable.
        let r = if self.config.read_only {
            Ok(())
        } else {
            self.store.db.sync_wal().map_err(FsError::from)
        };
        self.answer_empty("fsyncdir", reply, r)
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _request = self.busy();
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
        let _request = self.busy();
        self.answer_empty(
            "setxattr",
            reply,
            self.do_setxattr(ino.0, name, value, flags),
        )
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _request = self.busy();
        // Asked before every write; only user.* attributes are ever stored.
        if !name.as_bytes().starts_with(b"user.") {
            reply.error(Errno::from_i32(libc::ENODATA));
            return;
        }
        match self.meta_for_xattr(ino.0) {
            Ok((_, meta)) => match meta.xattr(name.as_bytes()) {
                Some(v) => xattr_reply(reply, v, size),
                None => reply.error(Errno::from_i32(libc::ENODATA)),
            },
            Err(e) => reply.error(self.failed("getxattr", &e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _request = self.busy();
        match self.meta_for_xattr(ino.0) {
            Ok((_, meta)) => {
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
        let _request = self.busy();
        self.answer_empty("removexattr", reply, self.do_removexattr(ino.0, name))
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let _request = self.busy();
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
        let _request = self.busy();
        let meta = made_by(req, Kind::File, mode & !umask);
        let r = self.make(parent.0, name, meta, Some(OpenFlags(flags))).map(
            |(attr, generation, fh)| {
                let fh = fh.unwrap_or_default();
                (
                    attr,
                    generation,
                    fh,
                    files::uncached_flags(OpenFlags(flags)),
                )
            },
        );
        match r {
            Ok((attr, generation, fh, open_flags)) => reply.created(
                &self.config.ttl,
                &attr,
                generation,
                FileHandle(fh),
                open_flags,
            ),
            Err(e) => reply.error(self.failed("create", &e)),
        }
    }
}
