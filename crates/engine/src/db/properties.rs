//! `properties()`: the store's shape, as a serialisable struct.

use std::sync::atomic::Ordering;

use serde::Serialize;

use super::DbInner;
use crate::version::NUM_LEVELS;

/// Files and bytes at one level.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
}

/// The store's shape at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
        {
            let st = self.state.lock();
            p.memtable_bytes = st.mem.memory_usage() as u64;
            p.memtable_entries = st.mem.num_entries();
            p.immutable_memtables = st.imm.len();
            p.immutable_memtable_bytes = st.imm.iter().map(|m| m.memory_usage() as u64).sum();
            p.flush_running = st.flush_running;
            p.live_wal_files = st.live_wals.len();
            p.background_error = st.bg_error.as_ref().map(|e| e.to_string());
        }
        let (version, manifest) = {
            let v = self.versions.lock();
            (v.current(), v.manifest_number())
        };
        p.manifest_number = manifest;
        for level in 0..NUM_LEVELS {
            let files = &version.levels[level];
            p.levels.push(LevelProperties {
                level,
                files: files.len(),
                bytes: files.iter().map(|f| f.file_size).sum(),
                entries: files.iter().map(|f| f.num_entries).sum(),
                deletions: files.iter().map(|f| f.num_deletions).sum(),
            });
        }
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
