//! Bad input and strangers: problem documents that change nothing, the gate, a read-only
//! store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

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
