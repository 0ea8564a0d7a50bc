//! Wall-clock time for TTL: expirations are absolute seconds since the Unix epoch, and tests move
//! time with a [`ManualClock`] instead of sleeping.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where the store reads the time from (see [`crate::Options::clock`]).
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Seconds since the Unix epoch.
    fn now_secs(&self) -> u64;
}

/// The operating system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_secs(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// A clock that stands still until told to move: for tests of TTL and expiry.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `now` seconds.
    pub fn new(now: u64) -> Self {
        ManualClock(AtomicU64::new(now))
    }

    /// Moves the clock to `now` seconds.
    pub fn set(&self, now: u64) {
        self.0.store(now, Ordering::Release);
    }

    /// Moves the clock forward by `secs`.
    pub fn advance(&self, secs: u64) {
        self.0.fetch_add(secs, Ordering::AcqRel);
    }
}

impl Clock for ManualClock {
    fn now_secs(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}
