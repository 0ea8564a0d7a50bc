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

mod blob;
mod block;
mod bloom;
mod cache;
mod coding;
mod compaction;
mod compression;
mod db;
mod error;
mod events;
mod filename;
pub mod fs;
mod iter;
mod key;
mod memtable;
mod open_files;
mod options;
mod range_del;
mod snapshot;
mod sst;
mod stats;
#[cfg(test)]
mod test_dir;
mod time;
mod value;
mod verify;
mod version;
mod wal;

pub use blob::{BlobFileProperties, BlobFileState, Expiration, ValueInfo};
pub use compaction::{CompactionFilter, FilterDecision};
pub use db::{
    BlobTotals, BlockCacheProperties, CaughtUp, ColumnFamily, ColumnFamilyProperties, Db,
    DbIterator, Entries, FileProperties, LevelProperties, LiveFile, LiveFiles, LostFile,
    Properties, RangeEstimate, RangeTombstoneInfo, RangeTombstonePage, RepairReport, ReplicaStatus,
    Snapshot, TombstoneLocation, TryWrite, ValueFile, ValueReader, WriteBatch, repair_store,
};
pub use error::{Error, ErrorKind, Result};
pub use events::{
    BlobDeletionReason, BlobFilesDeletedInfo, BlobGcInfo, CompactionInfo, CompactionReason,
    EventListener, FlushInfo, StallCause,
};
pub use fs::{
    Durability, FileLock, FileSystem, PositionalFile, RandomAccessFile, StdFileSystem,
    StorageStats, WritableFile,
};
pub use key::SequenceNumber;
pub use options::{
    CacheKind, ColumnFamilyOptions, Compression, Executor, MAX_KEY_SIZE, MAX_VALUE_SIZE,
    MAX_WRITE_SIZE, Options, ReadOptions, WalRecovery, WriteOptions,
};
pub use sst::{BlobReference, TableProperties};
pub use stats::Statistics;
pub use time::{Clock, ManualClock, SystemClock};
pub use value::{PinnableValue, ValueRange};
pub use verify::{FileReport, VerifyReport, verify_live, verify_store};

/// Decoders' entry points for the fuzz targets (`fuzz/`), behind the `internals` feature. Not
/// part of the API.
#[cfg(any(test, feature = "internals"))]
#[doc(hidden)]
#[path = "fuzz.rs"]
pub mod __fuzz;

/// Thin handles on internals for the criterion benches in `benches/`, behind the `internals`
/// feature. Not part of the API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod __bench {
    use std::sync::Arc;

    use crate::block::{Block, BlockBuilder};
    use crate::iter::InternalIterator;
    use crate::key::Lookup;
    use crate::key::ValueKind;
    use crate::memtable::MemTable;

    /// A memtable.
    #[derive(Debug)]
    pub struct Memtable(Arc<MemTable>);

    impl Memtable {
        pub fn new(write_buffer_size: usize) -> Self {
            Memtable(Arc::new(MemTable::new(0, write_buffer_size, 0.0)))
        }
        pub fn put(&self, seq: u64, key: &[u8], value: &[u8]) {
            self.0.add(seq, ValueKind::Put, key, value);
        }
        pub fn contains(&self, key: &[u8], seq: u64) -> bool {
            matches!(self.0.get(key, seq, 0), Lookup::Found(_))
        }
    }

    /// A table filter over `keys` at `bits_per_key`.
    pub fn build_table_filter(keys: &[Vec<u8>], bits_per_key: u32) -> Vec<u8> {
        let mut b = crate::bloom::FilterBuilder::new(bits_per_key);
        for k in keys {
            b.add_key(k);
        }
        b.finish()
    }

    /// Queries a table filter.
    pub fn table_filter_may_contain(filter: &[u8], key: &[u8]) -> bool {
        crate::bloom::may_contain(filter, crate::bloom::key_hash(key))
    }

    /// A memtable filter of `bytes` bytes.
    #[derive(Debug)]
    pub struct MemtableFilter(crate::bloom::MemtableBloom);

    impl MemtableFilter {
        pub fn new(bytes: usize) -> Self {
            MemtableFilter(crate::bloom::MemtableBloom::new(bytes, 6))
        }
        pub fn add(&self, key: &[u8]) {
            self.0.add(crate::bloom::key_hash(key));
        }
        pub fn may_contain(&self, key: &[u8]) -> bool {
            self.0.may_contain(crate::bloom::key_hash(key))
        }
    }

    /// Encodes sorted (user key, value) pairs as one block with the given restart interval.
    pub fn encode_block(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Vec<u8> {
        let mut b = BlockBuilder::new(restart_interval);
        for (i, (k, v)) in entries.iter().enumerate() {
            b.add(
                &crate::key::internal_key(k, i as u64, ValueKind::Put as u8),
                v,
            );
        }
        b.finish()
    }

    /// Decodes a block and walks every entry; returns the bytes seen.
    pub fn scan_block(data: Vec<u8>) -> usize {
        let Ok(block) = Block::new(data, std::path::Path::new("bench")) else {
            return 0;
        };
        let block = Arc::new(block);
        let mut it = block.iter();
        let mut n = 0;
        it.seek_to_first();
        while it.valid() {
            n += it.key().len() + it.value().len();
            it.next();
        }
        n
    }

    /// Decodes a block and seeks to `user_key`; true when it is there.
    pub fn seek_block(block_data: &[u8], user_key: &[u8]) -> bool {
        let Ok(block) = Block::new(block_data.to_vec(), std::path::Path::new("bench")) else {
            return false;
        };
        let mut it = Arc::new(block).iter();
        it.seek(&crate::key::lookup_key(user_key, crate::key::MAX_SEQUENCE));
        it.valid() && crate::key::user_key(it.key()) == user_key
    }
}
