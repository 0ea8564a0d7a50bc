//! Backups the server makes of the store it serves (`strata serve --backup-to DEST`).
//!
//! Invariants:
//! - backups go only to the one destination the operator named when starting the server: a
//!   client may start a backup and list them, never say where one goes;
//! - the server makes one backup at a time; a request while one runs is refused (409), never
//!   queued;
//! - the API knows backups only through [`BackupTarget`], so it needs nothing of buckets: the
//!   command that starts the server supplies the target.

use serde::Serialize;
use strata_engine::{Db, Result};
use utoipa::ToSchema;

/// Where and how the served store is backed up.
pub trait BackupTarget: Send + Sync + std::fmt::Debug {
    /// The destination, as the operator named it (no secret is in it).
    fn destination(&self) -> String;
    /// Backs up the store `db` serves, while it keeps serving (blocking): every write
    /// acknowledged before the call, with `flush` those made without the WAL too.
    fn create(&self, db: &Db, flush: bool) -> Result<BackupMade>;
    /// The destination's backups, oldest first.
    fn list(&self) -> Result<Vec<BackupSummary>>;
}

/// One backup at the destination.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BackupSummary {
    pub number: u64,
    /// When it was made, in milliseconds since the Unix epoch.
    pub created_millis: u64,
    /// The store it holds (`file:///PATH` or `s3://BUCKET/PREFIX`).
    pub source: String,
    /// The store's files it holds, the objects that hold them, and their bytes.
    pub files: usize,
    pub objects: usize,
    pub bytes: u64,
}

/// What one backup did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BackupMade {
    pub backup: BackupSummary,
    pub destination: String,
    /// Objects copied now, and their bytes.
    pub copied: usize,
    pub bytes_copied: u64,
    /// Objects an earlier backup had copied already.
    pub already_there: usize,
}
