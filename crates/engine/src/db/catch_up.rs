//! A read-only store following its writer (RocksDB's `TryCatchUpWithPrimary`): the MANIFEST and
//! the WALs are read again and reads move to what they hold now, in one step per column family.
//!
//! Invariants (doc/architecture.md, "Replicas"):
//! - A catch-up never writes, creates or deletes a file: it only reads the directory.
//! - The sequence reads see never goes back: a catch-up that finds less than the store showed
//!   (the files were replaced by an older copy) fails and changes nothing.
//! - Each column family's view is swapped whole (version and memtable together), so a read sees
//!   either the old state or the new one, never a table and a memtable holding the same writes
//!   from different moments; and every family's view with the sequence it was caught up to,
//!   in one step (`PinnedViews`), so a read never applies an old sequence to a new view whose
//!   versions the writer's compactions thinned.
//! - A snapshot holds the views it was taken in: the writer does not know the replica's
//!   snapshots, so only those views still hold what the snapshot sees.
//! - Reads in flight keep the view they started with; its tables stay open through the table
//!   cache, and its memtables live as long as the view.
//! - On a disk shared with the writer (`FileSystem::shares_deletions_with_readers`), every table
//!   and blob file a view may read is held open from before the view is installed until no
//!   view reads it: the writer deletes a file as soon as its own versions let go of it, and an
//!   unlinked file reads on only through a descriptor already open. A file gone before it was
//!   held fails the round, which reads the newer MANIFEST again.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::column_family::{CfState, ColumnFamilyData, put_slot};
use super::open::recover_blob_files;
use super::replay::{Replay, replay_wals};
use super::{DbInner, SuperVersion};
use crate::blob::BlobFileReader;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;
use crate::version::{VersionSet, decode_cf_options};

/// What the next catch-up starts from.
#[derive(Debug, Default)]
pub(super) struct Since {
    /// Blob files found unsealed, which a writer beside may still be appending to: each
    /// catch-up reads how far they reach now, until they are sealed.
    growing_blobs: Vec<u64>,
    /// The MANIFEST (name and length) the last catch-up installed: while it stays the same no
    /// flush happened, so the memtables hold every WAL record through the last sequence, and
    /// only newer records are replayed into them. `None` after a round that failed.
    installed: Option<(PathBuf, u64)>,
    /// Views replaced by catch-ups, with the files they read, while any of them lives.
    retired: Vec<Retired>,
}

impl Since {
    pub(super) fn open(growing_blobs: Vec<u64>) -> Since {
        Since {
            growing_blobs,
            installed: None,
            retired: Vec::new(),
        }
    }
}

/// The views one catch-up replaced, and the table and blob files they may read.
#[derive(Debug)]
struct Retired {
    views: Vec<Weak<SuperVersion>>,
    files: BTreeSet<String>,
}

/// What one catch-up found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaughtUp {
    /// The newest sequence number reads saw before.
    pub from: u64,
    /// The newest sequence number reads see now.
    pub to: u64,
}

/// How often a catch-up is tried again when the files changed under it: a writer on the same
/// directory deleted a WAL or a MANIFEST between the listing and the read, cut a sealed WAL's
/// spare tail, or was midway through appending the record read last. Damage that stays is
/// reported once the tries are spent.
const TRIES: usize = 10;
/// The pause between two tries, for the writer to finish what it was doing.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

impl DbInner {
    pub(super) fn catch_up(&self) -> Result<CaughtUp> {
        self.catch_up_once().map_err(|e| {
            let held = (self.tables.held_count(), self.blobs.held_count());
            out_of_descriptors(e, self.fs.shares_deletions_with_readers().then_some(held))
        })
    }

    fn catch_up_once(&self) -> Result<CaughtUp> {
        self.check_open()?;
        if !self.read_only {
            return Err(Error::InvalidArgument(format!(
                "{}: only a store opened read-only catches up; this one is its writer",
                self.dir.display()
            )));
        }
        // One catch-up at a time: two would race to install views.
        let _admin = self.cf_admin.lock();
        let mut last = None;
        for _ in 0..TRIES {
            match self.read_consistently() {
                Ok(Some(found)) => return self.install(found),
                // The MANIFEST moved on meanwhile (a flush logged a table and deleted a WAL this
                // read missed): what was read may lack writes; read again.
                Ok(None) => {
                    last = Some(Error::Busy(format!(
                        "{}: the writer changed the MANIFEST during {TRIES} catch-ups in a row",
                        self.dir.display()
                    )))
                }
                Err(e) if changing(&e) => last = Some(e),
                Err(e) => return Err(e),
            }
            std::thread::sleep(PAUSE);
        }
        Err(last.unwrap_or(Error::Closed))
    }

    /// `read_again`, or `None` when the MANIFEST changed while it read.
    fn read_consistently(&self) -> Result<Option<Found>> {
        let before = self.manifest_mark()?;
        // Taken, not read: a round that fails after adding records to the memtables leaves
        // them holding more than reads see, so the next one starts from fresh memtables.
        let unchanged = self.catching_up.lock().installed.take().as_ref() == Some(&before);
        let mut found = self.read_again(unchanged)?;
        if self.manifest_mark()? != before {
            return Ok(None);
        }
        found.manifest = Some(before);
        Ok(Some(found))
    }

    /// Reads again how far each blob file that was unsealed reaches now; a sealed one is read
    /// for the last time, a deleted one forgotten.
    fn reread_growing_blobs(&self) -> Result<()> {
        let mut since = self.catching_up.lock();
        let growing = &mut since.growing_blobs;
        let mut still = Vec::with_capacity(growing.len());
        for &number in growing.iter() {
            let Some(known) = self.blobs.get(number) else {
                continue;
            };
            let path = self.blobs.path(number);
            let found = match BlobFileReader::open(self.blobs.filesystem(), &path) {
                Ok(reader) => reader.recover()?,
                // Deleted by the writer: the MANIFEST no longer names it either.
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                    continue;
                }
                Err(e) => return Err(e),
            };
            {
                let mut meta = known.meta.lock();
                if found.file_size > meta.file_size {
                    meta.footer = found.footer;
                    meta.file_size = found.file_size;
                }
            }
            if !found.sealed {
                still.push(number);
            }
        }
        *growing = still;
        Ok(())
    }

    /// The table and blob files reads may still open (`FileSystem::refresh`): the current
    /// version's, those of every older view a read, an iterator or a snapshot still holds, and
    /// the blob files value readers pin. Blob files outside them are forgotten (their readers
    /// closed), so a replica's memory follows the store's files, not its history.
    pub(super) fn files_in_reads(&self) -> BTreeSet<String> {
        // Not beside a catch-up, which registers the blob files of a version it has not
        // installed yet.
        let _admin = self.cf_admin.lock();
        self.files_in_reads_admin_held()
    }

    /// `files_in_reads`, by a caller holding `cf_admin`.
    fn files_in_reads_admin_held(&self) -> BTreeSet<String> {
        let mut files = files_read(&self.versions.lock());
        {
            let mut since = self.catching_up.lock();
            since
                .retired
                .retain(|r| r.views.iter().any(|v| v.strong_count() > 0));
            for r in &since.retired {
                files.extend(r.files.iter().cloned());
            }
        }
        files.extend(self.blobs.pinned().into_iter().map(filename::blob_name));
        let unread: Vec<u64> = self
            .blobs
            .numbers()
            .into_iter()
            .filter(|&n| !files.contains(&filename::blob_name(n)))
            .collect();
        self.blobs.forget(unread);
        let (tables, blobs) = numbers_of(&files);
        self.tables.release_except(&tables);
        self.blobs.release_except(&blobs);
        files
    }

    /// On a disk shared with the writer, holds the tables and blob files `(tables, blobs)`
    /// open (see the module's invariants); elsewhere nothing.
    fn hold_files_open(
        &self,
        (tables, blobs): (BTreeMap<u64, usize>, BTreeSet<u64>),
    ) -> Result<()> {
        if !self.fs.shares_deletions_with_readers() {
            return Ok(());
        }
        self.tables.hold(&tables)?;
        self.blobs.hold(blobs)
    }

    /// `hold_files_open` for the version the store opened at, before a replica serves it.
    pub(super) fn hold_opened_files(&self) -> Result<()> {
        let files = file_numbers(&self.versions.lock());
        self.hold_files_open(files)
    }

    /// Which MANIFEST CURRENT names, and how long it is.
    fn manifest_mark(&self) -> Result<(std::path::PathBuf, u64)> {
        let path = VersionSet::current_manifest(&self.dir, self.fs.as_ref())?;
        let len = self.fs.open_random(&path)?.len()?;
        Ok((path, len))
    }

    /// Recovers the store's state from its files as an open would, into memory. With
    /// `unchanged` (the MANIFEST is the one installed last) only WAL records past the last
    /// sequence are replayed, into the memtables reads use now.
    fn read_again(&self, unchanged: bool) -> Result<Found> {
        let mut versions = VersionSet::recover(&self.dir, self.fs.clone())?;
        let manifest = self
            .dir
            .join(filename::manifest_name(versions.manifest_number()));
        let mut cf_opts: BTreeMap<u32, ColumnFamilyOptions> = BTreeMap::new();
        {
            let registry = self.registry.read();
            for (&id, cf) in versions.column_families() {
                let o = match registry.get(id) {
                    Some(data) => data.opts.clone(),
                    None if id == 0 => self.opts.cf.clone(),
                    None => match self.opts.column_families.get(&cf.name) {
                        Some(o) => o.clone(),
                        None => decode_cf_options(&cf.options, &manifest)?,
                    },
                };
                cf_opts.insert(id, o);
            }
        }
        let min_log = versions.min_log_number();
        let mut wals: Vec<u64> = self
            .fs
            .list(&self.dir)?
            .iter()
            .filter_map(|name| match filename::parse(name) {
                FileKind::Wal(n) if n >= min_log => Some(n),
                _ => None,
            })
            .collect();
        // Blob files the writer appended to or made since: known before the WALs that point
        // into them are replayed.
        self.reread_growing_blobs()?;
        let unsealed = recover_blob_files(
            &versions,
            &self.blobs,
            &self.stats,
            self.opts.paranoid_checks,
            true,
        )?;
        self.catching_up.lock().growing_blobs.extend(unsealed);
        self.hold_files_open(file_numbers(&versions))?;
        let (mut mems, after) = match unchanged {
            true => (
                self.current_memtables(),
                self.last_sequence.load(Ordering::Acquire),
            ),
            false => (BTreeMap::new(), 0),
        };
        let (last_seq, skipped, spans) = replay_wals(
            &self.dir,
            &self.opts,
            &mut versions,
            &cf_opts,
            &mut wals,
            &self.blobs,
            Replay::IntoMemory {
                mems: &mut mems,
                after,
            },
        )?;
        self.stats.wal_records_skipped.add(skipped);
        let replayed: u64 = spans.iter().map(|(first, last)| last - first + 1).sum();
        self.stats.catch_up_writes.add(replayed);
        Ok(Found {
            versions,
            cf_opts,
            mems,
            last_seq,
            manifest: None,
        })
    }

    /// Each column family's active memtable.
    fn current_memtables(&self) -> BTreeMap<u32, Arc<MemTable>> {
        let st = self.state.lock();
        st.cfs
            .iter()
            .flatten()
            .map(|cs| (cs.data.id, cs.mem.clone()))
            .collect()
    }

    /// Moves reads to `found`.
    fn install(&self, found: Found) -> Result<CaughtUp> {
        let Found {
            versions,
            mut cf_opts,
            mut mems,
            last_seq,
            manifest,
        } = found;
        let from = self.last_sequence.load(Ordering::Acquire);
        if last_seq < from {
            return Err(Error::InvalidArgument(format!(
                "{}: the store's files now end at sequence {last_seq}, before the {from} reads \
                 already see: they were replaced by an older copy, so this reader keeps what it \
                 has",
                self.dir.display()
            )));
        }
        let ids: Vec<u32> = versions.column_families().keys().copied().collect();
        let added: Vec<Arc<ColumnFamilyData>> = {
            let registry = self.registry.read();
            versions
                .column_families()
                .iter()
                .filter(|(id, _)| registry.get(**id).is_none())
                .map(|(&id, cf)| {
                    Arc::new(ColumnFamilyData::new(
                        self.id,
                        id,
                        cf.name.clone(),
                        cf_opts.remove(&id).unwrap_or_default(),
                        cf.current.clone(),
                        self.blobs.current_epoch(),
                    ))
                })
                .collect()
        };
        let dropped: Vec<Arc<ColumnFamilyData>> = self
            .registry
            .read()
            .by_id
            .iter()
            .flatten()
            .filter(|data| !ids.contains(&data.id))
            .cloned()
            .collect();
        let mut st = self.state.lock();
        // Recorded before anything is swapped: `files_in_reads` never finds the old views
        // unaccounted for.
        let retired = Retired {
            views: st
                .cfs
                .iter()
                .flatten()
                .map(|cs| Arc::downgrade(&cs.data.current_view()))
                .collect(),
            files: files_read(&self.versions.lock()),
        };
        self.catching_up.lock().retired.push(retired);
        *self.versions.lock() = versions;
        // Dropped before added: a family dropped and made again under the same name between
        // two catch-ups is found by that name under its new id.
        for data in &dropped {
            data.dropped.store(true, Ordering::Release);
            self.registry.write().remove(data.id);
            if let Some(slot) = st.cfs.get_mut(data.id as usize) {
                *slot = None;
            }
            // A handle the application keeps must not keep the family's files: nothing can
            // read through it any more.
            data.clear_view();
        }
        for data in added {
            put_slot(&mut st.cfs, data.id as usize, CfState::new(data.clone()));
            self.registry.write().insert(data);
        }
        for &id in &ids {
            let Some(cs) = st.cf_mut(id) else { continue };
            cs.mem = mems.remove(&id).unwrap_or_else(|| cs.data.new_memtable(0));
            cs.imm = VecDeque::new();
            cs.mem_first_log = None;
            self.install_view(&mut st, id);
        }
        // Reads move to the new views and their sequence in one step, and only then may a
        // waiter see the sequence rise (`wait_for_sequence`).
        let to = last_seq.max(from);
        self.pin_views(&st, to);
        drop(st);
        self.catching_up.lock().installed = manifest;
        // For a store no follower runs for (`try_catch_up` by hand): old views and blob files
        // are let go of here too.
        self.files_in_reads_admin_held();
        self.update_blob_threshold();
        self.last_sequence.fetch_max(to, Ordering::AcqRel);
        Ok(CaughtUp {
            from,
            to: self.last_sequence.load(Ordering::Acquire),
        })
    }
}

/// Opens a store read-only beside its writer, holding the opened version's files open (see
/// the module's invariants). A writer that compacts meanwhile may delete a table the MANIFEST
/// read still names, before the open lists or holds it: the open is then made again, as a
/// catch-up reads again, up to `TRIES` times.
pub(super) fn open_following(path: &Path, opts: crate::options::Options) -> Result<Arc<DbInner>> {
    let mut tries = 0;
    loop {
        let opened = super::open::open(path, opts.clone(), super::open::OpenMode::ReadOnly)
            .and_then(|inner| match inner.hold_opened_files() {
                Ok(()) => Ok(inner),
                Err(e) => {
                    let _ = inner.close();
                    Err(e)
                }
            });
        match opened {
            Err(e) if changing(&e) && tries + 1 < TRIES => tries += 1,
            opened => return opened.map_err(|e| out_of_descriptors(e, None)),
        }
        std::thread::sleep(PAUSE);
    }
}

/// `e`, saying what to do when it is the process running out of file descriptors: the limit,
/// not the store, is at fault. `held`: the tables and blob files a replica beside its writer
/// holds open (it keeps every file its views read), when it is one.
fn out_of_descriptors(e: Error, held: Option<(usize, usize)>) -> Error {
    match e {
        Error::Io { context, source }
            if source
                .raw_os_error()
                .is_some_and(|n| n == EMFILE || n == ENFILE) =>
        {
            let why = match held {
                Some((tables, blobs)) => format!(
                    "a replica beside its writer keeps every file its views read open (it \
                     holds {tables} tables and {blobs} blob files open now), and "
                ),
                None => String::new(),
            };
            Error::Io {
                context: format!(
                    "{context}: {why}the system's limit on open files was reached: raise it \
                     (`ulimit -n`, `LimitNOFILE=`), or have the writer keep fewer, larger \
                     tables (a larger target_file_size_base)"
                ),
                source,
            }
        }
        e => e,
    }
}

/// The system's numbers for "too many open files", in this process and in the whole system
/// (none elsewhere: another system's numbers mean other errors).
#[cfg(any(target_os = "linux", target_os = "wasi"))]
const EMFILE: i32 = libc::EMFILE;
#[cfg(any(target_os = "linux", target_os = "wasi"))]
const ENFILE: i32 = libc::ENFILE;
#[cfg(all(unix, not(target_os = "linux")))]
const EMFILE: i32 = 24;
#[cfg(all(unix, not(target_os = "linux")))]
const ENFILE: i32 = 23;
#[cfg(not(any(unix, target_os = "wasi")))]
const EMFILE: i32 = i32::MIN;
#[cfg(not(any(unix, target_os = "wasi")))]
const ENFILE: i32 = i32::MIN;

/// What reading the files again found.
struct Found {
    versions: VersionSet,
    cf_opts: BTreeMap<u32, ColumnFamilyOptions>,
    mems: BTreeMap<u32, Arc<MemTable>>,
    last_seq: u64,
    /// The MANIFEST read, once checked unchanged by the read.
    manifest: Option<(PathBuf, u64)>,
}

/// The tables `versions` holds, each with its level (`TableCache::hold`), and the numbers of
/// its blob files.
fn file_numbers(versions: &VersionSet) -> (BTreeMap<u64, usize>, BTreeSet<u64>) {
    let (mut tables, mut blobs) = (BTreeMap::new(), BTreeSet::new());
    for cf in versions.column_families().values() {
        for (level, files) in cf.current.levels.iter().enumerate() {
            for f in files {
                tables.entry(f.number).or_insert(level);
            }
        }
        blobs.extend(cf.blob_files.keys().copied());
    }
    (tables, blobs)
}

/// The names of the tables and blob files `versions` holds.
fn files_read(versions: &VersionSet) -> BTreeSet<String> {
    let (tables, blobs) = file_numbers(versions);
    let tables = tables.into_keys().map(filename::table_name);
    tables
        .chain(blobs.into_iter().map(filename::blob_name))
        .collect()
}

/// The table and blob file numbers among `files`' names.
fn numbers_of(files: &BTreeSet<String>) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let (mut tables, mut blobs) = (BTreeSet::new(), BTreeSet::new());
    for name in files {
        match filename::parse(name) {
            FileKind::Table(n) => tables.insert(n),
            FileKind::Blob(n) => blobs.insert(n),
            _ => false,
        };
    }
    (tables, blobs)
}

/// Whether `e` may come from files changing under the read rather than from damage: one went
/// missing or shrank, or a record read was half written.
fn changing(e: &Error) -> bool {
    use std::io::ErrorKind::{NotFound, UnexpectedEof};
    match e {
        Error::Io { source, .. } => matches!(source.kind(), NotFound | UnexpectedEof),
        Error::Corruption { .. } => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_says_what_to_raise_and_other_errors_pass_unchanged() {
        let io = |code: i32| Error::Io {
            context: "open /db/000042.sst".into(),
            source: std::io::Error::from_raw_os_error(code),
        };
        for code in [EMFILE, ENFILE] {
            let said = out_of_descriptors(io(code), Some((70, 3))).to_string();
            assert!(said.contains("000042.sst"), "{said}");
            assert!(said.contains("70 tables and 3 blob files"), "{said}");
            assert!(said.contains("ulimit -n"), "{said}");
        }
        let other = out_of_descriptors(io(5), Some((70, 3))).to_string();
        assert!(!other.contains("ulimit"), "{other}");
        let busy = out_of_descriptors(Error::Busy("x".into()), None);
        assert_eq!(busy.kind(), crate::ErrorKind::Busy);
    }
}
