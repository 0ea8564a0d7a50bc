//! A replica's rounds as its thread runs them (`db/replica.rs`), driven through a filesystem
//! whose `refresh` the test answers: a panic in a round is a failed round and following goes
//! on, as after a listener's panic; a round whose catch-up failed after the files moved is
//! followed by catch-ups though nothing moves again; closing waits for the round in flight and
//! ends the thread.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use strata_engine::{Db, Error, ErrorKind, EventListener, Options};

use crate::common::HookedFs;

const POLL: Duration = Duration::from_millis(20);

fn writer(dir: &Path) -> Db {
    let mut o = crate::db::small_options();
    o.create_if_missing = true;
    Db::open(dir, o).unwrap()
}

/// A replica of `dir` reading through `fs`, with `listeners`.
fn replica(dir: &Path, fs: HookedFs, listeners: Vec<Arc<dyn EventListener>>) -> Db {
    let o = Options {
        filesystem: Arc::new(fs),
        listeners,
        ..crate::db::small_options()
    };
    Db::open_replica(dir, o, POLL).unwrap()
}

fn disk() -> Arc<dyn strata_engine::FileSystem> {
    Arc::new(strata_engine::fs::StdFileSystem)
}

fn value(db: &Db, key: &str) -> Option<Vec<u8>> {
    db.get(key).unwrap().map(|v| v.to_vec())
}

/// Waits until `done` holds, failing the test after 10 s with `what`.
fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Panics on every round that moved reads.
#[derive(Debug, Default)]
struct PanicsWhenCaughtUp(AtomicU64);

impl EventListener for PanicsWhenCaughtUp {
    fn on_caught_up(&self, _info: &strata_engine::CaughtUp) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("a listener's own bug");
    }
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_panic_in_a_round_is_a_failed_round_and_following_goes_on() {
    let dir = crate::common::tempdir();
    let db = writer(dir.path());
    db.put("k", "1").unwrap();
    let panics = Arc::new(AtomicBool::new(false));
    let fs = HookedFs::new(disk(), |_| Ok(())).on_refresh({
        let panics = panics.clone();
        move || {
            assert!(!panics.load(Ordering::SeqCst), "the backend's own bug");
            Ok(true)
        }
    });
    let listener = Arc::new(PanicsWhenCaughtUp::default());
    let replica = replica(dir.path(), fs, vec![listener.clone()]);
    assert_eq!(value(&replica, "k").as_deref(), Some(&b"1"[..]));

    panics.store(true, Ordering::SeqCst);
    // Written only once a round has panicked: a round already past its refresh would
    // otherwise catch up to it.
    until("no round panicked", || {
        replica.replica_status().unwrap().failures > 0
    });
    db.put("k", "2").unwrap();
    let e = replica
        .wait_for_sequence(db.latest_sequence(), Duration::from_millis(300))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    let status = replica.replica_status().unwrap();
    let why = status.last_error.clone().unwrap_or_default();
    assert!(
        status.failures > 0 && why.contains("panicked") && why.contains("the backend's own bug"),
        "{status:?}"
    );
    assert_eq!(
        value(&replica, "k").as_deref(),
        Some(&b"1"[..]),
        "still serving"
    );

    // Following goes on once rounds stop panicking, and after the listener's panics too.
    panics.store(false, Ordering::SeqCst);
    replica
        .wait_for_sequence(db.latest_sequence(), Duration::from_secs(10))
        .unwrap();
    assert_eq!(value(&replica, "k").as_deref(), Some(&b"2"[..]));
    db.put("k", "3").unwrap();
    replica
        .wait_for_sequence(db.latest_sequence(), Duration::from_secs(10))
        .unwrap();
    assert_eq!(value(&replica, "k").as_deref(), Some(&b"3"[..]));
    // Told after the round published its sequence: maybe a moment after the wait ended.
    until("the listener was not told of both rounds", || {
        listener.0.load(Ordering::SeqCst) >= 2
    });
    assert!(replica.replica_status().unwrap().last_error.is_none());
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_catch_up_that_failed_after_the_files_moved_is_tried_until_it_succeeds() {
    let dir = crate::common::tempdir();
    let db = writer(dir.path());
    db.put("k", "1").unwrap();
    // The files moved once (the next refresh says so), and never again.
    let moved = Arc::new(AtomicBool::new(false));
    let manifest_fails = Arc::new(AtomicBool::new(false));
    let fs = HookedFs::new(disk(), |_| Ok(()))
        .on_refresh({
            let moved = moved.clone();
            move || Ok(moved.swap(false, Ordering::SeqCst))
        })
        .on_open({
            let fails = manifest_fails.clone();
            move |path| match fails.load(Ordering::SeqCst)
                && path.to_string_lossy().contains("MANIFEST")
            {
                true => Err(Error::Io {
                    context: format!("open {}", path.display()),
                    source: std::io::Error::from_raw_os_error(libc::EIO),
                }),
                false => Ok(()),
            }
        });
    let replica = replica(dir.path(), fs, Vec::new());
    db.put("k", "2").unwrap();
    manifest_fails.store(true, Ordering::SeqCst);
    moved.store(true, Ordering::SeqCst);
    until("the round after the move never failed", || {
        replica.replica_status().unwrap().failures > 0
    });
    assert!(!moved.load(Ordering::SeqCst), "the move was not taken");
    assert_eq!(value(&replica, "k").as_deref(), Some(&b"1"[..]));
    // The disk answers again; the filesystem reports nothing new, yet the replica catches up.
    manifest_fails.store(false, Ordering::SeqCst);
    replica
        .wait_for_sequence(db.latest_sequence(), Duration::from_secs(10))
        .unwrap();
    assert_eq!(value(&replica, "k").as_deref(), Some(&b"2"[..]));
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn closing_a_replica_waits_for_the_round_in_flight_and_ends_its_thread() {
    let dir = crate::common::tempdir();
    let db = writer(dir.path());
    db.put("k", "1").unwrap();
    let (in_round, rounds) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let fs = HookedFs::new(disk(), |_| Ok(())).on_refresh({
        let (in_round, rounds) = (in_round.clone(), rounds.clone());
        move || {
            in_round.store(true, Ordering::SeqCst);
            rounds.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(200));
            in_round.store(false, Ordering::SeqCst);
            Ok(true)
        }
    });
    let replica = replica(dir.path(), fs, Vec::new());
    until("no round started", || in_round.load(Ordering::SeqCst));
    replica.close().unwrap();
    assert!(
        !in_round.load(Ordering::SeqCst),
        "close returned while a round was in flight"
    );
    let after_close = rounds.load(Ordering::SeqCst);
    std::thread::sleep(POLL * 10);
    assert_eq!(
        rounds.load(Ordering::SeqCst),
        after_close,
        "the replica's thread went on after close"
    );
    let e = replica.get("k").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
}
