//! The host's errors: the guest's own (the WIT `error` variant, one for one) and what the sandbox
//! reports about a guest it had to stop.

/// Why a call through the component failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("corruption: {0}")]
    Corruption(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("I/O: {0}")]
    Io(String),
    #[error("busy: {0}")]
    Busy(String),
    #[error("the store is closed")]
    Closed,
    /// A write that needs an existing value found none.
    #[error("not found: {0}")]
    NotFound(String),
    /// `wasi:keyvalue` was asked for a bucket that names no column family.
    #[error("no bucket {0:?}: buckets are column families, and there is none of that name")]
    NoSuchBucket(String),
    #[error("{0}")]
    Other(String),
    /// The guest ran past the deadline of one call and was stopped; reopen to go on.
    #[error("the guest ran past its deadline of {0:?} for one call and was stopped")]
    Deadline(std::time::Duration),
    /// The guest asked for more memory than its cap; reopen to go on.
    #[error("the guest asked for more than its memory cap of {0} bytes and was stopped")]
    MemoryLimit(u64),
    /// The guest used up the fuel of one call; reopen to go on.
    #[error("the guest ran out of fuel ({0} units for one call) and was stopped")]
    OutOfFuel(u64),
    /// The guest failed in a way it could not report (a panic, a trap); reopen to go on.
    #[error("the guest trapped: {0}")]
    Trap(String),
    /// The sandbox could not be set up (the directory, the component, the compiled cache).
    #[error("{0}")]
    Host(String),
}

impl Error {
    /// True when the instance was stopped and every later call answers `Closed`.
    pub fn stopped_the_guest(&self) -> bool {
        matches!(
            self,
            Error::Deadline(_) | Error::MemoryLimit(_) | Error::OutOfFuel(_) | Error::Trap(_)
        )
    }
}

pub type Result<T> = std::result::Result<T, Error>;
