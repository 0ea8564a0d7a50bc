//! `POST /api/v1/admin:backup` and `GET /api/v1/backups`: backups of the served store to the
//! destination the server was started with (`backups.rs`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use super::{JsonBody, blocking, optional_body};
use crate::backups::{BackupMade, BackupSummary, BackupTarget};
use crate::problem::Problem;
use crate::state::AppState;

/// How to back up.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BackupRequest {
    /// Flush every column family first, so writes made without the WAL are in the backup too.
    #[serde(default)]
    flush: bool,
}

fn target(state: &AppState) -> Result<Arc<dyn BackupTarget>, Problem> {
    state.inner.backups.clone().ok_or_else(|| {
        Problem::new(
            StatusCode::CONFLICT,
            "this server makes no backups: start it with --backup-to DEST (s3://BUCKET/PREFIX \
             or a directory) to back up the store it serves",
        )
    })
}

#[utoipa::path(post, path = "/api/v1/admin:backup", tag = "admin", request_body(content = Option<BackupRequest>, description = "optional: whether to flush first"), responses((status = 200, description = "the backup, made while the store kept serving", body = BackupMade), (status = 403, body = Problem), (status = 409, description = "no destination configured, or a backup is running", body = Problem)), security(("bearer" = []), ("cookie" = [])))]
/// Backs up the served store to the server's destination while it keeps serving: every write
/// acknowledged before the request.
pub(crate) async fn create_backup(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<BackupMade>, Problem> {
    let request: BackupRequest = optional_body(&body)?;
    let target = target(&state)?;
    // One at a time, and a second is refused rather than queued: a queued request would hold
    // its place (and, once its client gave up, run anyway) for the whole of the first.
    let running = state
        .inner
        .backing_up
        .clone()
        .try_lock_owned()
        .map_err(|_| {
            Problem::new(
                StatusCode::CONFLICT,
                "a backup of this store is running: ask again once it is done",
            )
        })?;
    blocking(&state, move |s| {
        let _running = running;
        let made = target.create(&s.db, request.flush)?;
        tracing::info!(
            target: "strata::api",
            "backup {} to {}: {} objects copied ({} bytes), {} there already",
            made.backup.number,
            made.destination,
            made.copied,
            made.bytes_copied,
            made.already_there
        );
        Ok(Json(made))
    })
    .await
}

#[utoipa::path(get, path = "/api/v1/backups", tag = "admin", responses((status = 200, description = "the backups at the server's destination, oldest first", body = Vec<BackupSummary>), (status = 409, body = Problem)), security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn list_backups(
    State(state): State<AppState>,
) -> Result<Json<Vec<BackupSummary>>, Problem> {
    let target = target(&state)?;
    blocking(&state, move |_| Ok(Json(target.list()?))).await
}
