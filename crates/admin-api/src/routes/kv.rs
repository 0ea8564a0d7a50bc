//! One key: `GET` (whole, a byte range, or streamed), `HEAD`, `PUT` and `DELETE
//! /api/v1/kv/{key}` (the key base64url in the path).

use std::io::{Seek, SeekFrom};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use strata_engine::{Clock, ColumnFamily, ReadOptions, ValueReader, WriteBatch};

use super::{
    DeleteQuery, ON_WORKER_BYTES, PutQuery, ReadQuery, blocking, fits_on_worker, logged,
    media_type, parse, query, read, unsupported,
};
use crate::codec::{Encoding, decode_path_key};
use crate::freshness::CommittedAt;
use crate::problem::Problem;
use crate::range::{self, Wanted};
use crate::state::{AppState, Inner};

/// A key and its value.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct KvItem {
    pub key: String,
    pub value: String,
}

/// Reads one key. With `raw=1` the value is the body, and a `Range` header of one byte range
/// (`bytes=A-B`, `bytes=A-`, `bytes=-N`) answers 206 with that part; a value over 1 MiB is
/// streamed from one snapshot, never held whole.
#[utoipa::path(get, path = "/api/v1/kv/{key}", tag = "kv",
    params(("key" = String, Path, description = "the key, base64url without padding"), ReadQuery,
        ("Range" = Option<String>, Header, description = "with raw=1: one range of bytes, `bytes=A-B`, `bytes=A-` or `bytes=-N`; anything else is ignored")),
    responses(
        (status = 200, description = "the key and its value (or the raw value with raw=1)", content((KvItem = "application/json"), (Vec<u8> = "application/octet-stream"))),
        (status = 206, description = "with raw=1 and a Range header: that part of the value, with Content-Range", content_type = "application/octet-stream"),
        (status = 400, description = "a bad key, query or column family", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such key", body = Problem, content_type = "application/problem+json"),
        (status = 416, description = "the range lies past the value's end; Content-Range gives its length", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "not UTF-8, with encoding=utf8, or `min_seq` past every write this store (no replica) has", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`min_seq`: the replica did not show it within the server's bound (or the bucket is unreachable)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(key): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let q: ReadQuery = query(&uri)?;
    let key = decode_path_key(&key)?;
    crate::freshness::at_least(&state, q.min_seq).await?;
    if q.raw {
        // An If-Range can never match: no validator is sent, so the whole value is served
        // (RFC 9110 13.1.5), never a part of a value that may have changed since.
        let range = headers
            .get(header::RANGE)
            .filter(|_| !headers.contains_key(header::IF_RANGE))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        return raw_value(&state, q.cf, key, range).await;
    }
    let enc = q.encoding;
    let shown = key.clone();
    let value = read(&state, move |s, opts| {
        let cf = s.cf(q.cf.as_deref())?;
        let value = s.db.get_cf_with(opts, &cf, &key)?;
        fits_on_worker(opts, value.as_ref().map_or(0, |v| v.len() as u64))?;
        Ok(value.map(|v| v.to_vec()))
    })
    .await?
    .ok_or_else(|| Problem::not_found("no such key"))?;
    let body = KvItem {
        key: enc.encode("key", &shown)?,
        value: enc.encode("value", &value)?,
    };
    Ok(axum::Json(body).into_response())
}

/// A raw value (or the part `range` asks for) as the body: read at once up to `STREAM_ABOVE`
/// bytes, streamed beyond.
async fn raw_value(
    state: &AppState,
    cf: Option<String>,
    key: Vec<u8>,
    range: Option<String>,
) -> Result<Response, Problem> {
    let found = read(state, move |s, opts| {
        let cf = s.cf(cf.as_deref())?;
        if range.is_none() {
            // The common case, a small value: one lookup, no snapshot.
            // On a worker, only what is small enough to copy there.
            let asked = if opts.cache_only {
                ON_WORKER_BYTES as u64 + 1
            } else {
                STREAM_ABOVE
            };
            let Some(first) = s.db.read_range_cf(opts, &cf, &key, 0, asked)? else {
                return Ok(None);
            };
            fits_on_worker(opts, first.value_len)?;
            if first.value_len <= STREAM_ABOVE {
                let len = first.value_len;
                return Ok(Some(RawBody::Read(
                    len,
                    Wanted::Whole,
                    first.bytes.into_vec(),
                )));
            }
        }
        if opts.cache_only {
            // A part, or a value to stream: read step by step, off the async workers.
            return Err(strata_engine::Error::Incomplete("a value read in steps".into()).into());
        }
        let Some(mut reader) = s.db.value_reader_cf(&ReadOptions::default(), &cf, &key)? else {
            return Ok(None);
        };
        let len = reader.value_len();
        let wanted = range::wanted(range.as_deref(), len);
        let (start, end) = match wanted {
            Wanted::Whole => (0, len),
            Wanted::Part { start, end } => (start, end),
            Wanted::Unsatisfiable => return Ok(Some(RawBody::Unsatisfiable(len))),
        };
        reader
            .seek(SeekFrom::Start(start))
            .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        if end - start > STREAM_ABOVE {
            return Ok(Some(RawBody::Stream(len, wanted, reader, end - start)));
        }
        let mut bytes = Vec::with_capacity((end - start) as usize);
        while (bytes.len() as u64) < end - start {
            let step = reader.read_step((end - start) as usize - bytes.len())?;
            if step.bytes.is_empty() {
                break;
            }
            bytes.extend_from_slice(&step.bytes);
        }
        Ok(Some(RawBody::Read(len, wanted, bytes)))
    })
    .await?
    .ok_or_else(|| Problem::not_found("no such key"))?;
    let (len, wanted, body, size) = match found {
        RawBody::Unsatisfiable(len) => {
            let problem = Problem::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                format!("the range lies past the end of the {len}-byte value"),
            );
            return Ok(
                ([(header::CONTENT_RANGE, format!("bytes */{len}"))], problem).into_response(),
            );
        }
        RawBody::Read(len, wanted, bytes) => {
            let size = bytes.len() as u64;
            (len, wanted, Body::from(bytes), size)
        }
        RawBody::Stream(len, wanted, reader, size) => (len, wanted, stream(reader, size), size),
    };
    let mut response = raw_response(size);
    if let Wanted::Part { start, end } = wanted {
        response = response.status(StatusCode::PARTIAL_CONTENT).header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{len}", end - 1),
        );
    }
    response
        .body(body)
        .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// The headers of a raw answer of `size` bytes: GET's (whole or part) and HEAD's.
fn raw_response(size: u64) -> axum::http::response::Builder {
    Response::builder()
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::CONTENT_LENGTH, size)
}

/// Values (or parts) larger than this are streamed.
const STREAM_ABOVE: u64 = 1 << 20;

/// What a raw read found: the value's length with what was asked of it, and the bytes or the
/// reader to stream `size` of them from.
enum RawBody {
    Read(u64, Wanted, Vec<u8>),
    Stream(u64, Wanted, ValueReader, u64),
    Unsatisfiable(u64),
}

/// A body fed by a blocking task that reads `size` bytes from `reader`, a step at a time, at
/// most two steps ahead of the client. A failed read ends the body early, which the client sees
/// as a response shorter than its Content-Length.
fn stream(mut reader: ValueReader, size: u64) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
    tokio::task::spawn_blocking(move || {
        let mut left = size;
        while left > 0 {
            match reader.read_step(left.min(STREAM_ABOVE) as usize) {
                Ok(step) if step.bytes.is_empty() => return,
                Ok(step) => {
                    left -= step.bytes.len() as u64;
                    if tx
                        .blocking_send(Ok(Bytes::from(step.bytes.into_vec())))
                        .is_err()
                    {
                        return; // the client went away
                    }
                }
                Err(e) => {
                    tracing::warn!("streaming a value failed: {e}");
                    let _ = tx.blocking_send(Err(std::io::Error::other(e)));
                    return;
                }
            }
        }
    });
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}

/// The length of a key's raw value, without its bytes (whatever `raw` says).
#[utoipa::path(head, path = "/api/v1/kv/{key}", tag = "kv",
    params(("key" = String, Path, description = "the key, base64url without padding"), ReadQuery),
    responses(
        (status = 200, description = "Content-Length is the raw value's length; Accept-Ranges says ranges are served"),
        (status = 400, description = "a bad key, query or column family"),
        (status = 404, description = "no such key"),
        (status = 422, description = "`min_seq` past every write this store (no replica) has"),
        (status = 503, description = "`min_seq`: the replica did not show it within the server's bound")),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn head(
    State(state): State<AppState>,
    Path(key): Path<String>,
    uri: Uri,
) -> Result<Response, Problem> {
    // Any query a GET takes: HEAD answers for the same URL.
    let q: ReadQuery = query(&uri)?;
    let key = decode_path_key(&key)?;
    crate::freshness::at_least(&state, q.min_seq).await?;
    let len = blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        Ok(s.db.value_size_cf(&cf, &key)?)
    })
    .await?
    .ok_or_else(|| Problem::not_found("no such key"))?;
    raw_response(len)
        .body(Body::empty())
        .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// The value to put, as JSON.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PutBody {
    value: String,
    /// How `value` is written: base64 (the default) or utf8 text.
    #[serde(default)]
    encoding: Encoding,
}

/// How a `PUT` body carries its value, by its Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PutForm {
    /// `application/json`: `{"value": ..., "encoding": ...}`.
    Json,
    /// `application/octet-stream`, or no Content-Type: the body is the value.
    Raw,
}

/// The form a `PUT` body's Content-Type names; any other type is refused (415) rather than
/// guessed at, so a form post or a text upload never stores what the client did not mean.
fn put_form(headers: &HeaderMap) -> Result<PutForm, Problem> {
    match media_type(headers).as_deref() {
        None | Some("application/octet-stream") => Ok(PutForm::Raw),
        Some("application/json") => Ok(PutForm::Json),
        Some(other) => Err(unsupported(
            other,
            "the value itself as application/octet-stream, or application/json {\"value\": ...}",
        )),
    }
}

/// Writes one key. Its value is the body itself (`application/octet-stream`), or a JSON
/// `{"value": ...}` (`application/json`). A raw body without `ttl` streams into the store as it
/// arrives: memory stays bounded for any size up to the raw value limit (3 GiB by default), and
/// the value is stored only once the whole body arrived.
#[utoipa::path(put, path = "/api/v1/kv/{key}", tag = "kv",
    params(("key" = String, Path, description = "the key, base64url without padding"), PutQuery),
    request_body(content(
        (PutBody = "application/json"),
        (Vec<u8> = "application/octet-stream"))),
    responses((status = 204, description = "written"),
        (status = 400, description = "a bad key, query or body, or a body cut short", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "the store is served read-only", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such column family", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "the body is over its limit", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "a Content-Type other than application/json or application/octet-stream", body = Problem, content_type = "application/problem+json"),
        (status = 507, description = "the disk is full", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn put(
    State(state): State<AppState>,
    Path(key): Path<String>,
    req: axum::extract::Request,
) -> Result<(Option<CommittedAt>, StatusCode), Problem> {
    // The request whole, rather than its headers and URI as extractors (copies of each).
    let (parts, body) = req.into_parts();
    let q: PutQuery = query(&parts.uri)?;
    let form = put_form(&parts.headers)?;
    drop(parts);
    state.inner.check_writable()?;
    let key = decode_path_key(&key)?;
    let limits = state.inner.limits.clone();
    if form == PutForm::Raw && q.ttl.is_none() {
        let committed =
            super::upload::put_streamed(&state, q.cf, q.sync, key, body, limits.raw_value_bytes)
                .await?;
        return Ok((committed, StatusCode::NO_CONTENT));
    }
    let body = axum::body::to_bytes(body, limits.body_bytes)
        .await
        .map_err(|e| {
            Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "request body over {} bytes, or cut short: {e}",
                    limits.body_bytes
                ),
            )
        })?;
    let value = match form {
        // No body is an empty value, whatever its type (the document marks the body optional).
        PutForm::Raw => body.to_vec(),
        PutForm::Json if body.is_empty() => Vec::new(),
        PutForm::Json => {
            let b: PutBody = parse(&body)?;
            b.encoding.decode("value", &b.value)?
        }
    };
    let cf = state.inner.cf(q.cf.as_deref())?;
    let mut batch = WriteBatch::new();
    let now = strata_engine::SystemClock.now_secs();
    let ttl = q.ttl.map(|t| u64::from(t.get()));
    super::batch::put(&mut batch, &cf, &key, &value, ttl, now);
    let len = value.len() as u64;
    drop(value);
    let committed = super::write(&state, cf, batch, q.sync, move |s, cf| {
        put_done(s, cf, key, len, "")
    })
    .await?;
    Ok((committed, StatusCode::NO_CONTENT))
}

/// Logs a stored put of `len` bytes (`how` it came, when not in one piece) and tells the mount.
pub(crate) fn put_done(s: &Inner, cf: &ColumnFamily, key: Vec<u8>, len: u64, how: &str) {
    logged(
        "put",
        cf,
        format_args!("{} ({len} bytes{how})", super::LoggedKey(&key)),
    );
    s.changed(cf, [key]);
}

/// Deletes one key.
#[utoipa::path(delete, path = "/api/v1/kv/{key}", tag = "kv",
    params(("key" = String, Path, description = "the key, base64url without padding"), DeleteQuery),
    responses((status = 204, description = "deleted (or was absent)"), (status = 403, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(key): Path<String>,
    uri: Uri,
) -> Result<(Option<CommittedAt>, StatusCode), Problem> {
    let q: DeleteQuery = query(&uri)?;
    state.inner.check_writable()?;
    let key = decode_path_key(&key)?;
    let cf = state.inner.cf(q.cf.as_deref())?;
    let mut batch = WriteBatch::new();
    strata_fusefs::delete_with_metadata(&state.inner.db, &mut batch, &cf, &key);
    let committed = super::write(&state, cf, batch, q.sync, move |s, cf| {
        logged("delete", cf, super::LoggedKey(&key));
        s.changed(cf, [key]);
    })
    .await?;
    Ok((committed, StatusCode::NO_CONTENT))
}
