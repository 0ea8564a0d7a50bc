//! One key: `GET`, `PUT` and `DELETE /api/v1/kv/{key}` (the key base64url in the path).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use strata_engine::{Clock, WriteBatch};

use super::{Common, blocking, logged, parse, query};
use crate::codec::decode_path_key;
use crate::problem::Problem;
use crate::state::AppState;

/// A key and its value.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct KvItem {
    pub key: String,
    pub value: String,
}

/// Reads one key.
#[utoipa::path(get, path = "/api/v1/kv/{key}", tag = "kv",
    params(("key" = String, Path, description = "the key, base64url without padding"), Common),
    responses(
        (status = 200, description = "the key and its value (or the raw value with raw=1)", body = KvItem),
        (status = 404, description = "no such key", body = Problem),
        (status = 422, description = "not UTF-8, with encoding=utf8", body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(key): Path<String>,
    uri: Uri,
) -> Result<Response, Problem> {
    let q: Common = query(&uri)?;
    let key = decode_path_key(&key)?;
    let (enc, raw) = (q.encoding, q.raw);
    let shown = key.clone();
    let value = blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        Ok(s.db.get_cf(&cf, &key)?.map(|v| v.to_vec()))
    })
    .await?
    .ok_or_else(|| Problem::not_found("no such key"))?;
    if raw {
        return Ok(([(header::CONTENT_TYPE, "application/octet-stream")], value).into_response());
    }
    let body = KvItem {
        key: enc.encode("key", &shown)?,
        value: enc.encode("value", &value)?,
    };
    Ok(axum::Json(body).into_response())
}

/// The value to put (unless the body is raw bytes, with raw=1).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PutBody {
    value: String,
}

/// Writes one key.
#[utoipa::path(put, path = "/api/v1/kv/{key}", tag = "kv",
    params(("key" = String, Path, description = "the key, base64url without padding"), Common),
    request_body = PutBody,
    responses((status = 204, description = "written"), (status = 400, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn put(
    State(state): State<AppState>,
    Path(key): Path<String>,
    uri: Uri,
    body: Bytes,
) -> Result<StatusCode, Problem> {
    let q: Common = query(&uri)?;
    state.inner.check_writable()?;
    let key = decode_path_key(&key)?;
    let value = if q.raw {
        body.to_vec()
    } else {
        let b: PutBody = parse(&body)?;
        q.encoding.decode("value", &b.value)?
    };
    if q.ttl == Some(0) {
        return Err(Problem::bad_request("ttl must be at least 1 second"));
    }
    blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let mut batch = WriteBatch::new();
        let now = strata_engine::SystemClock.now_secs();
        super::batch::put(&mut batch, &cf, &key, &value, q.ttl, now);
        s.write(batch, q.sync)?;
        logged(
            "put",
            &cf,
            format_args!("{} ({} bytes)", String::from_utf8_lossy(&key), value.len()),
        );
        s.changed(&cf, [key]);
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes one key.
#[utoipa::path(delete, path = "/api/v1/kv/{key}", tag = "kv",
    params(("key" = String, Path, description = "the key, base64url without padding"), Common),
    responses((status = 204, description = "deleted (or was absent)"), (status = 403, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(key): Path<String>,
    uri: Uri,
) -> Result<StatusCode, Problem> {
    let q: Common = query(&uri)?;
    state.inner.check_writable()?;
    let key = decode_path_key(&key)?;
    blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let mut batch = WriteBatch::new();
        batch.delete_cf(&cf, &key);
        s.write(batch, q.sync)?;
        logged("delete", &cf, String::from_utf8_lossy(&key));
        s.changed(&cf, [key]);
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
