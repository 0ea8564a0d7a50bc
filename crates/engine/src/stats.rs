//! Counters the engine keeps while it runs, and their serialisable snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// A relaxed atomic counter.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The kinds of block the cache holds, counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Data,
    Index,
    Filter,
}

impl Stats {
    /// Counts a cache lookup for a block of `kind`.
    pub(crate) fn block_cache_lookup(&self, kind: BlockKind, hit: bool) {
        let (total, by_kind) = match (kind, hit) {
            (BlockKind::Data, true) => (&self.block_cache_hit, &self.block_cache_data_hit),
            (BlockKind::Data, false) => (&self.block_cache_miss, &self.block_cache_data_miss),
            (BlockKind::Index, true) => (&self.block_cache_hit, &self.block_cache_index_hit),
            (BlockKind::Index, false) => (&self.block_cache_miss, &self.block_cache_index_miss),
            (BlockKind::Filter, true) => (&self.block_cache_hit, &self.block_cache_filter_hit),
            (BlockKind::Filter, false) => (&self.block_cache_miss, &self.block_cache_filter_miss),
        };
        total.inc();
        by_kind.inc();
    }
}

macro_rules! statistics {
    ($($(#[doc = $doc:literal])* $name:ident),* $(,)?) => {
        /// Live counters, shared by every part of the engine.
        #[derive(Debug, Default)]
        pub(crate) struct Stats {
            $(pub(crate) $name: Counter,)*
        }

        /// A snapshot of the engine's counters since open.
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
        pub struct Statistics {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        impl Stats {
            pub(crate) fn snapshot(&self) -> Statistics {
                Statistics { $($name: self.$name.get(),)* }
            }
        }
    };
}

statistics! {
    /// Point lookups (`get`, and each key of a `multi_get`).
    gets,
    /// `multi_get` calls.
    multiget_calls,
    /// Keys looked up by them.
    multiget_keys,
    /// Lookups that found a value.
    get_hits,
    /// Keys written by `put` or in batches.
    keys_written,
    /// Keys deleted.
    keys_deleted,
    /// Range deletions written (`delete_range`), each one tombstone.
    range_deletes,
    /// Entries reads found hidden by a range tombstone (point lookups, MultiGet keys, entries an
    /// iterator stepped over).
    range_del_hidden,
    /// Times an iterator skipped a run of covered entries by seeking past a tombstone's end.
    range_del_reseeks,
    /// Write batches committed (single puts count as one).
    write_batches,
    /// Write groups committed by a leader (batches per group = write_batches / write_groups).
    write_groups,
    /// User bytes written (keys plus values).
    bytes_written,
    /// User bytes returned by reads.
    bytes_read,
    /// Bytes appended to the WAL.
    wal_bytes,
    /// WAL fsyncs.
    wal_syncs,
    /// Memtables flushed to tables.
    flushes,
    /// Bytes of tables written by flushes.
    flush_bytes,
    /// Blocks of any type served from the block cache.
    block_cache_hit,
    /// Blocks of any type not in the block cache.
    block_cache_miss,
    /// Blocks added to the block cache.
    block_cache_add,
    /// Data blocks served from the block cache.
    block_cache_data_hit,
    /// Data blocks not in the block cache.
    block_cache_data_miss,
    /// Index blocks served from the block cache (`cache_index_and_filter_blocks`).
    block_cache_index_hit,
    /// Index blocks not in the block cache.
    block_cache_index_miss,
    /// Filter blocks served from the block cache (`cache_index_and_filter_blocks`).
    block_cache_filter_hit,
    /// Filter blocks not in the block cache.
    block_cache_filter_miss,
    /// Bytes of blocks read from disk.
    bytes_read_from_disk,
    /// Memtable filters consulted (`memtable_bloom_size_ratio` > 0).
    memtable_bloom_checked,
    /// Memtable filter checks that ruled the memtable out.
    memtable_bloom_useful,
    /// Table filters consulted.
    bloom_checked,
    /// Filter checks that ruled a table out.
    bloom_useful,
    /// Table files opened.
    table_opens,
    /// Iterators created.
    iterators_created,
    /// Times a write waited for a flush because every memtable was full.
    write_stalls,
    /// Microseconds writes spent waiting for flushes.
    write_stall_micros,
    /// WAL records skipped as damaged during recovery (`WalRecovery::SkipCorrupted`).
    wal_records_skipped,
    /// Writes a read-only store's catch-ups replayed from the WALs into memory (a round that
    /// saw no flush replays only those past what reads already see).
    catch_up_writes,
    /// Tables and blob files an open moved to `lost/` instead of deleting: no surviving MANIFEST
    /// edit names them, and the MANIFEST's last record was cut short.
    files_kept_aside,
    /// Compactions that rewrote tables.
    compactions,
    /// Compactions that moved a table down a level without rewriting it.
    trivial_moves,
    /// Bytes of tables read by compactions.
    compaction_bytes_read,
    /// Bytes of tables written by compactions.
    compaction_bytes_written,
    /// Entries compactions dropped (shadowed versions and tombstones no one needs).
    compaction_keys_dropped,
    /// Entries compactions dropped because a range tombstone covered them.
    compaction_keys_range_deleted,
    /// Range tombstones compactions dropped (at the bottommost level, or shadowed within a
    /// snapshot stripe).
    compaction_range_tombstones_dropped,
    /// Tables deleted without being rewritten because a newer range tombstone covered them
    /// whole.
    tables_dropped_by_range_deletion,
    /// Obsolete tables deleted.
    tables_deleted,
    /// Write groups delayed because L0 or pending compaction bytes passed a slowdown limit.
    write_slowdowns,
    /// Times writes stopped until compaction caught up (L0 stop trigger or hard limit).
    write_stops,
    /// Times a full disk made the store give up its disk reserve to write deletions.
    disk_reserve_releases,
    /// Values written to blob files (key-value separation).
    blob_values_written,
    /// Bytes of blob records written, by writes and by garbage collection.
    blob_bytes_written,
    /// Blob files created.
    blob_files_created,
    /// Blob files deleted (wholly garbage, expired or evicted, once no reader held them).
    blob_files_deleted,
    /// Blob records read from disk.
    blob_reads,
    /// Bytes of blob records read from disk.
    blob_bytes_read,
    /// Blob values served from the cache.
    blob_cache_hit,
    /// Blob values not in the cache.
    blob_cache_miss,
    /// Values garbage collection moved out of old blob files.
    blob_gc_relocated_keys,
    /// Bytes of records it moved.
    blob_gc_relocated_bytes,
    /// Blob files that became wholly garbage.
    blob_gc_files_obsolete,
    /// Blob files whose every record expired, dropped whole.
    blob_files_expired,
    /// Blob files evicted by FIFO (`max_db_size`).
    blob_fifo_evicted_files,
    /// Records in them.
    blob_fifo_evicted_keys,
    /// Bytes of them.
    blob_fifo_evicted_bytes,
    /// Expired entries compactions removed.
    compaction_keys_expired,
    /// Indexes into evicted blob files compactions removed.
    compaction_blob_indexes_evicted,
    /// Blob files found cut short at open (a crash during a write); their intact prefix is kept.
    blob_torn_files,
}
