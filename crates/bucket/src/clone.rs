//! Clones: a new, writable store made from a version of another. In the same bucket it refers
//! to the source's objects and copies none; the source keeps them through a pin (doc/format.md,
//! "Checkpoints, clones and backups").

use std::collections::BTreeSet;

use bytes::Bytes;
use strata_engine::{Error, Result};

use crate::checkpoint::{fresh_name, pin_now, read};
use crate::client::{Client, Created};
use crate::copy::{copied_key, copy_object};
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
const STORE_DIRS: [&str; 9] = [
    "data/",
    "log/",
    "checkpoint/",
    "pin/",
    "pinning/",
    "probe/",
    "backup/",
    "backup-pending/",
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

/// Writes `pin`'s files as record 1 of the new store at `dst`, create-only.
pub(crate) fn write_first_record(dst: &Client, pin: &Pin) -> Result<()> {
    let record = pin.as_first_record();
    match dst.put_create(&log_key(1), Bytes::from(record.encode()))? {
        Created::Yes => Ok(()),
        Created::AlreadyThere => Err(Error::Busy(format!(
            "{}: another process made a store here meanwhile",
            dst.url()
        ))),
    }
}

/// Clones `src` (its newest version, or its checkpoint `checkpoint`) into the empty `dst`.
pub fn clone_store(src: &Client, dst: &Client, checkpoint: Option<&str>) -> Result<CloneReport> {
    if overlaps(src, dst) {
        return Err(Error::InvalidArgument(format!(
            "{} and {}: one store's objects would be listed as the other's; pick prefixes \
             that do not contain each other",
            src.url(),
            dst.url()
        )));
    }
    require_empty(dst)?;
    let pin_name = fresh_name("clone");
    // The pin is made before anything refers to its objects and outlives the clone's use of
    // them: from a checkpoint, a copy of it (the checkpoint may be dropped first).
    let pin = match checkpoint {
        Some(name) => {
            let mut pin = read(src, name)?;
            pin.source = dst.url().to_string();
            match src.put_create(&pin_key(&pin_name), Bytes::from(pin.encode()))? {
                Created::Yes => pin,
                Created::AlreadyThere => {
                    return Err(Error::Busy(format!("{}: pin {pin_name} exists", src.url())));
                }
            }
        }
        None => pin_now(src, &pin_name, dst.url().to_string())?,
    };
    let objects = pin.objects();
    let mut report = CloneReport {
        seq: pin.seq,
        files: pin.replayed().files.len(),
        objects_referred: 0,
        objects_copied: 0,
        bytes_copied: 0,
        source_pin: None,
    };
    let same_bucket = src.url().bucket == dst.url().bucket;
    let made = if same_bucket {
        report.objects_referred = objects.len();
        let cloned = pin.with_objects(|key| absolute(src, key));
        // The clone names the pin that keeps its source's objects before it refers to any, so
        // its garbage collection can drop that pin once nothing refers to them any more.
        let origin = Bytes::from(absolute(src, &pin_key(&pin_name)));
        match dst.put_create(ORIGIN, origin)? {
            Created::Yes => write_first_record(dst, &cloned),
            Created::AlreadyThere => Err(Error::Busy(format!(
                "{}: another clone is being made here",
                dst.url()
            ))),
        }
    } else {
        // Another bucket cannot be read through this one's name: copy, under the clone's own.
        let mut renamed = std::collections::BTreeMap::new();
        let copied = objects
            .iter()
            .enumerate()
            .try_for_each(|(i, (key, len, crc))| {
                let to_key = copied_key(i, key);
                copy_object(src, key, *len, *crc, dst, &to_key)?;
                report.objects_copied += 1;
                report.bytes_copied += len;
                renamed.insert(key.clone(), to_key);
                Ok::<_, Error>(())
            });
        copied.and_then(|()| {
            let cloned = pin.with_objects(|key| renamed.get(key).cloned().unwrap_or_default());
            write_first_record(dst, &cloned)
        })
    };
    if let Err(e) = made {
        let _ = src.delete(&pin_key(&pin_name));
        if same_bucket && dst.list("log/").is_ok_and(|l| l.is_empty()) {
            let _ = dst.delete(ORIGIN);
        }
        return Err(e);
    }
    if same_bucket {
        report.source_pin = Some(pin_name);
    } else {
        // The copies are the clone's own: the source need keep nothing for it.
        src.delete(&pin_key(&pin_name))?;
    }
    Ok(report)
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
    let Some((source_root, _)) = origin.rsplit_once("/pin/") else {
        return Ok(false);
    };
    let source_root = format!("{source_root}/");
    if reachable.iter().any(|k| k.starts_with(&source_root)) {
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
