//! Compactions in the database: picking under the compaction lock, running the job, installing the
//! result, and deleting input tables once no version (held by a read view or an iterator) uses them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::DbInner;
use super::column_family::ColumnFamilyData;
use super::compaction_state::CompactionState;
use crate::compaction::{self, BlobContext, CompactionSpec, JobContext};
use crate::error::{Error, Result};
use crate::events::{BlobGcInfo, CompactionInfo, CompactionReason};
use crate::filename::table_file;
use crate::iter::InternalIterator;
use crate::key;
use crate::options::Executor;
use crate::version::{FileMetaData, NUM_LEVELS, Version, VersionEdit};

impl DbInner {
    /// Picks and runs one automatic compaction of `cf`. `Ok(false)` when none is needed (or its
    /// candidates are all being compacted).
    pub(super) fn compact_once(&self, cf: &Arc<ColumnFamilyData>) -> Result<bool> {
        if cf.opts.disable_auto_compactions
            || cf.is_dropped()
            || self.state.lock().bg_error.is_some()
        {
            return Ok(false);
        }
        let dropped = self.drop_covered_tables(cf).inspect_err(|e| {
            if !cf.is_dropped() {
                self.set_background_error(e);
            }
        })?;
        let (spec, version) = {
            let mut cs = cf.compaction.lock();
            if cs.manual {
                return Ok(dropped);
            }
            let Some(version) = self.versions.lock().current(cf.id) else {
                return Ok(false);
            };
            let Some(spec) = compaction::pick(&version, &cf.opts, &cs.busy) else {
                return Ok(dropped);
            };
            self.claim(&mut cs, &spec);
            (spec, version)
        };
        self.run_claimed(cf, spec, version).map(|()| true)
    }

    /// Deletes the tables of `cf` that newer range tombstones cover whole (see
    /// `compaction::covered_tables`) by a MANIFEST edit alone. True when it deleted any.
    fn drop_covered_tables(&self, cf: &Arc<ColumnFamilyData>) -> Result<bool> {
        let dropped = {
            // Held so that no compaction claims these tables meanwhile.
            let cs = cf.compaction.lock();
            if cs.manual {
                return Ok(false);
            }
            let Some(version) = self.versions.lock().current(cf.id) else {
                return Ok(false);
            };
            let snapshots = self.snapshots.sequences();
            let covered = compaction::covered_tables(&version, &self.tables, &snapshots, &cs.busy)?;
            if covered.is_empty() {
                return Ok(false);
            }
            let garbage = self.blob_garbage_in(cf, covered.iter().map(|(l, f)| (*l, f.number)))?;
            let edit = VersionEdit {
                column_family: cf.id,
                deleted_files: covered.iter().map(|(l, f)| (*l, f.number)).collect(),
                blob_garbage: garbage.iter().map(|(n, b)| (*n, *b)).collect(),
                ..Default::default()
            };
            let last_seq = self.last_sequence.load(Ordering::Acquire);
            self.versions.lock().log_and_apply(edit, last_seq)?;
            self.apply_blob_garbage(&garbage);
            covered
        };
        self.stats
            .tables_dropped_by_range_deletion
            .add(dropped.len() as u64);
        self.obsolete
            .lock()
            .extend(dropped.into_iter().map(|(_, f)| f));
        {
            let mut st = self.state.lock();
            self.install_view(&mut st, cf.id);
        }
        self.purge_obsolete_files();
        Ok(true)
    }

    /// Marks a compaction's inputs busy and counts it as running.
    fn claim(&self, cs: &mut CompactionState, spec: &CompactionSpec) {
        cs.running += 1;
        cs.busy.extend(spec.input_files().map(|f| f.number));
        *self.compactions_running.lock() += 1;
    }

    /// Runs a compaction claimed by [`DbInner::claim`], then releases its inputs.
    fn run_claimed(
        &self,
        cf: &Arc<ColumnFamilyData>,
        spec: CompactionSpec,
        version: Arc<Version>,
    ) -> Result<()> {
        let result = self.execute(cf, &spec, &version);
        let inputs: Vec<u64> = spec.input_files().map(|f| f.number).collect();
        let input_bytes: u64 = spec.input_files().map(|f| f.file_size).sum();
        drop(spec);
        drop(version);
        // Delete the inputs before the compaction counts as finished, so that a caller who sees
        // no compaction running also sees no obsolete table left behind.
        if result.is_ok() {
            self.purge_obsolete_files();
            self.refill_reserve(input_bytes);
        }
        {
            let mut cs = cf.compaction.lock();
            cs.running -= 1;
            for n in &inputs {
                cs.busy.remove(n);
            }
        }
        cf.compaction_done.notify_all();
        *self.compactions_running.lock() -= 1;
        self.compaction_cv.notify_all();
        // Stalled writers wait on the state condition.
        self.state_cv.notify_all();
        match result {
            Ok(()) => {
                self.scheduler.schedule_compaction(cf);
                Ok(())
            }
            // Dropped meanwhile: the outputs were never installed and are gone.
            Err(_) if cf.is_dropped() => Ok(()),
            Err(e) => {
                self.set_background_error(&e);
                Err(e)
            }
        }
    }

    fn execute(
        &self,
        cf: &ColumnFamilyData,
        spec: &CompactionSpec,
        version: &Version,
    ) -> Result<()> {
        let started = Instant::now();
        let mut info = CompactionInfo {
            column_family: cf.name.clone(),
            reason: spec.reason,
            input_level: spec.level,
            output_level: spec.output_level,
            input_files: spec.input_files().map(|f| f.number).collect(),
            output_files: Vec::new(),
            bytes_read: spec.input_bytes(),
            bytes_written: 0,
            trivial_move: spec.is_trivial_move(cf.opts.target_file_size_base),
            entries_expired: 0,
            duration: Default::default(),
        };
        for l in &self.opts.listeners {
            l.on_compaction_begin(&info);
        }
        let mut edit = VersionEdit {
            column_family: cf.id,
            ..Default::default()
        };
        for (i, files) in spec.inputs.iter().enumerate() {
            let level = if i == 0 {
                spec.level
            } else {
                spec.output_level
            };
            for f in files {
                edit.deleted_files.push((level, f.number));
            }
        }
        let last_seq = self.last_sequence.load(Ordering::Acquire);
        if info.trivial_move {
            for f in &spec.inputs[0] {
                edit.new_files.push((spec.output_level, (**f).clone()));
            }
            self.versions.lock().log_and_apply(edit, last_seq)?;
            self.stats.trivial_moves.inc();
        } else {
            let snapshots = self.snapshots.sequences();
            let new_file_number = || self.versions.lock().new_file_number();
            let new_blob_file = || self.new_blob_file(cf, None);
            let ctx = JobContext {
                fs: self.fs.as_ref(),
                dir: &self.dir,
                tables: &self.tables,
                table_opts: cf.table_opts.clone(),
                target_file_size: cf.opts.target_file_size_base,
                snapshots,
                filter: cf.opts.compaction_filter.as_deref(),
                version,
                new_file_number: &new_file_number,
                blobs: BlobContext {
                    store: &self.blobs,
                    now: self.now(),
                    gc_files: self.gc_candidates(cf),
                    new_blob_file: &new_blob_file,
                },
            };
            let out = compaction::run(spec, &ctx)?;
            info.output_files = out.files.iter().map(|f| f.number).collect();
            info.bytes_written = out.bytes_written;
            for f in &out.files {
                edit.new_files.push((spec.output_level, f.clone()));
            }
            edit.blob_files_added = out.blob_files.iter().map(|(n, _, _)| *n).collect();
            edit.blob_garbage = out.blob_garbage.iter().map(|(n, b)| (*n, *b)).collect();
            edit.blob_refs_added = crate::blob::bytes_by_file(&out.blob_borrowed);
            if !out.blob_files.is_empty()
                && let Err(e) = self.fs.sync_dir(&self.dir)
            {
                // The relocated values' files must be durable before the MANIFEST names them.
                self.note_unlogged_tables(out.files.iter().map(|f| f.number));
                return Err(e);
            }
            // Readable before the version naming them is: another thread may install a view of
            // that version as soon as it is logged.
            let pending = self.register_sealed_blob_files(cf.id, &out.blob_files);
            // On failure the outputs stay on disk: the edit may have reached it before the error,
            // and the next open deletes whatever no MANIFEST names.
            // The borrows of relocated extent lists count before their old entries' garbage
            // does: the other way round, a file they keep could look wholly garbage meanwhile.
            self.blobs.add_borrowed(&out.blob_borrowed);
            let logged = self.versions.lock().log_and_apply(edit, last_seq);
            if logged.is_err() {
                self.note_unlogged_tables(out.files.iter().map(|f| f.number));
                self.blobs.forget(out.blob_files.iter().map(|(n, _, _)| *n));
                self.blobs.remove_borrowed(&out.blob_borrowed);
            }
            drop(pending);
            logged?;
            self.purge_unlogged_tables();
            self.apply_blob_garbage(&out.blob_garbage);
            self.stats
                .blob_gc_relocated_keys
                .add(out.blob_relocated_keys);
            self.stats
                .blob_gc_relocated_bytes
                .add(out.blob_relocated_bytes);
            self.stats.blob_bytes_written.add(out.blob_relocated_bytes);
            self.stats.compaction_keys_expired.add(out.entries_expired);
            info.entries_expired = out.entries_expired;
            if out.blob_relocated_keys > 0 {
                let gc = BlobGcInfo {
                    column_family: cf.name.clone(),
                    from_files: out.blob_relocated_from.iter().copied().collect(),
                    to_files: out.blob_files.iter().map(|(n, _, _)| *n).collect(),
                    relocated_keys: out.blob_relocated_keys,
                    relocated_bytes: out.blob_relocated_bytes,
                };
                for l in &self.opts.listeners {
                    l.on_blob_gc(&gc);
                }
            }
            self.stats
                .compaction_blob_indexes_evicted
                .add(out.entries_evicted);
            // The inputs are now obsolete; they are deleted once no version holds them.
            self.obsolete.lock().extend(spec.input_files().cloned());
            self.stats.compactions.inc();
            self.stats.compaction_bytes_read.add(info.bytes_read);
            self.stats.compaction_bytes_written.add(out.bytes_written);
            self.stats.compaction_keys_dropped.add(out.entries_dropped);
            self.stats
                .compaction_keys_range_deleted
                .add(out.entries_range_deleted);
            self.stats
                .compaction_range_tombstones_dropped
                .add(out.range_tombstones_dropped);
            let ls = &cf.level_stats[spec.output_level];
            ls.compactions.inc();
            ls.bytes_read_upper
                .add(spec.inputs[0].iter().map(|f| f.file_size).sum());
            ls.bytes_read_lower
                .add(spec.inputs[1].iter().map(|f| f.file_size).sum());
            ls.bytes_written.add(out.bytes_written);
            ls.micros.add(started.elapsed().as_micros() as u64);
        }
        {
            let mut st = self.state.lock();
            self.install_view(&mut st, cf.id);
        }
        if let Some(data) = self.registry.read().get(cf.id).cloned() {
            self.blob_housekeeping(&data)?;
        }
        info.duration = started.elapsed();
        for l in &self.opts.listeners {
            l.on_compaction_completed(&info);
        }
        Ok(())
    }

    /// Deletes tables no version uses any more. A table read by a live iterator (through the
    /// version its view holds) stays until that iterator is gone.
    /// The blob records the tables `files` point at: garbage once the tables are dropped whole.
    fn blob_garbage_in(
        &self,
        cf: &ColumnFamilyData,
        files: impl Iterator<Item = (usize, u64)>,
    ) -> Result<crate::blob::BlobGarbage> {
        let mut garbage = crate::blob::BlobGarbage::new();
        if self.blobs.files_of(cf.id).is_empty() {
            return Ok(garbage);
        }
        let read = crate::sst::BlockReadOptions::ONE_PASS;
        for (level, number) in files {
            let mut it = self.tables.get(number, level)?.iter(read)?;
            it.seek_to_first();
            while it.valid() {
                crate::blob::note_garbage(&mut garbage, key::kind_byte(it.key()), it.value());
                it.next();
            }
            it.status()?;
        }
        Ok(garbage)
    }

    /// Tables whose edit was not logged: deleted now when the edit cannot be in the MANIFEST
    /// (it was never written to it), else once a later MANIFEST supersedes the one it failed in.
    pub(super) fn note_unlogged_tables(&self, numbers: impl IntoIterator<Item = u64>) {
        let failed_in = {
            let versions = self.versions.lock();
            (!versions.manifest_is_healthy()).then(|| versions.manifest_number())
        };
        match failed_in {
            Some(failed_in) => self
                .unlogged_tables
                .lock()
                .extend(numbers.into_iter().map(|n| (n, failed_in))),
            None => numbers
                .into_iter()
                .for_each(|n| self.remove_unnamed_table(n)),
        }
    }

    fn remove_unnamed_table(&self, number: u64) {
        self.tables.evict(number);
        // Failing to remove leaves it to the next open, as before.
        // Through the deletions: its failed edit may have reached a MANIFEST a backup copies.
        let _ = self.deletions.remove(&table_file(&self.dir, number));
    }

    /// Deletes tables whose edit failed to log once no MANIFEST that could hold the edit will be
    /// read again. Left on disk, such a table, its writes long compacted away, looks to the next
    /// open like the only copy of writes a lost edit named.
    pub(super) fn purge_unlogged_tables(&self) {
        let doomed: Vec<u64> = {
            let versions = self.versions.lock();
            let mut unlogged = self.unlogged_tables.lock();
            let (dead, kept): (Vec<_>, Vec<_>) = unlogged
                .drain(..)
                .partition(|&(_, failed_in)| versions.failed_edit_superseded(failed_in));
            *unlogged = kept;
            dead.into_iter().map(|(n, _)| n).collect()
        };
        for n in doomed {
            self.remove_unnamed_table(n);
        }
    }

    pub(super) fn purge_obsolete_files(&self) {
        self.purge_unlogged_tables();
        let doomed: Vec<Arc<FileMetaData>> = {
            let mut obsolete = self.obsolete.lock();
            let (dead, alive): (Vec<_>, Vec<_>) =
                obsolete.drain(..).partition(|f| Arc::strong_count(f) == 1);
            *obsolete = alive;
            dead
        };
        for f in doomed {
            self.tables.evict(f.number);
            // Failing to remove leaves an orphan that the next open deletes.
            if self
                .deletions
                .remove(&table_file(&self.dir, f.number))
                .is_ok()
            {
                self.stats.tables_deleted.inc();
            }
        }
    }

    /// Compacts every table of `cf` holding keys in `[start, end]` (open-ended where `None`) down
    /// to the deepest level that holds data, dropping what no snapshot needs.
    pub(super) fn compact_range(
        &self,
        cf: &Arc<ColumnFamilyData>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        if let (Some(s), Some(e)) = (start, end)
            && s > e
        {
            return Err(Error::InvalidArgument(
                "compact_range: start is after end".into(),
            ));
        }
        let _one_at_a_time = cf.manual_compaction.lock();
        // Data in memtables is part of the range too.
        self.flush(cf)?;
        cf.compaction.lock().manual = true;
        let result = self.compact_range_steps(cf, start, end);
        cf.compaction.lock().manual = false;
        self.scheduler.schedule_compaction(cf);
        // The blob files it left without readers are gone when it returns, as the caller who
        // compacted to reclaim space expects, not a moment later on the pool.
        self.blobs.delete_queued();
        result
    }

    fn compact_range_steps(
        &self,
        cf: &Arc<ColumnFamilyData>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        let lo = start.unwrap_or(&[]).to_vec();
        let mut level = 0;
        // Whether a step of this call wrote into the deepest level; if none did, that level's files
        // in the range are rewritten in place once, so that versions and deletions no snapshot
        // needs any more are dropped there too.
        let mut wrote_bottom = false;
        loop {
            let (spec, version, deepest) = {
                let mut cs = cf.compaction.lock();
                while cs.running > 0 {
                    if self.scheduler.mode() == Executor::Inline {
                        return Err(Error::Busy("a compaction is running".into()));
                    }
                    // Automatic compactions that started before this call finish first.
                    cf.compaction_done.wait(&mut cs);
                }
                let Some(version) = self.versions.lock().current(cf.id) else {
                    return Err(Error::InvalidArgument(format!(
                        "column family {} was dropped",
                        cf.name
                    )));
                };
                let deepest = (1..NUM_LEVELS)
                    .rev()
                    .find(|&l| !version.levels[l].is_empty())
                    .unwrap_or(0);
                let target = deepest.max(compaction::level_targets(&version, &cf.opts).base_level);
                if level > target || (level == target && wrote_bottom) {
                    return Ok(());
                }
                let files: Vec<_> = version.levels[level]
                    .iter()
                    .filter(|f| {
                        key::user_key(&f.largest) >= lo.as_slice()
                            && end.is_none_or(|e| key::user_key(&f.smallest) <= e)
                    })
                    .cloned()
                    .collect();
                if files.is_empty() {
                    if level == target {
                        return Ok(());
                    }
                    level += 1;
                    continue;
                }
                // L0 files overlap each other in any pattern: moving some of them down could put
                // newer data below older data left in L0, so L0 always goes down whole.
                let files = if level == 0 {
                    version.levels[0].clone()
                } else {
                    files
                };
                let output = if level == 0 {
                    target.min(next_nonempty(&version, 0).unwrap_or(target))
                } else if level == target {
                    target
                } else {
                    level + 1
                };
                let Some(spec) = compaction::build(
                    &version,
                    CompactionReason::Manual,
                    level,
                    output,
                    files,
                    &cs.busy,
                ) else {
                    return Err(Error::Busy("the range's tables are being compacted".into()));
                };
                self.claim(&mut cs, &spec);
                (spec, version, deepest)
            };
            let (input, output) = (spec.level, spec.output_level);
            self.run_claimed(cf, spec, version)?;
            // Writing at or below the deepest level holding data rewrote the bottom of the range.
            wrote_bottom |= output >= deepest;
            if input == output {
                return Ok(());
            }
            level = output;
        }
    }
}

/// The first level below `level` that holds any file.
fn next_nonempty(v: &Version, level: usize) -> Option<usize> {
    (level + 1..NUM_LEVELS).find(|&l| !v.levels[l].is_empty())
}
