//! Column families: list, create, drop.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use strata_engine::ColumnFamilyOptions;

use super::{blocking, parse};
use crate::problem::Problem;
use crate::state::AppState;

pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<Value>, Problem> {
    let names = blocking(&state, |s| Ok(s.db.list_cf())).await?;
    Ok(Json(json!({ "column_families": names })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    name: String,
}

pub(crate) async fn create(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), Problem> {
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
    Ok((StatusCode::CREATED, Json(json!({ "name": name }))))
}

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
