//! The write path. Writers queue their batches; the first one in becomes the leader, takes the whole
//! queue, appends it to the WAL as one record with at most one fsync, inserts it into the memtable,
//! publishes the new sequence number and wakes the followers with the group's outcome.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::DbInner;
use super::batch::{BatchRecord, Op, WriteBatch};
use super::blob::PendingBlobs;
use crate::compaction;
use crate::error::{Error, Result};
use crate::events::StallCause;
use crate::filename::wal_file;
use crate::fs::Durability;
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::MemTable;
use crate::options::{ColumnFamilyOptions, Executor, WriteOptions};
use crate::range_del::RangeTombstone;
use crate::version::Version;
use crate::wal::{LogWriter, seal_record};

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

#[derive(Debug)]
pub(super) struct PendingWrite {
    batch: WriteBatch,
    sync: bool,
    /// With `sync`: how far, when not the store's default.
    durability: Option<Durability>,
    disable_wal: bool,
    /// Why this write alone was refused (a partial write that could not be resolved); the rest
    /// of its group commits without it.
    refused: Option<Error>,
}

impl PendingWrite {
    /// A write without a sync, as `try_write` takes it.
    pub(super) fn unsynced(batch: WriteBatch, disable_wal: bool) -> PendingWrite {
        PendingWrite {
            batch,
            sync: false,
            durability: None,
            disable_wal,
            refused: None,
        }
    }
}

/// The memtables a group writing to `touched` goes into (none for a column family dropped since).
pub(super) fn memtables_for(
    st: &mut super::State,
    touched: &[u32],
    wal_number: u64,
) -> Vec<(u32, Arc<MemTable>)> {
    touched
        .iter()
        .filter_map(|&id| Some((id, st.memtable_for_write(id, wal_number)?)))
        .collect()
}

/// The column families `writes` touch, each once.
fn touched_cfs(writes: &[PendingWrite]) -> Vec<u32> {
    let mut touched: Vec<u32> = Vec::new();
    for w in writes {
        for &cf in w.batch.column_families() {
            if !touched.contains(&cf) {
                touched.push(cf);
            }
        }
    }
    touched
}

/// How far a group's WAL sync goes: `None` when no write in it asked for one, else
/// `Some(durability)`, where `None` is the store's default. The furthest any write asked for
/// wins: `Local` below the default, `Remote` above it.
fn group_sync(writes: &[PendingWrite]) -> Option<Option<Durability>> {
    let rank = |d: &Option<Durability>| match d {
        Some(Durability::Local) => 0,
        None => 1,
        Some(Durability::Remote) => 2,
    };
    writes
        .iter()
        .filter(|w| w.sync)
        .map(|w| w.durability)
        .max_by_key(rank)
}

/// The outcome shared by every writer of one group.
#[derive(Debug, Default)]
struct Group {
    outcome: Mutex<Option<Result<()>>>,
    /// Writes refused alone, by their place in the group.
    refused: Mutex<Vec<(usize, Error)>>,
}

impl Group {
    /// The outcome for the write at `place`.
    fn outcome_of(&self, place: usize) -> Option<Result<()>> {
        if let Some((_, e)) = self.refused.lock().iter().find(|(p, _)| *p == place) {
            return Some(Err(e.duplicate()));
        }
        self.outcome.lock().as_ref().map(|o| match o {
            Ok(()) => Ok(()),
            Err(e) => Err(e.duplicate()),
        })
    }
}

#[derive(Debug, Default)]
pub(crate) struct WriteQueue {
    pub(super) pending: Vec<PendingWrite>,
    /// The group the pending writes will commit in.
    group: Arc<Group>,
    pub(super) leader_active: bool,
}

/// The WAL being appended to; only the write leader touches it.
#[derive(Debug)]
pub(crate) struct WalState {
    pub(crate) writer: Option<LogWriter>,
    pub(crate) number: u64,
    /// While writes are slowed: when the next group may go, so that slowed writes average
    /// `delayed_write_rate` bytes per second.
    pub(crate) delayed_until: Option<Instant>,
    /// Set when an append, sync or seal of the log failed: its bytes past this length are
    /// unknown (a torn record, or a whole one whose writers were told it failed). Nothing is
    /// appended until a resume cuts the log back to it and seals it (`db/resume.rs`).
    pub(crate) damaged_from: Option<u64>,
}

impl WalState {
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.sync_to(None)
    }

    /// Syncs the log as far as `durability` (`None`: the store's default).
    pub(crate) fn sync_to(&mut self, durability: Option<Durability>) -> Result<()> {
        match self.writer.as_mut() {
            Some(w) => w.sync_to(durability),
            None => Ok(()),
        }
    }

    /// Ends the log with a seal naming `next_wal`, the log that replaces it, and syncs it. On
    /// failure the log is marked damaged from where the seal began.
    pub(super) fn seal(&mut self, next_wal: u64) -> Result<()> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        let good = w.bytes_written();
        // The last sync of this log: a backend that keeps a copy of it elsewhere completes it,
        // seal included, so no copy of a WAL followed by another ever lacks its seal.
        let sealed = w
            .add_record(&seal_record(next_wal))
            .and_then(|_| w.finish());
        if sealed.is_err() {
            self.damaged_from = Some(good);
        }
        sealed
    }
}

/// Applies one record of a write batch to `mem` at sequence number `seq`: the write path's job,
/// shared with recovery and repair, so the memtable knows nothing of batches. Returns the blob
/// records the entry borrows (`blob::borrowed_records`), noted in `mem` and for the caller to
/// count in the blob store.
pub(super) fn apply_to_memtable(
    mem: &MemTable,
    seq: SequenceNumber,
    r: &BatchRecord<'_>,
) -> Vec<crate::blob::BlobRef> {
    match r.op {
        Op::Point(kind) => {
            mem.add(seq, kind, r.key, r.value);
            let borrowed = crate::blob::borrowed_records(kind as u8, r.value);
            for b in &borrowed {
                mem.note_borrowed(b.file, b.size);
            }
            return borrowed;
        }
        Op::DeleteRange => mem.add_range_tombstone(RangeTombstone::new(r.key, r.value, seq)),
        // Resolved before a batch is logged; never in a WAL.
        Op::Partial => {}
    }
    Vec::new()
}

impl DbInner {
    pub(super) fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        let mut q = self.queue.lock();
        let place = q.pending.len();
        q.pending.push(PendingWrite {
            batch,
            sync: opts.sync,
            durability: opts.durability,
            disable_wal: opts.disable_wal,
            refused: None,
        });
        let group = q.group.clone();
        loop {
            if let Some(outcome) = group.outcome_of(place) {
                return outcome;
            }
            if !q.leader_active {
                break;
            }
            self.queue_cv.wait(&mut q);
        }
        // Leader: take everything queued so far, including writes that joined after ours.
        q.leader_active = true;
        if let Some(sync_to) = group_sync(&q.pending) {
            // A WAL that spaces its syncs out is waited on before the group is taken, not
            // after: the writers that come meanwhile join this group and share its one sync.
            drop(q);
            self.wait_for_sync_slot(sync_to);
            q = self.queue.lock();
        }
        let mut writes = std::mem::take(&mut q.pending);
        let taken = std::mem::take(&mut q.group);
        drop(q);

        let result = self.commit_group(&mut writes);

        let mut q = self.queue.lock();
        taken.refused.lock().extend(
            writes
                .iter_mut()
                .enumerate()
                .filter_map(|(i, w)| Some((i, w.refused.take()?))),
        );
        *taken.outcome.lock() = Some(result.as_ref().map(|_| ()).map_err(Error::duplicate));
        q.leader_active = false;
        drop(q);
        self.queue_cv.notify_all();
        taken.outcome_of(place).unwrap_or(result)
    }

    /// Resolves the partial writes of each write that has any, against the store as the last
    /// group left it and the writes before it in this group (`db/partial.rs`). One that cannot
    /// be resolved is refused alone and leaves an empty batch.
    fn resolve_group(&self, writes: &mut [PendingWrite], pending: &mut PendingBlobs) {
        // In the order sequence numbers go (logged writes first): each sees exactly the writes
        // that land before it.
        let order: Vec<usize> = (0..writes.len())
            .filter(|&i| !writes[i].disable_wal)
            .chain((0..writes.len()).filter(|&i| writes[i].disable_wal))
            .collect();
        for (n, &i) in order.iter().enumerate() {
            if !writes[i].batch.has_partial_ops() {
                continue;
            }
            let mark = pending.unnamed.mark();
            let resolved = {
                let earlier: Vec<&WriteBatch> =
                    order[..n].iter().map(|&j| &writes[j].batch).collect();
                self.resolve_partial_writes(&writes[i].batch, &earlier, pending)
            };
            match resolved {
                Ok(b) => writes[i].batch = b,
                Err(e) => {
                    writes[i].refused = Some(e);
                    writes[i].batch.clear();
                    let undone = pending.unnamed.since(mark);
                    self.forget_unnamed(undone);
                }
            }
        }
    }

    /// Sleeps until the WAL would start a sync as far as `durability` (at once on the local disk).
    fn wait_for_sync_slot(&self, durability: Option<Durability>) {
        let not_before = self
            .wal
            .lock()
            .writer
            .as_ref()
            .and_then(|w| w.sync_not_before(durability));
        if let Some(at) = not_before {
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
        }
    }

    /// Commits one group as the leader.
    fn commit_group(&self, writes: &mut [PendingWrite]) -> Result<()> {
        let mut wal = self.wal.lock();
        let group_bytes: u64 = writes.iter().map(|w| w.batch.size_in_bytes() as u64).sum();
        let touched = touched_cfs(writes);
        // A group that adds no data (deletions, renames) may spend the disk reserve.
        let removals_only = |writes: &[PendingWrite]| {
            writes.iter().any(|w| !w.batch.is_empty())
                && writes.iter().all(|w| w.batch.holds_only_removals())
        };
        self.make_room_for_write(&mut wal, group_bytes, &touched, &|| removals_only(writes))?;
        self.commit_with_room(&mut wal, writes, &touched, None)
    }

    /// Commits one group as the leader, once there is room for it in the memtables `touched`
    /// (`mems`, when the caller took them already, under the state lock it held).
    pub(super) fn commit_with_room(
        &self,
        wal: &mut WalState,
        writes: &mut [PendingWrite],
        touched: &[u32],
        mems: Option<Vec<(u32, Arc<MemTable>)>>,
    ) -> Result<()> {
        // New blob records of partial writes stay unevictable until the group lands.
        let mut pending = PendingBlobs::default();
        self.resolve_group(writes, &mut pending);
        // A column family dropped since its writer checked it is skipped: its records are in the
        // WAL, and recovery skips them too.
        let mems = match mems {
            Some(mems) => mems,
            None => memtables_for(&mut self.state.lock(), touched, wal.number),
        };
        let first_seq = self.last_sequence.load(Ordering::Relaxed) + 1;

        // WAL-logged batches take the first sequence numbers so that their merged record is contiguous.
        let mut seq = first_seq;
        let mut logged_writes = 0;
        for w in writes
            .iter_mut()
            .filter(|w| !w.disable_wal && !w.batch.is_empty())
        {
            w.batch.set_sequence(seq);
            seq += w.batch.len() as u64;
            logged_writes += 1;
        }
        for w in writes.iter_mut().filter(|w| w.disable_wal) {
            w.batch.set_sequence(seq);
            seq += w.batch.len() as u64;
        }
        let last_seq = seq - 1;
        // A group of one (the common case without concurrent writers) logs its batch as it is;
        // only a real group pays for a merged copy.
        let merged = (logged_writes > 1).then(|| {
            let mut logged = writes
                .iter()
                .filter(|w| !w.disable_wal && !w.batch.is_empty());
            let mut merged = logged.next().map(|w| w.batch.clone()).unwrap_or_default();
            logged.for_each(|w| merged.append_batch(&w.batch));
            merged
        });
        let logged = match &merged {
            Some(m) => Some(m),
            None => writes
                .iter()
                .find(|w| !w.disable_wal && !w.batch.is_empty())
                .map(|w| &w.batch),
        };

        if let Some(record) = logged {
            let sync_to = group_sync(writes);
            let need_sync = sync_to.is_some();
            let good = wal.writer.as_ref().map_or(0, |w| w.bytes_written());
            let appended = wal.writer.as_mut().ok_or(Error::Closed).and_then(|w| {
                let n = w.add_record(record.data())?;
                // Hand the bytes to the OS at once: an acknowledged write must survive a process
                // crash even without sync.
                w.flush()?;
                if let Some(durability) = sync_to {
                    self.sync_blob_writers()?;
                    w.sync_to(durability)?;
                }
                Ok(n)
            });
            match appended {
                Ok(n) => {
                    self.stats.wal_bytes.add(n as u64);
                    if need_sync {
                        self.stats.wal_syncs.inc();
                    }
                }
                Err(e) => {
                    // The log's tail is now unknown: refuse further writes rather than risk a
                    // hole, until a resume cuts the tail off.
                    wal.damaged_from = Some(good);
                    self.set_background_error(&e);
                    // The group's borrows go back. Its records may yet be named: a record that
                    // reached the log whole is replayed if a crash comes before the resume cuts
                    // it, so they are not garbage until then (left counted as live: space only).
                    self.forget_unnamed(pending.unnamed.borrows());
                    return Err(e);
                }
            }
        }

        let (mut puts, mut deletes, mut range_deletes) = (0u64, 0u64, 0u64);
        let mut bytes = 0u64;
        for w in writes.iter() {
            let mut s = w.batch.sequence();
            w.batch
                .for_each(|r| {
                    if let Some((_, mem)) = mems.iter().find(|(id, _)| *id == r.cf) {
                        // Borrowed records were counted when the write was resolved.
                        let _borrowed = apply_to_memtable(mem, s, &r);
                    }
                    s += 1;
                    match r.op {
                        Op::Point(ValueKind::Put | ValueKind::BlobIndex) => puts += 1,
                        Op::Point(ValueKind::Delete) => deletes += 1,
                        Op::DeleteRange => range_deletes += 1,
                        Op::Partial => {}
                    }
                    bytes += (r.key.len() + r.value.len()) as u64;
                })
                .map_err(Error::InvalidArgument)?;
        }
        self.last_sequence.store(last_seq, Ordering::Release);
        self.stats.write_groups.inc();
        self.stats.write_batches.add(writes.len() as u64);
        self.stats.keys_written.add(puts);
        self.stats.keys_deleted.add(deletes);
        self.stats.range_deletes.add(range_deletes);
        self.stats.bytes_written.add(bytes);
        Ok(())
    }

    pub(super) fn set_background_error(&self, e: &Error) {
        let mut st = self.state.lock();
        let first = st.bg_error.is_none();
        if first {
            st.bg_error = Some(e.duplicate());
        }
        drop(st);
        self.state_cv.notify_all();
        if first {
            let msg = e.to_string();
            for l in &self.opts.listeners {
                l.on_background_error(&msg);
            }
        }
    }

    /// Holds writes back while background work is behind: slows a group down once (to
    /// `delayed_write_rate`) while some column family is past a slowdown limit, waits while one is
    /// past a stop limit or while a memtable the group writes to is full and every memtable of its
    /// column family is waiting for a flush; then switches full memtables (and those pinning the
    /// oldest WAL once the WALs pass `max_total_wal_size`).
    fn make_room_for_write(
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
        let closed = match wal.writer.as_ref().map(|w| w.bytes_written()) {
            Some(0) => None,
            _ => {
                let number = self.versions.lock().new_file_number();
                let path = wal_file(&self.dir, number);
                let file = self.fs.create(&path)?;
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

    #[test]
    fn a_group_syncs_as_far_as_its_furthest_write_asked() {
        let w = |sync, durability| PendingWrite {
            batch: WriteBatch::new(),
            sync,
            durability,
            disable_wal: false,
            refused: None,
        };
        let (local, remote) = (Some(Durability::Local), Some(Durability::Remote));
        assert_eq!(group_sync(&[w(false, None), w(false, remote)]), None);
        assert_eq!(group_sync(&[w(true, local), w(false, remote)]), Some(local));
        assert_eq!(group_sync(&[w(true, local), w(true, None)]), Some(None));
        assert_eq!(
            group_sync(&[w(true, None), w(true, remote), w(true, local)]),
            Some(remote)
        );
    }
}
