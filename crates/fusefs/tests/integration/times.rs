//! POSIX times: a directory's mtime and ctime move with every change of its entries, an entry's
//! ctime with every change of its attributes, and `cp -p` keeps times whatever the file's size.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::common::{Mount, starting_processes};

/// (mtime, ctime) in nanoseconds.
fn times(p: &Path) -> (i128, i128) {
    let m = std::fs::symlink_metadata(p).unwrap();
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    (ns(m.mtime(), m.mtime_nsec()), ns(m.ctime(), m.ctime_nsec()))
}

/// Runs `change` and checks that it moved both times of every one of `dirs`.
fn moves_times(what: &str, dirs: &[&Path], change: impl FnOnce()) {
    let before: Vec<_> = dirs.iter().map(|d| times(d)).collect();
    std::thread::sleep(Duration::from_millis(15));
    change();
    for (d, (m0, c0)) in dirs.iter().zip(before) {
        let (m1, c1) = times(d);
        assert!(m1 > m0, "{what}: mtime of {} stayed", d.display());
        assert!(c1 > c0, "{what}: ctime of {} stayed", d.display());
    }
}

/// Runs `change` and checks that it moved `p`'s ctime.
fn moves_ctime(what: &str, p: &Path, change: impl FnOnce()) {
    let (_, c0) = times(p);
    std::thread::sleep(Duration::from_millis(15));
    change();
    assert!(times(p).1 > c0, "{what}: ctime of {} stayed", p.display());
}

#[test]
fn a_directory_s_times_move_with_its_entries() {
    let Some(m) = Mount::new() else { return };
    let (a, b) = (m.path().join("a"), m.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    moves_times("create", &[&a], || {
        std::fs::write(a.join("f"), b"x").unwrap()
    });
    moves_times("mkdir", &[&a], || {
        std::fs::create_dir(a.join("sub")).unwrap()
    });
    moves_times("symlink", &[&a], || {
        std::os::unix::fs::symlink("f", a.join("l")).unwrap()
    });
    moves_times("mknod", &[&a], || {
        let p = std::ffi::CString::new(a.join("fifo").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(p.as_ptr(), 0o644) }, 0);
    });
    moves_times("rename", &[&a, &b], || {
        std::fs::rename(a.join("f"), b.join("f")).unwrap()
    });
    moves_times("unlink", &[&b], || {
        std::fs::remove_file(b.join("f")).unwrap()
    });
    moves_times("rmdir", &[&a], || {
        std::fs::remove_dir(a.join("sub")).unwrap()
    });
    moves_times("create at the root", &[m.path()], || {
        std::fs::write(m.path().join("top"), b"x").unwrap()
    });
}

#[test]
fn an_entry_s_ctime_moves_with_its_attributes() {
    use std::os::unix::fs::PermissionsExt;
    let Some(m) = Mount::new() else { return };
    let f = m.path().join("f");
    std::fs::write(&f, b"0123456789").unwrap();
    moves_ctime("chmod", &f, || {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap()
    });
    moves_ctime("chown", &f, || {
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        std::os::unix::fs::chown(&f, Some(uid), Some(gid)).unwrap()
    });
    moves_ctime("truncate", &f, || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .unwrap()
            .set_len(3)
            .unwrap()
    });
    let p = std::ffi::CString::new(f.as_os_str().as_encoded_bytes()).unwrap();
    moves_ctime("setxattr", &f, || {
        // SAFETY: NUL-terminated strings and a 1-byte value.
        let r =
            unsafe { libc::setxattr(p.as_ptr(), c"user.a".as_ptr(), c"1".as_ptr().cast(), 1, 0) };
        assert_eq!(r, 0);
    });
    moves_ctime("removexattr", &f, || {
        // SAFETY: NUL-terminated strings.
        let r = unsafe { libc::removexattr(p.as_ptr(), c"user.a".as_ptr()) };
        assert_eq!(r, 0);
    });
    let g = m.path().join("g");
    moves_ctime("rename", &f, || {
        std::fs::rename(&f, &g).unwrap();
        std::fs::hard_link(&g, &f).unwrap_err();
        std::fs::rename(&g, &f).unwrap();
    });
}

#[test]
fn cp_p_keeps_times_for_files_of_every_size() {
    let Some(m) = Mount::new() else { return };
    let old = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    for (name, len) in [("small", 10usize), ("large", 9 << 20)] {
        let src = m.path().join(format!("{name}.src"));
        std::fs::write(&src, vec![7u8; len]).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&src)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let dst = m.path().join(format!("{name}.dst"));
        let out = {
            let _starting = starting_processes();
            std::process::Command::new("cp")
                .arg("-p")
                .arg(&src)
                .arg(&dst)
                .output()
                .unwrap()
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = std::fs::metadata(&dst).unwrap().modified().unwrap();
        assert_eq!(got, old, "{name}");
        assert_eq!(std::fs::read(&dst).unwrap().len(), len);
    }
}
