//! `statfs`: the store's size against its file system's free space.

use super::*;

impl FsCore {
    pub(super) fn do_statfs(&self) -> Result<(u64, u64, u64, u64, u64)> {
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
}
