//! The whole router without a socket (`tower::ServiceExt::oneshot`): every route, each bad input
//! answered with a problem document and nothing changed, the security gate, paging.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod kv;
mod refusals;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use strata_admin_api::{AppState, Limits, Security, app};
use strata_engine::{Db, Options};
use tower::ServiceExt;

const TOKEN: &str = "test-token-0123456789abcdef";

struct Api {
    db: Arc<Db>,
    router: axum::Router,
    _dir: tempfile::TempDir,
}

fn api_with(read_only: bool, limits: Limits) -> Api {
    api_on(
        tempfile::tempdir().unwrap(),
        Options::default(),
        read_only,
        limits,
    )
}

/// The API over the store in `dir`, opened with `opts`.
fn api_on(dir: tempfile::TempDir, opts: Options, read_only: bool, limits: Limits) -> Api {
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    Api {
        router: app(state_of(db.clone(), read_only, limits)),
        db,
        _dir: dir,
    }
}

/// Options that put values of 1000 bytes or more in blob files.
#[allow(clippy::field_reassign_with_default)]
fn with_blob_files() -> Options {
    let mut o = Options::default();
    // Column family options, reached through the store's options.
    o.enable_blob_files = true;
    o.min_blob_size = 1000;
    o
}

/// The server's state over `db`, for this file's token on loopback.
fn state_of(db: Arc<Db>, read_only: bool, limits: Limits) -> AppState {
    AppState::new(
        db,
        read_only,
        limits,
        Security::loopback(TOKEN.into()),
        None,
    )
}

fn api() -> Api {
    api_with(false, Limits::default())
}

fn b64(b: &[u8]) -> String {
    STANDARD.encode(b)
}

fn path_key(k: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(k)
}

struct Reply {
    status: StatusCode,
    content_type: String,
    body: Vec<u8>,
    /// `Strata-Sequence`, when the answer has one.
    sequence: Option<u64>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// A problem document with `status`.
    fn problem(&self, status: u16) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(self.content_type, "application/problem+json");
        let p = self.json();
        assert_eq!(p["status"], status);
        assert!(p["detail"].as_str().is_some_and(|d| !d.is_empty()));
        p
    }
}

impl Api {
    async fn send(&self, req: Request<Body>) -> Reply {
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let content_type = res
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let sequence = res
            .headers()
            .get("strata-sequence")
            .map(|v| v.to_str().unwrap().parse().unwrap());
        let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
        Reply {
            status,
            content_type,
            body,
            sequence,
        }
    }

    async fn call(&self, method: &str, uri: &str, body: Option<Value>) -> Reply {
        let mut b = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, "localhost:7070")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        let body = match body {
            Some(v) => {
                b = b.header(header::CONTENT_TYPE, "application/json");
                Body::from(serde_json::to_vec(&v).unwrap())
            }
            None => Body::empty(),
        };
        self.send(b.body(body).unwrap()).await
    }

    fn count(&self) -> usize {
        self.db.iter(&Default::default()).unwrap().forward().count()
    }

    /// `method uri` with `body` sent as `content_type` (none when `None`).
    async fn typed(
        &self,
        method: &str,
        uri: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Reply {
        let mut b = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, "localhost:7070")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        if let Some(t) = content_type {
            b = b.header(header::CONTENT_TYPE, t);
        }
        self.send(b.body(Body::from(body.to_vec())).unwrap()).await
    }
}
