//! What the LSM looks like now: levels, files, range tombstones, blob files, the block cache.

use axum::Json;
use axum::extract::State;
use axum::http::Uri;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use strata_engine::{RangeTombstoneInfo, TombstoneLocation};

use super::{blocking, query};
use crate::codec::Encoding;
use crate::problem::Problem;
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CfOnly {
    cf: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/lsm", tag = "observe", params(("cf" = Option<String>, Query)), responses((status = 200, description = "levels: files, bytes, score, compaction counters", body = serde_json::Value), (status = 404, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn lsm(State(state): State<AppState>, uri: Uri) -> Result<Json<Value>, Problem> {
    let q: CfOnly = query(&uri)?;
    blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let p = s.db.properties_cf(&cf)?;
        let levels: Vec<Value> = p
            .levels
            .iter()
            .map(|l| {
                json!({
                    "level": l.level, "files": l.files, "bytes": l.bytes, "entries": l.entries,
                    "deletions": l.deletions, "range_deletions": l.range_deletions,
                    "score": l.score, "target_bytes": l.target_bytes,
                    "compactions": l.compactions, "bytes_written": l.bytes_written,
                    "compaction_bytes_read_upper": l.compaction_bytes_read_upper,
                    "compaction_bytes_read_lower": l.compaction_bytes_read_lower,
                })
            })
            .collect();
        Ok(Json(json!({
            "column_family": p.name,
            "levels": levels,
            "base_level": p.base_level,
            "memtable_bytes": p.memtable_bytes,
            "memtable_entries": p.memtable_entries,
            "immutable_memtables": p.immutable_memtables,
            "pending_compaction_bytes": p.pending_compaction_bytes,
            "compactions_running": p.compactions_running,
            "flush_running": p.flush_running,
            "estimate_num_keys": p.estimate_num_keys,
            "total_files": p.total_files,
            "total_sst_bytes": p.total_sst_bytes,
        })))
    })
    .await
}

#[utoipa::path(get, path = "/api/v1/lsm/files", tag = "observe", params(("cf" = Option<String>, Query)), responses((status = 200, description = "every table file", body = serde_json::Value), (status = 404, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn files(State(state): State<AppState>, uri: Uri) -> Result<Json<Value>, Problem> {
    let q: CfOnly = query(&uri)?;
    blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let p = s.db.properties_cf(&cf)?;
        let files: Vec<_> = p.levels.iter().flat_map(|l| l.file_list.iter()).collect();
        Ok(Json(json!({ "column_family": p.name, "files": files })))
    })
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TombstoneQuery {
    cf: Option<String>,
    limit: Option<usize>,
    page_token: Option<String>,
    #[serde(default)]
    encoding: Encoding,
}

/// Where a tombstone listing resumes: the last tombstone of the previous page.
#[derive(Debug, Serialize, Deserialize)]
struct After {
    start: Vec<u8>,
    end: Vec<u8>,
    sequence: u64,
    /// The table's number and level; none for a memtable.
    table: Option<(u64, usize)>,
}

impl After {
    fn of(t: &RangeTombstoneInfo) -> After {
        After {
            start: t.start.clone(),
            end: t.end.clone(),
            sequence: t.sequence,
            table: match t.location {
                TombstoneLocation::Table { number, level } => Some((number, level)),
                _ => None,
            },
        }
    }

    fn info(self) -> RangeTombstoneInfo {
        RangeTombstoneInfo {
            start: self.start,
            end: self.end,
            sequence: self.sequence,
            location: match self.table {
                Some((number, level)) => TombstoneLocation::Table { number, level },
                None => TombstoneLocation::Memtable,
            },
        }
    }

    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(s: &str) -> Result<After, Problem> {
        URL_SAFE_NO_PAD
            .decode(s)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| Problem::bad_request("page_token is malformed"))
    }
}

#[utoipa::path(get, path = "/api/v1/tombstones", tag = "observe", params(("cf" = Option<String>, Query), ("limit" = Option<usize>, Query), ("page_token" = Option<String>, Query), ("encoding" = Option<String>, Query)), responses((status = 200, description = "range tombstones, paged", body = serde_json::Value), (status = 400, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn tombstones(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<Json<Value>, Problem> {
    let q: TombstoneQuery = query(&uri)?;
    let limit = state.inner.limits.page_limit(q.limit)?;
    let after = q.page_token.as_deref().map(After::decode).transpose()?;
    let enc = q.encoding;
    let page = blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let after = after.map(After::info);
        Ok(s.db.range_tombstones_cf(&cf, after.as_ref(), limit)?)
    })
    .await?;
    let items = page
        .tombstones
        .iter()
        .map(|t| {
            Ok(json!({
                "start": enc.encode("start", &t.start)?,
                "end": enc.encode("end", &t.end)?,
                "sequence": t.sequence,
                "location": t.location,
            }))
        })
        .collect::<Result<Vec<_>, Problem>>()?;
    let mut body = json!({ "tombstones": items, "more": page.more });
    if let (true, Some(last)) = (page.more, page.tombstones.last()) {
        body["page_token"] = Value::String(After::of(last).encode());
    }
    Ok(Json(body))
}

#[utoipa::path(get, path = "/api/v1/blobs", tag = "observe", params(("cf" = Option<String>, Query)), responses((status = 200, description = "blob files, GC and FIFO eviction", body = serde_json::Value), (status = 404, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn blobs(State(state): State<AppState>, uri: Uri) -> Result<Json<Value>, Problem> {
    let q: CfOnly = query(&uri)?;
    blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let p = s.db.properties_cf(&cf)?;
        let st = s.db.statistics();
        Ok(Json(json!({
            "column_family": p.name,
            "files": p.blob_files,
            "totals": p.blobs,
            "gc": {
                "relocated_keys": st.blob_gc_relocated_keys,
                "relocated_bytes": st.blob_gc_relocated_bytes,
                "files_obsolete": st.blob_gc_files_obsolete,
            },
            "fifo": {
                "evicted_files": st.blob_fifo_evicted_files,
                "evicted_keys": st.blob_fifo_evicted_keys,
                "evicted_bytes": st.blob_fifo_evicted_bytes,
            },
        })))
    })
    .await
}

#[utoipa::path(get, path = "/api/v1/cache", tag = "observe", responses((status = 200, description = "block cache capacity, usage, hits and misses by block type", body = serde_json::Value)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn cache(State(state): State<AppState>) -> Result<Json<Value>, Problem> {
    blocking(&state, |s| {
        let st = s.db.statistics();
        let per_type = |hit: u64, miss: u64| json!({ "hits": hit, "misses": miss });
        Ok(Json(json!({
            "block_cache": s.db.properties().block_cache,
            "data": per_type(st.block_cache_data_hit, st.block_cache_data_miss),
            "index": per_type(st.block_cache_index_hit, st.block_cache_index_miss),
            "filter": per_type(st.block_cache_filter_hit, st.block_cache_filter_miss),
            "total": per_type(st.block_cache_hit, st.block_cache_miss),
        })))
    })
    .await
}
