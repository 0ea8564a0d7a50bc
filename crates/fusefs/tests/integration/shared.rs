//! One file, used as people use files: several descriptors and processes on it at once, other
//! doors writing its key meanwhile, and writes that reach the store as byte ranges.

#![allow(clippy::unwrap_used)]

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use strata_engine::{ReadOptions, WriteOptions};

use crate::common::{Mount, starting_processes};

/// Bytes the store's files hold: what a change grows them by is what it wrote (the test's
/// store is its own, whatever other tests run meanwhile).
fn store_bytes(m: &Mount) -> u64 {
    fn walk(dir: &std::path::Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let meta = e.metadata().unwrap();
                if meta.is_dir() {
                    walk(&e.path())
                } else {
                    meta.len()
                }
            })
            .sum()
    }
    walk(m.store.path())
}

fn sh(script: &str, dir: &std::path::Path) -> std::process::Child {
    let _starting = starting_processes();
    std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .spawn()
        .unwrap()
}

#[test]
fn two_processes_appending_to_one_file_lose_no_line() {
    let Some(m) = Mount::new() else { return };
    const LINES: usize = 200;
    let appender = |who: &str| {
        sh(
            &format!("i=0; while [ $i -lt {LINES} ]; do echo {who}-$i >> log; i=$((i+1)); done"),
            m.path(),
        )
    };
    let (mut a, mut b) = (appender("a"), appender("b"));
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
    let text = std::fs::read_to_string(m.path().join("log")).unwrap();
    assert!(!text.contains('\0'), "NUL bytes in {text:?}");
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2 * LINES, "{text}");
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), 2 * LINES);
}

#[test]
fn two_descriptors_writing_apart_both_land_whichever_closes_last() {
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("two");
    let open = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&f)
            .unwrap()
    };
    let (one, two) = (open(), open());
    one.write_at(b"AAAA", 0).unwrap();
    two.write_at(b"BBBB", 10).unwrap();
    // Each descriptor sees the other's bytes at once, and the length both give the file.
    let mut got = [0; 14];
    one.read_exact_at(&mut got, 0).unwrap();
    assert_eq!(&got, b"AAAA\0\0\0\0\0\0BBBB");
    assert_eq!(one.metadata().unwrap().len(), 14);
    drop(two);
    drop(one);
    assert_eq!(std::fs::read(&f).unwrap(), b"AAAA\0\0\0\0\0\0BBBB");
    assert_eq!(
        m.db.get_cf(&m.cf(), "two").unwrap().unwrap().as_ref(),
        b"AAAA\0\0\0\0\0\0BBBB"
    );
}

#[test]
fn an_o_dsync_write_is_in_the_store_when_it_returns() {
    let Some(m) = Mount::new() else { return };
    let h = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DSYNC)
        .open(m.path().join("dsync"))
        .unwrap();
    h.write_all_at(b"promised", 0).unwrap();
    // Another door sees it before the close.
    assert_eq!(
        m.db.get_cf(&m.cf(), "dsync").unwrap().unwrap().as_ref(),
        b"promised"
    );
    drop(h);
}

#[test]
fn an_append_reaches_the_true_end_after_another_door_grew_the_file() {
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("grown");
    std::fs::write(&f, b"mount;").unwrap();
    let h = OpenOptions::new().append(true).open(&f).unwrap();
    // The kernel believes the file is 6 bytes long; the store now holds 11.
    m.db.put_cf(&m.cf(), "grown", b"mount;rest;").unwrap();
    m.invalidator.key_changed(b"grown");
    use std::io::Write;
    (&h).write_all(b"again;").unwrap();
    drop(h);
    assert_eq!(
        m.db.get_cf(&m.cf(), "grown").unwrap().unwrap().as_ref(),
        b"mount;rest;again;"
    );
}

#[test]
fn appending_to_a_large_file_writes_about_what_it_appends() {
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("big");
    let chunk = vec![7u8; 1 << 20];
    {
        let h = std::fs::File::create(&f).unwrap();
        for i in 0..64u64 {
            h.write_all_at(&chunk, i << 20).unwrap();
        }
        h.sync_all().unwrap();
    }
    let before = store_bytes(&m);
    let mut child = sh("echo x >> big", m.path());
    assert!(child.wait().unwrap().success());
    let written = store_bytes(&m) - before;
    assert!(written < 1 << 20, "{written} bytes written to append 2");
    let tail =
        m.db.read_range_cf(&ReadOptions::default(), &m.cf(), "big", 64 << 20, 10);
    assert_eq!(tail.unwrap().unwrap().bytes.as_ref(), b"x\n");
}

#[test]
fn a_large_file_moves_by_reference() {
    let Some(m) = Mount::new() else { return };
    let chunk = vec![3u8; 1 << 20];
    {
        let h = std::fs::File::create(m.path().join("from")).unwrap();
        for i in 0..32u64 {
            h.write_all_at(&chunk, i << 20).unwrap();
        }
    }
    let before = store_bytes(&m);
    std::fs::rename(m.path().join("from"), m.path().join("to")).unwrap();
    let written = store_bytes(&m) - before;
    assert!(written < 1 << 20, "{written} bytes written to move 32 MiB");
    assert_eq!(m.db.value_size_cf(&m.cf(), "to").unwrap(), Some(32 << 20));
    assert!(m.db.get_cf(&m.cf(), "from").unwrap().is_none());
}

/// A file past 4 GiB (sparse: a grown truncate, then writes near its end) reads back by range
/// from another descriptor, keeps its size, and moves by reference.
#[test]
fn a_file_past_four_gib_works() {
    let Some(m) = Mount::new() else { return };
    const SIZE: u64 = 5 << 30;
    let f = m.path().join("huge");
    {
        let h = std::fs::File::create(&f).unwrap();
        h.set_len(SIZE).unwrap();
        h.write_all_at(b"mid", 4 << 30).unwrap();
        h.write_all_at(b"end", SIZE - 3).unwrap();
        h.sync_all().unwrap();
    }
    let before = store_bytes(&m);
    std::fs::rename(&f, m.path().join("moved")).unwrap();
    assert!(store_bytes(&m) - before < 1 << 20);
    let h = std::fs::File::open(m.path().join("moved")).unwrap();
    assert_eq!(h.metadata().unwrap().len(), SIZE);
    let mut buf = [9u8; 3];
    for (at, want) in [
        (4u64 << 30, b"mid"),
        (SIZE - 3, b"end"),
        (3 << 30, &[0u8; 3]),
    ] {
        h.read_exact_at(&mut buf, at).unwrap();
        assert_eq!(&buf, want, "at {at}");
    }
    assert_eq!(m.db.value_size_cf(&m.cf(), "moved").unwrap(), Some(SIZE));
}

/// Twelve files open for writing (1000 KiB each), each below its own write-back limit: together they hold no
/// more than the mount's total, and every byte lands.
#[test]
fn files_open_for_writing_hold_at_most_the_mounts_total() {
    const TOTAL: u64 = 4 << 20;
    let config = strata_fusefs::FsConfig {
        write_back: 1 << 20,
        write_back_total: TOTAL,
        ..strata_fusefs::FsConfig::default()
    };
    let Some(m) = Mount::with(config, false) else {
        return;
    };
    let held = || m.stats.write_back_held.load(Ordering::Relaxed);
    let data = |i: usize| vec![i as u8 + 1; 1000 << 10];
    let files: Vec<std::fs::File> = (0..12)
        .map(|i| {
            let f = std::fs::File::create(m.path().join(format!("f{i}"))).unwrap();
            f.write_all_at(&data(i), 0).unwrap();
            assert!(held() <= TOTAL + (1 << 20), "{} bytes held", held());
            f
        })
        .collect();
    assert!(
        held() > 0,
        "nothing held: the writes went straight to the store"
    );
    // The idle files do not keep a new writer in write-through: when the total is reached the
    // files holding the most go to the store, and 8 MiB in 4 KiB writes takes few batches.
    let batches = || m.stats.writes.load(Ordering::Relaxed);
    let before = batches();
    let big = std::fs::File::create(m.path().join("big")).unwrap();
    for i in 0..2048u64 {
        big.write_all_at(&[7u8; 4096], i * 4096).unwrap();
    }
    let taken = batches() - before;
    assert!(taken < 40, "{taken} batches for 8 MiB");
    drop(big);
    drop(files);
    assert_eq!(held(), 0);
    for i in 0..12 {
        assert!(std::fs::read(m.path().join(format!("f{i}"))).unwrap() == data(i));
    }
}

#[test]
fn an_unlinked_file_stays_usable_through_its_open_descriptor() {
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("gone");
    std::fs::write(&f, b"before").unwrap();
    let h = OpenOptions::new().read(true).write(true).open(&f).unwrap();
    std::fs::remove_file(&f).unwrap();
    assert!(!f.exists());
    assert!(m.db.get_cf(&m.cf(), "gone").unwrap().is_none());
    h.write_all_at(b"+after", 6).unwrap();
    let mut got = [0; 12];
    h.read_exact_at(&mut got, 0).unwrap();
    assert_eq!(&got, b"before+after");
    // A new file of the same name is another file.
    std::fs::write(&f, b"new").unwrap();
    h.read_exact_at(&mut got, 0).unwrap();
    assert_eq!(&got, b"before+after");
    drop(h);
    assert_eq!(std::fs::read(&f).unwrap(), b"new");
    // Its data is reclaimed once the kernel forgets the inode, right after the last close: no
    // key but the new file's is left.
    assert_eq!(keys_once_forgotten(&m, 1), [b"gone".to_vec()]);
}

/// The data column family's keys, once there are at most `left` (bounded wait: the kernel
/// forgets an unlinked inode just after its last reference goes).
fn keys_once_forgotten(m: &Mount, left: usize) -> Vec<Vec<u8>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let keys = m.keys();
        if keys.len() <= left || std::time::Instant::now() > deadline {
            return keys;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A file the kernel still holds (an `O_PATH` descriptor) with no descriptor open on it is
/// renamed over, then opened again through /proc/self/fd: as on ext4 it opens with its bytes,
/// where the mount used to answer ESTALE.
#[test]
fn a_held_inode_opens_after_its_name_is_gone() {
    use std::os::fd::AsRawFd;
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("held");
    std::fs::write(&f, b"old bytes").unwrap();
    let held = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(&f)
        .unwrap();
    std::fs::write(m.path().join("new"), b"new").unwrap();
    std::fs::rename(m.path().join("new"), &f).unwrap();
    let through = format!("/proc/self/fd/{}", held.as_raw_fd());
    assert_eq!(std::fs::read(&through).unwrap(), b"old bytes");
    assert_eq!(std::fs::read(&f).unwrap(), b"new");
    drop(held);
    assert_eq!(keys_once_forgotten(&m, 1), [b"held".to_vec()]);
}

/// Removed files keep their bytes only until the kernel forgets them: after `rm` of many files
/// and renames over others, nothing is left behind.
#[test]
fn removed_files_leave_nothing_behind() {
    let Some(m) = Mount::new() else { return };
    for i in 0..200 {
        std::fs::write(m.path().join(format!("f{i}")), vec![i as u8; 5000]).unwrap();
    }
    for i in 0..100 {
        std::fs::rename(
            m.path().join(format!("f{i}")),
            m.path().join(format!("f{}", i + 100)),
        )
        .unwrap();
    }
    for i in 100..200 {
        std::fs::remove_file(m.path().join(format!("f{i}"))).unwrap();
    }
    assert_eq!(keys_once_forgotten(&m, 0), Vec::<Vec<u8>>::new());
}

#[test]
fn a_file_renamed_over_stays_usable_through_its_open_descriptor() {
    let Some(m) = Mount::new() else { return };
    let (a, b) = (m.path().join("a"), m.path().join("b"));
    std::fs::write(&a, b"old").unwrap();
    std::fs::write(&b, b"replacement").unwrap();
    let h = OpenOptions::new().read(true).open(&a).unwrap();
    std::fs::rename(&b, &a).unwrap();
    let mut got = [0; 3];
    h.read_exact_at(&mut got, 0).unwrap();
    assert_eq!(&got, b"old");
    assert_eq!(std::fs::read(&a).unwrap(), b"replacement");
}

/// A directory renamed away again and again while another door puts keys into it: every key
/// whose put was acknowledged is found afterwards, moved with a rename or left where it landed.
#[test]
fn a_directory_rename_never_loses_another_doors_write() {
    let Some(m) = Mount::new() else { return };
    std::fs::create_dir(m.path().join("d")).unwrap();
    for i in 0..200 {
        std::fs::write(m.path().join(format!("d/seed{i}")), b"s").unwrap();
    }
    let stop = AtomicBool::new(false);
    let acked = AtomicU64::new(0);
    let renames = std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let sync = WriteOptions {
                    sync: i.is_multiple_of(8),
                    ..WriteOptions::default()
                };
                let key = format!("d/put{i:06}");
                let mut batch = strata_engine::WriteBatch::new();
                batch.put_cf(&m.cf(), &key, b"p");
                m.db.write(batch, &sync).unwrap();
                // As the REST door does: the kernel forgets what it knew of the key.
                m.invalidator.key_changed(key.as_bytes());
                acked.store(i + 1, Ordering::Relaxed);
                i += 1;
            }
        });
        let mut n = 0;
        for round in 0..100 {
            // `d` is gone after a rename until the next put brings it back.
            match std::fs::rename(m.path().join("d"), m.path().join(format!("moved{round}"))) {
                Ok(()) => n += 1,
                Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}"),
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        stop.store(true, Ordering::Relaxed);
        n
    });
    assert!(renames > 1, "{renames} renames");
    let mut names = std::collections::HashSet::new();
    for key in m.keys() {
        let key = String::from_utf8(key).unwrap();
        let (_, name) = key.split_once('/').unwrap();
        assert!(names.insert(name.to_string()), "{name} twice");
    }
    for i in 0..acked.load(Ordering::Relaxed) {
        let name = format!("put{i:06}");
        assert!(names.contains(&name), "{name} was acknowledged and is gone");
    }
    for i in 0..200 {
        assert!(names.contains(&format!("seed{i}")));
    }
}

#[test]
fn a_key_deleted_by_another_door_takes_its_record_with_it() {
    use std::os::unix::fs::PermissionsExt;
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("kept");
    std::fs::write(&f, b"x").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    // As REST's DELETE and `strata delete` do.
    let mut batch = strata_engine::WriteBatch::new();
    strata_fusefs::delete_with_metadata(&m.db, &mut batch, &m.cf(), b"kept");
    m.db.write(batch, &WriteOptions::default()).unwrap();
    m.db.put_cf(&m.cf(), "kept", b"again").unwrap();
    m.invalidator.key_changed(b"kept");
    let mode = std::fs::metadata(&f).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644, "{mode:o}");
}

fn set_xattr(path: &std::path::Path, name: &str, value: &[u8]) -> i32 {
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: both strings are NUL-terminated and `value` is valid for its length.
    let r = unsafe {
        libc::setxattr(
            p.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    }
}

#[test]
fn extended_attributes_keep_within_ext4s_limits() {
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("attrs");
    std::fs::write(&f, b"x").unwrap();
    assert_eq!(set_xattr(&f, "user.big", &vec![1; 64 << 10]), 0);
    assert_eq!(set_xattr(&f, "user.big2", &vec![1; 64 << 10]), libc::ENOSPC);
    assert_eq!(set_xattr(&f, "user.big", &vec![1; 1 << 10]), 0);
    // Many names: the list always fits the kernel's 64 KiB.
    let mut refused = 0;
    for i in 0..2000 {
        let name = format!("user.{i:0>200}");
        match set_xattr(&f, &name, b"") {
            0 => {}
            e => {
                assert_eq!(e, libc::ENOSPC);
                refused += 1;
            }
        }
    }
    assert!(refused > 0);
    let p = std::ffi::CString::new(f.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and no buffer: listxattr answers the size.
    let len = unsafe { libc::listxattr(p.as_ptr(), std::ptr::null_mut(), 0) };
    assert!(len > 0 && len <= 64 << 10, "{len}");
}

/// Writes that bypass the kernel's page cache (appending and write-only descriptors) make only
/// the pages they changed stale: a reader never sees cached bytes from before them, and the
/// rest of the file stays cached.
#[test]
fn uncached_writes_leave_no_stale_page_behind() {
    use std::io::Write;
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("cached");
    std::fs::write(&f, vec![b'a'; 5000]).unwrap();
    for round in 0..3u8 {
        // Fills the kernel's cache, the last page only partly.
        let before = std::fs::read(&f).unwrap();
        let mut appender = OpenOptions::new().append(true).open(&f).unwrap();
        appender.write_all(&[b'X' + round; 3]).unwrap();
        drop(appender);
        let writer = OpenOptions::new().write(true).open(&f).unwrap();
        writer.write_all_at(&[b'B' + round; 3], 100).unwrap();
        drop(writer);
        let mut want = before.clone();
        want.extend_from_slice(&[b'X' + round; 3]);
        want[100..103].copy_from_slice(&[b'B' + round; 3]);
        assert_eq!(std::fs::read(&f).unwrap(), want, "round {round}");
    }
}

/// The length pending writes give a file is what every path to it shows: another process's
/// `stat` after the attribute TTL, and so the writer's own end of file.
#[test]
fn pending_writes_give_the_length_every_lookup_shows() {
    use std::io::{Seek, SeekFrom, Write};
    // A short TTL, so that the `stat` below asks the mount, not the kernel's cache.
    let ttl = std::time::Duration::from_millis(300);
    let Some(m) = Mount::with(
        strata_fusefs::FsConfig {
            ttl,
            ..strata_fusefs::FsConfig::default()
        },
        false,
    ) else {
        return;
    };
    let f = m.path().join("growing");
    let mut h = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&f)
        .unwrap();
    h.write_all(&[b'A'; 1000]).unwrap();
    std::thread::sleep(ttl + std::time::Duration::from_millis(200));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 1000);
    let names: Vec<_> = std::fs::read_dir(m.path()).unwrap().collect();
    assert_eq!(names.len(), 1);
    assert_eq!(h.seek(SeekFrom::End(0)).unwrap(), 1000);
    h.write_all(&[b'B'; 10]).unwrap();
    drop(h);
    let got = std::fs::read(&f).unwrap();
    assert_eq!(got.len(), 1010);
    assert!(got[..1000].iter().all(|&b| b == b'A'));
}

#[test]
fn a_refused_truncate_keeps_the_pending_writes() {
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("kept");
    let h = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&f)
        .unwrap();
    h.write_all_at(b"hello world", 0).unwrap();
    let e = h.set_len(strata_engine::MAX_VALUE_SIZE + 1).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EFBIG));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 11);
    drop(h);
    assert_eq!(std::fs::read(&f).unwrap(), b"hello world");
}

/// A record rewritten in place thousands of times (a database's header page) is held once
/// and stored once per flush.
#[test]
fn rewriting_one_place_costs_what_it_changes() {
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("header");
    std::fs::write(&f, vec![0u8; 4000]).unwrap();
    let before = store_bytes(&m);
    let h = OpenOptions::new().write(true).open(&f).unwrap();
    for i in 0..10_000u64 {
        h.write_all_at(&i.to_le_bytes(), 0).unwrap();
    }
    drop(h);
    let written = store_bytes(&m) - before;
    assert!(
        written < 1 << 20,
        "{written} bytes stored for 10,000 rewrites of 8 bytes"
    );
    let got = std::fs::read(&f).unwrap();
    assert_eq!(&got[..8], &9_999u64.to_le_bytes());
}

/// A file replaced by rename again and again (an editor's save, a config written atomically)
/// is there for readers: an open never finds it missing. (One that resolved the name just
/// before a replacement gets `ESTALE` from the old inode, which the kernel answers by looking
/// the name up again; only a second replacement inside that retry reaches the caller, which
/// this tight loop does now and then. A local file system keeps the old inode readable.)
#[test]
fn a_file_replaced_by_rename_is_never_missing() {
    let Some(m) = Mount::new() else { return };
    let (tmp, cfg) = (m.path().join("cfg.tmp"), m.path().join("cfg"));
    std::fs::write(&cfg, b"v0").unwrap();
    let stop = AtomicBool::new(false);
    let (stale, missing) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    match std::fs::read(&cfg) {
                        Ok(_) => {}
                        Err(e) if e.raw_os_error() == Some(libc::ESTALE) => {
                            stale.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            eprintln!("{e}");
                            missing.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        for i in 0..1500 {
            std::fs::write(&tmp, format!("v{i}")).unwrap();
            std::fs::rename(&tmp, &cfg).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    // As on ext4: an open that found the old inode opens it (its bytes stay until the kernel
    // forgets it), never ESTALE.
    assert_eq!(stale.load(Ordering::Relaxed), 0);
    assert_eq!(missing.load(Ordering::Relaxed), 0);
}

/// `O_APPEND` is the descriptor's flag at each write: cleared with `fcntl`, writes land where
/// they are put.
#[test]
fn append_follows_fcntl() {
    use std::os::fd::AsRawFd;
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("flags");
    std::fs::write(&f, b"abcdef").unwrap();
    let h = OpenOptions::new().append(true).open(&f).unwrap();
    // SAFETY: F_SETFL on a descriptor we own, with no pointer.
    assert_eq!(unsafe { libc::fcntl(h.as_raw_fd(), libc::F_SETFL, 0) }, 0);
    h.write_all_at(b"XY", 0).unwrap();
    drop(h);
    assert_eq!(std::fs::read(&f).unwrap(), b"XYcdef");
}
