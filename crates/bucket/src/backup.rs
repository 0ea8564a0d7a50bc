//! Backups of a bucket store into another bucket or prefix: incremental (an object the
//! destination holds is never copied again), checked object by object, restored from the
//! newest one that checks, pruned by count or age (doc/format.md, "Checkpoints, clones and
//! backups").

use std::collections::{BTreeMap, BTreeSet};

pub use crate::local_backup::{create_from_dir, create_live, refuse_inside_store, restore_to_dir};
use std::time::Duration;

use bytes::Bytes;
use strata_engine::{Error, Result};

use crate::checkpoint::{fresh_name, read_pin};
use crate::client::Client;
use crate::clock::{Now, Renewed};
use crate::clone::{copy_all, overlaps, require_empty, write_first_record};
use crate::copy::{copy_object, verify_object};
use crate::lease::{DEFAULT_LEASE_TTL, ReaderLease};
use crate::log::parse_numbered;
use crate::pin::{Pin, now_millis};

/// A backup, as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupInfo {
    pub number: u64,
    /// The source's record the backup is as of.
    pub seq: u64,
    /// Unix milliseconds.
    pub created_millis: u64,
    pub source: String,
    pub files: usize,
    pub objects: usize,
    pub bytes: u64,
}

/// What `create` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    pub backup: BackupInfo,
    /// Objects copied now, and their bytes.
    pub copied: usize,
    pub bytes_copied: u64,
    /// Objects an earlier backup had copied already.
    pub already_there: usize,
}

/// What `restore` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    pub backup: BackupInfo,
    /// Newer backups that did not check, and why.
    pub skipped: Vec<(u64, String)>,
    pub objects: usize,
    pub bytes: u64,
}

/// What `prune` deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PruneReport {
    pub backups_deleted: usize,
    pub objects_deleted: usize,
    pub backups_kept: usize,
}

/// How far a copy has got: called after each object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub objects_done: usize,
    pub objects: usize,
    pub bytes_done: u64,
    pub bytes: u64,
}

impl Progress {
    /// Nothing done yet of objects of lengths `lens`.
    pub(crate) fn of(lens: impl Iterator<Item = u64>) -> Progress {
        lens.fold(
            Progress {
                objects_done: 0,
                objects: 0,
                bytes_done: 0,
                bytes: 0,
            },
            |p, len| Progress {
                objects: p.objects + 1,
                bytes: p.bytes + len,
                ..p
            },
        )
    }

    /// One more object, of `len` bytes, done: told to `tell`.
    pub(crate) fn advance(&mut self, len: u64, tell: &dyn Fn(Progress)) {
        self.objects_done += 1;
        self.bytes_done += len;
        tell(*self);
    }
}

/// Which backup a restore takes: its number and pin, and the newer ones skipped for damage.
pub(crate) struct Chosen {
    pub number: u64,
    pub pin: Pin,
    pub skipped: Vec<(u64, String)>,
}

/// A pending backup the bucket stamped longer ago than this is a dead run's: it no longer keeps
/// its objects. A live run renews its record as it copies (`Renewed`).
const PENDING_HOLDS: Duration = Duration::from_secs(24 * 3600);

fn backup_key(number: u64) -> String {
    format!("backup/{number:020}")
}

fn pending_key(number: u64) -> String {
    format!("backup-pending/{number:020}")
}

/// Where the destination keeps its copy of the source's object `key` (`len` bytes of CRC
/// `crc`): one name per source object and contents, so a second backup finds it, and a store
/// recreated at the same URL, whose new objects may reuse the old names, never passes for it.
fn object_key(key: &str, len: u64, crc: u32) -> String {
    match key.strip_prefix('/') {
        Some(absolute) => format!("objects/abs/{absolute}.{len}-{crc:08x}"),
        None => format!("objects/rel/{key}.{len}-{crc:08x}"),
    }
}

/// Where a prune in progress says so: a backup made meanwhile waits for it.
fn prune_marker_key(run: &str) -> String {
    format!("backup-prune/{run}")
}

/// How long a prune's marker counts past the bucket's stamp of its last renewal (a prune that
/// died leaves one).
const PRUNE_HOLDS: Duration = Duration::from_secs(3600);
/// Objects deleted between two checks that the prune's marker is still fresh.
const PRUNE_DELETES_AT_ONCE: usize = 1000;

pub(crate) fn info(number: u64, pin: &Pin) -> BackupInfo {
    BackupInfo {
        number,
        seq: pin.seq,
        created_millis: pin.created_millis,
        source: pin.source.clone(),
        files: pin.replayed().files.len(),
        objects: pin.objects().len(),
        bytes: pin.bytes(),
    }
}

/// The numbers of the backups in `dest`, oldest first. Their pins are read one at a time
/// (`read_listed`): a prune of a hundred backups of one store holds each object's name once,
/// not a hundred pins naming it.
fn backup_numbers(dest: &Client) -> Result<Vec<u64>> {
    Ok(dest
        .list("backup/")?
        .iter()
        .filter_map(|key| parse_numbered(key, "backup/"))
        .collect())
}

/// Listed backup `number`'s pin; `None` when it was deleted since the LIST.
fn read_listed(dest: &Client, number: u64) -> Result<Option<Pin>> {
    read_pin(dest, &backup_key(number))
}

/// Every backup in `dest`, oldest first.
pub fn list(dest: &Client) -> Result<Vec<BackupInfo>> {
    let mut out = Vec::new();
    for n in backup_numbers(dest)? {
        if let Some(pin) = read_listed(dest, n)? {
            out.push(info(n, &pin));
        }
    }
    Ok(out)
}

/// The objects backup `number` names in `dest`, with the length and CRC each must have.
pub fn objects(dest: &Client, number: u64) -> Result<Vec<(String, u64, u32)>> {
    Ok(read_backup(dest, number)?.objects())
}

fn read_backup(dest: &Client, number: u64) -> Result<Pin> {
    read_listed(dest, number)?
        .ok_or_else(|| Error::NotFound(format!("{}: no backup numbered {number}", dest.url())))
}

/// The number the next backup of `source` into `dest` takes; refused when `dest` holds another
/// store's backups.
pub(crate) fn next_number(dest: &Client, source: &str) -> Result<u64> {
    let existing = backup_numbers(dest)?;
    for &n in &existing {
        if let Some(other) = read_listed(dest, n)?
            && other.source != source
        {
            return Err(Error::InvalidArgument(format!(
                "{} holds backups of {} (backup {n}); one destination keeps one store's backups",
                dest.url(),
                other.source
            )));
        }
    }
    let pending: Vec<u64> = dest
        .list("backup-pending/")?
        .iter()
        .filter_map(|k| parse_numbered(k, "backup-pending/"))
        .collect();
    Ok(existing.into_iter().chain(pending).max().unwrap_or(0) + 1)
}

/// Backs up `src`'s newest version into `dest`.
pub fn create(src: &Client, dest: &Client, progress: &dyn Fn(Progress)) -> Result<BackupReport> {
    create_leased(src, dest, DEFAULT_LEASE_TTL, progress)
}

/// `create`, its lease on `src` lasting `lease_ttl` past each renewal: a process that dies
/// mid-copy keeps the source's garbage this long. The copy renews it as it reads each piece, so
/// any time of a second or more serves however slow the copy.
pub fn create_leased(
    src: &Client,
    dest: &Client,
    lease_ttl: Duration,
    progress: &dyn Fn(Progress),
) -> Result<BackupReport> {
    if lease_ttl < Duration::from_secs(1) {
        return Err(Error::InvalidArgument(format!(
            "a backup's lease of {lease_ttl:?} is too short to renew: one second at the least"
        )));
    }
    if overlaps(src, dest) {
        return Err(Error::InvalidArgument(format!(
            "{} cannot hold backups of {}: one's objects would be listed as the other's",
            dest.url(),
            src.url()
        )));
    }
    let number = next_number(dest, &src.url().to_string())?;
    // A lease keeps every object the backup reads until the copy is done, and lapses should
    // this process die mid-copy.
    let (lease, _) = ReaderLease::take(src, &fresh_name("backup"), lease_ttl)?;
    let copied = copy_leased(src, dest, number, &lease, progress);
    let released = lease.release(src);
    let report = copied?;
    released?;
    Ok(report)
}

fn copy_leased(
    src: &Client,
    dest: &Client,
    number: u64,
    lease: &ReaderLease,
    progress: &dyn Fn(Progress),
) -> Result<BackupReport> {
    let pin = lease.pin();
    let objects = pin.objects();
    let named: BTreeMap<&str, (u64, u32)> = objects
        .iter()
        .map(|(k, len, crc)| (k.as_str(), (*len, *crc)))
        .collect();
    let mut backup = pin.with_objects(|k| {
        let (len, crc) = named.get(k).copied().unwrap_or_default();
        object_key(k, len, crc)
    });
    backup.created_millis = now_millis();
    backup.source = src.url().to_string();
    let items: Vec<(String, u64)> = objects
        .iter()
        .map(|(key, len, crc)| (object_key(key, *len, *crc), *len))
        .collect();
    back_up(dest, number, &backup, &items, progress, |i| {
        let (key, len, crc) = &objects[i];
        copy_object(src, (key, *len, *crc), dest, &items[i].0, Some(lease))
    })
}

/// Makes backup `number` of `backup`, whose objects are `items` (each its name in `dest` and
/// its length): the pending record first, then (unless a prune runs) `put(i)` for each item
/// `dest` lacks, then the backup's record, then the pending one goes.
pub(crate) fn back_up(
    dest: &Client,
    number: u64,
    backup: &Pin,
    items: &[(String, u64)],
    progress: &dyn Fn(Progress),
    mut put: impl FnMut(usize) -> Result<()>,
) -> Result<BackupReport> {
    let body = Bytes::from(backup.encode());
    if !dest.put_create_or_own(&pending_key(number), body.clone())? {
        return Err(Error::Busy(format!(
            "{}: another backup is being made ({number})",
            dest.url()
        )));
    }
    let copied = (|| {
        // Each renewal carries the time it was made, as the record's creation time: a prune of
        // an older version judges a pending backup by that.
        let refreshed = || {
            let mut pending = backup.clone();
            pending.created_millis = now_millis();
            Bytes::from(pending.encode())
        };
        let mut pending = Renewed::after_put(dest, &pending_key(number), refreshed, PENDING_HOLDS)?;
        // A prune that began before the pending backup landed may not have seen it, and may
        // delete objects this one finds already there: wait for none.
        if fresh_prune(dest)? {
            return Err(Error::Busy(format!(
                "{}: a prune is running; back up once it ends",
                dest.url()
            )));
        }
        let there: BTreeSet<String> = dest.list("objects/")?.into_iter().collect();
        let mut report = BackupReport {
            backup: info(number, backup),
            copied: 0,
            bytes_copied: 0,
            already_there: 0,
        };
        let mut done = Progress::of(items.iter().map(|(_, len)| *len));
        for (i, (key, len)) in items.iter().enumerate() {
            if there.contains(key) {
                report.already_there += 1;
            } else {
                put(i)?;
                report.copied += 1;
                report.bytes_copied += len;
            }
            done.advance(*len, progress);
            pending.tick();
        }
        // A prune judges the pending record by the bucket's stamp of its last renewal: one that
        // went stale meanwhile may have let a prune delete what this backup found there.
        pending.ensure_fresh("to write the backup's record")?;
        if dest.put_create_or_own(&backup_key(number), body)? {
            Ok(report)
        } else {
            Err(Error::Busy(format!(
                "{}: backup {number} was made meanwhile by another process",
                dest.url()
            )))
        }
    })();
    let removed = dest.delete(&pending_key(number));
    let report = copied?;
    removed?;
    Ok(report)
}

/// Whether a prune is running (its marker renewed within `PRUNE_HOLDS`, by the bucket's clock).
fn fresh_prune(dest: &Client) -> Result<bool> {
    let now = Now::read(dest)?;
    Ok(dest
        .list_aged("backup-prune/")?
        .iter()
        .any(|(_, written)| now.within(*written, PRUNE_HOLDS)))
}

/// Reads every object of backup `number` and checks its length and CRC: the first that fails
/// is named.
pub fn verify(dest: &Client, number: u64) -> Result<BackupInfo> {
    let pin = read_backup(dest, number)?;
    for (key, len, crc) in pin.objects() {
        verify_object(dest, &key, len, crc)?;
    }
    Ok(info(number, &pin))
}

/// Restores backup `number`, or the newest that verifies, as a new store at the empty `target`.
pub fn restore(
    dest: &Client,
    number: Option<u64>,
    target: &Client,
    progress: &dyn Fn(Progress),
) -> Result<RestoreReport> {
    if overlaps(dest, target) {
        return Err(Error::InvalidArgument(format!(
            "{} is inside the backups at {} (or holds them)",
            target.url(),
            dest.url()
        )));
    }
    require_empty(target)?;
    let Chosen {
        number: n,
        pin,
        skipped,
    } = choose(dest, number)?;
    let restored = copy_all(dest, target, &pin, None, progress)?;
    let objects = pin.objects();
    let bytes = objects.iter().map(|(_, len, _)| len).sum();
    write_first_record(target, &restored)?;
    Ok(RestoreReport {
        backup: info(n, &pin),
        skipped,
        objects: objects.len(),
        bytes,
    })
}

/// Backup `number`, or the newest whose every object verifies (length and CRC, read in pieces);
/// the newer ones skipped for damage, and why. An outage is an error, never a reason to skip.
pub(crate) fn choose(dest: &Client, number: Option<u64>) -> Result<Chosen> {
    let all = backup_numbers(dest)?;
    if all.is_empty() {
        return Err(Error::NotFound(format!(
            "{}: no backup to restore",
            dest.url()
        )));
    }
    let mut skipped = Vec::new();
    let mut chosen = None;
    for &n in all.iter().rev() {
        if number.is_some_and(|want| want != n) {
            continue;
        }
        let Some(pin) = read_listed(dest, n)? else {
            continue;
        };
        match pin
            .objects()
            .iter()
            .try_for_each(|(key, len, crc)| verify_object(dest, key, *len, *crc))
        {
            Ok(()) => {
                chosen = Some((n, pin));
                break;
            }
            Err(e) if number.is_none() && e.kind() == strata_engine::ErrorKind::Corruption => {
                log::warn!("{}: backup {n} does not verify: {e}", dest.url());
                skipped.push((n, e.to_string()));
            }
            Err(e) => return Err(e),
        }
    }
    let Some((n, pin)) = chosen else {
        return Err(match number {
            Some(want) => Error::NotFound(format!("{}: no backup numbered {want}", dest.url())),
            // Every one listed was deleted before it was read (a prune ran).
            None if skipped.is_empty() => {
                Error::NotFound(format!("{}: no backup to restore", dest.url()))
            }
            None => Error::Corruption {
                file: dest.object("backup/").into(),
                detail: format!("no backup verifies: {skipped:?}"),
            },
        });
    };
    Ok(Chosen {
        number: n,
        pin,
        skipped,
    })
}

/// Deletes the backups past the newest `keep` and those older than `older_than` (the newest
/// is always kept), then every object no remaining or pending backup names.
pub fn prune(
    dest: &Client,
    keep: Option<usize>,
    older_than: Option<Duration>,
) -> Result<PruneReport> {
    if keep == Some(0) {
        return Err(Error::InvalidArgument(
            "--keep 0 would delete every backup; the newest is always kept".into(),
        ));
    }
    // Marked first, then the pending backups read below: a backup either lands its pending
    // record before that read, or sees this marker and stops.
    let run = fresh_name("prune");
    if !dest.put_create_or_own(&prune_marker_key(&run), Bytes::from(run.clone()))? {
        return Err(Error::Busy(format!(
            "{}: prune marker {run} exists",
            dest.url()
        )));
    }
    let pruned = (|| {
        // Renewed as the prune goes: a backup that found it stale would go on beside it.
        let mut marker = Renewed::after_put(
            dest,
            &prune_marker_key(&run),
            || Bytes::from(run.clone()),
            PRUNE_HOLDS,
        )?;
        prune_marked(dest, keep, older_than, &run, &mut marker)
    })();
    let removed = dest.delete(&prune_marker_key(&run));
    let report = pruned?;
    removed?;
    Ok(report)
}

fn prune_marked(
    dest: &Client,
    keep: Option<usize>,
    older_than: Option<Duration>,
    run: &str,
    marker: &mut Renewed<'_>,
) -> Result<PruneReport> {
    // Every backup's time first (a damaged record stops the prune before it deletes anything),
    // then the retention over the ones still there.
    let mut all = Vec::new();
    for n in backup_numbers(dest)? {
        if let Some(pin) = read_listed(dest, n)? {
            all.push((n, pin.created_millis));
        }
        marker.tick();
    }
    let now = now_millis();
    let mut report = PruneReport::default();
    let count = all.len();
    for (i, &(n, created_millis)) in all.iter().enumerate() {
        let newer = count - 1 - i;
        let too_many = keep.is_some_and(|k| newer >= k);
        let too_old = older_than.is_some_and(|age| {
            now.saturating_sub(created_millis) > u64::try_from(age.as_millis()).unwrap_or(u64::MAX)
        });
        if newer > 0 && (too_many || too_old) {
            dest.delete(&backup_key(n))?;
            report.backups_deleted += 1;
        } else {
            report.backups_kept += 1;
        }
        marker.tick();
    }
    // The objects first, then what names them: one copied after the LIST is not in it, and one
    // copied before is named by a pending backup written before it. The pending ones are read
    // before the backups: a backup writes its record before it deletes its pending one, so one
    // that finishes meanwhile is seen in one list or the other.
    let objects = dest.list("objects/")?;
    marker.tick();
    let mut named: BTreeSet<String> = BTreeSet::new();
    // A pending backup is judged by the bucket's stamp of its last renewal; one past its hold
    // is a dead run's. It is deleted, with the other markers dead runs left, only below the
    // newest backup (always kept): no later backup can take its number again, so no live run's
    // record is ever deleted or renewed over by the run that held the number before.
    let bucket_time = Now::read(dest)?;
    let newest = all.last().map_or(0, |(n, _)| *n);
    let mut dead = Vec::new();
    for (key, written) in dest.list_aged("backup-pending/")? {
        if !bucket_time.within(written, PENDING_HOLDS) {
            if parse_numbered(&key, "backup-pending/").is_some_and(|n| n < newest) {
                dead.push(key);
            }
            continue;
        }
        if let Some(pin) = read_pin(dest, &key)? {
            named.extend(pin.objects().into_iter().map(|(k, _, _)| k));
        }
        marker.tick();
    }
    for n in backup_numbers(dest)? {
        if let Some(pin) = read_listed(dest, n)? {
            named.extend(pin.objects().into_iter().map(|(k, _, _)| k));
        }
        marker.tick();
    }
    let doomed: Vec<String> = objects.into_iter().filter(|k| !named.contains(k)).collect();
    for chunk in doomed.chunks(PRUNE_DELETES_AT_ONCE) {
        marker.ensure_fresh("deleting objects")?;
        dest.delete_many(chunk.to_vec())?;
        report.objects_deleted += chunk.len();
    }
    dead.extend(
        dest.list_aged("backup-prune/")?
            .into_iter()
            .filter(|(key, written)| {
                *key != prune_marker_key(run) && !bucket_time.within(*written, PRUNE_HOLDS)
            })
            .map(|(key, _)| key),
    );
    dest.delete_many(dead)?;
    Ok(report)
}
