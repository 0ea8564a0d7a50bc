//! Clones: a new, writable store made from a version of another. In the same bucket it refers
//! to the source's objects and copies none; the source keeps them through a pin (doc/format.md,
//! "Checkpoints, clones and backups").

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use strata_engine::{Error, Result};

use crate::backup::Progress;
use crate::checkpoint::{fresh_name, pin_copy, pin_now};
use crate::client::Client;
use crate::copy::{copied_key, copy_object};
use crate::lease::{DEFAULT_LEASE_TTL, ReaderLease};
use crate::log::log_key;
use crate::pin::{Pin, pin_key};

/// What a clone did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneReport {
    /// The source's record the clone starts from.
    pub seq: u64,
    pub files: usize,
    /// Source objects the clone refers to (same bucket) or copied (another bucket).
    pub objects_referred: usize,
    pub objects_copied: usize,
    pub bytes_copied: u64,
    /// The pin in the source that keeps the clone's objects (same bucket), to drop with the
    /// clone.
    pub source_pin: Option<String>,
}

/// The directories of a store: another store's objects must not fall under any of them.
const STORE_DIRS: [&str; 11] = [
    "clock/",
    "data/",
    "log/",
    "checkpoint/",
    "pin/",
    "pinning/",
    "probe/",
    "backup/",
    "backup-pending/",
    "backup-prune/",
    "objects/",
];

/// Whether one store's objects would be listed as the other's.
pub(crate) fn overlaps(a: &Client, b: &Client) -> bool {
    if a.url().bucket != b.url().bucket {
        return false;
    }
    let within = |outer: &Client, inner: &Client| {
        let inner_root = inner.object("");
        outer.url().prefix == inner.url().prefix
            || STORE_DIRS
                .iter()
                .any(|d| inner_root.starts_with(&outer.object(d)))
    };
    within(a, b) || within(b, a)
}

/// Fails unless `dst` holds no store (no record, no checkpoint of the log).
pub(crate) fn require_empty(dst: &Client) -> Result<()> {
    if !dst.list("log/")?.is_empty() || !dst.list("checkpoint/")?.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} holds a store already; a clone or a restore needs an empty prefix",
            dst.url()
        )));
    }
    Ok(())
}

/// Writes `pin`'s files as record 1 of the new store at `dst`, create-only, and settled: a PUT
/// whose answer was lost (a failure, or a refusal of the S3 client's own retry) is read back,
/// and counts if the record there is ours.
pub(crate) fn write_first_record(dst: &Client, pin: &Pin) -> Result<()> {
    let bytes = Bytes::from(pin.as_first_record().encode());
    match dst.put_create_or_own(&log_key(1), bytes.clone()) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::Busy(format!(
            "{}: another process made a store here meanwhile",
            dst.url()
        ))),
        Err(e) => match dst.get(&log_key(1)) {
            Ok(Some(there)) if there == bytes => Ok(()),
            _ => Err(e),
        },
    }
}

/// Copies every object `pin` names from `src` into `dst` under names of this run's own (so two
/// runs into one store never write the same name), renewing `lease` as it goes; the pin with
/// its keys renamed to the copies.
pub(crate) fn copy_all(
    src: &Client,
    dst: &Client,
    pin: &Pin,
    lease: Option<&ReaderLease>,
    progress: &dyn Fn(Progress),
) -> Result<Pin> {
    let run = fresh_name("copy");
    let objects = pin.objects();
    let mut done = Progress::of(objects.iter().map(|(_, len, _)| *len));
    let mut renamed = BTreeMap::new();
    for (i, (key, len, crc)) in objects.iter().enumerate() {
        let to = copied_key(&run, i, key);
        copy_object(src, (key, *len, *crc), dst, &to, lease)?;
        renamed.insert(key.clone(), to);
        done.advance(*len, progress);
    }
    Ok(pin.with_objects(|key| renamed.get(key).cloned().unwrap_or_default()))
}

/// Clones `src` (its newest version, or its checkpoint `checkpoint`) into the empty `dst`.
pub fn clone_store(
    src: &Client,
    dst: &Client,
    checkpoint: Option<&str>,
    progress: &dyn Fn(Progress),
) -> Result<CloneReport> {
    if overlaps(src, dst) {
        return Err(Error::InvalidArgument(format!(
            "{} and {}: one store's objects would be listed as the other's; pick prefixes \
             that do not contain each other",
            src.url(),
            dst.url()
        )));
    }
    require_empty(dst)?;
    if src.url().bucket != dst.url().bucket {
        // Another bucket cannot be read through this one's name: every object is copied, under
        // a lease that lapses should this process die mid-copy.
        let holder = fresh_name("clone");
        let lease = match checkpoint {
            Some(name) => ReaderLease::of_checkpoint(src, name, &holder, DEFAULT_LEASE_TTL)?,
            None => ReaderLease::take(src, &holder, DEFAULT_LEASE_TTL)?.0,
        };
        let copied = copy_all(src, dst, &lease.pin(), Some(&lease), progress)
            .and_then(|copy| write_first_record(dst, &copy).map(|()| copy));
        let released = lease.release(src);
        let copy = copied?;
        released?;
        let pin = lease.pin();
        return Ok(CloneReport {
            seq: pin.seq,
            files: copy.replayed().files.len(),
            objects_referred: 0,
            objects_copied: pin.objects().len(),
            bytes_copied: pin.objects().iter().map(|(_, len, _)| len).sum(),
            source_pin: None,
        });
    }
    // In the same bucket the clone refers to the source's objects, kept by a pin made before
    // anything refers to them and outliving that: from a checkpoint, a copy of it (the
    // checkpoint may be dropped first).
    let pin_name = fresh_name("clone");
    let pin = match checkpoint {
        Some(name) => pin_copy(src, name, &pin_name, dst.url().to_string())?,
        None => pin_now(src, &pin_name, dst.url().to_string())?,
    };
    let cloned = pin.with_objects(|key| absolute(src, key));
    // The clone names that pin before it refers to any object, so its garbage collection can
    // drop the pin once nothing refers to them any more. One left by a clone that died before
    // its record 1 is replaced; should two clones race, the loser's origin may stay, which
    // leaves the winner's pin in place for good (kept, never lost).
    let origin = absolute(src, &pin_key(&pin_name));
    let made = dst
        .put_create_or_own(ORIGIN, Bytes::from(origin.clone()))
        .and_then(|ours| {
            if ours {
                Ok(())
            } else {
                dst.put_overwrite(ORIGIN, Bytes::from(origin.clone()))
            }
        })
        .and_then(|()| write_first_record(dst, &cloned));
    if let Err(e) = made {
        // The pin goes only once the clone's record 1 is known not to be ours: a pin kept for
        // nothing is only space, a clone without its pin loses its objects.
        let ours = Bytes::from(cloned.as_first_record().encode());
        // Another's record there: this clone is not made. No record yet is no proof: a PUT
        // that timed out here may still land.
        let not_ours = matches!(dst.get(&log_key(1)), Ok(Some(there)) if there != ours);
        if not_ours {
            let _ = src.delete(&pin_key(&pin_name));
            if dst.get(ORIGIN).ok().flatten().as_deref() == Some(origin.as_bytes()) {
                let _ = dst.delete(ORIGIN);
            }
        }
        return Err(e);
    }
    Ok(CloneReport {
        seq: pin.seq,
        files: pin.replayed().files.len(),
        objects_referred: pin.objects().len(),
        objects_copied: 0,
        bytes_copied: 0,
        source_pin: Some(pin_name),
    })
}

/// The object in a clone naming the pin in its source that keeps the objects it refers to.
const ORIGIN: &str = "origin";

/// A clone's garbage collection, once `reachable` (everything its records, log checkpoints,
/// pins and queued entries name, read with no pin being made) names none of its source's
/// objects: drops the source's pin, which keeps them for nothing now. Objects never become
/// reachable again, so nothing can come to need them later. Whether it dropped one.
pub(crate) fn release_origin(client: &Client, reachable: &BTreeSet<String>) -> Result<bool> {
    let Some(origin) = client.get(ORIGIN)? else {
        return Ok(false);
    };
    let origin = String::from_utf8_lossy(&origin).into_owned();
    if !origin.starts_with('/') || !origin.contains("/pin/") {
        return Ok(false);
    }
    // Any absolute key keeps it, not only one under the source's prefix: a clone of a clone
    // names its grandsource's objects too, which only its source's pins keep.
    if reachable.iter().any(|k| k.starts_with('/')) {
        return Ok(false);
    }
    client.delete(&origin)?;
    client.delete(ORIGIN)?;
    log::info!(
        "{}: refers to no object of its source any more; dropped the source's pin {origin}",
        client.url()
    );
    Ok(true)
}

/// `key` of the store at `client`, named from anywhere in its bucket.
fn absolute(client: &Client, key: &str) -> String {
    if key.starts_with('/') {
        key.to_string()
    } else {
        format!("/{}", client.object(key))
    }
}
