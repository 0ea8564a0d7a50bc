//! User extended attributes, kept in the metadata record, within limits as ext4 has them: a
//! value of at most 64 KiB (`E2BIG` past it); one entry's names, each with its NUL, at most
//! 64 KiB, so a `listxattr` always fits the kernel's list; and its names and values together at
//! most 128 KiB, so the record a flush rewrites stays small (`ENOSPC` past either).

use super::*;

/// The largest value, as the kernel's `XATTR_SIZE_MAX`.
const VALUE_MAX: usize = 64 << 10;
/// What one entry's names may take, each with its NUL, as the kernel's `XATTR_LIST_MAX`.
const LIST_MAX: usize = 64 << 10;
/// What one entry's names and values may take together.
const ENTRY_MAX: usize = 128 << 10;

/// Whether `meta` has room for attribute `name` set to `value` (replacing any it has).
fn check_room(meta: &Meta, name: &[u8], value: &[u8]) -> Result<()> {
    if value.len() > VALUE_MAX {
        return Err(FsError::posix(libc::E2BIG, "attribute value over 64 KiB"));
    }
    let others = meta.xattrs.iter().filter(|(n, _)| n != name);
    let names: usize = others.clone().map(|(n, _)| n.len() + 1).sum::<usize>() + name.len() + 1;
    let values: usize = others.map(|(_, v)| v.len()).sum::<usize>() + value.len();
    if names > LIST_MAX || names + values > ENTRY_MAX {
        return Err(FsError::posix(
            libc::ENOSPC,
            "no room for the attribute: an entry's names are limited to 64 KiB, \
             names and values to 128 KiB",
        ));
    }
    Ok(())
}

impl FsCore {
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
        check_room(&meta, name.as_bytes(), value)?;
        meta.set_xattr(name.as_bytes(), value);
        meta.ctime = SystemTime::now();
        if is_orphan(&key) {
            // An unlinked file open somewhere keeps no record (its path is gone).
            return Err(FsError::posix(libc::ENOENT, "the file was unlinked"));
        }
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
        meta.ctime = SystemTime::now();
        if is_orphan(&key) {
            // An unlinked file open somewhere keeps no record (its path is gone).
            return Err(FsError::posix(libc::ENOENT, "the file was unlinked"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn errno(r: Result<()>) -> i32 {
        r.map_or_else(|e| i32::from(e.errno()), |()| 0)
    }

    #[test]
    fn attributes_stay_within_ext4s_limits() {
        let mut m = Meta::new(Kind::File, 0o644, 0, 0, SystemTime::UNIX_EPOCH);
        assert_eq!(errno(check_room(&m, b"user.a", &[0; VALUE_MAX])), 0);
        assert_eq!(
            errno(check_room(&m, b"user.a", &[0; VALUE_MAX + 1])),
            libc::E2BIG
        );
        m.set_xattr(b"user.a", &[0; VALUE_MAX]);
        assert_eq!(errno(check_room(&m, b"user.b", &[0; VALUE_MAX - 100])), 0);
        assert_eq!(
            errno(check_room(&m, b"user.b", &[0; VALUE_MAX])),
            libc::ENOSPC
        );
        // Replacing a value counts only the new one.
        assert_eq!(errno(check_room(&m, b"user.a", &[0; 10])), 0);
        // Names alone are bounded too.
        let mut n = Meta::new(Kind::File, 0o644, 0, 0, SystemTime::UNIX_EPOCH);
        n.set_xattr(&[b'n'; LIST_MAX - 10], b"");
        assert_eq!(errno(check_room(&n, b"user.b", b"")), 0);
        assert_eq!(errno(check_room(&n, b"user.bcdefghijk", b"")), libc::ENOSPC);
    }
}
