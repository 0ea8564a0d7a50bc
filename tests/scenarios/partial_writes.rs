//! Partial writes through a real `strata serve` on loopback: two clients appending to one key at
//! once, writes at an offset, a SIGKILL right after synced appends returned, bad requests, a raw
//! upload far larger than the serving process's memory, and one cut off halfway.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::TcpStream;

use strata_e2e::{Serve, path_key};

fn kv(key: &[u8], query: &str) -> String {
    format!("/api/v1/kv/{}?{query}", path_key(key))
}

/// Two clients append to one key at once, each appending numbered pieces: every piece lands
/// once, each client's in its order. Synced appends acknowledged before a SIGKILL survive it.
#[test]
fn two_clients_append_to_one_key_and_a_kill_loses_no_synced_append() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let serve = Serve::start(&db, None, &[]);
    std::thread::scope(|s| {
        for client in 0..2 {
            let serve = &serve;
            s.spawn(move || {
                for i in 0..150 {
                    let piece = format!("<{client}:{i:03}:{}>", "z".repeat(i % 90));
                    let r = serve.call("PATCH", &kv(b"log", "offset=end&sync=1"), piece.as_bytes());
                    assert_eq!(r.status, 204, "{}", r.text());
                }
            });
        }
    });
    let appended = String::from_utf8(serve.value(b"log").unwrap()).unwrap();
    for client in 0..2 {
        let mine: Vec<usize> = appended
            .split('<')
            .filter_map(|p| p.strip_prefix(&format!("{client}:")))
            .map(|p| p[..3].parse().unwrap())
            .collect();
        assert_eq!(mine, (0..150).collect::<Vec<_>>(), "client {client}");
    }
    // A write at an offset, over what is there and past the end; then a crash.
    let r = serve.call("PATCH", &kv(b"log", "offset=1"), b"X");
    assert_eq!(r.status, 204, "{}", r.text());
    let len = appended.len();
    let r = serve.call(
        "PATCH",
        &kv(b"log", &format!("offset={}&sync=1", len + 3)),
        b"end",
    );
    assert_eq!(r.status, 204, "{}", r.text());
    serve.kill();

    let serve = Serve::start(&db, None, &[]);
    let mut want = appended.into_bytes();
    want[1] = b'X';
    want.extend_from_slice(b"\0\0\0end");
    assert!(
        serve.value(b"log").unwrap() == want,
        "the synced writes did not survive"
    );
    serve.stop();
}

/// Bad requests get a problem document and change nothing.
#[test]
fn bad_patches_are_refused_with_a_problem_document() {
    let tmp = tempfile::tempdir().unwrap();
    let serve = Serve::start(&tmp.path().join("db"), None, &["--body-limit", "1024"]);
    serve.put(b"k", b"value");
    for (query, body, status) in [
        ("offset=0", &b"x"[..], 404u16),
        ("", b"x", 400),
        ("offset=1&append=1", b"x", 400),
        ("offset=-1", b"x", 400),
        ("offset=start", b"x", 400),
        ("offset=68719476737", b"x", 400),
        ("offset=end", &[7u8; 2048][..], 413),
    ] {
        let key: &[u8] = if status == 404 { b"missing" } else { b"k" };
        let r = serve.call("PATCH", &kv(key, query), body);
        assert_eq!(r.status, status, "{query}: {}", r.text());
        assert_eq!(r.content_type, "application/problem+json", "{query}");
    }
    assert!(serve.value(b"missing").is_none());
    assert_eq!(serve.value(b"k").unwrap(), b"value");
    serve.stop();
}

/// A raw PUT of 384 MiB streams into the store: the serving process's peak memory grows by far
/// less than the value, and the value reads back. An upload cut off halfway stores nothing.
#[test]
fn a_large_raw_put_streams_in_bounded_memory_and_a_cut_one_stores_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let serve = Serve::start(&tmp.path().join("db"), None, &[]);
    serve.put(b"warm", b"up");
    let before = serve.peak_rss();
    let len = 384usize << 20;
    let value: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let r = serve.call("RAWPUT", &kv(b"big", ""), &value);
    assert_eq!(r.status, 204, "{}", r.text());
    let grew = serve.peak_rss().saturating_sub(before);
    assert!(
        grew < 96 << 20,
        "peak RSS grew by {} MiB for a {} MiB upload",
        grew >> 20,
        len >> 20
    );
    let got = serve.value(b"big").unwrap();
    assert!(got.len() == len && got == value, "value differs");
    drop((got, value));

    // Headers promise 8 MiB; 3 MiB arrive, then the client goes away.
    let mut s = TcpStream::connect(serve.addr).unwrap();
    let head = format!(
        "PUT {} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        kv(b"cut", "sync=1"),
        serve.addr,
        serve.token,
        8 << 20
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&vec![1u8; 3 << 20]).unwrap();
    // The upload is under way, not refused: no answer comes before its body ends.
    s.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let mut answer = [0u8; 64];
    if let Ok(n @ 1..) = std::io::Read::read(&mut s, &mut answer) {
        panic!(
            "answered mid-upload: {}",
            String::from_utf8_lossy(&answer[..n])
        );
    }
    drop(s);
    // The next request is served after the cut one was dropped.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(serve.value(b"cut").is_none());
    serve.stop();
}
