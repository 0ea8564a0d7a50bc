//! File operations applied alike to a plain directory and to the mount, with their outcome.

#![allow(clippy::unwrap_used)]

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;

#[derive(Debug, Clone)]
pub enum Op {
    Create(String, Vec<u8>),
    Append(String, Vec<u8>),
    WriteAt(String, u64, Vec<u8>),
    Truncate(String, u64),
    Read(String),
    Rename(String, String),
    RenameNoReplace(String, String),
    Exchange(String, String),
    Unlink(String),
    Mkdir(String),
    Rmdir(String),
    Symlink(String, String),
    Readlink(String),
    Mkfifo(String),
    Chmod(String, u32),
    SetXattr(String, String, Vec<u8>),
    GetXattr(String, String),
    RemoveXattr(String, String),
    HardLink(String, String),
}

/// The outcome two trees must agree on: what was read, or the errno.
pub type Outcome = Result<Option<Vec<u8>>, i32>;

fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn check(rc: libc::c_int) -> Result<(), i32> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1))
    }
}

fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> Result<(), i32> {
    let (a, b) = (cstr(from), cstr(to));
    // SAFETY: both paths are NUL-terminated C strings that outlive the call.
    check(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            flags,
        )
    })
}

pub fn apply(root: &Path, op: &Op) -> Outcome {
    let p = |s: &str| root.join(s);
    let none = |r: std::io::Result<()>| r.map(|()| None).map_err(errno);
    match op {
        Op::Create(f, bytes) => none(std::fs::write(p(f), bytes)),
        Op::Append(f, bytes) => none(
            OpenOptions::new()
                .append(true)
                .open(p(f))
                .and_then(|mut h| h.write_all(bytes)),
        ),
        Op::WriteAt(f, off, bytes) => none(
            OpenOptions::new()
                .write(true)
                .open(p(f))
                .and_then(|h| h.write_all_at(bytes, *off)),
        ),
        Op::Truncate(f, len) => none(
            OpenOptions::new()
                .write(true)
                .open(p(f))
                .and_then(|h| h.set_len(*len)),
        ),
        Op::Read(f) => std::fs::read(p(f)).map(Some).map_err(errno),
        Op::Rename(a, b) => none(std::fs::rename(p(a), p(b))),
        Op::RenameNoReplace(a, b) => renameat2(&p(a), &p(b), libc::RENAME_NOREPLACE).map(|()| None),
        Op::Exchange(a, b) => renameat2(&p(a), &p(b), libc::RENAME_EXCHANGE).map(|()| None),
        Op::Unlink(f) => none(std::fs::remove_file(p(f))),
        Op::Mkdir(d) => none(std::fs::create_dir(p(d))),
        Op::Rmdir(d) => none(std::fs::remove_dir(p(d))),
        Op::Symlink(target, l) => none(std::os::unix::fs::symlink(target, p(l))),
        Op::Readlink(l) => std::fs::read_link(p(l))
            .map(|t| Some(t.as_os_str().as_bytes().to_vec()))
            .map_err(errno),
        Op::Mkfifo(f) => {
            let c = cstr(&p(f));
            // SAFETY: `c` is a NUL-terminated path that outlives the call.
            check(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }).map(|()| None)
        }
        Op::Chmod(f, mode) => none(std::fs::set_permissions(
            p(f),
            std::fs::Permissions::from_mode(*mode),
        )),
        Op::SetXattr(f, name, value) => {
            let (c, n) = (cstr(&p(f)), CString::new(name.as_str()).unwrap());
            // SAFETY: path and name are NUL-terminated; `value` is valid for its length.
            check(unsafe {
                libc::lsetxattr(
                    c.as_ptr(),
                    n.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    0,
                )
            })
            .map(|()| None)
        }
        Op::RemoveXattr(f, name) => {
            let (c, n) = (cstr(&p(f)), CString::new(name.as_str()).unwrap());
            // SAFETY: path and name are NUL-terminated and outlive the call.
            check(unsafe { libc::lremovexattr(c.as_ptr(), n.as_ptr()) }).map(|()| None)
        }
        Op::GetXattr(f, name) => {
            let (c, n) = (cstr(&p(f)), CString::new(name.as_str()).unwrap());
            let mut buf = vec![0u8; 4096];
            // SAFETY: path and name are NUL-terminated; `buf` is valid for its length.
            let len = unsafe {
                libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
            };
            if len < 0 {
                Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1))
            } else {
                buf.truncate(len as usize);
                Ok(Some(buf))
            }
        }
        Op::HardLink(a, b) => none(std::fs::hard_link(p(a), p(b))),
    }
}

/// Errnos POSIX lets two file systems choose between for the same failure.
pub fn same_failure(a: i32, b: i32) -> bool {
    let norm = |e: i32| {
        if e == libc::EEXIST {
            libc::ENOTEMPTY
        } else {
            e
        }
    };
    norm(a) == norm(b)
}
