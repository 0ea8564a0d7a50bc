//! `BucketFs`: the engine's `FileSystem` for a store in a bucket. The engine works on a local
//! working copy (the cache directory); this decides what reaches the bucket, and fetches what the
//! working copy lacks.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use strata_engine::{
    Durability, Error, FileLock, FileSystem, PositionalFile, RandomAccessFile, Result,
    StdFileSystem, StorageStats, WritableFile,
};

use crate::cache::{Cache, Remote};
use crate::client::{Client, Requests};
use crate::files::{Class, Location, LoggedFile, LoggedPositional};
use crate::log::{INLINE_LIMIT, Log};
use crate::paged::PagedFile;
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

    pub(crate) fn commit(&self, entries: Vec<Entry>) -> Result<()> {
        let log = self.log()?;
        // After a failed try the entries wait in the log's queue (or its record in doubt).
        let mut entries = Some(entries);
        self.patiently("writing the store's log", || {
            log.commit(&self.client, entries.take().unwrap_or_default())
        })
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
    fn store_name(&self, path: &Path) -> Option<String> {
        (path.parent()? == self.root)
            .then(|| path.file_name()?.to_str().map(str::to_string))
            .flatten()
    }

    /// The logged name of `path`, if changes to it reach the bucket.
    fn logged_name(&self, path: &Path) -> Option<String> {
        let name = self.store_name(path)?;
        match Class::of(&name) {
            Class::Local => None,
            _ => Some(name),
        }
    }

    /// Fetches `path` into the working copy if the bucket holds it and the copy does not.
    /// The pin returned keeps it in the cache while the caller uses it.
    fn ensure_local(&self, path: &Path) -> Result<crate::cache::Pin<'_>> {
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
                crate::open::fetch_placed(&self.client, &remote, path)
            })
        })?;
        if fetched {
            self.cache.evict(&self.root)?;
        }
        Ok(pin)
    }

    /// Creates the logged file `name` locally with `create`, and queues the entry that makes it
    /// empty in the log too (replacing whatever the bucket held under that name).
    fn created<T>(&self, name: &str, create: impl FnOnce() -> Result<T>) -> Result<T> {
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
        // What the engine queued last (removals at close) goes up with the last record; a
        // failure only leaves files the next open finds unreferenced.
        if let Some(Err(e)) = self
            .log
            .as_ref()
            .map(|l| l.commit(&self.client, Vec::new()))
        {
            log::warn!(
                "{}: the last record was not written: {e}",
                self.client.url()
            );
        }
    }
}

/// A store's files in a bucket, worked on in a local cache directory.
#[derive(Debug, Clone)]
pub struct BucketFs {
    pub(crate) shared: Arc<Shared>,
}

impl BucketFs {
    /// The working copy's directory: the path the engine opens.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// This writer's epoch (0 when opened read-only).
    pub fn epoch(&self) -> u64 {
        self.shared.log.as_ref().map_or(0, Log::epoch)
    }

    /// Records this writer added to the log.
    pub fn records_written(&self) -> u64 {
        self.shared.log.as_ref().map_or(0, Log::records_written)
    }

    /// Requests made and bytes moved since the open.
    pub fn requests(&self) -> Requests {
        self.shared.client.requests()
    }

    pub fn durability(&self) -> Durability {
        self.shared.durability
    }

    /// Deletes the data objects nothing can reach any more and that are older than `min_age`.
    pub fn collect_garbage(&self, min_age: std::time::Duration) -> Result<crate::GcReport> {
        crate::gc::collect(&self.shared, min_age)
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

impl FileSystem for BucketFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let s = &self.shared;
        let Some(name) = s.logged_name(path) else {
            return s.local.create(path);
        };
        let inner = s.created(&name, || s.local.create(path))?;
        Ok(Box::new(LoggedFile::new(
            s.clone(),
            name,
            path,
            inner,
            0,
            0,
        )))
    }

    fn create_positional(&self, path: &Path) -> Result<Box<dyn PositionalFile>> {
        let s = &self.shared;
        let Some(name) = s.logged_name(path) else {
            return s.local.create_positional(path);
        };
        let inner = s.created(&name, || s.local.create_positional(path))?;
        let at: Location = Arc::new(Mutex::new((name.clone(), path.to_path_buf())));
        s.moving.lock().insert(name, at.clone());
        Ok(Box::new(LoggedPositional {
            shared: s.clone(),
            at,
            inner,
            dirty: Mutex::new(BTreeMap::new()),
        }))
    }

    fn reopen(&self, path: &Path, len: u64) -> Result<Box<dyn WritableFile>> {
        let s = &self.shared;
        let Some(name) = s.logged_name(path) else {
            return s.local.reopen(path, len);
        };
        s.check_writable()?;
        let _pin = s.ensure_local(path)?;
        let inner = s.local.reopen(path, len)?;
        s.cache.forget(&name);
        let class = Class::of(&name);
        // A WAL's bucket copy may end before `len` (its last syncs were `Local`, or the one that
        // failed never reached the log): the log is cut to what it holds, and the next `Remote`
        // sync sends the rest, so no gap is ever logged.
        let logged = match class {
            Class::Wal => s
                .wal_logged
                .lock()
                .get(&name)
                .copied()
                .unwrap_or(0)
                .min(len),
            _ => len,
        };
        s.log()?.defer(Entry::Truncate {
            name: name.clone(),
            len: logged,
        });
        Ok(Box::new(LoggedFile::new(
            s.clone(),
            name,
            path,
            inner,
            len,
            logged,
        )))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let s = &self.shared;
        let name = s.store_name(path);
        // One the cache lacks is read a page at a time as the reads come, not fetched whole.
        if let Some(name) = &name
            && let Some(remote) = s.cache.missing(name)
        {
            s.cache.misses.fetch_add(1, Ordering::Relaxed);
            let paged = s
                .cache
                .paged(name, || PagedFile::open(s.clone(), name, path, remote))?;
            let file: Arc<dyn RandomAccessFile> = paged;
            s.cache.opened(name, &file);
            return Ok(file);
        }
        let _pin = s.ensure_local(path)?;
        let file = s.local.open_random(path)?;
        if let Some(name) = &name {
            s.cache.opened(name, &file);
        }
        Ok(file)
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let _pin = self.shared.ensure_local(path)?;
        self.shared.local.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let s = &self.shared;
        let (old, new) = match (s.logged_name(from), s.logged_name(to)) {
            (Some(old), Some(new)) => (old, new),
            (Some(old), None) => {
                // Out of the store (into `lost/`, by an open or a repair): gone, as far as the
                // bucket's log is concerned; the cache directory keeps it.
                s.check_writable()?;
                let _pin = s.ensure_local(from)?;
                s.local.rename(from, to)?;
                s.cache.forget(&old);
                s.log()?.defer(Entry::Remove { name: old });
                return Ok(());
            }
            _ => return s.local.rename(from, to),
        };
        s.check_writable()?;
        let _pin = s.ensure_local(from)?;
        s.local.rename(from, to)?;
        s.cache.renamed(&old, &new);
        let mut moving = s.moving.lock();
        if let Some(at) = moving.remove(&old) {
            *at.lock() = (new.clone(), to.to_path_buf());
            moving.insert(new.clone(), at);
        }
        drop(moving);
        let switches_manifest = Class::of(&new) == Class::Meta;
        let entry = Entry::Rename { from: old, to: new };
        if switches_manifest {
            // `CURRENT` names the MANIFEST: the switch is a record of its own, at once.
            s.commit(vec![entry])
        } else {
            s.log()?.defer(entry);
            Ok(())
        }
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let s = &self.shared;
        let Some(name) = s.logged_name(path) else {
            return s.local.remove(path);
        };
        s.check_writable()?;
        let _order = (Class::of(&name) == Class::Wal).then(|| s.wal_order.lock());
        let was_remote = s.cache.forget(&name);
        match s.local.remove(path) {
            // Never fetched: the bucket's copy was all there was.
            Err(Error::Io { source, .. })
                if was_remote && source.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
        s.wal_logged.lock().remove(&name);
        s.log()?.defer(Entry::Remove { name });
        Ok(())
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let s = &self.shared;
        let Some(name) = s.logged_name(path) else {
            return s.local.truncate(path, len);
        };
        s.check_writable()?;
        let _pin = s.ensure_local(path)?;
        s.local.truncate(path, len)?;
        s.cache.forget(&name);
        // A WAL's copy is never cut past what the log holds of it (a cut is never a gap).
        let len = match Class::of(&name) {
            Class::Wal => {
                let mut logged = s.wal_logged.lock();
                let cut = logged.get(&name).copied().unwrap_or(0).min(len);
                logged.insert(name.clone(), cut);
                cut
            }
            _ => len,
        };
        s.log()?.defer(Entry::Truncate { name, len });
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = self.shared.local.list(dir)?;
        if dir == self.shared.root {
            for name in self.shared.cache.missing_names() {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.shared.local.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.shared.local.sync_dir(dir)?;
        // The engine syncs the directory to make its creations, renames and removals durable:
        // the queued entries that record them go to the bucket now too.
        if self.shared.log.is_some() && dir == self.shared.root {
            self.shared.commit(Vec::new())
        } else {
            Ok(())
        }
    }

    fn exists(&self, path: &Path) -> bool {
        self.shared.local.exists(path)
            || self
                .shared
                .store_name(path)
                .is_some_and(|n| self.shared.cache.is_missing(&n))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.shared.local.lock(path)
    }

    fn share_with_group(&self, dir: &Path, files: &[String]) -> Result<()> {
        self.shared.local.share_with_group(dir, files)
    }

    fn loose_modes(&self, dir: &Path) -> Vec<String> {
        self.shared.local.loose_modes(dir)
    }

    /// A WAL append may ask the bucket whether this writer was fenced (`check_before_append`).
    fn appends_are_local(&self, _dir: &Path) -> bool {
        false
    }

    fn storage_stats(&self) -> Option<StorageStats> {
        let s = &self.shared;
        let r = s.client.requests();
        let cache_bytes = std::fs::read_dir(&s.root).map_or(0, |entries| {
            entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| Class::of(n) != Class::Local)
                })
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        });
        Some(StorageStats {
            location: s.client.url().to_string(),
            durability: match s.durability {
                Durability::Local => "local",
                Durability::Remote => "bucket",
            }
            .to_string(),
            writer_epoch: self.epoch(),
            log_records: self.records_written(),
            gets: r.gets,
            puts: r.puts,
            deletes: r.deletes,
            lists: r.lists,
            bytes_up: r.bytes_up,
            bytes_down: r.bytes_down,
            cache_hits: s.cache.hits.load(Ordering::Relaxed),
            cache_misses: s.cache.misses.load(Ordering::Relaxed),
            cache_bytes,
            upload_queue: s.log.as_ref().map_or(0, Log::queued),
        })
    }
}
