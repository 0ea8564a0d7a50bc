//! Changes to the tree: new entries, unlink and rmdir, rename (files and whole subtrees).

use super::*;

impl StrataFs {
    /// Makes a new non-directory entry `name` in `parent` holding `meta` (and, for a file, no
    /// bytes yet).
    pub(super) fn make(&self, parent: u64, name: &OsStr, meta: Meta) -> Result<(Vec<u8>, Entry)> {
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
        let mut batch = WriteBatch::new();
        let moving = self.store.collect(&from, src.kind)?;
        let coming = match (&dst, exchange) {
            (Some(d), true) => Some(self.store.collect(&to, d.kind)?),
            _ => None,
        };
        // A directory's record (`dir/`) is the first key of the subtree these delete.
        self.store.delete_entry(&mut batch, &from, src.kind);
        if let Some(d) = &dst {
            self.store.delete_entry(&mut batch, &to, d.kind);
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
}
