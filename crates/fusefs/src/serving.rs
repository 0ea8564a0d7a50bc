//! The serving threads during a burst: one polls the device for the next request, the others
//! park.
//!
//! A serving thread blocked in its read of `/dev/fuse` is woken by the request the kernel queues:
//! a trip through the scheduler, and in a VM through the hypervisor, on the path of every
//! request a caller waits for. During a burst ([`crate::awake`]) the threads' shared descriptor
//! is made non-blocking, so fuser's loop retries its read at once and the reading thread finds
//! the next request as soon as it is queued, with nobody to wake. One polling thread is enough:
//! each other thread, as it finishes a request, parks while another reads.
//!
//! Invariants:
//! - While a burst is on, a thread parks only when another thread reads: one always does.
//! - A request that keeps every unparked thread busy for a whole [`TICK`] (an fsync, a read from
//!   disk) unparks one, so a slow request never holds up the rest.
//! - When the burst ends, the descriptor blocks again and every parked thread goes back to it.
//! - Without a descriptor ([`Serving::attach`] not called: a filesystem driven without a
//!   mount, or one serving thread) nothing changes and nothing parks.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use parking_lot::{Condvar, Mutex};

/// How long a request may keep every unparked thread busy before a parked one is let go.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// How long a parked thread sleeps between looks at whether its burst still goes on: a
/// backstop, since the burst's end wakes it.
const PARKED_LOOK: Duration = Duration::from_millis(100);

/// The serving threads' shared `/dev/fuse` descriptor and who is reading it.
#[derive(Debug, Default)]
pub(crate) struct Serving {
    device: OnceLock<OwnedFd>,
    lanes: Mutex<Lanes>,
    unparked: Condvar,
}

#[derive(Debug, Default)]
struct Lanes {
    /// The descriptor polls: a burst is on.
    polling: bool,
    /// Threads neither in a request nor parked: waiting on the device, or polling it.
    reading: usize,
    parked: usize,
    /// Parked threads told to go back to the device before the burst ends.
    to_unpark: usize,
    /// Requests finished, for [`Serving::unstick`] to tell a stuck thread from a busy one.
    handled: u64,
    /// `handled` at the last [`Serving::unstick`].
    handled_at_tick: u64,
    /// The mount is going: no burst starts again.
    closed: bool,
}

/// Held by a thread while it answers a request; see [`Serving::request`].
#[must_use]
pub(crate) struct Answering<'a> {
    serving: &'a Serving,
    /// Counts the times the thread parked when done.
    parks: &'a AtomicU64,
}

impl Serving {
    /// Serves through `device` (a duplicate of the descriptor `threads` threads read from,
    /// sharing its flags) from now on. Called once, before the threads start.
    pub(crate) fn attach(&self, device: OwnedFd, threads: usize) {
        if threads < 2 {
            // A lone thread has no one to park for, and nothing to unpark if it is stuck.
            return;
        }
        self.lanes.lock().reading = threads;
        let _ = self.device.set(device);
    }

    /// Whether a descriptor is attached.
    pub(crate) fn is_attached(&self) -> bool {
        self.device.get().is_some()
    }

    /// Notes that this thread answers a request until the returned guard drops; the drop parks
    /// the thread, counting it in `parks`, if a burst is on and another thread reads. `None`
    /// without a descriptor: there is nothing to count.
    pub(crate) fn request<'a>(&'a self, parks: &'a AtomicU64) -> Option<Answering<'a>> {
        if !self.is_attached() {
            return None;
        }
        let mut lanes = self.lanes.lock();
        lanes.reading = lanes.reading.saturating_sub(1);
        Some(Answering {
            serving: self,
            parks,
        })
    }

    /// Starts a burst: the descriptor polls. Returns whether it does.
    pub(crate) fn start_polling(&self) -> io::Result<bool> {
        let Some(device) = self.device.get() else {
            return Ok(false);
        };
        let mut lanes = self.lanes.lock();
        if lanes.closed {
            return Ok(false);
        }
        set_polling(device, true)?;
        lanes.polling = true;
        Ok(true)
    }

    /// Ends a burst: the descriptor blocks again and every parked thread returns to it.
    pub(crate) fn stop_polling(&self) -> io::Result<()> {
        let Some(device) = self.device.get() else {
            return Ok(());
        };
        let mut lanes = self.lanes.lock();
        lanes.polling = false;
        lanes.to_unpark = 0;
        self.unparked.notify_all();
        set_polling(device, false)
    }

    /// Ends the burst for good, as the mount goes: parked threads return to the device at once,
    /// to find it unmounted, rather than at the burst's end.
    pub(crate) fn close(&self) -> io::Result<()> {
        self.lanes.lock().closed = true;
        self.stop_polling()
    }

    /// Called every [`TICK`] of a burst: unparks a thread when the threads not parked have all
    /// been in requests since the last tick, with none finished.
    pub(crate) fn unstick(&self) {
        let mut lanes = self.lanes.lock();
        let stuck = lanes.reading == 0 && lanes.handled == lanes.handled_at_tick;
        lanes.handled_at_tick = lanes.handled;
        if lanes.polling && stuck && lanes.parked > lanes.to_unpark {
            lanes.to_unpark += 1;
            self.unparked.notify_one();
        }
    }

    /// Threads parked now.
    #[cfg(test)]
    pub(crate) fn parked(&self) -> usize {
        self.lanes.lock().parked
    }

    /// Notes the end of a request, parking the thread (counted in `parks`) if a burst is on
    /// and another thread reads.
    fn finished(&self, parks: &AtomicU64) {
        let mut lanes = self.lanes.lock();
        lanes.handled += 1;
        if lanes.polling && lanes.reading > 0 {
            parks.fetch_add(1, Ordering::Relaxed);
            lanes.parked += 1;
            while lanes.polling && lanes.to_unpark == 0 {
                self.unparked.wait_for(&mut lanes, PARKED_LOOK);
            }
            lanes.to_unpark = lanes.to_unpark.saturating_sub(1);
            lanes.parked -= 1;
        }
        lanes.reading += 1;
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.serving.finished(self.parks);
    }
}

/// Makes reads of `device` return `EAGAIN` at once when no request waits (`on`), or wait for
/// one.
fn set_polling(device: &OwnedFd, on: bool) -> io::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(device, FcntlArg::F_GETFL)?);
    let wanted = if on {
        flags | OFlag::O_NONBLOCK
    } else {
        flags - OFlag::O_NONBLOCK
    };
    if wanted != flags {
        fcntl(device, FcntlArg::F_SETFL(wanted))?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    /// A stand-in for `/dev/fuse`: the read end of a pipe, and a duplicate to attach.
    pub(crate) fn device() -> (OwnedFd, OwnedFd) {
        let (reader, writer) = std::io::pipe().unwrap();
        // Kept open for the test's life: with no writer, a read would find the end of the pipe.
        std::mem::forget(writer);
        let reader = OwnedFd::from(reader);
        let attached = reader.try_clone().unwrap();
        (reader, attached)
    }

    pub(crate) fn polls(fd: &OwnedFd) -> bool {
        let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap());
        flags.contains(OFlag::O_NONBLOCK)
    }

    pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let give_up = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < give_up, "gave up waiting: {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Serving with `threads` threads on a stand-in device, its burst on.
    fn polling(threads: usize) -> (Arc<Serving>, OwnedFd) {
        let (fd, attached) = device();
        let serving = Arc::new(Serving::default());
        serving.attach(attached, threads);
        assert!(serving.start_polling().unwrap());
        (serving, fd)
    }

    /// A serving thread answering one request, done when `go` is sent.
    pub(crate) fn answer(
        serving: &Arc<Serving>,
        parks: &Arc<AtomicU64>,
    ) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (serving, parks) = (serving.clone(), parks.clone());
        let thread = std::thread::spawn(move || {
            let request = serving.request(&parks);
            let _ = wait.recv();
            drop(request);
        });
        (go, thread)
    }

    /// A serving thread that answers one request and parks, another thread reading.
    pub(crate) fn park_one(
        serving: &Arc<Serving>,
        parks: &Arc<AtomicU64>,
    ) -> std::thread::JoinHandle<()> {
        let (go, thread) = answer(serving, parks);
        go.send(()).unwrap();
        wait_until("the thread parked", || serving.parked() == 1);
        thread
    }

    #[test]
    fn a_burst_makes_the_device_poll_and_its_end_makes_it_block() {
        let (serving, fd) = polling(2);
        assert!(polls(&fd), "every descriptor sharing the file polls");
        let mut reader = std::fs::File::from(fd.try_clone().unwrap());
        let empty = std::io::Read::read(&mut reader, &mut [0; 8]).unwrap_err();
        assert_eq!(empty.kind(), std::io::ErrorKind::WouldBlock);

        serving.stop_polling().unwrap();
        assert!(!polls(&fd));
    }

    #[test]
    fn a_thread_parks_while_another_reads_until_the_burst_ends() {
        let (serving, _fd) = polling(2);
        let parks = Arc::new(AtomicU64::new(0));
        let thread = park_one(&serving, &parks);
        assert!(!thread.is_finished());

        serving.stop_polling().unwrap();
        thread.join().unwrap();
        assert_eq!(serving.parked(), 0);
        assert_eq!(parks.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_last_thread_reading_never_parks() {
        let (serving, _fd) = polling(2);
        let parks = AtomicU64::new(0);
        // Both threads in requests: the first done goes back to the device...
        let first = serving.request(&parks);
        let second = serving.request(&parks);
        drop(first);
        assert_eq!(parks.load(Ordering::Relaxed), 0);
        // ... and the second, finding it there, parks.
        std::thread::scope(|scope| {
            let parking = scope.spawn(move || drop(second));
            wait_until("the second parked", || serving.parked() == 1);
            serving.stop_polling().unwrap();
            parking.join().unwrap();
        });
        assert_eq!(parks.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_lone_thread_never_polls() {
        let (fd, attached) = device();
        let lone = Serving::default();
        lone.attach(attached, 1);
        assert!(!lone.start_polling().unwrap(), "no one to park for");
        assert!(!polls(&fd));
        let parks = AtomicU64::new(0);
        drop(lone.request(&parks));
        assert_eq!(parks.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_request_that_keeps_every_thread_busy_unparks_one() {
        let (serving, _fd) = polling(2);
        let parks = Arc::new(AtomicU64::new(0));
        let parked = park_one(&serving, &parks);

        // The other thread takes a request and keeps at it: nobody reads the device.
        let (slow_done, slow) = answer(&serving, &parks);
        wait_until("the slow request began", || {
            serving.lanes.lock().reading == 0
        });
        serving.unstick();
        serving.unstick();
        parked.join().unwrap();
        assert_eq!(serving.parked(), 0, "one tick without progress unparks");

        // Done at last, the slow thread parks, since the unparked one reads now; with a
        // reader there, a tick unparks nothing.
        slow_done.send(()).unwrap();
        wait_until("the slow thread parked", || serving.parked() == 1);
        serving.unstick();
        assert_eq!(serving.parked(), 1, "a reader is there: nothing is stuck");
        serving.stop_polling().unwrap();
        slow.join().unwrap();
        assert_eq!(parks.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn closing_frees_parked_threads_and_no_burst_starts_again() {
        let (serving, fd) = polling(2);
        let parks = Arc::new(AtomicU64::new(0));
        let thread = park_one(&serving, &parks);
        serving.close().unwrap();
        thread.join().unwrap();
        assert!(!polls(&fd));
        assert!(!serving.start_polling().unwrap());
        assert!(!polls(&fd));
    }

    #[test]
    fn without_a_device_nothing_polls_or_parks() {
        let serving = Serving::default();
        assert!(!serving.is_attached());
        assert!(!serving.start_polling().unwrap());
        let parks = AtomicU64::new(0);
        drop(serving.request(&parks));
        serving.unstick();
        assert_eq!(parks.load(Ordering::Relaxed), 0);
        serving.stop_polling().unwrap();
    }
}
