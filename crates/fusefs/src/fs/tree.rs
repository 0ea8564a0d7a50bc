//! Changes to the tree: new entries, unlink and rmdir, rename (files and whole subtrees).

use super::*;
use crate::inodes::EXCHANGE_ASIDE;

impl FsCore {
    /// Makes a new entry `name` in `parent` holding `meta` (and, for a file, no bytes yet),
    /// counted as looked up, and (`open`) a descriptor of it: both before another change can
    /// rename or unlink it.
    pub(super) fn make(
        &self,
        parent: u64,
        name: &OsStr,
        meta: Meta,
        open: Option<OpenFlags>,
    ) -> Result<Made> {
        self.check_writable()?;
        let _tree = self.tree.write();
        let key = self.child(parent, name)?;
        if self.store.resolve(&key)?.is_some() {
            return Err(FsError::posix(libc::EEXIST, "exists"));
        }
        let mut batch = WriteBatch::new();
        if meta.kind == Kind::File {
            batch.put_cf(&self.store.data, &key, b"");
        }
        self.store.put_meta(&mut batch, &key, &meta);
        self.touch_parents(&mut batch, &[&key], meta.ctime)?;
        let what = match meta.kind {
            Kind::File => "create",
            Kind::Dir => "mkdir",
            Kind::Symlink => "symlink",
            _ => "mknod",
        };
        self.write(what, &key, batch, false)?;
        let e = Entry {
            kind: meta.kind,
            size: meta.target.len() as u64,
            meta: Some(meta),
            expires: 0,
        };
        let (attr, generation) = self.looked_up(&key, &e);
        let fh = open.map(|flags| self.attach(attr.ino.0, flags, None));
        Ok((attr, generation, fh))
    }

    pub(super) fn do_unlink(&self, parent: u64, name: &OsStr, dir: bool) -> Result<()> {
        self.check_writable()?;
        let _tree = self.tree.write();
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
        // `roomy`: not the retry on a full disk, which deletes alone (unless a descriptor has the
        // file open, when it must keep the bytes).
        let removal = |roomy: bool| -> Result<WriteBatch> {
            let mut batch = WriteBatch::new();
            if dir {
                batch.delete_cf(&self.store.meta, meta_key(&key, Kind::Dir));
            } else {
                self.keep_if_held(&mut batch, &key, &e, roomy);
                self.store.delete_entry(&mut batch, &key, e.kind);
            }
            if roomy {
                self.touch_parents(&mut batch, &[&key], SystemTime::now())?;
            }
            Ok(batch)
        };
        let what = if dir { "rmdir" } else { "unlink" };
        match self.write(what, &key, removal(true)?, false) {
            // A full disk still takes a batch of deletions alone (it may spend the store's disk
            // reserve), so `rm` frees room: the parent keeps its old times, and an open racing
            // the removal may get ESTALE, rather than the removal failing.
            Err(e) if e.is_no_space() => self.write(what, &key, removal(false)?, false)?,
            done => done?,
        }
        self.inodes.lock().detach_subtree(&key);
        Ok(())
    }

    pub(super) fn do_rename(
        &self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        flags: RenameFlags,
    ) -> Result<()> {
        self.check_writable()?;
        let _tree = self.tree.write();
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
        let dst = self.store.resolve(&to)?;
        let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
        // A directory cannot move below itself: `from` into `to`, or (exchanged) `to` into `from`.
        let into_itself =
            |moved: &Entry, a: &[u8], b: &[u8]| moved.kind == Kind::Dir && path::is_within(b, a);
        if into_itself(&src, &from, &to)
            || (exchange && dst.as_ref().is_some_and(|d| into_itself(d, &to, &from)))
        {
            return Err(FsError::posix(
                libc::EINVAL,
                "a directory cannot move into itself",
            ));
        }
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
        // Keys another door deletes meanwhile make the batch fail as a whole: look again.
        let mut tries = 0;
        loop {
            let mut batch = self.rename_batch((&from, &src), (&to, dst.as_ref()), exchange)?;
            let now = SystemTime::now();
            self.touch_parents(&mut batch, &[&from, &to], now)?;
            // A rename changes the moved entries' ctime (their records moved with them).
            let mut moved = vec![(&to, &src)];
            if exchange && let Some(d) = &dst {
                moved.push((&from, d));
            }
            for (at, e) in moved {
                if let Some(mut meta) = e.meta.clone() {
                    meta.ctime = now;
                    self.store.put_meta(&mut batch, at, &meta);
                }
            }
            match self.write(
                if exchange { "exchange" } else { "rename" },
                &from,
                batch,
                false,
            ) {
                Err(FsError::Engine(e)) if e.kind() == ErrorKind::NotFound && tries < 3 => {
                    tries += 1
                }
                r => break r?,
            }
        }
        let mut inodes = self.inodes.lock();
        if exchange {
            inodes.exchange(&from, &to);
        } else {
            inodes.rename(&from, &to);
        }
        Ok(())
    }

    /// The batch a rename is: every key of the source (and of the target, exchanged) moved by
    /// reference with the engine's `rename`, resolved when the batch lands. So a key another
    /// door writes meanwhile under a moved name moves with its new value, one it adds under the
    /// source stays where it was put, and none is ever deleted by a range: no write is lost.
    fn rename_batch(
        &self,
        (from, src): (&[u8], &Entry),
        (to, dst): (&[u8], Option<&Entry>),
        exchange: bool,
    ) -> Result<WriteBatch> {
        let (data, meta) = (&self.store.data, &self.store.meta);
        let keys = |key: &[u8], kind: Kind| -> Result<[Vec<Vec<u8>>; 2]> {
            Ok([
                self.store.keys_of(data, key, kind)?,
                self.store.keys_of(meta, key, kind)?,
            ])
        };
        let moving = keys(from, src.kind)?;
        let mut batch = WriteBatch::new();
        match (dst, exchange) {
            (Some(d), true) => {
                let coming = keys(to, d.kind)?;
                let aside = [EXCHANGE_ASIDE, from].concat();
                rename_keys(&mut batch, [data, meta], &moving, from, &aside);
                rename_keys(&mut batch, [data, meta], &coming, to, from);
                let aside_keys = moving
                    .clone()
                    .map(|ks| ks.iter().map(|k| path::rebase(k, from, &aside)).collect());
                rename_keys(&mut batch, [data, meta], &aside_keys, &aside, to);
            }
            (Some(d), false) => {
                // The target was checked empty (a directory) or is replaced (anything else).
                if d.kind == Kind::Dir {
                    batch.delete_cf(meta, meta_key(to, Kind::Dir));
                } else {
                    self.keep_if_held(&mut batch, to, d, true);
                    self.store.delete_entry(&mut batch, to, d.kind);
                }
                rename_keys(&mut batch, [data, meta], &moving, from, to);
            }
            (None, _) => rename_keys(&mut batch, [data, meta], &moving, from, to),
        }
        Ok(batch)
    }

    /// Adds to `batch` the records of the directories holding `keys` with their mtime and ctime
    /// moved to `now`, as a change of their entries moves them. A directory made by `mkdir` has
    /// a record, and the root always may; one only implied by the keys below it has none, and
    /// shows the mount's start as ever (writing one would make it outlive its last key).
    fn touch_parents(&self, batch: &mut WriteBatch, keys: &[&[u8]], now: SystemTime) -> Result<()> {
        let mut touched: Vec<&[u8]> = Vec::new();
        for key in keys {
            let (parent, _) = path::split_parent(key);
            if touched.contains(&parent) {
                continue;
            }
            touched.push(parent);
            let mut meta = match self.store.get_meta(&meta_key(parent, Kind::Dir))? {
                Some(m) if m.kind == Kind::Dir => m,
                _ if parent.is_empty() => self.default_record(Kind::Dir, self.epoch),
                _ => continue,
            };
            meta.mtime = now;
            meta.ctime = now;
            self.store.put_meta(batch, parent, &meta);
        }
        Ok(())
    }

    /// Adds to `batch` the move of the file at `key` to its orphan key while the kernel holds
    /// its inode (or, with `!keep_unopened`, only while a descriptor has it open). Unlinked or
    /// renamed over, the file stays readable and writable through its descriptors, and an open
    /// the kernel began on the inode before it went still finds its bytes, as on ext4 (not
    /// ESTALE). The bytes go when the kernel forgets the inode ([`FsCore::forgotten`]).
    fn keep_if_held(&self, batch: &mut WriteBatch, key: &[u8], e: &Entry, keep_unopened: bool) {
        if e.kind != Kind::File {
            return;
        }
        let mut inodes = self.inodes.lock();
        let Some(ino) = inodes.peek(key) else {
            return;
        };
        if keep_unopened || self.files.lock().is_open(ino) {
            batch.rename_cf(&self.store.data, key, orphan_key(ino));
            // Should the batch fail, the inode keeps its key and its forget deletes nothing.
            inodes.keep(ino);
        }
    }
}

/// Adds to `batch` the rename of each key (data keys, then metadata keys) from under `a` to the
/// same place under `b`.
fn rename_keys(
    batch: &mut WriteBatch,
    cfs: [&strata_engine::ColumnFamily; 2],
    keys: &[Vec<Vec<u8>>; 2],
    a: &[u8],
    b: &[u8],
) {
    for (cf, keys) in cfs.into_iter().zip(keys) {
        for k in keys {
            batch.rename_cf(cf, k, path::rebase(k, a, b));
        }
    }
}
