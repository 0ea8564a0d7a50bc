//! The version set: the current version, file-number allocation, and the MANIFEST that makes both
//! durable. `CURRENT` names the live MANIFEST and is replaced atomically (temp, fsync, rename,
//! directory fsync).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Version, VersionEdit};
use crate::error::{Error, Result};
use crate::filename::{self, CURRENT};
use crate::fs::{Deletions, FileSystem};
use crate::wal::LogWriter;

/// A MANIFEST larger than this is rewritten as one snapshot edit on the next change.
const MANIFEST_ROLL_SIZE: u64 = 64 << 20;

mod recover;

/// What the version set knows of one column family.
#[derive(Debug, Clone)]
pub(crate) struct CfVersions {
    pub name: String,
    /// Options as recorded (encoded); empty for the default column family, whose options come from
    /// `Options` at every open.
    pub options: Vec<u8>,
    pub current: Arc<Version>,
    /// WAL files below this number hold nothing of this column family that is not in its tables.
    pub log_number: u64,
    /// Live blob files, with the garbage bytes recorded for each.
    pub blob_files: BTreeMap<u64, u64>,
    /// Bytes of each live blob file's records that entries borrow (extent lists, copies).
    pub blob_borrowed: BTreeMap<u64, u64>,
    /// Blob files evicted by FIFO, with the last sequence number at eviction: indexes into them
    /// read as absent.
    pub evicted_blob_files: BTreeMap<u64, u64>,
}

impl CfVersions {
    fn new(name: String, options: Vec<u8>, log_number: u64) -> Self {
        CfVersions {
            name,
            options,
            current: Arc::new(Version::default()),
            log_number,
            blob_files: BTreeMap::new(),
            blob_borrowed: BTreeMap::new(),
            evicted_blob_files: BTreeMap::new(),
        }
    }
}

pub(crate) const DEFAULT_CF_NAME: &str = "default";

pub(crate) struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    /// Removes superseded MANIFESTs, unless a backup holds deletions back.
    deletions: Arc<Deletions>,
    cfs: BTreeMap<u32, CfVersions>,
    max_column_family: u32,
    next_file_number: u64,
    last_sequence: u64,
    manifest: Option<LogWriter>,
    manifest_number: u64,
    /// Set by `recover` when the MANIFEST ended in a record cut short (a crash during an append):
    /// the edit it held is lost, so files no surviving edit names may still hold data.
    torn_tail: bool,
    /// Tables the recovered edits deleted, and the next file number the MANIFEST's snapshot
    /// recorded: a table no edit names is obsolete if it is among the first or numbered below
    /// the second.
    deleted_tables: HashSet<u64>,
    snapshot_next_file: u64,
    /// WALs numbered from this one on end in a seal when replaced (`None`: a store written
    /// before seals, whose WALs carry none).
    sealed_wals_from: Option<u64>,
}

impl std::fmt::Debug for VersionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSet")
            .field("manifest_number", &self.manifest_number)
            .field("next_file_number", &self.next_file_number)
            .field("column_families", &self.cfs.len())
            .finish()
    }
}

impl VersionSet {
    /// A set holding only the default column family, for a store being created; call
    /// `write_snapshot` to make it durable.
    pub(crate) fn new_empty(dir: &Path, fs: Arc<dyn FileSystem>) -> Self {
        let mut cfs = BTreeMap::new();
        cfs.insert(0, CfVersions::new(DEFAULT_CF_NAME.into(), Vec::new(), 0));
        VersionSet {
            dir: dir.to_path_buf(),
            deletions: Deletions::new(fs.clone(), 0),
            fs,
            cfs,
            max_column_family: 0,
            next_file_number: 1,
            last_sequence: 0,
            manifest: None,
            manifest_number: 0,
            torn_tail: false,
            deleted_tables: HashSet::new(),
            snapshot_next_file: 0,
            sealed_wals_from: None,
        }
    }

    /// Shares the store's deletions, so a backup's hold covers MANIFESTs too.
    pub(crate) fn share_deletions(&mut self, deletions: Arc<Deletions>) {
        self.deletions = deletions;
    }

    /// The next file number to hand out.
    pub(crate) fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    /// The largest column family id ever handed out.
    pub(crate) fn max_column_family(&self) -> u32 {
        self.max_column_family
    }

    /// True when the recovered MANIFEST ended in a record cut short.
    /// WALs numbered from this one on end in a seal when a newer WAL replaces them.
    pub(crate) fn sealed_wals_from(&self) -> Option<u64> {
        self.sealed_wals_from
    }

    /// Records that every WAL from `first` on is sealed when replaced; written with the next
    /// snapshot.
    pub(crate) fn set_sealed_wals_from(&mut self, first: u64) {
        self.sealed_wals_from = Some(first);
    }

    pub(crate) fn recovered_torn_tail(&self) -> bool {
        self.torn_tail
    }

    /// Applies one recovered edit; the error says what is inconsistent.
    fn replay(&mut self, edit: &VersionEdit) -> std::result::Result<(), String> {
        let id = edit.column_family;
        if let Some(n) = edit.max_column_family {
            self.max_column_family = self.max_column_family.max(n);
        }
        if let Some(n) = edit.next_file_number {
            self.next_file_number = n;
        }
        if let Some(n) = edit.last_sequence {
            self.last_sequence = n;
        }
        if let Some(name) = &edit.add_column_family {
            if self.cfs.contains_key(&id) {
                return Err(format!("creates column family {id} ({name}) twice"));
            }
            self.cfs.insert(
                id,
                CfVersions::new(name.clone(), Vec::new(), edit.log_number.unwrap_or(0)),
            );
            self.max_column_family = self.max_column_family.max(id);
        }
        if edit.drop_column_family {
            if id == 0 || self.cfs.remove(&id).is_none() {
                return Err(format!("drops column family {id}, which does not exist"));
            }
            return Ok(());
        }
        let Some(cf) = self.cfs.get_mut(&id) else {
            return Err(format!("edit for unknown column family {id}"));
        };
        if let Some(o) = &edit.cf_options {
            cf.options = o.clone();
        }
        for (level, number) in &edit.deleted_files {
            if !cf.current.levels[*level]
                .iter()
                .any(|f| f.number == *number)
            {
                return Err(format!(
                    "deletes table {number} which is not at level {level} of column family {id}"
                ));
            }
        }
        cf.current = Arc::new(cf.current.apply(edit));
        for &n in &edit.blob_files_added {
            cf.blob_files.insert(n, 0);
        }
        for &(n, bytes) in &edit.blob_garbage {
            // Garbage for a file deleted meanwhile is moot.
            if let Some(g) = cf.blob_files.get_mut(&n) {
                *g += bytes;
            }
        }
        for &(n, bytes) in &edit.blob_refs_added {
            if cf.blob_files.contains_key(&n) {
                *cf.blob_borrowed.entry(n).or_default() += bytes;
            }
        }
        for &(n, seq) in &edit.blob_files_evicted {
            cf.blob_files.remove(&n);
            cf.blob_borrowed.remove(&n);
            cf.evicted_blob_files.insert(n, seq);
        }
        for n in &edit.blob_files_deleted {
            cf.blob_files.remove(n);
            cf.blob_borrowed.remove(n);
        }
        if let Some(n) = edit.log_number {
            cf.log_number = n;
        }
        Ok(())
    }

    /// The column families, by id.
    pub(crate) fn column_families(&self) -> &BTreeMap<u32, CfVersions> {
        &self.cfs
    }

    /// Every table some column family's current version holds.
    pub(crate) fn live_tables(&self) -> impl Iterator<Item = u64> + '_ {
        self.live_tables_by_level().map(|(number, _)| number)
    }

    /// Every live table with its size in bytes.
    pub(crate) fn live_table_sizes(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.cfs.values().flat_map(|cf| {
            cf.current
                .levels
                .iter()
                .flat_map(|files| files.iter().map(|f| (f.number, f.file_size)))
        })
    }

    /// Every blob file some column family holds.
    pub(crate) fn live_blob_files(&self) -> impl Iterator<Item = u64> + '_ {
        self.cfs
            .values()
            .flat_map(|cf| cf.blob_files.keys().copied())
    }

    /// How much of the current MANIFEST its records fill, all synced; `None` after a failed
    /// append, when its tail is unknown until the next edit starts a new one.
    pub(crate) fn manifest_len(&self) -> Option<u64> {
        self.manifest.as_ref().map(|m| m.bytes_written())
    }

    /// Every live table with its level.
    pub(crate) fn live_tables_by_level(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.cfs.values().flat_map(|cf| {
            cf.current
                .levels
                .iter()
                .enumerate()
                .flat_map(|(level, files)| files.iter().map(move |f| (f.number, level)))
        })
    }

    /// The current version of column family `id`, `None` once it is dropped.
    pub(crate) fn current(&self, id: u32) -> Option<Arc<Version>> {
        self.cfs.get(&id).map(|cf| cf.current.clone())
    }

    /// The oldest WAL that may hold data some column family has not flushed.
    pub(crate) fn min_log_number(&self) -> u64 {
        self.cfs.values().map(|cf| cf.log_number).min().unwrap_or(0)
    }

    pub(crate) fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Makes sure `number` is never handed out again (numbers found on disk).
    pub(crate) fn mark_file_number_used(&mut self, number: u64) {
        self.next_file_number = self.next_file_number.max(number + 1);
    }

    pub(crate) fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    pub(crate) fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Whether an edit that failed to log while MANIFEST `failed_in` was current can never be
    /// recovered: a later MANIFEST (a snapshot of the state without it) is current and healthy.
    pub(crate) fn failed_edit_superseded(&self, failed_in: u64) -> bool {
        self.manifest_is_healthy() && self.manifest_number > failed_in
    }

    /// Whether the current MANIFEST takes edits: no write to it has failed. After a failed edit,
    /// a healthy one is the same only if the edit never reached it.
    pub(crate) fn manifest_is_healthy(&self) -> bool {
        self.manifest.is_some()
    }

    /// Writes a fresh MANIFEST holding the whole current state and points CURRENT at it. Called at
    /// open, so a MANIFEST with a torn tail is never appended to, and when the MANIFEST grows large.
    pub(crate) fn write_snapshot(&mut self, last_sequence: u64) -> Result<()> {
        let number = self.new_file_number();
        let path = self.dir.join(filename::manifest_name(number));
        let mut writer = LogWriter::new(self.fs.create(&path)?);
        let written = self.write_snapshot_records(&mut writer, last_sequence);
        if let Err(e) = written {
            // CURRENT does not name it yet: a partial one is only lost space.
            drop(writer);
            let _ = self.fs.remove(&path);
            return Err(e);
        }
        if let Err(e) = self.set_current(number) {
            // Unless the rename went through, CURRENT still names the old MANIFEST and the new
            // one is only lost space; a failed open must leave the directory as it found it.
            let named =
                Self::current_manifest(&self.dir, self.fs.as_ref()).is_ok_and(|p| p == path);
            if !named {
                drop(writer);
                let _ = self.fs.remove(&path);
            }
            return Err(e);
        }
        let old = std::mem::replace(&mut self.manifest_number, number);
        self.manifest = Some(writer);
        if old != 0 {
            // The old MANIFEST is superseded once CURRENT is durable; failing to remove it is harmless.
            let _ = self
                .deletions
                .remove(&self.dir.join(filename::manifest_name(old)));
        }
        Ok(())
    }

    fn write_snapshot_records(&mut self, writer: &mut LogWriter, last_sequence: u64) -> Result<()> {
        self.last_sequence = self.last_sequence.max(last_sequence);
        let header = VersionEdit {
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            max_column_family: Some(self.max_column_family),
            snapshot_records: Some(1 + self.cfs.len() as u64),
            sealed_wals_from: self.sealed_wals_from,
            ..Default::default()
        };
        writer.add_record(&header.encode())?;
        for (&id, cf) in &self.cfs {
            let mut edit = VersionEdit {
                column_family: id,
                add_column_family: (id != 0).then(|| cf.name.clone()),
                cf_options: (!cf.options.is_empty()).then(|| cf.options.clone()),
                log_number: Some(cf.log_number),
                ..Default::default()
            };
            for (level, files) in cf.current.levels.iter().enumerate() {
                for f in files {
                    edit.new_files.push((level, (**f).clone()));
                }
            }
            edit.blob_files_added = cf.blob_files.keys().copied().collect();
            edit.blob_garbage = cf
                .blob_files
                .iter()
                .filter(|(_, g)| **g > 0)
                .map(|(n, g)| (*n, *g))
                .collect();
            edit.blob_refs_added = cf.blob_borrowed.iter().map(|(n, b)| (*n, *b)).collect();
            edit.blob_files_evicted = cf
                .evicted_blob_files
                .iter()
                .map(|(n, s)| (*n, *s))
                .collect();
            writer.add_record(&edit.encode())?;
        }
        writer.sync()
    }

    fn set_current(&self, manifest_number: u64) -> Result<()> {
        let tmp = self.dir.join("CURRENT.tmp");
        let installed = (|| {
            let mut f = self.fs.create(&tmp)?;
            f.append(format!("{}\n", filename::manifest_name(manifest_number)).as_bytes())?;
            f.sync()?;
            drop(f);
            self.fs.rename(&tmp, &self.dir.join(CURRENT))
        })();
        if installed.is_err() {
            // Not renamed: the temporary file is all that is left of this attempt.
            let _ = self.fs.remove(&tmp);
        }
        installed?;
        self.fs.sync_dir(&self.dir)
    }

    /// Logs `edit` durably, then installs what it changes. Creating, dropping and changing column
    /// families all go through here; an edit for a column family that was dropped meanwhile is
    /// refused with `InvalidArgument`.
    pub(crate) fn log_and_apply(
        &mut self,
        mut edit: VersionEdit,
        last_sequence: u64,
    ) -> Result<()> {
        let id = edit.column_family;
        if edit.add_column_family.is_some() {
            // Every id in use is at most the largest ever handed out.
            if id <= self.max_column_family {
                return Err(Error::InvalidArgument(format!(
                    "column family id {id} is already taken"
                )));
            }
            edit.max_column_family = Some(id);
        } else if !self.cfs.contains_key(&id) {
            return Err(Error::InvalidArgument(format!(
                "column family {id} was dropped"
            )));
        }
        self.last_sequence = self.last_sequence.max(last_sequence);
        // Only this column family changes: keep its old state to restore should logging fail.
        let before = (self.cfs.get(&id).cloned(), self.max_column_family);
        self.replay(&edit).map_err(Error::InvalidArgument)?;
        let rolled = !matches!(&self.manifest, Some(m) if m.bytes_written() < MANIFEST_ROLL_SIZE);
        let logged = if rolled {
            // The snapshot written by the roll already contains this edit.
            self.write_snapshot(last_sequence)
        } else {
            edit.next_file_number = Some(self.next_file_number);
            edit.last_sequence = Some(self.last_sequence);
            let record = edit.encode();
            match self.manifest.as_mut() {
                None => Err(Error::Closed),
                Some(m) => m.add_record(&record).and_then(|_| m.sync()),
            }
        };
        if logged.is_err() {
            // The record may be in the file, whole or torn: appending more could make it durable
            // (or unreadable) behind the state's back. The next edit starts a new MANIFEST.
            self.manifest = None;
            match before.0 {
                Some(cf) => self.cfs.insert(id, cf),
                None => self.cfs.remove(&id),
            };
            self.max_column_family = before.1;
        }
        logged
    }

    /// The next column family id to hand out.
    pub(crate) fn next_column_family_id(&self) -> u32 {
        self.max_column_family + 1
    }
}

impl VersionSet {
    /// Applies an edit built during recovery without logging it; `write_snapshot` makes it durable.
    pub(crate) fn apply_recovered(&mut self, edit: &VersionEdit) -> Result<()> {
        self.replay(edit).map_err(Error::InvalidArgument)
    }

    /// Replaces a column family's recorded options (at open, from `Options`); the next snapshot
    /// records them.
    pub(crate) fn set_recorded_options(&mut self, id: u32, options: Vec<u8>) {
        if let Some(cf) = self.cfs.get_mut(&id) {
            cf.options = options;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::fs::{FaultError, FaultInjectionFs, FsOp};

    fn add_blob_file(number: u64) -> VersionEdit {
        VersionEdit {
            column_family: 0,
            blob_files_added: vec![number],
            ..Default::default()
        }
    }

    /// An edit whose MANIFEST write failed was rolled back in memory; a later edit must not make
    /// its record durable behind the state's back.
    #[test]
    fn a_failed_edit_never_reaches_a_later_recovery() {
        let dir = crate::test_dir::tempdir();
        let fault = FaultInjectionFs::new();
        let fs: Arc<dyn FileSystem> = Arc::new(fault.clone());
        let mut set = VersionSet::new_empty(dir.path(), fs.clone());
        set.write_snapshot(0).unwrap();

        fault.fail_after(&[FsOp::Sync], 0, FaultError::Eio);
        assert!(set.log_and_apply(add_blob_file(7), 0).is_err());
        assert!(!set.column_families()[&0].blob_files.contains_key(&7));
        fault.clear_faults();
        set.log_and_apply(add_blob_file(8), 0).unwrap();

        let recovered = VersionSet::recover(dir.path(), fs).unwrap();
        let files = &recovered.column_families()[&0].blob_files;
        assert!(files.contains_key(&8));
        assert!(!files.contains_key(&7), "the failed edit came back");
    }

    #[test]
    fn an_unnamed_table_is_unneeded_only_with_proof() {
        let dir = crate::test_dir::tempdir();
        let mut set = VersionSet::new_empty(dir.path(), Arc::new(crate::fs::StdFileSystem));
        let table = |number, lo, hi| {
            let mut f = crate::version::FileMetaData::for_test(number, "a", "b", 10);
            (f.smallest_seq, f.largest_seq) = (lo, hi);
            (1, f)
        };
        set.apply_recovered(&VersionEdit {
            new_files: vec![table(1, 1, 10), table(2, 8, 20), table(3, 30, 40)],
            ..Default::default()
        })
        .unwrap();
        set.deleted_tables.insert(7);
        set.snapshot_next_file = 5;
        set.max_column_family = 2;
        let unneeded =
            |number, cf, lo, hi| set.unnamed_table_is_unneeded(number, cf, (lo, hi), &[]);
        assert!(unneeded(9, 0, 12, 35), "ends inside live ranges");
        assert!(!unneeded(9, 0, 21, 29), "writes no live table spans");
        assert!(!unneeded(9, 0, 35, 41), "newer than every live table");
        assert!(unneeded(7, 0, 50, 60), "an edit deleted it");
        assert!(unneeded(4, 0, 50, 60), "older than the snapshot");
        assert!(unneeded(9, 2, 50, 60), "its column family was dropped");
        assert!(!unneeded(9, 3, 50, 60), "a column family never seen");
        // A live column family with no table: the default one's ranges prove nothing for it.
        set.cfs
            .insert(2, CfVersions::new("two".into(), Vec::new(), 0));
        let unneeded =
            |number, cf, lo, hi| set.unnamed_table_is_unneeded(number, cf, (lo, hi), &[]);
        assert!(
            !unneeded(9, 2, 12, 35),
            "inside another column family's ranges only"
        );
        assert!(
            set.unnamed_table_is_unneeded(9, 0, (45, 47), &[(42, 50)]),
            "its writes are in a surviving WAL"
        );
        // The union rule repair uses.
        let ranges = vec![(1, 10), (8, 20), (30, 40)];
        assert!(crate::version::seqs_covered(ranges.clone(), 1, 20));
        assert!(!crate::version::seqs_covered(ranges.clone(), 15, 30));
        assert!(!crate::version::seqs_covered(ranges, 0, 5));
    }
}
