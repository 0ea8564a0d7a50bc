//! Batches, ranges and column families, paged scans, the token file, the LSM views, events,
//! metrics, the console's sign-in, the OpenAPI document and CORS.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

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

/// Reads SSE events from `body` until each of `kinds` arrived; returns those of `kinds`, in
/// the order they came, as (id, kind, data).
async fn events_until(body: &mut Body, kinds: &[&str]) -> Vec<(u64, String, Value)> {
    let mut buf = String::new();
    let mut seen: Vec<(u64, String, Value)> = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while !kinds.iter().all(|k| seen.iter().any(|(_, s, _)| s == k)) {
        let frame = tokio::time::timeout_at(deadline, body.frame())
            .await
            .unwrap_or_else(|_| panic!("not every one of {kinds:?}; saw {seen:?}"))
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
            let Some(kind) = field("event") else { continue };
            if kinds.contains(&kind.as_str()) {
                let id = field("id").map_or(0, |i| i.parse().unwrap());
                let data = serde_json::from_str(&field("data").unwrap()).unwrap();
                seen.push((id, kind, data));
            }
        }
    }
    seen
}

/// Reads SSE frames from `body` until one of `kind` arrives; returns its id and data.
async fn next_event(body: &mut Body, kind: &str) -> (u64, Value) {
    let seen = events_until(body, &[kind]).await;
    let (id, _, data) = seen.into_iter().next().unwrap();
    (id, data)
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
    // Both missed events, in either order: the flush thread tells its listeners after it
    // wakes `flush()`, so the compaction that followed may be told first.
    let seen = events_until(&mut body, &["flush", "compaction"]).await;
    let first = |kind: &str| seen.iter().find(|(_, k, _)| k == kind).unwrap();
    let (again, (compaction, info)) = (first("flush").0, {
        let (id, _, data) = first("compaction");
        (*id, data.clone())
    });
    assert!(again > flush_id, "the missed flush, not the one seen");
    assert!(compaction > flush_id);
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

/// A destination of its own: copies the store's crash image into a directory, as a backup
/// into a bucket copies it into objects.
#[derive(Debug)]
struct CopyInto(std::path::PathBuf, std::sync::atomic::AtomicU64);

impl strata_admin_api::BackupTarget for CopyInto {
    fn destination(&self) -> String {
        self.0.display().to_string()
    }

    fn create(&self, db: &Db, flush: bool) -> strata_engine::Result<strata_admin_api::BackupMade> {
        use std::os::unix::fs::FileExt;
        let number = self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let to = self.0.join(number.to_string());
        std::fs::create_dir_all(&to).unwrap();
        let live = db.live_files(flush)?;
        let mut bytes = 0;
        for f in &live.files {
            let mut buf = vec![0u8; f.len as usize];
            std::fs::File::open(live.dir.join(&f.name))
                .unwrap()
                .read_exact_at(&mut buf, 0)
                .unwrap();
            std::fs::write(to.join(&f.name), buf).unwrap();
            bytes += f.len;
        }
        std::fs::write(to.join("CURRENT"), &live.current).unwrap();
        let backup = strata_admin_api::BackupSummary {
            number,
            created_millis: 0,
            source: db.path().display().to_string(),
            files: live.files.len() + 1,
            objects: live.files.len(),
            bytes,
        };
        Ok(strata_admin_api::BackupMade {
            backup,
            destination: self.destination(),
            copied: live.files.len(),
            bytes_copied: bytes,
            already_there: 0,
        })
    }

    fn list(&self) -> strata_engine::Result<Vec<strata_admin_api::BackupSummary>> {
        Ok(Vec::new())
    }
}

#[tokio::test]
async fn a_backup_goes_only_where_the_server_was_told() {
    let a = api();
    let none = a
        .call("POST", "/api/v1/admin:backup", None)
        .await
        .problem(409);
    assert!(none.to_string().contains("--backup-to"), "{none}");
    a.call("GET", "/api/v1/backups", None).await.problem(409);

    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let out = tempfile::tempdir().unwrap();
    let target = Arc::new(CopyInto(out.path().to_path_buf(), Default::default()));
    let router = app(state_of(db.clone(), false, Limits::default()).with_backups(target));
    let b = Api {
        db,
        router,
        _dir: dir,
    };
    b.db.put("k", "v").unwrap();
    let unlogged = strata_engine::WriteOptions {
        disable_wal: true,
        ..Default::default()
    };
    b.db.put_with(&unlogged, "unlogged", "u").unwrap();
    let made = b
        .call("POST", "/api/v1/admin:backup", Some(json!({"flush": true})))
        .await
        .json();
    assert_eq!(made["backup"]["number"], 1, "{made}");
    let restored = Db::open(out.path().join("1"), Options::default()).unwrap();
    assert_eq!(restored.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(
        restored.get("unlogged").unwrap().as_deref(),
        Some(&b"u"[..])
    );
    // The client does not choose where it goes.
    b.call(
        "POST",
        "/api/v1/admin:backup",
        Some(json!({"to": "s3://elsewhere/x"})),
    )
    .await
    .problem(400);
    assert!(!out.path().join("2").exists());
}
