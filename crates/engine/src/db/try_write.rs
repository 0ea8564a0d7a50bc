//! Writing without waiting (`Db::try_write`): a batch that can commit at once, with nothing to
//! wait for, commits as a group of one on the caller's thread; any other is handed back for
//! `write`, where waiting is fine. An async server writes so on its own thread and moves to a
//! blocking one only when it must (doc/architecture.md, "Write path").

use std::sync::Arc;

use super::DbInner;
use super::batch::WriteBatch;
use super::write::{PendingWrite, WalState, memtables_for};
use crate::error::Result;
use crate::memtable::MemTable;
use crate::options::WriteOptions;

impl DbInner {
    /// Commits `batch` now if nothing stands in the way; else hands it back untouched.
    pub(super) fn try_write(
        &self,
        batch: WriteBatch,
        opts: &WriteOptions,
    ) -> Result<Option<WriteBatch>> {
        let syncs = opts.sync && !opts.disable_wal;
        if syncs || batch.has_partial_ops() || !self.fs.appends_are_local() {
            return Ok(Some(batch));
        }
        if !self.lead_if_idle() {
            return Ok(Some(batch));
        }
        let outcome = self.commit_alone(batch, opts.disable_wal);
        self.end_lead();
        outcome
    }

    /// As the leader: commits `batch` as a group of one if the WAL is free and there is room;
    /// else hands it back.
    fn commit_alone(&self, batch: WriteBatch, disable_wal: bool) -> Result<Option<WriteBatch>> {
        // The WAL is held by a sync barrier, a seal or a resume: that is a wait.
        let Some(mut wal) = self.wal.try_lock() else {
            return Ok(Some(batch));
        };
        let touched = batch.column_families().to_vec();
        let Some(mems) = self.room_now(&wal, &touched) else {
            return Ok(Some(batch));
        };
        let mut writes = [PendingWrite::unsynced(batch, disable_wal)];
        self.commit_with_room(&mut wal, &mut writes, &touched, Some(mems))?;
        Ok(None)
    }

    /// The memtables a group writing to `touched` goes into, if it could commit now without
    /// waiting or switching anything: the state lock free (a flush or compaction holds it
    /// across a MANIFEST sync), no stop, slowdown or error, a sound WAL, room in every memtable
    /// it writes to, no WALs to release.
    fn room_now(&self, wal: &WalState, touched: &[u32]) -> Option<Vec<(u32, Arc<MemTable>)>> {
        if wal.damaged_from.is_some() || wal.writer.is_none() {
            return None;
        }
        let mut st = self.state.try_lock()?;
        let room = st.bg_error.is_none()
            && st.tracker.stopping.is_empty()
            && st.tracker.slowing.is_empty()
            && touched.iter().all(|&id| {
                st.cf(id)
                    .is_some_and(|cs| cs.mem.memory_usage() < cs.data.opts.write_buffer_size)
            })
            && self.oldest_wal_to_release(&st, wal).is_none();
        room.then(|| memtables_for(&mut st, touched, wal.number))
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
