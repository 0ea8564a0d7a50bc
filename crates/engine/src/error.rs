//! The engine's one error type.

use std::path::PathBuf;

/// Every fallible engine call returns this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused an operation; `context` says which and on what path.
    #[error("I/O error: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A checksum or structural check failed; `file` names the damaged file.
    #[error("corruption in {}: {detail}", file.display())]
    Corruption { file: PathBuf, detail: String },
    /// The caller passed something the engine does not accept (oversized key, bad option, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Another process or handle holds the resource.
    #[error("busy: {0}")]
    Busy(String),
    /// The store was closed; no further calls are accepted.
    #[error("the store is closed")]
    Closed,
    /// A feature the platform does not offer (e.g. threads under WASI).
    #[error("not supported: {0}")]
    NotSupported(String),
    /// A background job failed earlier; writes are refused until the store is reopened.
    #[error("background error, writes are stopped: {0}")]
    Background(String),
    /// A write (or flush, compaction, column family change) on a store opened read-only; names
    /// the store's directory.
    #[error("{0} is open read-only")]
    ReadOnly(String),
    /// A write that needs an existing value found none (a partial write, a copy or a rename of
    /// a missing, deleted or expired key).
    #[error("not found: {0}")]
    NotFound(String),
    /// Another writer took the store over (a bucket store's newer writer epoch): this handle
    /// acknowledges nothing more; reopen to read what the new writer wrote.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The storage could not be reached (a bucket store's server is down or unreachable): the
    /// same call may succeed later, and writes stopped by it resume by themselves.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// A read asked to answer from memory (`ReadOptions::cache_only`) would have had to read a
    /// file: ask again without the option.
    #[error("incomplete: {0}")]
    Incomplete(String),
}

/// What kind of failure an [`Error`] is: the one thing a face maps to its own codes (an errno,
/// an HTTP status, a WIT variant), in one place each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The device is full (`ENOSPC`, or a quota): freeing space lets the call succeed.
    NoSpace,
    /// Any other failure of the operating system.
    Io,
    /// A file is damaged; the error names it.
    Corruption,
    /// The caller passed something the engine does not accept.
    InvalidArgument,
    /// Another process or handle holds the store.
    Busy,
    /// The store was closed.
    Closed,
    /// Not available on this platform or in this mode.
    NotSupported,
    /// An earlier background failure stopped writes until the store reopens.
    Background,
    /// The store was opened read-only.
    ReadOnly,
    /// The key a write needs has no value.
    NotFound,
    /// Another writer took the store over; this handle writes no more.
    Fenced,
    /// The storage could not be reached; trying again later may succeed.
    Unavailable,
    /// A read asked to answer from memory would have had to read a file.
    Incomplete,
}

impl ErrorKind {
    /// Whether writes this stopped resume by themselves once the cause passes (space comes
    /// back, the storage answers again), as opposed to staying stopped until a reopen.
    pub fn is_transient(self) -> bool {
        matches!(self, ErrorKind::NoSpace | ErrorKind::Unavailable)
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn corruption(file: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            detail: detail.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                    ErrorKind::NoSpace
                }
                _ => ErrorKind::Io,
            },
            Error::Corruption { .. } => ErrorKind::Corruption,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Busy(_) => ErrorKind::Busy,
            Error::Closed => ErrorKind::Closed,
            Error::NotSupported(_) => ErrorKind::NotSupported,
            Error::Background(_) => ErrorKind::Background,
            Error::ReadOnly(_) => ErrorKind::ReadOnly,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Fenced(_) => ErrorKind::Fenced,
            Error::Unavailable(_) => ErrorKind::Unavailable,
            Error::Incomplete(_) => ErrorKind::Incomplete,
        }
    }

    /// True for `Corruption`.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A copy suitable for handing to several waiters (io::Error is not Clone).
    pub(crate) fn duplicate(&self) -> Self {
        match self {
            Error::Io { context, source } => Error::Io {
                context: context.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption { file, detail } => Error::Corruption {
                file: file.clone(),
                detail: detail.clone(),
            },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::Busy(s) => Error::Busy(s.clone()),
            Error::Closed => Error::Closed,
            Error::NotSupported(s) => Error::NotSupported(s.clone()),
            Error::Background(s) => Error::Background(s.clone()),
            Error::ReadOnly(s) => Error::ReadOnly(s.clone()),
            Error::NotFound(s) => Error::NotFound(s.clone()),
            Error::Fenced(s) => Error::Fenced(s.clone()),
            Error::Unavailable(s) => Error::Unavailable(s.clone()),
            Error::Incomplete(s) => Error::Incomplete(s.clone()),
        }
    }
}

/// A key as error messages print it: bytes escaped, cut after 64 of them.
pub(crate) fn show_key(key: &[u8]) -> String {
    const SHOWN: usize = 64;
    let mut s: String = key[..key.len().min(SHOWN)].escape_ascii().to_string();
    if key.len() > SHOWN {
        s.push_str(&format!("... ({} bytes)", key.len()));
    }
    format!("\"{s}\"")
}
