//! `strata mount` and `strata umount` for real: a background mount, and a mount process killed
//! with SIGKILL during a write-heavy run, after which every fsynced file is intact.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

mod common;
use common::{stdout as ok, strata};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Under `CI` a missing FUSE fails instead of skipping.
fn fuse_available() -> bool {
    let Err(missing) = strata_fusefs::check_fuse() else {
        return true;
    };
    assert!(std::env::var_os("CI").is_none(), "CI is set but {missing}");
    eprintln!("skipping: {missing} (CI fails instead)");
    false
}

/// A temporary directory holding a store's path and an empty mount point; `None` (skip) without
/// FUSE.
fn store_and_mountpoint() -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    if !fuse_available() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (db, mnt) = (dir.path().join("db"), dir.path().join("mnt"));
    std::fs::create_dir(&mnt).unwrap();
    Some((dir, db, mnt))
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn mount_in_the_background_and_unmount() {
    let Some((dir, db, mnt)) = store_and_mountpoint() else {
        return;
    };
    ok(&strata(&db, &["put", "users/alice.json", "{}"]));
    let out = ok(&strata(&db, &["mount", mnt.to_str().unwrap()]));
    assert!(out.is_empty());
    assert!(strata_fusefs::is_mounted(&mnt));
    assert_eq!(std::fs::read(mnt.join("users/alice.json")).unwrap(), b"{}");
    std::fs::write(mnt.join("users/bob.json"), b"[1]").unwrap();
    // A second mount on the same point, and a non-directory, are refused.
    let again = strata(&db, &["mount", mnt.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already a mount point"));
    // The mount names its process, which `umount` waits for.
    let source = strata_fusefs::mount_source(&mnt).unwrap();
    assert!(source.starts_with("strata:"), "{source}");
    let pid = &source["strata:".len()..];
    ok(&strata(&db, &["umount", mnt.to_str().unwrap()]));
    assert!(!strata_fusefs::is_mounted(&mnt));
    // Gone, or a zombie (whose cmdline is empty) that its new parent may reap at any moment.
    assert!(
        std::fs::read(format!("/proc/{pid}/cmdline")).map_or(true, |c| c.is_empty()),
        "process {pid} still runs after umount returned"
    );
    // Once `umount` returns, the store is closed: the CLI opens it at once, every time.
    assert_eq!(ok(&strata(&db, &["get", "users/bob.json"])), "[1]\n");
    let log = std::fs::read_to_string(db.join("mount.log")).unwrap();
    assert!(log.contains("write users/bob.json"), "{log}");
    for round in 0..5 {
        ok(&strata(&db, &["mount", mnt.to_str().unwrap()]));
        std::fs::write(mnt.join(format!("round{round}")), vec![b'x'; 1 << 20]).unwrap();
        ok(&strata(&db, &["umount", mnt.to_str().unwrap()]));
        ok(&strata(&db, &["put", "after", &round.to_string()]));
    }
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let bad = strata(&db, &["mount", file.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a directory"));
}

fn content(i: u64) -> Vec<u8> {
    let len = 1 + (i * 7919) % 48_000;
    (0..len).map(|j| (i.wrapping_mul(31) ^ j) as u8).collect()
}

fn spawn_mount(db: &Path, mnt: &Path) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(db)
        .args(["mount", "--foreground", mnt.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the mount", || strata_fusefs::is_mounted(mnt));
    child
}

#[test]
fn a_killed_mount_keeps_every_fsynced_file() {
    let Some((_dir, db, mnt)) = store_and_mountpoint() else {
        return;
    };
    let synced: Arc<Mutex<BTreeMap<PathBuf, u64>>> = Arc::default();
    let mut next = 0u64;
    for cycle in 0..3 {
        let child = spawn_mount(&db, &mnt);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (mnt, synced, stop) = (mnt.clone(), synced.clone(), stop.clone());
            let start = next;
            std::thread::spawn(move || {
                let mut i = start;
                while !stop.load(Ordering::Relaxed) {
                    let rel = PathBuf::from(format!("d{}/f{i}", i % 10));
                    let path = mnt.join(&rel);
                    let r = std::fs::create_dir_all(path.parent().unwrap())
                        .and_then(|()| std::fs::File::create(&path))
                        .and_then(|mut f| {
                            f.write_all(&content(i))?;
                            if i.is_multiple_of(3) {
                                f.sync_all()
                            } else {
                                Ok(())
                            }
                        });
                    match r {
                        Ok(()) if i.is_multiple_of(3) => {
                            synced.lock().unwrap().insert(rel, i);
                        }
                        Ok(()) => {}
                        // The mount died under us.
                        Err(_) => break,
                    }
                    i += 1;
                }
                i
            })
        };
        std::thread::sleep(Duration::from_millis(700 + 400 * cycle));
        kill_mount(child, &mnt);
        stop.store(true, Ordering::Relaxed);
        next = writer.join().unwrap() + 1;
        let verify = strata(&db, &["verify"]);
        assert!(
            verify.status.success(),
            "cycle {cycle}: verify: {}{}",
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        );
        // Every fsynced file is whole. Any other is whole, empty (created, not yet closed), or
        // absent: never part of its bytes.
        let mut child = spawn_mount(&db, &mnt);
        let synced = synced.lock().unwrap();
        assert!(!synced.is_empty());
        for (rel, &i) in synced.iter() {
            let got = std::fs::read(mnt.join(rel));
            assert_eq!(
                got.ok(),
                Some(content(i)),
                "cycle {cycle}: {}",
                rel.display()
            );
        }
        for d in std::fs::read_dir(&mnt).unwrap() {
            for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
                let f = f.unwrap();
                let i: u64 = f.file_name().to_str().unwrap()[1..].parse().unwrap();
                let got = std::fs::read(f.path()).unwrap();
                assert!(
                    got.is_empty() || got == content(i),
                    "{:?} is torn",
                    f.path()
                );
            }
        }
        eprintln!(
            "cycle {cycle}: {} fsynced files intact, {next} written",
            synced.len()
        );
        ok(&strata(&db, &["umount", mnt.to_str().unwrap()]));
        child.wait().unwrap();
    }
}

/// Kills the mount with SIGKILL and unmounts what it left (lazily: descriptors of the dead
/// mount may still be open).
fn kill_mount(mut child: Child, mnt: &Path) {
    child.kill().unwrap();
    child.wait().unwrap();
    let out = Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(mnt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each durability promise, kept by a mount killed the moment the call returns: `fsync` on one
/// descriptor of writes made through another, an `O_DSYNC` write, and `fsync` of a directory
/// after a rename into it.
#[test]
fn every_durability_promise_survives_a_kill_right_after_it() {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let Some((_dir, db, mnt)) = store_and_mountpoint() else {
        return;
    };
    let open = |name: &str, flags: i32| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(flags)
            .open(mnt.join(name))
            .unwrap()
    };
    // Each returns what must be found after the kill, and the descriptors it still holds: the
    // mount dies while they are open, so no close can stand in for the promise.
    type Kept = (Vec<(String, Vec<u8>)>, Vec<std::fs::File>);
    type Promise<'a> = (&'a str, Box<dyn Fn() -> Kept + 'a>);
    let promises: Vec<Promise> = vec![
        (
            "fsync of another descriptor",
            Box::new(|| {
                let (writer, syncer) = (open("written", 0), open("written", 0));
                writer.write_all_at(b"through one", 0).unwrap();
                writer.write_all_at(b", synced by the other", 11).unwrap();
                syncer.sync_all().unwrap();
                let want = vec![(
                    "written".into(),
                    b"through one, synced by the other".to_vec(),
                )];
                (want, vec![writer, syncer])
            }),
        ),
        (
            "an O_DSYNC write",
            Box::new(|| {
                let f = open("dsync", libc::O_DSYNC);
                f.write_all_at(b"durable on return", 0).unwrap();
                (
                    vec![("dsync".into(), b"durable on return".to_vec())],
                    vec![f],
                )
            }),
        ),
        (
            "fsync of the directory after a rename",
            Box::new(|| {
                std::fs::create_dir_all(mnt.join("d")).unwrap();
                let tmp = open("d/file.tmp", 0);
                tmp.write_all_at(b"replaced atomically", 0).unwrap();
                tmp.sync_all().unwrap();
                std::fs::rename(mnt.join("d/file.tmp"), mnt.join("d/file")).unwrap();
                let d = std::fs::File::open(mnt.join("d")).unwrap();
                d.sync_all().unwrap();
                (
                    vec![("d/file".into(), b"replaced atomically".to_vec())],
                    vec![tmp, d],
                )
            }),
        ),
    ];
    for (what, promise) in &promises {
        let child = spawn_mount(&db, &mnt);
        let (want, held) = promise();
        kill_mount(child, &mnt);
        drop(held);
        let child = spawn_mount(&db, &mnt);
        for (name, bytes) in want {
            assert_eq!(
                std::fs::read(mnt.join(&name)).ok(),
                Some(bytes),
                "{what}: {name}"
            );
        }
        ok(&strata(&db, &["umount", mnt.to_str().unwrap()]));
        let mut child = child;
        child.wait().unwrap();
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill with a child's pid and a valid signal touches no memory of ours.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// SIGTERM while files are open and dirty: their writes are stored at once, the mount leaves
/// the namespace and serves them until they close, then the store closes; a second signal
/// forces the stop with what was written so far stored.
#[test]
fn a_stop_while_files_are_open_loses_no_write() {
    use std::os::unix::fs::FileExt;
    let Some((_dir, db, mnt)) = store_and_mountpoint() else {
        return;
    };
    let chunk = |i: u8| vec![i; 1 << 20];
    let mut child = spawn_mount(&db, &mnt);
    let f = std::fs::File::create(mnt.join("open")).unwrap();
    f.write_all_at(&chunk(1), 0).unwrap();
    signal(&child, libc::SIGTERM);
    wait_until("the lazy unmount", || !strata_fusefs::is_mounted(&mnt));
    assert!(
        child.try_wait().unwrap().is_none(),
        "ended with a file open"
    );
    // Still served through the open descriptor.
    f.write_all_at(&chunk(2), 1 << 20).unwrap();
    drop(f);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let got = ok(&strata(&db, &["get", "--raw", "open"]));
    assert_eq!(got.len(), 2 << 20);
    assert!(got.as_bytes()[..1 << 20].iter().all(|&b| b == 1));
    assert!(got.as_bytes()[1 << 20..].iter().all(|&b| b == 2));

    let child = spawn_mount(&db, &mnt);
    let f = std::fs::File::create(mnt.join("forced")).unwrap();
    f.write_all_at(&chunk(3), 0).unwrap();
    signal(&child, libc::SIGTERM);
    wait_until("the lazy unmount", || !strata_fusefs::is_mounted(&mnt));
    signal(&child, libc::SIGTERM);
    let mut child = child;
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "a forced stop says so");
    drop(f);
    let got = ok(&strata(&db, &["get", "--raw", "forced"]));
    assert_eq!(got.len(), 1 << 20);
}

/// `strata fs-bench`, small: every workload runs on both sides and prints its line.
#[test]
fn fs_bench_prints_every_workload_for_both_sides() {
    let Some((_dir, db, _mnt)) = store_and_mountpoint() else {
        return;
    };
    let out = ok(&strata(
        &db,
        &[
            "fs-bench",
            "--files",
            "50",
            "--list-files",
            "100",
            "--big-mib",
            "8",
            "--dir-files",
            "50",
            "--deep-keys",
            "1000",
        ],
    ));
    for workload in [
        "create",
        "stat",
        "restat",
        "read",
        "rename",
        "unlink",
        "ls-l",
        "write-seq",
        "read-seq",
        "append-100B",
        "append-2fd",
        "randread-4K",
        "mv-big",
        "rename-dir",
    ] {
        for side in ["plain", "strata"] {
            let name = format!("{workload}.{side} ");
            assert!(out.lines().any(|l| l.starts_with(&name)), "{name}:\n{out}");
        }
    }
    assert!(out.contains("ls-deep.strata"), "{out}");
    assert!(out.contains("peak RSS"), "{out}");
}
