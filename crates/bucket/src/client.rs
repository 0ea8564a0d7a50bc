//! The bucket, called from the engine's threads: `object_store`'s S3 client on a private Tokio
//! runtime, every call blocking until it is answered, every failure an engine error naming the
//! object. The request counters feed `stats` and `/metrics`.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
};
use strata_engine::{Error, Result};

use crate::fault::{FaultPlan, FaultyStore};
use crate::open::Credentials;
use crate::url::BucketUrl;

/// What a create-only PUT found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// The object is ours.
    Yes,
    /// An object of that name was there already; ours was not written.
    AlreadyThere,
}

/// Requests made and bytes moved since the store opened.
#[derive(Debug, Default)]
pub struct RequestCounts {
    pub gets: AtomicU64,
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub lists: AtomicU64,
    pub bytes_up: AtomicU64,
    pub bytes_down: AtomicU64,
}

/// A snapshot of [`RequestCounts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    pub gets: u64,
    pub puts: u64,
    pub deletes: u64,
    pub lists: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

/// One bucket and prefix.
#[derive(Debug)]
pub struct Client {
    store: Arc<dyn ObjectStore>,
    /// Where requests run.
    handle: tokio::runtime::Handle,
    /// Owned here, and shut down without waiting when the client goes (which may be on a
    /// thread of another runtime, where a blocking shutdown would panic).
    runtime: Option<tokio::runtime::Runtime>,
    url: BucketUrl,
    /// Where the objects are, for messages (`place`).
    place: String,
    counts: RequestCounts,
}

/// How long one request may take, and how often a failed one is tried again, before the call
/// fails: the engine then stops writes rather than wait forever on a bucket that went away.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const RETRIES: usize = 3;
const RETRY_TIMEOUT: Duration = Duration::from_secs(20);
/// Requests `get_many` keeps in flight.
const GET_MANY_AT_ONCE: usize = 32;

/// Whether a request failed because the bucket's policy refuses it (or the server does not do
/// it): trying again will not help, and a caller with a way around it takes that.
pub(crate) fn forbidden(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. }
        if matches!(source.kind(), std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::Unsupported))
}

impl Client {
    /// A client for `url`: credentials and region from the standard `AWS_*` variables, the
    /// endpoint from `endpoint` (else `AWS_ENDPOINT_URL`, else AWS itself).
    pub fn connect(
        url: &BucketUrl,
        endpoint: Option<&str>,
        credentials: Option<&Credentials>,
    ) -> Result<Client> {
        Self::connect_with_faults(url, endpoint, credentials, None)
    }

    /// `connect`, with `faults` injected between this client and the server (tests).
    pub fn connect_with_faults(
        url: &BucketUrl,
        endpoint: Option<&str>,
        credentials: Option<&Credentials>,
        faults: Option<Arc<FaultPlan>>,
    ) -> Result<Client> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&url.bucket);
        if let Some(c) = credentials {
            builder = builder
                .with_access_key_id(&c.access_key_id)
                .with_secret_access_key(&c.secret_access_key);
        }
        if let Some(endpoint) = endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if std::env::var_os("AWS_REGION").is_none()
            && std::env::var_os("AWS_DEFAULT_REGION").is_none()
        {
            builder = builder.with_region("us-east-1");
        }
        let plain_http = endpoint.is_some_and(|e| e.starts_with("http://"));
        let options = ClientOptions::new()
            .with_allow_http(plain_http)
            .with_timeout(REQUEST_TIMEOUT)
            .with_connect_timeout(CONNECT_TIMEOUT);
        let retry = RetryConfig {
            max_retries: RETRIES,
            retry_timeout: RETRY_TIMEOUT,
            ..RetryConfig::default()
        };
        let store = builder
            .with_client_options(options)
            .with_retry(retry)
            .build()
            .map_err(|e| Error::InvalidArgument(format!("bucket {url}: {e}")))?;
        let store: Arc<dyn ObjectStore> = match faults {
            Some(plan) => Arc::new(FaultyStore {
                inner: Arc::new(store),
                plan,
            }),
            None => Arc::new(store),
        };
        Client::over(store, url.clone(), url.to_string())
    }

    /// A client of the directory `dir` on this machine in place of a bucket (a backup
    /// destination): each object a file under it, written to a temporary file, synced and
    /// linked into place, so an object is whole or absent and a create never replaces one.
    /// The directory is made private to its owner when this makes it.
    pub fn directory(dir: &std::path::Path) -> Result<Client> {
        use std::os::unix::fs::DirBuilderExt;
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| Error::Io {
                    context: format!("creating {}", dir.display()),
                    source: e,
                })?;
        }
        let canonical = dir.canonicalize().map_err(|e| Error::Io {
            context: format!("resolving {}", dir.display()),
            source: e,
        })?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(&canonical)
            .map_err(|e| Error::InvalidArgument(format!("{}: {e}", dir.display())))?
            .with_fsync(true);
        let place = format!("file://{}", canonical.display());
        let url = BucketUrl {
            bucket: String::new(),
            prefix: String::new(),
        };
        Client::over(Arc::new(store), url, place)
    }

    fn over(store: Arc<dyn ObjectStore>, url: BucketUrl, place: String) -> Result<Client> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("strata-bucket")
            .enable_all()
            .build()
            .map_err(|e| Error::Io {
                context: "starting the bucket client's runtime".into(),
                source: e,
            })?;
        Ok(Client {
            store,
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            url,
            place,
            counts: RequestCounts::default(),
        })
    }

    /// Where the objects are, for messages: `s3://BUCKET/PREFIX`, or `file:///DIR`.
    pub fn place(&self) -> &str {
        &self.place
    }

    pub fn url(&self) -> &BucketUrl {
        &self.url
    }

    /// The object `key` as `object_store` names it: relative to the prefix, or, starting with
    /// `/`, absolute in the bucket (a clone's reference to its source's objects).
    pub fn object(&self, key: &str) -> String {
        if let Some(absolute) = key.strip_prefix('/') {
            absolute.to_string()
        } else if self.url.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{key}", self.url.prefix)
        }
    }

    /// Runs `f` on the client's runtime and waits for it. Safe from any thread, a Tokio worker of
    /// another runtime included (it blocks that thread, as any file read would).
    fn run<T: Send + 'static>(&self, f: impl Future<Output = T> + Send + 'static) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.recv().map_err(|_| task_lost())
    }

    /// The engine error for a failed request. Only `Other` (no answer, a 5xx, a timeout) is
    /// worth waiting out; a refusal of the credentials is not.
    fn error(&self, op: &str, key: &str, e: object_store::Error) -> Error {
        if e.to_string().contains("<Code>NoSuchBucket</Code>") {
            return Error::NotFound(format!(
                "the bucket {} does not exist (create it first; check --s3-endpoint)",
                self.url.bucket
            ));
        }
        let kind = match &e {
            object_store::Error::NotFound { .. } => std::io::ErrorKind::NotFound,
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => std::io::ErrorKind::PermissionDenied,
            object_store::Error::NotSupported { .. }
            | object_store::Error::NotImplemented { .. } => std::io::ErrorKind::Unsupported,
            _ => std::io::ErrorKind::Other,
        };
        Error::Io {
            // "bucket " starts the context of every bucket request: `Shared::patiently` waits
            // out only those (a directory's failures are the local disk's, not an outage).
            context: match self.url.bucket.is_empty() {
                true => format!("{}: {op} {}", self.place, self.object(key)),
                false => format!("bucket {}: {op} {}", self.place, self.object(key)),
            },
            source: std::io::Error::new(kind, e.to_string()),
        }
    }

    /// PUTs `data` as `key` only if no object has that name (`If-None-Match: *`).
    pub fn put_create(&self, key: &str, data: Bytes) -> Result<Created> {
        let store = self.store.clone();
        let path = ObjectPath::from(self.object(key));
        let len = data.len() as u64;
        self.counts.puts.fetch_add(1, Ordering::Relaxed);
        let opts = PutOptions::from(PutMode::Create);
        let put =
            self.run(async move { store.put_opts(&path, PutPayload::from(data), opts).await })?;
        match put {
            Ok(_) => {
                self.counts.bytes_up.fetch_add(len, Ordering::Relaxed);
                Ok(Created::Yes)
            }
            Err(object_store::Error::AlreadyExists { .. }) => Ok(Created::AlreadyThere),
            Err(e) => Err(self.error("PUT", key, e)),
        }
    }

    /// Uploads the parts `next_part` yields, in order, as the object `key` (an S3 multipart
    /// upload): one part in memory at a time, each its own request under the timeout. A
    /// multipart upload cannot be create-only, so only names no other writer can make go this
    /// way (a data object under this writer's epoch: a repeat is this writer's own retry, of the
    /// same bytes). A failure aborts the upload; parts uploaded so far are the bucket's to drop.
    pub fn put_multipart(
        &self,
        key: &str,
        mut next_part: impl FnMut() -> Result<Option<Bytes>>,
    ) -> Result<()> {
        let store = self.store.clone();
        let path = ObjectPath::from(self.object(key));
        self.counts.puts.fetch_add(1, Ordering::Relaxed);
        let mut upload = self
            .run(async move { store.put_multipart(&path).await })?
            .map_err(|e| self.error("PUT (starting a multipart upload of)", key, e))?;
        let sent = (|| {
            while let Some(part) = next_part()? {
                let len = part.len() as u64;
                self.counts.puts.fetch_add(1, Ordering::Relaxed);
                self.run(upload.put_part(PutPayload::from(part)))?
                    .map_err(|e| self.error("PUT (a part of)", key, e))?;
                self.counts.bytes_up.fetch_add(len, Ordering::Relaxed);
            }
            Ok(())
        })();
        if let Err(e) = sent {
            let _ = self.run(async move { upload.abort().await });
            return Err(e);
        }
        self.counts.puts.fetch_add(1, Ordering::Relaxed);
        self.run(async move { upload.complete().await })?
            .map(|_| ())
            .map_err(|e| self.error("PUT (completing the multipart upload of)", key, e))
    }

    /// `put_create`, settled: `true` when the object is ours, created now or found holding exactly
    /// `data` (an earlier try of this PUT, by this client or by the S3 client's own retry, landed
    /// and only its answer was lost); `false` when another's object has the name.
    pub fn put_create_or_own(&self, key: &str, data: Bytes) -> Result<bool> {
        match self.put_create(key, data.clone())? {
            Created::Yes => Ok(true),
            Created::AlreadyThere => Ok(self.get(key)?.as_ref() == Some(&data)),
        }
    }

    /// PUTs `data` as `key`, replacing what is there: only the conformance probe, a reading of
    /// the bucket's clock (`clock::Now`) and a renewal (`clock::Renewed`) do this, each to an
    /// object of its own.
    pub fn put_overwrite(&self, key: &str, data: Bytes) -> Result<()> {
        let store = self.store.clone();
        let path = ObjectPath::from(self.object(key));
        self.counts.puts.fetch_add(1, Ordering::Relaxed);
        self.run(async move { store.put(&path, PutPayload::from(data)).await })?
            .map(|_| ())
            .map_err(|e| self.error("PUT", key, e))
    }

    /// The whole object, or `None` when there is none.
    pub fn get(&self, key: &str) -> Result<Option<Bytes>> {
        Ok(self
            .get_many(std::slice::from_ref(&key.to_string()))?
            .pop()
            .flatten())
    }

    /// The whole objects `keys`, in order (`None` for one that is not there): up to
    /// `GET_MANY_AT_ONCE` requests in flight, so an open that replays a thousand records waits
    /// for dozens of round trips, not a thousand.
    pub fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Bytes>>> {
        let store = self.store.clone();
        let paths: Vec<ObjectPath> = keys
            .iter()
            .map(|k| ObjectPath::from(self.object(k)))
            .collect();
        self.counts
            .gets
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        let got = self.run(async move {
            let fetches = paths.into_iter().enumerate().map(|(i, path)| {
                let store = store.clone();
                async move {
                    let got = match store.get(&path).await {
                        Ok(r) => r.bytes().await.map(Some),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(e),
                    };
                    (i, got)
                }
            });
            futures_util::stream::iter(fetches)
                .buffered(GET_MANY_AT_ONCE)
                .collect::<Vec<_>>()
                .await
        })?;
        let mut out = Vec::with_capacity(keys.len());
        for (i, got) in got {
            let got = got.map_err(|e| self.error("GET", &keys[i], e))?;
            if let Some(b) = &got {
                self.counts
                    .bytes_down
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
            }
            out.push(got);
        }
        Ok(out)
    }

    /// Bytes `range` of the object (a ranged GET).
    pub fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Bytes> {
        let store = self.store.clone();
        let path = ObjectPath::from(self.object(key));
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        let got = self.run(async move { store.get_range(&path, range).await })?;
        let got = got.map_err(|e| self.error("GET (a range of)", key, e))?;
        self.counts
            .bytes_down
            .fetch_add(got.len() as u64, Ordering::Relaxed);
        Ok(got)
    }

    /// Streams the object into `out` (a bounded buffer at a time); its length and CRC32C.
    pub fn get_into(&self, key: &str, out: &mut impl Write) -> Result<(u64, u32)> {
        let store = self.store.clone();
        let path = ObjectPath::from(self.object(key));
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::sync_channel::<object_store::Result<Bytes>>(4);
        self.handle.spawn(async move {
            let mut stream = match store.get(&path).await {
                Ok(r) => r.into_stream(),
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            while let Some(chunk) = stream.next().await {
                if tx.send(chunk).is_err() {
                    return;
                }
            }
        });
        let (mut len, mut crc) = (0u64, 0u32);
        for chunk in rx {
            let chunk = chunk.map_err(|e| self.error("GET", key, e))?;
            out.write_all(&chunk).map_err(|e| Error::Io {
                context: format!("writing the cached copy of {}", self.object(key)),
                source: e,
            })?;
            crc = crc32c::crc32c_append(crc, &chunk);
            len += chunk.len() as u64;
        }
        self.counts.bytes_down.fetch_add(len, Ordering::Relaxed);
        Ok((len, crc))
    }

    /// The bucket's time of the object's last PUT (Unix seconds), or `None` when there is none.
    pub(crate) fn stamp(&self, key: &str) -> Result<Option<i64>> {
        Ok(self.head_meta(key)?.map(|m| m.last_modified.timestamp()))
    }

    /// The object's length, or `None` when there is none.
    pub fn head(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.head_meta(key)?.map(|m| m.size))
    }

    fn head_meta(&self, key: &str) -> Result<Option<object_store::ObjectMeta>> {
        let store = self.store.clone();
        let path = ObjectPath::from(self.object(key));
        self.counts.gets.fetch_add(1, Ordering::Relaxed);
        let meta = self.run(async move {
            match store.head(&path).await {
                Ok(m) => Ok(Some(m)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        meta.map_err(|e| self.error("HEAD", key, e))
    }

    /// The keys (relative to the prefix) under `dir/`, sorted.
    pub fn list(&self, dir: &str) -> Result<Vec<String>> {
        Ok(self.list_aged(dir)?.into_iter().map(|(k, _)| k).collect())
    }

    /// The keys under `dir/` that sort after `after` (relative to the prefix), sorted.
    pub fn list_after(&self, dir: &str, after: &str) -> Result<Vec<String>> {
        Ok(self
            .list_from(dir, Some(after))?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }

    /// The keys under `dir/`, sorted, each with the Unix second it was last written.
    pub fn list_aged(&self, dir: &str) -> Result<Vec<(String, i64)>> {
        self.list_from(dir, None)
    }

    /// One LIST of `dir/` (past `after`, when given): the keys relative to the prefix, sorted,
    /// each with the Unix second it was last written.
    fn list_from(&self, dir: &str, after: Option<&str>) -> Result<Vec<(String, i64)>> {
        let store = self.store.clone();
        let path = ObjectPath::from(self.object(dir));
        let offset = after.map(|a| ObjectPath::from(self.object(a)));
        self.counts.lists.fetch_add(1, Ordering::Relaxed);
        let listed = self.run(async move {
            let mut names = Vec::new();
            let mut stream = match &offset {
                Some(offset) => store.list_with_offset(Some(&path), offset),
                None => store.list(Some(&path)),
            };
            while let Some(meta) = stream.next().await {
                let meta = meta?;
                names.push((meta.location.to_string(), meta.last_modified.timestamp()));
            }
            Ok::<_, object_store::Error>(names)
        })?;
        let mut names = listed.map_err(|e| self.error("LIST", dir, e))?;
        let strip = self.object("");
        for (n, _) in &mut names {
            if let Some(rest) = n.strip_prefix(&strip) {
                *n = rest.to_string();
            }
        }
        names.sort();
        Ok(names)
    }

    /// Deletes `keys` (a multi-object DELETE per thousand); a key already gone is no error.
    pub fn delete_many(&self, keys: Vec<String>) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        let paths: Vec<object_store::Result<ObjectPath>> = keys
            .iter()
            .map(|k| Ok(ObjectPath::from(self.object(k))))
            .collect();
        self.counts
            .deletes
            .fetch_add(keys.len().div_ceil(1000) as u64, Ordering::Relaxed);
        let deleted = self.run(async move {
            let mut results = store.delete_stream(futures_util::stream::iter(paths).boxed());
            while let Some(r) = results.next().await {
                match r {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })?;
        deleted.map_err(|e| self.error("DELETE", &keys[0], e))
    }

    pub fn delete(&self, key: &str) -> Result<()> {
        let store = self.store.clone();
        let path = ObjectPath::from(self.object(key));
        self.counts.deletes.fetch_add(1, Ordering::Relaxed);
        self.run(async move { store.delete(&path).await })?
            .map_err(|e| self.error("DELETE", key, e))
    }

    pub fn requests(&self) -> Requests {
        let c = &self.counts;
        Requests {
            gets: c.gets.load(Ordering::Relaxed),
            puts: c.puts.load(Ordering::Relaxed),
            deletes: c.deletes.load(Ordering::Relaxed),
            lists: c.lists.load(Ordering::Relaxed),
            bytes_up: c.bytes_up.load(Ordering::Relaxed),
            bytes_down: c.bytes_down.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A request's task ended without an answer (it panicked inside the S3 client).
#[cold]
fn task_lost() -> Error {
    Error::Io {
        context: "the bucket client".into(),
        source: std::io::Error::other("a request ended without an answer"),
    }
}
