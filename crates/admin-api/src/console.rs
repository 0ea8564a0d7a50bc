//! The web console: `web-admin/dist`, embedded at build time (read from disk in debug builds, so a
//! debug build needs no `npm`). Hashed assets are cached for a year; `index.html` answers every
//! client route and is revalidated with its ETag.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use crate::problem::Problem;

#[derive(rust_embed::Embed)]
#[folder = "../../web-admin/dist"]
#[allow_missing = true]
struct Assets;

/// The console's own pages and scripts: the console loads only from this origin, is never framed,
/// and talks only to this API.
const CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Whether a path is the console's (everything but the API, its docs and the metrics).
pub(crate) fn is_console_path(path: &str) -> bool {
    !(path.starts_with("/api/") || path == "/api" || path == "/metrics" || path == "/healthz")
}

/// Answers a GET or HEAD for a console path: the asset, or `index.html` for a client route.
pub(crate) async fn serve(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    if !(method == Method::GET || method == Method::HEAD) || !is_console_path(uri.path()) {
        return Problem::not_found("no such route").into_response();
    }
    let path = uri.path().trim_start_matches('/');
    let (name, file) = match Assets::get(path) {
        Some(f) if !path.is_empty() => (path, f),
        // A missing hashed asset is a 404, not the page: a stale page would load HTML as script.
        _ if path.starts_with("assets/") => {
            return Problem::not_found("no such asset").into_response();
        }
        _ => match Assets::get("index.html") {
            Some(f) => ("index.html", f),
            None => {
                return Problem::not_found(
                    "the console is not built into this binary: `make run` builds it (npm ci and \
                     npm run build in web-admin/)",
                )
                .into_response();
            }
        },
    };
    let etag = format!("\"{}\"", hex(&file.metadata.sha256_hash()[..16]));
    let cache = if name.starts_with("assets/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let mut res = if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag))
    {
        StatusCode::NOT_MODIFIED.into_response()
    } else if method == Method::HEAD {
        StatusCode::OK.into_response()
    } else {
        file.data.into_owned().into_response()
    };
    let h = res.headers_mut();
    for (k, v) in [
        (header::CONTENT_TYPE, file.metadata.mimetype()),
        (header::CACHE_CONTROL, cache),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    res
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_is_never_the_console() {
        for p in ["/api/v1/kv", "/api/docs", "/metrics", "/healthz", "/api"] {
            assert!(!is_console_path(p), "{p}");
        }
        for p in [
            "/",
            "/keys",
            "/lsm/default",
            "/assets/index-abc.js",
            "/apis",
        ] {
            assert!(is_console_path(p), "{p}");
        }
    }
}
