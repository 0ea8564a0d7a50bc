//! The database: ties the write path (WAL, memtables), the read path (memtables, then tables level by
//! level) and background flushes together. See doc/architecture.md.

mod background;
mod compact;
mod flush;
mod open;
mod properties;
mod snapshot;
mod write;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex, RwLock};

pub use properties::{LevelProperties, Properties};
pub use snapshot::Snapshot;

use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::filter::key_hash;
use crate::fs::{FileLock, FileSystem};
use crate::iter::{DbIterator, InternalIterator, LevelIter, MergingIterator};
use crate::key::{self, SequenceNumber};
use crate::memtable::{Lookup, MemTable};
use crate::options::{MAX_KEY_SIZE, Options, ReadOptions, WriteOptions};
use crate::sst::{BlockReadOptions, TableCache};
use crate::stats::{Statistics, Stats};
use crate::value::PinnableValue;
use crate::version::{FileMetaData, NUM_LEVELS, Version, VersionSet};
use background::Scheduler;
use compact::{CompactionState, LevelStats};
use snapshot::SnapshotList;
use write::{Pressure, WalState, WriteQueue};

/// What a read sees: the memtables and the table version, captured together.
#[derive(Debug)]
pub(crate) struct SuperVersion {
    pub(crate) mem: Arc<MemTable>,
    /// Newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
    /// Whether writes should slow down or stop for this version's compaction debt.
    pub(crate) pressure: Pressure,
}

/// Memtables and the conditions writers and flushes wait on.
#[derive(Debug)]
pub(crate) struct State {
    mem: Arc<MemTable>,
    /// Oldest first.
    imm: VecDeque<Arc<MemTable>>,
    /// WAL files that may hold unflushed data, oldest first.
    live_wals: Vec<u64>,
    bg_error: Option<Error>,
    flush_running: bool,
}

pub(crate) struct DbInner {
    dir: PathBuf,
    opts: Options,
    fs: Arc<dyn FileSystem>,
    stats: Arc<Stats>,
    tables: Arc<TableCache>,
    block_cache: Option<Arc<BlockCache>>,
    versions: Mutex<VersionSet>,
    state: Mutex<State>,
    /// Signalled when a flush finishes or fails.
    state_cv: Condvar,
    view: RwLock<Arc<SuperVersion>>,
    /// The newest sequence number visible to reads.
    last_sequence: AtomicU64,
    snapshots: Arc<SnapshotList>,
    queue: Mutex<WriteQueue>,
    queue_cv: Condvar,
    /// Held by the write group's leader (and by anything that switches memtables).
    wal: Mutex<WalState>,
    scheduler: Scheduler,
    compaction: Mutex<CompactionState>,
    /// Signalled when a compaction finishes.
    compaction_cv: Condvar,
    /// Tables removed from the current version, deleted once no older version holds them.
    obsolete: Mutex<Vec<Arc<FileMetaData>>>,
    level_stats: [LevelStats; NUM_LEVELS],
    closed: AtomicBool,
    lock: Mutex<Option<Box<dyn FileLock>>>,
}

impl std::fmt::Debug for DbInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.dir).finish()
    }
}

/// An open store. `Send + Sync`: share it between threads with an `Arc`. Dropping it closes it.
#[derive(Debug)]
pub struct Db {
    inner: Arc<DbInner>,
}

impl Db {
    /// Opens (or with `create_if_missing`, creates) the store in `path`, replaying its WAL.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = open::open(path.as_ref(), opts)?;
        Ok(Db { inner })
    }

    /// The directory the store lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Sets `key` to `value` (not synced; see [`Db::put_with`]).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_with(&WriteOptions::default(), key, value)
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_with(
        &self,
        opts: &WriteOptions,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b, opts)
    }

    /// Deletes `key` (not synced; see [`Db::delete_with`]).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_with(&WriteOptions::default(), key)
    }

    /// Deletes `key` with explicit write options.
    pub fn delete_with(&self, opts: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b, opts)
    }

    /// Applies a batch atomically. With `sync` the write survives power loss once this returns.
    pub fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        self.inner.check_open()?;
        if let Some(why) = batch.validation_error() {
            return Err(Error::InvalidArgument(why.to_string()));
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.inner.write(batch, opts)
    }

    /// The latest value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<PinnableValue>> {
        self.get_with(&ReadOptions::default(), key)
    }

    /// The value of `key` as of `opts.snapshot` (or the latest).
    pub fn get_with(
        &self,
        opts: &ReadOptions,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<PinnableValue>> {
        self.inner.check_open()?;
        self.inner.get(opts, key.as_ref())
    }

    /// A snapshot of the store as it is now.
    pub fn snapshot(&self) -> Snapshot {
        self.inner
            .snapshots
            .acquire(self.inner.last_sequence.load(Ordering::Acquire))
    }

    /// An iterator over a consistent view: `opts.snapshot`, or an implicit snapshot taken now.
    /// Bounds in `opts` limit it to `[lower_bound, upper_bound)`.
    pub fn iter(&self, opts: &ReadOptions) -> Result<DbIterator> {
        self.inner.check_open()?;
        self.inner.iter(opts)
    }

    /// Flushes the memtable to a table and waits for it (and every older memtable) to be written.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.flush()
    }

    /// Compacts the tables holding keys in `[start, end]` (`None`: open-ended) down to the deepest
    /// level with data, dropping overwritten versions and deletions no snapshot needs.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.check_open()?;
        self.inner.compact_range(start, end)
    }

    /// Runs pending background work (flushes, then compactions) now. With [`crate::Executor::Inline`]
    /// (WASI) the embedder calls
    /// this between requests; returns true when it did something.
    pub fn maintenance(&self) -> Result<bool> {
        self.inner.check_open()?;
        self.inner.maintenance()
    }

    /// The store's shape now: memtables, files and bytes per level, sequence numbers, WAL, cache.
    pub fn properties(&self) -> Properties {
        self.inner.properties()
    }

    /// Counters since open.
    pub fn statistics(&self) -> Statistics {
        self.inner.stats.snapshot()
    }

    /// Waits for background work, syncs the WAL and releases the directory lock. Further calls
    /// return [`Error::Closed`]. Dropping the `Db` does the same.
    pub fn close(&self) -> Result<()> {
        self.inner.close()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.inner.close();
    }
}

impl DbInner {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    fn current_view(&self) -> Arc<SuperVersion> {
        self.view.read().clone()
    }

    /// Publishes a new read view; the caller holds the state lock so views are installed in order.
    fn install_view(&self, st: &State) {
        let version = self.versions.lock().current();
        let view = SuperVersion {
            mem: st.mem.clone(),
            imm: st.imm.iter().rev().cloned().collect(),
            pressure: Pressure::of(&version, &self.opts),
            version,
        };
        *self.view.write() = Arc::new(view);
    }

    fn read_sequence(&self, opts: &ReadOptions) -> SequenceNumber {
        match &opts.snapshot {
            Some(s) => s.sequence(),
            None => self.last_sequence.load(Ordering::Acquire),
        }
    }

    fn get(&self, opts: &ReadOptions, user_key: &[u8]) -> Result<Option<PinnableValue>> {
        if user_key.len() > MAX_KEY_SIZE {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes exceeds the limit of {MAX_KEY_SIZE}",
                user_key.len()
            )));
        }
        self.stats.gets.inc();
        let seq = self.read_sequence(opts);
        let view = self.current_view();
        let hash = key_hash(user_key);
        let found = 'search: {
            for mem in std::iter::once(&view.mem).chain(view.imm.iter()) {
                match mem.may_contain(hash) {
                    Some(false) => {
                        self.stats.memtable_bloom_checked.inc();
                        self.stats.memtable_bloom_useful.inc();
                        continue;
                    }
                    Some(true) => self.stats.memtable_bloom_checked.inc(),
                    None => {}
                }
                match mem.get(user_key, seq) {
                    Lookup::Found(v) => break 'search Some(PinnableValue::owned(v.to_vec())),
                    Lookup::Deleted => break 'search None,
                    Lookup::NotFound => {}
                }
            }
            let lookup = key::lookup_key(user_key, seq);
            let read = BlockReadOptions {
                fill_cache: opts.fill_cache,
                verify_checksums: opts.verify_checksums,
            };
            match view.version.get(&self.tables, &lookup, hash, read)? {
                Lookup::Found(v) => Some(v),
                Lookup::Deleted | Lookup::NotFound => None,
            }
        };
        if let Some(v) = &found {
            self.stats.get_hits.inc();
            self.stats.bytes_read.add(v.len() as u64);
        }
        Ok(found)
    }

    fn iter(&self, opts: &ReadOptions) -> Result<DbIterator> {
        let view = self.current_view();
        let snapshot = match &opts.snapshot {
            Some(s) => s.clone(),
            None => self
                .snapshots
                .acquire(self.last_sequence.load(Ordering::Acquire)),
        };
        let read = BlockReadOptions {
            fill_cache: opts.fill_cache,
            verify_checksums: opts.verify_checksums,
        };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        children.push(Box::new(view.mem.iter()));
        for m in &view.imm {
            children.push(Box::new(m.iter()));
        }
        for f in &view.version.levels[0] {
            children.push(Box::new(self.tables.get(f.number)?.iter(read)));
        }
        for files in view.version.levels.iter().skip(1).filter(|l| !l.is_empty()) {
            children.push(Box::new(LevelIter::new(
                self.tables.clone(),
                files.clone(),
                read,
            )));
        }
        self.stats.iterators_created.inc();
        Ok(DbIterator::new(
            MergingIterator::new(children),
            snapshot,
            view,
            opts.lower_bound.clone(),
            opts.upper_bound.clone(),
        ))
    }

    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // The leader of any group in flight finishes before we take the WAL.
        let result = {
            let mut wal = self.wal.lock();
            wal.sync()
        };
        self.scheduler.shutdown();
        {
            // Wait for a flush or compaction an inline caller may still be running.
            let mut st = self.state.lock();
            while st.flush_running {
                self.state_cv.wait(&mut st);
            }
            drop(st);
            let mut cs = self.compaction.lock();
            while cs.running {
                self.compaction_cv.wait(&mut cs);
            }
        }
        self.purge_obsolete_files();
        *self.lock.lock() = None;
        result
    }
}
