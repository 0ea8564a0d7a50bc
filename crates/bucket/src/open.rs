//! Opening a bucket store: the conformance check, replaying the log, the working copy made to
//! match it, and the claim that fences every earlier writer.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use strata_engine::{Error, FileLock, FileSystem, Result, StdFileSystem};

use crate::cache::{Cache, Remote};
use crate::client::Client;
use crate::follow::Following;
use crate::fs::BucketFs;
use crate::local_io::io;
use crate::log::{Log, LogView, checkpoint_key, log_key, parse_checkpoint_key, parse_log_key};
use crate::record::{Entry, Record};
use crate::replay::Replayed;
use crate::shared::Shared;
use crate::url::BucketUrl;
use crate::working_copy::{install, temp_beside};
use strata_engine::Durability;

/// Where the store is and how to open it.
#[derive(Debug, Clone)]
pub struct BucketConfig {
    pub url: BucketUrl,
    /// The S3 endpoint (`http://127.0.0.1:8333`); `None` for `AWS_ENDPOINT_URL` or AWS itself.
    pub endpoint: Option<String>,
    /// The access key and secret; `None` for the standard `AWS_*` variables.
    pub credentials: Option<Credentials>,
    /// The local working copy and cache.
    pub cache_dir: PathBuf,
    pub durability: Durability,
    /// Open to read: no claim, no change to the store (only a reader's lease is written).
    pub read_only: bool,
    /// Open checkpoint NAME (read-only) instead of the store's newest version.
    pub checkpoint: Option<String>,
    /// How often a writer collects garbage in the background; `None` for never.
    pub gc_interval: Option<Duration>,
    /// How old an unreachable data object must be before garbage collection deletes it: a
    /// second guard, for readers that opened an older view of the log.
    pub gc_min_age: Duration,
    /// How long a write (or a read that must fetch) waits for a bucket that does not answer
    /// before it fails with `Unavailable`.
    pub patience: Duration,
    /// Bytes of tables and sealed blob files the cache directory may hold; past it, the least
    /// recently opened that no reader holds go (the bucket keeps them). `None` for no bound.
    pub cache_size: Option<u64>,
    /// At `bucket` durability, the least time between two WAL records: synced writes arriving
    /// meanwhile share the next one (fewer PUTs, each write waiting up to this long). Zero
    /// commits each group of writes as it comes.
    pub commit_interval: Duration,
    /// At `local` durability: how long a writer acknowledges synced writes without the bucket
    /// confirming it still owns the store; a new writer waits this long after claiming a store
    /// another writer held. Longer means fewer checks, shorter a faster takeover.
    pub lease: Duration,
    /// A read-only open's lease on the version it reads: how long it holds past its last
    /// renewal (renewed every fifth of it). Garbage collection keeps what the reader may
    /// fetch while it holds; a reader that dies holds it off this long.
    pub reader_lease: Duration,
    /// Faults injected between the store and the bucket (tests); `None` in use.
    pub faults: Option<Arc<crate::FaultPlan>>,
}

impl BucketConfig {
    /// The defaults for everything but where the store and its cache are.
    pub fn new(url: BucketUrl, cache_dir: PathBuf) -> BucketConfig {
        BucketConfig {
            url,
            endpoint: None,
            credentials: None,
            cache_dir,
            durability: Durability::Local,
            read_only: false,
            checkpoint: None,
            gc_interval: Some(Duration::from_secs(600)),
            gc_min_age: Duration::from_secs(3600),
            patience: Duration::from_secs(30),
            cache_size: None,
            commit_interval: Duration::ZERO,
            lease: DEFAULT_LEASE,
            reader_lease: crate::lease::DEFAULT_LEASE_TTL,
            faults: None,
        }
    }
}

/// An access key and its secret.
#[derive(Clone)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret, in logs or panics.
        write!(f, "Credentials({}, <secret>)", self.access_key_id)
    }
}

/// The working copy's own files, never part of the store.
const STATE: &str = "bucket.state";
const LOCK: &str = "bucket.lock";
/// How many times an open that lost a race to claim the store replays and tries again.
const CLAIM_TRIES: usize = 16;

/// A held lock on the cache directory, kept as long as the store is open.
#[derive(Debug)]
pub(crate) struct DirLock(#[allow(dead_code)] Box<dyn FileLock>);

/// A writer's lease unless it sets one.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(5);

/// The lease a claim names: how long after it a successor must wait before it may acknowledge
/// anything. Taking over from another writer, that writer (or one it was still waiting out)
/// may acknowledge `local` syncs for as long as the lease its own claim named (the default when
/// an older binary's claim named none), so the new claim names the longer of that and its own:
/// a successor racing this one, or this one restarted mid-wait, waits as long.
fn claim_lease(config: &BucketConfig, replayed: &Replayed, trusted: bool) -> Duration {
    if trusted || replayed.epoch == 0 {
        return config.lease;
    }
    config.lease.max(takeover_wait(config, replayed))
}

/// How long a takeover waits before it acknowledges anything: the lease of the claim it took
/// the store from (see `claim_lease`), or the default's and its own longer one when that claim
/// named none.
fn takeover_wait(config: &BucketConfig, replayed: &Replayed) -> Duration {
    replayed.lease.unwrap_or(DEFAULT_LEASE.max(config.lease))
}

impl BucketFs {
    /// Opens the store at `config.url`, claiming it for writing unless `read_only`.
    pub fn open(config: &BucketConfig) -> Result<BucketFs> {
        let local = StdFileSystem;
        let root = config.cache_dir.clone();
        local.create_dir_all(&root)?;
        let lock = DirLock(local.lock(&root.join(LOCK)).map_err(|e| {
            Error::Busy(format!(
                "the cache directory {} is in use by another process: {e}",
                root.display()
            ))
        })?);
        let client = Client::connect_with_faults(
            &config.url,
            config.endpoint.as_deref(),
            config.credentials.as_ref(),
            config.faults.clone(),
        )?;
        let writer = writer_id();
        if !config.read_only {
            crate::probe::check(&client, &writer)?;
        }
        if config.reader_lease < Duration::from_secs(1) {
            return Err(Error::InvalidArgument(format!(
                "a reader's lease of {:?} is too short to renew (1 s at least)",
                config.reader_lease
            )));
        }
        if let Some(name) = &config.checkpoint {
            if !config.read_only {
                return Err(Error::ReadOnly(format!(
                    "{}: checkpoint {name:?} opens read-only",
                    config.url
                )));
            }
            if names_a_claim(&root) {
                // Made to match the checkpoint, a writer's working copy would lose what only it
                // holds (WALs synced to `local`) and be distrusted at the writer's next open.
                return Err(Error::InvalidArgument(format!(
                    "{} is a writer's working copy of {}: open checkpoint {name:?} with another \
                     --cache-dir",
                    root.display(),
                    config.url
                )));
            }
            // A lease on the checkpoint's version: a `checkpoint drop` while this reads does
            // not let collection take what it has not fetched yet.
            let taken = crate::lease::ReaderLease::of_checkpoint(
                &client,
                name,
                &writer,
                config.reader_lease,
            );
            let without = format!(
                "dropping checkpoint {name:?} lets garbage collection delete files this reader \
                 has not fetched"
            );
            let lease = lease_unless_forbidden(taken, &config.url, &without)?;
            let replayed = match &lease {
                Some(lease) => lease.pin().replayed(),
                None => crate::checkpoint::read(&client, name)?.replayed(),
            };
            // Made to match the checkpoint, this directory is no writer's working copy any more.
            let placed = write_state(&root, &config.url, &[])
                .and_then(|()| crate::working_copy::reconcile(&client, &root, &replayed, false));
            let placed = match (placed, &lease) {
                (Ok(placed), _) => placed,
                // An open that failed holds nothing: its lease goes now, not when it lapses.
                (Err(e), Some(lease)) => {
                    let _ = lease.release(&client);
                    return Err(e);
                }
                (Err(e), None) => return Err(e),
            };
            let pinned = Reading {
                lease,
                follow: Following::Pinned(name.clone()),
            };
            return Self::assemble(config, root, client, None, placed, lock, pinned);
        }
        let ours = read_state(&root, &config.url);
        if config.read_only {
            // A reader leases the version it replays: garbage collection keeps every object of
            // it until the store closes (or the lease lapses).
            let taken = crate::lease::ReaderLease::take(&client, &writer, config.reader_lease);
            let without = "garbage collection may delete files this reader has not fetched once \
                           they are an hour old";
            let (lease, replayed) = match lease_unless_forbidden(taken, &config.url, without)? {
                Some((lease, replayed)) => (Some(lease), replayed),
                None => (None, replay(&client)?.replayed),
            };
            let valid = ours
                .iter()
                .any(|(e, w)| *e == replayed.epoch && *w == replayed.claimer)
                && replayed.epoch != 0;
            let writers_copy = names_a_claim(&root);
            let placed = crate::working_copy::reconcile(&client, &root, &replayed, valid)?;
            let follow = match writers_copy {
                true => Following::Refused(format!(
                    "{} is a writer's working copy of {}: a replica follows in a cache \
                     directory of its own",
                    root.display(),
                    config.url
                )),
                false => Following::Log(crate::follow::Follow::new(replayed)),
            };
            return Self::assemble(
                config,
                root,
                client,
                None,
                placed,
                lock,
                Reading { lease, follow },
            );
        }
        for _ in 0..CLAIM_TRIES {
            let view = replay(&client)?;
            let replayed = &view.replayed;
            let valid = ours
                .iter()
                .any(|(e, w)| *e == replayed.epoch && *w == replayed.claimer)
                && replayed.epoch != 0;
            let epoch = replayed.max_epoch + 1;
            let seq = replayed.last_seq + 1;
            // Written down before the claim. A directory that was the newest writer's stays
            // trusted through a crash right after the claim (its WAL is its own). One that was
            // not is trusted only once `reconcile` below has made it match the log: until then
            // it names no claim, so an open that dies midway leaves the next one distrusting it.
            let mut claims: Vec<(u64, String)> = Vec::new();
            if valid {
                claims.extend(ours.iter().filter(|(e, _)| *e == replayed.epoch).cloned());
                claims.push((epoch, writer.clone()));
            }
            write_state(&root, &config.url, &claims)?;
            let claim = Record {
                epoch,
                entries: vec![
                    Entry::Claim {
                        writer: writer.clone(),
                    },
                    Entry::Lease {
                        millis: crate::replay::lease_millis(claim_lease(config, replayed, valid)),
                    },
                ],
            };
            let bytes = Bytes::from(claim.encode());
            if !client.put_create_or_own(&log_key(seq), bytes)? {
                continue;
            }
            let placed = crate::working_copy::reconcile(&client, &root, replayed, valid)?;
            if !valid && replayed.epoch != 0 {
                // Another writer held the store and may still be acknowledging `local` syncs
                // until its lease runs out (its own, which its claim names): this one
                // acknowledges nothing before then. Waited out before this directory is named
                // the newest writer's, so a restart during the wait (which trusts such a
                // directory) waits again.
                std::thread::sleep(takeover_wait(config, replayed));
            }
            write_state(&root, &config.url, &[(epoch, writer.clone())])?;
            // Bytes are shared, not copied: the clone costs the map.
            let resync_from = valid.then(|| view.replayed.clone());
            let log = Log::new(epoch, seq, &claim, view, config.lease);
            let fs = Self::assemble(
                config,
                root,
                client,
                Some(log),
                placed,
                lock,
                Reading::default(),
            )?;
            if let Some(replayed) = resync_from {
                fs.shared.resync(&replayed)?;
            }
            if let Some(interval) = config.gc_interval {
                crate::gc::start_background(&fs.shared, interval, config.gc_min_age);
            }
            return Ok(fs);
        }
        Err(Error::Busy(format!(
            "{}: other writers claimed the store {CLAIM_TRIES} times while this one tried",
            config.url
        )))
    }

    fn assemble(
        config: &BucketConfig,
        root: PathBuf,
        client: Client,
        log: Option<Log>,
        placed: BTreeMap<String, (Remote, bool)>,
        lock: DirLock,
        reading: Reading,
    ) -> Result<BucketFs> {
        let fs = BucketFs {
            shared: Arc::new(Shared {
                root,
                local: StdFileSystem,
                client,
                log,
                durability: config.durability,
                wal_logged: Mutex::new(BTreeMap::new()),
                wal_order: Mutex::new(()),
                patience: config.patience,
                commit_interval: config.commit_interval,
                lease: config.lease,
                last_wal_commit: Mutex::new(std::time::Instant::now()),
                cache: Cache::new(placed, config.cache_size),
                moving: Mutex::new(BTreeMap::new()),
                reader_lease: reading.lease,
                follow: reading.follow,
                _lock: lock,
            }),
        };
        // A restart reuses the cache, within its bound (nothing is open yet).
        fs.shared.cache.evict(&fs.shared.root)?;
        if fs.shared.reader_lease.is_some() {
            crate::lease::start_renewing(&fs.shared);
        }
        Ok(fs)
    }
}

/// What a read-only open of the newest version keeps: its lease, and how to follow the log.
struct Reading {
    lease: Option<crate::lease::ReaderLease>,
    follow: Following,
}

impl Default for Reading {
    fn default() -> Reading {
        Reading {
            lease: None,
            follow: Following::Never,
        }
    }
}

/// Who this process is, in its claim: host, process and a clock reading, so that two openers
/// never write the same claim.
fn writer_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{host}-{}-{nanos}", std::process::id())
}

/// The log from its newest checkpoint on. A writer deleting old records and checkpoints while
/// this lists can leave a view with a hole: it is listed again.
pub(crate) fn replay(client: &Client) -> Result<LogView> {
    const TRIES: usize = 3;
    for attempt in 1..=TRIES {
        match replay_once(client) {
            Err(Error::Corruption { .. }) if attempt < TRIES => continue,
            other => return other,
        }
    }
    unreachable_tries()
}

#[cold]
fn unreachable_tries() -> Result<LogView> {
    Err(Error::Io {
        context: "replaying the log".into(),
        source: std::io::Error::other("no tries"),
    })
}

fn replay_once(client: &Client) -> Result<LogView> {
    let checkpoints: Vec<u64> = client
        .list("checkpoint/")?
        .iter()
        .filter_map(|k| parse_checkpoint_key(k))
        .collect();
    let records: Vec<u64> = client
        .list("log/")?
        .iter()
        .filter_map(|k| parse_log_key(k))
        .collect();
    let corrupt = |key: String, detail: String| Error::Corruption {
        file: PathBuf::from(client.object(&key)),
        detail,
    };
    let read = |key: String| -> Result<Record> {
        let bytes = client
            .get(&key)?
            .ok_or_else(|| corrupt(key.clone(), "listed, then gone".into()))?;
        Record::decode(&bytes).map_err(|e| corrupt(key, e.0.into()))
    };
    let mut replayed = Replayed::default();
    let base = checkpoints.last().copied().unwrap_or(0);
    if base > 0 {
        replayed.apply(base, &read(checkpoint_key(base))?);
    }
    let newer: Vec<u64> = records.iter().copied().filter(|&s| s > base).collect();
    for (expected, &seq) in (base + 1..).zip(&newer) {
        if seq != expected {
            return Err(corrupt(
                log_key(expected),
                format!("the store's log has no record {expected} (the next is {seq})"),
            ));
        }
    }
    // Fetched many at a time, applied in order; a batch at a time bounds the memory.
    for batch in newer.chunks(64) {
        let keys: Vec<String> = batch.iter().map(|&seq| log_key(seq)).collect();
        for ((seq, key), bytes) in batch.iter().zip(&keys).zip(client.get_many(&keys)?) {
            let bytes = bytes.ok_or_else(|| corrupt(key.clone(), "listed, then gone".into()))?;
            let record = Record::decode(&bytes).map_err(|e| corrupt(key.clone(), e.0.into()))?;
            replayed.apply(*seq, &record);
        }
    }
    Ok(LogView {
        replayed,
        first_record: records.first().copied().unwrap_or(1),
        checkpoints,
    })
}

/// Whether a refusal is the bucket's permissions (or a server without the feature), not an
/// outage.
/// `taken`, the lease a reader asked for; `None`, said with what it costs (`without`), when
/// the bucket will not let it write one. Only that refusal goes on without a lease: an outage
/// or damage is an error like any other.
fn lease_unless_forbidden<T>(
    taken: Result<T>,
    url: &dyn std::fmt::Display,
    without: &str,
) -> Result<Option<T>> {
    match taken {
        Ok(lease) => Ok(Some(lease)),
        Err(e) if !crate::client::forbidden(&e) => Err(e),
        Err(e) => {
            log::warn!("{url}: no reader's lease ({e}): {without}");
            Ok(None)
        }
    }
}

/// Whether this directory is some writer's working copy, of whatever store.
fn names_a_claim(root: &Path) -> bool {
    std::fs::read_to_string(root.join(STATE))
        .is_ok_and(|t| t.lines().skip(1).any(|l| !l.trim().is_empty()))
}

/// The claims this directory made that may be the newest: `url` then `epoch writer` lines.
fn read_state(root: &Path, url: &BucketUrl) -> Vec<(u64, String)> {
    let Ok(text) = std::fs::read_to_string(root.join(STATE)) else {
        return Vec::new();
    };
    let mut lines = text.lines();
    if lines.next() != Some(url.to_string().as_str()) {
        return Vec::new();
    }
    lines
        .filter_map(|l| {
            let (epoch, writer) = l.split_once(' ')?;
            Some((epoch.parse().ok()?, writer.to_string()))
        })
        .collect()
}

fn write_state(root: &Path, url: &BucketUrl, claims: &[(u64, String)]) -> Result<()> {
    let mut text = format!("{url}\n");
    for (epoch, writer) in claims {
        text.push_str(&format!("{epoch} {writer}\n"));
    }
    let path = root.join(STATE);
    let (tmp, mut file) = temp_beside(&path)?;
    file.write_all(text.as_bytes())
        .map_err(io(format!("writing {}", tmp.display())))?;
    install(&tmp, file, &path)?;
    StdFileSystem.sync_dir(root)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(lease_ms: u64) -> BucketConfig {
        let url = crate::url::BucketUrl::parse("s3://bucket/p").unwrap();
        BucketConfig {
            lease: Duration::from_millis(lease_ms),
            ..BucketConfig::new(url, PathBuf::from("/nonexistent"))
        }
    }

    fn held_by(lease_ms: Option<u64>) -> Replayed {
        Replayed {
            epoch: 3,
            lease: lease_ms.map(Duration::from_millis),
            ..Replayed::default()
        }
    }

    #[test]
    fn a_takeover_claims_and_waits_the_longest_lease_it_may_follow() {
        let short = config(100);
        // From a writer with a 3 s lease: a 100 ms newcomer waits 3 s, and its claim says 3 s
        // so a rival racing it, or itself restarted, waits as long.
        assert_eq!(
            takeover_wait(&short, &held_by(Some(3_000))),
            Duration::from_secs(3)
        );
        assert_eq!(
            claim_lease(&short, &held_by(Some(3_000)), false),
            Duration::from_secs(3)
        );
        // A claim naming no lease (an older binary's): the default, or its own if longer.
        assert_eq!(takeover_wait(&short, &held_by(None)), DEFAULT_LEASE);
        assert_eq!(
            takeover_wait(&config(9_000), &held_by(None)),
            Duration::from_secs(9)
        );
        // Its own directory's writer, or a new store: its own lease.
        assert_eq!(
            claim_lease(&short, &held_by(Some(3_000)), true),
            Duration::from_millis(100)
        );
        let fresh = Replayed::default();
        assert_eq!(
            claim_lease(&short, &fresh, false),
            Duration::from_millis(100)
        );
    }
}
