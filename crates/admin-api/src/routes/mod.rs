//! The routes, one file per group, and what they share: running engine calls off the async
//! workers, parsing bodies into problem documents, the common query parameters.

pub(crate) mod admin;
pub(crate) mod backups;
pub(crate) mod batch;
pub(crate) mod cfs;
mod encodings_doc;
pub(crate) mod inspect;
pub(crate) mod kv;
pub(crate) mod openapi;
mod problems_doc;
pub(crate) mod scan;
pub(crate) mod sync_to;
pub(crate) mod upload;

pub(crate) use sync_to::SyncTo;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use strata_engine::{ColumnFamily, ReadOptions, TryWrite, WriteBatch};

use crate::codec::Encoding;
use crate::freshness::CommittedAt;
use crate::problem::Problem;
use crate::state::{AppState, Inner};
use admin::optional_body;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/metrics", get(crate::metrics::metrics))
        .route("/api/v1/session", post(crate::auth::session))
        .route(
            "/api/openapi.json",
            get(|| async {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    openapi::document(),
                )
            }),
        )
        // The UI reads the document above; it serves none of its own.
        .merge(
            utoipa_swagger_ui::SwaggerUi::new("/api/docs")
                .config(utoipa_swagger_ui::Config::new(["/api/openapi.json"])),
        )
        .route(
            "/api/v1/kv/{key}",
            get(kv::get)
                .head(kv::head)
                .put(kv::put)
                .patch(upload::patch)
                .delete(kv::delete),
        )
        .route("/api/v1/kv", get(scan::list))
        .route("/api/v1/kv:scan", post(scan::scan))
        .route("/api/v1/kv:batchGet", post(batch::batch_get))
        .route("/api/v1/kv:batchWrite", post(batch::batch_write))
        .route("/api/v1/kv:deleteRange", post(scan::delete_range))
        .route("/api/v1/cfs", get(cfs::list).post(cfs::create))
        .route("/api/v1/admin:flush", post(admin::flush))
        .route("/api/v1/admin:compactRange", post(admin::compact_range))
        .route("/api/v1/admin:backup", post(backups::create_backup))
        .route("/api/v1/backups", get(backups::list_backups))
        .route("/api/v1/cfs/{name}", get(cfs::detail).delete(cfs::drop))
        .route("/api/v1/server", get(admin::server))
        .route("/api/v1/stats", get(admin::stats))
        .route("/api/v1/admin/verify", get(admin::verify))
        .route("/api/v1/lsm", get(inspect::lsm))
        .route("/api/v1/lsm/files", get(inspect::files))
        .route("/api/v1/tombstones", get(inspect::tombstones))
        .route("/api/v1/blobs", get(inspect::blobs))
        .route("/api/v1/cache", get(inspect::cache))
        .route("/api/v1/events", get(crate::events::events))
}

/// Runs an engine call on the blocking pool: the engine is synchronous, and may wait on the disk.
pub(crate) async fn blocking<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce(&Inner) -> Result<T, Problem> + Send + 'static,
) -> Result<T, Problem> {
    let inner = state.inner.clone();
    tokio::task::spawn_blocking(move || f(&inner))
        .await
        .map_err(|e| {
            Problem::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("task: {e}"),
            )
        })?
}

/// The media type a request's Content-Type names, lowercased, without its parameters; `None`
/// without one.
pub(crate) fn media_type(headers: &HeaderMap) -> Option<Cow<'_, str>> {
    let value = headers.get(header::CONTENT_TYPE)?;
    let essence = value.to_str().unwrap_or("").split(';').next().unwrap_or("");
    let essence = essence.trim();
    Some(if essence.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(essence.to_ascii_lowercase())
    } else {
        Cow::Borrowed(essence)
    })
}

/// A request body of a media type the route does not take: 415, naming the ones it does.
pub(crate) fn unsupported(given: &str, takes: &str) -> Problem {
    Problem::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!("Content-Type {given:?}: this route takes {takes}"),
    )
}

/// A JSON route's body, which is `application/json`: a body of any other type is refused (415)
/// rather than read as JSON, so that a form post or a text upload never passes for one. No body
/// (an optional one left out) needs no type. An extractor rather than a layer: a layer costs
/// every request of its routes a boxed service and future.
pub(crate) struct JsonBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        use axum::body::HttpBody;
        // Known empty (no Content-Length or a zero one, not chunked) or not.
        let has_body = req.body().size_hint().upper() != Some(0);
        let refused = match media_type(req.headers()) {
            Some(t) if has_body && t != "application/json" => {
                Some(unsupported(&t, "application/json"))
            }
            None if has_body => Some(unsupported("", "application/json")),
            _ => None,
        };
        if let Some(problem) = refused {
            return Err(problem.into_response());
        }
        Bytes::from_request(req, state)
            .await
            .map(JsonBody)
            .map_err(IntoResponse::into_response)
    }
}

/// The most bytes a read or a write handles on an async worker: past this, copying and encoding
/// the value costs more than the hop to the blocking pool saves.
pub(crate) const ON_WORKER_BYTES: usize = 64 << 10;

/// Times a small write tries to commit on its worker before it moves to the pool, while the
/// engine answers `Busy`: another worker's write in progress (with two workers, a fifth of all
/// PUTs under load) ends within microseconds, so the worker serves other requests meanwhile and
/// tries again, where the hop to the pool and back would cost more than the write. A write that
/// must wait (`MustWait`) goes to the pool at once.
const TRIES_ON_WORKER: usize = 3;

/// Refuses `bytes` of values to a cache-only read, one on a worker, when they are more than it
/// copies and encodes there (`ON_WORKER_BYTES`): asked again on the pool, as a read that needs
/// the disk is.
pub(crate) fn fits_on_worker(opts: &ReadOptions, bytes: u64) -> Result<(), Problem> {
    if opts.cache_only && bytes > ON_WORKER_BYTES as u64 {
        return Err(strata_engine::Error::Incomplete(
            "a value too large for an async worker".into(),
        )
        .into());
    }
    Ok(())
}

/// Runs a read where the request is, on the async worker, when the engine can answer it from
/// memory (`ReadOptions::cache_only`: memtables and cached blocks, microseconds); only a read
/// that needs the disk moves to the blocking pool and is asked again there. The hop costs more
/// than the read it carries: on loopback it halved a cached GET's rate. `f` is the read, given
/// its options.
pub(crate) async fn read<T: Send + 'static>(
    state: &AppState,
    f: impl Fn(&Inner, &ReadOptions) -> Result<T, Problem> + Send + 'static,
) -> Result<T, Problem> {
    let in_memory = ReadOptions {
        cache_only: true,
        ..Default::default()
    };
    let places = &state.inner.places.reads;
    match f(&state.inner, &in_memory) {
        Err(p) if p.is_incomplete() => {
            places.pool.fetch_add(1, Ordering::Relaxed);
            blocking(state, move |s| f(s, &ReadOptions::default())).await
        }
        done => {
            places.worker.fetch_add(1, Ordering::Relaxed);
            done
        }
    }
}

/// Commits `batch`, then runs `after` (the log line, the event): on the async worker when the
/// engine can commit it without waiting (`Db::try_write`: no sync, no blob file, no stall, no
/// other writer leading; tried `TRIES_ON_WORKER` times) and no mount shows `cf` (telling the
/// kernel is a system call that may wait); else on the blocking pool, as `read` does for reads.
/// `/metrics` counts both places.
pub(crate) async fn write(
    state: &AppState,
    cf: ColumnFamily,
    mut batch: WriteBatch,
    sync: SyncTo,
    after: impl FnOnce(&Inner, &ColumnFamily) + Send + 'static,
) -> Result<Option<CommittedAt>, Problem> {
    let inner = &state.inner;
    let opts = sync.write_options();
    let empty = batch.is_empty();
    // A large batch is a large copy and checksum: work for the pool, not a worker. A synced
    // write always waits.
    let small = batch.size_in_bytes() <= ON_WORKER_BYTES;
    if small && !opts.sync && inner.mounted(&cf).is_none() {
        for tries_left in (0..TRIES_ON_WORKER).rev() {
            match inner.db.try_write(batch, &opts)? {
                TryWrite::Committed(seq) => {
                    inner.places.writes.worker.fetch_add(1, Ordering::Relaxed);
                    after(inner, &cf);
                    return Ok(CommittedAt::of_write(empty, seq));
                }
                TryWrite::Busy(back) if tries_left > 0 => {
                    batch = back;
                    tokio::task::yield_now().await;
                }
                TryWrite::Busy(back) | TryWrite::MustWait(back) => {
                    batch = back;
                    break;
                }
            }
        }
    }
    inner.places.writes.pool.fetch_add(1, Ordering::Relaxed);
    blocking(state, move |s| {
        let committed = s.write(batch, sync)?;
        after(s, &cf);
        Ok(committed)
    })
    .await
}

/// A JSON body, or a problem document saying what is wrong with it. Every body is an object
/// (or `null` where it is optional): serde would also read a struct from an array of its
/// fields in order, which no document describes.
pub(crate) fn parse<'a, T: Deserialize<'a>>(body: &'a Bytes) -> Result<T, Problem> {
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(Problem::bad_request(
            "request body: a JSON object is expected, not an array",
        ));
    }
    serde_json::from_slice(body).map_err(|e| Problem::bad_request(format!("request body: {e}")))
}

/// The query string as `T`, or a problem document naming what is wrong.
pub(crate) fn query<T: DeserializeOwned>(uri: &axum::http::Uri) -> Result<T, Problem> {
    axum::extract::Query::<T>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|e| Problem::bad_request(format!("query: {}", e.body_text())))
}

/// `GET /kv/{key}`'s query: which column family, and how the value comes back.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReadQuery {
    pub cf: Option<String>,
    /// How the key and value travel in the JSON answer (not with raw=1).
    #[serde(default)]
    pub encoding: Encoding,
    /// The value itself as `application/octet-stream` (`raw=1`), ranges served.
    #[serde(default, deserialize_with = "flag")]
    #[param(value_type = Option<String>)]
    pub raw: bool,
    /// Answer only once the store shows this sequence number (a write's `Strata-Sequence`):
    /// a replica waits to catch up, up to the server's bound, else 503.
    #[serde(default, deserialize_with = "int64")]
    #[param(value_type = Option<u64>)]
    pub min_seq: Option<u64>,
}

/// `DELETE /kv/{key}`'s query.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteQuery {
    pub cf: Option<String>,
    /// Sync the WAL before answering: `1`/`true` as far as the store's default, `local` to
    /// this machine's disk, `bucket` to the store's bucket.
    #[serde(default, deserialize_with = "sync_to::query")]
    #[param(value_type = Option<String>)]
    pub sync: SyncTo,
}

/// `PUT /kv/{key}`'s query.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PutQuery {
    pub cf: Option<String>,
    /// Sync the WAL before answering: `1`/`true` as far as the store's default, `local` to
    /// this machine's disk, `bucket` to the store's bucket.
    #[serde(default, deserialize_with = "sync_to::query")]
    #[param(value_type = Option<String>)]
    pub sync: SyncTo,
    /// Seconds until the key expires: 1 to 4294967295 (136 years), refused outside that on
    /// every route, as the document says.
    #[serde(default, deserialize_with = "ttl_secs")]
    #[param(value_type = Option<u32>)]
    pub ttl: Option<std::num::NonZeroU32>,
}

/// A TTL in a query string (`codec::ttl_in_range`).
fn ttl_secs<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::num::NonZeroU32>, D::Error> {
    let s = String::deserialize(d)?;
    crate::codec::ttl_in_range(crate::codec::parse_whole(&s), &format_args!("{s:?}"))
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// A whole number in a query string, typed int64 as the document says: 0 to 2^63 - 1.
pub(crate) fn int64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = String::deserialize(d)?;
    crate::codec::parse_int64(&s).map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "{s:?} is not a whole number from 0 to {}",
            i64::MAX
        ))
    })
}

/// `1`, `true`, `0`, `false`.
pub(crate) fn flag<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let s = String::deserialize(d)?;
    match s.as_str() {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        other => Err(serde::de::Error::custom(format!(
            "{other:?} is not 1, 0, true or false"
        ))),
    }
}

/// Logs a mutation (every one is logged).
pub(crate) fn logged(what: &str, cf: &strata_engine::ColumnFamily, detail: impl std::fmt::Display) {
    tracing::info!(target: "strata::api", cf = cf.name(), "{what} {detail}");
}

/// A key as a mutation's log line shows it: its text (invalid UTF-8 replaced), cut after
/// `LOGGED_KEY_BYTES` bytes with the key's length when it is longer. A key may be megabytes,
/// and a line must stay a line: the logger drops one past its whole buffer.
pub(crate) struct LoggedKey<'a>(pub &'a [u8]);

/// The most bytes of a key a log line shows.
const LOGGED_KEY_BYTES: usize = 256;

impl std::fmt::Display for LoggedKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = &self.0[..self.0.len().min(LOGGED_KEY_BYTES)];
        f.write_str(&String::from_utf8_lossy(shown))?;
        if shown.len() < self.0.len() {
            write!(f, "… ({}-byte key)", self.0.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::LoggedKey;

    #[test]
    fn a_logged_key_is_cut_with_its_length_when_long() {
        assert_eq!(LoggedKey(b"users/alice").to_string(), "users/alice");
        assert_eq!(LoggedKey(&[b'a', 0xff]).to_string(), "a\u{fffd}");
        assert_eq!(LoggedKey(&[b'k'; 256]).to_string(), "k".repeat(256));
        let long = LoggedKey(&[b'k'; 300_000]).to_string();
        assert_eq!(long, format!("{}… (300000-byte key)", "k".repeat(256)));
    }
}
