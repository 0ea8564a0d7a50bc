//! Many keys at once: `kv:batchGet` (the engine's MultiGet, in order) and `kv:batchWrite` (one
//! atomic batch of puts, deletes and range deletions).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use strata_engine::{Clock, ColumnFamily, WriteBatch};

use super::{blocking, logged, parse, read};
use crate::codec::{BatchOp, Encoding, Op, decode_ops};
use crate::problem::Problem;
use crate::state::AppState;

/// Adds a put of `key` to `batch`, expiring `ttl` seconds after `now` when given. A TTL past the
/// end of time never expires: wrapping would expire it at once.
pub(crate) fn put(
    batch: &mut WriteBatch,
    cf: &ColumnFamily,
    key: &[u8],
    value: &[u8],
    ttl: Option<u64>,
    now: u64,
) {
    match ttl {
        Some(secs) => batch.put_until_cf(cf, key, value, now.saturating_add(secs)),
        None => batch.put_cf(cf, key, value),
    }
}

/// Keys to read at once.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchGet {
    keys: Vec<String>,
    cf: Option<String>,
    #[serde(default)]
    encoding: Encoding,
}

/// The values of the keys, in order; null for an absent key.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct BatchGetReply {
    pub values: Vec<Option<String>>,
}

/// Reads many keys at once (the engine's MultiGet).
#[utoipa::path(post, path = "/api/v1/kv:batchGet", tag = "kv", request_body = BatchGet,
    responses((status = 200, body = BatchGetReply), (status = 400, body = Problem),
        (status = 422, description = "with encoding=utf8, a value that is not UTF-8", body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn batch_get(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<BatchGetReply>, Problem> {
    let req: BatchGet = parse(&body)?;
    let cap = state.inner.limits.batch_get_keys;
    if req.keys.len() > cap {
        return Err(Problem::bad_request(format!(
            "{} keys asked; a batchGet takes at most {cap}",
            req.keys.len()
        )));
    }
    let enc = req.encoding;
    let keys = req
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| enc.decode_named(k, || format!("keys[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    // A batch read in memory answers at once; one key needing the disk sends the whole batch
    // to the blocking pool, so that every value comes from one sequence number.
    // Each value is encoded straight from what the engine found: one copy, not two.
    let values = read(&state, move |s, opts| {
        let cf = s.cf(req.cf.as_deref())?;
        let asks: Vec<_> = keys.iter().map(|k| (&cf, k)).collect();
        let found = s.db.multi_get_cf(opts, &asks);
        if opts.cache_only {
            let bytes: usize = found.iter().flatten().flatten().map(|v| v.len()).sum();
            if bytes > super::ON_WORKER_BYTES {
                return Err(super::too_large_for_a_worker());
            }
        }
        found
            .into_iter()
            .enumerate()
            .map(|(i, r)| match r? {
                Some(v) => enc.encode_named(&v, || format!("values[{i}]")).map(Some),
                None => Ok(None),
            })
            .collect::<Result<Vec<_>, Problem>>()
    })
    .await?;
    Ok(Json(BatchGetReply { values }))
}

/// Operations applied as one atomic batch.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchWrite {
    #[serde(deserialize_with = "crate::codec::batch_ops")]
    ops: Vec<BatchOp>,
    cf: Option<String>,
    #[serde(default)]
    encoding: Encoding,
    #[serde(default)]
    sync: super::SyncTo,
}

/// How many operations the batch applied.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct BatchWriteReply {
    pub applied: usize,
}

/// Applies puts, deletes and range deletions as one atomic batch.
#[utoipa::path(post, path = "/api/v1/kv:batchWrite", tag = "kv", request_body = BatchWrite,
    responses((status = 200, body = BatchWriteReply), (status = 400, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn batch_write(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<BatchWriteReply>, Problem> {
    state.inner.check_writable()?;
    let req: BatchWrite = parse(&body)?;
    let cap = state.inner.limits.batch_write_ops;
    if req.ops.len() > cap {
        return Err(Problem::bad_request(format!(
            "{} operations; a batchWrite takes at most {cap}",
            req.ops.len()
        )));
    }
    let ops = decode_ops(&req.ops, req.encoding)?;
    let count = ops.len();
    blocking(&state, move |s| {
        let cf = s.cf(req.cf.as_deref())?;
        let now = strata_engine::SystemClock.now_secs();
        let mut batch = WriteBatch::new();
        for op in &ops {
            match op {
                Op::Put { key, value, ttl } => put(&mut batch, &cf, key, value, *ttl, now),
                Op::Delete { key } => {
                    strata_fusefs::delete_with_metadata(&s.db, &mut batch, &cf, key)
                }
                Op::DeleteRange { start, end } => {
                    strata_fusefs::delete_range_with_metadata(&s.db, &mut batch, &cf, start, end)
                }
            }
        }
        s.write(batch, req.sync)?;
        logged("batchWrite", &cf, format_args!("{count} operations"));
        for op in ops {
            match op {
                Op::Put { key, .. } | Op::Delete { key } => s.changed(&cf, [key]),
                Op::DeleteRange { start, end } => s.range_deleted(&cf, &start, &end),
            }
        }
        Ok(())
    })
    .await?;
    Ok(Json(BatchWriteReply { applied: count }))
}
