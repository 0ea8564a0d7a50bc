//! Who runs background work. Natively a pool of threads waits on a push-based request flag; under
//! WASI (no threads) the same work runs when the embedder calls `maintenance()`, or inline in a write
//! that cannot proceed without it.

use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::options::Executor;

#[derive(Debug, Default)]
struct Requests {
    flush: bool,
    compaction: bool,
    shutdown: bool,
}

#[derive(Debug, Default)]
struct Shared {
    requests: Mutex<Requests>,
    cv: Condvar,
}

/// The work a scheduler runs: implemented by the database.
pub(crate) trait BackgroundWork: Send + Sync + 'static {
    /// Flushes every immutable memtable that is waiting.
    fn run_flushes(&self);
    /// Runs compactions while some level needs one (one at a time), returning early when a flush
    /// is requested so that flushes go first.
    fn run_compactions(&self, flush_requested: &dyn Fn() -> bool);
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

    /// Starts the pool (a no-op for the inline executor).
    pub(crate) fn start(&self, threads: usize, work: Arc<dyn BackgroundWork>) -> Result<()> {
        if self.mode == Executor::Inline {
            return Ok(());
        }
        let mut handles = self.threads.lock();
        for i in 0..threads {
            let shared = self.shared.clone();
            let work = work.clone();
            let handle = std::thread::Builder::new()
                .name(format!("strata-bg-{i}"))
                .spawn(move || worker(&shared, work.as_ref()))
                .map_err(|e| {
                    Error::NotSupported(format!(
                        "cannot start background threads ({e}); use Executor::Inline"
                    ))
                })?;
            handles.push(handle);
        }
        Ok(())
    }

    /// Asks for a flush; a worker picks it up (or the next `maintenance()` call does).
    pub(crate) fn request_flush(&self) {
        self.shared.requests.lock().flush = true;
        self.shared.cv.notify_one();
    }

    /// Asks for compactions to be considered.
    pub(crate) fn request_compaction(&self) {
        self.shared.requests.lock().compaction = true;
        self.shared.cv.notify_one();
    }

    /// Takes pending requests, for the inline executor: (flush, compaction).
    pub(crate) fn take_requests(&self) -> (bool, bool) {
        let mut r = self.shared.requests.lock();
        (
            std::mem::take(&mut r.flush),
            std::mem::take(&mut r.compaction),
        )
    }

    /// Stops the workers after the job they are running, and waits for them.
    pub(crate) fn shutdown(&self) {
        self.shared.requests.lock().shutdown = true;
        self.shared.cv.notify_all();
        let handles = std::mem::take(&mut *self.threads.lock());
        for h in handles {
            let _ = h.join();
        }
    }
}

fn worker(shared: &Shared, work: &dyn BackgroundWork) {
    loop {
        let (flush, compaction) = {
            let mut r = shared.requests.lock();
            while !r.flush && !r.compaction && !r.shutdown {
                shared.cv.wait(&mut r);
            }
            if r.shutdown {
                return;
            }
            // Flushes go first: a worker takes a flush request if there is one, else compactions.
            if r.flush {
                r.flush = false;
                (true, false)
            } else {
                r.compaction = false;
                (false, true)
            }
        };
        if flush {
            work.run_flushes();
        }
        if compaction {
            work.run_compactions(&|| shared.requests.lock().flush);
        }
    }
}
