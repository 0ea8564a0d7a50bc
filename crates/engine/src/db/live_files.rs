//! The files of a live store, for a backup that copies them while it keeps serving (RocksDB's
//! `DisableFileDeletions` with `GetLiveFiles`). Invariants (doc/format.md, "Backups of a live
//! local store"):
//! - the list is a crash image: restored as it is, each file cut to its listed length, it opens
//!   to every write acknowledged before `live_files` returned (`disable_wal` writes only when
//!   asked to flush), and to nothing torn;
//! - while the `LiveFiles` lives, no listed file is deleted (deletions wait, `fs/deletions.rs`),
//!   and the listed prefix of each never changes: tables and sealed WALs and blob files are
//!   immutable, and the MANIFEST, the current WAL and open blob files only grow;
//! - everything is listed under the write lock, after syncing the WAL and the blob files (a
//!   store whose writes stopped for good is listed as it stands, up to its last good record): the
//!   current WAL up to its last record, then (under the version lock inside it) the MANIFEST
//!   up to its last record, so every blob file, value file and column family a listed WAL
//!   record names is in the listed MANIFEST (its edit was logged before the record); a value
//!   reaches its blob file before its record reaches the WAL, so every listed record's value
//!   lies within its blob file's listed length; every WAL the MANIFEST still needs is kept by
//!   the hold;
//! - a blob file the store tracks is listed up to the end of its records (`BlobFileMeta`), not
//!   its length: pages are reserved ahead, and a footer may be being written; a blob file
//!   nothing in the image names (a compaction's output being written) is not listed;
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
    hold: DeletionHold,
}

impl LiveFile {
    fn of(name: String, len: u64) -> LiveFile {
        LiveFile { name, len }
    }
}

impl LiveFiles {
    /// `Ok` while the listed files are kept; once the store took them back (more deletions
    /// waited than `max_held_deletion_bytes`, or the disk filled), `Busy` saying why: a copy
    /// that found a listed file missing then knows why, and may be tried again.
    pub fn still_kept(&self) -> Result<()> {
        match self.hold.revoked() {
            None => Ok(()),
            Some(why) => Err(held_no_more(&why)),
        }
    }
}

fn held_no_more(why: &str) -> Error {
    Error::Busy(format!(
        "the store deleted the files it kept for this backup ({why}): try again"
    ))
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
        // Under the write lock throughout: no record reaches the WAL, and so none names a
        // blob file, value file or column family the listed MANIFEST lacks.
        let mut wal = self.wal.lock();
        // A close that came first took the WAL away without flushing: nothing to list.
        self.check_open()?;
        if wal.writer.is_none() {
            return Err(Error::Closed);
        }
        // Writes stopped for good (an I/O error; only a reopen resumes them) leave every
        // acknowledged write where it was: that image is listed as it stands, since a backup
        // is what its operator wants most now. A full disk still refuses until it has room.
        let stopped = match self.resume_writes(&mut wal) {
            Ok(()) => false,
            Err(_) if self.writes_stopped_for_good() => true,
            Err(e) => return Err(e),
        };
        // A full disk takes back what holds keep, this one's too: nothing it lists would stay.
        if let Some(why) = hold.revoked() {
            return Err(held_no_more(&why));
        }
        if wal.damaged_from.is_none() {
            self.sync_wal_locked(&mut wal, None)?;
        }
        self.check_blob_syncs()?;
        // After a failed sync the kernel may have dropped pages it had accepted: what the
        // files read back as is not known to be what was written, so no image of them is.
        if wal.sync_failed {
            return Err(Error::Background(format!(
                "writes to {} stopped after a failed sync, which may have lost bytes the \
                 system had accepted: no copy of its files can be trusted now; reopen the store \
                 (which keeps what reached the disk) and back it up then",
                self.dir.display()
            )));
        }
        let wal_len = match (&wal.damaged_from, &wal.writer) {
            (Some(good), _) => *good,
            (None, Some(w)) => w.bytes_written(),
            (None, None) => return Err(Error::Closed),
        };
        let sequence = self
            .last_sequence
            .load(std::sync::atomic::Ordering::Acquire);
        let mut files = Vec::new();
        let (current, min_log, mut blobs) = {
            let mut versions = self.versions.lock();
            if versions.manifest_len().is_none() {
                // A store stopped for good writes nothing more, a new MANIFEST neither.
                if stopped {
                    return Err(Error::Background(format!(
                        "writes to {} stopped as its MANIFEST's last edit failed: its state \
                         on disk is not known; reopen the store and back it up then",
                        self.dir.display()
                    )));
                }
                // The last edit failed to log and the MANIFEST's tail is unknown: a new one
                // holding the whole state replaces it now, rather than at the next edit.
                let last = versions.last_sequence();
                versions.write_snapshot(last)?;
            }
            let manifest = filename::manifest_name(versions.manifest_number());
            let len = versions.manifest_len().ok_or(Error::Closed)?;
            files.extend(
                versions
                    .live_table_sizes()
                    .map(|(n, size)| LiveFile::of(filename::table_name(n), size)),
            );
            let current = format!("{manifest}\n").into_bytes();
            files.push(LiveFile::of(manifest, len));
            let blobs: BTreeSet<u64> = versions.live_blob_files().collect();
            (current, versions.min_log_number(), blobs)
        };
        // Blob files the MANIFEST names or the blob store knows (one the write path opened, a
        // value file a write adopted), each up to the end of its records as the store tracks
        // it: past that a file may hold pages reserved ahead or a footer being written. A
        // compaction's output not yet registered is named by nothing in the image.
        blobs.extend(self.blobs.numbers());
        let blob_lens: Vec<(u64, Option<u64>)> = blobs
            .iter()
            .map(|&n| (n, self.blobs.get(n).map(|f| f.meta.lock().file_size)))
            .collect();
        let wals: Vec<u64> = self
            .fs
            .list(&self.dir)?
            .into_iter()
            .filter_map(|name| match filename::parse(&name) {
                FileKind::Wal(n) if n >= min_log && n <= wal.number => Some(n),
                _ => None,
            })
            .collect();
        let current_wal = wal.number;
        drop(wal);
        // Older WALs are sealed and blob files the store does not track are sealed: their
        // lengths are final, read without the write lock. A hold revoked meanwhile lets them
        // go: one found missing then is the store taking its room back, not damage.
        let sealed = self.sealed_lengths(&wals, current_wal, wal_len, blob_lens, &mut files);
        match (sealed, hold.revoked()) {
            (Err(Error::Io { source, .. }), Some(why))
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Err(held_no_more(&why));
            }
            (sealed, _) => sealed?,
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(LiveFiles {
            dir: self.dir.clone(),
            current,
            files,
            sequence,
            hold,
        })
    }

    /// Adds to `files` the WALs `wals` (the current one `current_wal` up to `wal_len`) and the
    /// blob files of `blob_lens`, each with its length.
    fn sealed_lengths(
        &self,
        wals: &[u64],
        current_wal: u64,
        wal_len: u64,
        blob_lens: Vec<(u64, Option<u64>)>,
        files: &mut Vec<LiveFile>,
    ) -> Result<()> {
        for &n in wals {
            let path = filename::wal_file(&self.dir, n);
            let len = match n == current_wal {
                true => wal_len,
                false => self.fs.open_random(&path)?.len()?,
            };
            files.push(LiveFile::of(filename::wal_name(n), len));
        }
        for (n, tracked) in blob_lens {
            let path = filename::blob_file(&self.dir, n);
            let len = match tracked {
                Some(len) => len,
                // Named by the MANIFEST but gone from disk: evicted before the hold.
                None if !self.fs.exists(&path) => continue,
                None => self.fs.open_random(&path)?.len()?,
            };
            files.push(LiveFile::of(filename::blob_name(n), len));
        }
        Ok(())
    }
}
