//! The event-listener trait: what the engine tells observers (the admin console subscribes to it).

use std::time::Duration;

use serde::Serialize;

/// Why a compaction ran.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum CompactionReason {
    /// L0 reached `level0_file_num_compaction_trigger` files.
    Level0FileCount,
    /// A level passed its size target.
    LevelSize,
    /// `compact_range`.
    Manual,
    /// A table's range tombstones span more data below it than it holds: it is pushed down
    /// even though its level is within its target, so the deleted data goes.
    RangeDeletions,
}

/// A finished (or failed) flush.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
pub struct FlushInfo {
    /// The column family flushed.
    pub column_family: String,
    /// The table written, if the memtable held anything.
    pub file_number: Option<u64>,
    /// Bytes of that table.
    pub bytes: u64,
    /// Entries flushed.
    pub entries: u64,
    /// Time taken.
    #[cfg_attr(feature = "openapi", schema(value_type = DurationSchema))]
    pub duration: Duration,
}

/// A compaction about to run or finished.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
pub struct CompactionInfo {
    /// The column family compacted.
    pub column_family: String,
    /// Why it ran.
    pub reason: CompactionReason,
    /// Level read from (its overlapping files at `output_level` are read too).
    pub input_level: usize,
    /// Level written to.
    pub output_level: usize,
    /// Input table numbers.
    pub input_files: Vec<u64>,
    /// Output table numbers (empty until it finishes).
    pub output_files: Vec<u64>,
    /// Bytes of the inputs.
    pub bytes_read: u64,
    /// Bytes of the outputs.
    pub bytes_written: u64,
    /// Moved a file down without rewriting it.
    pub trivial_move: bool,
    /// Entries it dropped because their TTL had passed (zero at the start).
    pub entries_expired: u64,
    /// Time taken (zero at the start).
    #[cfg_attr(feature = "openapi", schema(value_type = DurationSchema))]
    pub duration: Duration,
}

/// Blob garbage collection moved live values out of old blob files, during a compaction.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
pub struct BlobGcInfo {
    /// The column family compacted.
    pub column_family: String,
    /// Blob files values were moved out of (garbage collection candidates among the inputs'
    /// references).
    pub from_files: Vec<u64>,
    /// Blob files the values were written to.
    pub to_files: Vec<u64>,
    /// Values moved.
    pub relocated_keys: u64,
    /// Bytes of the moved records.
    pub relocated_bytes: u64,
}

/// Why blob files were deleted.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BlobDeletionReason {
    /// Every value in them had passed its TTL.
    Expired,
    /// No index pointed into them any more (garbage collection, overwrites, deletions).
    Garbage,
    /// FIFO eviction: the column family was over `max_db_size`; their keys now read as absent.
    Evicted,
}

/// Blob files left the store (they are deleted from disk once no reader holds them).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
pub struct BlobFilesDeletedInfo {
    /// Their column family.
    pub column_family: String,
    pub reason: BlobDeletionReason,
    /// Their numbers.
    pub files: Vec<u64>,
    /// Records they held.
    pub records: u64,
    /// Bytes on disk.
    pub bytes: u64,
}

/// Why writes were slowed or stopped.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum StallCause {
    /// Every memtable is full and waiting for a flush.
    MemtableLimit,
    /// All but one of `max_write_buffer_number` memtables wait for flushes (only when more than
    /// three are allowed, as in RocksDB).
    TooManyMemtables,
    /// L0 reached `level0_slowdown_writes_trigger`.
    Level0Slowdown,
    /// L0 reached `level0_stop_writes_trigger`.
    Level0Stop,
    /// Pending compaction bytes passed the soft limit.
    PendingCompactionSoft,
    /// Pending compaction bytes reached the hard limit.
    PendingCompactionHard,
}

/// Receives engine events, on the thread that caused them: keep the methods quick.
pub trait EventListener: Send + Sync + std::fmt::Debug {
    /// A flush of `column_family` starts.
    fn on_flush_begin(&self, _column_family: &str) {}
    /// A flush finished.
    fn on_flush_completed(&self, _info: &FlushInfo) {}
    /// A compaction starts.
    fn on_compaction_begin(&self, _info: &CompactionInfo) {}
    /// A compaction finished.
    fn on_compaction_completed(&self, _info: &CompactionInfo) {}
    /// Writes are slowed or stopped.
    fn on_stall_begin(&self, _cause: StallCause) {}
    /// The stall ended.
    fn on_stall_end(&self, _cause: StallCause, _waited: Duration) {}
    /// A background job failed; writes now fail with this message until the store is reopened.
    fn on_background_error(&self, _error: &str) {}
    /// Blob garbage collection moved values to new blob files.
    fn on_blob_gc(&self, _info: &BlobGcInfo) {}
    /// Blob files expired, became wholly garbage, or were evicted by FIFO.
    fn on_blob_files_deleted(&self, _info: &BlobFilesDeletedInfo) {}
    /// A replica caught up: reads moved from `from` to `to` (caches keyed on what the store
    /// held go stale now).
    fn on_caught_up(&self, _info: &crate::CaughtUp) {}
    /// A replica's round failed; reads stay where they were and it tries again.
    fn on_replica_error(&self, _error: &str) {}
}

/// How serde writes a `Duration`, for the OpenAPI document.
#[cfg(feature = "openapi")]
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct DurationSchema {
    secs: u64,
    nanos: u32,
}
