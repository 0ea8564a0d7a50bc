//! The bucket's clock. The bucket stamps every object with its own time of the PUT; whatever
//! judges how old such an object is (a lease's pin, a maker's marker, a prune's marker, a
//! pending backup, garbage) reads "now" from the same clock, so no machine's clock counts. When
//! the bucket will not say (a policy that refuses the probe), the judge's own clock stands in,
//! with an allowance for the two to disagree.
//!
//! A job that stays safe only while its object is fresh (a prune while it deletes, a backup
//! while it copies) renews the object as it goes and stops acting once its last renewal is too
//! old (`Renewed`): the bucket stamped the renewal after the job took the time, so by the
//! bucket's clock the object is younger than the job believes.

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
    /// Asks the bucket the time (one PUT and one LIST). A bucket that will not take the PUT
    /// (a policy written for the store's other prefixes) or does not list it leaves the
    /// judge's own clock to stand in.
    pub(crate) fn read(client: &Client) -> Result<Now> {
        let local = local_secs();
        if let Err(e) = client.put_overwrite(CLOCK_KEY, Bytes::new()) {
            log::warn!("{}: reading the bucket's clock: {e}", client.url());
            return Ok(Now {
                bucket: None,
                local,
            });
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

    /// Whether an object the bucket stamped at `written` is still within `hold` of it. By the
    /// bucket's clock, `hold` and the clock's grain; by the judge's own, `hold` and the skew
    /// allowed, so that a judge whose clock runs ahead does not let go early.
    pub(crate) fn within(&self, written: i64, hold: Duration) -> bool {
        let hold = i64::try_from(hold.as_secs()).unwrap_or(i64::MAX / 4);
        let (now, allowance) = match self.bucket {
            Some(now) => (now, GRAIN_SECS),
            None => (self.local, CLOCK_SKEW.as_secs() as i64),
        };
        now.saturating_sub(written) <= hold.saturating_add(allowance)
    }
}

/// The judge's own clock, in Unix seconds.
pub(crate) fn local_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// An object a long job keeps fresh: PUT again with the same body every sixth of `hold`, so that
/// whoever judges it by the bucket's clock against `hold` finds it fresh while the job lives.
#[derive(Debug)]
pub(crate) struct Renewed<'a> {
    client: &'a Client,
    key: String,
    body: Bytes,
    renewals: Renewals,
}

impl<'a> Renewed<'a> {
    /// Starts keeping `key` fresh: its first PUT (the caller's) began at `put_began`.
    pub(crate) fn after_put(
        client: &'a Client,
        key: &str,
        body: Bytes,
        put_began: Instant,
        hold: Duration,
    ) -> Renewed<'a> {
        Renewed {
            client,
            key: key.to_string(),
            body,
            renewals: Renewals::new(put_began, hold),
        }
    }

    /// PUTs the object again if a renewal is due. A failed PUT is logged and tried again at the
    /// next call; `ensure_fresh` stops the job if they go on failing.
    pub(crate) fn tick(&mut self) {
        if !self.renewals.due(Instant::now()) {
            return;
        }
        let began = Instant::now();
        match self.client.put_overwrite(&self.key, self.body.clone()) {
            Ok(()) => self.renewals.last = began,
            Err(e) => log::warn!("{}: renewing {}: {e}", self.client.url(), self.key),
        }
    }

    /// Renews if due, then refuses (`Unavailable`, naming `doing`) unless the object has been
    /// fresh all along and is sure to stay so for a while yet (`Renewals::may_act`).
    pub(crate) fn ensure_fresh(&mut self, doing: &str) -> Result<()> {
        self.tick();
        if self.renewals.may_act(Instant::now()) {
            return Ok(());
        }
        Err(Error::Unavailable(format!(
            "{}: {} went {:?} or more without a renewal, too close to its {:?} hold to go on \
             {doing}; try again",
            self.client.url(),
            self.key,
            self.renewals.hold / 2,
            self.renewals.hold
        )))
    }
}

/// When an object was last renewed, and whether it has been fresh all along.
#[derive(Debug, Clone, Copy)]
struct Renewals {
    /// When the last PUT that the bucket took began: its stamp is no older than this.
    last: Instant,
    every: Duration,
    hold: Duration,
    /// Some renewal came later than half the hold: a judge may have found the object stale.
    lapsed: bool,
}

impl Renewals {
    fn new(first_put_began: Instant, hold: Duration) -> Renewals {
        Renewals {
            last: first_put_began,
            every: hold / 6,
            hold,
            lapsed: false,
        }
    }

    /// Whether a renewal is due `at`; one due too late marks the object lapsed for good.
    fn due(&mut self, at: Instant) -> bool {
        let since = at.saturating_duration_since(self.last);
        if since < self.every {
            return false;
        }
        self.lapsed |= !fresh_for(since, self.hold);
        true
    }

    /// Whether the job may still act `at`: never lapsed, and renewed within half the hold
    /// (room for the longest step taken between two checks).
    fn may_act(&self, at: Instant) -> bool {
        !self.lapsed && fresh_for(at.saturating_duration_since(self.last), self.hold)
    }
}

/// Whether an object last renewed `since` ago, held `hold`, is fresh enough to act on.
fn fresh_for(since: Duration, hold: Duration) -> bool {
    since < hold / 2
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
    }

    #[test]
    fn the_judges_clock_stands_in_with_a_minutes_allowance() {
        let now = Now {
            bucket: None,
            local: 2_000_000,
        };
        assert!(now.within(2_000_000 - 660, Duration::from_secs(600)));
        assert!(!now.within(2_000_000 - 661, Duration::from_secs(600)));
        assert_eq!(now.secs(), 2_000_000);
    }

    #[test]
    fn a_job_acts_only_while_renewed_in_time_all_along() {
        let t0 = Instant::now();
        let secs = |s| t0 + Duration::from_secs(s);
        let mut r = Renewals::new(t0, Duration::from_secs(60));
        assert!(!r.due(secs(9)), "a renewal every sixth of the hold");
        assert!(r.due(secs(10)));
        r.last = secs(10);
        assert!(r.may_act(secs(39)));
        assert!(!r.may_act(secs(40)), "half the hold since the last renewal");

        // A renewal that comes too late (a step that ran long, or failed PUTs) leaves a gap in
        // which a judge may have found the object stale: a later renewal does not mend it.
        assert!(r.due(secs(45)));
        r.last = secs(45);
        assert!(!r.may_act(secs(46)));
        assert!(r.due(secs(56)) && !r.may_act(secs(57)));
    }
}
