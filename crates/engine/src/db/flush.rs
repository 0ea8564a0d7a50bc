//! Flush: the oldest immutable memtable becomes an L0 table, installed by a MANIFEST edit that also
//! advances the WAL number below which logs are obsolete; then those logs are deleted.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::MutexGuard;

use super::background::BackgroundWork;
use super::{DbInner, State};
use crate::error::Result;
use crate::events::FlushInfo;
use crate::filename::{table_file, wal_file};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::memtable::MemTable;
use crate::options::Executor;
use crate::sst::{TableBuilder, TableOptions};
use crate::version::{FileMetaData, VersionEdit};

/// Writes `mem` as table `number` in `dir`; `None` when the memtable is empty (no file is left).
pub(crate) fn write_level0_table(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    mem: &Arc<MemTable>,
    opts: &TableOptions,
) -> Result<Option<FileMetaData>> {
    if mem.is_empty() {
        return Ok(None);
    }
    let path = table_file(dir, number);
    let mut builder = TableBuilder::new(fs.create(&path)?, &path, opts.clone());
    let mut it = mem.iter();
    it.seek_to_first();
    while it.valid() {
        builder.add(it.key(), it.value())?;
        it.next();
    }
    let (props, file_size) = builder.finish()?;
    // The table's directory entry must be durable before the MANIFEST names it.
    fs.sync_dir(dir)?;
    Ok(Some(FileMetaData::from_table(number, file_size, props)))
}

impl BackgroundWork for DbInner {
    fn run_flushes(&self) {
        // An error is recorded as the background error by flush_oldest; nothing more to do here.
        while let Ok(true) = self.flush_oldest() {}
    }

    fn run_compactions(&self, flush_requested: &dyn Fn() -> bool) {
        self.compact_until_done(flush_requested);
    }
}

impl DbInner {
    /// Flushes the oldest immutable memtable. `Ok(false)` when there is none, or another flush is
    /// running (flushes finish in memtable order, which WAL deletion relies on).
    pub(super) fn flush_oldest(&self) -> Result<bool> {
        let (mem, next_log) = {
            let mut st = self.state.lock();
            if st.flush_running || st.bg_error.is_some() {
                return Ok(false);
            }
            let Some(mem) = st.imm.front().cloned() else {
                return Ok(false);
            };
            st.flush_running = true;
            let next_log = st.imm.get(1).map_or(st.mem.log_number, |m| m.log_number);
            (mem, next_log)
        };
        for l in &self.opts.listeners {
            l.on_flush_begin();
        }
        let result = self.flush_memtable(&mem, next_log);
        let mut st = self.state.lock();
        st.flush_running = false;
        match &result {
            Ok(_) => {
                st.imm.pop_front();
                self.install_view(&st);
                let obsolete: Vec<u64> = st
                    .live_wals
                    .iter()
                    .copied()
                    .filter(|n| *n < next_log)
                    .collect();
                st.live_wals.retain(|n| *n >= next_log);
                drop(st);
                for n in obsolete {
                    // Already superseded by the MANIFEST: a failed removal only leaves a file that the
                    // next open deletes.
                    let _ = self.fs.remove(&wal_file(&self.dir, n));
                }
                self.scheduler.request_compaction();
            }
            Err(e) => {
                drop(st);
                self.set_background_error(e);
            }
        }
        self.state_cv.notify_all();
        let info = result?;
        for l in &self.opts.listeners {
            l.on_flush_completed(&info);
        }
        Ok(true)
    }

    fn flush_memtable(&self, mem: &Arc<MemTable>, next_log: u64) -> Result<FlushInfo> {
        let started = Instant::now();
        let number = self.versions.lock().new_file_number();
        let table_opts = TableOptions::from_options(&self.opts);
        let meta = write_level0_table(self.fs.as_ref(), &self.dir, number, mem, &table_opts)?;
        let mut edit = VersionEdit {
            log_number: Some(next_log),
            ..Default::default()
        };
        let mut info = FlushInfo {
            file_number: None,
            bytes: 0,
            entries: mem.num_entries(),
            duration: Default::default(),
        };
        if let Some(meta) = meta {
            self.stats.flush_bytes.add(meta.file_size);
            self.level_stats[0].bytes_written.add(meta.file_size);
            info.file_number = Some(meta.number);
            info.bytes = meta.file_size;
            edit.new_files.push((0, meta));
        }
        let last_seq = self.last_sequence.load(Ordering::Acquire);
        if let Err(e) = self.versions.lock().log_and_apply(edit, last_seq) {
            let _ = self.fs.remove(&table_file(&self.dir, number));
            return Err(e);
        }
        self.stats.flushes.inc();
        info.duration = started.elapsed();
        Ok(info)
    }

    pub(super) fn flush(&self) -> Result<()> {
        let target = {
            let mut wal = self.wal.lock();
            let st = self.state.lock();
            if let Some(e) = &st.bg_error {
                return Err(crate::Error::Background(e.to_string()));
            }
            if st.mem.is_empty() {
                match st.imm.back() {
                    Some(m) => m.log_number,
                    None => return Ok(()),
                }
            } else {
                let n = st.mem.log_number;
                drop(st);
                self.switch_memtable(&mut wal)?;
                n
            }
        };
        loop {
            let st = self.state.lock();
            if let Some(e) = &st.bg_error {
                return Err(crate::Error::Background(e.to_string()));
            }
            if st.imm.front().is_none_or(|m| m.log_number > target) {
                return Ok(());
            }
            self.wait_for_flush(st)?;
        }
    }

    /// Lets one flush happen: runs it here under the inline executor, otherwise asks the pool and
    /// waits until a flush finishes or fails. Callers re-check their condition afterwards.
    pub(super) fn wait_for_flush(&self, mut st: MutexGuard<'_, State>) -> Result<()> {
        if self.scheduler.mode() == Executor::Inline {
            drop(st);
            self.flush_oldest()?;
        } else {
            self.scheduler.request_flush();
            self.state_cv.wait(&mut st);
        }
        Ok(())
    }

    pub(super) fn maintenance(&self) -> Result<bool> {
        let mut did = false;
        if self.scheduler.mode() == Executor::Inline {
            self.scheduler.take_requests();
        }
        while self.flush_oldest()? {
            did = true;
        }
        while self.compact_once()? {
            did = true;
        }
        Ok(did)
    }
}
