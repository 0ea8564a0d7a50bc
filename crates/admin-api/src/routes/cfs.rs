//! Column families: list, create, drop.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use strata_engine::ColumnFamilyOptions;

use super::{JsonBody, blocking, parse};
use crate::problem::Problem;
use crate::state::AppState;

/// The store's column families.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct CfList {
    pub column_families: Vec<String>,
}

/// Lists the column families.
#[utoipa::path(get, path = "/api/v1/cfs", tag = "cfs", responses((status = 200, body = CfList)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<CfList>, Problem> {
    let names = blocking(&state, |s| Ok(s.db.list_cf())).await?;
    Ok(Json(CfList {
        column_families: names,
    }))
}

/// A column family to create (with the default options).
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Create {
    /// 1 to 1024 bytes.
    #[schema(min_length = 1, max_length = 1024)]
    name: String,
}

/// Creates a column family.
#[utoipa::path(post, path = "/api/v1/cfs", tag = "cfs", request_body = Create,
    responses((status = 201, body = Create), (status = 409, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn create(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Create>), Problem> {
    state.inner.check_writable()?;
    let req: Create = parse(&body)?;
    let name = req.name.clone();
    blocking(&state, move |s| {
        if s.db.cf(&req.name).is_ok() {
            return Err(Problem::new(
                StatusCode::CONFLICT,
                format!("column family {} exists", req.name),
            ));
        }
        s.db.create_cf(&req.name, ColumnFamilyOptions::default())?;
        tracing::info!(target: "strata::api", "create column family {}", req.name);
        Ok(())
    })
    .await?;
    Ok((StatusCode::CREATED, Json(Create { name })))
}

/// Drops a column family and its data.
#[utoipa::path(delete, path = "/api/v1/cfs/{name}", tag = "cfs", params(("name" = String, Path)),
    responses((status = 204), (status = 404, body = Problem), (status = 403, body = Problem),
        (status = 409, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn drop(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, Problem> {
    state.inner.check_writable()?;
    blocking(&state, move |s| {
        let cf = s.cf(Some(&name))?;
        if let Some(m) = s.mounted(&cf) {
            // Its files would vanish under whoever has them open, and the mount could not say
            // what happened to them.
            return Err(Problem::new(
                axum::http::StatusCode::CONFLICT,
                format!(
                    "column family {name} is shown by the mount of {}: unmount it first",
                    m.column_family
                ),
            ));
        }
        s.db.drop_cf(&cf)?;
        tracing::info!(target: "strata::api", "drop column family {name}");
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A column family's options that shape its files, and its sizes now.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct CfDetail {
    name: String,
    write_buffer_size: u64,
    max_write_buffer_number: u64,
    block_size: u64,
    compression: String,
    bloom_bits_per_key: u32,
    max_bytes_for_level_base: u64,
    max_bytes_for_level_multiplier: u64,
    target_file_size_base: u64,
    disable_auto_compactions: bool,
    enable_blob_files: bool,
    min_blob_size: u64,
    blob_file_size: u64,
    ttl_range_secs: u64,
    /// FIFO eviction limit on live bytes (0: none).
    max_db_size: u64,
    enable_blob_garbage_collection: bool,
    /// Live table plus live blob bytes.
    live_bytes: u64,
    total_sst_bytes: u64,
    blob_file_bytes: u64,
    memtable_bytes: u64,
    total_files: u64,
    estimate_num_keys: u64,
}

/// One column family's options and sizes.
#[utoipa::path(get, path = "/api/v1/cfs/{name}", tag = "cfs", params(("name" = String, Path)),
    responses((status = 200, body = CfDetail), (status = 404, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<CfDetail>, Problem> {
    blocking(&state, move |s| {
        let cf = s.cf(Some(&name))?;
        let p = s.db.properties_cf(&cf)?;
        let o = cf.options();
        Ok(Json(CfDetail {
            name: p.name,
            write_buffer_size: o.write_buffer_size as u64,
            max_write_buffer_number: o.max_write_buffer_number as u64,
            block_size: o.block_size as u64,
            compression: format!("{:?}", o.compression).to_lowercase(),
            bloom_bits_per_key: o.bloom_bits_per_key,
            max_bytes_for_level_base: o.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: o.max_bytes_for_level_multiplier,
            target_file_size_base: o.target_file_size_base,
            disable_auto_compactions: o.disable_auto_compactions,
            enable_blob_files: o.enable_blob_files,
            min_blob_size: o.min_blob_size as u64,
            blob_file_size: o.blob_file_size,
            ttl_range_secs: o.ttl_range_secs,
            max_db_size: o.max_db_size,
            enable_blob_garbage_collection: o.enable_blob_garbage_collection,
            live_bytes: p.live_bytes,
            total_sst_bytes: p.total_sst_bytes,
            blob_file_bytes: p.blobs.blob_file_bytes,
            memtable_bytes: p.memtable_bytes,
            total_files: p.total_files as u64,
            estimate_num_keys: p.estimate_num_keys,
        }))
    })
    .await
}
