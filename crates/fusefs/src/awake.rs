//! Keeping idle CPUs awake while the mount is busy.
//!
//! Each request a caller waits for is a round trip through `/dev/fuse`: queuing it wakes a
//! serving thread, and the answer wakes the caller. A wake-up aimed at an idle CPU waits for it
//! to leave its idle state; in a VM that halts idle vCPUs at once, that is a trip through the
//! hypervisor, twice per round trip, and it halved small-file throughput on the 2-vCPU machine
//! of this project (doc/fuse.md, "Speed"). So while requests keep coming, the mount holds a CPU
//! wake-up latency request of 0 µs (Linux PM QoS, `/dev/cpu_dma_latency`): idle CPUs poll
//! instead of halting. Once no request has come for a while, it lets go, so an idle mount costs
//! nothing. The kernel withdraws the request with the descriptor, even when the process is
//! killed.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// The kernel's CPU wake-up latency request (root only).
pub const CPU_LATENCY_DEVICE: &str = "/dev/cpu_dma_latency";

/// How long after its last request the mount keeps idle CPUs awake: long enough to span the
/// pauses inside one tool's run, short enough that polling ends soon after the work does.
pub const AWAKE_AFTER_LAST_REQUEST: Duration = Duration::from_millis(100);

/// Holds the latency request while [`KeepAwake::busy`] keeps being called.
#[derive(Debug)]
pub(crate) struct KeepAwake {
    shared: Arc<Shared>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    device: PathBuf,
    idle: Duration,
    /// Requests seen: the watcher lets go once this stops moving.
    requests: AtomicU64,
    /// Set while the request is held or being taken, and for good once taking it failed (or
    /// the mount was told not to): a request then costs one load and one increment.
    settled: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Open while the request holds; closing it withdraws the request.
    held: Option<File>,
    stop: bool,
}

impl KeepAwake {
    /// Keeps CPUs awake through `device` until `idle` passes without a request.
    pub(crate) fn new(device: impl Into<PathBuf>, idle: Duration) -> KeepAwake {
        KeepAwake {
            shared: Arc::new(Shared {
                device: device.into(),
                idle,
                requests: AtomicU64::new(0),
                settled: AtomicBool::new(false),
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }),
            watcher: Mutex::new(None),
        }
    }

    /// Never asks anything of the CPUs.
    pub(crate) fn off() -> KeepAwake {
        let k = KeepAwake::new(PathBuf::new(), Duration::ZERO);
        k.shared.settled.store(true, Ordering::Relaxed);
        k
    }

    /// Notes a request; the first of a burst takes the latency request. True when it did.
    pub(crate) fn busy(&self) -> bool {
        let s = &self.shared;
        s.requests.fetch_add(1, Ordering::Relaxed);
        if s.settled.load(Ordering::Relaxed) || s.settled.swap(true, Ordering::AcqRel) {
            return false;
        }
        match hold_latency(&s.device) {
            Ok(file) => match self.watch() {
                Ok(()) => {
                    s.state.lock().held = Some(file);
                    s.changed.notify_all();
                    true
                }
                Err(e) => {
                    // Nothing would let go of it: better never to take it.
                    log::warn!(target: "strata::fs", "cannot keep CPUs awake: no watcher thread: {e}");
                    false
                }
            },
            Err(e) => {
                // `settled` stays set: one refusal (not root, no such device) is enough.
                log::info!(
                    target: "strata::fs",
                    "idle CPUs may halt between requests: {}: {e}",
                    s.device.display()
                );
                false
            }
        }
    }

    /// Whether the latency request is held now.
    #[cfg(test)]
    pub(crate) fn is_held(&self) -> bool {
        self.shared.state.lock().held.is_some()
    }

    /// Starts the thread that lets go of the request, unless it runs already.
    fn watch(&self) -> std::io::Result<()> {
        let mut watcher = self.watcher.lock();
        if watcher.is_none() {
            let shared = self.shared.clone();
            *watcher = Some(
                std::thread::Builder::new()
                    .name("strata-awake".into())
                    .spawn(move || shared.let_go_when_idle())?,
            );
        }
        Ok(())
    }
}

impl Shared {
    fn let_go_when_idle(&self) {
        let mut state = self.state.lock();
        while !state.stop {
            if state.held.is_none() {
                self.changed.wait(&mut state);
                continue;
            }
            let seen = self.requests.load(Ordering::Relaxed);
            let deadline = Instant::now() + self.idle;
            while !state.stop && !self.changed.wait_until(&mut state, deadline).timed_out() {}
            if self.requests.load(Ordering::Relaxed) == seen {
                state.held = None;
                // Under the lock: the next request's hold cannot be stored before this.
                self.settled.store(false, Ordering::Release);
            }
        }
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        {
            let mut state = self.shared.state.lock();
            state.stop = true;
            state.held = None;
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

    /// Whether this process has `path` open.
    fn has_open(path: &Path) -> bool {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .any(|target| target == path)
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let give_up = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < give_up, "gave up waiting: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_burst_holds_the_request_and_idleness_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("latency");
        std::fs::write(&device, b"").unwrap();
        let device = device.canonicalize().unwrap();
        let k = KeepAwake::new(&device, Duration::from_millis(500));

        assert!(!k.is_held());
        assert!(k.busy(), "the first request takes the hold");
        assert!(k.is_held() && has_open(&device));
        assert_eq!(std::fs::read(&device).unwrap(), 0i32.to_ne_bytes());
        // The rest of the burst finds it held.
        for _ in 0..20 {
            assert!(!k.busy());
            std::thread::sleep(Duration::from_millis(2));
        }

        wait_until("the hold let go", || !k.is_held());
        assert!(!has_open(&device), "letting go closes the descriptor");

        // The next burst takes it again.
        assert!(k.busy());
        assert!(k.is_held() && has_open(&device));
        drop(k);
        assert!(!has_open(&device), "dropping the mount lets go");
    }

    #[test]
    fn a_refused_device_is_asked_once() {
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("absent");
        let k = KeepAwake::new(&device, Duration::from_millis(10));
        assert!(!k.busy());
        assert!(!k.is_held());
        // Even once it could be opened, the mount does not ask again.
        std::fs::write(&device, b"").unwrap();
        assert!(!k.busy());
        assert!(!k.is_held());
        assert!(
            k.watcher.lock().is_none(),
            "no thread for a request never held"
        );
    }

    #[test]
    fn off_never_holds() {
        let k = KeepAwake::off();
        assert!(!k.busy());
        assert!(!k.is_held());
    }
}
