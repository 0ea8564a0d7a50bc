//! Ranges: `kv:scan` and `GET /kv?prefix=` (paged, each page of one snapshot), and
//! `kv:deleteRange` (one range tombstone, or a dry run estimating what it would delete).

use axum::Json;
use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use strata_engine::{ReadOptions, WriteBatch};

use super::{JsonBody, blocking, logged, parse, query};
use crate::codec::{Encoding, PageToken, scan_bounds};
use crate::problem::Problem;
use crate::state::AppState;

/// What to scan: a prefix, or start and end; forward or reverse; a page at a time.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScanRequest {
    cf: Option<String>,
    /// Keys starting with these bytes.
    prefix: Option<String>,
    /// The first key (inclusive).
    start: Option<String>,
    /// The key the scan stops before (exclusive).
    end: Option<String>,
    /// Entries per page, at least 1; past the server's page size (1,000 unless set), that size.
    #[serde(default, deserialize_with = "crate::codec::whole_number")]
    #[schema(value_type = Option<u64>, minimum = 1)]
    limit: Option<u64>,
    #[serde(default)]
    reverse: bool,
    #[serde(default)]
    keys_only: bool,
    /// The `page_token` of the page before.
    page_token: Option<String>,
    #[serde(default)]
    encoding: Encoding,
    /// Answer only once the store shows this sequence number (a write's `Strata-Sequence`):
    /// a replica waits to catch up, up to the server's bound, else 503.
    #[serde(default, deserialize_with = "crate::codec::whole_number")]
    #[schema(value_type = Option<u64>)]
    min_seq: Option<u64>,
}

/// `GET /kv`'s query: a scan whose bounds are the key bytes themselves, percent-encoded as a
/// URL carries any byte; `encoding` says only how the answer's keys and values travel.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    cf: Option<String>,
    /// Keys starting with these bytes (percent-encoded).
    prefix: Option<String>,
    /// The first key, inclusive (percent-encoded).
    start: Option<String>,
    /// The key the scan stops before, exclusive (percent-encoded).
    end: Option<String>,
    /// Entries per page, at least 1; past the server's page size (1,000 unless set), that size.
    #[serde(default, deserialize_with = "super::int64")]
    #[param(value_type = Option<u64>, minimum = 1)]
    limit: Option<u64>,
    #[serde(default, deserialize_with = "super::flag")]
    #[param(value_type = Option<String>)]
    reverse: bool,
    #[serde(default, deserialize_with = "super::flag")]
    #[param(value_type = Option<String>)]
    keys_only: bool,
    /// The `page_token` of the page before.
    page_token: Option<String>,
    /// How the answer's keys and values travel.
    #[serde(default)]
    encoding: Encoding,
    /// Answer only once the store shows this sequence number (a write's `Strata-Sequence`):
    /// a replica waits to catch up, up to the server's bound, else 503.
    #[serde(default, deserialize_with = "super::int64")]
    #[param(value_type = Option<u64>)]
    min_seq: Option<u64>,
}

/// How a scan pages, from the body or the query.
struct Paging {
    limit: Option<u64>,
    reverse: bool,
    keys_only: bool,
    page_token: Option<String>,
}

/// One entry of a page.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ScanItem {
    pub key: String,
    /// Absent with keys_only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// One page of a scan; `page_token` asks for the next, on the same snapshot.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ScanPage {
    pub items: Vec<ScanItem>,
    pub more: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}

/// Scans a range or a prefix, a page at a time.
#[utoipa::path(post, path = "/api/v1/kv:scan", tag = "kv", request_body = ScanRequest,
    responses((status = 200, body = ScanPage), (status = 400, body = Problem),
        (status = 410, description = "the page token names no page this server has open (it expired, or the server restarted): start the scan again", body = Problem),
        (status = 422, description = "with encoding=utf8, a key or value that is not UTF-8, or `min_seq` past every write this store (no replica) has", body = Problem),
        (status = 503, description = "`min_seq`: the replica did not show it within the server's bound", body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn scan(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<ScanPage>, Problem> {
    let req: ScanRequest = parse(&body)?;
    crate::freshness::at_least(&state, req.min_seq).await?;
    let enc = req.encoding;
    let decode = |name, v: &Option<String>| v.as_ref().map(|v| enc.decode(name, v)).transpose();
    let bounds = scan_bounds(
        decode("prefix", &req.prefix)?,
        decode("start", &req.start)?,
        decode("end", &req.end)?,
    );
    let paging = Paging {
        limit: req.limit,
        reverse: req.reverse,
        keys_only: req.keys_only,
        page_token: req.page_token,
    };
    run_scan(state, req.cf, bounds, paging, enc).await
}

/// Scans by query parameters (a prefix, usually).
#[utoipa::path(get, path = "/api/v1/kv", tag = "kv", params(ListQuery),
    responses((status = 200, body = ScanPage), (status = 400, body = Problem),
        (status = 410, description = "the page token names no page this server has open (it expired, or the server restarted): start the scan again", body = Problem),
        (status = 422, description = "with encoding=utf8, a key or value that is not UTF-8, or `min_seq` past every write this store (no replica) has", body = Problem),
        (status = 503, description = "`min_seq`: the replica did not show it within the server's bound", body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn list(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<Json<ScanPage>, Problem> {
    let q: ListQuery = query(&uri)?;
    crate::freshness::at_least(&state, q.min_seq).await?;
    // The query parsed above names the bounds; their bytes come from the URL itself, since
    // text would lose every byte that is not UTF-8.
    let raw = |given: &Option<String>, name| {
        given
            .as_ref()
            .and_then(|_| crate::codec::query_bytes(uri.query().unwrap_or(""), name))
    };
    let bounds = scan_bounds(
        raw(&q.prefix, "prefix"),
        raw(&q.start, "start"),
        raw(&q.end, "end"),
    );
    let paging = Paging {
        limit: q.limit,
        reverse: q.reverse,
        keys_only: q.keys_only,
        page_token: q.page_token,
    };
    run_scan(state, q.cf, bounds, paging, q.encoding).await
}

async fn run_scan(
    state: AppState,
    cf: Option<String>,
    (lower, upper): (Option<Vec<u8>>, Option<Vec<u8>>),
    paging: Paging,
    enc: Encoding,
) -> Result<Json<ScanPage>, Problem> {
    let _heavy = state.heavy().await?;
    let limit = state.inner.limits.page_limit(paging.limit)?;
    let token = paging
        .page_token
        .as_deref()
        .map(PageToken::decode)
        .transpose()?;
    let (reverse, keys_only) = (paging.reverse, paging.keys_only);
    let (items, next, snapshot_id) = blocking(&state, move |s| {
        let cf = s.cf(cf.as_deref())?;
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
            Ok(ScanItem {
                key: enc.encode("key", k)?,
                value: v.as_ref().map(|v| enc.encode("value", v)).transpose()?,
            })
        })
        .collect::<Result<Vec<_>, Problem>>()?;
    let more = next.is_some();
    let page_token = match (next, snapshot_id) {
        (Some(next), Some(snapshot)) => Some(PageToken { snapshot, next }.encode()),
        _ => None,
    };
    Ok(Json(ScanPage {
        items,
        more,
        page_token,
    }))
}

/// The half-open range `[start, end)` to delete.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteRange {
    start: String,
    end: String,
    cf: Option<String>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    sync: super::SyncTo,
    #[serde(default)]
    encoding: Encoding,
}

/// What a range deletion did, or (dry run) would delete.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DeleteRangeReply {
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_keys: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_bytes: Option<u64>,
    /// Dry run: the live keys in the range, counted up to `DRY_RUN_COUNT_LIMIT`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys: Option<u64>,
    /// Dry run: the count stopped at the limit; there are more.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
}

/// Keys a dry run counts one by one before it stops (the estimate covers the rest).
const DRY_RUN_COUNT_LIMIT: u64 = 100_000;

/// Deletes `[start, end)` with one range tombstone, or counts what it would delete.
#[utoipa::path(post, path = "/api/v1/kv:deleteRange", tag = "kv", request_body = DeleteRange,
    responses((status = 200, body = DeleteRangeReply), (status = 400, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn delete_range(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let req: DeleteRange = parse(&body)?;
    let (start, end) = (
        req.encoding.decode("start", &req.start)?,
        req.encoding.decode("end", &req.end)?,
    );
    if !req.dry_run {
        state.inner.check_writable()?;
    }
    // An empty or inverted range deletes nothing (no schema can say "start before end").
    if start >= end {
        return Ok(Json(DeleteRangeReply {
            dry_run: req.dry_run,
            estimated_keys: req.dry_run.then_some(0),
            estimated_bytes: req.dry_run.then_some(0),
            keys: req.dry_run.then_some(0),
            more: false,
        })
        .into_response());
    }
    let _heavy = state.heavy().await?;
    blocking(&state, move |s| {
        let cf = s.cf(req.cf.as_deref())?;
        if req.dry_run {
            let e = s.db.estimate_range_cf(&cf, &start, &end)?;
            let opts = ReadOptions {
                lower_bound: Some(start),
                upper_bound: Some(end),
                keys_only: true,
                fill_cache: false,
                ..Default::default()
            };
            let mut it = s.db.iter_cf(&opts, &cf)?;
            it.seek_to_first();
            let mut keys = 0;
            while it.valid() && keys < DRY_RUN_COUNT_LIMIT {
                keys += 1;
                it.next();
            }
            it.status()?;
            return Ok(Json(DeleteRangeReply {
                dry_run: true,
                estimated_keys: Some(e.keys),
                estimated_bytes: Some(e.bytes),
                keys: Some(keys),
                more: it.valid(),
            })
            .into_response());
        }
        let mut batch = WriteBatch::new();
        strata_fusefs::delete_range_with_metadata(&s.db, &mut batch, &cf, &start, &end);
        let committed = s.write(batch, req.sync)?;
        logged(
            "deleteRange",
            &cf,
            format_args!("[{}, {})", super::LoggedKey(&start), super::LoggedKey(&end)),
        );
        s.range_deleted(&cf, &start, &end);
        let reply = Json(DeleteRangeReply {
            dry_run: false,
            estimated_keys: None,
            estimated_bytes: None,
            keys: None,
            more: false,
        });
        Ok((committed, reply).into_response())
    })
    .await
}
