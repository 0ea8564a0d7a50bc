//! Maintenance and what the store reports: flush, compactRange, stats, healthz.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use strata_engine::{FileReport, Properties, ReplicaStatus, Statistics, StorageStats};
use utoipa::ToSchema;

use super::{JsonBody, blocking, parse};
use crate::codec::Encoding;
use crate::problem::Problem;
use crate::state::AppState;

#[utoipa::path(get, path = "/healthz", tag = "admin", responses((status = 200, description = "the server answers", body = String)))]
pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// A column family and an optional key range (for compactRange).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Target {
    cf: Option<String>,
    start: Option<String>,
    end: Option<String>,
    #[serde(default)]
    encoding: Encoding,
}

/// A column family to flush.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FlushTarget {
    cf: Option<String>,
}

/// An optional body: none, or JSON `null`, is the default (the document marks the body
/// optional; a client generated from it may send either).
pub(super) fn optional_body<T: Default + serde::de::DeserializeOwned>(
    body: &Bytes,
) -> Result<T, Problem> {
    if body.is_empty() {
        Ok(T::default())
    } else {
        Ok(parse::<Option<T>>(body)?.unwrap_or_default())
    }
}

/// What a maintenance call did, and to which column family.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Done {
    column_family: String,
}

/// What the console needs to know of the server it talks to.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ServerInfo {
    version: String,
    read_only: bool,
    /// The column family the mount shows, when `serve --mount` runs one.
    mounted_column_family: Option<String>,
    /// `GET /api/v1/events` has a feed.
    events: bool,
    /// Where `POST /api/v1/admin:backup` backs the store up (`serve --backup-to`); none: the
    /// server makes no backups.
    backup_destination: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/server", tag = "admin", responses((status = 200, body = ServerInfo)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn server(State(state): State<AppState>) -> Json<ServerInfo> {
    let i = &state.inner;
    Json(ServerInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        read_only: i.read_only,
        mounted_column_family: i.mount.as_ref().map(|m| m.column_family.clone()),
        events: i.events.is_some(),
        backup_destination: i.backups.as_ref().map(|b| b.destination()),
    })
}

#[utoipa::path(post, path = "/api/v1/admin:flush", tag = "admin", request_body(content = Option<FlushTarget>, description = "optional: the column family"), responses((status = 200, body = Done), (status = 403, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn flush(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Done>, Problem> {
    state.inner.check_writable()?;
    let t: FlushTarget = optional_body(&body)?;
    blocking(&state, move |s| {
        let cf = s.cf(t.cf.as_deref())?;
        s.db.flush_cf(&cf)?;
        tracing::info!(target: "strata::api", "flush {}", cf.name());
        Ok(Json(Done {
            column_family: cf.name().to_string(),
        }))
    })
    .await
}

#[utoipa::path(post, path = "/api/v1/admin:compactRange", tag = "admin", request_body(content = Option<Target>, description = "optional: the column family and key range"), responses((status = 200, body = Done), (status = 403, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn compact_range(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Done>, Problem> {
    state.inner.check_writable()?;
    let t: Target = optional_body(&body)?;
    let start = t
        .start
        .as_ref()
        .map(|s| t.encoding.decode("start", s))
        .transpose()?;
    let end = t
        .end
        .as_ref()
        .map(|e| t.encoding.decode("end", e))
        .transpose()?;
    // An inverted range holds no key: it compacts nothing, as an inverted deleteRange deletes
    // nothing (no schema can say "start before end").
    let inverted = matches!((&start, &end), (Some(s), Some(e)) if s > e);
    let _heavy = state.heavy().await?;
    blocking(&state, move |s| {
        let cf = s.cf(t.cf.as_deref())?;
        if !inverted {
            s.db.compact_range_cf(&cf, start.as_deref(), end.as_deref())?;
        }
        tracing::info!(target: "strata::api", "compactRange {}", cf.name());
        Ok(Json(Done {
            column_family: cf.name().to_string(),
        }))
    })
    .await
}

/// The store's shape and its counters since open.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Stats {
    properties: Properties,
    statistics: Statistics,
    /// The storage backend's own counters: present for a store in a bucket (requests, bytes
    /// moved, cache, writer epoch), absent on the local disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    storage: Option<StorageStats>,
    /// How far behind its source a replica (`serve --replica-of`) is; absent on any other
    /// store.
    #[serde(skip_serializing_if = "Option::is_none")]
    replica: Option<ReplicaStatus>,
}

/// Every live file checked while the store serves.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct VerifyReply {
    ok: bool,
    files: Vec<FileReport>,
    /// What is open to more accounts than the store means to be (file modes looser than its
    /// directory says), a line each with the fix; not damage: `ok` does not count them.
    warnings: Vec<String>,
}

#[utoipa::path(get, path = "/api/v1/stats", tag = "observe", responses((status = 200, description = "the engine's properties and statistics", body = Stats)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn stats(State(state): State<AppState>) -> Result<Json<Stats>, Problem> {
    blocking(&state, |s| {
        Ok(Json(Stats {
            properties: s.db.properties(),
            statistics: s.db.statistics(),
            storage: s.db.storage_stats(),
            replica: s.db.replica_status(),
        }))
    })
    .await
}

#[utoipa::path(get, path = "/api/v1/admin/verify", tag = "admin", responses((status = 200, description = "every checksum of every live table and sealed blob file; `ok` is false when a file is damaged", body = VerifyReply)), security(("bearer" = []), ("cookie" = [])))]
/// Checks the open store's live files while it keeps serving.
pub(crate) async fn verify(State(state): State<AppState>) -> Result<Json<VerifyReply>, Problem> {
    let _heavy = state.heavy().await?;
    blocking(&state, |s| {
        let report = strata_engine::verify_live(&s.db)?;
        Ok(Json(VerifyReply {
            ok: report.is_ok(),
            files: report.files,
            warnings: report.warnings,
        }))
    })
    .await
}
