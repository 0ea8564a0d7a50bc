//! `BucketFs`: the engine's `FileSystem` for a store in a bucket. The engine works on a local
//! working copy (the cache directory); this decides what reaches the bucket, and fetches what the
//! working copy lacks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use strata_engine::{
    Durability, Error, FileLock, FileSystem, PositionalFile, RandomAccessFile, Result,
    StorageStats, WritableFile,
};

use crate::client::Requests;
use crate::files::{Class, Location, LoggedFile, LoggedPositional};
use crate::follow::Following;
use crate::log::Log;
use crate::paged::PagedFile;
use crate::record::Entry;
use crate::shared::Shared;

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

    /// A read-only open's lease: its pin's current name, and whether it lapsed (renewals failed
    /// for its whole time). `None` for a writer, a checkpoint, or a reader without one.
    pub fn reader_lease(&self) -> Option<(String, bool)> {
        self.shared
            .reader_lease
            .as_ref()
            .map(|l| (l.name(), l.has_lapsed()))
    }

    /// Deletes the data objects nothing can reach any more and that are older than `min_age`.
    pub fn collect_garbage(&self, min_age: std::time::Duration) -> Result<crate::GcReport> {
        crate::gc::collect(&self.shared, min_age)
    }
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

    fn refresh(&self, dir: &Path, reading: &BTreeSet<String>) -> Result<bool> {
        let s = &self.shared;
        if dir != s.root {
            return Ok(false);
        }
        match &s.follow {
            Following::Log(follow) => {
                // No waiting out an outage here: the replica keeps serving what it has, its lag
                // shows it, and the next round tries again.
                let changed = follow.refresh(s, reading)?;
                // New files are fetched when read; the bound holds as they are.
                s.cache.evict(&s.root)?;
                Ok(changed)
            }
            Following::Refused(why) => Err(Error::InvalidArgument(why.clone())),
            Following::Pinned(name) => Err(Error::InvalidArgument(format!(
                "{} is open at checkpoint {name}, which never changes: a replica follows the \
                 store's newest version",
                s.client.url()
            ))),
            // A writer's working copy is its own.
            Following::Never => Ok(false),
        }
    }

    /// A replica's working copy keeps a dropped file until no read needs it (`refresh`).
    fn shares_deletions_with_readers(&self) -> bool {
        false
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
        let lease = self.reader_lease();
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
            reader_lease: lease.as_ref().map(|(name, _)| name.clone()),
            reader_lease_lapsed: lease.is_some_and(|(_, lapsed)| lapsed),
        })
    }
}
