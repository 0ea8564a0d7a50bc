//! The whole router without a socket (`tower::ServiceExt::oneshot`): every route, each bad input
//! answered with a problem document and nothing changed, the security gate, paging.

#![allow(clippy::unwrap_used, clippy::expect_used)]

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
        let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
        Reply {
            status,
            content_type,
            body,
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

/// Each route takes the media types its document names: JSON routes refuse a body of another
/// type (a form post, text) with 415 and change nothing; PATCH takes raw bytes only; a PUT's
/// type says what its body is, and a PUT without a body stores an empty value.
#[tokio::test]
async fn each_route_takes_the_media_types_its_document_names() {
    let a = api();
    let key = format!("/api/v1/kv/{}", path_key(b"k"));
    let batch = br#"{"ops":[{"op":"put","key":"YQ==","value":"MQ=="}]}"#;
    for t in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        a.typed("POST", "/api/v1/kv:batchWrite", t, batch)
            .await
            .problem(415);
    }
    assert_eq!(a.count(), 0);
    // Every other JSON route refuses a text body alike, before it reads anything.
    for route in [
        "/api/v1/kv:scan",
        "/api/v1/kv:batchGet",
        "/api/v1/kv:deleteRange",
        "/api/v1/cfs",
        "/api/v1/admin:flush",
        "/api/v1/admin:compactRange",
    ] {
        a.typed("POST", route, Some("text/plain"), b"{}")
            .await
            .problem(415);
    }
    let ok = a
        .typed(
            "POST",
            "/api/v1/kv:batchWrite",
            Some("Application/JSON; charset=utf-8"),
            batch,
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK);
    // An optional body left out needs no type.
    let r = a.typed("POST", "/api/v1/admin:flush", None, b"").await;
    assert_eq!(r.status, StatusCode::OK);
    a.typed(
        "PATCH",
        &format!("{key}?offset=end"),
        Some("application/json"),
        br#"{"value":"aGk="}"#,
    )
    .await
    .problem(415);
    a.typed("PUT", &key, Some("text/plain"), b"hi")
        .await
        .problem(415);
    let r = a
        .typed(
            "PUT",
            &key,
            Some("application/octet-stream"),
            b"{\"value\":\"aGk=\"}",
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(a.db.get("k").unwrap().unwrap(), &br#"{"value":"aGk="}"#[..]);
    let r = a
        .typed(
            "PUT",
            &key,
            Some("application/json"),
            br#"{"value":"aGk="}"#,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(a.db.get("k").unwrap().unwrap(), &b"hi"[..]);
    for t in [Some("application/json"), None] {
        let r = a.typed("PUT", &key, t, b"").await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        assert_eq!(a.db.get("k").unwrap().unwrap(), &b""[..], "{t:?}");
    }
}

#[tokio::test]
async fn one_key_round_trips_in_every_encoding() {
    let a = api();
    let key = b"users/alice\x00bin";
    let uri = format!("/api/v1/kv/{}", path_key(key));
    let r = a
        .call("PUT", &uri, Some(json!({"value": b64(b"\xff\x00v")})))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = a.call("GET", &uri, None).await;
    assert_eq!(
        r.json(),
        json!({"key": b64(key), "value": b64(b"\xff\x00v")})
    );
    let r = a.call("GET", &format!("{uri}?raw=1"), None).await;
    assert_eq!(
        (r.content_type.as_str(), r.body.as_slice()),
        ("application/octet-stream", &b"\xff\x00v"[..])
    );
    // Bytes that are not UTF-8 cannot be shown as text.
    a.call("GET", &format!("{uri}?encoding=utf8"), None)
        .await
        .problem(422);
    let text = format!("/api/v1/kv/{}?encoding=utf8", path_key(b"greeting"));
    let r = a
        .call(
            "PUT",
            &format!("/api/v1/kv/{}", path_key(b"greeting")),
            Some(json!({"value": "héllo", "encoding": "utf8"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(a.call("GET", &text, None).await.json()["value"], "héllo");
    // The query shapes only a GET's answer: a PUT that names an encoding there is refused.
    a.call("PUT", &text, Some(json!({"value": "aGk="})))
        .await
        .problem(400);
    // No Content-Type: the body is the value.
    let raw = Request::builder()
        .method("PUT")
        .uri(format!("/api/v1/kv/{}?ttl=3600", path_key(b"blob")))
        .header(header::HOST, "127.0.0.1")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::from(vec![7u8; 100_000]))
        .unwrap();
    assert_eq!(a.send(raw).await.status, StatusCode::NO_CONTENT);
    assert_eq!(a.db.get("blob").unwrap().unwrap().len(), 100_000);
    assert_eq!(
        a.call("DELETE", &uri, None).await.status,
        StatusCode::NO_CONTENT
    );
    a.call("GET", &uri, None).await.problem(404);
}

/// How many of `family`'s calls ran on the async worker, and how many on the blocking pool, as
/// `/metrics` says.
async fn counted(a: &Api, family: &str) -> (u64, u64) {
    let text = String::from_utf8(a.call("GET", "/metrics", None).await.body).unwrap();
    let count = |place: &str| -> u64 {
        let line = format!("{family}_total{{where=\"{place}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("no {line} in {text}"))
            .parse()
            .unwrap()
    };
    (count("worker"), count("pool"))
}

/// A write (PUT, DELETE, batchWrite) the engine can commit without waiting is written where the
/// request is; one that syncs or puts a value for a blob file goes to the blocking pool. Each
/// is stored either way.
#[tokio::test]
async fn writes_run_on_the_worker_when_nothing_waits_and_on_the_pool_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let a = api_on(dir, with_blob_files(), false, Limits::default());
    let put = |key: &[u8], query: &str| format!("/api/v1/kv/{}{query}", path_key(key));
    let raw = Some("application/octet-stream");
    let r = a.typed("PUT", &put(b"plain", ""), raw, b"v").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(counted(&a, "strata_api_writes").await, (1, 0));
    let r = a.typed("PUT", &put(b"synced", "?sync=1"), raw, b"v").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(counted(&a, "strata_api_writes").await, (1, 1));
    let r = a.typed("PUT", &put(b"large", ""), raw, &[5u8; 2000]).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(counted(&a, "strata_api_writes").await, (1, 2));
    let json = a
        .call(
            "PUT",
            &put(b"json", "?ttl=60"),
            Some(json!({"value": "aGk="})),
        )
        .await;
    assert_eq!(json.status, StatusCode::NO_CONTENT);
    assert_eq!(counted(&a, "strata_api_writes").await, (2, 2));
    for (key, value) in [
        (&b"plain"[..], &b"v"[..]),
        (b"synced", b"v"),
        (b"large", &[5u8; 2000]),
        (b"json", b"hi"),
    ] {
        assert_eq!(a.db.get(key).unwrap().unwrap(), value);
    }
    // A DELETE and a batchWrite commit where they are too, unless they sync.
    let r = a.call("DELETE", &put(b"plain", ""), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(counted(&a, "strata_api_writes").await, (3, 2));
    let r = a.call("DELETE", &put(b"synced", "?sync=1"), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(counted(&a, "strata_api_writes").await, (3, 3));
    for (sync, expected) in [(false, (4, 3)), (true, (4, 4))] {
        let ops = json!([
            {"op": "put", "key": b64(format!("batch {sync}").as_bytes()), "value": b64(b"b")},
            {"op": "delete", "key": b64(b"json")},
        ]);
        let r = a
            .call(
                "POST",
                "/api/v1/kv:batchWrite",
                Some(json!({"ops": ops, "sync": sync})),
            )
            .await;
        assert_eq!(r.json()["applied"], 2);
        assert_eq!(counted(&a, "strata_api_writes").await, expected);
    }
    for (key, value) in [
        (&b"large"[..], &[5u8; 2000][..]),
        (b"batch false", b"b"),
        (b"batch true", b"b"),
    ] {
        assert_eq!(a.db.get(key).unwrap().unwrap(), value);
    }
    for gone in [&b"plain"[..], b"synced", b"json"] {
        assert_eq!(a.db.get(gone).unwrap(), None);
    }
}

/// A value past 64 KiB is copied and encoded on the blocking pool even when it is in memory
/// (a memtable, no blob files): a worker serves every connection meanwhile.
#[tokio::test]
async fn large_values_are_handled_on_the_pool_even_in_memory() {
    let a = api();
    let uri = format!("/api/v1/kv/{}", path_key(b"big"));
    let big = vec![3u8; 100 << 10];
    let r = a
        .typed("PUT", &uri, Some("application/octet-stream"), &big)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(counted(&a, "strata_api_writes").await, (0, 1));
    assert_eq!(a.call("GET", &format!("{uri}?raw=1"), None).await.body, big);
    let json = a.call("GET", &uri, None).await.json();
    assert_eq!(json["value"], b64(&big));
    assert_eq!(counted(&a, "strata_api_point_reads").await, (0, 2));
    let r = a
        .call(
            "POST",
            "/api/v1/kv:batchGet",
            Some(json!({"keys": [b64(b"big")]})),
        )
        .await;
    assert_eq!(r.json()["values"][0], b64(&big));
    assert_eq!(counted(&a, "strata_api_point_reads").await, (0, 3));
}

/// A point read the engine can answer from memory runs where the request is; one that needs
/// the disk (a table not open yet, a block not cached, a value in a blob file) is asked again on
/// the blocking pool, with the same answer. `/metrics` counts each place.
#[tokio::test]
async fn reads_run_in_memory_where_they_can_and_on_the_pool_where_they_need_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let big = vec![9u8; 5000];
    {
        let db = Db::open(dir.path(), with_blob_files()).unwrap();
        db.put("small", "in a table").unwrap();
        db.put("big", &big).unwrap();
        db.flush().unwrap();
    }
    // Reopened: no table open, nothing cached.
    let a = api_on(dir, with_blob_files(), false, Limits::default());
    let places = |a| counted(a, "strata_api_point_reads");
    let small = format!("/api/v1/kv/{}?raw=1", path_key(b"small"));
    let big_uri = format!("/api/v1/kv/{}?raw=1", path_key(b"big"));
    assert_eq!(places(&a).await, (0, 0));
    for (round, expected) in [(1, (0, 1)), (2, (1, 1))] {
        let r = a.call("GET", &small, None).await;
        assert_eq!(r.body, b"in a table", "round {round}");
        assert_eq!(places(&a).await, expected, "round {round}");
    }
    // A value in a blob file needs the disk every time.
    for round in 1..=2 {
        assert_eq!(a.call("GET", &big_uri, None).await.body, big);
        assert_eq!(places(&a).await, (1, 1 + round));
    }
    // A batch all in memory runs at once; one key on disk sends the batch to the pool.
    let batch = |keys: &[&[u8]]| json!({"keys": keys.iter().map(|k| b64(k)).collect::<Vec<_>>()});
    let r = a
        .call(
            "POST",
            "/api/v1/kv:batchGet",
            Some(batch(&[b"small", b"absent"])),
        )
        .await;
    assert_eq!(r.json()["values"], json!([b64(b"in a table"), null]));
    assert_eq!(places(&a).await, (2, 3));
    let r = a
        .call(
            "POST",
            "/api/v1/kv:batchGet",
            Some(batch(&[b"small", b"big"])),
        )
        .await;
    assert_eq!(r.json()["values"], json!([b64(b"in a table"), b64(&big)]));
    assert_eq!(places(&a).await, (2, 4));
}

/// batchGet reads its keys in place from the body, escaped or not, and writes each value into
/// the answer as it is: text with the characters JSON must escape comes back whole, base64 is
/// canonical, and a value that is not text answers 422 naming it.
#[tokio::test]
async fn batch_get_answers_escaped_keys_and_values_exactly() {
    let a = api();
    let text = "quote \" backslash \\ newline \n tab \t é \u{1}";
    a.db.put("k\"1", text).unwrap();
    a.db.put("k2", [0xff, 0x00, 0x80]).unwrap();
    let body = r#"{"encoding": "utf8", "keys": ["k\"1", "\u006b2", "k3"]}"#;
    let req = Request::builder()
        .method("POST")
        .uri("/api/v1/kv:batchGet")
        .header(header::HOST, "localhost:7070")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap();
    let p = a.send(req).await.problem(422);
    assert!(p["detail"].as_str().unwrap().contains("values[1]"), "{p}");
    let r = a
        .call(
            "POST",
            "/api/v1/kv:batchGet",
            Some(json!({"encoding": "utf8", "keys": ["k\"1", "k3"]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.content_type, "application/json");
    assert_eq!(r.json(), json!({"values": [text, null]}));
    let r = a
        .call(
            "POST",
            "/api/v1/kv:batchGet",
            Some(json!({"keys": [b64(b"k2"), b64(b"k\"1")]})),
        )
        .await;
    assert_eq!(
        r.json(),
        json!({"values": [b64(&[0xff, 0x00, 0x80]), b64(text.as_bytes())]})
    );
    // The first failure in key order answers: a value that is not text before a key the engine
    // refuses (over its size limit), and the other way round.
    let oversized = "k".repeat(strata_engine::MAX_KEY_SIZE + 1);
    for (keys, status) in [
        (["k2", oversized.as_str()], 422),
        ([oversized.as_str(), "k2"], 400),
    ] {
        let r = a
            .call(
                "POST",
                "/api/v1/kv:batchGet",
                Some(json!({"encoding": "utf8", "keys": keys})),
            )
            .await;
        r.problem(status);
    }
}

#[tokio::test]
async fn bad_input_is_a_problem_document_and_changes_nothing() {
    let limits = Limits {
        batch_get_keys: 3,
        batch_write_ops: 3,
        body_bytes: 1 << 20,
        ..Limits::default()
    };
    let a = api_with(false, limits);
    a.db.put("kept", "1").unwrap();
    let cases: Vec<(&str, String, Option<Value>, u16)> = vec![
        ("GET", "/api/v1/kv/***".into(), None, 400),
        (
            "PUT",
            format!("/api/v1/kv/{}", path_key(b"k")),
            Some(json!({"value": "%%"})),
            400,
        ),
        (
            "PUT",
            format!("/api/v1/kv/{}", path_key(b"k")),
            Some(json!({"vaule": "MQ=="})),
            400,
        ),
        (
            "PUT",
            format!("/api/v1/kv/{}?ttl=0", path_key(b"k")),
            Some(json!({"value": "MQ=="})),
            400,
        ),
        (
            "PUT",
            format!("/api/v1/kv/{}?cf=nope", path_key(b"k")),
            Some(json!({"value": "MQ=="})),
            404,
        ),
        (
            "PUT",
            format!("/api/v1/kv/{}?bogus=1", path_key(b"k")),
            Some(json!({"value": "MQ=="})),
            400,
        ),
        (
            "PUT",
            format!("/api/v1/kv/{}?sync=disk", path_key(b"k")),
            Some(json!({"value": "MQ=="})),
            400,
        ),
        (
            "POST",
            "/api/v1/kv:batchWrite".into(),
            Some(json!({"ops": [{"op":"put","key":"YQ==","value":"MQ=="}], "sync": "remote"})),
            400,
        ),
        (
            "POST",
            "/api/v1/kv:batchGet".into(),
            Some(json!({"keys": ["YQ==","YQ==","YQ==","YQ=="]})),
            400,
        ),
        (
            "POST",
            "/api/v1/kv:batchWrite".into(),
            Some(json!({"ops": [
            {"op":"put","key":"YQ==","value":"MQ=="},{"op":"delete","key":"%"}]})),
            400,
        ),
        (
            "POST",
            "/api/v1/kv:batchWrite".into(),
            Some(json!({"ops": [
            {"op":"put","key":"YQ==","value":"MQ=="},{"op":"put","key":"YQ==","value":"MQ=="},
            {"op":"put","key":"YQ==","value":"MQ=="},{"op":"put","key":"YQ==","value":"MQ=="}]})),
            400,
        ),
        (
            "POST",
            "/api/v1/kv:batchWrite".into(),
            Some(json!({"ops": [{"op":"merge","key":"YQ=="}]})),
            400,
        ),
        (
            "POST",
            "/api/v1/kv:scan".into(),
            Some(json!({"page_token": "garbage"})),
            400,
        ),
        (
            "POST",
            "/api/v1/kv:scan".into(),
            Some(json!({"page_token": URL_SAFE_NO_PAD.encode([9u8; 12])})),
            410,
        ),
        (
            "GET",
            "/api/v1/tombstones?page_token=CQkJCQkJCQkJCQkJ".into(),
            None,
            410,
        ),
        (
            "PUT",
            format!("/api/v1/kv/{}", path_key(b"k")),
            Some(json!({"value": "hi", "encoding": "utf8", "ttl": 5})),
            400,
        ),
        (
            "POST",
            "/api/v1/admin:flush".into(),
            Some(json!({"start": "YQ=="})),
            400,
        ),
        // A struct read from an array of its fields, as serde would.
        (
            "POST",
            "/api/v1/admin:flush".into(),
            Some(json!([null])),
            400,
        ),
        (
            "POST",
            "/api/v1/kv:batchGet".into(),
            Some(json!([["YQ=="]])),
            400,
        ),
        (
            "GET",
            "/api/v1/events?after=9223372036854775808".into(),
            None,
            400,
        ),
        (
            "POST",
            "/api/v1/kv:scan".into(),
            Some(json!({"limit": 0})),
            400,
        ),
        ("DELETE", "/api/v1/kv:scan".into(), None, 405),
        ("GET", "/api/v1/nothing".into(), None, 404),
        (
            "POST",
            "/api/v1/cfs".into(),
            Some(json!({"name": "default"})),
            409,
        ),
        ("DELETE", "/api/v1/cfs/nope".into(), None, 404),
    ];
    for (method, uri, body, status) in cases {
        let r = a.call(method, &uri, body.clone()).await;
        assert_eq!(
            r.status.as_u16(),
            status,
            "{method} {uri} {body:?}: {}",
            String::from_utf8_lossy(&r.body)
        );
        r.problem(status);
    }
    // Not bad input: a prefix and a range bound a scan together, and an inverted range is an
    // empty scan (no schema can say "start before end", so the server takes what it allows).
    for body in [
        json!({"prefix": "YQ==", "start": "YQ=="}),
        json!({"start": "Yg==", "end": "YQ=="}),
    ] {
        let r = a.call("POST", "/api/v1/kv:scan", Some(body.clone())).await;
        assert_eq!(r.status.as_u16(), 200, "{body}");
    }
    // Likewise an inverted range deletes nothing, and says so.
    let body = json!({"start": b64(b"z"), "end": b64(b"a")});
    let r = a.call("POST", "/api/v1/kv:deleteRange", Some(body)).await;
    assert_eq!(r.status.as_u16(), 200);
    // A body over the limit.
    let big = json!({"value": b64(&vec![0u8; 2 << 20])});
    a.call("PUT", &format!("/api/v1/kv/{}", path_key(b"k")), Some(big))
        .await
        .problem(413);
    assert_eq!(a.count(), 1);
    assert_eq!(a.db.get("kept").unwrap().as_deref(), Some(&b"1"[..]));
}

#[tokio::test]
async fn the_gate_refuses_strangers_and_a_read_only_store_refuses_changes() {
    let a = api();
    let uri = format!("/api/v1/kv/{}", path_key(b"k"));
    let req = |host: &str, auth: Option<&str>| {
        let mut b = Request::builder().uri(&uri).header(header::HOST, host);
        if let Some(t) = auth {
            b = b.header(header::AUTHORIZATION, t);
        }
        b.body(Body::empty()).unwrap()
    };
    a.send(req("localhost", None)).await.problem(401);
    a.send(req("localhost", Some("Bearer wrong")))
        .await
        .problem(401);
    a.send(req("localhost", Some(TOKEN))).await.problem(401);
    a.send(req("evil.example", Some(&format!("Bearer {TOKEN}"))))
        .await
        .problem(403);
    a.send(req("localhost:1", Some(&format!("Bearer {TOKEN}"))))
        .await
        .problem(404);
    // Health needs no token, but still a known host.
    let health = Request::builder()
        .uri("/healthz")
        .header(header::HOST, "[::1]:7070")
        .body(Body::empty())
        .unwrap();
    assert_eq!(a.send(health).await.status, StatusCode::OK);

    let ro = api_with(true, Limits::default());
    ro.call("PUT", &uri, Some(json!({"value": "MQ=="})))
        .await
        .problem(403);
    ro.call("POST", "/api/v1/kv:batchWrite", Some(json!({"ops": []})))
        .await
        .problem(403);
    ro.call(
        "POST",
        "/api/v1/kv:deleteRange",
        Some(json!({"start": "YQ==", "end": "Yg=="})),
    )
    .await
    .problem(403);
    ro.call("POST", "/api/v1/admin:flush", None)
        .await
        .problem(403);
    ro.call("POST", "/api/v1/cfs", Some(json!({"name": "x"})))
        .await
        .problem(403);
    let dry = ro
        .call(
            "POST",
            "/api/v1/kv:deleteRange",
            Some(json!({"start": "YQ==", "end": "Yg==", "dry_run": true})),
        )
        .await;
    assert_eq!(dry.status, StatusCode::OK);
}

#[tokio::test]
async fn batches_ranges_and_column_families() {
    let a = api();
    let ops = json!({"ops": [
        {"op": "put", "key": b64(b"a/1"), "value": b64(b"1")},
        {"op": "put", "key": b64(b"a/2"), "value": b64(b"2"), "ttl": 3600},
        {"op": "put", "key": b64(b"b/1"), "value": b64(b"3")},
        {"op": "delete", "key": b64(b"a/2")},
    ]});
    assert_eq!(
        a.call("POST", "/api/v1/kv:batchWrite", Some(ops))
            .await
            .json()["applied"],
        4
    );
    // A write names how far it is synced: a boolean or a level (on the local disk, `local`
    // and `bucket` are both an fsync).
    for sync in [json!(true), json!("local"), json!("bucket")] {
        let one = json!({"ops": [{"op": "put", "key": b64(b"s"), "value": b64(b"1")}],
            "sync": sync});
        let r = a.call("POST", "/api/v1/kv:batchWrite", Some(one)).await;
        assert_eq!(r.json()["applied"], 1, "sync {sync}");
    }
    for word in ["1", "local", "bucket"] {
        let r = a
            .call(
                "PUT",
                &format!("/api/v1/kv/{}?sync={word}", path_key(b"s")),
                Some(json!({"value": b64(word.as_bytes())})),
            )
            .await;
        assert!(r.status.is_success(), "sync={word}: {}", r.status);
    }
    let r = a
        .call(
            "DELETE",
            &format!("/api/v1/kv/{}?sync=bucket", path_key(b"s")),
            None,
        )
        .await;
    assert!(r.status.is_success(), "{}", r.status);
    let got = a
        .call(
            "POST",
            "/api/v1/kv:batchGet",
            Some(json!({"keys": [b64(b"b/1"), b64(b"a/2"), b64(b"a/1")]})),
        )
        .await;
    assert_eq!(got.json()["values"], json!([b64(b"3"), null, b64(b"1")]));
    let dry = a
        .call(
            "POST",
            "/api/v1/kv:deleteRange",
            Some(json!({"start": b64(b"a/"), "end": b64(b"a0"), "dry_run": true})),
        )
        .await
        .json();
    assert!(dry["estimated_keys"].as_u64().unwrap() >= 1);
    assert_eq!(dry["keys"], 1, "a dry run counts the live keys: {dry}");
    assert!(dry.get("more").is_none());
    assert_eq!(a.count(), 2, "a dry run deletes nothing");
    a.call(
        "POST",
        "/api/v1/kv:deleteRange",
        Some(json!({"start": b64(b"a/"), "end": b64(b"a0")})),
    )
    .await;
    assert_eq!(a.count(), 1);
    assert_eq!(
        a.call("POST", "/api/v1/cfs", Some(json!({"name": "logs"})))
            .await
            .status,
        StatusCode::CREATED
    );
    let put = format!("/api/v1/kv/{}?cf=logs", path_key(b"x"));
    a.call("PUT", &put, Some(json!({"value": "MQ=="}))).await;
    assert_eq!(a.call("GET", &put, None).await.json()["value"], "MQ==");
    assert_eq!(
        a.call("GET", "/api/v1/cfs", None).await.json()["column_families"],
        json!(["default", "logs"])
    );
    assert_eq!(
        a.call("DELETE", "/api/v1/cfs/logs", None).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        a.call("POST", "/api/v1/admin:flush", None).await.status,
        StatusCode::OK
    );
    assert_eq!(
        a.call("POST", "/api/v1/admin:compactRange", Some(json!({})))
            .await
            .status,
        StatusCode::OK
    );
    // An inverted range compacts nothing and is no error, as the schema allows it.
    let inverted = json!({"start": "z", "end": "a", "encoding": "utf8"});
    assert_eq!(
        a.call("POST", "/api/v1/admin:compactRange", Some(inverted))
            .await
            .status,
        StatusCode::OK
    );
    let stats = a.call("GET", "/api/v1/stats", None).await.json();
    assert!(stats["statistics"].is_object() && stats["properties"].is_object());
    let verify = a.call("GET", "/api/v1/admin/verify", None).await.json();
    assert_eq!(verify["ok"], true);
    assert!(!verify["files"].as_array().unwrap().is_empty(), "{verify}");
}

#[tokio::test]
async fn a_paged_scan_returns_each_key_of_its_snapshot_once_while_writers_run() {
    let a = api();
    for i in 0..500 {
        a.db.put(format!("k{i:04}"), "v").unwrap();
    }
    for reverse in [false, true] {
        let mut seen = Vec::new();
        let mut token: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut req =
                json!({"prefix": b64(b"k"), "limit": 37, "keys_only": true, "reverse": reverse});
            if let Some(t) = &token {
                req["page_token"] = json!(t);
            }
            let page = a.call("POST", "/api/v1/kv:scan", Some(req)).await.json();
            // Writers change the keyspace between pages: the snapshot does not see it.
            a.db.put(format!("k{:04}x", pages * 13), "new").unwrap();
            a.db.delete(format!("k{:04}", 499 - pages * 11)).unwrap();
            for item in page["items"].as_array().unwrap() {
                assert!(item.get("value").is_none());
                seen.push(STANDARD.decode(item["key"].as_str().unwrap()).unwrap());
            }
            pages += 1;
            match page["page_token"].as_str() {
                Some(t) => {
                    assert_eq!(page["more"], true);
                    token = Some(t.to_string());
                }
                None => break,
            }
        }
        if reverse {
            seen.reverse();
        }
        let want: Vec<Vec<u8>> = (0..500).map(|i| format!("k{i:04}").into_bytes()).collect();
        if !reverse {
            assert_eq!(seen, want, "forward");
        } else {
            // The reverse scan began after the forward one's writes: its own snapshot.
            let mut sorted = seen.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), seen.len(), "a key twice");
        }
        assert_eq!(pages, seen.len().div_ceil(37));
    }
    let list = a
        .call(
            "GET",
            &format!("/api/v1/kv?prefix={}&limit=5&encoding=utf8", "k0"),
            None,
        )
        .await
        .json();
    assert_eq!(list["items"].as_array().unwrap().len(), 5);
    assert_eq!(list["items"][0]["key"], "k0000");
}

#[test]
fn the_token_file_is_private_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let local: std::net::SocketAddr = "127.0.0.1:7070".parse().unwrap();
    let t = strata_admin_api::token_for(dir.path(), None, &local).unwrap();
    assert_eq!(t.len(), 64);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("serve.token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        strata_admin_api::token_for(dir.path(), None, &local).unwrap(),
        t
    );
    let public: std::net::SocketAddr = "0.0.0.0:7070".parse().unwrap();
    assert!(strata_admin_api::token_for(dir.path(), None, &public).is_err());
}

#[tokio::test]
async fn the_lsm_its_tombstones_blob_files_and_cache_are_shown() {
    let a = api();
    for i in 0..200 {
        a.db.put(format!("k{i:03}"), "v").unwrap();
    }
    for (s, e) in [("k000", "k010"), ("k020", "k030"), ("k040", "k050")] {
        a.db.delete_range(s, e).unwrap();
    }
    a.db.flush().unwrap();
    let lsm = a.call("GET", "/api/v1/lsm", None).await.json();
    let levels = lsm["levels"].as_array().unwrap();
    assert_eq!(levels[0]["files"], 1);
    assert_eq!(levels[0]["range_deletions"], 3);
    let files = a.call("GET", "/api/v1/lsm/files", None).await.json();
    assert_eq!(files["files"].as_array().unwrap().len(), 1);
    assert_eq!(files["files"][0]["level"], 0);
    let mut seen = Vec::new();
    let mut uri = "/api/v1/tombstones?limit=1&encoding=utf8".to_string();
    loop {
        let page = a.call("GET", &uri, None).await.json();
        for t in page["tombstones"].as_array().unwrap() {
            seen.push(t["start"].as_str().unwrap().to_string());
            assert_eq!(t["location"]["kind"], "table");
            // Each span covers ten of the flushed keys.
            assert!(t["entries_under"].as_u64().unwrap() > 0, "{t}");
        }
        match page["page_token"].as_str() {
            Some(t) => uri = format!("/api/v1/tombstones?limit=1&encoding=utf8&page_token={t}"),
            None => break,
        }
    }
    assert_eq!(seen, ["k000", "k020", "k040"]);
    a.call("GET", "/api/v1/tombstones?page_token=x", None)
        .await
        .problem(400);
    let blobs = a.call("GET", "/api/v1/blobs", None).await.json();
    assert!(blobs["files"].is_array() && blobs["gc"].is_object() && blobs["fifo"].is_object());
    a.db.get("k100").unwrap();
    let cache = a.call("GET", "/api/v1/cache", None).await.json();
    assert!(cache["block_cache"]["capacity"].as_u64().unwrap() > 0);
    assert!(
        cache["total"]["hits"].as_u64().unwrap() + cache["total"]["misses"].as_u64().unwrap() > 0
    );
    a.call("GET", "/api/v1/lsm?cf=nope", None)
        .await
        .problem(404);
}

/// Reads SSE frames from `body` until one of `kind` arrives; returns its id and data.
async fn next_event(body: &mut Body, kind: &str) -> (u64, Value) {
    let mut buf = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .unwrap_or_else(|_| panic!("no {kind} event; saw {buf}"))
            .unwrap()
            .unwrap();
        if let Ok(data) = frame.into_data() {
            buf.push_str(std::str::from_utf8(&data).unwrap());
        }
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let field = |name: &str| {
                block.lines().find_map(|l| {
                    l.strip_prefix(&format!("{name}:"))
                        .map(|v| v.trim().to_string())
                })
            };
            if field("event").as_deref() == Some(kind) {
                let id = field("id").map_or(0, |i| i.parse().unwrap());
                let data = serde_json::from_str(&field("data").unwrap()).unwrap();
                return (id, data);
            }
        }
    }
}

#[tokio::test]
async fn flushes_and_compactions_are_events_and_a_reconnect_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let hub = Arc::new(strata_admin_api::EventHub::default());
    let mut opts = Options::default();
    opts.listeners.push(hub.clone());
    let db = Arc::new(Db::open(dir.path(), opts).unwrap());
    let state = state_of(db.clone(), false, Limits::default()).with_events(hub);
    let router = app(state);
    let open = |last: Option<u64>| {
        let mut b = Request::builder()
            .uri("/api/v1/events")
            .header(header::HOST, "localhost")
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        if let Some(id) = last {
            b = b.header("Last-Event-ID", id.to_string());
        }
        b.body(Body::empty()).unwrap()
    };
    let res = router.clone().oneshot(open(None)).await.unwrap();
    assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = res.into_body();
    let (_, sample) = next_event(&mut body, "stats").await;
    assert!(sample["bytes_written"].is_u64(), "{sample}");
    db.put("a", "1").unwrap();
    let d = db.clone();
    tokio::task::spawn_blocking(move || d.flush().unwrap())
        .await
        .unwrap();
    let (flush_id, flush) = next_event(&mut body, "flush").await;
    assert_eq!(flush["column_family"], "default");
    drop(body);
    // Gone for a while: a flush and a compaction happen meanwhile.
    db.put("b", "2").unwrap();
    let d = db.clone();
    tokio::task::spawn_blocking(move || {
        d.flush().unwrap();
        d.compact_range(None, None).unwrap();
    })
    .await
    .unwrap();
    let mut body = router
        .clone()
        .oneshot(open(Some(flush_id)))
        .await
        .unwrap()
        .into_body();
    let (again, _) = next_event(&mut body, "flush").await;
    assert!(again > flush_id, "the missed flush, not the one seen");
    let (compaction, info) = next_event(&mut body, "compaction").await;
    assert!(compaction > again);
    assert_eq!(info["column_family"], "default");
    let bad = router
        .oneshot(
            Request::builder()
                .uri("/api/v1/events")
                .header(header::HOST, "localhost")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .header("Last-Event-ID", "x")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn metrics_are_openmetrics_text_named_after_rocksdb_tickers() {
    let a = api();
    a.db.put("k", "v").unwrap();
    a.db.flush().unwrap();
    a.db.get("k").unwrap();
    let r = a.call("GET", "/metrics", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.content_type.starts_with("application/openmetrics-text"));
    let text = String::from_utf8(r.body).unwrap();
    for want in [
        "strata_block_cache_hit_total{type=\"data\"}",
        "strata_block_cache_miss_total{type=\"index\"}",
        "strata_total_sst_bytes ",
        "strata_level_files{cf=\"default\",level=\"0\"} 1",
        "# EOF",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
    let get_hits = text
        .lines()
        .find(|l| l.starts_with("strata_get_hits_total "))
        .unwrap();
    assert!(get_hits.ends_with(" 1"), "{get_hits}");
}

#[tokio::test]
async fn the_console_signs_in_for_a_cookie_that_only_its_own_origin_may_change_with() {
    let a = api();
    let r = a.call("POST", "/api/v1/session", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let with_cookie = |method: &str, origin: Option<&str>, cookie: &str| {
        let mut b = Request::builder()
            .method(method)
            .uri(format!("/api/v1/kv/{}", path_key(b"c")))
            .header(header::HOST, "localhost:7070")
            .header(header::COOKIE, format!("strata_session={cookie}"))
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(o) = origin {
            b = b.header(header::ORIGIN, o);
        }
        b.body(Body::from(r#"{"value":"MQ=="}"#)).unwrap()
    };
    // Reading needs only the cookie.
    a.send(with_cookie("GET", None, TOKEN)).await.problem(404);
    // A change needs this origin too.
    a.send(with_cookie("PUT", None, TOKEN)).await.problem(403);
    a.send(with_cookie("PUT", Some("http://evil.example"), TOKEN))
        .await
        .problem(403);
    assert_eq!(a.count(), 0);
    let ok = a
        .send(with_cookie("PUT", Some("http://localhost:7070"), TOKEN))
        .await;
    assert_eq!(ok.status, StatusCode::NO_CONTENT);
    a.send(with_cookie("GET", None, "stale")).await.problem(401);
    // The sign-in itself needs the token.
    let anon = Request::builder()
        .method("POST")
        .uri("/api/v1/session")
        .header(header::HOST, "localhost")
        .body(Body::empty())
        .unwrap();
    a.send(anon).await.problem(401);
}

#[tokio::test]
async fn the_committed_openapi_document_matches_the_code() {
    let committed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    let now = strata_admin_api::openapi_document();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&committed, &now).unwrap();
    }
    let before = std::fs::read_to_string(&committed).unwrap_or_default();
    assert!(
        before == now,
        "crates/admin-api/openapi.json is stale: rerun this test with UPDATE_OPENAPI=1 and commit it"
    );
    let a = api();
    let served = a.call("GET", "/api/openapi.json", None).await.json();
    let doc: Value = serde_json::from_str(&now).unwrap();
    assert_eq!(served, doc);
    for path in [
        "/api/v1/kv/{key}",
        "/api/v1/kv:scan",
        "/api/v1/events",
        "/metrics",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} missing");
    }
    let ui = a.call("GET", "/api/docs/", None).await;
    assert_eq!(ui.status, StatusCode::OK);
    assert!(String::from_utf8_lossy(&ui.body).contains("swagger"));
    let init = a
        .call("GET", "/api/docs/swagger-initializer.js", None)
        .await;
    assert!(String::from_utf8_lossy(&init.body).contains("/api/openapi.json"));
}

#[tokio::test]
async fn cross_origin_calls_are_allowed_only_from_named_origins() {
    let preflight = |router: axum::Router, origin: &'static str| async move {
        let req = Request::builder()
            .method("OPTIONS")
            .uri("/api/v1/stats")
            .header(header::HOST, "localhost")
            .header(header::ORIGIN, origin)
            .header("Access-Control-Request-Method", "GET")
            .body(Body::empty())
            .unwrap();
        router
            .oneshot(req)
            .await
            .unwrap()
            .headers()
            .get("access-control-allow-origin")
            .cloned()
    };
    let closed = api();
    assert_eq!(
        preflight(closed.router.clone(), "http://dash.example").await,
        None
    );
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let mut security = Security::loopback(TOKEN.into());
    security.cors_origins.push("http://dash.example".into());
    let open = app(AppState::new(db, false, Limits::default(), security, None));
    assert_eq!(
        preflight(open.clone(), "http://dash.example")
            .await
            .unwrap(),
        "http://dash.example"
    );
    assert_eq!(preflight(open, "http://evil.example").await, None);
}

#[tokio::test]
async fn the_console_learns_the_server_and_each_column_familys_options() {
    let a = api();
    let info = a.call("GET", "/api/v1/server", None).await.json();
    assert_eq!(info["read_only"], false);
    assert_eq!(info["events"], false);
    assert!(info["mounted_column_family"].is_null());
    let ro = api_with(true, Limits::default());
    assert_eq!(
        ro.call("GET", "/api/v1/server", None).await.json()["read_only"],
        true
    );
    a.db.put("k", "v").unwrap();
    a.db.flush().unwrap();
    let cf = a.call("GET", "/api/v1/cfs/default", None).await.json();
    assert_eq!(cf["name"], "default");
    assert_eq!(cf["total_files"], 1);
    assert!(cf["write_buffer_size"].as_u64().unwrap() > 0);
    a.call("GET", "/api/v1/cfs/nope", None).await.problem(404);
}

#[tokio::test]
async fn console_paths_need_no_token_but_the_api_beside_them_does() {
    let a = api();
    let get = |uri: &str, host: &str| {
        Request::builder()
            .uri(uri)
            .header(header::HOST, host)
            .body(Body::empty())
            .unwrap()
    };
    // Without a built console the answer is a problem saying how to build it, not a 401.
    for uri in ["/", "/keys", "/lsm"] {
        let r = a.send(get(uri, "localhost")).await;
        assert_ne!(r.status, StatusCode::UNAUTHORIZED, "{uri}");
    }
    a.send(get("/assets/missing-1234.js", "localhost"))
        .await
        .problem(404);
    a.send(get("/api/v1/server", "localhost"))
        .await
        .problem(401);
    a.send(get("/metrics", "localhost")).await.problem(401);
    a.send(get("/", "evil.example")).await.problem(403);
}
