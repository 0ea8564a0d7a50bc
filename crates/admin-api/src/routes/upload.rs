//! Writing raw bytes into a value: `PATCH /api/v1/kv/{key}` (at an offset, or appended) and the
//! streamed form of a raw `PUT`, which spills a large body into a value file as it arrives so
//! that memory stays bounded whatever the upload's size.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use futures_util::StreamExt;
use serde::Deserialize;
use strata_engine::{ColumnFamily, WriteBatch};

use super::kv::put_done;
use super::{SyncTo, blocking, logged, query};
use crate::codec::decode_path_key;
use crate::freshness::CommittedAt;
use crate::problem::Problem;
use crate::state::{AppState, Inner};

/// Bodies up to this size are written as one put; larger ones stream into a value file.
const SPILL_AT: usize = 1 << 20;

/// Where a `PATCH` writes its body.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PatchParams {
    /// Column family (default: `default`).
    pub cf: Option<String>,
    /// Where the body goes: a byte offset (zero-filling a gap past the end; the key must
    /// exist), or `end` to append (a missing key starts empty).
    #[param(value_type = String)]
    pub offset: At,
    /// Sync the WAL before answering: `1`/`true` as far as the store's default, `local` to
    /// this machine's disk, `bucket` to the store's bucket.
    #[serde(default, deserialize_with = "super::sync_to::query")]
    #[param(value_type = Option<String>)]
    pub sync: SyncTo,
}

/// The largest offset a `PATCH` takes: room below the largest value for a body of the largest
/// size a server takes (`serve` refuses a body limit over `MAX_BODY_LIMIT`), so that every
/// offset the document allows lands inside a value the store can hold.
pub(crate) const MAX_PATCH_OFFSET: u64 =
    strata_engine::MAX_VALUE_SIZE - crate::MAX_BODY_LIMIT as u64;

/// Where a `PATCH` writes: `offset=N` or `offset=end`. One parameter, so that no request can
/// name both or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum At {
    Offset(u64),
    End,
}

impl<'de> Deserialize<'de> for At {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<At, D::Error> {
        let s = String::deserialize(d)?;
        if s == "end" {
            return Ok(At::End);
        }
        crate::codec::parse_whole(&s)
            .filter(|o| *o <= MAX_PATCH_OFFSET)
            .map(At::Offset)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "offset {s:?} is neither a byte offset from 0 to {MAX_PATCH_OFFSET} nor `end`"
                ))
            })
    }
}

/// Writes the raw body into a key's value at `offset`, or appends it (`offset=end`): the cost
/// is the body, not the value. Two appends at once both land, one after the other.
#[utoipa::path(patch, path = "/api/v1/kv/{key}", tag = "kv",
    params(("key" = String, Path, description = "the key, base64url without padding"), PatchParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "the bytes to write"),
    responses(
        (status = 204, description = "written"),
        (status = 400, description = "a bad key or query, or a write past the largest value", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "the store is served read-only", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "a byte offset given and no such key (or no such column family)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "the body is over the request body limit", body = Problem, content_type = "application/problem+json"),
        (status = 507, description = "the disk is full", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn patch(
    State(state): State<AppState>,
    Path(key): Path<String>,
    uri: Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Result<(Option<CommittedAt>, StatusCode), Problem> {
    let q: PatchParams = query(&uri)?;
    match super::media_type(&headers).as_deref() {
        None | Some("application/octet-stream") => {}
        Some(other) => return Err(super::unsupported(other, "application/octet-stream")),
    }
    state.inner.check_writable()?;
    let key = decode_path_key(&key)?;
    let offset = match q.offset {
        At::Offset(o) => Some(o),
        At::End => None,
    };
    let committed = blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let mut batch = WriteBatch::new();
        match offset {
            Some(o) => batch.write_at_cf(&cf, &key, o, &body),
            None => batch.append_cf(&cf, &key, &body),
        }
        let committed = s.write(batch, q.sync)?;
        let at = offset.map_or_else(|| "the end".to_string(), |o| format!("offset {o}"));
        logged(
            "patch",
            &cf,
            format_args!("{} ({} bytes at {at})", super::LoggedKey(&key), body.len()),
        );
        s.changed(&cf, [key]);
        Ok(committed)
    })
    .await?;
    Ok((committed, StatusCode::NO_CONTENT))
}

/// What the upload sends its writer.
enum Piece {
    Bytes(Bytes),
    /// The body ended whole: store the value.
    Done,
}

/// A raw `PUT` body: up to `SPILL_AT` bytes it is one put; past that it streams into a value
/// file (`Db::create_value_file`) that is stored only once the whole body arrived, so a client
/// that goes away mid-upload leaves nothing behind. `limit` caps the value.
pub(crate) async fn put_streamed(
    state: &AppState,
    cf: Option<String>,
    sync: SyncTo,
    key: Vec<u8>,
    body: Body,
    limit: u64,
) -> Result<Option<CommittedAt>, Problem> {
    let too_large = || {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the value is over the limit of {limit} bytes"),
        )
    };
    let cut = |e: axum::Error| Problem::bad_request(format!("request body: {e}"));
    let mut stream = body.into_data_stream();
    let mut head = Vec::new();
    while head.len() <= SPILL_AT {
        match stream.next().await {
            Some(chunk) => head.extend_from_slice(&chunk.map_err(cut)?),
            None => {
                if head.len() as u64 > limit {
                    return Err(too_large());
                }
                let len = head.len() as u64;
                let cf = state.inner.cf(cf.as_deref())?;
                let mut batch = WriteBatch::new();
                batch.put_cf(&cf, &key, &head);
                drop(head);
                let done = move |s: &Inner, cf: &ColumnFamily| put_done(s, cf, key, len, "");
                return super::write(state, cf, batch, sync, done).await;
            }
        }
    }
    let mut total = head.len() as u64;
    if total > limit {
        return Err(too_large());
    }
    // Two chunks in flight at most: the upload waits for the disk, memory stays bounded.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Piece>(2);
    let inner = state.inner.clone();
    let writer = tokio::task::spawn_blocking(move || -> Result<Option<CommittedAt>, Problem> {
        let cf = inner.cf(cf.as_deref())?;
        let mut file = inner.db.create_value_file(&cf, &key)?;
        file.write_at(0, &head)?;
        drop(head);
        while let Some(piece) = rx.blocking_recv() {
            match piece {
                Piece::Bytes(b) => file.write_at(file.len(), &b)?,
                Piece::Done => {
                    let len = file.len();
                    let opts = sync.write_options();
                    let seq = inner
                        .db
                        .write_with_value_file(WriteBatch::new(), file, &opts)?;
                    put_done(&inner, &cf, key, len, ", streamed");
                    return Ok(Some(CommittedAt(seq)));
                }
            }
        }
        // The upload stopped early: dropping the file removes it.
        Err(Problem::bad_request("the request body ended early"))
    });
    let sent: Result<(), Problem> = async {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(cut)?;
            total += chunk.len() as u64;
            if total > limit {
                return Err(too_large());
            }
            if tx.send(Piece::Bytes(chunk)).await.is_err() {
                break;
            }
        }
        let _ = tx.send(Piece::Done).await;
        Ok(())
    }
    .await;
    if let Err(e) = sent {
        drop(tx);
        let _ = writer.await;
        return Err(e);
    }
    drop(tx);
    writer
        .await
        .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, format!("task: {e}")))?
}
