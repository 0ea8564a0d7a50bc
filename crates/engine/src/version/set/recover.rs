//! Recovering the version set from the MANIFEST `CURRENT` names: strictly at open, leniently
//! for repair, and the proof an unnamed table needs before it may be deleted.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::VersionSet;
use crate::error::{Error, Result};
use crate::filename::{self, CURRENT};
use crate::fs::FileSystem;
use crate::version::VersionEdit;
use crate::wal::{LogReader, ReadOutcome};

impl VersionSet {
    /// Replays the MANIFEST named by CURRENT. Only a cleanly torn last record (bytes missing at
    /// the end, as a crash during an append leaves them) is tolerated; a damaged record, a tail
    /// of wrong bytes, or a snapshot cut short (it was synced before CURRENT named the file) is
    /// `Corruption` naming the MANIFEST.
    pub(crate) fn recover(dir: &Path, fs: Arc<dyn FileSystem>) -> Result<Self> {
        let manifest_path = Self::current_manifest(dir, fs.as_ref())?;
        let data = fs.read_all(&manifest_path)?;
        let mut reader = LogReader::new(&data, &manifest_path, ReadOutcome::FailOnMidLogDamage)
            .scanning_every_offset();
        let mut set = Self::new_empty(dir, fs);
        let mut edits = 0;
        let mut snapshot_records = None;
        while let Some(record) = reader.next_record()? {
            let edit = VersionEdit::decode(&record, &manifest_path)?;
            if edits == 0 {
                snapshot_records = edit.snapshot_records;
                set.snapshot_next_file = edit.next_file_number.unwrap_or(0);
                set.sealed_wals_from = edit.sealed_wals_from;
            }
            set.deleted_tables
                .extend(edit.deleted_files.iter().map(|(_, n)| *n));
            if edit.drop_column_family
                && let Some(cf) = set.cfs.get(&edit.column_family)
            {
                // A dropped column family's tables go once no reader holds them: a crash can
                // leave them behind, named by no edit.
                let tables = cf.current.levels.iter().flatten().map(|f| f.number);
                set.deleted_tables.extend(tables);
            }
            set.replay(&edit)
                .map_err(|why| Error::corruption(&manifest_path, why))?;
            edits += 1;
        }
        if reader.torn_tail_bytes > 0 {
            let at = data.len() - reader.torn_tail_bytes;
            if let Some(why) = reader.tail_damage {
                return Err(Error::corruption(
                    &manifest_path,
                    format!(
                        "{why} at offset {at}: the last record is damaged, not cut short by a \
                         crash (`strata repair` rebuilds the MANIFEST)"
                    ),
                ));
            }
            set.torn_tail = true;
        }
        if edits == 0 {
            return Err(Error::corruption(
                &manifest_path,
                "holds no intact version edit (`strata repair` rebuilds it from the files)",
            ));
        }
        if let Some(expected) = snapshot_records
            && edits < expected
        {
            return Err(Error::corruption(
                &manifest_path,
                format!(
                    "its snapshot is cut short: {edits} of {expected} records are intact, and \
                     the snapshot was synced before CURRENT named the file (`strata repair` \
                     rebuilds the MANIFEST)"
                ),
            ));
        }
        let max_file = set.live_tables().max().unwrap_or(0);
        let max_log = set.cfs.values().map(|cf| cf.log_number).max().unwrap_or(0);
        let max_blob = set
            .cfs
            .values()
            .flat_map(|cf| cf.blob_files.keys().chain(cf.evicted_blob_files.keys()))
            .max()
            .copied()
            .unwrap_or(0);
        set.next_file_number = set
            .next_file_number
            .max(max_file + 1)
            .max(max_log + 1)
            .max(max_blob + 1);
        if let Some(filename::FileKind::Manifest(n)) = manifest_path
            .file_name()
            .and_then(|n| n.to_str())
            .map(filename::parse)
        {
            set.next_file_number = set.next_file_number.max(n + 1);
            set.manifest_number = n;
        }
        Ok(set)
    }

    /// The MANIFEST that CURRENT names; `Corruption` naming CURRENT when it names none, or one
    /// that is missing.
    pub(crate) fn current_manifest(dir: &Path, fs: &dyn FileSystem) -> Result<PathBuf> {
        let current_path = dir.join(CURRENT);
        let current = fs.read_all(&current_path)?;
        let name = std::str::from_utf8(&current)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| matches!(filename::parse(s), filename::FileKind::Manifest(_)))
            .ok_or_else(|| {
                Error::corruption(
                    &current_path,
                    "does not name a MANIFEST (`strata repair` rebuilds one)",
                )
            })?;
        let manifest_path = dir.join(name);
        if !fs.exists(&manifest_path) {
            return Err(Error::corruption(
                &current_path,
                format!("names {name}, which is missing (`strata repair` rebuilds a MANIFEST)"),
            ));
        }
        Ok(manifest_path)
    }

    /// What `repair` can still learn from a MANIFEST that may be damaged: every record that reads
    /// and decodes is replayed, and edits that do not apply are passed over. Returns the set and
    /// how many records were unusable.
    pub(crate) fn recover_lenient(
        dir: &Path,
        fs: Arc<dyn FileSystem>,
        manifest_path: &Path,
    ) -> Result<(Self, u64)> {
        let data = fs.read_all(manifest_path)?;
        let mut reader =
            LogReader::new(&data, manifest_path, ReadOutcome::SkipDamage).scanning_every_offset();
        let mut set = Self::new_empty(dir, fs);
        let mut unusable = 0u64;
        while let Some(record) = reader.next_record()? {
            let applied = VersionEdit::decode(&record, manifest_path)
                .ok()
                .is_some_and(|edit| set.replay(&edit).is_ok());
            if !applied {
                unusable += 1;
            }
        }
        unusable += reader.skipped_regions as u64 + u64::from(reader.torn_tail_bytes > 0);
        Ok((set, unusable))
    }

    /// Whether a table on disk that no recovered edit names is known to hold nothing the store
    /// needs: an edit deleted it, or it is older than the MANIFEST's snapshot (which names every
    /// table live then), or it was written for a column family since dropped, or both its oldest
    /// and newest writes (`seqs`) fall inside the sequence range of a live table of its column
    /// family or of the records
    /// of a surviving WAL (`wal_spans`): every write of an unfinished compaction is in its live
    /// inputs, every write of an unfinished flush in the WAL it was flushing from. A table of
    /// writes held by neither is what an edit that had been made durable and was then lost leaves
    /// behind, or a flush of writes that skipped the WAL (`disable_wal`) cut short by a crash.
    pub(crate) fn unnamed_table_is_unneeded(
        &self,
        number: u64,
        column_family: u64,
        seqs: (u64, u64),
        wal_spans: &[(u64, u64)],
    ) -> bool {
        if self.deleted_tables.contains(&number) || number < self.snapshot_next_file {
            return true;
        }
        // Written for a column family dropped since (a flush whose edit the drop refused).
        let dropped = u32::try_from(column_family)
            .is_ok_and(|id| id <= self.max_column_family && !self.cfs.contains_key(&id));
        if dropped {
            return true;
        }
        // Sequence numbers are shared by every column family: only the table's own family's
        // tables can hold its writes.
        let ranges: Vec<(u64, u64)> = u32::try_from(column_family)
            .ok()
            .and_then(|id| self.cfs.get(&id))
            .map(|cf| {
                cf.current
                    .levels
                    .iter()
                    .flatten()
                    .map(|f| (f.smallest_seq, f.largest_seq))
                    .collect()
            })
            .unwrap_or_default();
        let inside = |seq: u64| {
            ranges
                .iter()
                .chain(wal_spans)
                .any(|&(a, b)| a <= seq && seq <= b)
        };
        inside(seqs.0) && inside(seqs.1)
    }
}
