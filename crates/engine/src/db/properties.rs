//! `properties()`: the store's shape, as a serialisable struct.

use std::sync::atomic::Ordering;

use serde::Serialize;

use super::DbInner;
use crate::compaction;

/// Files and bytes at one level.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LevelProperties {
    /// Level number (0 is where flushes land).
    pub level: usize,
    /// Table files.
    pub files: usize,
    /// Bytes of those files.
    pub bytes: u64,
    /// Entries, deletions included.
    pub entries: u64,
    /// Point deletions.
    pub deletions: u64,
    /// Compaction urgency: 1 or more means a compaction is due (0 for the last level).
    pub score: f64,
    /// Size target in bytes (0 above the base level).
    pub target_bytes: u64,
    /// Compactions that wrote into this level.
    pub compactions: u64,
    /// Bytes those compactions read from the level above.
    pub compaction_bytes_read_upper: u64,
    /// Bytes those compactions read from this level.
    pub compaction_bytes_read_lower: u64,
    /// Bytes written into this level (flushes for L0, compactions below).
    pub bytes_written: u64,
    /// Bytes written into the level per byte read from the level above.
    pub write_amplification: f64,
}

/// The store's shape at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Properties {
    /// Bytes allocated by the active memtable.
    pub memtable_bytes: u64,
    /// Entries in the active memtable.
    pub memtable_entries: u64,
    /// Immutable memtables waiting for a flush.
    pub immutable_memtables: usize,
    /// Bytes allocated by them.
    pub immutable_memtable_bytes: u64,
    /// A flush is running now.
    pub flush_running: bool,
    /// Per level, L0 first.
    pub levels: Vec<LevelProperties>,
    /// Table files in all levels.
    pub total_files: usize,
    /// Bytes of table files in all levels.
    pub total_sst_bytes: u64,
    /// Newest sequence number visible to reads.
    pub last_sequence: u64,
    /// Snapshots (explicit, and implicit ones held by iterators) alive now.
    pub live_snapshots: usize,
    /// Sequence number of the oldest of them.
    pub oldest_snapshot: Option<u64>,
    /// WAL files that may hold unflushed data.
    pub live_wal_files: usize,
    /// Number of the WAL being appended to.
    pub current_wal_number: u64,
    /// Bytes appended to it.
    pub current_wal_bytes: u64,
    /// Number of the live MANIFEST.
    pub manifest_number: u64,
    /// Block cache capacity in bytes.
    pub block_cache_capacity: u64,
    /// Bytes held by the block cache.
    pub block_cache_usage: u64,
    /// The error that stopped writes, if one did.
    pub background_error: Option<String>,
    /// The level L0 compacts into.
    pub base_level: usize,
    /// Estimated bytes compaction must rewrite to bring every level within its target.
    pub pending_compaction_bytes: u64,
    /// A compaction is running now.
    pub compaction_running: bool,
    /// Estimated live keys: entries in memtables and tables, less twice the deletions.
    pub estimate_num_keys: u64,
    /// Bytes written to disk (WAL, flushes, compactions) per byte the user wrote.
    pub write_amplification: f64,
}

impl DbInner {
    pub(super) fn properties(&self) -> Properties {
        let (wal_number, wal_bytes) = {
            let wal = self.wal.lock();
            (
                wal.number,
                wal.writer.as_ref().map_or(0, |w| w.bytes_written()),
            )
        };
        let mut p = Properties {
            current_wal_number: wal_number,
            current_wal_bytes: wal_bytes,
            ..Default::default()
        };
        let imm_entries: u64;
        {
            let st = self.state.lock();
            p.memtable_bytes = st.mem.memory_usage() as u64;
            p.memtable_entries = st.mem.num_entries();
            p.immutable_memtables = st.imm.len();
            p.immutable_memtable_bytes = st.imm.iter().map(|m| m.memory_usage() as u64).sum();
            imm_entries = st.imm.iter().map(|m| m.num_entries()).sum();
            p.flush_running = st.flush_running;
            p.live_wal_files = st.live_wals.len();
            p.background_error = st.bg_error.as_ref().map(|e| e.to_string());
        }
        let (version, manifest) = {
            let v = self.versions.lock();
            (v.current(), v.manifest_number())
        };
        p.manifest_number = manifest;
        let targets = compaction::level_targets(&version, &self.opts);
        let (scores, running) = {
            let cs = self.compaction.lock();
            (
                compaction::scores(&version, &self.opts, &cs.busy, &targets),
                cs.running,
            )
        };
        for (level, (files, ls)) in version.levels.iter().zip(&self.level_stats).enumerate() {
            let read_upper = ls.bytes_read_upper.get();
            let written = ls.bytes_written.get();
            p.levels.push(LevelProperties {
                level,
                files: files.len(),
                bytes: files.iter().map(|f| f.file_size).sum(),
                entries: files.iter().map(|f| f.num_entries).sum(),
                deletions: files.iter().map(|f| f.num_deletions).sum(),
                score: scores[level],
                target_bytes: if level == 0 { 0 } else { targets.bytes[level] },
                compactions: ls.compactions.get(),
                compaction_bytes_read_upper: read_upper,
                compaction_bytes_read_lower: ls.bytes_read_lower.get(),
                bytes_written: written,
                write_amplification: if read_upper > 0 {
                    written as f64 / read_upper as f64
                } else {
                    0.0
                },
            });
        }
        p.base_level = targets.base_level;
        p.pending_compaction_bytes = compaction::pending_compaction_bytes(&version, &self.opts);
        p.compaction_running = running;
        let stats = &self.stats;
        let user = stats.bytes_written.get();
        let disk =
            stats.wal_bytes.get() + stats.flush_bytes.get() + stats.compaction_bytes_written.get();
        p.write_amplification = if user > 0 {
            disk as f64 / user as f64
        } else {
            0.0
        };
        let entries: u64 =
            p.levels.iter().map(|l| l.entries).sum::<u64>() + p.memtable_entries + imm_entries;
        let deletions: u64 = p.levels.iter().map(|l| l.deletions).sum();
        p.estimate_num_keys = entries.saturating_sub(2 * deletions);
        p.total_files = version.num_files();
        p.total_sst_bytes = p.levels.iter().map(|l| l.bytes).sum();
        p.last_sequence = self.last_sequence.load(Ordering::Acquire);
        p.live_snapshots = self.snapshots.count();
        p.oldest_snapshot = self.snapshots.oldest();
        if let Some(c) = &self.block_cache {
            p.block_cache_capacity = c.capacity() as u64;
            p.block_cache_usage = c.usage() as u64;
        }
        p
    }
}
