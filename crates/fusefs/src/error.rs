//! The crate's error, and the one place engine and I/O errors become errnos.

use fuser::Errno;
use strata_engine::ErrorKind;

/// Why a filesystem operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Engine(#[from] strata_engine::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// A metadata record that does not decode; the key names the entry.
    #[error("{key}: {source}")]
    BadMeta {
        key: String,
        source: crate::meta::BadRecord,
    },
    /// A plain POSIX failure (`ENOENT`, `EEXIST`, ...), with what caused it.
    #[error("{why}")]
    Posix { errno: i32, why: String },
}

/// The crate's result type.
pub type Result<T, E = FsError> = std::result::Result<T, E>;

impl FsError {
    pub(crate) fn posix(errno: i32, why: impl Into<String>) -> FsError {
        FsError::Posix {
            errno,
            why: why.into(),
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> FsError {
        FsError::Io {
            context: context.into(),
            source,
        }
    }

    /// What the kernel is told.
    pub fn errno(&self) -> Errno {
        Errno::from_i32(self.raw_errno())
    }

    /// The store refused the change for a full disk.
    pub(crate) fn is_no_space(&self) -> bool {
        self.raw_errno() == libc::ENOSPC
    }

    fn raw_errno(&self) -> i32 {
        match self {
            FsError::Posix { errno, .. } => *errno,
            FsError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            FsError::BadMeta { .. } => libc::EIO,
            FsError::Engine(e) => match e.kind() {
                ErrorKind::NoSpace => libc::ENOSPC,
                // A partial write to a key another door deleted meanwhile.
                ErrorKind::NotFound => libc::ENOENT,
                // Another writer owns the store now: it reads on, but writes no more.
                ErrorKind::ReadOnly | ErrorKind::Fenced => libc::EROFS,
                ErrorKind::InvalidArgument => libc::EINVAL,
                ErrorKind::Busy => libc::EBUSY,
                ErrorKind::NotSupported => libc::EOPNOTSUPP,
                ErrorKind::Closed => libc::ESHUTDOWN,
                // A bucket store's server unreachable: the write may succeed later, but this
                // one failed, as a disk's would.
                ErrorKind::Io
                | ErrorKind::Corruption
                | ErrorKind::Background
                | ErrorKind::Unavailable => libc::EIO,
                _ => libc::EIO,
            },
        }
    }

    /// Whether this is the caller's doing (logged quietly) rather than the store's.
    pub(crate) fn is_expected(&self) -> bool {
        matches!(self, FsError::Posix { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_error_kinds_map_to_errnos() {
        let ro = FsError::from(strata_engine::Error::ReadOnly("d".into()));
        assert_eq!(i32::from(ro.errno()), libc::EROFS);
        let fenced = FsError::from(strata_engine::Error::Fenced("newer writer".into()));
        assert_eq!(i32::from(fenced.errno()), libc::EROFS);
        let bad = FsError::from(strata_engine::Error::InvalidArgument("x".into()));
        assert_eq!(i32::from(bad.errno()), libc::EINVAL);
        let gone = FsError::posix(libc::ENOENT, "no such entry");
        assert_eq!(i32::from(gone.errno()), libc::ENOENT);
        assert!(gone.is_expected());
        let corrupt = FsError::from(strata_engine::Error::Corruption {
            file: "000001.sst".into(),
            detail: "bad".into(),
        });
        assert_eq!(i32::from(corrupt.errno()), libc::EIO);
        assert!(!corrupt.is_expected());
    }
}
