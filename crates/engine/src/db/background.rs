//! Who runs background work. Column families that need a flush or a compaction are pushed onto a
//! queue (each at most once), so scheduling never looks at the column families that need nothing;
//! blob files whose last reader is gone are removed here too, after flushes and before
//! compactions.
//! Natively a pool of threads takes from the queues, flushes first; under WASI (no threads) the
//! same queues are drained when the embedder calls `maintenance()`, or inline in a write that
//! cannot proceed without it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::column_family::ColumnFamilyData;
use crate::error::{Error, Result};
use crate::options::Executor;

#[derive(Debug, Default)]
struct Queues {
    flush: VecDeque<Arc<ColumnFamilyData>>,
    compaction: VecDeque<Arc<ColumnFamilyData>>,
    /// Compactions the pool is running.
    compacting: usize,
    /// Blob files wait in the blob store's queue for a worker to remove them.
    blob_deletions: bool,
    shutdown: bool,
}

impl Queues {
    /// The next column family waiting for a flush, no longer marked as queued.
    fn take_flush(&mut self) -> Option<Arc<ColumnFamilyData>> {
        let cf = self.flush.pop_front()?;
        cf.queued_for_flush.store(false, Ordering::Release);
        Some(cf)
    }

    /// The next column family waiting for compaction, no longer marked as queued.
    fn take_compaction(&mut self) -> Option<Arc<ColumnFamilyData>> {
        let cf = self.compaction.pop_front()?;
        cf.queued_for_compaction.store(false, Ordering::Release);
        Some(cf)
    }
}

#[derive(Debug, Default)]
struct Shared {
    queues: Mutex<Queues>,
    cv: Condvar,
}

/// The work a scheduler runs: implemented by the database.
pub(crate) trait BackgroundWork: Send + Sync + 'static {
    /// Flushes every immutable memtable `cf` has waiting.
    fn flush(&self, cf: &Arc<ColumnFamilyData>);
    /// Runs one compaction of `cf` if it needs one; one that ran queues `cf` again.
    fn compact(&self, cf: &Arc<ColumnFamilyData>);
    /// Removes the blob files whose last reader is gone.
    fn delete_blob_files(&self);
}

#[derive(Debug)]
pub(crate) struct Scheduler {
    mode: Executor,
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Scheduler {
    pub(crate) fn new(mode: Executor) -> Self {
        Scheduler {
            mode,
            shared: Arc::default(),
            threads: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn mode(&self) -> Executor {
        self.mode
    }

    /// Starts `threads` workers (a no-op for the inline executor). A quarter of them, at least
    /// one, never takes a compaction, so a flush never waits behind compactions.
    pub(crate) fn start(&self, threads: usize, work: Arc<dyn BackgroundWork>) -> Result<()> {
        if self.mode == Executor::Inline {
            return Ok(());
        }
        let flush_only = (threads / 4).max(1);
        let max_compactions = threads.saturating_sub(flush_only).max(1);
        let mut handles = self.threads.lock();
        for i in 0..threads {
            let shared = self.shared.clone();
            let work = work.clone();
            let handle = std::thread::Builder::new()
                .name(format!("strata-bg-{i}"))
                .spawn(move || worker(&shared, work.as_ref(), max_compactions))
                .map_err(|e| {
                    Error::NotSupported(format!(
                        "cannot start background threads ({e}); use Executor::Inline"
                    ))
                })?;
            handles.push(handle);
        }
        Ok(())
    }

    /// Queues a flush of `cf` (unless it is queued already).
    pub(crate) fn schedule_flush(&self, cf: &Arc<ColumnFamilyData>) {
        self.push(cf, &cf.queued_for_flush, |q| &mut q.flush);
    }

    /// Queues `cf` to be considered for compaction (unless it is queued already).
    pub(crate) fn schedule_compaction(&self, cf: &Arc<ColumnFamilyData>) {
        self.push(cf, &cf.queued_for_compaction, |q| &mut q.compaction);
    }

    fn push(
        &self,
        cf: &Arc<ColumnFamilyData>,
        queued: &AtomicBool,
        queue: impl FnOnce(&mut Queues) -> &mut VecDeque<Arc<ColumnFamilyData>>,
    ) {
        // The flag changes only under the queue lock, so it always says whether `cf` is queued.
        let mut q = self.shared.queues.lock();
        if queued.swap(true, Ordering::AcqRel) {
            return;
        }
        queue(&mut q).push_back(cf.clone());
        drop(q);
        self.shared.cv.notify_one();
    }

    /// A waker that has a worker remove the blob files queued for deletion (a file system call,
    /// kept off whichever thread let go of the files' last reader); `None` for the inline
    /// executor, which has no worker to wake.
    pub(crate) fn blob_deleter(&self) -> Option<crate::blob::Deleter> {
        if self.mode == Executor::Inline {
            return None;
        }
        let shared = self.shared.clone();
        Some(Arc::new(move || {
            shared.queues.lock().blob_deletions = true;
            shared.cv.notify_one();
        }))
    }

    /// Takes the next column family waiting for a flush (for `maintenance`).
    pub(crate) fn pop_flush(&self) -> Option<Arc<ColumnFamilyData>> {
        self.shared.queues.lock().take_flush()
    }

    /// Takes the next column family waiting for compaction (for `maintenance`).
    pub(crate) fn pop_compaction(&self) -> Option<Arc<ColumnFamilyData>> {
        self.shared.queues.lock().take_compaction()
    }

    /// True when a flush or a compaction is queued (for `maintenance_step`).
    pub(crate) fn has_queued(&self) -> bool {
        let q = self.shared.queues.lock();
        !q.flush.is_empty() || !q.compaction.is_empty()
    }

    /// Stops the workers after the job they are running, and waits for them.
    pub(crate) fn shutdown(&self) {
        self.shared.queues.lock().shutdown = true;
        self.shared.cv.notify_all();
        let handles = std::mem::take(&mut *self.threads.lock());
        for h in handles {
            let _ = h.join();
        }
    }
}

enum Job {
    Flush(Arc<ColumnFamilyData>),
    DeleteBlobFiles,
    Compact(Arc<ColumnFamilyData>),
}

fn worker(shared: &Shared, work: &dyn BackgroundWork, max_compactions: usize) {
    loop {
        let job = {
            let mut q = shared.queues.lock();
            loop {
                if q.shutdown {
                    return;
                }
                if let Some(cf) = q.take_flush() {
                    break Job::Flush(cf);
                }
                if std::mem::take(&mut q.blob_deletions) {
                    break Job::DeleteBlobFiles;
                }
                if q.compacting < max_compactions
                    && let Some(cf) = q.take_compaction()
                {
                    q.compacting += 1;
                    break Job::Compact(cf);
                }
                shared.cv.wait(&mut q);
            }
        };
        match job {
            Job::Flush(cf) => work.flush(&cf),
            Job::DeleteBlobFiles => work.delete_blob_files(),
            Job::Compact(cf) => {
                work.compact(&cf);
                shared.queues.lock().compacting -= 1;
                // A worker may be waiting for a compaction slot.
                shared.cv.notify_one();
            }
        }
    }
}
