//! The event-listener trait: what the engine tells observers (the admin console subscribes to it).

use std::time::Duration;

use serde::Serialize;

/// Why a compaction ran.
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
    pub duration: Duration,
}

/// A compaction about to run or finished.
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
    /// Time taken (zero at the start).
    pub duration: Duration,
}

/// Why writes were slowed or stopped.
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
}
