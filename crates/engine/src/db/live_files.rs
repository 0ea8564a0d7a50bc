//! The files of a live store, for a backup that copies them while it keeps serving (RocksDB's
//! `DisableFileDeletions` with `GetLiveFiles`). Invariants (doc/format.md, "Backups of a live
//! local store"):
//! - the list is a crash image: restored as it is, each file cut to its listed length, it opens
//!   to every write acknowledged before `live_files` returned (`disable_wal` writes only when
//!   asked to flush), and to nothing torn;
//! - while the `LiveFiles` lives, no listed file is deleted (deletions wait, `fs/deletions.rs`),
//!   and the listed prefix of each never changes: tables and sealed WALs and blob files are
//!   immutable, and the MANIFEST, the current WAL and open blob files only grow;
//! - the MANIFEST is listed first, under the version lock, then the WALs and blob files under
//!   the write lock: a WAL record whose blob value it lists lies within the listed blob length,
//!   since values reach their blob file before their record reaches the WAL, and every WAL the
//!   listed MANIFEST still needs is kept by the hold;
//! - a blob file the write path appends to is listed up to the bytes its records fill, not its
//!   length: its pages are reserved ahead and its footer comes later; a blob file no MANIFEST
//!   or write names yet (a compaction's output being written) is not listed;
//! - CURRENT is not a file of the list but its text, naming the listed MANIFEST.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{Db, DbInner};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::DeletionHold;

/// One file of a [`LiveFiles`] list: copy its first `len` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// Its name in the store's directory.
    pub name: String,
    /// How many bytes of it belong to the image.
    pub len: u64,
}

/// The store's files as one crash image, kept on disk while this lives (`Db::live_files`).
#[derive(Debug)]
pub struct LiveFiles {
    /// The store's directory.
    pub dir: PathBuf,
    /// What CURRENT holds in the image.
    pub current: Vec<u8>,
    /// Tables, WALs, blob files and the MANIFEST, by name.
    pub files: Vec<LiveFile>,
    /// The newest sequence the image holds (writes made with `disable_wal` and not flushed
    /// excepted).
    pub sequence: u64,
    _hold: DeletionHold,
}

impl LiveFile {
    fn of(name: String, len: u64) -> LiveFile {
        LiveFile { name, len }
    }
}

impl Db {
    /// Lists the store's files as a crash image a backup can copy while the store keeps serving;
    /// no file listed is deleted until the result is dropped (keep it only for the copy: the
    /// deletions it holds back take disk space). With `flush`, every column family's memtable
    /// is flushed first, so writes made with `disable_wal` are in the image too and the WALs to
    /// copy are short. A read-only store has no say over its files: it answers `ReadOnly`.
    pub fn live_files(&self, flush: bool) -> Result<LiveFiles> {
        self.inner.check_writable()?;
        if flush {
            for name in self.list_cf() {
                let cf = match self.cf(&name) {
                    Ok(cf) => cf,
                    // Dropped meanwhile: nothing of it to copy.
                    Err(Error::InvalidArgument(_) | Error::NotFound(_)) => continue,
                    Err(e) => return Err(e),
                };
                self.flush_cf(&cf)?;
            }
        }
        self.inner.live_files()
    }
}

impl DbInner {
    fn live_files(&self) -> Result<LiveFiles> {
        let hold = self.deletions.hold();
        // Deletions recorded before the MANIFEST is read are of files it no longer names.
        let deferred_before: BTreeSet<PathBuf> = self.deletions.deferred_paths();
        let mut files = Vec::new();
        let (current, min_log, mut blobs) = {
            let versions = self.versions.lock();
            let manifest = filename::manifest_name(versions.manifest_number());
            let Some(len) = versions.manifest_len() else {
                return Err(Error::Busy(format!(
                    "{}: the last MANIFEST write failed and its tail is unknown until the next \
                     change starts a new one; try again",
                    self.dir.join(&manifest).display()
                )));
            };
            files.extend(versions.live_table_sizes().map(|(n, size)| {
                LiveFile::of(file_name(&filename::table_file(&self.dir, n)), size)
            }));
            let current = format!("{manifest}\n").into_bytes();
            files.push(LiveFile::of(manifest, len));
            let blobs: BTreeSet<u64> = versions.live_blob_files().collect();
            (current, versions.min_log_number(), blobs)
        };
        let mut wal = self.wal.lock();
        self.resume_writes(&mut wal)?;
        self.sync_wal_locked(&mut wal, None)?;
        let wal_len = match (&wal.damaged_from, &wal.writer) {
            (Some(good), _) => *good,
            (None, Some(w)) => w.bytes_written(),
            (None, None) => 0,
        };
        let sequence = self
            .last_sequence
            .load(std::sync::atomic::Ordering::Acquire);
        // Blob files the MANIFEST named, or the store knows of now (one the write path just
        // opened, a value file a write adopted): not those a compaction is still writing, which
        // nothing in the image names.
        blobs.extend(self.blobs.numbers());
        let being_written = self.blob_lens_being_written();
        for name in self.fs.list(&self.dir)? {
            let path = self.dir.join(&name);
            let len = match filename::parse(&name) {
                FileKind::Wal(n) if n == wal.number => wal_len,
                FileKind::Wal(n) if n >= min_log && n < wal.number => {
                    self.fs.open_random(&path)?.len()?
                }
                FileKind::Blob(n) if blobs.contains(&n) && !deferred_before.contains(&path) => {
                    match being_written.get(&n) {
                        Some(&len) => len,
                        None => self.fs.open_random(&path)?.len()?,
                    }
                }
                _ => continue,
            };
            files.push(LiveFile::of(name, len));
        }
        drop(wal);
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(LiveFiles {
            dir: self.dir.clone(),
            current,
            files,
            sequence,
            _hold: hold,
        })
    }
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
