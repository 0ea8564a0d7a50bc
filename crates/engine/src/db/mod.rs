//! The database: ties the write path (WAL, memtables), the read path (memtables, then tables level by
//! level) and background flushes together. See doc/architecture.md.

mod admin;
mod background;
mod batch;
mod blob;
mod blob_housekeeping;
mod catch_up;
mod column_family;
mod compact;
mod compaction_state;
mod flush;
mod inspect;
mod iter;
mod live_files;
mod multi_get;
mod open;
mod partial;
mod properties;
mod ranged;
mod read;
mod repair;
mod repair_refs;
mod replay;
mod replica;
mod reserve;
mod resume;
mod room;
mod unnamed;
mod value_file;

mod try_write;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

pub use crate::snapshot::Snapshot;
pub use batch::WriteBatch;
pub use catch_up::CaughtUp;
pub use column_family::ColumnFamily;
pub use inspect::{RangeEstimate, RangeTombstoneInfo, RangeTombstonePage, TombstoneLocation};
pub use iter::{DbIterator, Entries};
pub use live_files::{LiveFile, LiveFiles};
pub use properties::{
    BlobTotals, BlockCacheProperties, ColumnFamilyProperties, FileProperties, LevelProperties,
    Properties,
};
pub use ranged::ValueReader;
pub use repair::{LostFile, RepairReport, repair_store};
pub use replica::ReplicaStatus;
pub use try_write::TryWrite;
pub use value_file::ValueFile;

use crate::blob::{BlobEpoch, BlobStore};
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::key::SequenceNumber;
use crate::memtable::MemTable;
use crate::options::{ColumnFamilyOptions, Options, ReadOptions, WriteOptions};
use crate::snapshot::SnapshotList;
use crate::sst::TableCache;
use crate::stats::Stats;
use crate::version::{FileMetaData, Version, VersionSet};
use background::Scheduler;
use column_family::{CfState, CfTracker, Registry};
use room::Pressure;
use write::{WalState, WriteQueue};

/// What a read of one column family sees: its memtables and table version, captured together.
#[derive(Debug)]
pub(crate) struct SuperVersion {
    pub(crate) mem: Arc<MemTable>,
    /// Newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
    /// Whether writes should slow down or stop for this version's compaction debt.
    pub(crate) pressure: Pressure,
    /// Keeps blob files this view may read from being deleted.
    pub(crate) _blob_epoch: Option<Arc<BlobEpoch>>,
}

/// Memtables of every column family and the conditions writers and flushes wait on.
#[derive(Debug)]
pub(crate) struct State {
    /// By column family id; `None` once dropped.
    cfs: Vec<Option<CfState>>,
    tracker: CfTracker,
    /// WAL files that may hold unflushed data, oldest first, with their sizes once closed (the
    /// last one is being appended to).
    live_wals: Vec<(u64, u64)>,
    current_wal: u64,
    /// The newest WAL whose column families were already switched to release it.
    wal_released_up_to: u64,
    /// `write_buffer_size * max_write_buffer_number` summed over the column families.
    memtable_budget: u64,
    bg_error: Option<Error>,
    flushes_running: usize,
}

impl State {
    fn cf(&self, id: u32) -> Option<&CfState> {
        self.cfs.get(id as usize)?.as_ref()
    }

    fn cf_mut(&mut self, id: u32) -> Option<&mut CfState> {
        self.cfs.get_mut(id as usize)?.as_mut()
    }

    /// The active memtable of column family `id` for a write going to WAL `wal`, pinning that WAL
    /// if the column family had nothing unflushed.
    fn memtable_for_write(&mut self, id: u32, wal: u64) -> Option<Arc<MemTable>> {
        let cs = self.cfs.get_mut(id as usize)?.as_mut()?;
        if cs.mem_first_log.is_none() {
            let before = cs.oldest_log();
            cs.mem_first_log = Some(wal);
            self.tracker.repin(id, before, cs.oldest_log());
        }
        Some(cs.mem.clone())
    }

    /// Closed WALs no column family needs any more; removed from the live list.
    fn take_obsolete_wals(&mut self) -> Vec<u64> {
        let keep_from = self
            .tracker
            .oldest_pinned_wal()
            .unwrap_or(self.current_wal)
            .min(self.current_wal);
        let split = self.live_wals.partition_point(|(n, _)| *n < keep_from);
        self.live_wals.drain(..split).map(|(n, _)| n).collect()
    }
}

pub(crate) struct DbInner {
    /// Distinguishes this open store from others, so handles cannot be mixed up.
    id: u64,
    dir: PathBuf,
    opts: Options,
    fs: Arc<dyn FileSystem>,
    /// `fs.appends_are_local(dir)`, asked at open: whether `try_write` may commit.
    appends_are_local: bool,
    /// Whether a new WAL is created at its expected size, its pages reserved ahead of the writer
    /// (`FileSystem::create_sized`). Cleared when the disk fills, so the room a compaction or a
    /// released reserve frees goes to the flushes and deletions that need it, not to a WAL's
    /// spare pages; set again once a resume succeeds with the reserve held (or none kept).
    wal_room_ahead: std::sync::atomic::AtomicBool,
    stats: Arc<Stats>,
    tables: Arc<TableCache>,
    block_cache: Option<Arc<BlockCache>>,
    versions: Mutex<VersionSet>,
    registry: RwLock<Registry>,
    /// Serialises creating and dropping column families.
    cf_admin: Mutex<()>,
    default_cf: ColumnFamily,
    state: Mutex<State>,
    /// Signalled when a flush or compaction finishes or fails, and when a stall may have cleared.
    state_cv: Condvar,
    /// The newest sequence number visible to reads.
    last_sequence: AtomicU64,
    snapshots: Arc<SnapshotList>,
    queue: Mutex<WriteQueue>,
    queue_cv: Condvar,
    /// Held by the write group's leader (and by anything that switches memtables).
    wal: Mutex<WalState>,
    scheduler: Scheduler,
    /// Compactions running now, in every column family.
    compactions_running: Mutex<usize>,
    /// Signalled when a compaction finishes.
    compaction_cv: Condvar,
    /// Removes tables, WALs, blob files and MANIFESTs the store stops needing; a backup holds
    /// them back while it copies (`live_files`).
    deletions: Arc<crate::fs::Deletions>,
    /// A sync of a blob or value file failed: the system may have dropped pages it had
    /// accepted, and a later sync that succeeds says nothing of them. Every later blob sync
    /// fails too, so no write is acknowledged as synced over them, until a reopen.
    blob_sync_failed: std::sync::atomic::AtomicBool,
    /// Tables removed from the current version, deleted once no older version holds them.
    obsolete: Mutex<Vec<Arc<FileMetaData>>>,
    /// Tables whose flush or compaction failed to log its edit, with the MANIFEST current then.
    unlogged_tables: Mutex<Vec<(u64, u64)>>,
    /// Blob files and the blob read path.
    blobs: Arc<BlobStore>,
    /// The write path's open blob files.
    blob_writers: Mutex<blob::BlobWriters>,
    /// The smallest value some column family separates into blob files (`u64::MAX`: none).
    blob_threshold: AtomicU64,
    /// Serialises blob file housekeeping (expiry, deletion, eviction).
    blob_admin: Mutex<()>,
    closed: AtomicBool,
    lock: Mutex<Option<Box<dyn FileLock>>>,
    /// Room held back for deletions on a full disk.
    reserve: reserve::DiskReserve,
    /// Opened by `Db::open_read_only`: every mutating call is refused.
    read_only: bool,
    /// Read-only: what the next catch-up starts from (`catch_up.rs`).
    catching_up: Mutex<catch_up::Since>,
    /// Read-only: the views reads go to, replaced whole by each catch-up (`read_point`).
    pinned_views: RwLock<Option<Arc<read::PinnedViews>>>,
}

impl std::fmt::Debug for DbInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.dir).finish()
    }
}

/// An open store. `Send + Sync`: share it between threads with an `Arc`. Dropping it closes it.
///
/// Every method that takes a key has a `_cf` form taking a [`ColumnFamily`]; the plain form uses
/// the default column family.
#[derive(Debug)]
pub struct Db {
    inner: Arc<DbInner>,
    /// A replica's following thread (`open_replica`).
    follower: Option<Arc<replica::Follower>>,
}

impl Db {
    /// Opens (or with `create_if_missing`, creates) the store in `path`, replaying its WAL. Every
    /// column family it holds is opened, with the options recorded for it unless
    /// [`Options::column_families`] names it.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = open::open(path.as_ref(), opts, open::OpenMode::ReadWrite)?;
        Ok(Db {
            inner,
            follower: None,
        })
    }

    /// Opens an existing store for reading only (RocksDB's `OpenForReadOnly`): no lock is taken,
    /// so it works beside a process writing the store; nothing is written, created or deleted (the
    /// WALs are replayed into memory); no background work runs; every mutating call returns
    /// [`Error::ReadOnly`]. It reads the store as it was at open; files a writer deletes later
    /// make reads of them fail.
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = open::open(path.as_ref(), opts, open::OpenMode::ReadOnly)?;
        Ok(Db {
            inner,
            follower: None,
        })
    }

    /// Opens the store read-only as a replica (RocksDB's secondary instance): a thread of its
    /// own catches up every `poll` (`try_catch_up`), first asking the filesystem to bring the
    /// directory up to date (`FileSystem::refresh`: a store in a bucket replays the log's new
    /// records; on the local disk the writer beside keeps it current). `replica_status` says
    /// how far behind it is; `wait_for_sequence` waits for a write.
    pub fn open_replica(path: impl AsRef<Path>, opts: Options, poll: Duration) -> Result<Db> {
        let inner = catch_up::open_following(path.as_ref(), opts)?;
        let follower = replica::Follower::start(&inner, poll)?;
        Ok(Db {
            inner,
            follower: Some(follower),
        })
    }

    /// A replica's progress; `None` for a store not opened with `open_replica`.
    pub fn replica_status(&self) -> Option<ReplicaStatus> {
        let sequence = self.latest_sequence();
        self.follower.as_ref().map(|f| f.status(sequence))
    }

    /// Waits until reads see sequence `seq` (a write's `latest_sequence` on the writer) or
    /// later, at most `timeout`; the sequence they see then. A replica is asked to catch up at
    /// once (a zero timeout only asks). Past the timeout: `Unavailable`. On any other store reads see every write it
    /// made, so a sequence past its newest is `InvalidArgument` at once.
    pub fn wait_for_sequence(&self, seq: u64, timeout: Duration) -> Result<u64> {
        self.inner.check_open()?;
        let reached = || self.latest_sequence() >= seq;
        let Some(follower) = &self.follower else {
            return match reached() {
                true => Ok(self.latest_sequence()),
                false => Err(Error::InvalidArgument(format!(
                    "no write has sequence {seq} yet: the newest is {}",
                    self.latest_sequence()
                ))),
            };
        };
        if follower.wait(std::time::Instant::now().checked_add(timeout), reached) {
            return Ok(self.latest_sequence());
        }
        let why = follower
            .status(0)
            .last_error
            .map(|e| format!(" (its last round failed: {e})"))
            .unwrap_or_default();
        Err(Error::Unavailable(format!(
            "the replica shows sequence {}, not yet the {seq} asked for{why}",
            self.latest_sequence()
        )))
    }

    /// For a store opened read-only beside a writer (or over files something else keeps
    /// current, as a replica of a bucket store does): reads the MANIFEST and the WALs again and
    /// moves reads to what they hold now (RocksDB's `TryCatchUpWithPrimary`). Nothing is written.
    /// Refused with `InvalidArgument` on a writable store.
    pub fn try_catch_up(&self) -> Result<CaughtUp> {
        self.inner.catch_up()
    }

    /// The newest sequence number reads see: after a write returns, at least the write's own
    /// (RocksDB's `GetLatestSequenceNumber`). A replica that shows this number or later shows
    /// the write.
    pub fn latest_sequence(&self) -> u64 {
        self.inner.last_sequence.load(Ordering::Acquire)
    }

    /// The directory the store lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The default column family.
    pub fn default_cf(&self) -> ColumnFamily {
        self.inner.default_cf.clone()
    }

    /// The column family called `name`.
    pub fn cf(&self, name: &str) -> Result<ColumnFamily> {
        let reg = self.inner.registry.read();
        reg.by_name
            .get(name)
            .and_then(|id| reg.get(*id))
            .map(|data| ColumnFamily { data: data.clone() })
            .ok_or_else(|| Error::InvalidArgument(format!("no column family named {name}")))
    }

    /// Creates a column family; its creation and options are durable when this returns.
    pub fn create_cf(&self, name: &str, opts: ColumnFamilyOptions) -> Result<ColumnFamily> {
        self.inner.check_writable()?;
        self.inner.create_cf(name, opts)
    }

    /// Drops a column family: its data becomes unreachable at once and its files are deleted once
    /// no iterator reads them. The default column family cannot be dropped.
    pub fn drop_cf(&self, cf: &ColumnFamily) -> Result<()> {
        self.inner.check_writable()?;
        let data = cf.resolve(self.inner.id)?.clone();
        self.inner.drop_cf(&data)
    }

    /// The names of the column families, in creation order (`"default"` first).
    pub fn list_cf(&self) -> Vec<String> {
        let reg = self.inner.registry.read();
        reg.by_id.iter().flatten().map(|d| d.name.clone()).collect()
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

    /// Sets `key` to `value` in column family `cf` (not synced; use a [`WriteBatch`] and
    /// [`Db::write`] for options).
    pub fn put_cf(
        &self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_cf(cf, key, value);
        self.write_checked(b, &WriteOptions::default(), cf)
    }

    /// Sets `key` to `value` in column family `cf` for `ttl_secs` seconds (by
    /// [`Options::clock`]): then it reads as absent to every reader and compaction removes it.
    /// A value of at least `min_blob_size` goes to a blob file of its expiration's bucket when the
    /// column family has blob files; a smaller one is kept inline with its expiration.
    pub fn put_with_ttl(
        &self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl_secs: u64,
    ) -> Result<()> {
        if ttl_secs == 0 {
            return Err(Error::InvalidArgument(
                "put_with_ttl: a TTL of 0 seconds would expire at once".into(),
            ));
        }
        let expiration = self.inner.now().saturating_add(ttl_secs);
        self.put_until(cf, key, value, expiration)
    }

    /// Sets `key` to `value` in column family `cf` until `expiration` (seconds since the Unix
    /// epoch).
    pub fn put_until(
        &self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiration: u64,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_until_cf(cf, key, value, expiration);
        self.write_checked(b, &WriteOptions::default(), cf)
    }

    /// The length of `key`'s value in column family `cf`, `None` when absent: what `get` would
    /// return the length of, without reading a value that lives in a blob file (a compressed
    /// one's record header is read). A file system's `stat` of a large file costs this much.
    pub fn value_size_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        Ok(self.value_info_cf(cf, key)?.map(|i| i.len))
    }

    /// The length of the value of `key` in column family `cf` and when it expires, from one
    /// lookup (as [`Db::value_size_cf`], which reads no value); `None` when it is absent.
    pub fn value_info_cf(
        &self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<crate::ValueInfo>> {
        self.inner.check_open()?;
        self.inner
            .value_info(cf.resolve(self.inner.id)?, key.as_ref())
    }

    /// When `key` of column family `cf` expires; `None` when it is absent (or already expired,
    /// or its blob file was evicted).
    pub fn get_expiration(
        &self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<crate::Expiration>> {
        self.inner.check_open()?;
        self.inner
            .get_expiration(cf.resolve(self.inner.id)?, key.as_ref())
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

    /// Deletes `key` from column family `cf` (not synced).
    pub fn delete_cf(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_cf(cf, key);
        self.write_checked(b, &WriteOptions::default(), cf)
    }

    /// Deletes every key in `[start, end)` (not synced; see [`Db::delete_range_with`]). One range
    /// tombstone is written however many keys the range holds; reads skip the keys it covers and
    /// compaction drops them. An empty or inverted range is `InvalidArgument`.
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_with(&WriteOptions::default(), start, end)
    }

    /// [`Db::delete_range`] with explicit write options.
    pub fn delete_range_with(
        &self,
        opts: &WriteOptions,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(start, end);
        self.write(b, opts)
    }

    /// Deletes every key in `[start, end)` from column family `cf` (not synced).
    pub fn delete_range_cf(
        &self,
        cf: &ColumnFamily,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range_cf(cf, start, end);
        self.write_checked(b, &WriteOptions::default(), cf)
    }

    /// Writes a batch of records for `cf` alone: the handle check stands in for the registry
    /// lookup `write` makes.
    fn write_checked(&self, b: WriteBatch, opts: &WriteOptions, cf: &ColumnFamily) -> Result<()> {
        cf.resolve(self.inner.id)?;
        self.submit(b, opts, false).map(|_| ())
    }

    /// Applies a batch atomically, across column families too. With `sync` the write survives
    /// power loss once this returns.
    pub fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        self.submit(batch, opts, true).map(|_| ())
    }

    /// As [`write`](Self::write), answering the sequence number the batch committed at (its
    /// last record's; for an empty batch, the store's newest): what a reader elsewhere, such as
    /// a replica, must show before it shows this write.
    pub fn write_sequenced(
        &self,
        batch: WriteBatch,
        opts: &WriteOptions,
    ) -> Result<SequenceNumber> {
        self.submit(batch, opts, true)
    }

    /// Checks a batch (with `check_cfs`, that every column family it names exists) and commits it.
    fn submit(
        &self,
        batch: WriteBatch,
        opts: &WriteOptions,
        check_cfs: bool,
    ) -> Result<SequenceNumber> {
        self.check_batch(&batch, check_cfs)?;
        if batch.is_empty() {
            // Nothing to log, but a synced write promises that everything before it is durable.
            let newest = self.latest_sequence();
            if opts.sync && !opts.disable_wal {
                self.sync_wal_to(opts.durability)?;
            }
            return Ok(newest);
        }
        // Large values go to blob files first; the files stay unevictable until the write lands.
        let (batch, _pending) = self.inner.separate_values(batch)?;
        self.inner.write(batch, opts)
    }

    /// Refuses a batch the store cannot take: a read-only or closed store, a malformed batch, or
    /// (with `check_cfs`) one naming a column family that does not exist.
    fn check_batch(&self, batch: &WriteBatch, check_cfs: bool) -> Result<()> {
        self.inner.check_writable()?;
        if let Some(why) = batch.validation_error() {
            return Err(Error::InvalidArgument(why.to_string()));
        }
        if check_cfs && batch.column_families().iter().any(|&id| id != 0) {
            let reg = self.inner.registry.read();
            if let Some(id) = batch
                .column_families()
                .iter()
                .find(|&&id| reg.get(id).is_none())
            {
                return Err(Error::InvalidArgument(format!(
                    "write batch names column family {id}, which does not exist"
                )));
            }
        }
        Ok(())
    }

    /// A snapshot of the store (every column family) as it is now.
    pub fn snapshot(&self) -> Snapshot {
        let point = self.inner.read_point(&ReadOptions::default());
        self.inner.snapshots.acquire(point.seq, point.held())
    }

    /// An iterator over a consistent view: `opts.snapshot`, or an implicit snapshot taken now.
    /// Bounds in `opts` limit it to `[lower_bound, upper_bound)`.
    pub fn iter(&self, opts: &ReadOptions) -> Result<DbIterator> {
        self.inner.check_open()?;
        self.inner.iter(opts, &self.inner.default_cf.data)
    }

    /// An iterator over column family `cf`.
    pub fn iter_cf(&self, opts: &ReadOptions, cf: &ColumnFamily) -> Result<DbIterator> {
        self.inner.check_open()?;
        self.inner.iter(opts, cf.resolve(self.inner.id)?)
    }

    /// Waits for background work, syncs the WAL and releases the directory lock. Further calls
    /// return [`Error::Closed`]. Dropping the `Db` does the same.
    pub fn close(&self) -> Result<()> {
        if let Some(f) = &self.follower {
            f.stop();
        }
        self.inner.close()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Some(f) = &self.follower {
            f.stop();
        }
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

    /// `check_open`, and the store was not opened read-only.
    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::ReadOnly(self.dir.display().to_string()));
        }
        Ok(())
    }

    /// Publishes column family `id`'s new read view; the caller holds the state lock so views are
    /// installed in order.
    fn install_view(&self, st: &mut State, id: u32) {
        let Some(cs) = st.cf(id) else { return };
        // The epoch before the version: a blob file retired after this point joins this epoch or
        // a later one, so it outlives the view; one retired before is already dead in the version.
        let blob_epoch = self.blobs.current_epoch();
        let Some(version) = self.versions.lock().current(id) else {
            return;
        };
        let pressure = Pressure::of(&version, &cs.data.opts, cs.imm.len() + 1);
        let view = SuperVersion {
            mem: cs.mem.clone(),
            imm: cs.imm.iter().rev().map(|(m, _)| m.clone()).collect(),
            pressure,
            version,
            _blob_epoch: blob_epoch,
        };
        *cs.data.view.write() = Arc::new(view);
        st.tracker.set_pressure(id, pressure);
    }

    /// Deletes WAL files the MANIFEST no longer needs. A failed removal only leaves a file that
    /// the next open deletes.
    fn remove_wals(&self, numbers: Vec<u64>) {
        for n in numbers {
            let _ = self
                .deletions
                .remove(&crate::filename::wal_file(&self.dir, n));
        }
    }

    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // A caller waiting for a flush (`wait_for_flush`) checked `closed` under the state lock
        // before it waited: taking the lock once orders this close after that wait began, and
        // the wake-up sends it back to find the store closed, since no flush is coming.
        drop(self.state.lock());
        self.state_cv.notify_all();
        if self.read_only {
            // Nothing was written and nothing runs; but the blob epochs hold the blob store, and
            // it them (and its open blob files), until they are ended.
            self.blobs.shutdown();
            return Ok(());
        }
        // The leader of any group in flight finishes before we take the WAL.
        let result = {
            let mut wal = self.wal.lock();
            let blobs = self.sync_blob_writers();
            // A damaged log is cut whatever the blob files say: a refused write's record in
            // its tail must never replay at the next open.
            match (blobs, wal.damaged_from) {
                (Ok(()), _) => self.close_wal(&mut wal),
                (Err(e), Some(_)) => self.close_wal(&mut wal).and(Err(e)),
                (Err(e), None) => Err(e),
            }
        };
        self.scheduler.shutdown();
        let sealed = self.close_blob_writers();
        let result = result.and(sealed);
        {
            // Wait for a flush or compaction an inline caller may still be running.
            let mut st = self.state.lock();
            while st.flushes_running > 0 {
                self.state_cv.wait(&mut st);
            }
            drop(st);
            let mut running = self.compactions_running.lock();
            while *running > 0 {
                self.compaction_cv.wait(&mut running);
            }
        }
        self.purge_obsolete_files();
        // Ends the blob epochs: files waiting for readers go now (none can read any more).
        self.blobs.shutdown();
        *self.lock.lock() = None;
        result
    }
}
