//! A replica: a store opened read-only that follows its source on a thread of its own. Each
//! round asks the filesystem to bring the directory up to date (`FileSystem::refresh`: a bucket
//! store fetches the log's new records; the local disk is kept current by its writer), then
//! catches up (`catch_up.rs`).
//!
//! Invariants:
//! - Lag is measured from the start of the last round that succeeded: everything the source
//!   held then is visible now. A round that fails leaves reads where they were and the lag
//!   growing; the next round tries again.
//! - The sequence reads see never goes back (`catch_up.rs`).
//! - A reader waiting for a sequence (`Db::wait_for_sequence`) wakes the thread at once rather
//!   than waiting out the poll interval; while requested rounds find nothing new, the pause
//!   before the next doubles from 5 ms up to the poll.
//! - The thread holds the store weakly: dropping or closing the store ends it, and waits for
//!   the round in flight.
//! - A round whose catch-up failed after the filesystem moved on is followed by catch-ups
//!   until one succeeds, whether or not the filesystem changes again.
//! - A panic in a round is a failed round, reported like any other; following goes on. A
//!   listener's panic is ignored. Closing the store waits for the round in flight (bounded by
//!   the filesystem's own timeouts): listeners must not wait on the thread that closes it.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::DbInner;
use crate::error::{Error, Result};

/// The first pause between requested rounds that find nothing new; it doubles up to the poll.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);

/// How a replica is doing (`Db::replica_status`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReplicaStatus {
    /// The newest sequence number reads see.
    pub sequence: u64,
    /// Seconds since the start of the last round that caught up: every write the source held
    /// then is visible.
    pub lag_seconds: f64,
    /// How often the replica looks for new versions, in milliseconds.
    pub poll_millis: u64,
    /// Rounds that caught up, and rounds that failed, since open.
    pub rounds: u64,
    pub failures: u64,
    /// Why the last round failed, while the failure stands (`None` once a round succeeds).
    pub last_error: Option<String>,
}

#[derive(Debug)]
struct Progress {
    caught_up_at: Instant,
    rounds: u64,
    failures: u64,
    last_error: Option<String>,
    /// A reader asked for a round now.
    nudged: bool,
    stopped: bool,
}

/// The following thread's shared state.
#[derive(Debug)]
pub(crate) struct Follower {
    poll: Duration,
    progress: Mutex<Progress>,
    /// Signalled when a round ends (for waiting readers) and when one is asked for.
    changed: Condvar,
    /// Joined when the store closes.
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Follower {
    /// Starts following `inner` every `poll`.
    pub(super) fn start(inner: &Arc<DbInner>, poll: Duration) -> Result<Arc<Follower>> {
        if poll.is_zero() {
            return Err(Error::InvalidArgument(
                "a replica's poll interval must be more than zero".into(),
            ));
        }
        let follower = Arc::new(Follower {
            poll,
            progress: Mutex::new(Progress {
                caught_up_at: Instant::now(),
                rounds: 0,
                failures: 0,
                last_error: None,
                nudged: false,
                stopped: false,
            }),
            changed: Condvar::new(),
            thread: Mutex::new(None),
        });
        let (db, me) = (Arc::downgrade(inner), follower.clone());
        let thread = std::thread::Builder::new()
            .name("strata-replica".into())
            .spawn(move || me.run(&db))
            .map_err(|e| Error::Io {
                context: "starting the replica's thread".into(),
                source: e,
            })?;
        *follower.thread.lock() = Some(thread);
        Ok(follower)
    }

    fn run(&self, db: &Weak<DbInner>) {
        // However the thread ends, waiters learn it at once rather than at their deadline
        // (or never, for a wait too long to name).
        let _ended = Ended(self);
        // The filesystem moved on but the catch-up after it failed: the next round catches up
        // even if the filesystem has nothing newer, or reads would stay behind files that
        // already hold more while the writer is idle.
        let mut behind_files = false;
        // The pause before a requested round, after requested rounds that found nothing new:
        // a reader waiting for a sequence the source has not reached yet gets rounds ever
        // less often, up to the poll, rather than a request a millisecond for its whole wait.
        let mut backoff = Duration::ZERO;
        loop {
            let asked = {
                let mut p = self.progress.lock();
                if !p.nudged && !p.stopped {
                    self.changed.wait_for(&mut p, self.poll);
                }
                let asked = p.nudged;
                if asked && !backoff.is_zero() {
                    let until = Instant::now() + backoff;
                    while !p.stopped && Instant::now() < until {
                        self.changed.wait_until(&mut p, until);
                    }
                }
                if p.stopped {
                    return;
                }
                p.nudged = false;
                asked
            };
            let Some(inner) = db.upgrade() else { return };
            if inner.check_open().is_err() {
                return;
            }
            let started = Instant::now();
            let round = catch_panic(|| {
                let changed = inner.fs.refresh(&inner.dir, &inner.files_in_reads())?;
                behind_files |= changed;
                if !behind_files {
                    return Ok(None);
                }
                let caught = inner.catch_up()?;
                behind_files = false;
                Ok(Some(caught))
            });
            let moved = matches!(&round, Ok(Some(c)) if c.to > c.from);
            backoff = match asked && !moved {
                true => (backoff * 2).max(FIRST_BACKOFF).min(self.poll),
                false => Duration::ZERO,
            };
            let mut p = self.progress.lock();
            match round {
                Ok(caught) => {
                    p.caught_up_at = started;
                    p.rounds += 1;
                    p.last_error = None;
                    drop(p);
                    if let Some(info) = caught.filter(|c| c.to > c.from) {
                        for l in &inner.opts.listeners {
                            let _ = catch_panic(|| {
                                l.on_caught_up(&info);
                                Ok(())
                            });
                        }
                    }
                }
                Err(e) => {
                    let (msg, first) = (e.to_string(), p.last_error.is_none());
                    p.failures += 1;
                    p.last_error = Some(msg.clone());
                    drop(p);
                    // Once per outage, not once per round.
                    if first {
                        for l in &inner.opts.listeners {
                            let _ = catch_panic(|| {
                                l.on_replica_error(&msg);
                                Ok(())
                            });
                        }
                    }
                }
            }
            self.changed.notify_all();
        }
    }

    pub(super) fn status(&self, sequence: u64) -> ReplicaStatus {
        let p = self.progress.lock();
        ReplicaStatus {
            sequence,
            lag_seconds: p.caught_up_at.elapsed().as_secs_f64(),
            poll_millis: u64::try_from(self.poll.as_millis()).unwrap_or(u64::MAX),
            rounds: p.rounds,
            failures: p.failures,
            last_error: p.last_error.clone(),
        }
    }

    /// Waits until `reached()` holds, asking for rounds meanwhile, at most until `deadline`
    /// (`None`: a wait too long to name; a deadline passed already only asks for a round).
    pub(super) fn wait(&self, deadline: Option<Instant>, reached: impl Fn() -> bool) -> bool {
        let mut p = self.progress.lock();
        loop {
            if reached() {
                return true;
            }
            if p.stopped {
                return false;
            }
            // Asked once per round: waiters woken by another's request wait on, not ask again
            // (which would wake each other without end).
            if !p.nudged {
                p.nudged = true;
                self.changed.notify_all();
            }
            match deadline {
                Some(d) if Instant::now() >= d => return false,
                Some(d) => {
                    self.changed.wait_until(&mut p, d);
                }
                None => self.changed.wait(&mut p),
            }
        }
    }

    /// Ends the thread, after the round it may be in.
    pub(super) fn stop(&self) {
        self.progress.lock().stopped = true;
        self.changed.notify_all();
        let Some(thread) = self.thread.lock().take() else {
            return;
        };
        // The thread holds the store only for a round: it never closes it itself, but a
        // listener it calls might.
        if thread.thread().id() != std::thread::current().id() {
            let _ = thread.join();
        }
    }
}

/// Marks the follower stopped when its thread ends, and wakes its waiters.
struct Ended<'a>(&'a Follower);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.0.progress.lock().stopped = true;
        self.0.changed.notify_all();
    }
}

/// `round()`, with a panic in it (a bug, or a backend's) turned into a failed round rather
/// than the end of following.
fn catch_panic<T>(round: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(round)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Err(Error::Background(format!(
            "a replica's round panicked ({why}); the next round tries again"
        )))
    })
}
