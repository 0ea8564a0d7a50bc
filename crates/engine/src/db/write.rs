//! The write path. Writers queue their batches; the first one in becomes the leader, takes the whole
//! queue, appends it to the WAL as one record with at most one fsync, inserts it into the memtable,
//! publishes the new sequence number and wakes the followers with the group's outcome.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::Mutex;

use super::DbInner;
use super::batch::{BatchRecord, Op, WriteBatch};
use super::blob::PendingBlobs;
use crate::error::{Error, Result};
use crate::fs::Durability;
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::range_del::RangeTombstone;
use crate::wal::{LogWriter, seal_record};

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
    /// The sequence number this write committed at: its last record's.
    pub(super) fn committed_at(&self) -> SequenceNumber {
        let records = self.batch.len() as SequenceNumber;
        self.batch.sequence() + records.saturating_sub(1)
    }

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
    /// On success, the sequence number each write committed at, by its place in the group.
    outcome: Mutex<Option<Result<Vec<SequenceNumber>>>>,
    /// Writes refused alone, by their place in the group.
    refused: Mutex<Vec<(usize, Error)>>,
}

impl Group {
    /// The outcome for the write at `place`: the sequence number it committed at.
    fn outcome_of(&self, place: usize) -> Option<Result<SequenceNumber>> {
        if let Some((_, e)) = self.refused.lock().iter().find(|(p, _)| *p == place) {
            return Some(Err(e.duplicate()));
        }
        self.outcome.lock().as_ref().map(|o| match o {
            Ok(committed) => committed.get(place).copied().ok_or_else(|| {
                Error::Background(format!("no write at place {place} of its group"))
            }),
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
    /// Set when a sync of the log or of the blob files failed, until a resume: the kernel may
    /// have dropped pages it had accepted, so even the bytes before `damaged_from` cannot be
    /// trusted to read back as written (a reopen replays what reached the disk).
    pub(crate) sync_failed: bool,
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
            // The seal's own sync may be what failed.
            self.sync_failed = true;
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
    /// Commits `batch` in a group with the writers queued beside it; answers the sequence number
    /// it committed at.
    pub(super) fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<SequenceNumber> {
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
        let committed = result.map(|()| writes.iter().map(PendingWrite::committed_at).collect());
        *taken.outcome.lock() = Some(committed.as_ref().map_err(Error::duplicate).cloned());
        q.leader_active = false;
        drop(q);
        self.queue_cv.notify_all();
        taken.outcome_of(place).unwrap_or_else(|| {
            Err(Error::Background(
                "a write group ended without its outcome".into(),
            ))
        })
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
            let mut sync_failed = false;
            let appended = wal.writer.as_mut().ok_or(Error::Closed).and_then(|w| {
                let n = w.add_record(record.data())?;
                // Hand the bytes to the OS at once: an acknowledged write must survive a process
                // crash even without sync.
                w.flush()?;
                if let Some(durability) = sync_to {
                    self.sync_blob_writers()
                        .and_then(|()| w.sync_to(durability))
                        .inspect_err(|_| sync_failed = true)?;
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
                    wal.sync_failed |= sync_failed;
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
        if matches!(e, Error::Closed) {
            // Work a close overtook is no failure: every later call finds the store closed itself.
            return;
        }
        if e.kind() == crate::error::ErrorKind::NoSpace {
            // Until room is back, new WALs reserve nothing ahead (`DbInner::wal_room_ahead`).
            self.wal_room_ahead.store(false, Ordering::Relaxed);
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
