//! A store in a bucket through the real `strata` binary, against a real SeaweedFS on loopback:
//! `strata serve --db s3://…` takes writes synced to the level each asks for, counts the bucket's
//! requests in `stats` and `/metrics`, and is fenced (409 `fenced`) the moment a second server on
//! another machine's cache takes the store over; that one sees every write synced to the bucket.
//! Then the CLI's data commands, `verify` and `bucket check` work on the URL.

#![allow(clippy::unwrap_used)]

#[path = "../../crates/bucket/tests/bucket/support/seaweed.rs"]
mod seaweed;

use std::path::Path;
use std::process::{Command, Output};

use strata_e2e::{Serve, b64, fuse_usable, path_key, stdout, strata_bin};

const ENV: [(&str, &str); 2] = [
    ("AWS_ACCESS_KEY_ID", seaweed::ACCESS_KEY),
    ("AWS_SECRET_ACCESS_KEY", seaweed::SECRET_KEY),
];

/// `strata --db URL --cache-dir CACHE --s3-endpoint E ARGS...`.
fn strata_on(url: &str, cache: &Path, endpoint: &str, args: &[&str]) -> Output {
    Command::new(strata_bin())
        .args(["--db", url, "--cache-dir"])
        .arg(cache)
        .args(["--s3-endpoint", endpoint])
        .args(args)
        .envs(ENV)
        .output()
        .unwrap()
}

fn put(serve: &Serve, key: &str, sync: &str) -> strata_e2e::Reply {
    let body = format!(r#"{{"value":"{}"}}"#, b64(key.as_bytes()));
    serve.call(
        "PUT",
        &format!("/api/v1/kv/{}?sync={sync}", path_key(key.as_bytes())),
        body.as_bytes(),
    )
}

#[test]
fn a_served_bucket_store_counts_its_requests_and_is_fenced_by_a_second_server() {
    let Some(sw) = seaweed::shared() else { return };
    let url = sw.fresh_url("serve").to_string();
    let tmp = tempfile::tempdir().unwrap();
    let endpoint = ["--s3-endpoint", sw.endpoint.as_str()];
    let first = Serve::start_bucket(&url, &tmp.path().join("first"), &endpoint, &ENV);
    for sync in ["0", "1", "local", "bucket"] {
        let r = put(&first, &format!("first/{sync}"), sync);
        assert!(r.status < 300, "sync={sync}: {} {}", r.status, r.text());
    }
    // A bucket write went up as a record, and the counts say so.
    let stats = first.call("GET", "/api/v1/stats", b"").json();
    let storage = &stats["storage"];
    assert_eq!(storage["location"], url.as_str(), "{storage}");
    assert_eq!(storage["durability"], "local");
    assert!(storage["writer_epoch"].as_u64().unwrap() >= 1, "{storage}");
    assert!(storage["puts"].as_u64().unwrap() >= 2, "{storage}");
    let metrics = first.call("GET", "/metrics", b"").text();
    for line in [
        "strata_bucket_requests_total{op=\"put\"}",
        "strata_bucket_writer_epoch",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(line)),
            "/metrics lacks {line}"
        );
    }

    // Another machine's server takes the store over (waiting out the first one's lease).
    let mut args = endpoint.to_vec();
    args.extend(["--durability", "bucket"]);
    let second = Serve::start_bucket(&url, &tmp.path().join("second"), &args, &ENV);
    assert_eq!(
        second.value(b"first/bucket").as_deref(),
        Some(&b"first/bucket"[..]),
        "a write synced to the bucket is there for the next writer"
    );
    // The first is fenced at its next synced write, whatever level it asks for, and says so.
    for sync in ["local", "bucket"] {
        let r = put(&first, &format!("late/{sync}"), sync);
        assert_eq!(r.status, 409, "sync={sync}: {}", r.text());
        assert_eq!(r.json()["engine_error"], "fenced", "{}", r.text());
    }
    assert!(put(&second, "second/1", "1").status < 300);
    first.kill();
    second.stop();

    // The CLI on the URL, from a third cache: the data, `verify`, and the conformance check.
    let cli_cache = tmp.path().join("cli");
    let got = strata_on(&url, &cli_cache, &sw.endpoint, &["get", "second/1"]);
    assert_eq!(stdout(&got).trim(), "second/1");
    let missing = strata_on(&url, &cli_cache, &sw.endpoint, &["get", "late/bucket"]);
    assert!(
        !missing.status.success(),
        "a fenced write was not acknowledged"
    );
    stdout(&strata_on(&url, &cli_cache, &sw.endpoint, &["verify"]));
    let check = Command::new(strata_bin())
        .args(["bucket", "check", &url, "--s3-endpoint", &sw.endpoint])
        .envs(ENV)
        .output()
        .unwrap();
    stdout(&check);
}

/// Runs `cmd` (with the bucket's credentials), which must refuse to start: a server that
/// started instead is stopped after 30 s, and the test fails naming `what`.
fn refused_at_start(cmd: &mut Command, what: &str) -> Output {
    let mut child = cmd
        .envs(ENV)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} started instead of refusing");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{what} succeeded");
    out
}

/// `strata ARGS...` with the bucket's credentials and endpoint.
fn strata_cmd(endpoint: &str, args: &[&str]) -> Output {
    Command::new(strata_bin())
        .args(args)
        .args(["--s3-endpoint", endpoint])
        .envs(ENV)
        .output()
        .unwrap()
}

#[test]
fn checkpoints_clones_and_backups_of_a_served_store_through_the_cli() {
    let Some(sw) = seaweed::shared() else { return };
    let url = sw.fresh_url("versions").to_string();
    let tmp = tempfile::tempdir().unwrap();
    let endpoint = [
        "--s3-endpoint",
        sw.endpoint.as_str(),
        "--durability",
        "bucket",
    ];
    let writer = Serve::start_bucket(&url, &tmp.path().join("writer"), &endpoint, &ENV);
    assert!(put(&writer, "v/1", "bucket").status < 300);
    // A checkpoint made beside the serving writer, which goes on writing.
    let made = strata_cmd(&sw.endpoint, &["--db", &url, "checkpoint", "create", "one"]);
    assert!(
        stdout(&made).contains("checkpoint one"),
        "{}",
        stdout(&made)
    );
    assert!(put(&writer, "v/2", "bucket").status < 300);
    // A replica follows the newest version; one of a checkpoint would never move.
    let pinned = refused_at_start(
        Command::new(strata_bin())
            .args(["--checkpoint", "one", "serve", "--replica-of", &url])
            .args(["--s3-endpoint", &sw.endpoint, "--listen", "127.0.0.1:0"]),
        "serve --replica-of --checkpoint",
    );
    let said = String::from_utf8_lossy(&pinned.stderr);
    assert!(
        !pinned.status.success() && said.contains("never changes"),
        "{said}"
    );
    // A server of a checkpoint would back up the newest version, not what it serves; and a
    // bucket store's backups hold nothing back, so a bound on what they hold is a mistake.
    let dest = sw.fresh_url("cli-refused-backups").to_string();
    for (args, says) in [
        (
            [
                "--checkpoint",
                "one",
                "serve",
                "--read-only",
                "--backup-to",
                &dest,
            ],
            "--checkpoint serves another",
        ),
        (
            [
                "serve",
                "--read-only",
                "--backup-to",
                &dest,
                "--backup-hold-limit",
                "1",
            ],
            "keeps nothing for it",
        ),
    ] {
        let out = refused_at_start(
            Command::new(strata_bin())
                .args(["--db", &url])
                .args(args)
                .args(["--s3-endpoint", &sw.endpoint, "--listen", "127.0.0.1:0"]),
            &args.join(" "),
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(says), "{said}");
    }
    // A second server reads the checkpoint, read-only: v/1 only, and writes are refused.
    let at_one = Serve::start_bucket(
        &url,
        &tmp.path().join("at-one"),
        &[
            "--s3-endpoint",
            &sw.endpoint,
            "--checkpoint",
            "one",
            "--read-only",
        ],
        &ENV,
    );
    assert_eq!(at_one.value(b"v/1").as_deref(), Some(&b"v/1"[..]));
    assert_eq!(at_one.value(b"v/2"), None);
    let refused = put(&at_one, "v/3", "1");
    assert_eq!(refused.status, 403, "{}", refused.text());
    at_one.stop();
    // A read-only server on the live store holds a lease on the version it serves, and says so.
    let reader = Serve::start_bucket(
        &url,
        &tmp.path().join("reader"),
        &["--s3-endpoint", &sw.endpoint, "--read-only"],
        &ENV,
    );
    assert_eq!(reader.value(b"v/2").as_deref(), Some(&b"v/2"[..]));
    let storage = &reader.call("GET", "/api/v1/stats", b"").json()["storage"];
    let lease = storage["reader_lease"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(lease.starts_with("lease-"), "{storage}");
    assert_eq!(storage["reader_lease_lapsed"], false);
    let metrics = reader.call("GET", "/metrics", b"").text();
    assert!(
        metrics
            .lines()
            .any(|l| l == "strata_bucket_reader_lease_lapsed 0"),
        "{metrics}"
    );
    let listed = strata_cmd(&sw.endpoint, &["--db", &url, "checkpoint", "list"]);
    assert!(stdout(&listed).contains(&lease), "{}", stdout(&listed));
    reader.stop();
    // Without --read-only a checkpoint does not open, and says why.
    let rw = strata_on(
        &url,
        &tmp.path().join("rw"),
        &sw.endpoint,
        &["--checkpoint", "one", "put", "k", "v"],
    );
    assert!(!rw.status.success());
    assert!(String::from_utf8_lossy(&rw.stderr).contains("read-only"));
    // A clone of the live store is a writable store of its own.
    let clone_url = sw.fresh_url("versions-clone").to_string();
    let cloned = strata_cmd(&sw.endpoint, &["clone", &url, &clone_url]);
    assert!(stdout(&cloned).contains("0 copied"), "{}", stdout(&cloned));
    let clone_cache = tmp.path().join("clone");
    stdout(&strata_on(
        &clone_url,
        &clone_cache,
        &sw.endpoint,
        &["put", "only/clone", "c"],
    ));
    let got = strata_on(&clone_url, &clone_cache, &sw.endpoint, &["get", "v/2"]);
    assert_eq!(stdout(&got).trim(), "v/2");
    assert_eq!(
        writer.value(b"only/clone"),
        None,
        "the clone wrote to its source"
    );
    // Backups: the second copies nothing; a restore serves what was backed up.
    let dest = sw.fresh_url("versions-backups").to_string();
    let first = strata_cmd(
        &sw.endpoint,
        &["--db", &url, "backup", "create", "--to", &dest],
    );
    assert!(stdout(&first).contains("backup 1"), "{}", stdout(&first));
    let second = strata_cmd(
        &sw.endpoint,
        &["--db", &url, "backup", "create", "--to", &dest],
    );
    assert!(
        stdout(&second).contains(" 0 objects copied"),
        "{}",
        stdout(&second)
    );
    stdout(&strata_cmd(
        &sw.endpoint,
        &["backup", "verify", "--to", &dest],
    ));
    let restored = sw.fresh_url("versions-restored").to_string();
    stdout(&strata_cmd(
        &sw.endpoint,
        &["backup", "restore", "--to", &dest, &restored],
    ));
    let got = strata_on(
        &restored,
        &tmp.path().join("restored"),
        &sw.endpoint,
        &["get", "v/2"],
    );
    assert_eq!(stdout(&got).trim(), "v/2");
    // A local store backs up to the bucket and comes back as a directory.
    let local = tmp.path().join("local-store");
    let local_db = local.to_str().unwrap();
    let put_local = Command::new(strata_bin())
        .args(["--db", local_db, "put", "local/key", "here"])
        .output()
        .unwrap();
    stdout(&put_local);
    let local_dest = sw.fresh_url("versions-local-backups").to_string();
    let made = strata_cmd(
        &sw.endpoint,
        &["--db", local_db, "backup", "create", "--to", &local_dest],
    );
    assert!(stdout(&made).contains("file://"), "{}", stdout(&made));
    let back = tmp.path().join("local-restored");
    let back_db = back.to_str().unwrap();
    stdout(&strata_cmd(
        &sw.endpoint,
        &["backup", "restore", "--to", &local_dest, back_db],
    ));
    let got = Command::new(strata_bin())
        .args(["--db", back_db, "get", "local/key"])
        .output()
        .unwrap();
    assert_eq!(stdout(&got).trim(), "here");
    let listed = strata_cmd(
        &sw.endpoint,
        &["--db", &url, "checkpoint", "list", "--json"],
    );
    let pins: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
    let names: Vec<&str> = pins
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        names.contains(&"one") && names.iter().any(|n| n.starts_with("clone-")),
        "{names:?}"
    );
    writer.stop();
}

/// A writer serving a store in the bucket under a steady load, and two replicas serving it in
/// processes of their own (`serve --replica-of`): every write the writer answered is there for
/// a replica read given its `Strata-Sequence` as `min_seq`; what a replica shows never goes
/// back; the lag it reports stays within its poll interval plus a second; it refuses writes
/// (403 read_only) and follows a new writer that fenced the old one.
#[test]
fn replicas_serve_what_the_writer_acknowledged_and_never_go_back() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    let Some(sw) = seaweed::shared() else { return };
    let url = sw.fresh_url("replicas").to_string();
    let tmp = tempfile::tempdir().unwrap();
    let writer_args = [
        "--s3-endpoint",
        sw.endpoint.as_str(),
        "--durability",
        "bucket",
    ];
    let writer = Serve::start_bucket(&url, &tmp.path().join("w1"), &writer_args, &ENV);
    assert!(put(&writer, "counter", "bucket").status < 300);
    let replica_args = ["--s3-endpoint", sw.endpoint.as_str(), "--poll-ms", "200"];
    let replicas: Vec<Arc<Serve>> = (0..2)
        .map(|i| {
            let dir = tmp.path().join(format!("r{i}"));
            Arc::new(Serve::start_replica(&url, &dir, None, &replica_args, &ENV))
        })
        .collect();

    let writer = Arc::new(writer);
    let acked = Arc::new(std::sync::Mutex::new(Vec::<(u64, u64)>::new()));
    let done = Arc::new(AtomicBool::new(false));
    // Two writers of 128 KiB values synced to the bucket; the first also moves the counter on
    // after each of its own. Each write's sequence goes to the readers.
    const VALUE: usize = 128 << 10;
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let loads: Vec<_> = (0..2)
        .map(|t| {
            let (writer, acked, next) = (writer.clone(), acked.clone(), next.clone());
            std::thread::spawn(move || {
                while started.elapsed() < Duration::from_secs(6) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let key = path_key(format!("load/{i}").as_bytes());
                    let value = vec![(i % 251) as u8; VALUE];
                    let r = writer.call("RAWPUT", &format!("/api/v1/kv/{key}?sync=bucket"), &value);
                    assert!(r.status < 300, "{} {}", r.status, r.text());
                    let seq = r.sequence.expect("a write answers its Strata-Sequence");
                    acked.lock().unwrap().push((i, seq));
                    if t == 0 {
                        let body = format!(r#"{{"value":"{}"}}"#, b64(i.to_string().as_bytes()));
                        let counter = format!("/api/v1/kv/{}?sync=bucket", path_key(b"counter"));
                        assert!(writer.call("PUT", &counter, body.as_bytes()).status < 300);
                    }
                }
            })
        })
        .collect();
    let load = {
        let (done, next) = (done.clone(), next.clone());
        std::thread::spawn(move || {
            for l in loads {
                l.join().unwrap();
            }
            done.store(true, Ordering::Release);
            let (n, secs) = (
                next.load(Ordering::Relaxed),
                started.elapsed().as_secs_f64(),
            );
            eprintln!(
                "writers: {n} writes of 128 KiB in {secs:.1} s ({:.2} MB/s)",
                (n * VALUE as u64) as f64 / secs / 1e6
            );
        })
    };
    let readers: Vec<_> = replicas
        .iter()
        .enumerate()
        .map(|(n, replica)| {
            let (replica, acked, done) = (replica.clone(), acked.clone(), done.clone());
            std::thread::spawn(move || {
                let (mut last_counter, mut reads, mut lags) = (0u64, 0u64, Vec::new());
                while !done.load(Ordering::Acquire) {
                    let Some((i, seq)) = acked.lock().unwrap().last().copied() else {
                        continue;
                    };
                    let key = path_key(format!("load/{i}").as_bytes());
                    let r =
                        replica.call("GET", &format!("/api/v1/kv/{key}?raw=1&min_seq={seq}"), b"");
                    assert_eq!(
                        r.status,
                        200,
                        "replica {n}: load/{i} at {seq}: {}",
                        r.text()
                    );
                    assert!(
                        r.body == vec![(i % 251) as u8; VALUE],
                        "replica {n}: load/{i}"
                    );
                    let counter = replica.value(b"counter").unwrap();
                    let counter: u64 = String::from_utf8(counter).unwrap().parse().unwrap_or(0);
                    assert!(
                        counter >= last_counter,
                        "replica {n} went back: {counter} after {last_counter}"
                    );
                    last_counter = counter;
                    let stats = replica.call("GET", "/api/v1/stats", b"").json();
                    lags.push(stats["replica"]["lag_seconds"].as_f64().unwrap());
                    reads += 1;
                }
                lags.sort_by(f64::total_cmp);
                let p99 = lags[(lags.len() * 99 / 100).min(lags.len() - 1)];
                eprintln!(
                    "replica {n}: {reads} checked reads, lag p99 {p99:.3} s, max {:.3} s",
                    lags[lags.len() - 1]
                );
                assert!(p99 <= 0.2 + 1.0, "replica {n}: lag p99 {p99} s");
                reads
            })
        })
        .collect();
    load.join().unwrap();
    for r in readers {
        assert!(r.join().unwrap() > 5);
    }

    let replica = &replicas[0];
    let refused = put(replica, "nope", "1");
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(refused.json()["engine_error"], "read_only");
    let metrics = replica.call("GET", "/metrics", b"").text();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("strata_replica_lag_seconds ")),
        "{metrics}"
    );

    // A new writer fences the old one; the replicas follow it.
    let w2 = Serve::start_bucket(&url, &tmp.path().join("w2"), &writer_args, &ENV);
    let r = put(&w2, "second-writer", "bucket");
    assert!(r.status < 300);
    let seq = r.sequence.unwrap();
    for replica in &replicas {
        let r = replica.call(
            "GET",
            &format!(
                "/api/v1/kv/{}?raw=1&min_seq={seq}",
                path_key(b"second-writer")
            ),
            b"",
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(put(&writer, "fenced", "bucket").status, 409);
    writer.kill();
    w2.stop();
}

/// A read-only mount on a replica (`serve --replica-of … --mount`): files the writer adds
/// appear within the lag; a descriptor reads the version it opened to its end while the
/// replica moves on; a new open sees the new version (the kernel's caches were dropped); a
/// listing shows the new file; writes are EROFS.
#[test]
fn a_mount_on_a_replica_shows_each_open_one_version() {
    use std::io::{Read, Write};
    use std::os::unix::fs::FileExt;

    let Some(sw) = seaweed::shared() else { return };
    if !fuse_usable() {
        return;
    }
    let url = sw.fresh_url("replica-mount").to_string();
    let tmp = tempfile::tempdir().unwrap();
    let writer_args = [
        "--s3-endpoint",
        sw.endpoint.as_str(),
        "--durability",
        "bucket",
    ];
    let writer = Serve::start_bucket(&url, &tmp.path().join("w"), &writer_args, &ENV);
    let big = |tag: u8| -> Vec<u8> { (0..4u32 << 20).map(|i| tag ^ (i % 251) as u8).collect() };
    let put_raw = |key: &str, value: &[u8]| {
        let r = writer.call(
            "RAWPUT",
            &format!("/api/v1/kv/{}?sync=bucket", path_key(key.as_bytes())),
            value,
        );
        assert!(r.status < 300, "{} {}", r.status, r.text());
        r.sequence.unwrap()
    };
    put_raw("docs/big.bin", &big(1));
    let mnt = tmp.path().join("mnt");
    let args = ["--s3-endpoint", sw.endpoint.as_str(), "--poll-ms", "200"];
    let replica = Serve::start_replica(&url, &tmp.path().join("r"), Some(&mnt), &args, &ENV);
    let file = mnt.join("docs/big.bin");
    let mut first = std::fs::File::open(&file).unwrap();
    let mut head = vec![0u8; 4096];
    first.read_exact(&mut head).unwrap();
    assert!(head == big(1)[..4096]);

    // The writer replaces the file and adds one; the replica shows both.
    put_raw("docs/big.bin", &big(2));
    let seq = put_raw("docs/new.txt", b"new");
    let seen = replica.call(
        "GET",
        &format!(
            "/api/v1/kv/{}?raw=1&min_seq={seq}",
            path_key(b"docs/new.txt")
        ),
        b"",
    );
    assert_eq!(seen.status, 200, "{}", seen.text());
    // The descriptor opened before reads its version to the end, far past what the kernel
    // read ahead.
    let mut tail = vec![0u8; 4096];
    first.read_exact_at(&mut tail, 3 << 20).unwrap();
    // Compared whole, never printed: 4 KiB of bytes helps no one.
    assert!(
        tail == big(1)[3 << 20..(3 << 20) + 4096],
        "an open file changed under its reader"
    );
    // Once a `min_seq` read answers, the mount shows that sequence too: a new open reads the
    // new version at once.
    assert!(
        std::fs::read(&file).unwrap() == big(2),
        "the mount kept the old version after min_seq answered"
    );
    let listed: Vec<String> = std::fs::read_dir(mnt.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(listed.contains(&"new.txt".to_string()), "{listed:?}");
    assert_eq!(std::fs::read(mnt.join("docs/new.txt")).unwrap(), b"new");
    let refused = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .and_then(|mut f| f.write_all(b"x"));
    assert_eq!(refused.unwrap_err().raw_os_error(), Some(libc::EROFS));
    drop(first);
    replica.stop();
    writer.stop();
}

/// A local store `strata serve` has open is backed up by that server, live: `backup create`
/// beside it is refused (it holds the lock) and names the route; `POST /api/v1/admin:backup`
/// copies every write answered before it while writers go on, twice without copying twice;
/// the server killed right after, the backup restores as a directory holding them all.
#[test]
fn a_served_local_store_is_backed_up_live_by_its_server() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let Some(sw) = seaweed::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("served");
    let db = dir.to_str().unwrap();
    let dest = sw.fresh_url("served-backups").to_string();
    let serve = Arc::new(Serve::start_with_env(
        &dir,
        &["--s3-endpoint", &sw.endpoint, "--backup-to", &dest],
        &ENV,
    ));
    let beside = strata_cmd(
        &sw.endpoint,
        &["--db", db, "backup", "create", "--to", &dest],
    );
    assert!(!beside.status.success());
    let said = String::from_utf8_lossy(&beside.stderr);
    assert!(said.contains("admin:backup"), "{said}");
    assert_eq!(said.matches("busy").count(), 1, "{said}");
    // A backup into the store's own directory would be lost with it: refused before it is made.
    let inside = dir.join("backups");
    let refused = strata_cmd(
        &sw.endpoint,
        &[
            "--db",
            db,
            "backup",
            "create",
            "--to",
            inside.to_str().unwrap(),
        ],
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("inside the store"),
        "{said}"
    );
    assert!(!inside.exists(), "the refused destination was made");
    // A read-only server beside the writer takes no lock and cannot hold back the writer's
    // deletions, so it cannot copy a consistent image: refused at its start.
    let read_only = refused_at_start(
        Command::new(strata_bin())
            .args([
                "--db",
                db,
                "serve",
                "--read-only",
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--s3-endpoint", &sw.endpoint, "--backup-to", &dest]),
        "serve --read-only --backup-to",
    );
    let said = String::from_utf8_lossy(&read_only.stderr);
    assert!(said.contains("read-only server of a directory"), "{said}");
    // Two writers, one of large values, answered before and during the backups.
    let acked: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let done = Arc::new(AtomicBool::new(false));
    // Hex digits of a xorshift stream: values a table's compression does not shrink away.
    let value = |w: usize, i: u64| -> String {
        let mut x = (w as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i + 1);
        let len = if w == 1 { 8000 } else { 24 };
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from_digit((x % 16) as u32, 16).unwrap_or('0')
            })
            .collect()
    };
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (serve, acked, done) = (serve.clone(), acked.clone(), done.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !done.load(Ordering::Acquire) && i < 5_000 {
                    let key = format!("w{w}/{i:06}");
                    let body = format!(r#"{{"value":"{}"}}"#, b64(value(w, i).as_bytes()));
                    let path = format!("/api/v1/kv/{}", path_key(key.as_bytes()));
                    let r = serve.call("PUT", &path, body.as_bytes());
                    assert!(r.status < 300, "{}", r.text());
                    i += 1;
                    acked[w].store(i, Ordering::Release);
                }
            })
        })
        .collect();
    // Past the 64 KiB a backup's record carries inline: files become objects.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while acked[1].load(Ordering::Acquire) < 200 {
        assert!(
            std::time::Instant::now() < deadline && !writers.iter().any(|w| w.is_finished()),
            "the writers stopped"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let before = [0, 1].map(|w| acked[w].load(Ordering::Acquire));
    let first = serve.call("POST", "/api/v1/admin:backup", b"");
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.json()["backup"]["number"], 1, "{}", first.text());
    done.store(true, Ordering::Release);
    for w in writers {
        w.join().unwrap();
    }
    let second = serve.call("POST", "/api/v1/admin:backup", br#"{"flush":true}"#);
    assert_eq!(second.status, 200, "{}", second.text());
    // Unchanged since: nothing copied again.
    let third = serve.call("POST", "/api/v1/admin:backup", b"").json();
    assert_eq!(third["copied"], 0, "{third}");
    assert!(third["already_there"].as_u64() > Some(0), "{third}");
    let listed = serve.call("GET", "/api/v1/backups", b"").json();
    assert_eq!(listed.as_array().map(Vec::len), Some(3), "{listed}");
    let bad = serve.call(
        "POST",
        "/api/v1/admin:backup",
        br#"{"to":"s3://elsewhere/x"}"#,
    );
    assert_eq!(
        bad.status,
        400,
        "a client chose where a backup goes: {}",
        bad.text()
    );
    // The durability promise is the bucket's: the server's death loses nothing of it.
    serve.kill();
    // Closed now, the store backs up from the CLI, here into a directory.
    let in_dir = tmp.path().join("dir-backups");
    let in_dir = in_dir.to_str().unwrap();
    let made = strata_cmd(
        &sw.endpoint,
        &["--db", db, "backup", "create", "--to", in_dir],
    );
    assert!(stdout(&made).contains("backup 1"), "{}", stdout(&made));
    stdout(&strata_cmd(
        &sw.endpoint,
        &["backup", "verify", "--to", in_dir],
    ));
    let back = tmp.path().join("restored");
    let back_db = back.to_str().unwrap();
    stdout(&strata_cmd(
        &sw.endpoint,
        &["backup", "restore", "--to", &dest, "--backup", "1", back_db],
    ));
    // Every key answered before backup 1, each with its value (the scan prints them encoded:
    // the restored store's own `get` checks a sample byte for byte).
    for (w, &n) in before.iter().enumerate() {
        let prefix = format!("w{w}/");
        let scanned = Command::new(strata_bin())
            .args(["--db", back_db, "scan", "--prefix", &prefix])
            .output()
            .unwrap();
        let keys = stdout(&scanned).lines().count() as u64;
        assert!(
            keys >= n,
            "{keys} keys of writer {w}, {n} answered before backup 1"
        );
        for i in (0..n).step_by(97).chain([n - 1]) {
            let key = format!("w{w}/{i:06}");
            let got = Command::new(strata_bin())
                .args(["--db", back_db, "get", &key])
                .output()
                .unwrap();
            assert_eq!(stdout(&got).trim(), value(w, i), "{key}");
        }
    }
}
