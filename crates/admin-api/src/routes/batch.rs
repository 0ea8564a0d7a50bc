//! Many keys at once: `kv:batchGet` (the engine's MultiGet, in order) and `kv:batchWrite` (one
//! atomic batch of puts, deletes and range deletions).

use std::borrow::Cow;
use std::ops::ControlFlow;

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use strata_engine::{Clock, ColumnFamily, ReadOptions, WriteBatch};

use super::{JsonBody, blocking, logged, parse, read};
use crate::codec::{BatchOp, Encoding, Op, decode_ops};
use crate::freshness::CommittedAt;
use crate::problem::Problem;
use crate::state::{AppState, Inner};

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
// Parsed in place: keys without escapes are slices of the body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchGet<'a> {
    #[serde(borrow, deserialize_with = "keys_in_body")]
    #[schema(value_type = Vec<String>)]
    keys: Vec<InBody<'a>>,
    #[serde(borrow)]
    #[schema(value_type = Option<String>)]
    cf: Option<InBody<'a>>,
    #[serde(default)]
    encoding: Encoding,
    /// Answer only once the store shows this sequence number (a write's `Strata-Sequence`):
    /// a replica waits to catch up, up to the server's bound, else 503.
    #[serde(default, deserialize_with = "crate::codec::whole_number")]
    #[schema(value_type = Option<u64>)]
    #[allow(dead_code)] // Read first, by `MinSeqOnly`; here it is a field the body may have.
    min_seq: Option<u64>,
}

/// Only a batchGet's `min_seq`, read before the keys (which are parsed where they are read).
#[derive(Debug, Default, Deserialize)]
struct MinSeqOnly {
    #[serde(default, deserialize_with = "crate::codec::whole_number")]
    min_seq: Option<u64>,
}

/// A string of a JSON body, borrowed from it unless it has escapes. serde borrows a `Cow` only
/// where it is a field of its own, not an element of a `Vec`: so this newtype.
#[derive(Debug, Deserialize)]
struct InBody<'a>(#[serde(borrow)] Cow<'a, str>);

/// A batch's keys, with room for sixteen made at once: serde_json cannot tell how long an array
/// is, and a vector grown from four reallocates twice for a batch of ten.
fn keys_in_body<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<InBody<'de>>, D::Error> {
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Vec<InBody<'de>>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of keys")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut keys = Vec::with_capacity(seq.size_hint().unwrap_or(16).min(1024));
            while let Some(key) = seq.next_element()? {
                keys.push(key);
            }
            Ok(keys)
        }
    }
    d.deserialize_seq(Keys)
}

/// The values of the keys, in order; null for an absent key.
// The document's shape of the answer, which `write_values` writes by hand: serde_json escapes
// text a byte at a time, and would need the values collected first.
#[derive(Debug, utoipa::ToSchema)]
pub(crate) struct BatchGetReply {
    #[allow(dead_code)] // Only described, never built.
    values: Vec<Option<String>>,
}

impl AsRef<[u8]> for InBody<'_> {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// `{"values":[...]}` for `keys`, each value written into the answer as the engine lends it
/// (one copy). In key order, the first failure answers: an engine error, or a value that
/// cannot be shown in `enc`; on a worker (`opts.cache_only`), more values than it handles.
fn write_values<K: AsRef<[u8]>>(
    s: &Inner,
    opts: &ReadOptions,
    cf: &ColumnFamily,
    keys: &[K],
    enc: Encoding,
) -> Result<Vec<u8>, Problem> {
    // Room for values of a hundred bytes or so, up to what a worker handles; larger ones (or
    // a batch of many keys) grow it, so that absent keys reserve nothing much.
    let mut json = Vec::with_capacity(16 + (keys.len() * 144).min(super::ON_WORKER_BYTES));
    json.extend_from_slice(b"{\"values\":[");
    let mut bytes = 0u64;
    let mut failed = None;
    let mut write = |i: usize, found: strata_engine::Result<Option<&[u8]>>| {
        if i > 0 {
            json.push(b',');
        }
        match found? {
            None => json.extend_from_slice(b"null"),
            Some(v) => {
                bytes += v.len() as u64;
                super::fits_on_worker(opts, bytes)?;
                enc.encode_named(v, || format!("values[{i}]"))?
                    .write_json(&mut json);
            }
        }
        Ok::<_, Problem>(())
    };
    s.db.multi_get_each(opts, cf, keys, |i, found| match write(i, found) {
        Ok(()) => ControlFlow::Continue(()),
        Err(p) => {
            failed = Some(p);
            ControlFlow::Break(())
        }
    });
    if let Some(p) = failed {
        return Err(p);
    }
    json.extend_from_slice(b"]}");
    Ok(json)
}

/// Reads many keys at once (the engine's MultiGet).
#[utoipa::path(post, path = "/api/v1/kv:batchGet", tag = "kv", request_body = BatchGet,
    responses((status = 200, body = BatchGetReply), (status = 400, body = Problem),
        (status = 422, description = "with encoding=utf8, a value that is not UTF-8, or `min_seq` past every write this store (no replica) has", body = Problem),
        (status = 503, description = "`min_seq`: the replica did not show it within the server's bound", body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn batch_get(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    // A batch read in memory answers at once; one key needing the disk sends the whole batch
    // to the blocking pool, so that every value comes from one sequence number. The body is
    // parsed where it is read (again on the pool): keys borrow from it, and each value is
    // written into the answer straight from what the engine found, copied once.
    // Most bodies do not ask: only those that may name it are parsed twice.
    if may_name_min_seq(&body) {
        let asked: MinSeqOnly = parse(&body)?;
        crate::freshness::at_least(&state, asked.min_seq).await?;
    }
    let json = read(&state, move |s, opts| {
        let req: BatchGet<'_> = parse(&body)?;
        let cap = s.limits.batch_get_keys;
        if req.keys.len() > cap {
            return Err(Problem::bad_request(format!(
                "{} keys asked; a batchGet takes at most {cap}",
                req.keys.len()
            )));
        }
        let cf = req.cf.as_ref().map(|c| c.0.as_ref());
        match req.encoding {
            // Text keys are the body's own bytes.
            Encoding::Utf8 => write_values(s, opts, &s.cf(cf)?, &req.keys, Encoding::Utf8),
            Encoding::Base64 => {
                let keys = req
                    .keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| Encoding::Base64.decode_named(&k.0, || format!("keys[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                write_values(s, opts, &s.cf(cf)?, &keys, Encoding::Base64)
            }
        }
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
}

/// Whether a JSON body may have a `min_seq` field: it spells the name out, or it has a `\u`
/// escape, the only one that can stand for a letter or `_` in a name (`"min\u005fseq"`).
fn may_name_min_seq(body: &[u8]) -> bool {
    // Most bodies have neither an underscore nor a backslash: one quick pass each says so.
    if !body.contains(&b'_') && !body.contains(&b'\\') {
        return false;
    }
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    has(b"min_seq") || has(b"\\u")
}

/// The batch `ops` make in `cf`; puts with a TTL expire from now.
fn batch_of(s: &Inner, cf: &ColumnFamily, ops: &[Op]) -> WriteBatch {
    let now = strata_engine::SystemClock.now_secs();
    let mut batch = WriteBatch::new();
    for op in ops {
        match op {
            Op::Put { key, value, ttl } => put(&mut batch, cf, key, value, *ttl, now),
            Op::Delete { key } => strata_fusefs::delete_with_metadata(&s.db, &mut batch, cf, key),
            Op::DeleteRange { start, end } => {
                strata_fusefs::delete_range_with_metadata(&s.db, &mut batch, cf, start, end)
            }
        }
    }
    batch
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
    JsonBody(body): JsonBody,
) -> Result<(Option<CommittedAt>, Json<BatchWriteReply>), Problem> {
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
    let cf = state.inner.cf(req.cf.as_deref())?;
    // A body past what a worker handles makes a batch past it too: built on the pool, where
    // `write` would send it anyway, not on a worker that serves every connection meanwhile.
    let (batch, ops) = if body.len() > super::ON_WORKER_BYTES {
        let cf = cf.clone();
        blocking(&state, move |s| Ok((batch_of(s, &cf, &ops), ops))).await?
    } else {
        (batch_of(&state.inner, &cf, &ops), ops)
    };
    let committed = super::write(&state, cf, batch, req.sync, move |s, cf| {
        logged("batchWrite", cf, format_args!("{count} operations"));
        for op in ops {
            match op {
                Op::Put { key, .. } | Op::Delete { key } => s.changed(cf, [key]),
                Op::DeleteRange { start, end } => s.range_deleted(cf, &start, &end),
            }
        }
    })
    .await?;
    Ok((committed, Json(BatchWriteReply { applied: count })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_min_seq_spelled_with_escapes_is_still_seen() {
        assert!(may_name_min_seq(br#"{"keys":[],"min_seq":5}"#));
        assert!(may_name_min_seq(br#"{"keys":[],"min\u005fseq":5}"#));
        assert!(may_name_min_seq(br#"{"keys":[],"\u006din_seq":5}"#));
        assert!(!may_name_min_seq(br#"{"keys":["a\n","b"],"cf":"min-seq"}"#));
    }
}
