//! The gate every request passes: a Host header on the allowlist (against DNS rebinding), then a
//! bearer token compared in constant time. `/healthz` needs no token.

use axum::extract::{Request, State};
use axum::http::header;
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

pub(crate) fn token_matches(expected: &str, given: &str) -> bool {
    expected.len() == given.len() && bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
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
    if req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "));
    match given {
        Some(t) if token_matches(&s.token, t) => next.run(req).await,
        Some(_) => Problem::unauthorized("wrong token").into_response(),
        None => Problem::unauthorized("Authorization: Bearer TOKEN is required").into_response(),
    }
}

#[cfg(test)]
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
    fn tokens_compare_whole() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abc", "abd"));
        assert!(!token_matches("abc", "ab"));
    }
}
