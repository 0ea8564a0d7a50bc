//! Which kind of filesystem a directory is on, as far as a write that must not wait cares: an
//! append to a file on a local disk goes to the page cache, one on a network filesystem (NFS,
//! SMB, Ceph, 9p...) or a FUSE filesystem may wait on a server or another process.
//! `Db::try_write` commits on the caller's thread only on a local one.

use std::path::Path;

/// Filesystems whose writes may wait on something other than this machine's page cache and
/// disks, by `statfs`'s `f_type` (linux/magic.h and the filesystems' own headers).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const NOT_LOCAL: &[(u64, &str)] = &[
    (0x6969, "nfs"),
    (0x6573_5546, "fuse"),
    (0xff53_4d42, "cifs"),
    (0xfe53_4d42, "smb2"),
    (0x517b, "smb"),
    (0x564c, "ncp"),
    (0x0102_1997, "9p"),
    (0x00c3_6400, "ceph"),
    (0x5346_414f, "afs"),
    (0x6b41_4653, "kafs"),
    (0x7375_7245, "coda"),
    (0x0bd0_0bd0, "lustre"),
    (0x4750_4653, "gpfs"),
    (0x1983_0326, "beegfs"),
    (0x2003_0528, "orangefs"),
    // Shared-disk filesystems: a write may wait on the cluster's lock manager.
    (0x0116_1970, "gfs2"),
    (0x7461_636f, "ocfs2"),
    // A host's folder in a virtual machine (virtiofs reports FUSE's).
    (0x786f_4256, "vboxsf"),
    (0x7c7c_6673, "prl_fs"),
];

/// Copy-on-write filesystems: a page written back since it was populated takes a new block at
/// the next store into it, which on a full disk faults (SIGBUS) instead of failing a `write`.
/// Files there are not written through a mapping (`mapped.rs`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const COPY_ON_WRITE: &[(u64, &str)] = &[
    (0x9123_683e, "btrfs"),
    (0x2fc1_2fc1, "zfs"),
    (0xca45_1a4e, "bcachefs"),
];

/// The name of the not-local filesystem `f_type` names, if it names one.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn not_local(f_type: u64) -> Option<&'static str> {
    NOT_LOCAL
        .iter()
        .find(|(magic, _)| *magic == f_type)
        .map(|(_, name)| *name)
}

/// Whether an append to a file in `dir` waits only on this machine: false on a network or FUSE
/// filesystem, and when `dir` cannot be examined (the careful answer).
#[cfg(target_os = "linux")]
pub(crate) fn appends_are_local(dir: &Path) -> bool {
    f_type(dir).is_some_and(|t| not_local(t).is_none())
}

/// Whether a file in `dir` may be written through a shared mapping: on a local filesystem that
/// is not copy-on-write, and false when `dir` cannot be examined.
#[cfg(target_os = "linux")]
pub(crate) fn mapping_is_safe(dir: &Path) -> bool {
    f_type(dir).is_some_and(|t| {
        not_local(t).is_none() && !COPY_ON_WRITE.iter().any(|(magic, _)| *magic == t)
    })
}

/// `statfs`'s `f_type` for `dir`, or `None` when it cannot be examined.
#[cfg(target_os = "linux")]
fn f_type(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c_dir` is a NUL-terminated path that outlives the call, and `st` is writable
    // memory of the size `statfs` fills; it is read only after the call succeeded.
    let rc = unsafe { libc::statfs(c_dir.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: `statfs` returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // `f_type`'s integer type differs between libc targets; the magic numbers fit in 32 bits.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Some((st.f_type as u64) & 0xffff_ffff)
}

/// Elsewhere the filesystem's kind is not known: appends are taken to be local, as before.
#[cfg(not(target_os = "linux"))]
pub(crate) fn appends_are_local(dir: &Path) -> bool {
    let _ = dir;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_and_fuse_filesystems_are_not_local() {
        assert_eq!(not_local(0x6969), Some("nfs"));
        assert_eq!(not_local(0x6573_5546), Some("fuse"));
        assert_eq!(not_local(0xff53_4d42), Some("cifs"));
        // ext4, xfs, btrfs, tmpfs, overlayfs, vxfs.
        for local in [
            0xef53,
            0x5846_5342,
            0x9123_683e,
            0x0102_1994,
            0x794c_7630,
            0xa501_fcf5,
        ] {
            assert_eq!(not_local(local), None, "{local:#x}");
        }
        // Each number is its filesystem's, where the libc crate names it too.
        #[cfg(target_os = "linux")]
        for (magic, name) in [
            (libc::NFS_SUPER_MAGIC as u64, "nfs"),
            (libc::FUSE_SUPER_MAGIC as u64, "fuse"),
            (libc::SMB_SUPER_MAGIC as u64, "smb"),
            (libc::AFS_SUPER_MAGIC as u64, "afs"),
            (libc::CODA_SUPER_MAGIC as u64, "coda"),
            (libc::OCFS2_SUPER_MAGIC as u64, "ocfs2"),
        ] {
            assert_eq!(not_local(magic), Some(name), "{magic:#x}");
        }
        #[cfg(target_os = "linux")]
        assert_eq!(COPY_ON_WRITE[0].0, libc::BTRFS_SUPER_MAGIC as u64);
        let mut magics: Vec<_> = NOT_LOCAL
            .iter()
            .chain(COPY_ON_WRITE)
            .map(|(m, _)| m)
            .collect();
        magics.sort_unstable();
        magics.dedup();
        assert_eq!(
            magics.len(),
            NOT_LOCAL.len() + COPY_ON_WRITE.len(),
            "a number listed twice"
        );
    }

    /// The test's own directory is on a local disk or tmpfs (never a network mount on the
    /// machines the tests run on); a path that does not exist gets the careful answer.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_local_directory_is_local_and_a_missing_one_is_not() {
        let dir = crate::test_dir::tempdir();
        assert!(appends_are_local(dir.path()));
        assert!(!appends_are_local(&dir.path().join("missing")));
    }
}
