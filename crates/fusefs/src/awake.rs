//! Keeping idle CPUs awake while the mount is busy.
//!
//! Each request a caller waits for is a round trip through `/dev/fuse`: queuing it wakes a
//! serving thread, and the answer wakes the caller. A wake-up aimed at an idle CPU waits for it
//! to leave its idle state; in a VM that halts idle vCPUs at once, that is a trip through the
//! hypervisor, twice per round trip, and it halved small-file throughput on the 2-vCPU machine
//! of this project (doc/fuse.md, "Speed"). So during a burst of requests, the mount holds a CPU
//! wake-up latency request of 0 µs (Linux PM QoS, `/dev/cpu_dma_latency`): idle CPUs poll
//! instead of halting. The kernel withdraws the request with the descriptor, even when the
//! process is killed. And the serving threads poll the device for the next request instead of
//! sleeping until it comes ([`crate::serving`]), which takes the other wake-up off the path; that
//! needs no privilege.
//!
//! A burst starts with [`Burst::start`] requests in a row, each within [`Burst::gap`] of the
//! one before, and ends with a [`Burst::window`] of fewer than [`Burst::going`] requests. A
//! trickle (a file watcher's stat every few milliseconds) never starts one, and a stream too
//! thin to repay a polling thread does not keep one going; an idle mount costs nothing.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::serving::{Serving, TICK};

/// The kernel's CPU wake-up latency request (root only).
pub const CPU_LATENCY_DEVICE: &str = "/dev/cpu_dma_latency";

/// What makes a burst of requests worth keeping CPUs awake for.
#[derive(Debug, Clone, Copy)]
pub struct Burst {
    /// Requests this close to the one before count toward starting a burst: a tool working
    /// back to back (`cp -r`, `git status`, `ls -l`) sends its next request within microseconds.
    pub gap: Duration,
    /// Requests in a row, each within `gap`, that start a burst.
    pub start: u32,
    /// How often the mount checks whether the burst goes on: long enough to span the pauses
    /// inside one tool's run, short enough that polling ends soon after the work does.
    pub window: Duration,
    /// Requests in one window that keep the burst going.
    pub going: u64,
}

/// The mount's bursts: 8 requests within 1 ms of each other start one; a 100 ms window with
/// fewer than 200 requests ends it. A burst keeps a thread polling, a CPU's worth of work: at
/// 2,000 requests a second, the two wake-ups it saves each (10-20 µs here) are already a few
/// percent of that CPU, and a tool working back to back sends tens of thousands.
pub const BURST: Burst = Burst {
    gap: Duration::from_millis(1),
    start: 8,
    window: Duration::from_millis(100),
    going: 200,
};

/// Keeps CPUs awake while [`KeepAwake::busy`] keeps being called: holds the latency request
/// and has the serving threads poll ([`Serving`]).
#[derive(Debug)]
pub(crate) struct KeepAwake {
    shared: Arc<Shared>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    device: PathBuf,
    burst: Burst,
    serving: Arc<Serving>,
    /// Where [`Shared::now`] counts from.
    epoch: Instant,
    /// When the last request came, in [`Shared::now`]'s microseconds.
    last: AtomicU64,
    /// Requests in a row, each within `burst.gap` of the one before.
    streak: AtomicU64,
    /// Requests seen: the watcher ends the burst once a window adds fewer than `burst.going`.
    requests: AtomicU64,
    /// Set while a burst is on or starting, and for good once a burst found nothing to do (or
    /// the mount was told not to): a request then costs one increment and one load.
    settled: AtomicBool,
    /// The device refused the latency request once: it is not asked again.
    refused: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// A burst is on.
    burst: bool,
    /// Open while the latency request holds; closing it withdraws the request.
    held: Option<File>,
    stop: bool,
}

impl KeepAwake {
    /// Keeps CPUs awake through `device` and `serving` during each `burst` of requests.
    pub(crate) fn new(
        device: impl Into<PathBuf>,
        burst: Burst,
        serving: Arc<Serving>,
    ) -> KeepAwake {
        KeepAwake {
            shared: Arc::new(Shared {
                device: device.into(),
                burst,
                serving,
                epoch: Instant::now(),
                last: AtomicU64::new(0),
                streak: AtomicU64::new(0),
                requests: AtomicU64::new(0),
                settled: AtomicBool::new(false),
                refused: AtomicBool::new(false),
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }),
            watcher: Mutex::new(None),
        }
    }

    /// Never asks anything of the CPUs.
    pub(crate) fn off() -> KeepAwake {
        let k = KeepAwake::new(PathBuf::new(), BURST, Arc::default());
        k.shared.settled.store(true, Ordering::Relaxed);
        k
    }

    /// Notes a request; the one that starts a burst holds the latency request and has the
    /// serving threads poll. True when it did either.
    pub(crate) fn busy(&self) -> bool {
        let s = &self.shared;
        s.requests.fetch_add(1, Ordering::Relaxed);
        if s.settled.load(Ordering::Relaxed) || !s.starts_burst() {
            return false;
        }
        if s.settled.swap(true, Ordering::AcqRel) {
            return false;
        }
        let held = s.hold_latency();
        if held.is_none() && !s.serving.is_attached() {
            // `settled` stays set: there is nothing a burst could do.
            return false;
        }
        if let Err(e) = self.watch() {
            // Nothing would end the burst: better never to start it.
            log::warn!(target: "strata::fs", "cannot keep CPUs awake: no thread to end a burst: {e}");
            return false;
        }
        if let Err(e) = s.serving.start_polling() {
            log::warn!(target: "strata::fs", "serving threads cannot poll /dev/fuse: {e}");
        }
        let mut state = s.state.lock();
        state.held = held;
        state.burst = true;
        s.changed.notify_all();
        true
    }

    /// Whether the latency request is held now.
    #[cfg(test)]
    pub(crate) fn is_held(&self) -> bool {
        self.shared.state.lock().held.is_some()
    }

    /// Whether a burst is on.
    #[cfg(test)]
    pub(crate) fn in_burst(&self) -> bool {
        self.shared.state.lock().burst
    }

    /// Starts the thread that ends bursts, unless it runs already.
    fn watch(&self) -> std::io::Result<()> {
        let mut watcher = self.watcher.lock();
        if watcher.is_none() {
            let shared = self.shared.clone();
            *watcher = Some(
                std::thread::Builder::new()
                    .name("strata-awake".into())
                    .spawn(move || shared.end_bursts_when_quiet())?,
            );
        }
        Ok(())
    }
}

impl Shared {
    /// Microseconds since the holder was made.
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Whether this request, with those just before it, makes a burst. Threads racing here
    /// may miscount by one, which only moves a burst's start by a request.
    fn starts_burst(&self) -> bool {
        let now = self.now();
        let before = self.last.swap(now, Ordering::Relaxed);
        if now.saturating_sub(before) > self.burst.gap.as_micros() as u64 {
            self.streak.store(1, Ordering::Relaxed);
            return false;
        }
        self.streak.fetch_add(1, Ordering::Relaxed) + 1 >= u64::from(self.burst.start)
    }

    /// The latency request, unless the device refused it before or refuses it now.
    fn hold_latency(&self) -> Option<File> {
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        match hold_latency(&self.device) {
            Ok(file) => Some(file),
            Err(e) => {
                // One refusal (not root, no such device) is enough.
                self.refused.store(true, Ordering::Relaxed);
                log::info!(
                    target: "strata::fs",
                    "idle CPUs may halt between requests: {}: {e}",
                    self.device.display()
                );
                None
            }
        }
    }

    fn end_bursts_when_quiet(&self) {
        // Polling threads need a look every tick, for a request that keeps them all busy.
        let tick = if self.serving.is_attached() {
            TICK
        } else {
            self.burst.window
        };
        let mut state = self.state.lock();
        while !state.stop {
            if !state.burst {
                self.changed.wait(&mut state);
                continue;
            }
            let seen = self.requests.load(Ordering::Relaxed);
            let deadline = Instant::now() + self.burst.window;
            while !state.stop && Instant::now() < deadline {
                let _ = self
                    .changed
                    .wait_until(&mut state, (Instant::now() + tick).min(deadline));
                self.serving.unstick();
            }
            if self.requests.load(Ordering::Relaxed) - seen < self.burst.going {
                self.end_burst(&mut state);
            }
        }
    }

    fn end_burst(&self, state: &mut State) {
        state.held = None;
        state.burst = false;
        if let Err(e) = self.serving.stop_polling() {
            log::warn!(target: "strata::fs", "serving threads cannot stop polling /dev/fuse: {e}");
        }
        self.streak.store(0, Ordering::Relaxed);
        // Under the lock: the next burst's state cannot be stored before this.
        self.settled.store(false, Ordering::Release);
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        {
            let mut state = self.shared.state.lock();
            state.stop = true;
            self.shared.end_burst(&mut state);
        }
        self.shared.changed.notify_all();
        if let Some(watcher) = self.watcher.lock().take() {
            let _ = watcher.join();
        }
    }
}

/// Asks that no CPU take longer than 0 µs to wake: the kernel then idles CPUs by polling.
fn hold_latency(device: &Path) -> std::io::Result<File> {
    let mut f = OpenOptions::new().write(true).open(device)?;
    f.write_all(&0i32.to_ne_bytes())?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::tests::wait_until;

    /// Whether this process has `path` open.
    fn has_open(path: &Path) -> bool {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .any(|target| target == path)
    }

    /// A burst: `start` requests in a row, however slow this machine is today.
    fn burst(k: &KeepAwake) {
        for _ in 0..10_000 {
            if k.busy() {
                return;
            }
        }
        panic!("10,000 requests in a row started no burst");
    }

    fn stand_in_device() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("latency");
        std::fs::write(&device, b"").unwrap();
        let device = device.canonicalize().unwrap();
        (dir, device)
    }

    #[test]
    fn a_burst_holds_the_request_and_its_end_lets_go() {
        let (_dir, device) = stand_in_device();
        let k = KeepAwake::new(
            &device,
            Burst {
                gap: Duration::from_secs(1),
                start: 8,
                window: Duration::from_millis(500),
                going: 16,
            },
            Arc::default(),
        );

        for _ in 0..7 {
            assert!(!k.busy(), "seven requests are no burst yet");
        }
        assert!(!k.is_held());
        assert!(k.busy(), "the eighth in a row takes the hold");
        assert!(k.is_held() && has_open(&device));
        assert_eq!(std::fs::read(&device).unwrap(), 0i32.to_ne_bytes());
        // The rest of the burst finds it held.
        for _ in 0..20 {
            assert!(!k.busy());
        }

        wait_until("the hold let go", || !k.is_held());
        assert!(!has_open(&device), "letting go closes the descriptor");

        // The next burst takes it again.
        burst(&k);
        assert!(k.is_held() && has_open(&device));
        drop(k);
        assert!(!has_open(&device), "dropping the mount lets go");
    }

    #[test]
    fn a_trickle_of_requests_neither_starts_nor_keeps_a_burst() {
        let (_dir, device) = stand_in_device();
        let k = KeepAwake::new(
            &device,
            Burst {
                gap: Duration::from_millis(5),
                start: 2,
                window: Duration::from_millis(200),
                going: 50,
            },
            Arc::default(),
        );
        let trickle = |n: usize| {
            for _ in 0..n {
                std::thread::sleep(Duration::from_millis(20));
                assert!(!k.busy(), "a request 20 ms after the last started a burst");
            }
        };
        trickle(5);
        assert!(!k.is_held());

        burst(&k);
        assert!(k.is_held());
        // Requests go on, but too few per window to keep the CPUs spinning.
        let give_up = Instant::now() + Duration::from_secs(20);
        while k.is_held() {
            assert!(Instant::now() < give_up, "a trickle kept the hold");
            trickle(1);
        }
        assert!(!has_open(&device));
        trickle(12);
        assert!(!k.is_held(), "a trickle took the hold again");
    }

    #[test]
    fn a_refused_device_is_asked_once() {
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("absent");
        let k = KeepAwake::new(&device, BURST, Arc::default());
        for _ in 0..10_000 {
            assert!(!k.busy());
        }
        assert!(!k.is_held());
        // Even once it could be opened, the mount does not ask again.
        std::fs::write(&device, b"").unwrap();
        for _ in 0..10_000 {
            assert!(!k.busy());
        }
        assert!(!k.is_held());
        assert!(
            k.watcher.lock().is_none(),
            "no thread for a request never held"
        );
    }

    /// A holder whose device refuses, over two serving threads on a stand-in descriptor.
    fn polling_only(
        window: Duration,
        going: u64,
    ) -> (
        tempfile::TempDir,
        Arc<Serving>,
        std::os::fd::OwnedFd,
        KeepAwake,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let serving = Arc::new(Serving::default());
        let (fd, attached) = crate::serving::tests::device();
        serving.attach(attached, 2);
        let burst = Burst {
            gap: Duration::from_secs(1),
            start: 8,
            window,
            going,
        };
        let k = KeepAwake::new(dir.path().join("absent"), burst, serving.clone());
        (dir, serving, fd, k)
    }

    #[test]
    fn without_the_latency_request_a_burst_still_has_the_threads_poll() {
        let (_dir, _serving, fd, k) = polling_only(Duration::from_millis(200), 16);
        burst(&k);
        assert!(k.in_burst() && !k.is_held());
        assert!(crate::serving::tests::polls(&fd));
        wait_until("the burst ended", || !k.in_burst());
        assert!(
            !crate::serving::tests::polls(&fd),
            "the end makes reads block again"
        );
        // The next burst polls again, still without asking the device.
        burst(&k);
        assert!(crate::serving::tests::polls(&fd) && !k.is_held());
        drop(k);
        assert!(
            !crate::serving::tests::polls(&fd),
            "dropping the mount ends the burst"
        );
    }

    #[test]
    fn during_a_burst_a_request_keeping_every_thread_busy_frees_a_parked_one() {
        use crate::serving::tests::{answer, park_one};
        // A window far longer than the test: only the watcher's ticks can free the thread.
        let (_dir, serving, _fd, k) = polling_only(Duration::from_secs(60), 1);
        burst(&k);
        let parks = Arc::new(AtomicU64::new(0));
        let parked = park_one(&serving, &parks);
        // The other thread takes a request and keeps at it.
        let (slow_done, slow) = answer(&serving, &parks);
        wait_until("the parked thread was freed", || parked.is_finished());
        assert!(k.in_burst(), "freed by a tick, not by the burst's end");
        slow_done.send(()).unwrap();
        drop(k);
        slow.join().unwrap();
        parked.join().unwrap();
    }

    #[test]
    fn off_never_holds() {
        let k = KeepAwake::off();
        for _ in 0..10_000 {
            assert!(!k.busy());
        }
        assert!(!k.is_held());
    }
}
