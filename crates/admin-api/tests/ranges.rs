//! Raw values by range and by stream: `Range` (206, Content-Range, 416), `HEAD`, and a value
//! larger than one read step streamed from one snapshot while another request overwrites it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http_body_util::BodyExt;
use strata_admin_api::{AppState, Limits, Security, app};
use strata_engine::{Db, Options};
use tower::ServiceExt;

const TOKEN: &str = "test-token-0123456789abcdef";

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

/// A raw `method` of `key`, with `range` as its Range header.
fn request(method: &str, key: &[u8], range: Option<&str>) -> Request<Body> {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("/api/v1/kv/{}?raw=1", URL_SAFE_NO_PAD.encode(key)))
        .header(header::HOST, "localhost:7070")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    if let Some(r) = range {
        req = req.header(header::RANGE, r);
    }
    req.body(Body::empty()).unwrap()
}

async fn send(router: &axum::Router, method: &str, key: &[u8], range: Option<&str>) -> Reply {
    let res = router
        .clone()
        .oneshot(request(method, key, range))
        .await
        .unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

fn header_of(r: &Reply, name: header::HeaderName) -> &str {
    r.headers.get(name).map_or("", |v| v.to_str().unwrap())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 253) as u8).collect()
}

fn served() -> (Arc<Db>, axum::Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let state = AppState::new(
        db.clone(),
        false,
        Limits::default(),
        Security::loopback(TOKEN.into()),
        None,
    );
    (db, app(state), dir)
}

#[tokio::test]
async fn a_range_answers_206_with_its_part_and_416_past_the_end() {
    let (db, router, _dir) = served();
    let value = pattern(1000);
    db.put("k", &value).unwrap();

    let whole = send(&router, "GET", b"k", None).await;
    assert_eq!(whole.status, StatusCode::OK);
    assert_eq!(whole.body, value);
    assert_eq!(header_of(&whole, header::ACCEPT_RANGES), "bytes");

    for (spec, start, end) in [
        ("bytes=10-19", 10, 20),
        ("bytes=990-", 990, 1000),
        ("bytes=-5", 995, 1000),
        ("bytes=900-5000", 900, 1000),
    ] {
        let r = send(&router, "GET", b"k", Some(spec)).await;
        assert_eq!(r.status, StatusCode::PARTIAL_CONTENT, "{spec}");
        assert_eq!(r.body, value[start..end], "{spec}");
        assert_eq!(
            header_of(&r, header::CONTENT_RANGE),
            format!("bytes {start}-{}/1000", end - 1)
        );
        assert_eq!(
            header_of(&r, header::CONTENT_LENGTH),
            (end - start).to_string()
        );
    }
    let past = send(&router, "GET", b"k", Some("bytes=1000-")).await;
    assert_eq!(past.status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(header_of(&past, header::CONTENT_RANGE), "bytes */1000");
    assert_eq!(
        header_of(&past, header::CONTENT_TYPE),
        "application/problem+json"
    );
    // Several ranges, or another unit, are ignored: the whole value.
    let several = send(&router, "GET", b"k", Some("bytes=0-1,5-6")).await;
    assert_eq!((several.status, several.body.len()), (StatusCode::OK, 1000));
    // With If-Range (no validator can match it) the whole value comes back.
    let mut req = request("GET", b"k", Some("bytes=10-19"));
    req.headers_mut()
        .insert(header::IF_RANGE, "\"anything\"".parse().unwrap());
    let res = router.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let absent = send(&router, "GET", b"nope", Some("bytes=0-1")).await;
    assert_eq!(absent.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn head_answers_the_length_without_the_bytes() {
    let (db, router, _dir) = served();
    db.put("k", pattern(12_345)).unwrap();
    let r = send(&router, "HEAD", b"k", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(header_of(&r, header::CONTENT_LENGTH), "12345");
    assert_eq!(header_of(&r, header::ACCEPT_RANGES), "bytes");
    assert!(r.body.is_empty());
    assert_eq!(
        send(&router, "HEAD", b"nope", None).await.status,
        StatusCode::NOT_FOUND
    );
}

/// A 5 MiB value is streamed (more than one read step) from the snapshot the GET took: the key
/// is overwritten and then deleted after the first bytes arrive, and the rest is still the
/// original value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_value_streams_from_one_snapshot_while_it_is_overwritten() {
    let (db, router, _dir) = served();
    let value = pattern(5 << 20);
    db.put("big", &value).unwrap();
    for range in [None, Some("bytes=1048000-4200000")] {
        let res = router
            .clone()
            .oneshot(request("GET", b"big", range))
            .await
            .unwrap();
        let want = match range {
            None => &value[..],
            Some(_) => &value[1_048_000..=4_200_000],
        };
        assert_eq!(
            res.headers()[header::CONTENT_LENGTH],
            want.len().to_string()
        );
        let mut body = res.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert!(
            !first.is_empty() && first.len() < want.len(),
            "streamed in steps"
        );
        db.put("big", "overwritten").unwrap();
        db.delete("big").unwrap();
        db.flush().unwrap();
        let rest = body.collect().await.unwrap().to_bytes();
        assert!([&first[..], &rest[..]].concat() == want);
        db.put("big", &value).unwrap();
    }
}
