//! Strata's REST API: data, admin and observability routes over one open store, for scripts and
//! for the web console. [`app`] builds the `Router` (tested without a socket); [`serve`] runs it.
//!
//! - Keys and values travel as base64 in JSON (`?encoding=utf8` for text), or raw with `?raw=1`.
//! - Every error is an `application/problem+json` document (RFC 9457) naming the engine's error
//!   kind when the engine failed.
//! - Every route under `/api/` and `/metrics` needs `Authorization: Bearer TOKEN` (or the
//!   console's session cookie); the Host header must be on the allowlist; `read_only` refuses
//!   every change with 403.
//! - Every other path is the embedded web console (`web-admin/`), which holds no data of its own.

mod auth;
mod backups;
pub mod codec;
mod console;
mod events;
mod freshness;
mod metrics;
mod problem;
mod range;
pub(crate) mod routes;
mod serve;
mod state;
pub mod token;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::IntoResponse;

pub use backups::{BackupMade, BackupSummary, BackupTarget};
pub use events::{Event, EventHub};
pub use freshness::SEQUENCE_HEADER;
pub use problem::Problem;
pub use routes::openapi::{ApiDoc, document as openapi_document};
pub use serve::{ServeConfig, serve, serve_until, token_at, token_for};
pub use state::{AppState, Limits, MAX_BODY_LIMIT, MountLink, Security};

/// The whole API, every layer included.
pub fn app(state: AppState) -> Router {
    let limits = state.inner.limits.clone();
    routes::router()
        .fallback(console::serve)
        .method_not_allowed_fallback(|| async {
            Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "this route does not take that method",
            )
            .into_response()
        })
        .layer(axum::middleware::map_response(as_problem))
        .layer(DefaultBodyLimit::max(limits.body_bytes.min(MAX_BODY_LIMIT)))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::gate,
        ))
        .layer(cors(&state.inner.security.cors_origins))
        .with_state(state)
}

/// Cross-origin access for the named origins only (none: the layer adds nothing).
fn cors(origins: &[String]) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderValue, Method, header};
    let allowed: Vec<HeaderValue> = origins.iter().filter_map(|o| o.parse().ok()).collect();
    tower_http::cors::CorsLayer::new()
        .allow_origin(allowed)
        .allow_methods([
            Method::GET,
            Method::HEAD,
            Method::PUT,
            Method::PATCH,
            Method::POST,
            Method::DELETE,
        ])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .expose_headers([header::HeaderName::from_static(freshness::SEQUENCE_HEADER)])
}

/// Failures axum answers itself (a body over the limit, a path that does not parse, a timeout)
/// become problem documents like every other error.
async fn as_problem(res: axum::response::Response) -> axum::response::Response {
    let status = res.status();
    let is_problem = res
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/problem+json");
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return res;
    }
    let body = axum::body::to_bytes(res.into_body(), 64 << 10)
        .await
        .unwrap_or_default();
    let detail = String::from_utf8_lossy(&body).trim().to_string();
    let detail = if detail.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        detail
    };
    Problem::new(status, detail).into_response()
}
