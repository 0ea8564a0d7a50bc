//! Strata as a FUSE filesystem: the file `MNT/users/alice.json` is the key `users/alice.json` of
//! the mounted column family, and its bytes are the value, unchanged. What a value cannot hold
//! (mode, owner, times, empty directories, symlinks, fifos, user xattrs) lives in a metadata
//! column family beside it. `doc/fuse.md` has the layout and the rules.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use strata_engine::{Db, Options};
//! use strata_fusefs::{FsConfig, MountConfig, StrataFs};
//!
//! let mut opts = Options::default();
//! strata_fusefs::prepare_options(&mut opts, "default");
//! let db = Arc::new(Db::open("/tmp/store", opts)?);
//! let fs = StrataFs::new(db.clone(), FsConfig::default())?;
//! let session = strata_fusefs::spawn(fs, "/tmp/mnt".as_ref(), &MountConfig::default())?;
//! // ... the mount and `db` see the same keys ...
//! session.unmount()?;
//! # Ok(()) }
//! ```

mod awake;
mod error;
mod fs;
mod inodes;
mod invalidate;
pub mod meta;
mod mount;
pub mod path;
mod pending;
mod serving;
mod store;

pub use awake::{BURST, Burst, CPU_LATENCY_DEVICE};
pub use error::{FsError, Result};
pub use fs::{DEFAULT_TTL, FsConfig, FsStats, StrataFs, WRITE_BACK};
pub use invalidate::{Invalidator, ReplicaInvalidation};
pub use mount::{
    MIN_THREADS, MountConfig, Mounted, Stopped, check_fuse, is_mounted, mount_source, run, spawn,
    unmount,
};
pub use store::{
    data_cf_options, delete_range_with_metadata, delete_with_metadata, meta_cf_name,
    prepare_options,
};
