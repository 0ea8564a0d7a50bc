//! Ranges: `kv:scan` and `GET /kv?prefix=` (paged, each page of one snapshot), and
//! `kv:deleteRange` (one range tombstone, or a dry run estimating what it would delete).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Uri;
use serde::Deserialize;
use serde_json::{Value, json};
use strata_engine::{ReadOptions, WriteBatch, WriteOptions};

use super::{blocking, logged, parse, query};
use crate::codec::{Encoding, PageToken, check_range, prefix_end};
use crate::problem::Problem;
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScanRequest {
    cf: Option<String>,
    prefix: Option<String>,
    start: Option<String>,
    end: Option<String>,
    limit: Option<usize>,
    #[serde(default)]
    reverse: bool,
    #[serde(default)]
    keys_only: bool,
    page_token: Option<String>,
    #[serde(default)]
    encoding: Encoding,
}

pub(crate) async fn scan(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, Problem> {
    let req: ScanRequest = parse(&body)?;
    run_scan(state, req).await
}

pub(crate) async fn list(State(state): State<AppState>, uri: Uri) -> Result<Json<Value>, Problem> {
    let req: ScanRequest = query(&uri)?;
    run_scan(state, req).await
}

async fn run_scan(state: AppState, req: ScanRequest) -> Result<Json<Value>, Problem> {
    let _heavy = state.heavy().await?;
    let enc = req.encoding;
    let page = state.inner.limits.scan_page;
    let limit = req.limit.unwrap_or(100.min(page));
    if limit == 0 || limit > page {
        return Err(Problem::bad_request(format!("limit must be 1 to {page}")));
    }
    let (lower, upper) = match (&req.prefix, &req.start, &req.end) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(Problem::bad_request(
                "give prefix, or start and end, not both",
            ));
        }
        (Some(p), None, None) => {
            let p = enc.decode("prefix", p)?;
            let end = prefix_end(&p);
            (Some(p), end)
        }
        (None, s, e) => {
            let s = s.as_ref().map(|s| enc.decode("start", s)).transpose()?;
            let e = e.as_ref().map(|e| enc.decode("end", e)).transpose()?;
            if let (Some(s), Some(e)) = (&s, &e) {
                check_range(s, e)?;
            }
            (s, e)
        }
    };
    let token = req
        .page_token
        .as_deref()
        .map(PageToken::decode)
        .transpose()?;
    let (reverse, keys_only) = (req.reverse, req.keys_only);
    let (items, next, snapshot_id) = blocking(&state, move |s| {
        let cf = s.cf(req.cf.as_deref())?;
        let (snapshot, id) = match &token {
            Some(t) => (s.page_snapshot(t.snapshot)?, Some(t.snapshot)),
            None => (s.db.snapshot(), None),
        };
        let opts = ReadOptions {
            snapshot: Some(snapshot.clone()),
            lower_bound: lower.clone(),
            upper_bound: upper.clone(),
            keys_only,
            fill_cache: false,
            ..Default::default()
        };
        let mut it = s.db.iter_cf(&opts, &cf)?;
        match (&token, reverse) {
            (Some(t), false) => it.seek(&t.next),
            (Some(t), true) => it.seek_for_prev(&t.next),
            (None, false) => it.seek_to_first(),
            (None, true) => it.seek_to_last(),
        }
        let mut items = Vec::new();
        while it.valid() && items.len() < limit {
            let v = (!keys_only).then(|| it.value().to_vec());
            items.push((it.key().to_vec(), v));
            if reverse { it.prev() } else { it.next() }
        }
        it.status()?;
        let next = it.valid().then(|| it.key().to_vec());
        // Later pages read the same snapshot: keep it while pages are asked for.
        let id = match (&next, id) {
            (Some(_), Some(id)) => Some(id),
            (Some(_), None) => Some(s.register_page_snapshot(snapshot)),
            (None, Some(id)) => {
                s.close_page_snapshot(id);
                None
            }
            (None, None) => None,
        };
        Ok((items, next, id))
    })
    .await?;
    let items = items
        .iter()
        .map(|(k, v)| {
            let mut o = serde_json::Map::new();
            o.insert("key".into(), Value::String(enc.encode("key", k)?));
            if let Some(v) = v {
                o.insert("value".into(), Value::String(enc.encode("value", v)?));
            }
            Ok(Value::Object(o))
        })
        .collect::<Result<Vec<_>, Problem>>()?;
    let mut body = json!({ "items": items, "more": next.is_some() });
    if let (Some(next), Some(snapshot)) = (next, snapshot_id) {
        body["page_token"] = Value::String(PageToken { snapshot, next }.encode());
    }
    Ok(Json(body))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteRange {
    start: String,
    end: String,
    cf: Option<String>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    sync: bool,
    #[serde(default)]
    encoding: Encoding,
}

pub(crate) async fn delete_range(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, Problem> {
    let req: DeleteRange = parse(&body)?;
    let (start, end) = (
        req.encoding.decode("start", &req.start)?,
        req.encoding.decode("end", &req.end)?,
    );
    check_range(&start, &end)?;
    if !req.dry_run {
        state.inner.check_writable()?;
    }
    let _heavy = state.heavy().await?;
    blocking(&state, move |s| {
        let cf = s.cf(req.cf.as_deref())?;
        if req.dry_run {
            let e = s.db.estimate_range_cf(&cf, &start, &end)?;
            return Ok(Json(json!({
                "dry_run": true,
                "estimated_keys": e.keys,
                "estimated_bytes": e.bytes,
            })));
        }
        let mut batch = WriteBatch::new();
        strata_fusefs::delete_range_with_metadata(&s.db, &mut batch, &cf, &start, &end);
        let opts = WriteOptions {
            sync: req.sync,
            ..Default::default()
        };
        s.db.write(batch, &opts)?;
        logged(
            "deleteRange",
            &cf,
            format_args!(
                "[{}, {})",
                String::from_utf8_lossy(&start),
                String::from_utf8_lossy(&end)
            ),
        );
        s.range_deleted(&cf, &start, &end);
        Ok(Json(json!({ "dry_run": false })))
    })
    .await
}
