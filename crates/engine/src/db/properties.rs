//! `properties()`: the store's shape, as a serialisable struct.

use std::sync::atomic::Ordering;

use serde::Serialize;

use super::DbInner;
use super::column_family::ColumnFamilyData;
use crate::compaction;
use crate::key;
use crate::options::CacheKind;
use crate::sst::BlobReference;
use crate::version::FileMetaData;

/// Files and bytes at one level.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// Range tombstones.
    pub range_deletions: u64,
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
    /// Its files, in key order (L0: newest first).
    pub file_list: Vec<FileProperties>,
}

/// One table file.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FileProperties {
    /// File number (the file is `<number>.sst`).
    pub number: u64,
    /// The level it is at.
    pub level: usize,
    /// Bytes on disk.
    pub bytes: u64,
    /// Entries, point deletions included.
    pub entries: u64,
    /// Point deletions.
    pub deletions: u64,
    /// Range tombstones.
    pub range_deletions: u64,
    /// Smallest user key, bytes outside printable ASCII escaped.
    pub smallest_key: String,
    /// Largest user key, escaped likewise (with range tombstones: the end of the last one).
    pub largest_key: String,
    /// Sequence numbers the file holds.
    pub smallest_seq: u64,
    /// See `smallest_seq`.
    pub largest_seq: u64,
    /// Blob files its entries point into, with how many entries point into each.
    pub blob_references: Vec<BlobReference>,
}

/// One column family's shape at one moment.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ColumnFamilyProperties {
    /// Its id (0 for the default column family).
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Bytes allocated by the active memtable.
    pub memtable_bytes: u64,
    /// Entries in the active memtable.
    pub memtable_entries: u64,
    /// Range tombstones in the active and immutable memtables.
    pub memtable_range_deletions: u64,
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
    /// The level L0 compacts into.
    pub base_level: usize,
    /// Estimated bytes compaction must rewrite to bring every level within its target.
    pub pending_compaction_bytes: u64,
    /// Compactions running now.
    pub compactions_running: usize,
    /// Estimated live keys: entries in memtables and tables, less twice the deletions.
    pub estimate_num_keys: u64,
    /// Range tombstones in memtables and tables.
    pub total_range_deletions: u64,
    /// The oldest WAL holding data of this column family not yet in its tables.
    pub oldest_wal_needed: Option<u64>,
    /// Its blob files (those evicted or obsolete included until they are deleted), oldest first.
    pub blob_files: Vec<crate::BlobFileProperties>,
    /// Totals over `blob_files` (serialized inline, beside the other fields).
    #[serde(flatten)]
    pub blobs: BlobTotals,
    /// Live table plus live blob bytes: what `max_db_size` limits.
    pub live_bytes: u64,
}

/// Blob-file totals of one column family, or of the whole store.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BlobTotals {
    /// Blob files being written or sealed (not yet retired).
    pub live_blob_files: usize,
    /// Bytes of those files.
    pub blob_file_bytes: u64,
    /// Bytes of their records some index still points at.
    pub blob_live_bytes: u64,
    /// Bytes of their records no index points at any more.
    pub blob_garbage_bytes: u64,
    /// Blob files evicted by FIFO since the store was created.
    pub evicted_blob_files: usize,
}

impl std::ops::AddAssign<&BlobTotals> for BlobTotals {
    fn add_assign(&mut self, o: &BlobTotals) {
        self.live_blob_files += o.live_blob_files;
        self.blob_file_bytes += o.blob_file_bytes;
        self.blob_live_bytes += o.blob_live_bytes;
        self.blob_garbage_bytes += o.blob_garbage_bytes;
        self.evicted_blob_files += o.evicted_blob_files;
    }
}

/// The store's shape at one moment.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Properties {
    /// Every column family, by id (the default one first).
    pub column_families: Vec<ColumnFamilyProperties>,
    /// Table files in all column families.
    pub total_files: usize,
    /// Bytes of table files in all column families.
    pub total_sst_bytes: u64,
    /// Pending compaction bytes summed over the column families.
    pub pending_compaction_bytes: u64,
    /// Blob files of all column families (serialized inline, beside the other fields).
    #[serde(flatten)]
    pub blobs: BlobTotals,
    /// Live table plus live blob bytes of all column families.
    pub live_bytes: u64,
    /// Flushes running now.
    pub flushes_running: usize,
    /// Compactions running now.
    pub compactions_running: usize,
    /// Newest sequence number visible to reads.
    pub last_sequence: u64,
    /// Snapshots (explicit, and implicit ones held by iterators) alive now.
    pub live_snapshots: usize,
    /// Sequence number of the oldest of them.
    pub oldest_snapshot: Option<u64>,
    /// WAL files that may hold unflushed data.
    pub live_wal_files: usize,
    /// Bytes in those files.
    pub live_wal_bytes: u64,
    /// Number of the WAL being appended to.
    pub current_wal_number: u64,
    /// Bytes appended to it.
    pub current_wal_bytes: u64,
    /// Number of the live MANIFEST.
    pub manifest_number: u64,
    /// The block cache, when there is one.
    pub block_cache: Option<BlockCacheProperties>,
    /// The error that stopped writes, if one did.
    pub background_error: Option<String>,
    /// Column families asking writers to stop, and to slow down, for compaction debt.
    pub stopping_column_families: usize,
    /// See `stopping_column_families`.
    pub slowing_column_families: usize,
    /// Bytes written to disk (WAL, blob files, flushes, compactions) per byte the user wrote.
    pub write_amplification: f64,
    /// Files the store no longer needs that a backup keeps on disk until it is done
    /// (`Db::live_files`), and their bytes (bounded by `max_held_deletion_bytes`).
    pub held_deletions: usize,
    /// See `held_deletions`.
    pub held_deletion_bytes: u64,
}

/// The block cache's size and how much of it is in use.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BlockCacheProperties {
    /// How it evicts.
    pub kind: CacheKind,
    /// Capacity in bytes.
    pub capacity: u64,
    /// Bytes charged by cached blocks (a little over capacity only while pinned blocks fill it).
    pub usage: u64,
    /// Bytes charged by blocks someone holds: values being read, iterators' blocks, pinned L0
    /// index and filter blocks. These are not evicted until released.
    pub pinned_usage: u64,
    /// Cached blocks.
    pub entries: u64,
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
        let held = self.deletions.deferred();
        let mut p = Properties {
            current_wal_number: wal_number,
            current_wal_bytes: wal_bytes,
            held_deletions: held.files,
            held_deletion_bytes: held.bytes,
            ..Default::default()
        };
        let cfs: Vec<_> = {
            let st = self.state.lock();
            p.flushes_running = st.flushes_running;
            p.live_wal_files = st.live_wals.len();
            p.live_wal_bytes = st.live_wals.iter().map(|(_, b)| b).sum::<u64>() + wal_bytes;
            p.background_error = st.bg_error.as_ref().map(|e| e.to_string());
            p.stopping_column_families = st.tracker.stopping.len();
            p.slowing_column_families = st.tracker.slowing.len();
            st.cfs.iter().flatten().map(|cs| cs.data.clone()).collect()
        };
        for cf in cfs {
            if let Some(c) = self.cf_properties(&cf) {
                p.total_files += c.total_files;
                p.total_sst_bytes += c.total_sst_bytes;
                p.pending_compaction_bytes += c.pending_compaction_bytes;
                p.blobs += &c.blobs;
                p.live_bytes += c.live_bytes;
                p.column_families.push(c);
            }
        }
        p.compactions_running = *self.compactions_running.lock();
        p.manifest_number = self.versions.lock().manifest_number();
        let stats = &self.stats;
        let user = stats.bytes_written.get();
        // Values kept in blob files are written there, not to the WAL: without those bytes a
        // store of large values would show an amplification below 1.
        let disk = stats.wal_bytes.get()
            + stats.flush_bytes.get()
            + stats.compaction_bytes_written.get()
            + stats.blob_bytes_written.get();
        p.write_amplification = if user > 0 {
            disk as f64 / user as f64
        } else {
            0.0
        };
        p.last_sequence = self.last_sequence.load(Ordering::Acquire);
        p.live_snapshots = self.snapshots.count();
        p.oldest_snapshot = self.snapshots.oldest();
        p.block_cache = self.block_cache.as_ref().map(|c| {
            let u = c.usage();
            BlockCacheProperties {
                kind: c.kind(),
                capacity: c.capacity() as u64,
                usage: u.usage as u64,
                pinned_usage: u.pinned_usage as u64,
                entries: u.entries as u64,
            }
        });
        p
    }

    /// `cf`'s shape; `None` once it is dropped.
    pub(super) fn cf_properties(&self, cf: &ColumnFamilyData) -> Option<ColumnFamilyProperties> {
        let mut p = ColumnFamilyProperties {
            id: cf.id,
            name: cf.name.clone(),
            ..Default::default()
        };
        let imm_entries: u64;
        {
            let st = self.state.lock();
            let cs = st.cf(cf.id)?;
            p.memtable_bytes = cs.mem.memory_usage() as u64;
            p.memtable_entries = cs.mem.num_entries();
            p.immutable_memtables = cs.imm.len();
            p.immutable_memtable_bytes = cs.imm.iter().map(|(m, _)| m.memory_usage() as u64).sum();
            imm_entries = cs.imm.iter().map(|(m, _)| m.num_entries()).sum();
            p.memtable_range_deletions = std::iter::once(&cs.mem)
                .chain(cs.imm.iter().map(|(m, _)| m))
                .map(|m| m.num_range_tombstones() as u64)
                .sum();
            p.flush_running = cs.flush_running;
            p.oldest_wal_needed = cs.oldest_log();
        }
        let version = self.versions.lock().current(cf.id)?;
        let targets = compaction::level_targets(&version, &cf.opts);
        let (scores, running) = {
            let cs = cf.compaction.lock();
            (
                compaction::scores(&version, &cf.opts, &cs.busy, &targets),
                cs.running,
            )
        };
        for (level, (files, ls)) in version.levels.iter().zip(&cf.level_stats).enumerate() {
            let read_upper = ls.bytes_read_upper.get();
            let written = ls.bytes_written.get();
            p.levels.push(LevelProperties {
                level,
                files: files.len(),
                bytes: files.iter().map(|f| f.file_size).sum(),
                entries: files.iter().map(|f| f.num_entries).sum(),
                deletions: files.iter().map(|f| f.num_deletions).sum(),
                range_deletions: files.iter().map(|f| f.num_range_deletions).sum(),
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
                file_list: files.iter().map(|f| file_properties(level, f)).collect(),
            });
        }
        p.base_level = targets.base_level;
        p.pending_compaction_bytes = compaction::pending_compaction_bytes(&version, &cf.opts);
        p.compactions_running = running;
        let entries: u64 =
            p.levels.iter().map(|l| l.entries).sum::<u64>() + p.memtable_entries + imm_entries;
        let deletions: u64 = p.levels.iter().map(|l| l.deletions).sum();
        p.estimate_num_keys = entries.saturating_sub(2 * deletions);
        p.total_range_deletions =
            p.memtable_range_deletions + p.levels.iter().map(|l| l.range_deletions).sum::<u64>();
        p.total_files = version.num_files();
        p.total_sst_bytes = p.levels.iter().map(|l| l.bytes).sum();
        p.blob_files = self.blobs.properties(cf.id);
        for b in p.blob_files.iter().filter(|b| {
            matches!(
                b.state,
                crate::BlobFileState::Open | crate::BlobFileState::Sealed
            )
        }) {
            p.blobs.live_blob_files += 1;
            p.blobs.blob_file_bytes += b.file_size;
            p.blobs.blob_live_bytes += b.live_bytes;
            p.blobs.blob_garbage_bytes += b.garbage_bytes;
        }
        p.blobs.evicted_blob_files = self
            .versions
            .lock()
            .column_families()
            .get(&cf.id)
            .map_or(0, |c| c.evicted_blob_files.len());
        p.live_bytes = p.total_sst_bytes + p.blobs.blob_file_bytes;
        Some(p)
    }
}

fn file_properties(level: usize, f: &FileMetaData) -> FileProperties {
    let show = |ikey: &[u8]| key::user_key(ikey).escape_ascii().to_string();
    FileProperties {
        number: f.number,
        level,
        bytes: f.file_size,
        entries: f.num_entries,
        deletions: f.num_deletions,
        range_deletions: f.num_range_deletions,
        smallest_key: show(&f.smallest),
        largest_key: show(&f.largest),
        smallest_seq: f.smallest_seq,
        largest_seq: f.largest_seq,
        blob_references: f.blob_references.clone(),
    }
}
