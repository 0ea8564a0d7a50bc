//! `strata serve` for real, over loopback: the API and the mount are live views of one store,
//! and SIGTERM stops both cleanly with nothing lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::{stdout, strata};

/// One HTTP/1.1 request; the status and body of the answer.
fn http(addr: SocketAddr, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    (status, body)
}

fn path_key(k: &str) -> String {
    strata_admin_api::codec::encode_path_key(k.as_bytes())
}

/// Whether this machine can mount; under `CI` it must.
fn fuse_required() -> bool {
    let mount = strata_fusefs::check_fuse().is_ok();
    if !mount {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but FUSE is missing"
        );
    }
    mount
}

/// A running `strata serve` on loopback, with its store and (when asked) its mount.
struct Served {
    child: std::process::Child,
    addr: SocketAddr,
    token: String,
    db: std::path::PathBuf,
    mnt: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start(mount: bool) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let (db, mnt) = (dir.path().join("db"), dir.path().join("mnt"));
        std::fs::create_dir(&mnt).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
        cmd.arg("--db")
            .arg(&db)
            .args(["serve", "--listen", "127.0.0.1:0"]);
        if mount {
            cmd.arg("--mount").arg(&mnt);
        }
        let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let addr: SocketAddr = first
            .split("http://")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        let token = std::fs::read_to_string(db.join("serve.token")).unwrap();
        // Not a terminal: the console's link carries no token into a log.
        assert_eq!(
            lines.next().unwrap().unwrap(),
            format!("console: http://{addr}/")
        );
        Served {
            child,
            addr,
            token,
            db,
            mnt,
            _dir: dir,
        }
    }

    /// What the server logged (its stderr) so far.
    fn log(&self) -> String {
        let dir = self.db.parent().unwrap();
        std::fs::read_to_string(dir.join("serve.log")).unwrap()
    }

    fn terminate(&self) {
        // SAFETY: kill sends a signal to our own child, whose pid is valid until we wait on it.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
    }
}

impl Drop for Served {
    /// A failed test leaves no server or mount behind.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = strata_fusefs::unmount(&self.mnt, true);
        }
    }
}

/// A closed stdout (a script that read the address and went, `strata serve | head -1`) never
/// stops the server: printing its address once panicked on the broken pipe and ended it.
#[test]
fn serve_goes_on_serving_when_its_stdout_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // A pipe whose reading end is closed before the server writes a byte.
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: fds[0] is the reading end just made, closed once; fds[1] is handed to `Stdio`,
    // which owns and closes it.
    let write_end = unsafe {
        libc::close(fds[0]);
        <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fds[1])
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    let healthy = loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("strata serve ended ({status}) with its stdout closed");
        }
        if TcpStream::connect(addr).is_ok() {
            let token = std::fs::read_to_string(db.join("serve.token")).unwrap();
            break http(addr, "GET", "/api/v1/stats", &token, "").0;
        }
        assert!(std::time::Instant::now() < give_up, "never listened");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(healthy, 200);
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "strata serve ended");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn serve_shares_one_store_between_the_api_and_the_mount_and_stops_cleanly() {
    let mount = fuse_required();
    let mut served = Served::start(mount);
    let (addr, token, db, mnt) = (
        served.addr,
        served.token.clone(),
        served.db.clone(),
        served.mnt.clone(),
    );

    let put = format!("/api/v1/kv/{}?sync=1", path_key("docs/a.md"));
    let text = r#"{"value":"from the api","encoding":"utf8"}"#;
    assert_eq!(http(addr, "PUT", &put, &token, text).0, 204);
    assert_eq!(http(addr, "GET", &put, "wrong-token", "").0, 401);
    if mount {
        assert_eq!(
            std::fs::read_to_string(mnt.join("docs/a.md")).unwrap(),
            "from the api"
        );
        std::fs::write(mnt.join("docs/b.md"), "from the mount").unwrap();
        let get = format!("/api/v1/kv/{}?encoding=utf8", path_key("docs/b.md"));
        let (status, body) = http(addr, "GET", &get, &token, "");
        assert_eq!(status, 200);
        assert!(body.contains("from the mount"), "{body}");
        // A subtree deleted through the API vanishes from the mount at once.
        let range = r#"{"start":"ZG9jcy8=","end":"ZG9jczA="}"#;
        assert_eq!(
            http(addr, "POST", "/api/v1/kv:deleteRange", &token, range).0,
            200
        );
        assert!(
            !Path::new(&mnt.join("docs")).exists(),
            "docs/ still in the mount"
        );
        assert!(Path::new(&mnt).read_dir().unwrap().next().is_none());
        let put_again = format!("/api/v1/kv/{}?sync=1", path_key("docs/a.md"));
        let kept = r#"{"value":"kept","encoding":"utf8"}"#;
        http(addr, "PUT", &put_again, &token, kept);
    }
    // A file held open and written, not closed, when the stop comes.
    let held = mount.then(|| {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(mnt.join("held")).unwrap();
        f.write_all_at(b"before the stop;", 0).unwrap();
        f
    });
    // SIGTERM: store open files, unmount (lazily while one is open), close, exit 0; every
    // acknowledged write is there afterwards.
    served.terminate();
    if let Some(f) = held {
        use std::os::unix::fs::FileExt;
        let start = std::time::Instant::now();
        while strata_fusefs::is_mounted(&mnt) {
            assert!(start.elapsed().as_secs() < 30, "still mounted");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(
            served.child.try_wait().unwrap().is_none(),
            "closed under an open file"
        );
        f.write_all_at(b"after it", 16).unwrap();
    }
    let status = served.child.wait().unwrap();
    assert!(status.success(), "{status}:\n{}", served.log());
    // Every mutation is logged, and the lines are all out once serve has exited.
    let log = served.log();
    assert!(log.contains("put docs/a.md (12 bytes)"), "{log}");
    if mount {
        assert!(log.contains("deleteRange [docs/, docs0)"), "{log}");
        assert!(log.contains("put docs/a.md (4 bytes)"), "{log}");
    }
    let want = if mount { "kept\n" } else { "from the api\n" };
    assert_eq!(stdout(&strata(&db, &["get", "docs/a.md"])), want);
    if mount {
        assert_eq!(
            stdout(&strata(&db, &["get", "held"])),
            "before the stop;after it\n"
        );
    }
}

/// Directories renamed through the mount while two clients PUT keys under them with `sync=1`:
/// every acknowledged key is afterwards under the old name or the new one, with its value.
#[test]
fn a_rename_through_the_mount_never_loses_a_rest_write() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    if !fuse_required() {
        return;
    }
    let mut served = Served::start(true);
    let (addr, token, mnt) = (served.addr, served.token.as_str(), served.mnt.as_path());
    const ROUNDS: usize = 8;
    const FILES: usize = 1500;
    let round = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let acked = Mutex::new(Vec::<String>::new());
    let mut renamed = Vec::new();
    std::thread::scope(|s| {
        for client in 0..2 {
            let (round, stop, acked) = (&round, &stop, &acked);
            s.spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("src{}/put-{client}-{i}", round.load(Ordering::Relaxed));
                    let put = format!("/api/v1/kv/{}?sync=1", path_key(&key));
                    let body = format!(r#"{{"value":"{key}","encoding":"utf8"}}"#);
                    let (status, answer) = http(addr, "PUT", &put, token, &body);
                    assert_eq!(status, 204, "{key}: {answer}");
                    acked.lock().unwrap().push(key);
                    i += 1;
                }
            });
        }
        for r in 0..ROUNDS {
            let src = mnt.join(format!("src{r}"));
            std::fs::create_dir_all(&src).unwrap();
            for f in 0..FILES {
                std::fs::write(src.join(format!("seed{f}")), b"s").unwrap();
            }
            round.store(r, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(20));
            let start = std::time::Instant::now();
            std::fs::rename(&src, mnt.join(format!("dst{r}"))).unwrap();
            renamed.push(start.elapsed());
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let acked = acked.into_inner().unwrap();
    let moved = acked
        .iter()
        .filter(|key| {
            let (dir, name) = key.split_once('/').unwrap();
            let to = mnt.join(dir.replace("src", "dst")).join(name);
            let read = std::fs::read_to_string(mnt.join(key))
                .or_else(|_| std::fs::read_to_string(&to))
                .unwrap_or_else(|e| panic!("{key} was acknowledged and is gone: {e}"));
            assert_eq!(&read, *key);
            to.exists()
        })
        .count();
    for r in 0..ROUNDS {
        let dst = mnt.join(format!("dst{r}"));
        for f in 0..FILES {
            assert!(dst.join(format!("seed{f}")).exists(), "dst{r}/seed{f}");
        }
    }
    eprintln!(
        "{} acknowledged PUTs, {moved} of them moved by renames taking {renamed:?}",
        acked.len()
    );
    assert!(acked.len() > 100, "{} PUTs", acked.len());
    served.terminate();
    assert!(served.child.wait().unwrap().success());
}

#[test]
fn a_mixed_load_from_32_connections_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let secs = std::env::var("STRATA_LOAD_SECS").unwrap_or_else(|_| "30".into());
    let out = strata(
        &dir.path().join("db"),
        &[
            "api-bench",
            "--mixed-only",
            "--connections",
            "32",
            "--secs",
            &secs,
        ],
    );
    let text = stdout(&out);
    assert!(
        text.contains("every acknowledged write read back"),
        "{text}"
    );
    let checked: u64 = text
        .lines()
        .find_map(|l| l.split('(').nth(1)?.split(' ').next()?.parse().ok())
        .unwrap();
    assert!(checked > 100, "{text}");
}

/// A token file that is empty (a first start on a full disk, a user "rotating" it with `: >`),
/// too short, or readable by other users stops `strata serve` before it listens, saying which
/// file and how to fix it; nothing is served without a real token.
#[test]
fn serve_refuses_an_empty_short_or_shared_token_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    assert!(strata(&db, &["put", "k", "v"]).status.success());
    let token = db.join("serve.token");
    let own = dir.path().join("own.token");
    for (file, text, mode, says) in [
        (&token, "", 0o600, "is empty"),
        (&token, "tooshort", 0o600, "fewer than 16"),
        (&token, "0123456789abcdef", 0o644, "chmod 600"),
        (&own, "", 0o600, "is empty"),
        (&own, "0123456789abcdef", 0o640, "chmod 600"),
    ] {
        std::fs::write(file, text).unwrap();
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode)).unwrap();
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        let own_path = own.to_str().unwrap();
        if file == &own {
            args.extend(["--token-file", own_path]);
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--db")
            .arg(&db)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A server that started would never exit: give it ten seconds, then fail.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("{text:?} {mode:o}: strata serve started");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text:?} {mode:o}: served");
        assert!(err.contains(says), "{text:?} {mode:o}: {err}");
        assert!(err.contains(&*file.to_string_lossy()), "{err}");
        std::fs::remove_file(file).unwrap();
    }
}
