//! Knobs for opening a store, reading and writing.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::fs::{FileSystem, StdFileSystem};
use crate::snapshot::Snapshot;
use crate::time::{Clock, SystemClock};

/// How a shard chooses what to evict.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CacheKind {
    /// Least recently used, with a high-priority pool for index and filter blocks: new data blocks
    /// enter below the pool and join it once hit again, so one scan cannot flush hot blocks.
    #[default]
    Lru,
    /// CLOCK: lookups take the shard lock shared and only set an entry's clock count, so readers
    /// never serialise on list updates; eviction sweeps a hand over the entries.
    Clock,
}

/// Largest accepted user key.
pub const MAX_KEY_SIZE: usize = 8 << 20;
/// Why a key of `len` bytes is refused, if it is too large.
pub(crate) fn oversized_key(len: usize) -> Option<String> {
    (len > MAX_KEY_SIZE).then(|| format!("key of {len} bytes exceeds the limit of {MAX_KEY_SIZE}"))
}

/// Largest value a key holds. One above [`MAX_WRITE_SIZE`] is built by partial writes
/// (`write_at`, `append`, `truncate`) as a list of pieces, each from a write of its own. The
/// list is rewritten at each write, and it grows with the value: pieces of 1 MiB or more are
/// never folded (a 64 GiB value written in 1 MiB steps has 65,536, about 1.3 MiB of list),
/// and holes are not folded either, so sparse small writes add pieces without bound. This
/// limit keeps the common case (large sequential steps) to a list a write can afford. Reads
/// of a whole value stop at `MAX_WRITE_SIZE`; longer ones are read by range.
pub const MAX_VALUE_SIZE: u64 = 64 << 30;

/// Largest number of bytes one write carries: a whole value (`put`, a value file) or the data
/// of one partial write. A blob record's value length is 32 bits.
pub const MAX_WRITE_SIZE: u64 = 3 << 30;

/// Per-block compression of tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Blocks are stored as built.
    None,
    /// zstd at [`ColumnFamilyOptions::zstd_level`]; a block that does not shrink by 1/8 is stored raw.
    #[default]
    Zstd,
}

/// What recovery does with a damaged WAL record that is followed by intact ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub enum WalRecovery {
    /// A damaged tail (a write cut short by a crash) is dropped; damage in the middle fails `open`
    /// with `Corruption`, because records after it were acknowledged.
    #[default]
    TolerateTornTail,
    /// Damaged records anywhere are skipped and counted; what follows them is replayed.
    SkipCorrupted,
}

/// Who runs flushes and compactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Executor {
    /// A pool of `max_background_jobs` threads.
    Threads,
    /// No threads: background work runs when the embedder calls [`crate::Db::maintenance`], or inline
    /// in a write that would otherwise have to wait for it. The only choice under WASI.
    Inline,
}

impl Default for Executor {
    fn default() -> Self {
        if cfg!(target_os = "wasi") {
            Executor::Inline
        } else {
            Executor::Threads
        }
    }
}

/// Options of one column family: its memtables, its tables and how it compacts. The default column
/// family takes them from [`Options::cf`]; [`crate::Db::create_cf`] takes its own. Every field
/// but the compaction filter is recorded in the MANIFEST and restored on open.
#[derive(Debug, Clone)]
pub struct ColumnFamilyOptions {
    /// A memtable becomes immutable once it holds this many bytes (default 64 MiB).
    pub write_buffer_size: usize,
    /// Memtables (active plus immutable) before writes wait for a flush (default 2).
    pub max_write_buffer_number: usize,
    /// Target uncompressed size of a data block (default 4 KiB).
    pub block_size: usize,
    /// Keys between restart points in a block (default 16).
    pub block_restart_interval: usize,
    /// Compression of table blocks.
    pub compression: Compression,
    /// zstd level when `compression` is `Zstd` (default 3).
    pub zstd_level: i32,
    /// Bloom filter bits per key in tables; 0 writes no filter (default 10).
    pub bloom_bits_per_key: u32,
    /// Size of each memtable's Bloom filter as a fraction of `write_buffer_size` (RocksDB's
    /// `memtable_prefix_bloom_size_ratio`; at most 0.25; default 0: no filter).
    pub memtable_bloom_size_ratio: f64,
    /// Put whole keys into the memtable filter (needed for it to be built; default false).
    pub memtable_whole_key_filtering: bool,
    /// L0 files that trigger an L0 compaction (default 4).
    pub level0_file_num_compaction_trigger: usize,
    /// L0 files at which writes are slowed to `delayed_write_rate` (default 20).
    pub level0_slowdown_writes_trigger: usize,
    /// L0 files at which writes stop until compaction catches up (default 36).
    pub level0_stop_writes_trigger: usize,
    /// Target bytes of the first level below L0 (default 256 MiB).
    pub max_bytes_for_level_base: u64,
    /// Each deeper level's target is this many times the one above (default 10).
    pub max_bytes_for_level_multiplier: u64,
    /// Size targets are set from the last level up, so L0 compacts straight into the deepest level
    /// that is needed (RocksDB's `level_compaction_dynamic_level_bytes`; default true).
    pub level_compaction_dynamic_level_bytes: bool,
    /// Compaction outputs are cut at this size (default 64 MiB).
    pub target_file_size_base: u64,
    /// Pending compaction bytes above which writes are slowed (default 64 GiB; 0 disables).
    pub soft_pending_compaction_bytes_limit: u64,
    /// Pending compaction bytes at which writes stop (default 256 GiB; 0 disables).
    pub hard_pending_compaction_bytes_limit: u64,
    /// Turns automatic compactions off (manual `compact_range` still works).
    pub disable_auto_compactions: bool,
    /// Key-value separation: values of at least `min_blob_size` bytes go to blob files and the
    /// LSM keeps a small index in their place, so compactions do not rewrite them (default false).
    pub enable_blob_files: bool,
    /// Smallest value stored in a blob file (default 4 KiB).
    pub min_blob_size: usize,
    /// A blob file is sealed and a new one begun once it reaches this size (default 256 MiB).
    pub blob_file_size: u64,
    /// Compression of values in blob files (default zstd; a value that does not shrink by an
    /// eighth is stored raw).
    pub blob_compression: Compression,
    /// Values written with a TTL go to blob files by expiration, one file per `ttl_range_secs`
    /// window, so that a whole file expires at once (default 3600).
    pub ttl_range_secs: u64,
    /// FIFO: once the column family's live tables and blob files pass this many bytes, its
    /// oldest blob files are evicted (files with TTL first, earliest expiration first; then the
    /// others oldest first) and their keys read as absent. 0 (the default): no limit.
    pub max_db_size: u64,
    /// Compactions relocate the live values of the oldest blob files to new ones, so the old
    /// files become wholly garbage and are deleted (default true).
    pub enable_blob_garbage_collection: bool,
    /// The share of the column family's blob files (oldest first, files with TTL aside) whose
    /// values compactions relocate (default 0.25).
    pub blob_garbage_collection_age_cutoff: f64,
    /// Called on every entry a compaction keeps; may remove it or change its value. Not recorded:
    /// pass it again on open through [`Options::column_families`] (or [`Options::cf`]).
    pub compaction_filter: Option<Arc<dyn crate::CompactionFilter>>,
}

impl Default for ColumnFamilyOptions {
    fn default() -> Self {
        ColumnFamilyOptions {
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            block_size: 4096,
            block_restart_interval: 16,
            compression: Compression::default(),
            zstd_level: 3,
            bloom_bits_per_key: 10,
            memtable_bloom_size_ratio: 0.0,
            memtable_whole_key_filtering: false,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10,
            level_compaction_dynamic_level_bytes: true,
            target_file_size_base: 64 << 20,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            disable_auto_compactions: false,
            enable_blob_files: false,
            min_blob_size: 4096,
            blob_file_size: 256 << 20,
            blob_compression: Compression::Zstd,
            ttl_range_secs: 3600,
            max_db_size: 0,
            enable_blob_garbage_collection: true,
            blob_garbage_collection_age_cutoff: 0.25,
            compaction_filter: None,
        }
    }
}

impl ColumnFamilyOptions {
    /// The memtable filter's size ratio, or 0 when whole-key filtering is off.
    pub(crate) fn memtable_bloom_ratio(&self) -> f64 {
        if self.memtable_whole_key_filtering {
            self.memtable_bloom_size_ratio
        } else {
            0.0
        }
    }

    pub(crate) fn validate(&self) -> crate::Result<()> {
        let bad = |what: &str| Err(crate::Error::InvalidArgument(what.to_string()));
        if self.write_buffer_size < 4096 {
            return bad("write_buffer_size must be at least 4096 bytes");
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2");
        }
        if self.block_size < 64 || self.block_size > (1 << 30) {
            return bad("block_size must be between 64 bytes and 1 GiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if !(1..=22).contains(&self.zstd_level) {
            return bad("zstd_level must be between 1 and 22");
        }
        if self.level0_file_num_compaction_trigger == 0 {
            return bad("level0_file_num_compaction_trigger must be at least 1");
        }
        if self.level0_slowdown_writes_trigger < self.level0_file_num_compaction_trigger
            || self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger
        {
            return bad("L0 triggers must satisfy compaction <= slowdown <= stop");
        }
        if self.max_bytes_for_level_multiplier < 2 {
            return bad("max_bytes_for_level_multiplier must be at least 2");
        }
        if self.max_bytes_for_level_base < 4096 || self.target_file_size_base < 4096 {
            return bad("max_bytes_for_level_base and target_file_size_base must be at least 4096");
        }
        if !(0.0..=0.25).contains(&self.memtable_bloom_size_ratio) {
            return bad("memtable_bloom_size_ratio must be between 0 and 0.25");
        }
        if self.min_blob_size == 0 {
            return bad("min_blob_size must be at least 1");
        }
        if self.blob_file_size < 4096 {
            return bad("blob_file_size must be at least 4096 bytes");
        }
        if self.ttl_range_secs == 0 {
            return bad("ttl_range_secs must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.blob_garbage_collection_age_cutoff) {
            return bad("blob_garbage_collection_age_cutoff must be between 0 and 1");
        }
        Ok(())
    }
}

/// Options for [`crate::Db::open`]: the store's own, plus the default column family's in `cf`
/// (reachable directly: `opts.write_buffer_size` is `opts.cf.write_buffer_size`).
#[derive(Debug, Clone)]
pub struct Options {
    /// Create the directory and an empty store when none exists (default true).
    pub create_if_missing: bool,
    /// Fail when a store already exists.
    pub error_if_exists: bool,
    /// Verify every block of every live table and every record of every sealed blob file at open,
    /// and fail open on any corruption.
    pub paranoid_checks: bool,
    /// Open table readers kept in the table cache, and separately open blob file readers
    /// (default 1000 each).
    pub max_open_files: usize,
    /// Bytes of uncompressed blocks kept in the block cache, shared by every column family
    /// (default 32 MiB; 0 disables it).
    pub cache_size: usize,
    /// How the block cache evicts (default LRU).
    pub cache_kind: CacheKind,
    /// The block cache has 2^`cache_shard_bits` shards, each with its own lock (default `None`:
    /// one per 512 KiB of capacity, at most 64).
    pub cache_shard_bits: Option<u32>,
    /// Share of each LRU shard kept for index and filter blocks and for data blocks read more than
    /// once (default 0.5, as RocksDB).
    pub high_pri_pool_ratio: f64,
    /// Keep index and filter blocks in the block cache at high priority, charged against its
    /// capacity and evictable, instead of in each open table (default false, as RocksDB). Applies
    /// to every column family: they share the cache.
    pub cache_index_and_filter_blocks: bool,
    /// With `cache_index_and_filter_blocks`, tables opened at L0 hold their index and filter
    /// handles, so the cache never evicts them while the table is open (default false).
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    /// What recovery does with a damaged WAL.
    pub wal_recovery: WalRecovery,
    /// Background execution model.
    pub executor: Executor,
    /// Threads in the background pool (default 2). A quarter of them (at least one) is kept for
    /// flushes; the rest run compactions, several at once when there is work for them.
    pub max_background_jobs: usize,
    /// Where TTL expirations are read against; tests substitute a [`crate::ManualClock`].
    pub clock: Arc<dyn Clock>,
    /// The filesystem; tests substitute a fault-injecting one.
    pub filesystem: Arc<dyn FileSystem>,
    /// Bytes per second writes are held to while slowed down (default 16 MiB/s).
    pub delayed_write_rate: u64,
    /// Once the live WAL files pass this many bytes, the column families holding the oldest one
    /// are flushed so that it can be deleted (an idle column family must not keep every log
    /// alive). 0 (the default): four times the memtable budget of all column families
    /// (`write_buffer_size * max_write_buffer_number` summed), as RocksDB does.
    pub max_total_wal_size: u64,
    /// Bytes of disk the store holds back in a `RESERVE` file, given up when the disk fills so
    /// that deletions can still be written and compactions can free space (`db/reserve.rs`).
    /// 0 (the default) keeps no reserve.
    pub reserved_disk_bytes: u64,
    /// While a backup holds the store's deletions back (`Db::live_files`), at most this many
    /// bytes of files the store no longer needs wait on disk for it; past that the hold is
    /// revoked, the files go, and the backup fails saying why. A full disk revokes it too.
    /// 0 (the default): no bound but the disk's.
    pub max_held_deletion_bytes: u64,
    /// Create the column families named in `column_families` that the store does not have yet.
    pub create_missing_column_families: bool,
    /// Options for named column families at open, replacing what the MANIFEST recorded (for
    /// example to install a compaction filter again).
    pub column_families: HashMap<String, ColumnFamilyOptions>,
    /// Told about flushes, compactions, stalls and background errors.
    pub listeners: Vec<Arc<dyn crate::EventListener>>,
    /// Let the owner's group read the store (default false: its owner's alone). A writable open
    /// makes the directory 0750 and its 0600 files 0640, and every file made later follows the
    /// directory. Without it a store keeps what it has: a new one is 0700 with 0600 files, and
    /// `chmod 750 DIR` shares it as well (`strata verify` names anything looser than the
    /// directory says).
    pub share_with_group: bool,
    /// The default column family's options.
    pub cf: ColumnFamilyOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            paranoid_checks: false,
            max_open_files: 1000,
            cache_size: 32 << 20,
            cache_kind: CacheKind::Lru,
            cache_shard_bits: None,
            high_pri_pool_ratio: 0.5,
            cache_index_and_filter_blocks: false,
            pin_l0_filter_and_index_blocks_in_cache: false,
            wal_recovery: WalRecovery::default(),
            executor: Executor::default(),
            max_background_jobs: 2,
            filesystem: Arc::new(StdFileSystem),
            clock: Arc::new(SystemClock),
            delayed_write_rate: 16 << 20,
            max_total_wal_size: 0,
            reserved_disk_bytes: 0,
            max_held_deletion_bytes: 0,
            share_with_group: false,
            create_missing_column_families: false,
            column_families: HashMap::new(),
            listeners: Vec::new(),
            cf: ColumnFamilyOptions::default(),
        }
    }
}

impl Deref for Options {
    type Target = ColumnFamilyOptions;
    fn deref(&self) -> &ColumnFamilyOptions {
        &self.cf
    }
}

impl DerefMut for Options {
    fn deref_mut(&mut self) -> &mut ColumnFamilyOptions {
        &mut self.cf
    }
}

impl Options {
    pub(crate) fn validate(&self) -> crate::Result<()> {
        let bad = |what: &str| Err(crate::Error::InvalidArgument(what.to_string()));
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        if self.max_background_jobs == 0 {
            return bad("max_background_jobs must be at least 1");
        }
        if self.delayed_write_rate == 0 {
            return bad("delayed_write_rate must be positive");
        }
        if self.cache_shard_bits.is_some_and(|b| b > 16) {
            return bad("cache_shard_bits must be at most 16");
        }
        if !(0.0..=1.0).contains(&self.high_pri_pool_ratio) {
            return bad("high_pri_pool_ratio must be between 0 and 1");
        }
        self.cf.validate()?;
        for (name, cf) in &self.column_families {
            cf.validate()
                .map_err(|e| crate::Error::InvalidArgument(format!("column family {name}: {e}")))?;
        }
        Ok(())
    }
}

/// Options for a write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// fsync the WAL before acknowledging; the write then survives power loss.
    pub sync: bool,
    /// Skip the WAL: the write is lost on a crash unless flushed first.
    pub disable_wal: bool,
    /// With `sync`: how far the WAL is synced, when not as far as the store's default. On a
    /// store in a bucket, `Local` acknowledges once the machine's disk has the write and
    /// `Remote` once the bucket has it; on the local disk both are an fsync.
    pub durability: Option<crate::fs::Durability>,
}

/// Options for reads and iterators.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Read as of this snapshot; `None` reads the latest data.
    pub snapshot: Option<Snapshot>,
    /// Put blocks read from disk into the block cache (default true; scans may turn it off).
    pub fill_cache: bool,
    /// Verify block checksums on read (default true).
    pub verify_checksums: bool,
    /// Iterators: the smallest key visited (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: the key iteration stops before (exclusive).
    pub upper_bound: Option<Vec<u8>>,
    /// Do not read values: `get` and `multi_get` return an empty value for a present key and
    /// iterators an empty `value()`, and no blob file is read (default false).
    pub keys_only: bool,
    /// Answer from memory only (RocksDB's `kBlockCacheTier`): the memtables, tables already
    /// open, and blocks held or in the block cache. A point lookup that would read a file fails
    /// with `Error::Incomplete` instead, having changed nothing, so an async caller can run it
    /// on its own thread and move to a blocking one only when the disk is needed. Iterators
    /// refuse it (default false).
    pub cache_only: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            fill_cache: true,
            verify_checksums: true,
            lower_bound: None,
            upper_bound: None,
            keys_only: false,
            cache_only: false,
        }
    }
}
