//! Strata's storage engine: an LSM tree of RocksDB's class.
//!
//! Writes go to a write-ahead log and a memtable; full memtables are flushed to sorted tables (L0);
//! reads merge the memtables and tables at a snapshot. See `doc/architecture.md` for the design and
//! `doc/format.md` for every on-disk format.
//!
//! ```
//! # fn main() -> strata_engine::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! use strata_engine::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
//! let db = Db::open(dir.path(), Options::default())?;
//! db.put("users/alice", "1")?;
//! let mut batch = WriteBatch::new();
//! batch.put("users/bob", "2");
//! batch.delete("users/alice");
//! db.write(batch, &WriteOptions { sync: true, ..Default::default() })?;
//! assert_eq!(db.get("users/bob")?.as_deref(), Some(&b"2"[..]));
//! let mut it = db.iter(&ReadOptions::default())?;
//! it.seek_to_first();
//! assert_eq!(it.key(), b"users/bob");
//! # Ok(()) }
//! ```

mod batch;
mod cache;
mod coding;
mod db;
mod error;
mod filename;
mod filter;
mod fs;
mod iter;
mod key;
mod memtable;
mod options;
mod sst;
mod stats;
mod value;
mod version;
mod wal;

pub use batch::WriteBatch;
pub use db::{Db, LevelProperties, Properties, Snapshot};
pub use error::{Error, Result};
pub use fs::{FileLock, FileSystem, RandomAccessFile, StdFileSystem, WritableFile};
pub use iter::DbIterator;
pub use key::SequenceNumber;
pub use options::{
    Compression, Executor, MAX_KEY_SIZE, MAX_VALUE_SIZE, Options, ReadOptions, WalRecovery, WriteOptions,
};
pub use sst::TableProperties;
pub use stats::Statistics;
pub use value::PinnableValue;
