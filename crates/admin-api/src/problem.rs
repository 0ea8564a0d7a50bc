//! Errors as RFC 9457 problem documents, and the one place engine errors become HTTP statuses.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use strata_engine::ErrorKind;

/// An `application/problem+json` document.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The engine's error kind, when the engine failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_error: Option<String>,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Problem {
        Problem {
            kind: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            detail: detail.into(),
            engine_error: None,
        }
    }

    pub fn bad_request(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, detail)
    }

    pub fn unprocessable(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::FORBIDDEN, detail)
    }

    pub fn unauthorized(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::UNAUTHORIZED, detail)
    }
}

/// The engine error kind of a read that must be asked again off the async workers.
const INCOMPLETE: &str = "incomplete";

impl Problem {
    /// Whether this is a cache-only read that needs the disk (`routes::read` asks again).
    pub(crate) fn is_incomplete(&self) -> bool {
        self.engine_error.as_deref() == Some(INCOMPLETE)
    }
}

impl From<strata_engine::Error> for Problem {
    fn from(e: strata_engine::Error) -> Problem {
        let (status, kind) = match e.kind() {
            ErrorKind::InvalidArgument => (StatusCode::BAD_REQUEST, "invalid_argument"),
            ErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ErrorKind::ReadOnly => (StatusCode::FORBIDDEN, "read_only"),
            ErrorKind::NoSpace => (StatusCode::INSUFFICIENT_STORAGE, "no_space"),
            ErrorKind::Busy => (StatusCode::CONFLICT, "busy"),
            ErrorKind::Fenced => (StatusCode::CONFLICT, "fenced"),
            ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ErrorKind::Closed => (StatusCode::SERVICE_UNAVAILABLE, "closed"),
            ErrorKind::NotSupported => (StatusCode::NOT_IMPLEMENTED, "not_supported"),
            ErrorKind::Corruption => (StatusCode::INTERNAL_SERVER_ERROR, "corruption"),
            ErrorKind::Background => (StatusCode::SERVICE_UNAVAILABLE, "background_error"),
            // Only a read asked to stay in memory fails so, and `routes::read` asks again.
            ErrorKind::Incomplete => (StatusCode::SERVICE_UNAVAILABLE, INCOMPLETE),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "io"),
        };
        if status.is_server_error() && kind != INCOMPLETE {
            tracing::error!("engine: {e}");
        }
        let mut p = Problem::new(status, e.to_string());
        p.engine_error = Some(kind.into());
        p
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        (
            status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body,
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_error_kinds_map_to_statuses() {
        let p = Problem::from(strata_engine::Error::InvalidArgument(
            "no column family named x".into(),
        ));
        assert_eq!(
            (p.status, p.engine_error.as_deref()),
            (400, Some("invalid_argument"))
        );
        let p = Problem::from(strata_engine::Error::ReadOnly("d".into()));
        assert_eq!(p.status, 403);
        let p = Problem::from(strata_engine::Error::Fenced("a newer writer".into()));
        assert_eq!((p.status, p.engine_error.as_deref()), (409, Some("fenced")));
        let p = Problem::from(strata_engine::Error::Unavailable("bucket down".into()));
        assert_eq!(
            (p.status, p.engine_error.as_deref()),
            (503, Some("unavailable"))
        );
        let p = Problem::from(strata_engine::Error::Corruption {
            file: "000001.sst".into(),
            detail: "bad".into(),
        });
        assert_eq!(
            (p.status, p.engine_error.as_deref()),
            (500, Some("corruption"))
        );
        assert!(p.detail.contains("000001.sst"));
    }
}
