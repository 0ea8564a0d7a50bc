//! The bucket's clock. The bucket stamps every object with its own time of the PUT; whatever
//! judges how old such an object is (a lease's pin, a maker's marker, a prune's marker, a
//! pending backup, garbage) reads "now" from the same clock, so no machine's clock counts. Only
//! a bucket whose policy refuses the probe leaves the judge's own clock to stand in, with an
//! allowance for the two to disagree.
//!
//! A job that stays safe only while its object is fresh (a prune while it deletes, a backup
//! while it copies) renews the object as it goes and stops before acting once the bucket's
//! stamps show a renewal came too late (`Renewed`). Its own clock only schedules renewals: a
//! process that was suspended renews late, and the stamps say so.

use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_engine::{Error, Result};

use crate::client::Client;

/// How far the judge's clock may run ahead of the bucket's (or of another machine's) when it
/// has to stand in for the bucket's.
pub(crate) const CLOCK_SKEW: Duration = Duration::from_secs(60);
/// Allowed past any hold judged by the bucket's clock: it counts whole seconds, and a bucket
/// behind several gateways stamps each write by the clock of the one that took it.
pub(crate) const GRAIN_SECS: i64 = 2;
/// Where the judge asks the bucket the time: written (overwritten) and listed each reading.
const CLOCK_KEY: &str = "clock/now";

/// A reading of the time to judge the bucket's stamps by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    /// The bucket's time in Unix seconds, when it could be read.
    pub bucket: Option<i64>,
    /// The judge's own clock, in Unix seconds.
    pub local: i64,
}

impl Now {
    /// Asks the bucket the time (one PUT and one LIST). A bucket whose policy refuses the PUT
    /// (one written for the store's other prefixes), or that does not list it, leaves the
    /// judge's own clock to stand in; any other failure is the caller's.
    pub(crate) fn read(client: &Client) -> Result<Now> {
        let local = local_secs();
        match client.put_overwrite(CLOCK_KEY, Bytes::new()) {
            Ok(()) => {}
            Err(e) if crate::client::forbidden(&e) => {
                log::warn!("{}: reading the bucket's clock: {e}", client.url());
                return Ok(Now {
                    bucket: None,
                    local,
                });
            }
            Err(e) => return Err(e),
        }
        let bucket = client
            .list_aged("clock/")?
            .into_iter()
            .find(|(key, _)| key == CLOCK_KEY)
            .map(|(_, written)| written);
        Ok(Now { bucket, local })
    }

    /// The time to date new judgements by: the bucket's, else the judge's own.
    pub(crate) fn secs(&self) -> i64 {
        self.bucket.unwrap_or(self.local)
    }

    /// Whether an object the bucket stamped at `written` is still within `hold` of it, to let
    /// nothing go early: by the bucket's clock, `hold` and the clock's grain; by the judge's
    /// own, twice `hold` (a minute more at the least), as its clock may run ahead.
    pub(crate) fn within(&self, written: i64, hold: Duration) -> bool {
        let hold = secs_of(hold);
        let (now, allowance) = match self.bucket {
            Some(now) => (now, GRAIN_SECS),
            None => (self.local, hold.max(secs_of(CLOCK_SKEW))),
        };
        now.saturating_sub(written) <= hold.saturating_add(allowance)
    }

    /// Whether an object the bucket stamped at `written` is surely younger than `limit`, to
    /// act on it: the grain, or the judge's skew either way, counted against it.
    pub(crate) fn surely_younger(&self, written: i64, limit: Duration) -> bool {
        let (now, allowance) = match self.bucket {
            Some(now) => (now, GRAIN_SECS),
            None => (self.local, secs_of(CLOCK_SKEW)),
        };
        now.saturating_sub(written).saturating_add(allowance) < secs_of(limit)
    }
}

fn secs_of(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 4)
}

/// The judge's own clock, in Unix seconds.
pub(crate) fn local_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// An object a long job keeps fresh: PUT again every sixth of `hold` (with `body()`, which may
/// refresh a time it carries), so that whoever judges it by the bucket's clock against `hold`
/// finds it fresh while the job lives.
pub(crate) struct Renewed<'a> {
    client: &'a Client,
    key: String,
    body: Box<dyn Fn() -> Bytes + 'a>,
    hold: Duration,
    /// When the next renewal is due, by this process's clock (a schedule only).
    next: Instant,
    /// The bucket's stamps of the renewals.
    stamps: Stamps,
}

impl std::fmt::Debug for Renewed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renewed")
            .field("key", &self.key)
            .field("hold", &self.hold)
            .field("stamps", &self.stamps)
            .finish()
    }
}

impl<'a> Renewed<'a> {
    /// Starts keeping `key` fresh, once its caller's PUT of it is done (one HEAD for its stamp).
    pub(crate) fn after_put(
        client: &'a Client,
        key: &str,
        body: impl Fn() -> Bytes + 'a,
        hold: Duration,
    ) -> Result<Renewed<'a>> {
        let first = client.stamp(key)?.ok_or_else(|| {
            Error::NotFound(format!(
                "{}: {key} went as soon as it was made",
                client.url()
            ))
        })?;
        Ok(Renewed {
            client,
            key: key.to_string(),
            body: Box::new(body),
            hold,
            next: Instant::now() + hold / 6,
            stamps: Stamps::new(first, hold),
        })
    }

    /// PUTs the object again if a renewal is due, and reads the bucket's stamp of it. A failure
    /// is logged and tried again at the next call; `ensure_fresh` stops the job if they go on
    /// failing.
    pub(crate) fn tick(&mut self) {
        if Instant::now() < self.next {
            return;
        }
        let renewed = self
            .client
            .put_overwrite(&self.key, (self.body)())
            .and_then(|()| self.client.stamp(&self.key));
        match renewed {
            Ok(Some(stamp)) => {
                self.stamps.renewed(stamp);
                self.next = Instant::now() + self.hold / 6;
            }
            Ok(None) => log::warn!("{}: {} went while renewed", self.client.url(), self.key),
            Err(e) => log::warn!("{}: renewing {}: {e}", self.client.url(), self.key),
        }
    }

    /// Renews if due, then refuses (`Unavailable`, naming `doing`) unless, by the bucket's
    /// clock, the object has been fresh all along and is sure to stay so for a while yet
    /// (`Stamps::may_act`).
    pub(crate) fn ensure_fresh(&mut self, doing: &str) -> Result<()> {
        self.tick();
        let now = Now::read(self.client)?;
        if self.stamps.may_act(&now) {
            return Ok(());
        }
        Err(Error::Unavailable(format!(
            "{}: {} went {} s or more without a renewal the bucket took, too close to its {:?} \
             hold to go on {doing}; try again",
            self.client.url(),
            self.key,
            secs_of(self.hold / 2),
            self.hold
        )))
    }
}

/// The bucket's stamps of an object's renewals, and whether it has been fresh all along.
#[derive(Debug, Clone, Copy)]
struct Stamps {
    last: i64,
    hold: Duration,
    /// Two stamps half the hold apart or more: a judge may have found the object stale
    /// between them.
    lapsed: bool,
}

impl Stamps {
    fn new(first: i64, hold: Duration) -> Stamps {
        Stamps {
            last: first,
            hold,
            lapsed: false,
        }
    }

    fn renewed(&mut self, stamp: i64) {
        let gap = stamp.saturating_sub(self.last).saturating_add(GRAIN_SECS);
        self.lapsed |= gap >= secs_of(self.hold / 2);
        self.last = self.last.max(stamp);
    }

    /// Whether the job may still act at `now`: never lapsed, and last renewed surely within
    /// half the hold (room for the longest step taken between two checks).
    fn may_act(&self, now: &Now) -> bool {
        !self.lapsed && now.surely_younger(self.last, self.hold / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buckets_clock_judges_when_it_could_be_read() {
        let now = Now {
            bucket: Some(1_000_000),
            local: 1_000_000 + 3600,
        };
        // A judge whose own clock runs an hour ahead still keeps what the bucket says is new.
        assert!(now.within(1_000_000 - 600, Duration::from_secs(600)));
        assert!(now.within(1_000_000 - 602, Duration::from_secs(600)));
        assert!(!now.within(1_000_000 - 603, Duration::from_secs(600)));
        assert_eq!(now.secs(), 1_000_000);
        // A stamp ahead of the reading (another gateway's clock) is young.
        assert!(now.within(1_000_010, Duration::ZERO));
        assert!(now.surely_younger(1_000_000 - 297, Duration::from_secs(300)));
        assert!(!now.surely_younger(1_000_000 - 298, Duration::from_secs(300)));
    }

    #[test]
    fn the_judges_clock_stands_in_with_room_for_it_to_run_ahead() {
        let now = Now {
            bucket: None,
            local: 2_000_000,
        };
        // Twice the hold, a minute at the least.
        assert!(now.within(2_000_000 - 1200, Duration::from_secs(600)));
        assert!(!now.within(2_000_000 - 1201, Duration::from_secs(600)));
        assert!(now.within(2_000_000 - 70, Duration::from_secs(10)));
        assert!(!now.within(2_000_000 - 71, Duration::from_secs(10)));
        assert_eq!(now.secs(), 2_000_000);
        // Acting on it: the minute counts against.
        assert!(now.surely_younger(2_000_000 - 239, Duration::from_secs(300)));
        assert!(!now.surely_younger(2_000_000 - 240, Duration::from_secs(300)));
    }

    #[test]
    fn a_job_acts_only_while_the_buckets_stamps_show_it_renewed_in_time() {
        let at = |t| Now {
            bucket: Some(t),
            local: 0,
        };
        let mut s = Stamps::new(1000, Duration::from_secs(60));
        assert!(s.may_act(&at(1027)));
        assert!(!s.may_act(&at(1028)), "half the hold, less the grain");
        s.renewed(1010);
        assert!(s.may_act(&at(1037)));

        // Renewals the bucket stamped too far apart (a long step, failed PUTs, a process
        // suspended) leave a gap in which a judge may have found the object stale: a later
        // renewal does not mend it.
        s.renewed(1038);
        assert!(!s.may_act(&at(1039)));
        s.renewed(1040);
        assert!(!s.may_act(&at(1041)));
    }
}
