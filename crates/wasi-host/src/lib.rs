//! Strata as a sandboxed WebAssembly component: [`WasiDb`] runs the engine built for
//! `wasm32-wasip2` (`crates/wasi-guest`, exporting `strata:kv/store` from `wit/`) under wasmtime,
//! with the same calls as the native `Db`.
//!
//! The sandbox:
//! - the guest sees one preopened directory, the store's, and nothing else: no other path, no
//!   network, no environment, no arguments;
//! - memory is capped ([`Limits::memory_bytes`]); each call has a deadline
//!   ([`Limits::call_deadline`], epoch interruption) and optionally a fuel budget;
//! - the host holds the OS lock on the store's `LOCK` file (WASI has no locks), so a native `Db`
//!   and a `WasiDb` never open one store at once;
//! - a guest stopped by the sandbox leaves the host running: the handle answers `Closed` from
//!   then on, and the store reopens intact (the WAL is the truth).
//!
//! The same instance also exports `wasi:keyvalue`: [`WasiDb::bucket`] opens a bucket (a column
//! family) through it, as any component importing `wasi:keyvalue` would.
//!
//! Background work: the guest has no threads. The host calls `maintenance` every 64 writes and
//! on a timer while the store is idle ([`Limits::maintenance_interval`]), a few jobs at a time
//! and starting none after a quarter of the call deadline; a write that would wait for a flush
//! runs it inline. [`WasiDb::maintenance`] runs it on demand, and reports a failure of the
//! host's own runs (a write's answer is only ever about the write).

mod bucket;
mod compiled_cache;
mod error;
mod runtime;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use strata_engine::FileSystem;
pub use strata_engine::WriteBatch;
use wasmtime::component::ResourceAny;

pub use bucket::{Bucket, KeyPage, KeyValue};
pub use error::{Error, Result};
pub use runtime::{Limits, StartReport, guest_component};
pub use wit::{
    BatchOp, BlobInfo, CacheInfo, Compression, Direction, Entry, KeyRange, LevelInfo, OpenOptions,
    Properties, ScanOptions, ValueRange,
};

mod bindings {
    wasmtime::component::bindgen!({ path: "../../wit", world: "engine" });
}

use bindings::exports::strata::kv::store as wit;
use runtime::Instance;

/// The engine's defaults, as `Options::default()` gives them natively.
pub fn default_options() -> OpenOptions {
    let o = strata_engine::Options::default();
    OpenOptions {
        create_if_missing: o.create_if_missing,
        compression: match o.cf.compression {
            strata_engine::Compression::None => Compression::None,
            _ => Compression::Zstd,
        },
        bloom_bits_per_key: o.cf.bloom_bits_per_key,
        write_buffer_size: o.cf.write_buffer_size as u64,
        enable_blob_files: o.cf.enable_blob_files,
        min_blob_size: o.cf.min_blob_size as u64,
        blob_ttl_range_secs: 0,
        cache_size: o.cache_size as u64,
    }
}

/// Writes after which the host checks whether background work is due.
const MAINTAIN_EVERY: u32 = 64;
/// Steps of background work one automatic `maintenance` call may run.
const MAINTENANCE_BUDGET: u32 = 8;

/// An open store inside the component. Cheap to share (`Arc`); calls are serialized, as a
/// component instance runs one call at a time.
pub struct WasiDb {
    inner: Arc<Mutex<Handle>>,
    start: StartReport,
    timer: Option<MaintenanceTimer>,
}

struct Handle {
    instance: Option<Instance>,
    db: Option<ResourceAny>,
    writes_since_check: u32,
    /// How long one `maintenance` call may start jobs: a quarter of the call deadline, so the
    /// job it starts last still ends well within it.
    maintenance_millis: u32,
    /// Why background work last failed where no caller could be told (after a write that had
    /// committed, or on the timer); [`WasiDb::maintenance`] reports it.
    background_error: Option<Error>,
    _lock: Box<dyn strata_engine::FileLock>,
}

impl Handle {
    /// Runs `f` against the live instance; a call the sandbox stopped drops the instance.
    fn with_instance<T>(
        &mut self,
        f: impl FnOnce(&mut Instance, ResourceAny) -> Result<T>,
    ) -> Result<T> {
        let db = self.db.ok_or(Error::Closed)?;
        let instance = self.instance.as_mut().ok_or(Error::Closed)?;
        let r = f(instance, db);
        if let Err(e) = &r
            && e.stopped_the_guest()
        {
            self.instance = None;
            self.db = None;
        }
        r
    }

    fn maintenance(&mut self, steps: u32) -> Result<bool> {
        let millis = self.maintenance_millis;
        self.with_instance(|instance, db| {
            instance.call(|s, g| g.db().call_maintenance(s, db, steps, millis))
        })
    }

    /// Background work no caller waits on: its failure is kept for [`WasiDb::maintenance`].
    fn maintain_quietly(&mut self) {
        if let Err(e) = self.maintenance(MAINTENANCE_BUDGET) {
            self.background_error.get_or_insert(e);
        }
    }
}

/// Runs `maintenance` every interval while the store is idle, as the engine's background
/// threads would natively: a memtable filled by the last write of a burst is flushed, and
/// compactions it makes due run, without waiting for the next write.
struct MaintenanceTimer {
    stop: std::sync::mpsc::Sender<()>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl MaintenanceTimer {
    fn start(handle: &Arc<Mutex<Handle>>, every: Duration) -> MaintenanceTimer {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let handle = Arc::downgrade(handle);
        let thread = std::thread::Builder::new()
            .name("strata-wasi-maintenance".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(every)
                {
                    let Some(handle) = handle.upgrade() else {
                        return;
                    };
                    // A call in progress means the store is not idle; its writes maintain it.
                    if let Some(mut h) = handle.try_lock() {
                        h.maintain_quietly();
                    }
                }
            })
            .ok();
        MaintenanceTimer {
            stop,
            thread: Mutex::new(thread),
        }
    }

    fn stop(&self) {
        let _ = self.stop.send(());
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for WasiDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasiDb")
            .field("start", &self.start)
            .finish()
    }
}

impl WasiDb {
    /// Opens (or creates, per `options`) the store in `dir` inside a fresh component instance.
    pub fn open(dir: impl AsRef<Path>, limits: Limits, options: OpenOptions) -> Result<WasiDb> {
        let dir = dir.as_ref();
        if options.create_if_missing {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::Io(format!("create {}: {e}", dir.display())))?;
        }
        if !dir.is_dir() {
            return Err(Error::InvalidArgument(format!(
                "{} is not a directory (create_if_missing is off)",
                dir.display()
            )));
        }
        let lock = strata_engine::StdFileSystem
            .lock(&dir.join("LOCK"))
            .map_err(|e| match e.kind() {
                strata_engine::ErrorKind::Busy => Error::Busy(e.to_string()),
                _ => Error::Io(e.to_string()),
            })?;
        let (mut instance, start) = Instance::start(dir, &limits)?;
        let db = instance
            .call(|store, guest| guest.db().call_open(store, runtime::GUEST_DIR, options))?;
        let inner = Arc::new(Mutex::new(Handle {
            instance: Some(instance),
            db: Some(db),
            writes_since_check: 0,
            maintenance_millis: u32::try_from(limits.call_deadline.as_millis() / 4)
                .unwrap_or(u32::MAX)
                .max(1),
            background_error: None,
            _lock: lock,
        }));
        let timer = limits
            .maintenance_interval
            .map(|every| MaintenanceTimer::start(&inner, every));
        Ok(WasiDb {
            inner,
            start,
            timer,
        })
    }

    /// How long starting the instance took, and whether the compiled component came from the cache.
    pub fn start_report(&self) -> &StartReport {
        &self.start
    }

    /// Runs `f` against the live instance; a call the sandbox stopped drops the instance.
    fn call<T>(
        &self,
        f: impl FnOnce(
            &mut wasmtime::Store<runtime::HostState>,
            &wit::Guest,
            ResourceAny,
        ) -> wasmtime::Result<std::result::Result<T, wit::Error>>,
    ) -> Result<T> {
        self.with_instance(|instance, db| instance.call(|store, guest| f(store, guest, db)))
    }

    pub(crate) fn with_instance<T>(
        &self,
        f: impl FnOnce(&mut Instance, ResourceAny) -> Result<T>,
    ) -> Result<T> {
        self.inner.lock().with_instance(f)
    }

    /// After a write has committed: runs due background work now and then, as the engine's
    /// threads would. Its failure is not the write's (which stands, and a caller retrying it
    /// would apply it twice): the next call meets it (writes stopped, or the guest stopped),
    /// and [`WasiDb::maintenance`] reports it.
    pub(crate) fn wrote(&self) {
        let mut h = self.inner.lock();
        h.writes_since_check += 1;
        if h.writes_since_check >= MAINTAIN_EVERY {
            h.writes_since_check = 0;
            h.maintain_quietly();
        }
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.call(|s, g, db| g.db().call_get(s, db, key.as_ref(), None))
    }

    pub fn get_at(&self, snapshot: &Snapshot, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.call(|s, g, db| {
            g.db()
                .call_get(s, db, key.as_ref(), Some(snapshot.resource))
        })
    }

    /// `len` bytes at `offset` of the value of `key` (cut at its end) with the value's length;
    /// `None` when the key is absent.
    pub fn read_range(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
    ) -> Result<Option<ValueRange>> {
        self.call(|s, g, db| {
            g.db()
                .call_read_range(s, db, key.as_ref(), offset, len, None)
        })
    }

    /// The length of the value of `key`, without reading it; `None` when absent.
    pub fn length(&self, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        self.call(|s, g, db| g.db().call_length(s, db, key.as_ref()))
    }

    /// Writes `data` at `offset` of `key`'s value, which must exist ([`Error::NotFound`]).
    pub fn write_at(&self, key: &[u8], offset: u64, data: &[u8], sync: bool) -> Result<()> {
        self.call(|s, g, db| g.db().call_write_at(s, db, key, offset, data, sync))?;
        self.wrote();
        Ok(())
    }

    /// Appends `data` to `key`'s value (a missing key starts empty).
    pub fn append(&self, key: &[u8], data: &[u8], sync: bool) -> Result<()> {
        self.call(|s, g, db| g.db().call_append(s, db, key, data, sync))?;
        self.wrote();
        Ok(())
    }

    /// Cuts `key`'s value (which must exist) to `len` bytes, or grows it with zeros.
    pub fn truncate(&self, key: &[u8], len: u64, sync: bool) -> Result<()> {
        self.call(|s, g, db| g.db().call_truncate(s, db, key, len, sync))?;
        self.wrote();
        Ok(())
    }

    /// Moves `from`'s value to `to` (deleting `from`), sharing its bytes.
    pub fn move_value(&self, from: &[u8], to: &[u8], sync: bool) -> Result<()> {
        self.call(|s, g, db| g.db().call_move(s, db, from, to, sync))?;
        self.wrote();
        Ok(())
    }

    /// Gives `to` the value of `from`, sharing its bytes.
    pub fn copy_value(&self, from: &[u8], to: &[u8], sync: bool) -> Result<()> {
        self.call(|s, g, db| g.db().call_copy(s, db, from, to, sync))?;
        self.wrote();
        Ok(())
    }

    /// Makes every write acknowledged before this call durable.
    pub fn sync_wal(&self) -> Result<()> {
        self.call(|s, g, db| g.db().call_sync_wal(s, db))
    }

    /// Batched reads from one snapshot, in the order asked.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_ref().to_vec()).collect();
        self.call(|s, g, db| g.db().call_multi_get(s, db, &keys, None))
    }

    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_with(key, value, false)
    }

    /// `sync`: the WAL is synced before the call returns.
    pub fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        sync: bool,
    ) -> Result<()> {
        self.call(|s, g, db| g.db().call_put(s, db, key.as_ref(), value.as_ref(), sync))?;
        self.wrote();
        Ok(())
    }

    /// The key reads as absent once `ttl` has passed; `sync` as for [`WasiDb::put_with`].
    pub fn put_with_ttl(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
        sync: bool,
    ) -> Result<()> {
        self.call(|s, g, db| {
            g.db().call_put_with_ttl(
                s,
                db,
                key.as_ref(),
                value.as_ref(),
                ttl.as_secs().max(1),
                sync,
            )
        })?;
        self.wrote();
        Ok(())
    }

    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.call(|s, g, db| g.db().call_delete(s, db, key.as_ref(), false))?;
        self.wrote();
        Ok(())
    }

    /// Deletes `[start, end)` with one range tombstone.
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let range = KeyRange {
            start: start.as_ref().to_vec(),
            end: end.as_ref().to_vec(),
        };
        self.call(|s, g, db| g.db().call_delete_range(s, db, &range, false))?;
        self.wrote();
        Ok(())
    }

    /// One atomic batch, as [`strata_engine::Db::write`]: it crosses into the guest as one
    /// buffer in the engine's encoding.
    pub fn write(&self, batch: &WriteBatch, sync: bool) -> Result<()> {
        self.call(|s, g, db| g.db().call_write_encoded(s, db, batch.data(), sync))?;
        self.wrote();
        Ok(())
    }

    /// One atomic batch given as the component's `batch-op` list (each key and value is copied
    /// in on its own: [`WasiDb::write`] is cheaper for many records).
    pub fn write_ops(&self, ops: &[BatchOp], sync: bool) -> Result<()> {
        self.call(|s, g, db| g.db().call_write(s, db, ops, sync))?;
        self.wrote();
        Ok(())
    }

    pub fn snapshot(&self) -> Result<Snapshot> {
        let resource = self.call(|s, g, db| g.db().call_snapshot(s, db))?;
        Ok(Snapshot { resource })
    }

    /// Releases a snapshot (dropping the handle alone keeps it until the store closes).
    pub fn release(&self, snapshot: Snapshot) -> Result<()> {
        self.drop_resource(snapshot.resource)
    }

    /// A walk over `options`' range, read a page at a time with [`WasiDb::next_page`].
    pub fn scan(&self, options: &ScanOptions, at: Option<&Snapshot>) -> Result<Scan> {
        let at = at.map(|s| s.resource);
        let resource = self.call(|s, g, db| g.db().call_scan(s, db, options, at))?;
        Ok(Scan { resource })
    }

    /// Up to `max` entries; an empty page is the end.
    pub fn next_page(&self, scan: &Scan, max: u32) -> Result<Vec<Entry>> {
        self.call(|s, g, _| g.scan().call_next_page(s, scan.resource, max))
    }

    /// Releases a scan's iterator.
    pub fn end_scan(&self, scan: Scan) -> Result<()> {
        self.drop_resource(scan.resource)
    }

    /// Every entry of `[start, end)` in key order (a convenience over `scan`).
    pub fn scan_all(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<Vec<Entry>> {
        let scan = self.scan(
            &ScanOptions {
                start: start.map(<[u8]>::to_vec),
                end: end.map(<[u8]>::to_vec),
                direction: Direction::Forward,
                keys_only: false,
            },
            None,
        )?;
        let mut all = Vec::new();
        loop {
            let page = self.next_page(&scan, 1024)?;
            if page.is_empty() {
                break;
            }
            all.extend(page);
        }
        self.end_scan(scan)?;
        Ok(all)
    }

    pub fn flush(&self) -> Result<()> {
        self.call(|s, g, db| g.db().call_flush(s, db))
    }

    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.call(|s, g, db| g.db().call_compact_range(s, db, start, end))
    }

    /// Runs up to `steps` jobs of background work (a memtable's flush or a compaction each),
    /// starting none after a quarter of the call deadline; true when more may be due. First
    /// reports, once, a failure of background work the host ran on its own (after a write, or
    /// on the timer).
    pub fn maintenance(&self, steps: u32) -> Result<bool> {
        let mut h = self.inner.lock();
        if let Some(e) = h.background_error.take() {
            return Err(e);
        }
        h.maintenance(steps)
    }

    pub fn properties(&self) -> Result<Properties> {
        self.call(|s, g, db| g.db().call_properties(s, db))
    }

    /// Syncs and closes the store; the instance ends with it.
    pub fn close(&self) -> Result<()> {
        if let Some(timer) = &self.timer {
            timer.stop();
        }
        let r = self.call(|s, g, db| g.db().call_close(s, db));
        let mut h = self.inner.lock();
        h.db = None;
        h.instance = None;
        r
    }

    pub(crate) fn drop_resource(&self, r: ResourceAny) -> Result<()> {
        let mut h = self.inner.lock();
        let instance = h.instance.as_mut().ok_or(Error::Closed)?;
        instance.drop_resource(r)
    }
}

impl Drop for WasiDb {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// A consistent view taken by [`WasiDb::snapshot`].
#[derive(Debug)]
pub struct Snapshot {
    resource: ResourceAny,
}

/// A walk started by [`WasiDb::scan`].
#[derive(Debug)]
pub struct Scan {
    resource: ResourceAny,
}

/// Shares one open store between threads.
pub type SharedWasiDb = Arc<WasiDb>;
