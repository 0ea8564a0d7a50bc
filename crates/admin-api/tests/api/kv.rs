//! One key and batches of them: media types, encodings, where reads and writes run, exact
//! batchGet answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

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
    // So are many small values past 64 KiB together, found to be so as they are written.
    let keys: Vec<String> = (0..100).map(|i| format!("small{i:03}")).collect();
    for (i, k) in keys.iter().enumerate() {
        a.db.put(k, vec![i as u8; 1000]).unwrap();
    }
    let r = a
        .call(
            "POST",
            "/api/v1/kv:batchGet",
            Some(json!({"keys": keys.iter().map(|k| b64(k.as_bytes())).collect::<Vec<_>>()})),
        )
        .await;
    let values = r.json()["values"].clone();
    for (i, v) in values.as_array().unwrap().iter().enumerate() {
        assert_eq!(v, &json!(b64(&vec![i as u8; 1000])), "value {i}");
    }
    assert_eq!(values.as_array().unwrap().len(), 100);
    assert_eq!(counted(&a, "strata_api_point_reads").await, (0, 4));
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

/// Read-your-writes: every change answers the sequence it is visible at, growing with each;
/// a read given `min_seq` at or below the store's newest answers at once, and one past it gets
/// a 422 from the writer (no write has it: a writer shows every write it made). Reads carry no
/// sequence.
#[tokio::test]
async fn changes_answer_their_sequence_and_reads_take_min_seq() {
    let a = api();
    let key = format!("/api/v1/kv/{}", path_key(b"k"));
    let first = a.call("PUT", &key, Some(json!({"value": b64(b"1")}))).await;
    assert!(first.status.is_success());
    let s1 = first.sequence.expect("a PUT answers its sequence");
    assert_eq!(s1, a.db.latest_sequence());
    let batch = json!({"ops":[{"op":"put","key":b64(b"a"),"value":b64(b"x")},{"op":"delete","key":b64(b"k")}]});
    let s2 = a
        .call("POST", "/api/v1/kv:batchWrite", Some(batch))
        .await
        .sequence
        .unwrap();
    assert_eq!(s2, s1 + 2, "a batch of two takes two sequence numbers");
    let s3 = a
        .call("DELETE", &format!("/api/v1/kv/{}", path_key(b"a")), None)
        .await
        .sequence;
    assert!(s3.unwrap() > s2);
    // A refused change carries none.
    let bad = a
        .call("PUT", "/api/v1/kv/!!", Some(json!({"value": ""})))
        .await;
    assert!(bad.status.is_client_error() && bad.sequence.is_none());

    a.call("PUT", &key, Some(json!({"value": b64(b"2")}))).await;
    let now = a.db.latest_sequence();
    let got = a.call("GET", &format!("{key}?min_seq={now}"), None).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json()["value"], b64(b"2"));
    assert!(got.sequence.is_none());
    assert_eq!(
        a.call("GET", &format!("{key}?raw=1&min_seq=0"), None)
            .await
            .body,
        b"2"
    );
    let past = now + 100;
    for (method, uri, body) in [
        ("GET", format!("{key}?min_seq={past}"), None),
        ("GET", format!("/api/v1/kv?prefix=k&min_seq={past}"), None),
        (
            "POST",
            "/api/v1/kv:scan".into(),
            Some(json!({"min_seq": past})),
        ),
        (
            "POST",
            "/api/v1/kv:batchGet".into(),
            Some(json!({"keys": [b64(b"k")], "min_seq": past})),
        ),
    ] {
        let p = a.call(method, &uri, body).await.problem(422);
        assert!(
            p["detail"]
                .as_str()
                .unwrap()
                .contains("no write has sequence"),
            "{uri}: {p}"
        );
    }
    let ok = a
        .call(
            "POST",
            "/api/v1/kv:batchGet",
            Some(json!({"keys": [b64(b"k")], "min_seq": now})),
        )
        .await;
    assert_eq!(ok.json()["values"][0], b64(b"2"));
    a.call("GET", &format!("{key}?min_seq=x"), None)
        .await
        .problem(400);
    // JSON may spell the field with escapes; serde reads it as `min_seq`, so must the wait.
    let escaped = format!(r#"{{"keys":["{}"],"min\u005fseq":{past}}}"#, b64(b"k"));
    let p = a
        .typed(
            "POST",
            "/api/v1/kv:batchGet",
            Some("application/json"),
            escaped.as_bytes(),
        )
        .await
        .problem(422);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("no write has sequence"),
        "{p}"
    );
}

/// Each change answers its own sequence, not the store's newest: synced batchWrites of
/// different sizes racing each other (so they share groups) are each told the last sequence of
/// their own span, and the spans tile every sequence written. A PATCH answers its own; reads,
/// POST ones too, dry runs and an empty batch answer none; a deleteRange answers its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_are_each_told_their_own_sequence() {
    let a = std::sync::Arc::new(api());
    let first = a.db.latest_sequence() + 1;
    let tasks: Vec<_> = (0..32u64)
        .map(|i| {
            let a = a.clone();
            tokio::spawn(async move {
                let size = i % 4 + 1;
                let ops: Vec<_> = (0..size)
                    .map(|r| json!({"op": "put", "key": b64(format!("r{i:02}-{r}").as_bytes()), "value": b64(b"v")}))
                    .collect();
                let body = json!({"ops": ops, "sync": true});
                let r = a.call("POST", "/api/v1/kv:batchWrite", Some(body)).await;
                (r.sequence.expect("a batchWrite answers its sequence"), size)
            })
        })
        .collect();
    let mut told = Vec::new();
    for t in tasks {
        told.push(t.await.unwrap());
    }
    told.sort_unstable();
    let mut next = first;
    for &(last, size) in &told {
        assert_eq!(
            last + 1 - size,
            next,
            "a batch of {size} told {last}: {told:?}"
        );
        next = last + 1;
    }
    assert_eq!(next - 1, a.db.latest_sequence());

    let patched = a
        .typed(
            "PATCH",
            &format!("/api/v1/kv/{}?offset=end", path_key(b"r00-0")),
            Some("application/octet-stream"),
            b"more",
        )
        .await;
    assert_eq!(patched.status, StatusCode::NO_CONTENT);
    assert_eq!(
        patched.sequence,
        Some(a.db.latest_sequence()),
        "a PATCH answers its own"
    );
    let empty = a
        .call("POST", "/api/v1/kv:batchWrite", Some(json!({"ops": []})))
        .await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(
        empty.sequence, None,
        "an empty batch commits at no sequence of its own"
    );

    for (uri, body) in [
        ("/api/v1/kv:scan", json!({})),
        ("/api/v1/kv:batchGet", json!({"keys": [b64(b"r00")]})),
        (
            "/api/v1/kv:deleteRange",
            json!({"start": b64(b"r"), "end": b64(b"s"), "dry_run": true}),
        ),
    ] {
        let r = a.call("POST", uri, Some(body)).await;
        assert_eq!(r.status, StatusCode::OK, "{uri}");
        assert_eq!(r.sequence, None, "{uri} changes nothing");
    }
    let before = a.db.latest_sequence();
    let r = a
        .call(
            "POST",
            "/api/v1/kv:deleteRange",
            Some(json!({"start": b64(b"r"), "end": b64(b"s")})),
        )
        .await;
    let at = r.sequence.expect("a deleteRange answers its sequence");
    assert!(at > before && at == a.db.latest_sequence(), "{before} {at}");
}
