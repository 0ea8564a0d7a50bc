//! Writing without waiting (`Db::try_write`): a batch that can commit at once, with nothing to
//! wait for, commits as a group of one on the caller's thread; any other is handed back for
//! `write`, where waiting is fine. An async server writes so on its own thread and moves to a
//! blocking one only when it must (doc/architecture.md, "Write path").

use std::sync::Arc;

use super::batch::WriteBatch;
use super::write::{PendingWrite, WalState, memtables_for};
use super::{Db, DbInner};
use crate::error::Result;
use crate::key::SequenceNumber;
use crate::memtable::MemTable;
use crate::options::WriteOptions;

/// What [`Db::try_write`](super::Db::try_write) did with a batch.
#[derive(Debug)]
pub enum TryWrite {
    /// Written, exactly as `write` would have written it, at this sequence number (its last
    /// record's; for an empty batch, the store's newest).
    Committed(SequenceNumber),
    /// Handed back untouched because another writer holds the write path for a moment: it leads
    /// a group, or holds the WAL or the store's state. Trying again soon may commit it.
    Busy(WriteBatch),
    /// Handed back untouched because it must wait: a sync, a value for a blob file, a partial
    /// write, a stall, a memtable to switch, a store whose files are not on this machine's
    /// disk. `write` it where waiting is fine.
    MustWait(WriteBatch),
}

impl TryWrite {
    /// The batch handed back, if it was.
    pub fn into_batch(self) -> Option<WriteBatch> {
        match self {
            TryWrite::Committed(_) => None,
            TryWrite::Busy(b) | TryWrite::MustWait(b) => Some(b),
        }
    }
}

/// Why the write cannot commit now: for a moment, or until it waits.
enum Declined {
    Busy,
    MustWait,
}

impl Declined {
    fn hand_back(self, batch: WriteBatch) -> TryWrite {
        match self {
            Declined::Busy => TryWrite::Busy(batch),
            Declined::MustWait => TryWrite::MustWait(batch),
        }
    }
}

impl Db {
    /// Commits `batch` only if that needs no wait, on the caller's thread: `Committed` once it
    /// is written, exactly as `write` would have written it; else the batch comes back
    /// untouched, `Busy` when another writer holds the write path for a moment (worth trying
    /// again soon), `MustWait` when it would have to wait (a sync asked, a value for a blob
    /// file, a partial write, a stall or a memtable to switch, a store whose files are not on
    /// this machine's disk): the caller then `write`s it where waiting is fine. An async server
    /// writes so on its own workers (doc/architecture.md, "Write path").
    pub fn try_write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<TryWrite> {
        self.check_batch(&batch, true)?;
        let syncs = opts.sync && !opts.disable_wal;
        if batch.is_empty() {
            // Nothing to write; a sync asked for is a wait (`write` makes it a barrier).
            return Ok(if syncs {
                TryWrite::MustWait(batch)
            } else {
                TryWrite::Committed(self.latest_sequence())
            });
        }
        if self.inner.may_separate(&batch)? {
            return Ok(TryWrite::MustWait(batch));
        }
        self.inner.try_write(batch, opts)
    }
}

impl DbInner {
    /// Commits `batch` now if nothing stands in the way; else hands it back untouched.
    pub(super) fn try_write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<TryWrite> {
        let syncs = opts.sync && !opts.disable_wal;
        if syncs || batch.has_partial_ops() || !self.appends_are_local {
            return Ok(TryWrite::MustWait(batch));
        }
        if !self.lead_if_idle() {
            return Ok(TryWrite::Busy(batch));
        }
        let outcome = self.commit_alone(batch, opts.disable_wal);
        self.end_lead();
        outcome
    }

    /// As the leader: commits `batch` as a group of one if the WAL is free and there is room;
    /// else hands it back.
    fn commit_alone(&self, batch: WriteBatch, disable_wal: bool) -> Result<TryWrite> {
        // The WAL is held by a sync barrier, a seal or a resume: that is a wait.
        let Some(mut wal) = self.wal.try_lock() else {
            return Ok(TryWrite::Busy(batch));
        };
        let touched = batch.column_families().to_vec();
        let mems = match self.room_now(&wal, &touched) {
            Ok(mems) => mems,
            Err(why) => return Ok(why.hand_back(batch)),
        };
        let mut writes = [PendingWrite::unsynced(batch, disable_wal)];
        self.commit_with_room(&mut wal, &mut writes, &touched, Some(mems))?;
        Ok(TryWrite::Committed(writes[0].committed_at()))
    }

    /// The memtables a group writing to `touched` goes into, if it could commit now without
    /// waiting or switching anything: the state lock free (a flush or compaction holds it
    /// across a MANIFEST sync), no stop, slowdown or error, a sound WAL, room in every memtable
    /// it writes to, no WALs to release.
    fn room_now(
        &self,
        wal: &WalState,
        touched: &[u32],
    ) -> std::result::Result<Vec<(u32, Arc<MemTable>)>, Declined> {
        if wal.damaged_from.is_some() || wal.writer.is_none() {
            return Err(Declined::MustWait);
        }
        let mut st = self.state.try_lock().ok_or(Declined::Busy)?;
        let room = st.bg_error.is_none()
            && st.tracker.stopping.is_empty()
            && st.tracker.slowing.is_empty()
            && touched.iter().all(|&id| {
                st.cf(id)
                    .is_some_and(|cs| cs.mem.memory_usage() < cs.data.opts.write_buffer_size)
            })
            && self.oldest_wal_to_release(&st, wal).is_none();
        if !room {
            return Err(Declined::MustWait);
        }
        Ok(memtables_for(&mut st, touched, wal.number))
    }

    /// Takes the lead of the write queue if no one leads it and no one waits in it.
    fn lead_if_idle(&self) -> bool {
        let mut q = self.queue.lock();
        if q.leader_active || !q.pending.is_empty() {
            return false;
        }
        q.leader_active = true;
        true
    }

    /// Ends a lead `lead_if_idle` took: writers that queued meanwhile lead on as usual.
    fn end_lead(&self) {
        self.queue.lock().leader_active = false;
        self.queue_cv.notify_all();
    }
}
