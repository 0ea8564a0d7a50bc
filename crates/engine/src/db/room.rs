//! Room for writes: what compaction debt asks of writers (`Pressure`), holding a group back
//! while a column family is past a slowdown or stop limit, and switching full memtables (and
//! those pinning the oldest WAL) so the group has somewhere to go. Called by the write path
//! (`write.rs`) with the WAL held.

use std::time::{Duration, Instant};

use super::DbInner;
use super::write::WalState;
use crate::compaction;
use crate::error::Result;
use crate::events::StallCause;
use crate::filename::wal_file;
use crate::options::{ColumnFamilyOptions, Executor};
use crate::version::Version;
use crate::wal::LogWriter;

/// About how long a WAL grows before a memtable switch replaces it: twice the largest memtable
/// budget (a WAL record is smaller than its memtable entry). A WAL is created at this size
/// (`FileSystem::create_sized`) so that, on the local disk, an append is a copy into pages
/// populated ahead rather than a `write` call; a longer one goes on past it with `write`, and a
/// crash leaves a zero tail, which the WAL reader takes for a cut-short end.
pub(super) fn expected_wal_len(opts: &crate::options::Options) -> u64 {
    let largest = opts
        .column_families
        .values()
        .map(|cf| cf.write_buffer_size)
        .fold(opts.cf.write_buffer_size, usize::max);
    (largest as u64).saturating_mul(2)
}

/// What compaction debt asks of writers; computed once per installed version.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pressure {
    pub(crate) stop: Option<StallCause>,
    pub(crate) slowdown: Option<StallCause>,
}

impl Pressure {
    /// Whether L0 or pending compaction bytes in `version`, or `unflushed` memtables (the active
    /// one included) waiting for flushes, call for slowing or stopping writes.
    pub(crate) fn of(version: &Version, o: &ColumnFamilyOptions, unflushed: usize) -> Pressure {
        let mut p = Pressure::default();
        // As RocksDB: with more than three memtables allowed, slow down one before the last.
        if o.max_write_buffer_number > 3 && unflushed + 1 >= o.max_write_buffer_number {
            p.slowdown = Some(StallCause::TooManyMemtables);
        }
        if o.disable_auto_compactions {
            return p;
        }
        let l0 = version.levels[0].len();
        let pending = compaction::pending_compaction_bytes(version, o);
        if l0 >= o.level0_stop_writes_trigger {
            p.stop = Some(StallCause::Level0Stop);
        } else if o.hard_pending_compaction_bytes_limit > 0
            && pending >= o.hard_pending_compaction_bytes_limit
        {
            p.stop = Some(StallCause::PendingCompactionHard);
        } else if l0 >= o.level0_slowdown_writes_trigger {
            p.slowdown = Some(StallCause::Level0Slowdown);
        } else if o.soft_pending_compaction_bytes_limit > 0
            && pending >= o.soft_pending_compaction_bytes_limit
        {
            p.slowdown = Some(StallCause::PendingCompactionSoft);
        }
        p
    }
}

impl DbInner {
    /// Holds writes back while background work is behind: slows a group down once (to
    /// `delayed_write_rate`) while some column family is past a slowdown limit, waits while one is
    /// past a stop limit or while a memtable the group writes to is full and every memtable of its
    /// column family is waiting for a flush; then switches full memtables (and those pinning the
    /// oldest WAL once the WALs pass `max_total_wal_size`).
    pub(super) fn make_room_for_write(
        &self,
        wal: &mut WalState,
        group_bytes: u64,
        touched: &[u32],
        deletions_only: &dyn Fn() -> bool,
    ) -> Result<()> {
        let mut stall: Option<(Instant, StallCause)> = None;
        let mut delayed = false;
        let mut stopped = false;
        let result = 'wait: loop {
            let mut st = self.state.lock();
            if st.bg_error.is_some() {
                drop(st);
                match self.resume_writes_for(wal, deletions_only()) {
                    Ok(()) => continue,
                    Err(e) => break Err(e),
                }
            }
            if let Some((&id, &cause)) = st.tracker.stopping.iter().next() {
                if !stopped {
                    stopped = true;
                    self.stats.write_stops.inc();
                }
                self.note_stall(&mut stall, cause);
                let Some(cf) = st.cf(id).map(|cs| cs.data.clone()) else {
                    st.tracker.stopping.remove(&id);
                    continue;
                };
                if self.scheduler.mode() == Executor::Inline {
                    drop(st);
                    match self.compact_once(&cf) {
                        Ok(true) => continue,
                        // Nothing can be compacted now: let the write through rather than hang.
                        Ok(false) => break Ok(()),
                        Err(e) => break Err(e),
                    }
                }
                self.scheduler.schedule_compaction(&cf);
                self.state_cv.wait_for(&mut st, Duration::from_millis(100));
                continue;
            }
            match st.tracker.slowing.values().next().copied() {
                Some(cause) if !delayed => {
                    drop(st);
                    delayed = true;
                    self.stats.write_slowdowns.inc();
                    // Each group is scheduled after the previous one by its size over the rate;
                    // a group sleeps only once the schedule runs ahead of the clock.
                    let now = Instant::now();
                    let start = wal.delayed_until.filter(|t| *t > now).unwrap_or(now);
                    let due = start
                        + Duration::from_micros(
                            group_bytes.saturating_mul(1_000_000) / self.opts.delayed_write_rate,
                        );
                    wal.delayed_until = Some(due);
                    if due > now + Duration::from_millis(1) {
                        self.note_stall(&mut stall, cause);
                        std::thread::sleep((due - now).min(Duration::from_secs(1)));
                    }
                    continue;
                }
                Some(_) => {}
                None => wal.delayed_until = None,
            }
            let mut switch: Vec<u32> = touched
                .iter()
                .copied()
                .filter(|&id| {
                    st.cf(id)
                        .is_some_and(|cs| cs.mem.memory_usage() >= cs.data.opts.write_buffer_size)
                })
                .collect();
            if switch.is_empty() {
                switch = self.cfs_holding_wals_back(&mut st, wal);
            }
            for &id in &switch {
                let Some(cs) = st.cf(id) else { continue };
                if cs.imm.len() + 1 >= cs.data.opts.max_write_buffer_number {
                    let cf = cs.data.clone();
                    self.note_stall(&mut stall, StallCause::MemtableLimit);
                    if let Err(e) = self.wait_for_flush(st, &cf) {
                        break 'wait Err(e);
                    }
                    continue 'wait;
                }
            }
            drop(st);
            if switch.is_empty() {
                break Ok(());
            }
            break self.switch_memtables(wal, &switch);
        };
        if let Some((started, cause)) = stall {
            let waited = started.elapsed();
            self.stats.write_stall_micros.add(waited.as_micros() as u64);
            for l in &self.opts.listeners {
                l.on_stall_end(cause, waited);
            }
        }
        result
    }

    /// Once the live WALs pass `max_total_wal_size`: the column families whose active memtable
    /// holds data in the oldest WAL, which must flush for it to be deleted. Each WAL is acted on
    /// once, so writes do not look at those column families again while their flushes run.
    fn cfs_holding_wals_back(&self, st: &mut super::State, wal: &WalState) -> Vec<u32> {
        let Some(oldest) = self.oldest_wal_to_release(st, wal) else {
            return Vec::new();
        };
        st.wal_released_up_to = oldest;
        st.tracker
            .pinning(oldest)
            .filter(|&id| {
                st.cf(id)
                    .is_some_and(|cs| cs.mem_first_log.is_some_and(|l| l <= oldest))
            })
            .collect()
    }

    /// The oldest WAL, once the live WALs pass `max_total_wal_size` and it has not been acted on.
    pub(super) fn oldest_wal_to_release(&self, st: &super::State, wal: &WalState) -> Option<u64> {
        let &(oldest, _) = st.live_wals.first()?;
        if st.wal_released_up_to >= oldest {
            return None;
        }
        let current = wal.writer.as_ref().map_or(0, |w| w.bytes_written());
        let total: u64 = st.live_wals.iter().map(|(_, b)| b).sum::<u64>() + current;
        let limit = match self.opts.max_total_wal_size {
            // RocksDB's default: four times what every column family's memtables may hold.
            0 => 4 * st.memtable_budget,
            n => n,
        };
        (total > limit).then_some(oldest)
    }

    /// Records the start of a stall (once per write group, under its first cause).
    fn note_stall(&self, stall: &mut Option<(Instant, StallCause)>, cause: StallCause) {
        if stall.is_some() {
            return;
        }
        *stall = Some((Instant::now(), cause));
        self.stats.write_stalls.inc();
        for l in &self.opts.listeners {
            l.on_stall_begin(cause);
        }
    }

    /// Makes the memtables of column families `ids` immutable and queues their flushes, moving to
    /// a new WAL first (unless the current one is still empty) so that their flushes can release
    /// the old one.
    pub(super) fn switch_memtables(&self, wal: &mut WalState, ids: &[u32]) -> Result<()> {
        // A writer or flush that got past its check before a close took the WAL lock: close let
        // go of the log, and a new one now would follow it unsealed.
        self.check_open()?;
        let closed = match wal.writer.as_ref().map(|w| w.bytes_written()) {
            Some(0) => None,
            _ => {
                let number = self.versions.lock().new_file_number();
                let path = wal_file(&self.dir, number);
                let file = if self
                    .wal_room_ahead
                    .load(std::sync::atomic::Ordering::Relaxed)
                {
                    self.fs.create_sized(&path, expected_wal_len(&self.opts))?
                } else {
                    self.fs.create(&path)?
                };
                let ready = self
                    .fs
                    .sync_dir(&self.dir)
                    .and_then(|()| self.sync_blob_writers());
                if let Err(e) = ready {
                    // Nothing was written to it: the old log stays current.
                    drop(file);
                    let _ = self.fs.remove(&path);
                    return Err(e);
                }
                // Seal and sync the old log so that nothing acknowledged in it can be lost while
                // a synced write in the new log survives: recovery must never see a hole, and
                // the seal shows it one that falls between two records.
                if let Err(e) = wal.seal(number) {
                    // The old log's tail is unknown now: refuse further writes. The new log stays
                    // (empty): the seal naming it may have reached the disk.
                    self.set_background_error(&e);
                    return Err(e);
                }
                let old_bytes = wal.writer.as_ref().map_or(0, |w| w.bytes_written());
                wal.writer = Some(LogWriter::new(file));
                wal.number = number;
                Some(old_bytes)
            }
        };
        let mut st = self.state.lock();
        if let Some(bytes) = closed {
            if let Some(last) = st.live_wals.last_mut() {
                last.1 = bytes;
            }
            st.live_wals.push((wal.number, 0));
            st.current_wal = wal.number;
        }
        for &id in ids {
            let Some(cs) = st.cf_mut(id) else { continue };
            if cs.mem.is_empty() {
                continue;
            }
            let fresh = cs.data.new_memtable(cs.next_memtable_id);
            cs.next_memtable_id += 1;
            let old = std::mem::replace(&mut cs.mem, fresh);
            let first_log = cs.mem_first_log.take().unwrap_or(wal.number);
            cs.imm.push_back((old, first_log));
            let cf = cs.data.clone();
            self.install_view(&mut st, id);
            self.scheduler.schedule_flush(&cf);
        }
        let obsolete = st.take_obsolete_wals();
        drop(st);
        self.remove_wals(obsolete);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memtables_piling_up_slow_writes_down() {
        let v = Version::default();
        let o = ColumnFamilyOptions {
            max_write_buffer_number: 5,
            ..Default::default()
        };
        assert!(Pressure::of(&v, &o, 3).slowdown.is_none());
        assert_eq!(
            Pressure::of(&v, &o, 4).slowdown,
            Some(StallCause::TooManyMemtables)
        );
        // With few memtables allowed, waiting for the last one is enough.
        let few = ColumnFamilyOptions::default();
        assert!(Pressure::of(&v, &few, 1).slowdown.is_none());
    }
}
