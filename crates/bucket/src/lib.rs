//! A Strata store in an S3-compatible bucket: the engine's files as objects through
//! `object_store`, a log of create-only records that orders every change and fences every
//! writer but the newest, and a local working copy the engine runs on (doc/format.md, "A store
//! in a bucket").
//!
//! ```no_run
//! use strata_bucket::{BucketConfig, BucketFs, BucketUrl, Durability};
//! use strata_engine::{Db, Options};
//! # fn main() -> strata_engine::Result<()> {
//! let url = BucketUrl::parse("s3://my-bucket/stores/one")?;
//! let fs = BucketFs::open(&BucketConfig {
//!     endpoint: Some("http://127.0.0.1:8333".into()),
//!     durability: Durability::Local,
//!     ..BucketConfig::new(url, "/var/cache/strata/one".into())
//! })?;
//! let root = fs.root().to_path_buf();
//! let opts = Options { create_if_missing: true, filesystem: std::sync::Arc::new(fs), ..Options::default() };
//! let db = Db::open(&root, opts)?;
//! # Ok(()) }
//! ```

pub mod backup;
mod cache;
pub mod checkpoint;
mod client;
mod clock;
mod clone;
mod copy;
mod fault;
mod files;
mod follow;
mod fs;
mod gc;
mod lease;
mod local_backup;
mod local_io;
mod log;
mod mounts;
mod open;
mod paged;
mod pin;
mod probe;
mod record;
mod replay;
mod shared;
mod url;
mod working_copy;

pub use checkpoint::CheckpointInfo;
pub use client::{Client, Requests};
pub use clone::{CloneReport, clone_store};
pub use fault::{Fault, FaultPlan, Request};
pub use fs::BucketFs;
pub use gc::GcReport;
pub use open::{BucketConfig, Credentials};
pub use pin::Pin;
pub use probe::check as check_conformance;
pub use strata_engine::Durability;
pub use url::BucketUrl;
