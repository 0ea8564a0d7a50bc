//! The version set: the current version, file-number allocation, and the MANIFEST that makes both
//! durable. `CURRENT` names the live MANIFEST and is replaced atomically (temp, fsync, rename,
//! directory fsync).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Version, VersionEdit};
use crate::error::{Error, Result};
use crate::filename::{self, CURRENT};
use crate::fs::FileSystem;
use crate::wal::{LogReader, LogWriter, ReadOutcome};

/// A MANIFEST larger than this is rewritten as one snapshot edit on the next change.
const MANIFEST_ROLL_SIZE: u64 = 64 << 20;

pub(crate) struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    current: Arc<Version>,
    next_file_number: u64,
    log_number: u64,
    last_sequence: u64,
    manifest: Option<LogWriter>,
    manifest_number: u64,
}

impl std::fmt::Debug for VersionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSet")
            .field("manifest_number", &self.manifest_number)
            .field("next_file_number", &self.next_file_number)
            .finish()
    }
}

impl VersionSet {
    /// An empty set for a store being created; call `write_snapshot` to make it durable.
    pub(crate) fn new_empty(dir: &Path, fs: Arc<dyn FileSystem>) -> Self {
        VersionSet {
            dir: dir.to_path_buf(),
            fs,
            current: Arc::new(Version::default()),
            next_file_number: 1,
            log_number: 0,
            last_sequence: 0,
            manifest: None,
            manifest_number: 0,
        }
    }

    /// Replays the MANIFEST named by CURRENT.
    pub(crate) fn recover(dir: &Path, fs: Arc<dyn FileSystem>) -> Result<Self> {
        let current_path = dir.join(CURRENT);
        let current = fs.read_all(&current_path)?;
        let name = std::str::from_utf8(&current)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| matches!(filename::parse(s), filename::FileKind::Manifest(_)))
            .ok_or_else(|| Error::corruption(&current_path, "does not name a MANIFEST"))?;
        let manifest_path = dir.join(name);
        let data = fs.read_all(&manifest_path)?;
        let mut reader = LogReader::new(&data, &manifest_path, ReadOutcome::FailOnMidLogDamage);
        let mut set = Self::new_empty(dir, fs);
        let mut version = Version::default();
        let mut edits = 0;
        while let Some(record) = reader.next_record()? {
            let edit = VersionEdit::decode(&record, &manifest_path)?;
            if edit.column_family != 0 {
                return Err(Error::corruption(
                    &manifest_path,
                    format!("edit for unknown column family {}", edit.column_family),
                ));
            }
            for (level, number) in &edit.deleted_files {
                if !version.levels[*level].iter().any(|f| f.number == *number) {
                    return Err(Error::corruption(
                        &manifest_path,
                        format!("deletes table {number} which is not at level {level}"),
                    ));
                }
            }
            version = version.apply(&edit);
            if let Some(n) = edit.log_number {
                set.log_number = n;
            }
            if let Some(n) = edit.next_file_number {
                set.next_file_number = n;
            }
            if let Some(n) = edit.last_sequence {
                set.last_sequence = n;
            }
            edits += 1;
        }
        if edits == 0 {
            return Err(Error::corruption(&manifest_path, "holds no version edit"));
        }
        let max_file = version
            .levels
            .iter()
            .flatten()
            .map(|f| f.number)
            .max()
            .unwrap_or(0);
        set.next_file_number = set
            .next_file_number
            .max(max_file + 1)
            .max(set.log_number + 1);
        if let filename::FileKind::Manifest(n) = filename::parse(name) {
            set.next_file_number = set.next_file_number.max(n + 1);
        }
        set.current = Arc::new(version);
        Ok(set)
    }

    pub(crate) fn current(&self) -> Arc<Version> {
        self.current.clone()
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

    pub(crate) fn log_number(&self) -> u64 {
        self.log_number
    }

    pub(crate) fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    pub(crate) fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Writes a fresh MANIFEST holding the whole current state and points CURRENT at it. Called at
    /// open, so a MANIFEST with a torn tail is never appended to.
    pub(crate) fn write_snapshot(&mut self, last_sequence: u64) -> Result<()> {
        let number = self.new_file_number();
        let path = self.dir.join(filename::manifest_name(number));
        let mut writer = LogWriter::new(self.fs.create(&path)?);
        self.last_sequence = self.last_sequence.max(last_sequence);
        let mut snapshot = VersionEdit {
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            ..Default::default()
        };
        for (level, files) in self.current.levels.iter().enumerate() {
            for f in files {
                snapshot.new_files.push((level, (**f).clone()));
            }
        }
        writer.add_record(&snapshot.encode())?;
        writer.sync()?;
        self.set_current(number)?;
        let old = std::mem::replace(&mut self.manifest_number, number);
        self.manifest = Some(writer);
        if old != 0 {
            // The old MANIFEST is superseded once CURRENT is durable; failing to remove it is harmless.
            let _ = self.fs.remove(&self.dir.join(filename::manifest_name(old)));
        }
        Ok(())
    }

    fn set_current(&self, manifest_number: u64) -> Result<()> {
        let tmp = self.dir.join("CURRENT.tmp");
        let mut f = self.fs.create(&tmp)?;
        f.append(format!("{}\n", filename::manifest_name(manifest_number)).as_bytes())?;
        f.sync()?;
        drop(f);
        self.fs.rename(&tmp, &self.dir.join(CURRENT))?;
        self.fs.sync_dir(&self.dir)
    }

    /// Logs `edit` durably, then installs the version it produces.
    pub(crate) fn log_and_apply(
        &mut self,
        mut edit: VersionEdit,
        last_sequence: u64,
    ) -> Result<Arc<Version>> {
        if let Some(n) = edit.log_number {
            debug_assert!(n >= self.log_number);
            self.log_number = n;
        }
        self.last_sequence = self.last_sequence.max(last_sequence);
        let rolled = !matches!(&self.manifest, Some(m) if m.bytes_written() < MANIFEST_ROLL_SIZE);
        let next = Arc::new(self.current.apply(&edit));
        if rolled {
            // The snapshot written by the roll already contains this edit.
            let previous = std::mem::replace(&mut self.current, next.clone());
            if let Err(e) = self.write_snapshot(last_sequence) {
                self.current = previous;
                return Err(e);
            }
            return Ok(next);
        }
        edit.next_file_number = Some(self.next_file_number);
        edit.last_sequence = Some(self.last_sequence);
        let record = edit.encode();
        let Some(manifest) = self.manifest.as_mut() else {
            return Err(Error::Closed);
        };
        manifest.add_record(&record)?;
        manifest.sync()?;
        self.current = next.clone();
        Ok(next)
    }
}

impl VersionSet {
    /// Applies an edit built during recovery without logging it; `write_snapshot` makes it durable.
    pub(crate) fn apply_recovered(&mut self, edit: &VersionEdit) {
        if let Some(n) = edit.log_number {
            self.log_number = n;
        }
        self.current = Arc::new(self.current.apply(edit));
    }
}
