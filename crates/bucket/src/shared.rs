//! What a bucket store's open files and its `FileSystem` share: the log and its lease, the
//! client, the working copy's cache, and the uploads of files and ranges to the bucket.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use strata_engine::{Durability, Error, FileSystem, Result, StdFileSystem};

use crate::cache::{Cache, Remote};
use crate::client::Client;
use crate::files::{Class, Location};
use crate::log::{INLINE_LIMIT, Log};
use crate::record::Entry;

/// Appended bytes go up in objects of at most this many, so memory stays bounded.
pub(crate) const PIECE: u64 = 8 << 20;

/// What the open files and the `FileSystem` share.
#[derive(Debug)]
pub struct Shared {
    pub(crate) root: PathBuf,
    pub(crate) local: StdFileSystem,
    pub(crate) client: Client,
    /// `None` when opened read-only.
    pub(crate) log: Option<Log>,
    /// How far a sync goes when the engine does not say (`WriteOptions::durability`).
    pub(crate) durability: Durability,
    /// How much of each open WAL the log has (or has queued): a WAL reopened after a failed
    /// sync resumes logging from there, never past what the bucket holds.
    pub(crate) wal_logged: Mutex<BTreeMap<String, u64>>,
    /// Held while WAL bytes are read and logged (`LoggedFile::ship_wal`), and while a WAL is
    /// removed: a flush deleting an old WAL waits for the record carrying its last bytes, so
    /// the file never vanishes mid-read and its removal is never logged before those bytes.
    pub(crate) wal_order: Mutex<()>,
    /// How long a call waits for a bucket that does not answer before it fails.
    pub(crate) patience: Duration,
    /// The least time between two WAL records at `bucket` durability.
    pub(crate) commit_interval: Duration,
    /// How long a writer acknowledges local syncs without the bucket confirming it is the
    /// newest (`hold_lease`).
    pub(crate) lease: Duration,
    pub(crate) last_wal_commit: Mutex<Instant>,
    /// Which placed files the working copy holds, and its size bound.
    pub(crate) cache: Cache,
    /// The value files open now, by name, so a rename moves them.
    pub(crate) moving: Mutex<BTreeMap<String, Location>>,
    /// A read-only open's lease on the version it replayed (`None` for a writer, a checkpoint,
    /// or a reader the bucket would not let write one).
    pub(crate) reader_lease: Option<crate::lease::ReaderLease>,
    /// Whether and how the working copy follows the log (a read-only open of the newest
    /// version does).
    pub(crate) follow: crate::follow::Following,
    /// The cache directory is this process's while the store is open.
    pub(crate) _lock: crate::open::DirLock,
}

impl Shared {
    pub(crate) fn log(&self) -> Result<&Log> {
        self.log.as_ref().ok_or_else(|| {
            Error::ReadOnly(format!(
                "{} (a bucket store opened to read)",
                self.client.url()
            ))
        })
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.log()?.check()
    }

    /// Queues `entries` and returns once the bucket holds a record with them, then writes the
    /// log checkpoint that may have fallen due.
    pub(crate) fn commit(&self, entries: Vec<Entry>) -> Result<()> {
        self.commit_leaving_checkpoint(entries)?;
        self.write_due_checkpoint();
        Ok(())
    }

    /// [`Shared::commit`] for a caller holding a lock others wait on (the WAL order): the
    /// checkpoint that may fall due waits for [`Shared::write_due_checkpoint`] once it lets go.
    pub(crate) fn commit_leaving_checkpoint(&self, entries: Vec<Entry>) -> Result<()> {
        let log = self.log()?;
        // One ticket across the tries: after a failure the entries wait in the log's queue (or
        // its record in doubt), and a try succeeds once a record holds them.
        let ticket = log.enqueue(entries);
        self.patiently("writing the store's log", || {
            log.commit(&self.client, ticket)
        })
        .map_err(|e| match e {
            // A caller told only "failed" could take a write it retries for one that cannot
            // reappear.
            Error::Unavailable(why) => Error::Unavailable(format!(
                "{why}; what it was writing stays queued for the next record, and a record \
                 whose answer was lost may already hold it: those writes may still appear"
            )),
            other => other,
        })
    }

    pub(crate) fn write_due_checkpoint(&self) {
        if let Some(log) = &self.log {
            log.write_due_checkpoint(&self.client);
        }
    }

    /// Before a WAL sync at `local` durability acknowledges writes: the bucket must have shown
    /// this writer the newest within the last half lease, else it is asked now (one HEAD). A
    /// newer writer's claim fences this one; a bucket that cannot be asked is tolerated until
    /// the lease runs out, then the sync fails `Unavailable`. A new writer waits out a lease
    /// after its claim before it acknowledges anything, so two writers never both do.
    pub(crate) fn hold_lease(&self) -> Result<()> {
        let log = self.log()?;
        log.check()?;
        if log.since_confirmed() < self.lease / 2 {
            return Ok(());
        }
        match log.confirm(&self.client) {
            Err(Error::Io { context, source }) => {
                if log.since_confirmed() < self.lease {
                    return Ok(());
                }
                Err(Error::Unavailable(format!(
                    "{context}: {source} (the bucket has not confirmed this writer still owns \
                     the store for {:?}, its lease)",
                    self.lease
                )))
            }
            other => other,
        }
    }

    /// Before a WAL append (an unsynced write's too): a writer a newer one fenced stops taking
    /// writes. Past half a lease without the bucket showing it the newest, it asks (at most once
    /// a quarter lease, and not again for the patience once the bucket did not answer). A bucket
    /// that does not answer stops nothing here: an unsynced write promises nothing and a sync
    /// still holds the lease, so an outage fails writes only after the patience, as before.
    pub(crate) fn check_before_append(&self) -> Result<()> {
        let log = self.log()?;
        log.check()?;
        if log.since_confirmed() < self.lease / 2 || !log.may_ask(self.lease / 4) {
            return Ok(());
        }
        match log.confirm(&self.client) {
            Err(Error::Fenced(why)) => Err(Error::Fenced(why)),
            Err(_) => {
                log.asking_failed(self.patience);
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// The older WALs (named before `name`) still in the store whose bytes the log lacks: each
    /// with the range it lacks. They are sealed and closed, so their length is final.
    pub(crate) fn older_wal_tails(&self, name: &str) -> Result<Vec<(String, u64, u64)>> {
        let known: Vec<(String, u64)> = self
            .wal_logged
            .lock()
            .range(..name.to_string())
            .map(|(n, &l)| (n.clone(), l))
            .collect();
        let mut tails = Vec::new();
        for (older, logged) in known {
            let path = self.root.join(&older);
            let len = match std::fs::metadata(&path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(Error::Io {
                        context: format!("reading {}", path.display()),
                        source: e,
                    });
                }
            };
            if len > logged {
                tails.push((older, logged, len));
            }
        }
        Ok(tails)
    }

    /// When the next WAL record may go (`commit_interval` after the last); `None` without an
    /// interval.
    pub(crate) fn next_wal_commit_at(&self) -> Option<Instant> {
        (!self.commit_interval.is_zero())
            .then(|| *self.last_wal_commit.lock() + self.commit_interval)
    }

    /// Holds a WAL commit back until `commit_interval` has passed since the last one: the
    /// engine's writers queue meanwhile, and the next group takes them all, one PUT for many
    /// synced writes.
    pub(crate) fn wait_for_wal_commit(&self) {
        if self.commit_interval.is_zero() {
            return;
        }
        let mut last = self.last_wal_commit.lock();
        let due = *last + self.commit_interval;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        *last = Instant::now();
    }

    /// At a trusted open (this directory's writer was the newest), makes the log match the
    /// working copy: what the last run changed locally and queued, but died before logging
    /// (a table placed, a MANIFEST appended to, a file removed), is logged now, before the
    /// engine builds on it.
    pub(crate) fn resync(&self, replayed: &crate::replay::Replayed) -> Result<()> {
        let mut local = Vec::new();
        for name in self.local.list(&self.root)? {
            let path = self.root.join(&name);
            let Some(logged) = self.logged_name(&path) else {
                continue;
            };
            if name.ends_with(".tmp") || !path.is_file() {
                continue;
            }
            let len = std::fs::metadata(&path)
                .map_err(|e| Error::Io {
                    context: format!("reading {}", path.display()),
                    source: e,
                })?
                .len();
            if Class::of(&logged) == Class::Wal {
                // Its bucket copy is a prefix of this one (`LoggedFile::ship_wal`); the rest was
                // synced only locally. The engine replays it from here; the next `Remote` sync
                // sends the rest first (`older_wal_tails`), and a copy already begun is
                // completed now, so it cannot lack its end while a newer WAL follows it.
                let begun = replayed.files.get(&logged).map_or(0, |r| r.len());
                let logged_len = if begun > 0 && begun < len {
                    let placed = self.place(&logged, &path, len)?;
                    self.log()?.defer(placed);
                    len
                } else {
                    if begun > len {
                        // This copy lost bytes the bucket's holds (it was cut here since): the
                        // bucket's is cut to match, as the engine goes on from this one.
                        self.log()?.defer(Entry::Truncate {
                            name: logged.clone(),
                            len,
                        });
                    }
                    begun.min(len)
                };
                self.wal_logged.lock().insert(logged.clone(), logged_len);
                local.push(logged);
                continue;
            }
            if replayed.files.get(&logged).is_none_or(|r| r.len() != len) {
                let placed = self.place(&logged, &path, len)?;
                self.log()?.defer(placed);
            }
            local.push(logged);
        }
        for (name, recipe) in &replayed.files {
            let built_here = matches!(recipe, crate::replay::FileRecipe::Steps(_));
            if built_here && !local.contains(name) && !name.ends_with(".tmp") {
                self.log()?.defer(Entry::Remove { name: name.clone() });
            }
        }
        self.commit(Vec::new())
    }

    /// Runs `call` until it succeeds, fails for a reason other than the bucket not answering, or
    /// the bucket has not answered for `patience`: then `Unavailable`. Writes wait meanwhile,
    /// which is the back-pressure an outage puts on them.
    pub(crate) fn patiently<T>(
        &self,
        what: &str,
        mut call: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + self.patience;
        let mut pause = Duration::from_millis(100);
        loop {
            match call() {
                // The bucket not answering (not the local disk, not a refusal): wait it out.
                Err(Error::Io { context, source })
                    if context.starts_with("bucket ")
                        && source.kind() == std::io::ErrorKind::Other =>
                {
                    if Instant::now() + pause > deadline {
                        return Err(Error::Unavailable(format!(
                            "{what}: {context}: {source} (the bucket has not answered for {:?}; \
                             writes resume by themselves once it does)",
                            self.patience
                        )));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }

    /// PUTs `bytes` as the data object `key`, create-only, and checks what the bucket holds.
    fn upload(&self, key: &str, bytes: Bytes) -> Result<()> {
        let len = bytes.len() as u64;
        // Only this writer makes names under its epoch: an object already there is an earlier
        // try of this PUT whose answer was lost, and its length says whether it is whole.
        let found = self.patiently("uploading", || {
            self.client.put_create(key, bytes.clone())?;
            self.client.head(key)
        })?;
        check_uploaded(&self.client, key, found, len)
    }

    /// Uploads a file of any size as the data object `key` (its first `len` bytes), a piece in
    /// memory at a time, and checks what the bucket holds; returns the CRC32C of what was sent.
    /// Up to a piece it is one create-only PUT; past that, a multipart upload in pieces.
    fn upload_file(&self, key: &str, path: &Path, len: u64) -> Result<u32> {
        if len <= PIECE {
            let bytes = read_range(path, 0, len)?;
            let crc = crc32c::crc32c(&bytes);
            self.upload(key, Bytes::from(bytes))?;
            return Ok(crc);
        }
        let file = File::open(path).map_err(|e| Error::Io {
            context: format!("opening {} to upload it", path.display()),
            source: e,
        })?;
        let mut crc = 0;
        let found = self.patiently("uploading", || {
            let mut at = 0u64;
            crc = 0;
            self.client.put_multipart(key, || {
                if at == len {
                    return Ok(None);
                }
                let n = PIECE.min(len - at);
                let piece = read_range_of(&file, path, at, n)?;
                crc = crc32c::crc32c_append(crc, &piece);
                at += n;
                Ok(Some(Bytes::from(piece)))
            })?;
            self.client.head(key)
        })?;
        check_uploaded(&self.client, key, found, len)?;
        Ok(crc)
    }

    /// Uploads the file whole (its first `len` bytes) and returns the entry that places it.
    pub(crate) fn place(&self, name: &str, path: &Path, len: u64) -> Result<Entry> {
        let log = self.log()?;
        log.check()?;
        let key = log.data_key(name);
        let crc = self.upload_file(&key, path, len)?;
        let remote = Remote {
            key: key.clone(),
            len,
            crc,
        };
        self.cache.placed(name, remote);
        self.cache.evict(&self.root)?;
        Ok(Entry::Placed {
            name: name.to_string(),
            len,
            crc,
            object: key,
        })
    }

    /// The entries that carry the file's bytes in `ranges`: inline when small, else uploaded in
    /// objects of at most `PIECE` bytes.
    pub(crate) fn ranges_as_entries(
        &self,
        name: &str,
        path: &Path,
        ranges: &[(u64, u64)],
    ) -> Result<Vec<Entry>> {
        let log = self.log()?;
        let mut entries = Vec::new();
        for &(start, end) in ranges {
            if end <= start {
                continue;
            }
            if end - start <= INLINE_LIMIT as u64 {
                entries.push(Entry::Append {
                    name: name.to_string(),
                    offset: start,
                    bytes: Bytes::from(read_range(path, start, end - start)?),
                });
                continue;
            }
            let mut at = start;
            while at < end {
                let n = PIECE.min(end - at);
                let bytes = read_range(path, at, n)?;
                let crc = crc32c::crc32c(&bytes);
                let key = log.data_key(&format!("{name}.{at}"));
                self.upload(&key, Bytes::from(bytes))?;
                entries.push(Entry::AppendObject {
                    name: name.to_string(),
                    offset: at,
                    len: n,
                    crc,
                    object: key,
                });
                at += n;
            }
        }
        Ok(entries)
    }

    /// The name of `path` when it is a file of the store (directly in the working copy).
    pub(crate) fn store_name(&self, path: &Path) -> Option<String> {
        (path.parent()? == self.root)
            .then(|| path.file_name()?.to_str().map(str::to_string))
            .flatten()
    }

    /// The logged name of `path`, if changes to it reach the bucket.
    pub(crate) fn logged_name(&self, path: &Path) -> Option<String> {
        let name = self.store_name(path)?;
        match Class::of(&name) {
            Class::Local => None,
            _ => Some(name),
        }
    }

    /// Fetches `path` into the working copy if the bucket holds it and the copy does not.
    /// The pin returned keeps it in the cache while the caller uses it.
    pub(crate) fn ensure_local(&self, path: &Path) -> Result<crate::cache::Pin<'_>> {
        let name = self.store_name(path);
        let pin = self.cache.pin(name.as_deref());
        let Some(name) = name else {
            return Ok(pin);
        };
        if !self.cache.is_missing(&name) {
            if matches!(Class::of(&name), Class::Table | Class::Blob) {
                self.cache.hits.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(pin);
        }
        self.cache.misses.fetch_add(1, Ordering::Relaxed);
        let fetched = self.cache.fetch_once(&name, |remote| {
            self.patiently("fetching a file", || {
                crate::working_copy::fetch_placed(&self.client, &remote, path)
            })
        })?;
        if fetched {
            self.cache.evict(&self.root)?;
        }
        Ok(pin)
    }

    /// Creates the logged file `name` locally with `create`, and queues the entry that makes it
    /// empty in the log too (replacing whatever the bucket held under that name).
    pub(crate) fn created<T>(&self, name: &str, create: impl FnOnce() -> Result<T>) -> Result<T> {
        self.check_writable()?;
        let file = create()?;
        self.cache.forget(name);
        self.log()?.defer(Entry::Truncate {
            name: name.to_string(),
            len: 0,
        });
        Ok(file)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.reader_lease.as_ref().map(|l| l.release(&self.client)) {
            log::warn!(
                "{}: the reader's lease stays until it lapses: {e}",
                self.client.url()
            );
        }
        // What the engine queued last (removals at close) goes up with the last record; a
        // failure only leaves files the next open finds unreferenced.
        if let Some(log) = &self.log {
            match log.commit(&self.client, log.enqueue([])) {
                // A checkpoint that fell due (with this record, or after a commit that failed)
                // bounds what the next open replays.
                Ok(()) => log.write_due_checkpoint(&self.client),
                Err(e) => log::warn!(
                    "{}: the last record was not written: {e}",
                    self.client.url()
                ),
            }
        }
    }
}

/// An upload is whole only when the bucket holds as many bytes as were sent.
fn check_uploaded(client: &Client, key: &str, found: Option<u64>, len: u64) -> Result<()> {
    match found {
        Some(n) if n == len => Ok(()),
        found => Err(Error::Io {
            context: format!("bucket {}: checking {key} after its upload", client.url()),
            source: std::io::Error::other(format!(
                "the bucket holds {found:?} bytes, {len} were sent"
            )),
        }),
    }
}

pub(crate) fn read_range(path: &Path, offset: u64, len: u64) -> Result<Vec<u8>> {
    let file = File::open(path).map_err(|e| Error::Io {
        context: format!("reading {} to upload it", path.display()),
        source: e,
    })?;
    read_range_of(&file, path, offset, len)
}

fn read_range_of(file: &File, path: &Path, offset: u64, len: u64) -> Result<Vec<u8>> {
    let io = |e| Error::Io {
        context: format!("reading {} to upload it", path.display()),
        source: e,
    };
    let n = usize::try_from(len)
        .map_err(|_| io(std::io::Error::other("a range past the address space")))?;
    let mut buf = vec![0u8; n];
    file.read_exact_at(&mut buf, offset).map_err(io)?;
    Ok(buf)
}
