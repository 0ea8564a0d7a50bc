//! Durability barriers and resuming writes after a full disk or a storage outage.
//!
//! `Db::sync_wal` is RocksDB's `SyncWAL`: every write acknowledged before it is durable when it
//! returns (a synced empty batch means the same). A failed log write, flush or compaction stops
//! writes (the background error); when it failed because the disk was full or the storage could
//! not be reached (a bucket store's server down), the store resumes by itself on the next write
//! (or `Db::resume`) once space returns or the storage answers, as RocksDB's auto-resume does:
//! - a log whose append, sync or seal failed is cut back to its last acknowledged record, sealed,
//!   and replaced by a new one; every column family with data in it is flushed, so the damaged log
//!   is never needed again (a failed sync may have lost pages the kernel had accepted);
//! - memtables whose flush failed are flushed again, and compactions are queued again;
//! - writes are accepted only once all of that succeeded; until then they fail with the
//!   `NoSpace` (or `Unavailable`) error, and reads keep working.
//!
//! Every step runs under the WAL lock, so no group commits while the log is being repaired.

use std::sync::Arc;

use super::write::WalState;
use super::{Db, DbInner};
use crate::error::{Error, ErrorKind, Result};
use crate::filename::wal_file;
use crate::wal::LogWriter;

impl Db {
    /// A durability barrier: makes every write acknowledged before this call (synced or not, in
    /// any column family) durable against power loss, with the blob files they point into.
    /// Writes made with `disable_wal` are not covered; they become durable only by a flush.
    /// A synced empty [`WriteBatch`](super::WriteBatch) does the same.
    pub fn sync_wal(&self) -> Result<()> {
        self.sync_wal_to(None)
    }

    /// `sync_wal`, as far as `durability` (`None`: the store's default).
    pub fn sync_wal_to(&self, durability: Option<crate::fs::Durability>) -> Result<()> {
        self.inner.check_writable()?;
        let mut wal = self.inner.wal.lock();
        self.inner.resume_writes(&mut wal)?;
        self.inner.sync_wal_locked(&mut wal, durability)
    }

    /// Resumes writes stopped by a full disk or a storage outage (they also resume by themselves
    /// on the next write). `Ok` when writes are accepted; the `NoSpace` (`Unavailable`) error
    /// while the disk is still full (the storage still unreachable); the
    /// background error when the failure was of another kind, which only a reopen clears.
    pub fn resume(&self) -> Result<()> {
        self.inner.check_writable()?;
        let mut wal = self.inner.wal.lock();
        self.inner.resume_writes(&mut wal)
    }
}

/// The error a write gets while writes are stopped by `stopped_by`: of kind `NoSpace` when a
/// full disk stopped them (they resume once space returns), `Unavailable` when the storage
/// could not be reached (they resume once it answers), `Fenced` when another writer took the
/// store over, `Background` otherwise.
pub(super) fn writes_stopped(stopped_by: &Error) -> Error {
    if matches!(
        stopped_by.kind(),
        ErrorKind::Fenced | ErrorKind::Unavailable
    ) {
        stopped_by.duplicate()
    } else if stopped_by.kind() == ErrorKind::NoSpace {
        Error::io(
            "writes are stopped until the disk has room again (they resume by themselves)",
            std::io::Error::new(std::io::ErrorKind::StorageFull, stopped_by.to_string()),
        )
    } else {
        Error::Background(stopped_by.to_string())
    }
}

impl DbInner {
    /// Whether writes stopped on an error no resume clears (only a reopen does).
    pub(super) fn writes_stopped_for_good(&self) -> bool {
        self.state
            .lock()
            .bg_error
            .as_ref()
            .is_some_and(|e| !e.kind().is_transient())
    }

    pub(super) fn sync_wal_locked(
        &self,
        wal: &mut WalState,
        durability: Option<crate::fs::Durability>,
    ) -> Result<()> {
        let synced = self
            .sync_blob_writers()
            .and_then(|()| wal.sync_to(durability));
        match synced {
            Ok(()) => {
                self.stats.wal_syncs.inc();
                Ok(())
            }
            Err(e) => {
                // What the kernel held of the log may be gone: a resume must not trust it.
                let written = wal.writer.as_ref().map_or(0, |w| w.bytes_written());
                wal.damaged_from = Some(written);
                wal.sync_failed = true;
                self.set_background_error(&e);
                Err(e)
            }
        }
    }

    /// At close: syncs the log, or cuts a damaged one back to its last acknowledged record
    /// (synced), so a refused write's record can never be replayed by the next open.
    pub(super) fn close_wal(&self, wal: &mut WalState) -> Result<()> {
        let Some(good) = wal.damaged_from else {
            let synced = wal.sync();
            if synced.is_ok() {
                // Let go once synced: a WAL created at its expected size
                // (`FileSystem::create_sized`) gives back its spare space as its writer drops.
                wal.writer = None;
            }
            return synced;
        };
        // Dropping the writer may hand its buffer to the OS; the cut comes after.
        wal.writer = None;
        self.fs.truncate(&wal_file(&self.dir, wal.number), good)
    }

    /// With the WAL lock held: `Ok` when writes may go on, resuming them first if a full disk
    /// stopped them; otherwise the error writes get.
    pub(super) fn resume_writes(&self, wal: &mut WalState) -> Result<()> {
        self.resume_writes_for(wal, false)
    }

    /// `resume_writes` for a group that holds only deletions (`deletions_only`), which may
    /// spend the disk reserve (`db/reserve.rs`) when the disk is still full.
    pub(super) fn resume_writes_for(&self, wal: &mut WalState, deletions_only: bool) -> Result<()> {
        {
            let st = self.state.lock();
            match &st.bg_error {
                None => return Ok(()),
                Some(e) if !e.kind().is_transient() => return Err(writes_stopped(e)),
                Some(_) => {}
            }
        }
        self.give_back_wal_room(wal)?;
        let mut resumed = self.try_resume(wal);
        let full = |r: &Result<()>| matches!(r, Err(e) if e.kind() == ErrorKind::NoSpace);
        // Files a backup keeps past their use are the first room to take back.
        if full(&resumed) && self.deletions.revoke("the disk filled") {
            resumed = self.try_resume(wal);
        }
        if full(&resumed) && deletions_only && self.reserve.release(self.fs.as_ref()) {
            self.stats.disk_reserve_releases.inc();
            resumed = self.try_resume(wal);
        } else if resumed.is_ok() && !self.reserve.is_present() {
            // Space came back by itself: hold room back again for the next time it runs out. A
            // failure leaves the store without a reserve, which writes do not need.
            let _ = self.reserve.ensure(self.fs.as_ref());
        }
        if resumed.is_ok() {
            self.note_room_is_back();
        }
        if let Err(e) = &resumed {
            if matches!(e, Error::Closed) {
                // A close took the WAL from under the resume: no failure to keep.
                return Err(Error::Closed);
            }
            self.set_background_error(e);
            let mut st = self.state.lock();
            if !e.kind().is_transient() {
                // The resume itself failed otherwise (an I/O error, a filesystem that cannot
                // reopen the log): writes stay stopped until a reopen.
                st.bg_error = Some(e.duplicate());
            }
            return Err(writes_stopped(st.bg_error.as_ref().unwrap_or(e)));
        }
        resumed
    }

    /// After the disk filled: a log holding room reserved ahead of its appends gives it back,
    /// going on in the same file without it (appended bytes stay), so that what a released
    /// reserve or a compaction frees goes to the deletions and flushes that need it.
    fn give_back_wal_room(&self, wal: &mut WalState) -> Result<()> {
        if self
            .wal_room_ahead
            .load(std::sync::atomic::Ordering::Relaxed)
            || wal.damaged_from.is_some()
            || !wal.writer.as_ref().is_some_and(LogWriter::reserves_ahead)
        {
            return Ok(());
        }
        let good = wal.writer.as_ref().map_or(0, LogWriter::bytes_written);
        // Dropping the writer trims the spare room; a failed reopen leaves the log to the
        // damaged path, which cuts it at `good` and replaces it.
        self.reopen_wal_at(wal, good)
            .inspect_err(|_| wal.damaged_from = Some(good))
    }

    /// Drops the log's writer, then goes on in the same file, cut at `good` bytes, written the
    /// ordinary way. Dropping first hands the writer's buffer (and a mapped file's spare room)
    /// back, so the cut removes whatever lay past `good`.
    fn reopen_wal_at(&self, wal: &mut WalState, good: u64) -> Result<()> {
        wal.writer = None;
        let file = self.fs.reopen(&wal_file(&self.dir, wal.number), good)?;
        wal.writer = Some(LogWriter::resume(file, good));
        Ok(())
    }

    fn try_resume(&self, wal: &mut WalState) -> Result<()> {
        if let Some(good) = wal.damaged_from {
            // The writer's buffer may still hold the failed group: the cut removes it too.
            self.reopen_wal_at(wal, good)?;
        }
        self.state.lock().bg_error = None;
        if wal.damaged_from.is_some() {
            // A new log takes the writes (the cut one is sealed), and every column family with
            // data in the old logs flushes, so no recovery ever reads the damaged one.
            let with_data: Vec<u32> = {
                let mut st = self.state.lock();
                let mut with_data = Vec::new();
                for id in 0..st.cfs.len() as u32 {
                    let Some(cs) = st.cf_mut(id) else { continue };
                    if !cs.mem.is_empty() {
                        with_data.push(id);
                    } else if cs.mem_first_log.is_some() {
                        // Pinned by a refused write that never reached the memtable: nothing
                        // of it is in the damaged log, which must not stay live for it.
                        let before = cs.oldest_log();
                        cs.mem_first_log = None;
                        let after = cs.oldest_log();
                        st.tracker.repin(id, before, after);
                    }
                }
                with_data
            };
            self.switch_memtables(wal, &with_data)?;
            wal.damaged_from = None;
        }
        self.flush_every_immutable()?;
        // The cut log is sealed and every memtable its bytes fed is flushed anew: nothing needs
        // it any more. (A blob file's failed sync stays: `blob_sync_failed`.)
        wal.sync_failed = false;
        let cfs: Vec<Arc<_>> = {
            let st = self.state.lock();
            st.cfs.iter().flatten().map(|cs| cs.data.clone()).collect()
        };
        for cf in &cfs {
            self.scheduler.schedule_compaction(cf);
        }
        self.state_cv.notify_all();
        Ok(())
    }

    /// Waits until no column family has an immutable memtable, running or queueing their flushes.
    fn flush_every_immutable(&self) -> Result<()> {
        loop {
            let st = self.state.lock();
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            let Some(cf) = st
                .cfs
                .iter()
                .flatten()
                .find(|cs| !cs.imm.is_empty())
                .map(|cs| cs.data.clone())
            else {
                return Ok(());
            };
            self.wait_for_flush(st, &cf)?;
        }
    }
}
