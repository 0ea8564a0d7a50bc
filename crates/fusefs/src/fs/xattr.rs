//! User extended attributes, kept in the metadata record.

use super::*;

impl StrataFs {
    /// An entry's key and its record (or the defaults), for an attribute change or read.
    pub(super) fn meta_for_xattr(&self, ino: u64) -> Result<(Vec<u8>, Meta)> {
        let key = self.key_of(ino)?;
        let e = self.entry(&key, Some(ino))?;
        Ok((key, self.record_of(&e)))
    }

    pub(super) fn do_setxattr(
        &self,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
    ) -> Result<()> {
        check_user_xattr(name)?;
        self.check_writable()?;
        let _tree = self.tree.read();
        let _record = self.record_lock(ino);
        let (key, mut meta) = self.meta_for_xattr(ino)?;
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

    pub(super) fn do_removexattr(&self, ino: u64, name: &OsStr) -> Result<()> {
        check_user_xattr(name)?;
        self.check_writable()?;
        let _tree = self.tree.read();
        let _record = self.record_lock(ino);
        let (key, mut meta) = self.meta_for_xattr(ino)?;
        if !meta.remove_xattr(name.as_bytes()) {
            return Err(FsError::posix(libc::ENODATA, "no such attribute"));
        }
        let mut batch = WriteBatch::new();
        self.store.put_meta(&mut batch, &key, &meta);
        self.write("removexattr", &key, batch, false)
    }
}
/// Only `user.*` attributes are stored; the kernel keeps the others' meaning.
pub(super) fn check_user_xattr(name: &OsStr) -> Result<()> {
    if name.as_bytes().starts_with(b"user.") {
        Ok(())
    } else {
        Err(FsError::posix(
            libc::EOPNOTSUPP,
            "only user.* attributes are stored",
        ))
    }
}

pub(super) fn xattr_reply(reply: ReplyXattr, data: &[u8], size: u32) {
    if size == 0 {
        reply.size(data.len() as u32);
    } else if data.len() > size as usize {
        reply.error(Errno::from_i32(libc::ERANGE));
    } else {
        reply.data(data);
    }
}
