//! Many keys at once: `kv:batchGet` (the engine's MultiGet, in order) and `kv:batchWrite` (one
//! atomic batch of puts, deletes and range deletions).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use strata_engine::{Clock, ReadOptions, WriteBatch, WriteOptions};

use super::{blocking, logged, parse};
use crate::codec::{BatchOp, Encoding, Op, decode_ops};
use crate::problem::Problem;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchGet {
    keys: Vec<String>,
    cf: Option<String>,
    #[serde(default)]
    encoding: Encoding,
}

pub(crate) async fn batch_get(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, Problem> {
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
        .map(|(i, k)| enc.decode(&format!("keys[{i}]"), k))
        .collect::<Result<Vec<_>, _>>()?;
    let values = blocking(&state, move |s| {
        let cf = s.cf(req.cf.as_deref())?;
        let asks: Vec<_> = keys.iter().map(|k| (&cf, k)).collect();
        s.db.multi_get_cf(&ReadOptions::default(), &asks)
            .into_iter()
            .map(|r| Ok(r?.map(|v| v.to_vec())))
            .collect::<Result<Vec<_>, Problem>>()
    })
    .await?;
    let values = values
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Some(v) => enc.encode(&format!("values[{i}]"), v).map(Value::String),
            None => Ok(Value::Null),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(json!({ "values": values })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchWrite {
    ops: Vec<BatchOp>,
    cf: Option<String>,
    #[serde(default)]
    encoding: Encoding,
    #[serde(default)]
    sync: bool,
}

pub(crate) async fn batch_write(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, Problem> {
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
                Op::Put {
                    key,
                    value,
                    ttl: Some(t),
                } => batch.put_until_cf(&cf, key, value, now.saturating_add(*t)),
                Op::Put {
                    key,
                    value,
                    ttl: None,
                } => batch.put_cf(&cf, key, value),
                Op::Delete { key } => batch.delete_cf(&cf, key),
                Op::DeleteRange { start, end } => {
                    strata_fusefs::delete_range_with_metadata(&s.db, &mut batch, &cf, start, end)
                }
            }
        }
        let opts = WriteOptions {
            sync: req.sync,
            ..Default::default()
        };
        s.db.write(batch, &opts)?;
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
    Ok(Json(json!({ "applied": count })))
}
