//! A column family's compaction bookkeeping: which compactions run now on which files, and the
//! counters per level. Kept apart from the compactions themselves (`compact.rs`), which use the
//! column family, so that the column family can hold it without importing them.

use std::collections::HashSet;

use crate::stats::Counter;

/// One column family's compaction bookkeeping, under one lock.
#[derive(Debug, Default)]
pub(crate) struct CompactionState {
    /// Compactions running now. Several may run at once on disjoint files.
    pub(crate) running: usize,
    /// `compact_range` is at work: automatic compactions wait.
    pub(crate) manual: bool,
    /// Files that compactions are reading.
    pub(crate) busy: HashSet<u64>,
}

/// Counters per output level.
#[derive(Debug, Default)]
pub(crate) struct LevelStats {
    pub(crate) compactions: Counter,
    /// Bytes read from the level above (the input level).
    pub(crate) bytes_read_upper: Counter,
    /// Bytes read from this level (the overlapping files).
    pub(crate) bytes_read_lower: Counter,
    pub(crate) bytes_written: Counter,
    pub(crate) micros: Counter,
}
