//! Writers killed with SIGKILL at random moments (mid-upload, between an upload and the record
//! that names it, mid-record, mid-checkpoint), a hundred times in all: every write acknowledged
//! at the store's durability is there afterwards, every open finds every object its log names,
//! and what the dead writers left behind is reclaimed. On the `local` store every fifth write asks
//! for `bucket` durability: those, at least, are there for another machine too.
//!
//! The writer is this test binary run again as a child (`crash_child`), printing each key once
//! its synced write returned.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use strata_bucket::{BucketFs, BucketUrl, Durability};

use crate::support::seaweed::{self, Seaweed};
use crate::support::{open_db, synced};
use strata_engine::WriteOptions;

const CHILD: &str = "STRATA_BUCKET_CRASH_CHILD";

/// A no-op, unless this binary was started as a crash test's writer: then it writes keys from
/// the one it was given until it is killed.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [endpoint, url, cache, durability, first] = parts[..] else {
        panic!("bad {CHILD}: {spec}");
    };
    let durability = if durability == "bucket" {
        Durability::Remote
    } else {
        Durability::Local
    };
    let url = BucketUrl::parse(url).unwrap();
    let config = strata_bucket::BucketConfig {
        endpoint: Some(endpoint.to_string()),
        credentials: Some(seaweed::credentials()),
        durability,
        gc_interval: None,
        lease: Duration::from_millis(300),
        ..strata_bucket::BucketConfig::new(url, PathBuf::from(cache))
    };
    let db = open_db(BucketFs::open(&config).unwrap());
    let mut i: u64 = first.parse().unwrap();
    loop {
        let key = format!("k{i:08}");
        // Big values now and then: blob files, and uploads in several pieces.
        let value = if i.is_multiple_of(7) {
            vec![i as u8; 100 << 10]
        } else {
            vec![i as u8; 100]
        };
        let remote = durability == Durability::Local && i.is_multiple_of(5);
        let opts = WriteOptions {
            durability: remote.then_some(Durability::Remote),
            ..synced()
        };
        db.put_with(&opts, key.as_bytes(), &value).unwrap();
        println!("ack {key}{}", if remote { " remote" } else { "" });
        if i % 40 == 39 {
            db.flush().unwrap();
        }
        i += 1;
    }
}

/// One store under the crash loop.
struct Subject {
    url: BucketUrl,
    durability: Durability,
    acked: Vec<String>,
    /// Of `acked`, those acknowledged at `bucket` durability.
    acked_remote: Vec<String>,
}

fn cache_for(tmp: &Path, subject: &Subject, cycle: usize) -> PathBuf {
    match subject.durability {
        // The local WAL is what makes its writes durable: every writer uses the one cache.
        Durability::Local => tmp.join("local-cache"),
        // Everything acknowledged is in the bucket: every writer starts from nothing.
        Durability::Remote => tmp.join(format!("bucket-cache-{cycle}")),
    }
}

/// Starts a writer, lets it acknowledge for a random while, kills it; returns what it
/// acknowledged (each key, and whether at `bucket` durability).
fn one_life(
    s: &Seaweed,
    subject: &Subject,
    cache: &Path,
    rng: &mut impl Rng,
) -> Vec<(String, bool)> {
    let durability = match subject.durability {
        Durability::Local => "local",
        Durability::Remote => "bucket",
    };
    let spec = format!(
        "{}|{}|{}|{durability}|{}",
        s.endpoint,
        subject.url,
        cache.display(),
        subject.acked.len()
    );
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash::crash_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, spec)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(cache.with_extension("stderr")).unwrap())
        .spawn()
        .unwrap();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let acked = acked.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(ack) = line.strip_prefix("ack ") {
                    let (key, remote) = match ack.strip_suffix(" remote") {
                        Some(key) => (key, true),
                        None => (ack, false),
                    };
                    acked.lock().unwrap().push((key.to_string(), remote));
                }
            }
        })
    };
    // Once it writes, a random moment within the next 400 ms (a flush every 40 keys, so some
    // deaths fall in uploads and records).
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(rng.random_range(0..400)));
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    if acked.is_empty() {
        let stderr = std::fs::read_to_string(cache.with_extension("stderr")).unwrap_or_default();
        let why: String = stderr
            .lines()
            .filter(|l| l.contains("panicked") || l.contains("Err"))
            .take(4)
            .collect::<Vec<_>>()
            .join("\n");
        panic!("the writer acknowledged nothing in 30 s:\n{why}");
    }
    acked
}

fn assert_all_there(s: &Seaweed, subject: &Subject, cache: &Path) {
    assert_there(s, subject, cache, &subject.acked);
}

fn assert_there(s: &Seaweed, subject: &Subject, cache: &Path, keys: &[String]) {
    let fs = BucketFs::open(&strata_bucket::BucketConfig {
        read_only: true,
        ..s.config(&subject.url, cache.to_path_buf(), subject.durability)
    })
    .unwrap();
    let root = fs.root().to_path_buf();
    let db = strata_engine::Db::open_read_only(
        &root,
        strata_engine::Options {
            filesystem: Arc::new(fs),
            ..strata_engine::Options::default()
        },
    )
    .unwrap();
    for key in keys {
        assert!(
            db.get(key.as_bytes()).unwrap().is_some(),
            "{key} was acknowledged at {:?} durability and is lost",
            subject.durability
        );
    }
}

#[test]
fn writers_killed_at_random_moments_lose_nothing_acknowledged() {
    let Some(s) = seaweed::shared() else { return };
    let cycles: usize = std::env::var("STRATA_BUCKET_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let tmp = tempfile::tempdir().unwrap();
    let mut subjects = [Durability::Local, Durability::Remote].map(|durability| Subject {
        url: s.fresh_url(&format!("crash-{durability:?}").to_lowercase()),
        durability,
        acked: Vec::new(),
        acked_remote: Vec::new(),
    });
    let mut rng = rand::rng();
    let started = Instant::now();
    for cycle in 0..cycles {
        let subject = &mut subjects[cycle % 2];
        let cache = cache_for(tmp.path(), subject, cycle);
        let acked = one_life(s, subject, &cache, &mut rng);
        for (key, remote) in acked {
            if remote {
                subject.acked_remote.push(key.clone());
            }
            subject.acked.push(key);
        }
        if cycle % 20 == 19 || cycle + 2 >= cycles {
            if subject.durability == Durability::Local {
                // Another machine: the writes that asked for the bucket.
                let elsewhere = tmp.path().join(format!("elsewhere-{cycle}"));
                assert_there(s, subject, &elsewhere, &subject.acked_remote);
            }
            let check = match subject.durability {
                Durability::Local => cache.clone(),
                Durability::Remote => tmp.path().join(format!("check-{cycle}")),
            };
            assert_all_there(s, subject, &check);
        }
    }
    eprintln!(
        "{cycles} writers killed in {:?}; {} and {} writes acknowledged",
        started.elapsed(),
        subjects[0].acked.len(),
        subjects[1].acked.len()
    );
    // What the dead left behind (uploads no record names) goes; the data stays.
    for subject in &subjects {
        let cache = tmp.path().join(format!("gc-{:?}", subject.durability));
        let fs =
            BucketFs::open(&s.config(&subject.url, cache.clone(), subject.durability)).unwrap();
        let report = fs.collect_garbage(Duration::ZERO).unwrap();
        eprintln!("{:?}: {report:?}", subject.durability);
        assert_eq!(fs.collect_garbage(Duration::ZERO).unwrap().deleted, 0);
        drop(fs);
        if subject.durability == Durability::Remote {
            assert_all_there(s, subject, &tmp.path().join("after-gc"));
        }
    }
}
