//! The harness of the end-to-end scenarios: the real `strata` binary on a temp store, a running
//! `strata serve` (optionally mounted) spoken to over loopback HTTP, and the mount's files.
//!
//! The binary is the one `cargo test --workspace` builds beside these tests (or `$STRATA_BIN`).
//! FUSE, `wac` and `wasmtime` are required when `CI` is set; elsewhere a scenario that needs one
//! says so and stops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use base64::Engine as _;

/// Cargo's build directory of this test run, TARGET/debug: the test runs from its `deps`.
pub fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// The `strata` binary under test.
pub fn strata_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("STRATA_BIN") {
        return bin.into();
    }
    let bin = build_dir().join("strata");
    assert!(
        bin.exists(),
        "{} is missing: build it (cargo build -p strata-cli) or set STRATA_BIN",
        bin.display()
    );
    bin
}

/// Runs `strata --db DB ARGS...` to completion.
pub fn strata(db: &Path, args: &[&str]) -> Output {
    Command::new(strata_bin())
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

/// Its stdout, after checking that it succeeded.
pub fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {}; stderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Whether FUSE mounts work here (`strata_fusefs::check_fuse`). Under `CI` they must.
pub fn fuse_usable() -> bool {
    let Err(missing) = strata_fusefs::check_fuse() else {
        return true;
    };
    assert!(std::env::var_os("CI").is_none(), "CI is set but {missing}");
    eprintln!("this scenario needs FUSE: {missing}");
    false
}

/// A tool `make deps` installs into `$STRATA_TOOLS` (`wac`, `wasmtime`), else found on `PATH`.
/// Under `CI` it must be there.
pub fn tool(name: &str) -> Option<PathBuf> {
    let tools = std::env::var_os("STRATA_TOOLS").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            Path::new(&home).join(".cache/strata/tools")
        },
        PathBuf::from,
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::iter::once(tools.join("bin"))
        .chain(std::env::split_paths(&path))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file());
    if found.is_none() {
        let missing = format!(
            "{name} is not installed (make deps puts it in {})",
            tools.display()
        );
        assert!(std::env::var_os("CI").is_none(), "CI is set but {missing}");
        eprintln!("this scenario needs {name}: {missing}");
    }
    found
}

/// A key as the API's paths carry it: base64url without padding.
pub fn path_key(key: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

/// A key or value as the API's JSON carries it: base64.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One answer of the API.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
    /// The sequence a change is visible at (`Strata-Sequence`), when the answer has one.
    pub sequence: Option<u64>,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }
}

/// A running `strata serve` on a store, on a free loopback port, optionally mounted.
#[derive(Debug)]
pub struct Serve {
    child: std::sync::Mutex<Option<Child>>,
    pub addr: SocketAddr,
    pub token: String,
    pub db: PathBuf,
    pub mount: Option<PathBuf>,
    agent: ureq::Agent,
}

impl Serve {
    /// Starts `strata --db DB serve [--mount MNT] EXTRA...` and waits for the address it prints.
    pub fn start(db: &Path, mount: Option<&Path>, extra: &[&str]) -> Serve {
        let db_arg = db.to_str().expect("a UTF-8 path");
        Self::start_on(&["--db", db_arg], db, mount, extra, &[])
    }

    /// `start` without a mount, with `env` set (the `AWS_*` credentials of a backup bucket).
    pub fn start_with_env(db: &Path, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let db_arg = db.to_str().expect("a UTF-8 path");
        Self::start_on(&["--db", db_arg], db, None, extra, env)
    }

    /// Starts `strata --db URL --cache-dir DIR serve EXTRA...` on a store in a bucket, with
    /// `env` (the `AWS_*` credentials) set.
    pub fn start_bucket(
        url: &str,
        cache_dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Serve {
        Self::start_remote("--db", url, cache_dir, None, extra, env)
    }

    /// Starts `strata serve --replica-of URL --cache-dir DIR [--mount MNT] EXTRA...`: a replica
    /// of the store in a bucket.
    pub fn start_replica(
        url: &str,
        cache_dir: &Path,
        mount: Option<&Path>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Serve {
        Self::start_remote("--replica-of", url, cache_dir, mount, extra, env)
    }

    /// `serve FLAG URL --cache-dir DIR [--mount MNT] EXTRA...`.
    fn start_remote(
        flag: &str,
        url: &str,
        cache_dir: &Path,
        mount: Option<&Path>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Serve {
        let mut args = vec!["--cache-dir", cache_dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        Self::start_on(&[flag, url], cache_dir, mount, &args, env)
    }

    /// `serve STORE_ARGS...` (`--db X` or `--replica-of URL`), whose working directory (the
    /// token's home) is `dir`.
    fn start_on(
        store_args: &[&str],
        dir: &Path,
        mount: Option<&Path>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Serve {
        let db = dir;
        let mut cmd = Command::new(strata_bin());
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .args(store_args)
            .args(extra)
            .envs(env.iter().copied());
        if let Some(m) = mount {
            std::fs::create_dir_all(m).unwrap();
            cmd.arg("--mount").arg(m);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines
            .next()
            .expect("serve printed nothing")
            .expect("serve's output");
        let addr: SocketAddr = first
            .split("http://")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.trim_end_matches('/').parse().ok())
            .unwrap_or_else(|| panic!("no address in {first:?}"));
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        let token = std::fs::read_to_string(db.join("serve.token"))
            .unwrap()
            .trim()
            .to_string();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Serve {
            child: std::sync::Mutex::new(Some(child)),
            addr,
            token,
            db: db.to_path_buf(),
            mount: mount.map(Path::to_path_buf),
            agent,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn answer(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Reply, String> {
        let mut r = r.map_err(|e| e.to_string())?;
        let content_type = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let sequence = r
            .headers()
            .get("strata-sequence")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let body = r
            .body_mut()
            .with_config()
            .limit(u64::MAX)
            .read_to_vec()
            .map_err(|e| e.to_string())?;
        Ok(Reply {
            status: r.status().as_u16(),
            content_type,
            body,
            sequence,
        })
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// A request; `Err` only when no answer came (the server is gone).
    pub fn try_call(&self, method: &str, path: &str, body: &[u8]) -> Result<Reply, String> {
        let url = self.url(path);
        let auth = self.bearer();
        let r = match method {
            "GET" => self.agent.get(&url).header("Authorization", &auth).call(),
            "DELETE" => self
                .agent
                .delete(&url)
                .header("Authorization", &auth)
                .call(),
            "PUT" => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(body),
            "POST" => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(body),
            "PATCH" => self
                .agent
                .patch(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/octet-stream")
                .send(body),
            "RAWPUT" => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/octet-stream")
                .send(body),
            other => return Err(format!("no method {other}")),
        };
        Self::answer(r)
    }

    pub fn call(&self, method: &str, path: &str, body: &[u8]) -> Reply {
        self.try_call(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// The value of `key` as raw bytes, or `None` on 404.
    pub fn value(&self, key: &[u8]) -> Option<Vec<u8>> {
        let r = self.call("GET", &format!("/api/v1/kv/{}?raw=1", path_key(key)), b"");
        match r.status {
            200 => Some(r.body),
            404 => None,
            s => panic!("GET {}: {s} {}", String::from_utf8_lossy(key), r.text()),
        }
    }

    /// Puts `value` under `key`, synced; the status.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Reply {
        let body = format!(r#"{{"value":"{}"}}"#, b64(value));
        self.call(
            "PUT",
            &format!("/api/v1/kv/{}?sync=1", path_key(key)),
            body.as_bytes(),
        )
    }

    /// The serving process's peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let pid = self
            .child
            .lock()
            .unwrap()
            .as_ref()
            .expect("serve running")
            .id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .expect("VmHWM in /proc/PID/status")
    }

    fn signal(&self, signal: i32) -> std::process::ExitStatus {
        let mut child = self
            .child
            .lock()
            .unwrap()
            .take()
            .expect("serve already stopped");
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: a signal to our own child, which has not been waited for, so its pid is ours.
        unsafe {
            libc::kill(pid, signal);
        }
        child.wait().unwrap()
    }

    /// SIGTERM: serve unmounts, closes the store and exits 0.
    pub fn stop(self) {
        let status = self.signal(libc::SIGTERM);
        assert!(status.success(), "serve exited {status}");
    }

    /// SIGKILL, as a crash: nothing is closed; the dead mount is detached. Takes `&self` so
    /// that it can land while other threads are mid-request.
    pub fn kill(&self) {
        self.signal(libc::SIGKILL);
        self.detach_mount();
    }

    fn detach_mount(&self) {
        if let Some(m) = &self.mount {
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(m)
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.lock().is_ok_and(|c| c.is_some()) {
            self.signal(libc::SIGKILL);
            self.detach_mount();
        }
    }
}
