//! The filesystem mounted for real (FUSE in a temporary directory), driven with std::fs and
//! with ordinary tools, checked against the same steps on a plain directory and against the
//! store's keys.

mod common;
mod disk;
mod doors;
mod large_files;
mod ops;
mod processes;
mod shared;
mod times;
mod tools;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::{Mount, Node, snapshot, starting_processes};
use ops::{Op, apply, same_failure};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::{WriteBatch, WriteOptions};
use strata_fusefs::FsConfig;

fn s(x: &str) -> String {
    x.to_string()
}

/// Applies `ops` to a plain directory and to the mount; both must answer alike and hold the
/// same tree after each step.
fn agree(m: &Mount, plain: &Path, ops: &[Op], check_every: usize) {
    for (i, op) in ops.iter().enumerate() {
        let want = apply(plain, op);
        let got = apply(m.path(), op);
        match (&want, &got) {
            (Err(a), Err(b)) => assert!(same_failure(*a, *b), "step {i} {op:?}: {a} vs {b}"),
            _ => assert_eq!(want, got, "step {i} {op:?}"),
        }
        if (i + 1) % check_every == 0 || i + 1 == ops.len() {
            assert_eq!(snapshot(plain), snapshot(m.path()), "after step {i} {op:?}");
        }
    }
}

#[test]
fn every_operation_matches_a_plain_directory() {
    let Some(m) = Mount::new() else { return };
    let plain = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let ops = vec![
        Op::Create(s("a.txt"), b"hello".to_vec()),
        Op::Append(s("a.txt"), b" world".to_vec()),
        Op::WriteAt(s("a.txt"), 20, b"gap".to_vec()),
        Op::Read(s("a.txt")),
        Op::Truncate(s("a.txt"), 3),
        Op::Truncate(s("a.txt"), 10),
        Op::Create(s("big.bin"), big),
        Op::Mkdir(s("d")),
        Op::Mkdir(s("d")),
        Op::Mkdir(s("d/e")),
        Op::Create(s("d/e/f"), b"f".to_vec()),
        Op::Create(s("d/g"), b"g".to_vec()),
        Op::Rmdir(s("d")),
        Op::Rmdir(s("nothing")),
        Op::Unlink(s("d")),
        Op::Rmdir(s("a.txt")),
        Op::Symlink(s("../a.txt"), s("d/link")),
        Op::Readlink(s("d/link")),
        Op::Read(s("d/link")),
        Op::Mkfifo(s("d/pipe")),
        Op::Chmod(s("a.txt"), 0o600),
        Op::Chmod(s("d/e"), 0o700),
        Op::Rename(s("a.txt"), s("d/e/a2.txt")),
        Op::Rename(s("d/e"), s("moved")),
        Op::Rename(s("moved"), s("moved/inside")),
        Op::Create(s("x"), b"x".to_vec()),
        Op::RenameNoReplace(s("x"), s("big.bin")),
        Op::Exchange(s("x"), s("big.bin")),
        Op::Exchange(s("d"), s("moved")),
        Op::Exchange(s("x"), s("missing")),
        Op::Rename(s("x"), s("d")),
        Op::Mkdir(s("empty")),
        Op::Rename(s("moved"), s("empty")),
        Op::Mkdir(s("full")),
        Op::Create(s("full/f"), Vec::new()),
        Op::Rename(s("empty"), s("full")),
        Op::Unlink(s("d/link")),
        Op::Unlink(s("d/pipe")),
        Op::Read(s("full/f")),
        Op::Create(s("full/f"), b"rewritten".to_vec()),
        Op::Rmdir(s("full")),
        Op::Unlink(s("full/f")),
        Op::Rmdir(s("full")),
    ];
    agree(&m, plain.path(), &ops, 1);
    // The mount's files are the store's keys.
    let cf = m.cf();
    let got = m.db.get_cf(&cf, "big.bin").unwrap().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        m.db.get_cf(&cf, "d/a2.txt").unwrap().as_deref(),
        Some(&b"hel\0\0\0\0\0\0\0"[..])
    );
}

#[test]
fn random_operations_match_a_plain_directory() {
    let Some(m) = Mount::new() else { return };
    let plain = tempfile::tempdir().unwrap();
    let seed = std::env::var("STRATA_FS_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let count: usize = std::env::var("STRATA_FS_MODEL_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    eprintln!("fs model: seed {seed}, {count} operations (STRATA_FS_MODEL_SEED to rerun)");
    let mut rng = StdRng::seed_from_u64(seed);
    let names = ["a", "b", "c.txt", "d", "e-1"];
    let dirs = ["", "d", "d/e", "b", "a/x"];
    let path = |rng: &mut StdRng| -> String {
        let d = dirs[rng.random_range(0..dirs.len())];
        let n = names[rng.random_range(0..names.len())];
        if d.is_empty() {
            n.to_string()
        } else {
            format!("{d}/{n}")
        }
    };
    let mut ops = Vec::with_capacity(count);
    for _ in 0..count {
        let a = path(&mut rng);
        let bytes = |rng: &mut StdRng| -> Vec<u8> {
            let n = match rng.random_range(0..10) {
                0 => rng.random_range(0..200_000),
                _ => rng.random_range(0..64),
            };
            (0..n).map(|_| rng.random()).collect()
        };
        let op = match rng.random_range(0..15) {
            0 | 1 => Op::Create(a, bytes(&mut rng)),
            2 => Op::Append(a, bytes(&mut rng)),
            3 => Op::WriteAt(a, rng.random_range(0..5000), bytes(&mut rng)),
            4 => Op::Truncate(a, rng.random_range(0..3000)),
            5 => Op::Read(a),
            6 | 7 => Op::Rename(a, path(&mut rng)),
            8 => Op::Unlink(a),
            9 | 10 => Op::Mkdir(a),
            11 => Op::Rmdir(a),
            12 => Op::Symlink(path(&mut rng), a),
            13 => Op::RenameNoReplace(a, path(&mut rng)),
            _ => Op::Exchange(a, path(&mut rng)),
        };
        ops.push(op);
    }
    agree(&m, plain.path(), &ops, 1);
}

#[test]
fn files_are_keys_and_keys_are_files() {
    let Some(m) = Mount::new() else { return };
    let cf = m.cf();
    m.db.put_cf(&cf, "users/alice.json", br#"{"name":"alice"}"#)
        .unwrap();
    m.db.put_cf(&cf, "users/bob.json", b"bob").unwrap();
    let alice = m.path().join("users/alice.json");
    assert_eq!(std::fs::read(&alice).unwrap(), br#"{"name":"alice"}"#);
    let meta = std::fs::metadata(&alice).unwrap();
    // A key written by another face: the defaults.
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    assert_eq!(meta.uid(), FsConfig::default().uid);
    let t1 = meta.modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(std::fs::metadata(&alice).unwrap().modified().unwrap(), t1);
    std::fs::write(m.path().join("users/carol.json"), b"carol").unwrap();
    assert_eq!(
        m.db.get_cf(&cf, "users/carol.json").unwrap().as_deref(),
        Some(&b"carol"[..])
    );
    let mut names: Vec<_> = std::fs::read_dir(m.path().join("users"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["alice.json", "bob.json", "carol.json"]);
    // Bytes are values unchanged, whatever they are.
    let every_byte: Vec<u8> = (0..=255).collect();
    std::fs::write(m.path().join("bin"), &every_byte).unwrap();
    assert_eq!(
        m.db.get_cf(&cf, "bin").unwrap().as_deref(),
        Some(&every_byte[..])
    );
}

#[test]
fn keys_that_are_not_paths_are_hidden_and_counted() {
    let Some(m) = Mount::new() else { return };
    let cf = m.cf();
    let long = format!("long/{}", "x".repeat(256));
    let keys: Vec<&[u8]> = vec![
        b"ok/file",
        b"empty//component",
        b"dot/./x",
        b"dotdot/../x",
        b"trailing/",
        b"/leading",
        b"nul/a\0b",
        long.as_bytes(),
        b"both",
        b"both/child",
        b"both.txt",
    ];
    for k in &keys {
        m.db.put_cf(&cf, k, b"v").unwrap();
    }
    let list = |d: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(m.path().join(d))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    let before = m
        .stats
        .hidden_entries
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        list(""),
        [
            "both", "both.txt", "dot", "dotdot", "empty", "long", "nul", "ok", "trailing"
        ]
    );
    assert!(m.path().join("both").is_file());
    for d in ["empty", "dot", "dotdot", "trailing", "long"] {
        assert_eq!(list(d), Vec::<String>::new(), "{d}");
    }
    assert_eq!(list("nul"), Vec::<String>::new());
    let hidden = m
        .stats
        .hidden_entries
        .load(std::sync::atomic::Ordering::Relaxed)
        - before;
    // `/leading` and `both/` at the root; one below each of the six other directories.
    assert!(hidden >= 8, "{hidden} hidden");
    // A directory holding only hidden keys is not deleted.
    let e = std::fs::remove_dir(m.path().join("empty")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY));
    assert_eq!(
        m.db.get_cf(&cf, "empty//component").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    // The kernel refuses long names before they reach the mount; a name with '/' cannot exist.
    let e = std::fs::write(m.path().join("x".repeat(256)), b"v").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG));
}

#[test]
fn a_listing_resumes_correctly_while_the_directory_changes() {
    let Some(m) = Mount::new() else { return };
    let cf = m.cf();
    let mut batch = WriteBatch::new();
    for i in 0..3000 {
        batch.put_cf(&cf, format!("big/f{i:05}"), b"v");
    }
    // A child with many keys below it is stepped over with one seek.
    for i in 0..20_000 {
        batch.put_cf(&cf, format!("big/f01000.d/{i}"), b"v");
    }
    m.db.write(batch, &WriteOptions::default()).unwrap();
    let mut seen = Vec::new();
    let mut it = std::fs::read_dir(m.path().join("big")).unwrap();
    for _ in 0..1500 {
        seen.push(
            it.next()
                .unwrap()
                .unwrap()
                .file_name()
                .into_string()
                .unwrap(),
        );
    }
    // Changes behind and ahead of where the listing stands.
    for i in (0..3000).step_by(7) {
        m.db.delete_cf(&cf, format!("big/f{i:05}")).unwrap();
    }
    for i in 0..3000 {
        m.db.put_cf(&cf, format!("big/f{i:05}.new"), b"v").unwrap();
    }
    for e in it {
        seen.push(e.unwrap().file_name().into_string().unwrap());
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "an entry was listed twice");
    for i in 0..3000 {
        let name = format!("f{i:05}");
        if i % 7 != 0 {
            assert!(seen.contains(&name), "{name} was skipped");
        }
    }
    assert!(seen.contains(&"f01000.d".to_string()));
}

/// Flushes of an open file (each close of a duplicate of its descriptor is one, as when a
/// forked process execs) racing renames of it: the file ends under its last name only, with its
/// bytes, and no earlier name comes back.
#[test]
fn a_flush_racing_a_rename_never_writes_an_old_name_back() {
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some(m) = Mount::new() else { return };
    let name = |i: usize| m.path().join(format!("r{i:04}"));
    let h = std::fs::File::create(name(0)).unwrap();
    const RENAMES: usize = 4000;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                drop(h.try_clone().unwrap());
            }
        });
        for i in 0..RENAMES {
            // Dirty again, so that the next flush writes the file under the key it finds.
            h.write_at(&[i as u8], i as u64).unwrap();
            std::fs::rename(name(i), name(i + 1)).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    drop(h);
    let want: Vec<u8> = (0..RENAMES).map(|i| i as u8).collect();
    let listed: Vec<String> = std::fs::read_dir(m.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed, [format!("r{RENAMES:04}")]);
    assert_eq!(std::fs::read(name(RENAMES)).unwrap(), want);
    assert_eq!(m.keys(), [format!("r{RENAMES:04}").into_bytes()]);
}

/// Flushes of a file racing changes to its record (xattrs set and removed): each rewrites the
/// record, and none may bring it back as it was before another's change.
#[test]
fn a_flush_racing_an_xattr_change_loses_neither() {
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let Some(m) = Mount::new() else { return };
    let f = s("f");
    std::fs::write(m.path().join(&f), b"v").unwrap();
    const CHANGES: usize = 5000;
    let name = |i: usize| format!("user.a{i}");
    let stop = AtomicBool::new(false);
    let flushes = AtomicUsize::new(0);
    let mut failed = Vec::new();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let h = std::fs::OpenOptions::new()
                        .write(true)
                        .open(m.path().join("f"))
                        .unwrap();
                    h.write_at(b"w", 0).unwrap();
                    drop(h);
                    flushes.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for i in 0..CHANGES {
            let set = Op::SetXattr(f.clone(), name(i), b"x".to_vec());
            if apply(m.path(), &set) != Ok(None) {
                failed.push(format!("set {i}"));
            }
            // Fails if a flush put back the record from before the set.
            if i > 0 && apply(m.path(), &Op::RemoveXattr(f.clone(), name(i - 1))) != Ok(None) {
                failed.push(format!("remove {}", i - 1));
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(flushes.load(Ordering::Relaxed) > 0);
    assert_eq!(failed, Vec::<String>::new());
    // A removal a flush undid shows as an attribute that came back.
    let back: Vec<usize> = (0..CHANGES - 1)
        .filter(|&i| apply(m.path(), &Op::GetXattr(f.clone(), name(i))) != Err(libc::ENODATA))
        .collect();
    assert_eq!(back, Vec::<usize>::new());
    assert_eq!(
        apply(m.path(), &Op::GetXattr(f.clone(), name(CHANGES - 1))),
        Ok(Some(b"x".to_vec()))
    );
    assert_eq!(std::fs::read(m.path().join("f")).unwrap(), b"w");
}

#[test]
fn a_write_without_cap_fsetid_clears_set_id_bits() {
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("tool");
    std::fs::write(&f, b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let mode = || std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(), 0o6755);
    // Appending opens the file write-only, so the write bypasses the kernel's cache and the
    // mount itself must clear the bits, as any file system does for a writer that may not
    // keep them. Root keeps them unless it gives up CAP_FSETID.
    let append = format!("printf x >> '{}'", f.display());
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let mut c = std::process::Command::new("setpriv");
        c.args([
            "--bounding-set=-fsetid",
            "--inh-caps=-all",
            "sh",
            "-c",
            &append,
        ]);
        c
    } else {
        let mut c = std::process::Command::new("sh");
        c.args(["-c", &append]);
        c
    };
    let status = {
        let _starting = starting_processes();
        cmd.status().unwrap()
    };
    assert!(status.success());
    assert_eq!(std::fs::read(&f).unwrap(), b"#!/bin/sh\nx");
    assert_eq!(mode(), 0o755);
}

#[test]
fn a_read_only_mount_refuses_changes() {
    let store = tempfile::tempdir().unwrap();
    {
        let mut opts = strata_engine::Options::default();
        strata_fusefs::prepare_options(&mut opts, "default");
        let db = strata_engine::Db::open(store.path(), opts).unwrap();
        db.put("kept", "v").unwrap();
        db.close().unwrap();
    }
    if !common::fuse_available() {
        return;
    }
    let db = std::sync::Arc::new(
        strata_engine::Db::open_read_only(store.path(), strata_engine::Options::default()).unwrap(),
    );
    let config = FsConfig {
        read_only: true,
        ..FsConfig::default()
    };
    let m = Mount::over(db, store, tempfile::tempdir().unwrap(), config, true);
    assert_eq!(std::fs::read(m.path().join("kept")).unwrap(), b"v");
    for r in [
        std::fs::write(m.path().join("new"), b"v"),
        std::fs::write(m.path().join("kept"), b"w"),
        std::fs::create_dir(m.path().join("d")),
        std::fs::remove_file(m.path().join("kept")),
    ] {
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EROFS));
    }
}

#[test]
fn xattrs_hard_links_and_statfs() {
    let Some(m) = Mount::new() else { return };
    let f = s("f");
    std::fs::write(m.path().join(&f), b"v").unwrap();
    let root = m.path();
    assert_eq!(
        apply(
            root,
            &Op::SetXattr(f.clone(), s("user.color"), b"blue".to_vec())
        ),
        Ok(None)
    );
    assert_eq!(
        apply(root, &Op::GetXattr(f.clone(), s("user.color"))),
        Ok(Some(b"blue".to_vec()))
    );
    assert_eq!(
        apply(root, &Op::GetXattr(f.clone(), s("user.none"))),
        Err(libc::ENODATA)
    );
    assert_eq!(
        apply(root, &Op::GetXattr(f.clone(), s("security.capability"))),
        Err(libc::ENODATA)
    );
    assert_eq!(
        apply(
            root,
            &Op::SetXattr(f.clone(), s("trusted.x"), b"1".to_vec())
        ),
        Err(libc::EOPNOTSUPP)
    );
    // Attributes and mode travel with a rename.
    apply(root, &Op::Chmod(f.clone(), 0o640)).unwrap();
    apply(root, &Op::Rename(f.clone(), s("g"))).unwrap();
    assert_eq!(
        apply(root, &Op::GetXattr(s("g"), s("user.color"))),
        Ok(Some(b"blue".to_vec()))
    );
    assert_eq!(
        std::fs::metadata(root.join("g"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o640
    );
    assert_eq!(apply(root, &Op::HardLink(s("g"), s("h"))), Err(libc::EPERM));
    let before = common::fs_stats(root);
    // Incompressible, so the blob file holds all of it.
    let mut rng = StdRng::seed_from_u64(7);
    let bytes: Vec<u8> = (0..8 << 20).map(|_| rng.random()).collect();
    std::fs::write(root.join("big"), bytes).unwrap();
    m.db.flush_cf(&m.cf()).unwrap();
    let after = common::fs_stats(root);
    assert!(
        after.0 >= before.0 + 2048,
        "used blocks {before:?} -> {after:?}"
    );
}

#[test]
fn snapshot_sees_every_kind() {
    let Some(m) = Mount::new() else { return };
    std::fs::create_dir(m.path().join("d")).unwrap();
    std::os::unix::fs::symlink("d", m.path().join("l")).unwrap();
    apply(m.path(), &Op::Mkfifo(s("p"))).unwrap();
    let snap = snapshot(m.path());
    assert!(matches!(snap[Path::new("d")], Node::Dir { perm: _ }));
    assert_eq!(snap[Path::new("l")], Node::Symlink("d".into()));
    assert_eq!(snap[Path::new("p")], Node::Fifo);
}

#[test]
fn a_file_in_the_mount_is_not_a_terminal() {
    let Some(m) = Mount::new() else { return };
    std::fs::write(m.path().join("f"), b"v").unwrap();
    let f = std::fs::File::open(m.path().join("f")).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: `f` is an open file for the whole call.
    let tty = unsafe { libc::isatty(f.as_raw_fd()) };
    assert_eq!(tty, 0);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENOTTY)
    );
}

#[test]
fn a_busy_mount_keeps_idle_cpus_awake() {
    let Some(m) = Mount::new() else { return };
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    // A burst: each file is four requests back to back.
    for i in 0..50 {
        std::fs::write(m.path().join(format!("f{i}")), b"v").unwrap();
    }
    // Anyone's mount: the serving threads polled the device, so each done with a request
    // parked while another read it.
    assert!(count(&m.stats.awake_bursts) >= 1, "no burst began");
    assert!(
        count(&m.stats.serving_parks) >= 1,
        "no serving thread parked during the burst"
    );
    assert_eq!(std::fs::read_dir(m.path()).unwrap().count(), 50);
    // Only root may hold the latency request, where the kernel offers it. (Opening the device
    // asks nothing until a value is written.)
    let device = strata_fusefs::CPU_LATENCY_DEVICE;
    if let Err(e) = std::fs::OpenOptions::new().write(true).open(device) {
        eprintln!("{device}: {e}: the mount holds no latency request");
        return;
    }
    // The kernel's CPU wake-up latency target now, across every holder.
    let cpu_latency_target = || {
        let bytes = std::fs::read(strata_fusefs::CPU_LATENCY_DEVICE).unwrap();
        i32::from_ne_bytes(bytes[..4].try_into().unwrap())
    };
    // While requests keep coming (a listing always reaches the mount), the kernel's target is
    // 0 µs: idle CPUs poll.
    let mut target = i32::MAX;
    for _ in 0..100 {
        assert_eq!(std::fs::read_dir(m.path()).unwrap().count(), 50);
        target = cpu_latency_target();
        if target == 0 {
            break;
        }
    }
    assert_eq!(target, 0);
}

#[test]
fn a_mount_told_not_to_leaves_cpus_alone() {
    let config = FsConfig {
        keep_cpus_awake: false,
        ..FsConfig::default()
    };
    let Some(m) = Mount::with(config, false) else {
        return;
    };
    for i in 0..50 {
        std::fs::write(m.path().join(format!("f{i}")), b"v").unwrap();
    }
    assert_eq!(std::fs::read_dir(m.path()).unwrap().count(), 50);
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(count(&m.stats.awake_bursts), 0);
    assert_eq!(count(&m.stats.serving_parks), 0);
}

/// A read-only mount over a replica (polling hourly: it moves on when asked) of `store`.
#[allow(clippy::unwrap_used)] // A test's helper: a failure is the test's.
fn replica_mount(
    store: tempfile::TempDir,
    opts: strata_engine::Options,
) -> (std::sync::Arc<strata_engine::Db>, Mount) {
    let hour = std::time::Duration::from_secs(3600);
    let replica =
        std::sync::Arc::new(strata_engine::Db::open_replica(store.path(), opts, hour).unwrap());
    let config = FsConfig {
        read_only: true,
        ..FsConfig::default()
    };
    let m = Mount::over(
        replica.clone(),
        store,
        tempfile::tempdir().unwrap(),
        config,
        true,
    );
    (replica, m)
}

/// A descriptor on a replica's mount reads the version it opened to its end while the replica
/// moves on, whether the file grew or shrank; a new one reads the new version.
#[test]
fn a_descriptor_on_a_replica_mount_reads_the_version_it_opened() {
    use std::io::{Read, Seek, SeekFrom};
    use std::time::Duration;
    let store = tempfile::tempdir().unwrap();
    let mut opts = strata_engine::Options::default();
    strata_fusefs::prepare_options(&mut opts, "default");
    let writer = strata_engine::Db::open(store.path(), opts.clone()).unwrap();
    let versions = [vec![b'a'; 10_000], vec![b'b'; 30_000], vec![b'c'; 100]];
    writer.put("f", &versions[0]).unwrap();
    if !common::fuse_available() {
        return;
    }
    let invalidation = std::sync::Arc::new(strata_fusefs::ReplicaInvalidation::default());
    opts.listeners.push(invalidation.clone());
    let (replica, m) = replica_mount(store, opts);
    invalidation.attach(m.invalidator.clone(), replica.latest_sequence());
    let path = m.path().join("f");
    let read_rest = |f: &mut std::fs::File, from: u64| {
        f.seek(SeekFrom::Start(from)).unwrap();
        let mut all = Vec::new();
        f.read_to_end(&mut all).unwrap();
        all
    };
    let mut opened = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        if i > 0 {
            writer.put("f", version).unwrap();
            let seq = writer.latest_sequence();
            replica
                .wait_for_sequence(seq, Duration::from_secs(10))
                .unwrap();
            // The kernel's caches are dropped a moment after the store moves.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !invalidation.shows(seq) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no pass after the round"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let mut f = std::fs::File::open(&path).unwrap();
        let mut head = [0u8; 10];
        f.read_exact(&mut head).unwrap();
        assert_eq!(head[..], version[..10]);
        opened.push(f);
        for (j, f) in opened.iter_mut().enumerate() {
            let whole = read_rest(f, 0);
            assert!(
                whole == versions[j],
                "descriptor {j} read {} bytes after version {i} came, not its {}",
                whole.len(),
                versions[j].len()
            );
        }
    }
    assert_eq!(std::fs::read(&path).unwrap(), versions[2]);
}

/// A directory handle on a replica's mount lists one version, and once it has listed to the
/// end it pins none: a handle kept open (a file manager's) holds no view of the store, and
/// asked to go on it lists nothing more, though the replica moved on.
#[test]
fn a_listed_directory_on_a_replica_mount_pins_no_version() {
    use std::os::unix::ffi::OsStrExt;
    use std::time::Duration;
    let store = tempfile::tempdir().unwrap();
    let mut opts = strata_engine::Options::default();
    strata_fusefs::prepare_options(&mut opts, "default");
    let writer = strata_engine::Db::open(store.path(), opts.clone()).unwrap();
    for i in 0..50 {
        writer.put(format!("d/f{i:02}"), "x").unwrap();
    }
    if !common::fuse_available() {
        return;
    }
    let (replica, m) = replica_mount(store, opts);
    let dir = std::ffi::CString::new(m.path().join("d").as_os_str().as_bytes()).unwrap();
    // SAFETY: `dir` is a valid C string; the handle is closed below, once.
    let handle = unsafe { libc::opendir(dir.as_ptr()) };
    assert!(!handle.is_null());
    let mut names = 0;
    // SAFETY: `handle` is an open directory stream until closedir.
    while !unsafe { libc::readdir(handle) }.is_null() {
        names += 1;
    }
    let pinned = replica.properties().live_snapshots;
    writer.put("d/late", "x").unwrap();
    let caught = replica.wait_for_sequence(writer.latest_sequence(), Duration::from_secs(10));
    // Asked again from where it ended: nothing more, the listing was over.
    // SAFETY: as above.
    let more = !unsafe { libc::readdir(handle) }.is_null();
    // SAFETY: closed once, before any check can fail: an open handle would keep the mount busy.
    unsafe { libc::closedir(handle) };
    assert_eq!(names, 52, "the children and . and ..");
    assert_eq!(pinned, 0, "a listed directory pins its view");
    caught.unwrap();
    assert!(!more, "a listing that ended went on");
    assert_eq!(std::fs::read_dir(m.path().join("d")).unwrap().count(), 51);
}
