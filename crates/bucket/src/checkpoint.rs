//! Checkpoints: named, pinned versions of a store that garbage collection spares, made by any
//! process with access to the bucket while a writer goes on (doc/format.md, "Checkpoints, clones
//! and backups").

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_engine::{Error, Result};

use crate::client::Client;
use crate::clock::Now;
pub use crate::pin::check_name;
use crate::pin::{Pin, marker_key, pin_key};
use crate::replay::Replayed;

/// How long a marker stops garbage collection, by the bucket's clock against its stamp of the
/// marker's PUT (`clock::Now`): twice `MAKING_LIMIT`, which the maker measures from before that
/// PUT. A maker that died holds collection off this long.
const MARKER_HOLDS: Duration = Duration::from_secs(600);
/// How long a pin may take from its marker's PUT to its own.
const MAKING_LIMIT: Duration = Duration::from_secs(300);
/// Names the store gives its own pins; a checkpoint may not take them.
const RESERVED: [&str; 3] = ["lease-", "clone-", "backup-"];

/// A checkpoint, as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    pub name: String,
    /// The store's record the checkpoint is as of.
    pub seq: u64,
    /// Unix milliseconds.
    pub created_millis: u64,
    /// The store it was made for (a clone's pin: the clone).
    pub source: String,
    pub files: usize,
    pub objects: usize,
    /// Bytes of the store's files at the checkpoint.
    pub bytes: u64,
}

impl CheckpointInfo {
    fn of(name: &str, pin: &Pin) -> CheckpointInfo {
        CheckpointInfo {
            name: name.to_string(),
            seq: pin.seq,
            created_millis: pin.created_millis,
            source: pin.source.clone(),
            files: pin.replayed().files.len(),
            objects: pin.objects().len(),
            bytes: pin.bytes(),
        }
    }
}

/// Pins the store's current version as checkpoint `name`.
pub fn create(client: &Client, name: &str) -> Result<CheckpointInfo> {
    check_name(name)?;
    if let Some(prefix) = RESERVED.iter().find(|p| name.starts_with(*p)) {
        return Err(Error::InvalidArgument(format!(
            "{name:?}: names starting {prefix:?} are the store's own (readers' leases, clones' \
             and backups' pins)"
        )));
    }
    let pin = pin_now(client, name, client.url().to_string())?;
    Ok(CheckpointInfo::of(name, &pin))
}

/// Makes the pin `name` of the store's version now, for `source`: marker, replay, pin (see the
/// format's invariants for why garbage collection cannot delete what it names meanwhile).
pub(crate) fn pin_now(client: &Client, name: &str, source: String) -> Result<Pin> {
    if client.head(&pin_key(name))?.is_some() {
        return Err(Error::InvalidArgument(format!(
            "{}: there is a checkpoint named {name:?} already",
            client.url()
        )));
    }
    let (pin, ()) = pin_with(client, name, source, || {
        let view = crate::open::replay(client)?;
        if view.replayed.last_seq == 0 {
            return Err(Error::NotFound(format!("{}: no store here", client.url())));
        }
        Ok((view.replayed, ()))
    })?;
    Ok(pin)
}

/// Makes the pin `name` of the files `view` gives (the version it replays, and for a replica
/// what it still reads of older ones), for `source`: the marker goes up before `view` lists
/// the log, and comes down once the pin is up (the format's invariants). Returns what `view`
/// gave besides.
pub(crate) fn pin_with<T>(
    client: &Client,
    name: &str,
    source: String,
    view: impl FnOnce() -> Result<(Replayed, T)>,
) -> Result<(Pin, T)> {
    let started = Instant::now();
    let marker = place_marker(client, name)?;
    let made = (|| {
        // The bucket's time of the marker, which the making is timed from as collection times
        // the marker.
        let marked = client.stamp(&marker)?.ok_or_else(|| {
            Error::Unavailable(format!(
                "{}: marker {marker} went as soon as it was made",
                client.url()
            ))
        })?;
        let (pinned, besides) = view()?;
        let pin = Pin::of(&pinned, source);
        // Settled, not taken at its word: a PUT whose answer was lost finds its own pin.
        if !client.put_create_or_own(&pin_key(name), Bytes::from(pin.encode()))? {
            return Err(Error::InvalidArgument(format!(
                "{}: a checkpoint named {name:?} was made meanwhile",
                client.url()
            )));
        }
        // Timed by the bucket's stamps, as collection times the marker (this process's clock
        // stops while it is suspended), and by this clock too. A pin whose time cannot be read
        // proves nothing either.
        let took = match client.stamp(&pin_key(name)) {
            Ok(Some(pinned_at)) => apart(marked, pinned_at).max(started.elapsed()),
            Ok(None) | Err(_) => Duration::MAX,
        };
        if took > MAKING_LIMIT {
            // Garbage collection may have gone on past the marker: the pin proves nothing.
            client.delete(&pin_key(name))?;
            let how_long = match took {
                Duration::MAX => "could not be timed".to_string(),
                took => format!("took {took:?}"),
            };
            return Err(Error::Unavailable(format!(
                "{}: making checkpoint {name:?} {how_long}, past the {MAKING_LIMIT:?} garbage \
                 collection waits for it; try again",
                client.url(),
            )));
        }
        Ok((pin, besides))
    })();
    let removed = client.delete(&marker);
    let made = made?;
    removed?;
    Ok(made)
}

/// PUTs a marker of this maker's own for pin `name` (`pinning/NAME@MAKER`) and returns its key:
/// a collection pass deletes only markers past their hold, and no live maker's is ever one of
/// them, whoever else makes the same name. (Flat: an S3 gateway over a filesystem, SeaweedFS's
/// among them, would keep a directory per name.)
fn place_marker(client: &Client, name: &str) -> Result<String> {
    let key = format!("{}@{}", marker_key(name), fresh_name("maker"));
    // Settled: a retried PUT whose answer was lost finds its own marker.
    if client.put_create_or_own(&key, Bytes::from(key.clone()))? {
        Ok(key)
    } else {
        Err(Error::Busy(format!(
            "{}: marker {key} is another process's",
            client.url()
        )))
    }
}

/// How far apart the bucket stamped `first` and `then`, the grain counted against.
fn apart(first: i64, then: i64) -> Duration {
    let secs = then
        .saturating_sub(first)
        .saturating_add(crate::clock::GRAIN_SECS);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// Pins checkpoint `from`'s version again as `name` (a clone's pin, which must outlive the
/// checkpoint). The checkpoint is checked to be there still once the copy is: dropped before
/// that, a collection pass that saw neither pin may have deleted what it kept.
pub(crate) fn pin_copy(client: &Client, from: &str, name: &str, source: String) -> Result<Pin> {
    check_name(from)?;
    let original = client.get(&pin_key(from))?.ok_or_else(|| {
        Error::NotFound(format!("{}: no checkpoint named {from:?}", client.url()))
    })?;
    let mut pin = Pin::decode(&original).map_err(|e| Error::Corruption {
        file: PathBuf::from(client.object(&pin_key(from))),
        detail: e.0.into(),
    })?;
    pin.source = source;
    if !client.put_create_or_own(&pin_key(name), Bytes::from(pin.encode()))? {
        return Err(Error::Busy(format!("{}: pin {name} exists", client.url())));
    }
    // The same checkpoint, byte for byte: one dropped and made again under its name meanwhile
    // is another version.
    if client.get(&pin_key(from))?.as_ref() != Some(&original) {
        client.delete(&pin_key(name))?;
        return Err(Error::NotFound(format!(
            "{}: checkpoint {from:?} was dropped while it was being pinned",
            client.url()
        )));
    }
    Ok(pin)
}

/// Every marker, and whether it still holds collection off at `now` (a marker past its hold is
/// a dead maker's).
pub(crate) fn markers(client: &Client, now: &Now) -> Result<Vec<(String, bool)>> {
    Ok(client
        .list_aged("pinning/")?
        .into_iter()
        .map(|(key, written)| (key, now.within(written, MARKER_HOLDS)))
        .collect())
}

/// The pin `key`, if it is still there.
pub(crate) fn read_pin(client: &Client, key: &str) -> Result<Option<Pin>> {
    let Some(bytes) = client.get(key)? else {
        return Ok(None);
    };
    Pin::decode(&bytes)
        .map(Some)
        .map_err(|e| Error::Corruption {
            file: PathBuf::from(client.object(key)),
            detail: e.0.into(),
        })
}

/// Checkpoint `name`.
pub fn read(client: &Client, name: &str) -> Result<Pin> {
    check_name(name)?;
    read_pin(client, &pin_key(name))?
        .ok_or_else(|| Error::NotFound(format!("{}: no checkpoint named {name:?}", client.url())))
}

/// Every checkpoint, clones' pins included, oldest name first.
pub fn list(client: &Client) -> Result<Vec<CheckpointInfo>> {
    let mut out = Vec::new();
    for key in client.list("pin/")? {
        let Some(name) = key.strip_prefix("pin/") else {
            continue;
        };
        if let Some(pin) = read_pin(client, &key)? {
            out.push(CheckpointInfo::of(name, &pin));
        }
    }
    Ok(out)
}

/// Drops checkpoint `name`: garbage collection may then delete what only it kept.
pub fn drop(client: &Client, name: &str) -> Result<()> {
    check_name(name)?;
    if client.head(&pin_key(name))?.is_none() {
        return Err(Error::NotFound(format!(
            "{}: no checkpoint named {name:?}",
            client.url()
        )));
    }
    client.delete(&pin_key(name))
}

/// A name for a pin made for a clone or a backup: unique, and saying what it is for.
pub(crate) fn fresh_name(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{what}-{nanos}-{}", std::process::id())
}
