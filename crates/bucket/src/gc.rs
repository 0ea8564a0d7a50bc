//! Garbage collection: deleting the data objects nothing can reach. An object goes only when no
//! log checkpoint, no record and no pin (a checkpoint, a clone's) in the bucket names it, no
//! queued entry of this writer names it, no pin is being made, it is older than the minimum age
//! (a second guard, never the only one), and this writer is not fenced.

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use strata_engine::{Error, Result};

use crate::log::{parse_checkpoint_key, parse_log_key};
use crate::record::Record;
use crate::shared::Shared;

/// What one pass found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Data objects in the bucket.
    pub objects: usize,
    /// Of those, named by a checkpoint, a record or a queued entry.
    pub reachable: usize,
    /// Unreachable but younger than the minimum age: left for a later pass.
    pub young: usize,
    /// Deleted.
    pub deleted: usize,
    /// Checkpoints being made, and pins listed but gone when read (a lease renewed meanwhile):
    /// while there is one, nothing is deleted.
    pub held: usize,
    /// Readers' leases that lapsed, deleted.
    pub lapsed_leases: usize,
    /// A clone that refers to none of its source's objects any more dropped the source's pin.
    pub released_source: bool,
}

/// The objects the record or checkpoint `key` names; none if it was deleted since it was listed.
fn named_by(shared: &Shared, key: &str) -> Result<Vec<String>> {
    let client = &shared.client;
    let Some(bytes) = client.get(key)? else {
        return Ok(Vec::new());
    };
    let record = Record::decode(&bytes).map_err(|e| Error::Corruption {
        file: client.object(key).into(),
        detail: e.0.into(),
    })?;
    Ok(record.objects().map(str::to_string).collect())
}

/// How often a lease that moved is looked for again under its next name before the pass
/// holds instead.
const SUCCESSOR_TRIES: usize = 3;

/// The objects the leases of `gone`'s holder pin now (`gone`, a lease's pin, was deleted
/// after it was listed); `None` when it was no lease, or its holder kept moving it.
fn successors(client: &crate::client::Client, gone: &str) -> Result<Option<Vec<String>>> {
    let Some(holder) = crate::lease::lease_holder(gone) else {
        return Ok(None);
    };
    'tries: for _ in 0..SUCCESSOR_TRIES {
        let (mut named, mut found) = (Vec::new(), false);
        for key in client.list("pin/")? {
            let name = key.trim_start_matches("pin/");
            if name == gone || crate::lease::lease_holder(name) != Some(holder) {
                continue;
            }
            match crate::checkpoint::read_pin(client, &key)? {
                Some(pin) => {
                    found = true;
                    named.extend(pin.objects().into_iter().map(|(key, _, _)| key));
                }
                None => continue 'tries,
            }
        }
        if found {
            return Ok(Some(named));
        }
    }
    Ok(None)
}

pub(crate) fn collect(shared: &Shared, min_age: Duration) -> Result<GcReport> {
    let log = shared.log()?;
    log.check()?;
    let client = &shared.client;
    // The data objects are listed first: one uploaded after this is not in the list, and one
    // uploaded before is named by the records and queued entries read after.
    let objects = client.list_aged("data/")?;
    let mut reachable: BTreeSet<String> = log.waiting_objects().into_iter().collect();
    for key in client
        .list("checkpoint/")?
        .into_iter()
        .chain(client.list("log/")?)
    {
        if parse_checkpoint_key(&key).is_none() && parse_log_key(&key).is_none() {
            continue;
        }
        // One deleted since it was listed (a record past a checkpoint) named nothing the
        // newer checkpoint does not.
        reachable.extend(named_by(shared, &key)?);
    }
    // Checkpoints written meanwhile (this writer's own) name what the records they replaced
    // and deleted named, if it is still reachable.
    for key in client.list("checkpoint/")? {
        reachable.extend(named_by(shared, &key)?);
    }
    reachable.extend(log.waiting_objects());
    // A replica's lease pin also names files its log no longer reaches (those its reads still
    // hold): they were named by its previous pin, which it deletes only after the new one is
    // up, so every pass reads one or the other (a successor when the old one is gone). After a
    // lapse there is no such predecessor: those files may be gone, and reads still holding
    // them fail (doc/format.md).
    // Then the markers, then the pins. A pin's maker places its marker, replays, PUTs the pin
    // and only then deletes the marker. If this pass lists the markers before the maker placed
    // its marker, the maker replayed after this pass read the records: every object its pin
    // names was reachable then, and objects never become reachable again. If it lists them
    // while the marker is there, the pass holds. If after, the pin was PUT before the marker
    // went, so before the pins are listed below.
    // Asked of the bucket, which dates every object: markers, leases and ages are judged by
    // one clock. Read before the markers are listed, so a marker placed since is young.
    let now = crate::clock::Now::read(client)?;
    let (fresh, stale): (Vec<_>, Vec<_>) = crate::checkpoint::markers(client, &now)?
        .into_iter()
        .partition(|(_, fresh)| *fresh);
    let mut held = fresh.len();
    let mut lapsed = Vec::new();
    let now_millis = crate::pin::now_millis();
    for (key, written) in client.list_aged("pin/")? {
        let name = key.trim_start_matches("pin/");
        if crate::lease::pin_lapsed(name, written, now.bucket, now_millis) {
            lapsed.push(key);
            continue;
        }
        match crate::checkpoint::read_pin(client, &key)? {
            Some(pin) => reachable.extend(pin.objects().into_iter().map(|(key, _, _)| key)),
            // A lease renewed or moved since the LIST: its holder put the successor up before
            // it deleted this one, so the successor is listed now, and pins everything of this
            // one the holder still reads.
            None => match successors(client, name)? {
                Some(named) => reachable.extend(named),
                None => held += 1,
            },
        }
    }
    let now = now.secs();
    let mut report = GcReport {
        objects: objects.len(),
        held,
        lapsed_leases: lapsed.len(),
        ..GcReport::default()
    };
    let mut doomed = Vec::new();
    for (key, modified) in objects {
        if reachable.contains(&key) {
            report.reachable += 1;
        } else if now.saturating_sub(modified) < min_age.as_secs() as i64 {
            report.young += 1;
        } else {
            doomed.push(key);
        }
    }
    if held > 0 {
        doomed.clear();
    }
    // Fenced meanwhile (by a writer this one has not heard of yet): the new writer's records
    // were not read, so nothing is provably garbage. The bucket is asked, not only memory.
    log.confirm(client)?;
    report.deleted = doomed.len();
    client.delete_many(doomed)?;
    client.delete_many(lapsed)?;
    // A marker past its hold is a dead maker's: it holds nothing, and would pile up.
    client.delete_many(stale.into_iter().map(|(key, _)| key).collect())?;
    if held == 0 {
        report.released_source = crate::clone::release_origin(client, &reachable)?;
    }
    Ok(report)
}

/// Runs `collect` every `interval` while the store is open, on a thread of its own.
pub(crate) fn start_background(shared: &Arc<Shared>, interval: Duration, min_age: Duration) {
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let spawned = std::thread::Builder::new()
        .name("strata-bucket-gc".into())
        .spawn(move || {
            let mut next = Instant::now() + interval;
            loop {
                // Wakes each second to notice the store closed.
                std::thread::sleep(Duration::from_secs(1).min(interval));
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                if Instant::now() < next {
                    continue;
                }
                next = Instant::now() + interval;
                match collect(&shared, min_age) {
                    Ok(r) if r.deleted > 0 => log::info!(
                        "{}: garbage collection deleted {} of {} data objects",
                        shared.client.url(),
                        r.deleted,
                        r.objects
                    ),
                    Ok(_) => {}
                    Err(e) if e.kind() == strata_engine::ErrorKind::Fenced => return,
                    Err(e) => log::warn!("{}: garbage collection: {e}", shared.client.url()),
                }
            }
        });
    if let Err(e) = spawned {
        log::warn!("no background garbage collection: {e}");
    }
}
