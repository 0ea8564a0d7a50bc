//! The gate every request passes: a Host header on the allowlist (against DNS rebinding), then a
//! bearer token compared in constant time. `/healthz` and the console's static files need no token.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::problem::Problem;
use crate::state::AppState;

/// The Host header's name without its port.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map_or(host, |(h, _)| &host[..h.len() + 1]);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

/// Whether `given` is the token, compared in constant time; nothing matches an empty token, so
/// a server built with one (through the library) lets no one in rather than everyone.
pub(crate) fn token_matches(expected: &str, given: &str) -> bool {
    !expected.is_empty()
        && expected.len() == given.len()
        && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}

pub(crate) async fn gate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let s = &state.inner.security;
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !s
        .allowed_hosts
        .iter()
        .any(|a| a.eq_ignore_ascii_case(host_name(host)))
    {
        return Problem::forbidden(format!(
            "host {host:?} is not allowed (--allow-host adds one)"
        ))
        .into_response();
    }
    // The console's files hold no data: the page signs in through the API.
    if req.uri().path() == "/healthz" || crate::console::is_console_path(req.uri().path()) {
        return next.run(req).await;
    }
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "));
    if let Some(t) = bearer {
        return if token_matches(&s.token, t) {
            next.run(req).await
        } else {
            Problem::unauthorized("wrong token").into_response()
        };
    }
    match session_cookie(req.headers()) {
        Some(t) if token_matches(&s.token, t) => {
            // A browser sends the cookie with any site's request: a change must come from a page
            // of this origin.
            let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
            if !safe && !same_origin(req.headers(), host) {
                return Problem::forbidden("a change with the session cookie needs this origin")
                    .into_response();
            }
            next.run(req).await
        }
        Some(_) => {
            Problem::unauthorized("the session cookie is stale: sign in again").into_response()
        }
        None => Problem::unauthorized("Authorization: Bearer TOKEN is required").into_response(),
    }
}

/// The name of the console's session cookie.
pub(crate) const SESSION_COOKIE: &str = "strata_session";

fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(SESSION_COOKIE)?.strip_prefix('='))
}

/// Whether the request's Origin is `http://HOST` or `https://HOST` for the Host it was sent to.
fn same_origin(headers: &HeaderMap, host: &str) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        return false;
    };
    let bare = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    bare == Some(host)
}

/// `POST /api/v1/session` (bearer token required): the token as an `HttpOnly; SameSite=Strict`
/// cookie, for the console (`EventSource` cannot send headers).
#[utoipa::path(post, path = "/api/v1/session", tag = "admin", responses((status = 204, description = "sets the strata_session cookie"), (status = 401, body = Problem)), security(("bearer" = [])))]
pub(crate) async fn session(State(state): State<AppState>) -> Response {
    let cookie = format!(
        "{SESSION_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        state.inner.security.token
    );
    (
        axum::http::StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, cookie)],
    )
        .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("localhost:7070"), "localhost");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("[::1]:7070"), "[::1]");
        assert_eq!(host_name("evil.example:80"), "evil.example");
    }

    #[test]
    fn the_session_cookie_and_the_origin_are_read_from_headers() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            "a=1; strata_session=tok; b=2".parse().unwrap(),
        );
        assert_eq!(session_cookie(&h), Some("tok"));
        h.insert(header::ORIGIN, "http://localhost:7070".parse().unwrap());
        assert!(same_origin(&h, "localhost:7070"));
        assert!(!same_origin(&h, "127.0.0.1:7070"));
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(!same_origin(&h, "localhost:7070"));
        assert!(!same_origin(&HeaderMap::new(), "localhost:7070"));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abc", "abd"));
        assert!(!token_matches("abc", "ab"));
        // An empty token (a server built with one through the library) lets no one in, not
        // an empty Bearer or cookie.
        assert!(!token_matches("", ""));
    }
}
