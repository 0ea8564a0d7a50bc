//! A reader's lease: a pin of the version a read-only open replayed, renewed while the store is
//! open and dropped when it closes, so garbage collection never deletes an object a reader may
//! still fetch (doc/format.md, "Checkpoints, clones and backups").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use strata_engine::Result;

use crate::checkpoint::pin_now;
use crate::client::Client;
use crate::pin::{Pin, now_millis, pin_key};
use crate::replay::Replayed;
use crate::shared::Shared;

/// How long a lease holds past its last renewal unless the holder says (`BucketConfig`).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(600);
/// A lease is renewed every fifth of its time: several tries before it lapses.
const RENEWALS_PER_TTL: u32 = 5;

/// The pin name of a lease of `ttl` that holds until `expiry_millis` by its holder's clock.
/// The time comes first, so a renewal's name sorts after the one it replaces; the `ttl` lets
/// a collector judge the lease by the bucket's clock alone (`pin_lapsed`).
fn lease_name(expiry_millis: u64, ttl: Duration, holder: &str) -> String {
    format!("lease-{expiry_millis:020}-{}s-{holder}", ttl.as_secs())
}

/// How long the lease named `name` holds past its last renewal, when its name says so (a
/// lease named by an older version carries only its expiry).
pub(crate) fn lease_ttl(name: &str) -> Option<Duration> {
    lease_expiry(name)?;
    let (secs, holder) = name.get("lease-".len() + 21..)?.split_once("s-")?;
    let digits = !secs.is_empty() && secs.bytes().all(|b| b.is_ascii_digit());
    (digits && !holder.is_empty())
        .then(|| secs.parse().ok().map(Duration::from_secs))
        .flatten()
}

/// Whether the lease pin `name`, last written at the bucket's second `written`, has lapsed.
/// Each renewal writes a new pin, so a lease whose name carries its time is judged by how
/// long ago the bucket took its pin, by the bucket's clock (`bucket_now`, when it could be
/// read): no reader's or collector's clock counts. Past its time, a lease is allowed one
/// renewal interval (the clock's grain at the least), so its holder, which judges by its own
/// time (`start_renewing`), always knows first. Without the bucket's clock the collector's
/// stands in (`clock::Now::within`). One named by an older version is judged by the expiry its
/// holder wrote, against the collector's clock (`now_millis`).
pub(crate) fn pin_lapsed(
    name: &str,
    written: i64,
    bucket_now: Option<i64>,
    now_millis: u64,
) -> bool {
    match (lease_ttl(name), bucket_now) {
        (Some(ttl), Some(now)) => {
            let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 4);
            let grace = (ttl / i64::from(RENEWALS_PER_TTL)).max(crate::clock::GRAIN_SECS);
            now.saturating_sub(written) > ttl + grace
        }
        // The collector's clock stands in, with the room every hold gets then.
        (Some(ttl), None) => {
            let local = i64::try_from(now_millis / 1000).unwrap_or(i64::MAX);
            !crate::clock::Now {
                bucket: None,
                local,
            }
            .within(written, ttl)
        }
        (None, _) => lease_expiry(name).is_some_and(|e| lapsed(e, now_millis)),
    }
}

/// When the lease named `name` (a pin's name) lapses, if it is a lease.
pub(crate) fn lease_expiry(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("lease-")?;
    let digits = rest.get(..20)?;
    (digits.bytes().all(|b| b.is_ascii_digit()) && rest[20..].starts_with('-'))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Who holds the lease named `name` (a pin's name), if it is a lease.
pub(crate) fn lease_holder(name: &str) -> Option<&str> {
    lease_expiry(name)?;
    name.get("lease-".len() + 21..)
}

/// Whether a lease that holds until `expiry_millis` has lapsed, to a collector whose clock
/// reads `now_millis` (allowing for the reader's clock being behind).
pub(crate) fn lapsed(expiry_millis: u64, now_millis: u64) -> bool {
    expiry_millis.saturating_add(crate::clock::CLOCK_SKEW.as_millis() as u64) < now_millis
}

fn expiry_from_now(ttl: Duration) -> u64 {
    now_millis() + u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX / 2)
}

/// A read-only open's lease.
#[derive(Debug)]
pub(crate) struct ReaderLease {
    holder: String,
    ttl: Duration,
    /// The pin's current name (it changes at each renewal).
    name: Mutex<String>,
    /// The version pinned: a replica moves it forward (`move_to`).
    pin: Mutex<Pin>,
    /// Held while the pin's name or version changes: a renewal and a move never interleave.
    changing: Mutex<()>,
    renewed: Mutex<Instant>,
    lapsed: AtomicBool,
}

impl ReaderLease {
    /// Pins the store's version now for `holder`; the version it pinned.
    pub(crate) fn take(
        client: &Client,
        holder: &str,
        ttl: Duration,
    ) -> Result<(ReaderLease, Replayed)> {
        let name = lease_name(expiry_from_now(ttl), ttl, holder);
        let taken = Instant::now();
        let pin = pin_now(client, &name, format!("reader {holder}"))?;
        let replayed = pin.replayed();
        Ok((ReaderLease::held(holder, ttl, name, pin, taken), replayed))
    }

    /// The lease named `name` on `pin`, taken at `taken`.
    fn held(holder: &str, ttl: Duration, name: String, pin: Pin, taken: Instant) -> ReaderLease {
        ReaderLease {
            holder: holder.to_string(),
            ttl,
            name: Mutex::new(name),
            pin: Mutex::new(pin),
            changing: Mutex::new(()),
            renewed: Mutex::new(taken),
            lapsed: AtomicBool::new(false),
        }
    }

    /// A lease on checkpoint `checkpoint`'s version (a copy from it, which lapses if the copier
    /// dies).
    pub(crate) fn of_checkpoint(
        client: &Client,
        checkpoint: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<ReaderLease> {
        let (name, taken) = (
            lease_name(expiry_from_now(ttl), ttl, holder),
            Instant::now(),
        );
        let pin =
            crate::checkpoint::pin_copy(client, checkpoint, &name, format!("copier {holder}"))?;
        Ok(ReaderLease::held(holder, ttl, name, pin, taken))
    }

    /// The version the lease pins.
    pub(crate) fn pin(&self) -> Pin {
        self.pin.lock().clone()
    }

    /// Moves the lease to the files `view` gives to pin (a replica following its writer: its
    /// new version and what it still reads of older ones): the new pin goes up under the
    /// marker protocol before the old one goes, so nothing this reader may read is unpinned
    /// meanwhile. Returns what `view` gave besides.
    pub(crate) fn move_to<T>(
        &self,
        client: &Client,
        view: impl FnOnce() -> Result<(Replayed, T)>,
    ) -> Result<T> {
        let _changing = self.changing.lock();
        let (new, started) = (self.next_name(), Instant::now());
        let source = format!("reader {}", self.holder);
        let (pin, next) = crate::checkpoint::pin_with(client, &new, source, view)?;
        let old = std::mem::replace(&mut *self.name.lock(), new);
        *self.pin.lock() = pin;
        *self.renewed.lock() = started;
        self.lapsed.store(false, Ordering::Relaxed);
        // The lease has moved: an old pin left behind only holds more than needed, until it
        // lapses and garbage collection deletes it.
        if let Err(e) = client.delete(&pin_key(&old)) {
            log::warn!(
                "{}: deleting the lease's old pin {old:?}: {e}",
                client.url()
            );
        }
        Ok(next)
    }

    /// A name for the next pin: a later expiry, never the current name.
    fn next_name(&self) -> String {
        let current = lease_expiry(&self.name.lock()).unwrap_or(0);
        lease_name(
            expiry_from_now(self.ttl).max(current + 1),
            self.ttl,
            &self.holder,
        )
    }

    /// Renews the lease if it is due (a long copy calls this as it goes).
    pub(crate) fn renew_if_due(&self, client: &Client) -> Result<()> {
        let since = self.renewed.lock().elapsed();
        if since < self.renew_every() {
            return Ok(());
        }
        match self.renew(client) {
            Ok(()) => Ok(()),
            // Time is left: tried again at the next call.
            Err(e) if since < self.ttl * 3 / 5 => {
                log::warn!("{}: renewing a lease: {e}", client.url());
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Moves the lease to a later expiry: the new pin is written before the old one goes, so the
    /// version is never unpinned.
    fn renew(&self, client: &Client) -> Result<()> {
        let _changing = self.changing.lock();
        let started = Instant::now();
        let new = self.next_name();
        let pin = Bytes::from(self.pin.lock().encode());
        if !client.put_create_or_own(&pin_key(&new), pin)? {
            return Err(strata_engine::Error::Busy(format!(
                "{}: another pin is named {new}: the lease was not renewed",
                client.url()
            )));
        }
        let old = std::mem::replace(&mut *self.name.lock(), new);
        *self.renewed.lock() = started;
        client.delete(&pin_key(&old))?;
        Ok(())
    }

    fn renew_every(&self) -> Duration {
        self.ttl / RENEWALS_PER_TTL
    }

    /// The lease's pin's current name.
    pub(crate) fn name(&self) -> String {
        self.name.lock().clone()
    }

    /// Whether the lease ran out before a renewal landed: garbage collection may have deleted
    /// what this reader has not fetched yet.
    pub(crate) fn has_lapsed(&self) -> bool {
        self.lapsed.load(Ordering::Relaxed)
    }

    /// Drops the lease (the store closes).
    pub(crate) fn release(&self, client: &Client) -> Result<()> {
        client.delete(&pin_key(&self.name.lock()))
    }
}

/// Renews `shared`'s lease every fifth of its time while the store is open, on a thread of its
/// own.
pub(crate) fn start_renewing(shared: &Arc<Shared>) {
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let spawned = std::thread::Builder::new()
        .name("strata-bucket-lease".into())
        .spawn(move || {
            let Some(every) = weak
                .upgrade()
                .and_then(|s| s.reader_lease.as_ref().map(ReaderLease::renew_every))
            else {
                return;
            };
            let mut next = Instant::now() + every;
            loop {
                // Wakes at least each second to notice the store closed.
                std::thread::sleep(every.min(Duration::from_secs(1)));
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                let Some(lease) = &shared.reader_lease else {
                    return;
                };
                if Instant::now() < next {
                    continue;
                }
                // Judged before the renewal resets the time: one that lands after the lease ran
                // out may land after collection took what it held.
                let overdue = lease.renewed.lock().elapsed() > lease.ttl;
                if let Err(e) = lease.renew(&shared.client) {
                    log::warn!("{}: renewing the reader's lease: {e}", shared.client.url());
                }
                // From the last renewal that landed, so late wake-ups do not add up; a failing
                // one is tried again each second.
                let renewed = *lease.renewed.lock();
                next = (renewed + every).max(Instant::now() + Duration::from_secs(1));
                if (overdue || renewed.elapsed() > lease.ttl) && !lease.has_lapsed() {
                    lease.lapsed.store(true, Ordering::Relaxed);
                    log::error!(
                        "{}: this reader's lease lapsed (the bucket did not take a renewal for \
                         {:?}): garbage collection may delete files it has not fetched \
                         yet; reopen the store",
                        shared.client.url(),
                        lease.ttl
                    );
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("no lease renewal: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_carry_their_expiry_and_time() {
        let name = lease_name(1_795_877_723_862, Duration::from_secs(600), "host-1-2");
        assert_eq!(lease_expiry(&name), Some(1_795_877_723_862));
        assert_eq!(lease_ttl(&name), Some(Duration::from_secs(600)));
        // One holder's renewals share what follows the expiry.
        assert_eq!(lease_holder(&name), Some("600s-host-1-2"));
        // Named by an older version: no time.
        assert_eq!(lease_ttl("lease-00000000000000000001-dead-reader"), None);
        assert_eq!(lease_ttl("lease-00000000000000000001-5s-"), None);
        assert_eq!(lease_ttl("lease-00000000000000000001-xs-a"), None);
        assert_eq!(lease_expiry("nightly"), None);
        assert_eq!(lease_holder("nightly"), None);
        assert_eq!(lease_expiry("lease-12-x"), None);
        assert!(!lapsed(1_000_000, 1_000_000 + 59_000));
        assert!(lapsed(1_000_000, 1_000_000 + 61_000));
    }

    #[test]
    fn a_lease_is_judged_by_the_buckets_clock_not_its_holders() {
        let ttl = Duration::from_secs(600);
        // A reader whose clock runs an hour behind: the expiry it wrote is long past by the
        // collector's clock, but the bucket took its renewal 10 s ago.
        let now_millis = 1_800_000_000_000;
        let behind = lease_name(now_millis - 3_600_000 + 600_000, ttl, "slow-clock");
        let bucket_now = 1_800_000_000;
        assert!(!pin_lapsed(
            &behind,
            bucket_now - 10,
            Some(bucket_now),
            now_millis
        ));
        // No renewal for longer than its time, by the bucket: lapsed, whatever it claims.
        let ahead = lease_name(now_millis + 86_400_000, ttl, "fast-clock");
        // Allowed a renewal interval past its time (a fifth of it): 720 s for 600.
        assert!(pin_lapsed(
            &ahead,
            bucket_now - 721,
            Some(bucket_now),
            now_millis
        ));
        assert!(!pin_lapsed(
            &ahead,
            bucket_now - 720,
            Some(bucket_now),
            now_millis
        ));
        // Without the bucket's clock, the pin's date against the collector's: twice its time,
        // as the collector's clock may run ahead.
        assert!(!pin_lapsed(&ahead, bucket_now - 1200, None, now_millis));
        assert!(pin_lapsed(&ahead, bucket_now - 1201, None, now_millis));
        // An older name: its expiry against the collector's clock.
        let old = "lease-00000000000000000001-dead-reader";
        assert!(pin_lapsed(old, bucket_now, Some(bucket_now), now_millis));
    }
}
