//! Column families: list, create, drop.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use strata_engine::ColumnFamilyOptions;

use super::{blocking, parse};
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
    name: String,
}

/// Creates a column family.
#[utoipa::path(post, path = "/api/v1/cfs", tag = "cfs", request_body = Create,
    responses((status = 201, body = Create), (status = 409, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn create(
    State(state): State<AppState>,
    body: Bytes,
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
    responses((status = 204), (status = 404, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = []), ("cookie" = [])))]
pub(crate) async fn drop(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, Problem> {
    state.inner.check_writable()?;
    blocking(&state, move |s| {
        let cf = s.cf(Some(&name))?;
        s.db.drop_cf(&cf)?;
        tracing::info!(target: "strata::api", "drop column family {name}");
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
