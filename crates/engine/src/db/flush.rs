//! Flush: the oldest immutable memtable becomes an L0 table, installed by a MANIFEST edit that also
//! advances the WAL number below which logs are obsolete; then those logs are deleted.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::MutexGuard;

use super::background::BackgroundWork;
use super::column_family::ColumnFamilyData;
use super::{DbInner, State};
use crate::blob::{BlobGarbage, note_garbage};
use crate::error::Result;
use crate::events::FlushInfo;
use crate::filename::table_file;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{self, SequenceNumber};
use crate::memtable::MemTable;
use crate::options::Executor;
use crate::range_del::{TombstoneCursor, VersionWalk};
use crate::sst::{TableBuilder, TableOptions};
use crate::version::{FileMetaData, VersionEdit};

/// Writes `mem` as table `number` in `dir`; `None` when the memtable is empty (no file is left).
/// Entries no reader can see are left out, as compaction would drop them: a version with a newer
/// one of its key in the same snapshot stripe (no snapshot of `snapshots`, ascending, between
/// them), and entries the memtable's own range tombstones hide from every reader. The blob
/// records they pointed at are added to `garbage`.
pub(crate) fn write_level0_table(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    mem: &Arc<MemTable>,
    opts: &TableOptions,
    snapshots: &[SequenceNumber],
    garbage: &mut BlobGarbage,
) -> Result<Option<FileMetaData>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let path = table_file(dir, number);
    let built = build_level0_table(fs, dir, &path, mem, opts, snapshots, garbage);
    if built.is_err() {
        // No MANIFEST names a table before it is built, so a partial one is only lost space
        // (on a full disk, the space the next attempt needs).
        let _ = fs.remove(&path);
    }
    built.map(|(props, file_size)| Some(FileMetaData::from_table(number, file_size, props)))
}

fn build_level0_table(
    fs: &dyn FileSystem,
    dir: &Path,
    path: &Path,
    mem: &Arc<MemTable>,
    opts: &TableOptions,
    snapshots: &[SequenceNumber],
    garbage: &mut BlobGarbage,
) -> Result<(crate::sst::TableProperties, u64)> {
    let mut builder = TableBuilder::new(fs.create(path)?, path, opts.clone());
    let mut it = mem.iter();
    let mut tombstones = mem.range_tombstones().and_then(TombstoneCursor::over_list);
    let mut versions = VersionWalk::default();
    it.seek_to_first();
    while it.valid() {
        let ikey = it.key();
        let (user_key, seq) = (key::user_key(ikey), key::sequence(ikey));
        let hidden = !versions.step(user_key, seq, snapshots).newest_in_stripe
            || match tombstones.as_mut() {
                Some(t) => t.hides(user_key, seq, snapshots)?,
                None => false,
            };
        if hidden {
            note_garbage(garbage, key::kind_byte(ikey), it.value());
        } else {
            builder.add(ikey, it.value())?;
        }
        it.next();
    }
    // As written, not fragmented: the reader fragments them once at open.
    for t in mem.range_tombstones_as_written() {
        builder.add_range_tombstone(t);
    }
    let built = builder.finish()?;
    // The table's directory entry must be durable before the MANIFEST names it.
    fs.sync_dir(dir)?;
    Ok(built)
}

impl BackgroundWork for DbInner {
    fn flush(&self, cf: &Arc<ColumnFamilyData>) {
        // Blob files the write path filled ride on the flush queue.
        if let Err(e) = self.seal_queued_blob_writers() {
            self.set_background_error(&e);
        }
        // An error is recorded as the background error by flush_oldest; nothing more to do here.
        while let Ok(true) = self.flush_oldest(cf) {}
    }

    fn compact(&self, cf: &Arc<ColumnFamilyData>) {
        // Likewise; success queues the column family again, so one job runs one compaction.
        let _ = self.compact_once(cf);
    }

    fn delete_blob_files(&self) {
        self.blobs.delete_queued();
    }
}

impl DbInner {
    /// Flushes column family `cf`'s oldest immutable memtable. `Ok(false)` when there is none, or
    /// another flush of it is running (a column family's flushes finish in memtable order, which
    /// WAL deletion relies on).
    pub(super) fn flush_oldest(&self, cf: &Arc<ColumnFamilyData>) -> Result<bool> {
        let (mem, next_log) = {
            let mut st = self.state.lock();
            if st.bg_error.is_some() {
                return Ok(false);
            }
            let current_wal = st.current_wal;
            let Some(cs) = st.cf_mut(cf.id) else {
                return Ok(false);
            };
            if cs.flush_running {
                return Ok(false);
            }
            let Some((mem, _)) = cs.imm.front().cloned() else {
                return Ok(false);
            };
            cs.flush_running = true;
            // Where this column family's unflushed data will begin once `mem` is in a table.
            let next_log = cs
                .imm
                .get(1)
                .map(|(_, l)| *l)
                .or(cs.mem_first_log)
                .unwrap_or(current_wal);
            st.flushes_running += 1;
            (mem, next_log)
        };
        for l in &self.opts.listeners {
            l.on_flush_begin(&cf.name);
        }
        let result = self.flush_memtable(cf, &mem, next_log);
        let mut st = self.state.lock();
        st.flushes_running -= 1;
        let outcome = match result {
            Ok(info) => {
                if let Some(cs) = st.cf_mut(cf.id) {
                    cs.flush_running = false;
                    let before = cs.oldest_log();
                    cs.imm.pop_front();
                    let after = cs.oldest_log();
                    st.tracker.repin(cf.id, before, after);
                    self.install_view(&mut st, cf.id);
                }
                let obsolete = st.take_obsolete_wals();
                drop(st);
                self.remove_wals(obsolete);
                // New table bytes may push the column family over `max_db_size`.
                if let Err(e) = self.blob_housekeeping(cf) {
                    self.set_background_error(&e);
                }
                self.scheduler.schedule_compaction(cf);
                Ok(Some(info))
            }
            // Dropped meanwhile: the table was never installed and is gone.
            Err(_) if cf.is_dropped() => Ok(None),
            Err(e) => {
                if let Some(cs) = st.cf_mut(cf.id) {
                    cs.flush_running = false;
                }
                drop(st);
                self.set_background_error(&e);
                Err(e)
            }
        };
        self.state_cv.notify_all();
        let Some(info) = outcome? else {
            return Ok(false);
        };
        for l in &self.opts.listeners {
            l.on_flush_completed(&info);
        }
        Ok(true)
    }

    fn flush_memtable(
        &self,
        cf: &ColumnFamilyData,
        mem: &Arc<MemTable>,
        next_log: u64,
    ) -> Result<FlushInfo> {
        let started = Instant::now();
        let number = self.versions.lock().new_file_number();
        let snapshots = self.snapshots.sequences();
        let mut garbage = BlobGarbage::new();
        let meta = write_level0_table(
            self.fs.as_ref(),
            &self.dir,
            number,
            mem,
            &cf.table_opts,
            &snapshots,
            &mut garbage,
        )?;
        let mut edit = VersionEdit {
            column_family: cf.id,
            log_number: Some(next_log),
            blob_garbage: garbage.iter().map(|(n, b)| (*n, *b)).collect(),
            blob_refs_added: mem.borrowed(),
            ..Default::default()
        };
        let mut info = FlushInfo {
            column_family: cf.name.clone(),
            file_number: None,
            bytes: 0,
            entries: mem.num_entries(),
            duration: Default::default(),
        };
        if let Some(meta) = meta {
            self.stats.flush_bytes.add(meta.file_size);
            cf.level_stats[0].bytes_written.add(meta.file_size);
            info.file_number = Some(meta.number);
            info.bytes = meta.file_size;
            edit.new_files.push((0, meta));
        }
        let last_seq = self.last_sequence.load(Ordering::Acquire);
        let logged = self
            .sync_blob_writers()
            .and_then(|()| self.versions.lock().log_and_apply(edit, last_seq));
        // On failure the table stays: the edit may have reached the disk before the error. It goes
        // once a later MANIFEST has superseded the failed one, or at the next open.
        if logged.is_err() {
            self.note_unlogged_tables(info.file_number);
        }
        logged?;
        self.purge_unlogged_tables();
        self.apply_blob_garbage(&garbage);
        self.stats.flushes.inc();
        info.duration = started.elapsed();
        Ok(info)
    }

    /// Flushes column family `cf` and waits until every memtable it had is in a table.
    pub(super) fn flush(&self, cf: &Arc<ColumnFamilyData>) -> Result<()> {
        let target = {
            let mut wal = self.wal.lock();
            self.resume_writes(&mut wal)?;
            let st = self.state.lock();
            let Some(cs) = st.cf(cf.id) else {
                return Ok(());
            };
            if cs.mem.is_empty() {
                match cs.imm.back() {
                    Some((m, _)) => m.id,
                    None => return Ok(()),
                }
            } else {
                let n = cs.mem.id;
                drop(st);
                self.switch_memtables(&mut wal, &[cf.id])?;
                n
            }
        };
        loop {
            let st = self.state.lock();
            if let Some(e) = &st.bg_error {
                return Err(super::resume::writes_stopped(e));
            }
            let Some(cs) = st.cf(cf.id) else {
                return Ok(());
            };
            if cs.imm.front().is_none_or(|(m, _)| m.id > target) {
                return Ok(());
            }
            self.wait_for_flush(st, cf)?;
        }
    }

    /// Lets one flush of `cf` happen: runs it here under the inline executor, otherwise queues it
    /// and waits until some flush finishes or fails. Callers re-check their condition afterwards.
    /// `Closed` once the store is closed: no flush runs after that, so nothing would end the wait.
    pub(super) fn wait_for_flush(
        &self,
        mut st: MutexGuard<'_, State>,
        cf: &Arc<ColumnFamilyData>,
    ) -> Result<()> {
        self.check_open()?;
        if self.scheduler.mode() == Executor::Inline {
            drop(st);
            self.flush_oldest(cf)?;
        } else {
            self.scheduler.schedule_flush(cf);
            self.state_cv.wait(&mut st);
        }
        Ok(())
    }

    /// Runs one job of what the scheduler's queues hold: one memtable's flush, else one
    /// compaction. Whether it did something, and whether more may be due (something is still
    /// queued).
    fn run_one_job(&self) -> Result<(bool, bool)> {
        let ran = if let Some(cf) = self.scheduler.pop_flush() {
            // Blob files the write path filled ride on the flush queue, as in `flush` above.
            self.seal_queued_blob_writers()?;
            let flushed = self.flush_oldest(&cf)?;
            if flushed {
                // It may have more memtables waiting: its turn comes again.
                self.scheduler.schedule_flush(&cf);
            }
            flushed
        } else if let Some(cf) = self.scheduler.pop_compaction() {
            // A compaction that ran queues its column family again.
            self.compact_once(&cf)?
        } else {
            false
        };
        Ok((ran, self.scheduler.has_queued()))
    }

    /// One job (`run_one_job`); true when more may be due.
    pub(super) fn maintenance_step(&self) -> Result<bool> {
        Ok(self.run_one_job()?.1)
    }

    /// Runs what the scheduler's queues hold, a job at a time (flushes before compactions,
    /// as each job takes a flush first); true when it did something.
    pub(super) fn maintenance(&self) -> Result<bool> {
        let mut did = false;
        loop {
            let (ran, more) = self.run_one_job()?;
            did |= ran;
            if !more {
                break;
            }
        }
        // Blob files left without readers, by these jobs or before them, go before this
        // returns rather than a moment later on the pool: this is pending work too.
        self.blobs.delete_queued();
        Ok(did)
    }
}
