//! What every handler shares: the open store, the limits, the security settings, the snapshots
//! paged scans read, and the mount to tell about changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_engine::{ColumnFamily, Db, Snapshot};

use crate::problem::Problem;

/// The largest body limit a server takes: a JSON body is held whole, and the document's largest
/// `PATCH` offset leaves this much room below the largest value.
pub const MAX_BODY_LIMIT: usize = 1 << 30;

/// Limits on what one request may ask.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body, in bytes (a raw `PUT` streams and has its own limit).
    pub body_bytes: usize,
    /// Largest value a raw `PUT` streams into the store, in bytes.
    pub raw_value_bytes: u64,
    /// Most keys in one `kv:batchGet`.
    pub batch_get_keys: usize,
    /// Most operations in one `kv:batchWrite`.
    pub batch_write_ops: usize,
    /// Most entries in one scan page (and the default `limit`: 100).
    pub scan_page: usize,
    /// Longest a request may run.
    pub request_timeout: Duration,
    /// Heavy requests (scan, deleteRange, compactRange) running at once.
    pub heavy_concurrency: usize,
    /// How long a paged scan's snapshot lives after its last page.
    pub page_snapshot_ttl: Duration,
    /// Paged scans' snapshots alive at once (the oldest goes first).
    pub page_snapshots: usize,
    /// Longest a read given `min_seq` waits for the store to show that sequence (a replica
    /// catching up) before it answers 503.
    pub min_seq_wait: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: 64 << 20,
            raw_value_bytes: strata_engine::MAX_WRITE_SIZE,
            batch_get_keys: 1000,
            batch_write_ops: 10_000,
            scan_page: 1000,
            request_timeout: Duration::from_secs(30),
            heavy_concurrency: 4,
            min_seq_wait: Duration::from_secs(10),
            page_snapshot_ttl: Duration::from_secs(60),
            page_snapshots: 256,
        }
    }
}

impl Limits {
    /// The entries one page holds: `asked`, or 100 (at most `scan_page`) when not given.
    pub fn page_limit(&self, asked: Option<u64>) -> Result<usize, Problem> {
        // Over the server's page size is that size, as a page may always hold fewer than asked:
        // the document cannot know the size a server was started with.
        let page = self.scan_page;
        match asked {
            Some(0) => Err(Problem::bad_request("limit must be at least 1")),
            Some(n) => Ok(usize::try_from(n).unwrap_or(usize::MAX).min(page)),
            None => Ok(100.min(page)),
        }
    }
}

/// Who may call and from where.
#[derive(Debug, Clone)]
pub struct Security {
    /// The bearer token every route but `/healthz` needs.
    pub token: String,
    /// Host header values accepted (without port); loopback names by default.
    pub allowed_hosts: Vec<String>,
    /// Origins other sites' pages may call the API from (CORS); none by default.
    pub cors_origins: Vec<String>,
}

impl Security {
    pub fn loopback(token: String) -> Security {
        Security {
            token,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            cors_origins: Vec::new(),
        }
    }
}

/// The mount sharing the store, told about keys other faces change.
#[derive(Debug, Clone)]
pub struct MountLink {
    /// The column family it shows.
    pub column_family: String,
    pub invalidator: strata_fusefs::Invalidator,
    /// On a replica: how far the mount dropped the kernel's caches as the store moved on. A
    /// read given `min_seq` answers once the mount shows that sequence too, so a client that
    /// waited through REST then reads the file sees what it waited for.
    pub replica: Option<Arc<strata_fusefs::ReplicaInvalidation>>,
}

/// Shared by every handler (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub db: Arc<Db>,
    pub read_only: bool,
    pub limits: Limits,
    pub security: Security,
    pub mount: Option<MountLink>,
    pages: Mutex<Pages>,
    /// Permits for heavy requests.
    heavy: Arc<tokio::sync::Semaphore>,
    /// The engine's events, when the store was opened with the hub as a listener.
    pub events: Option<Arc<crate::events::EventHub>>,
    /// Turns true when the server starts shutting down: endless responses (the event feed) end
    /// then, or a graceful shutdown would wait on an open console forever.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Where point reads and writes ran (`routes::read`, `routes::write`), for `/metrics`.
    pub places: Places,
    /// Where `POST /api/v1/admin:backup` backs the store up (`serve --backup-to`).
    pub backups: Option<Arc<dyn crate::backups::BackupTarget>>,
    /// Held while a backup runs: one at a time.
    pub backing_up: Arc<tokio::sync::Mutex<()>>,
}

/// Where the engine's calls ran: point reads and writes.
#[derive(Debug, Default)]
pub(crate) struct Places {
    pub reads: Counted,
    pub writes: Counted,
}

/// How many calls ran on the async worker that took the request (a read answered from memory,
/// a write with nothing to wait for), and how many on the blocking pool.
#[derive(Debug, Default)]
pub(crate) struct Counted {
    pub worker: std::sync::atomic::AtomicU64,
    pub pool: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct Pages {
    next_id: u64,
    live: HashMap<u64, (Snapshot, Instant)>,
}

impl AppState {
    pub fn new(
        db: Arc<Db>,
        read_only: bool,
        limits: Limits,
        security: Security,
        mount: Option<MountLink>,
    ) -> AppState {
        AppState {
            inner: Arc::new(Inner {
                db,
                read_only,
                security,
                mount,
                pages: Mutex::new(Pages {
                    next_id: 1,
                    ..Pages::default()
                }),
                heavy: Arc::new(tokio::sync::Semaphore::new(limits.heavy_concurrency.max(1))),
                events: None,
                shutdown: tokio::sync::watch::Sender::new(false).subscribe(),
                places: Places::default(),
                backups: None,
                backing_up: Arc::new(tokio::sync::Mutex::new(())),
                limits,
            }),
        }
    }
}

impl AppState {
    /// Feeds `GET /api/v1/events` from `hub`, which must be among the store's listeners.
    pub fn with_events(mut self, hub: Arc<crate::events::EventHub>) -> AppState {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.events = Some(hub);
        }
        self
    }

    /// Lets `POST /api/v1/admin:backup` back the store up to `target`.
    pub fn with_backups(mut self, target: Arc<dyn crate::backups::BackupTarget>) -> AppState {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.backups = Some(target);
        }
        self
    }

    /// Ends the event feeds when `shutdown` turns true.
    pub fn with_shutdown(mut self, shutdown: tokio::sync::watch::Receiver<bool>) -> AppState {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.shutdown = shutdown;
        }
        self
    }

    /// A permit to run a heavy request (scan, deleteRange, compactRange); waits for one.
    pub(crate) async fn heavy(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Problem> {
        self.inner
            .heavy
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Problem::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "shutting down"))
    }
}

impl Inner {
    pub fn cf(&self, name: Option<&str>) -> Result<ColumnFamily, Problem> {
        match name {
            None => Ok(self.db.default_cf()),
            Some(n) => self
                .db
                .cf(n)
                .map_err(|_| Problem::not_found(format!("no column family named {n}"))),
        }
    }

    /// Writes `batch`, synced as far as `sync` says before this returns; answers the sequence
    /// number it committed at, unless it was empty (then no sequence is its own).
    pub(crate) fn write(
        &self,
        batch: strata_engine::WriteBatch,
        sync: crate::routes::SyncTo,
    ) -> Result<Option<crate::freshness::CommittedAt>, Problem> {
        let empty = batch.is_empty();
        let seq = self.db.write_sequenced(batch, &sync.write_options())?;
        Ok(crate::freshness::CommittedAt::of_write(empty, seq))
    }

    pub fn check_writable(&self) -> Result<(), Problem> {
        if self.read_only {
            // The engine's own error, so the answer is the one a write the engine refused gets.
            return Err(strata_engine::Error::ReadOnly("the served store".into()).into());
        }
        Ok(())
    }

    /// Keeps `snap` for the pages after the first; its id goes into the page token.
    pub fn register_page_snapshot(&self, snap: Snapshot) -> u64 {
        let mut p = self.pages.lock();
        self.expire(&mut p);
        while p.live.len() >= self.limits.page_snapshots {
            let oldest = p
                .live
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(id, _)| *id);
            match oldest {
                Some(id) => p.live.remove(&id),
                None => break,
            };
        }
        let id = p.next_id;
        p.next_id += 1;
        p.live.insert(id, (snap, Instant::now()));
        id
    }

    /// The snapshot a page token names, kept alive for another while.
    pub fn page_snapshot(&self, id: u64) -> Result<Snapshot, Problem> {
        let mut p = self.pages.lock();
        self.expire(&mut p);
        match p.live.get_mut(&id) {
            Some((snap, used)) => {
                *used = Instant::now();
                Ok(snap.clone())
            }
            None => Err(crate::codec::page_gone()),
        }
    }

    pub fn close_page_snapshot(&self, id: u64) {
        self.pages.lock().live.remove(&id);
    }

    fn expire(&self, p: &mut Pages) {
        let ttl = self.limits.page_snapshot_ttl;
        p.live.retain(|_, (_, used)| used.elapsed() < ttl);
    }

    /// Whether the mount shows `cf`: its data, or the metadata records (`cf.fsmeta`) that give
    /// its entries their modes, owners, times and kinds, keyed by path (a directory's with a
    /// trailing `/`).
    pub(crate) fn mounted(&self, cf: &ColumnFamily) -> Option<&MountLink> {
        self.mount.as_ref().filter(|m| {
            m.column_family == cf.name()
                || strata_fusefs::meta_cf_name(&m.column_family) == cf.name()
        })
    }

    /// Tells the mount, if it shows `cf`, that these keys changed.
    pub fn changed(&self, cf: &ColumnFamily, keys: impl IntoIterator<Item = Vec<u8>>) {
        if let Some(m) = self.mounted(cf) {
            for k in keys {
                let path = k.strip_suffix(b"/").unwrap_or(&k);
                m.invalidator.key_changed(path);
            }
        }
    }

    pub fn range_deleted(&self, cf: &ColumnFamily, start: &[u8], end: &[u8]) {
        if let Some(m) = self.mounted(cf) {
            m.invalidator.range_deleted(start, end);
        }
    }
}
