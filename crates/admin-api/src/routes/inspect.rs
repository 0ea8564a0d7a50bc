//! What the LSM looks like now: levels, files, range tombstones, blob files, the block cache.

use axum::Json;
use axum::extract::State;
use axum::http::Uri;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use strata_engine::{
    BlobFileProperties, BlobTotals, BlockCacheProperties, ColumnFamilyProperties, FileProperties,
    RangeTombstoneInfo, TombstoneLocation,
};
use utoipa::ToSchema;

use super::{blocking, query};
use crate::codec::{Encoding, decode_page_token, page_gone};
use crate::problem::Problem;
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CfOnly {
    cf: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/lsm", tag = "observe", params(("cf" = Option<String>, Query)), responses((status = 200, description = "the column family's shape: memtables, levels with their files, scores and targets, blob files", body = ColumnFamilyProperties), (status = 404, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn lsm(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<Json<ColumnFamilyProperties>, Problem> {
    let q: CfOnly = query(&uri)?;
    blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        Ok(Json(s.db.properties_cf(&cf)?))
    })
    .await
}

/// Every table file of one column family.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FileList {
    column_family: String,
    files: Vec<FileProperties>,
}

#[utoipa::path(get, path = "/api/v1/lsm/files", tag = "observe", params(("cf" = Option<String>, Query)), responses((status = 200, description = "every table file", body = FileList), (status = 404, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn files(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<Json<FileList>, Problem> {
    let q: CfOnly = query(&uri)?;
    blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let p = s.db.properties_cf(&cf)?;
        let files = p.levels.into_iter().flat_map(|l| l.file_list).collect();
        Ok(Json(FileList {
            column_family: p.name,
            files,
        }))
    })
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TombstoneQuery {
    cf: Option<String>,
    #[serde(default, deserialize_with = "super::int64")]
    limit: Option<u64>,
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

    /// The token's bytes (already checked well formed): one this route did not issue names no
    /// page to resume.
    fn decode(raw: &[u8]) -> Result<After, Problem> {
        serde_json::from_slice(raw).map_err(|_| page_gone())
    }
}

/// One range tombstone: keys in `[start, end)` written before `sequence` read as deleted.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Tombstone {
    start: String,
    end: String,
    sequence: u64,
    location: TombstoneLocation,
    /// Entries in the tables under its span (estimated from their indexes): what it hides until
    /// compaction drops them, less any written after it.
    entries_under: u64,
}

/// A page of range tombstones, newest tables first; `page_token` resumes after the last one.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TombstonePage {
    tombstones: Vec<Tombstone>,
    more: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_token: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/tombstones", tag = "observe", params(("cf" = Option<String>, Query), ("limit" = Option<usize>, Query), ("page_token" = Option<String>, Query), ("encoding" = Option<String>, Query)), responses((status = 200, description = "range tombstones, paged", body = TombstonePage), (status = 400, body = Problem),
        (status = 410, description = "the page token is not one this route issued", body = Problem),
        (status = 422, description = "with encoding=utf8, a bound that is not UTF-8", body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn tombstones(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<Json<TombstonePage>, Problem> {
    let q: TombstoneQuery = query(&uri)?;
    let limit = state.inner.limits.page_limit(q.limit)?;
    let after = q.page_token.as_deref().map(decode_page_token).transpose()?;
    let enc = q.encoding;
    let (page, under) = blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        // Whether the token names a page is asked only of a request that is valid otherwise.
        let after = after
            .as_deref()
            .map(After::decode)
            .transpose()?
            .map(After::info);
        let page = s.db.range_tombstones_cf(&cf, after.as_ref(), limit)?;
        let under = page
            .tombstones
            .iter()
            .map(|t| Ok(s.db.estimate_range_cf(&cf, &t.start, &t.end)?.keys))
            .collect::<Result<Vec<_>, Problem>>()?;
        Ok((page, under))
    })
    .await?;
    let tombstones = page
        .tombstones
        .iter()
        .zip(under)
        .map(|(t, entries_under)| {
            Ok(Tombstone {
                start: enc.encode("start", &t.start)?,
                end: enc.encode("end", &t.end)?,
                sequence: t.sequence,
                location: t.location,
                entries_under,
            })
        })
        .collect::<Result<Vec<_>, Problem>>()?;
    let page_token = match (page.more, page.tombstones.last()) {
        (true, Some(last)) => Some(After::of(last).encode()),
        _ => None,
    };
    Ok(Json(TombstonePage {
        tombstones,
        more: page.more,
        page_token,
    }))
}

/// Blob garbage collection since open.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BlobGc {
    relocated_keys: u64,
    relocated_bytes: u64,
    files_obsolete: u64,
}

/// FIFO eviction (`max_db_size`) since open.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BlobFifo {
    evicted_files: u64,
    evicted_keys: u64,
    evicted_bytes: u64,
    /// The configured limit on live bytes (0: none).
    max_db_size: u64,
    /// Live table and blob bytes now: what the limit is held against.
    live_bytes: u64,
}

/// A column family's blob files with the store's GC and eviction counters.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BlobReport {
    column_family: String,
    files: Vec<BlobFileProperties>,
    totals: BlobTotals,
    gc: BlobGc,
    fifo: BlobFifo,
}

#[utoipa::path(get, path = "/api/v1/blobs", tag = "observe", params(("cf" = Option<String>, Query)), responses((status = 200, description = "blob files, GC and FIFO eviction", body = BlobReport), (status = 404, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn blobs(
    State(state): State<AppState>,
    uri: Uri,
) -> Result<Json<BlobReport>, Problem> {
    let q: CfOnly = query(&uri)?;
    blocking(&state, move |s| {
        let cf = s.cf(q.cf.as_deref())?;
        let p = s.db.properties_cf(&cf)?;
        let st = s.db.statistics();
        Ok(Json(BlobReport {
            column_family: p.name,
            files: p.blob_files,
            totals: p.blobs,
            gc: BlobGc {
                relocated_keys: st.blob_gc_relocated_keys,
                relocated_bytes: st.blob_gc_relocated_bytes,
                files_obsolete: st.blob_gc_files_obsolete,
            },
            fifo: BlobFifo {
                evicted_files: st.blob_fifo_evicted_files,
                evicted_keys: st.blob_fifo_evicted_keys,
                evicted_bytes: st.blob_fifo_evicted_bytes,
                max_db_size: cf.options().max_db_size,
                live_bytes: p.live_bytes,
            },
        }))
    })
    .await
}

/// Block cache lookups of one kind since open.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HitsMisses {
    hits: u64,
    misses: u64,
}

impl HitsMisses {
    fn new(hits: u64, misses: u64) -> HitsMisses {
        HitsMisses { hits, misses }
    }
}

/// The block cache and its lookups by block type; Bloom filter usefulness.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CacheReport {
    block_cache: Option<BlockCacheProperties>,
    data: HitsMisses,
    index: HitsMisses,
    filter: HitsMisses,
    total: HitsMisses,
    /// Table filters consulted.
    bloom_checked: u64,
    /// Filter checks that ruled a table out: reads a Bloom filter spared.
    bloom_useful: u64,
}

#[utoipa::path(get, path = "/api/v1/cache", tag = "observe", responses((status = 200, description = "block cache capacity, usage, hits and misses by block type", body = CacheReport)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn cache(State(state): State<AppState>) -> Result<Json<CacheReport>, Problem> {
    blocking(&state, |s| {
        let st = s.db.statistics();
        Ok(Json(CacheReport {
            block_cache: s.db.properties().block_cache,
            data: HitsMisses::new(st.block_cache_data_hit, st.block_cache_data_miss),
            index: HitsMisses::new(st.block_cache_index_hit, st.block_cache_index_miss),
            filter: HitsMisses::new(st.block_cache_filter_hit, st.block_cache_filter_miss),
            total: HitsMisses::new(st.block_cache_hit, st.block_cache_miss),
            bloom_checked: st.bloom_checked,
            bloom_useful: st.bloom_useful,
        }))
    })
    .await
}
