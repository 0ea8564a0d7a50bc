//! A real SeaweedFS for tests: `weed server` on 127.0.0.1 with its S3 gateway, telemetry off, its
//! data in a temporary directory, on free ports; stopped when dropped (and, through
//! `PR_SET_PDEATHSIG`, when the test process dies). `make deps` builds `weed` into
//! `~/.cache/strata/tools/bin`; where `CI` is set a missing one fails the test.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use strata_bucket::{BucketConfig, BucketUrl, Credentials, Durability};

pub const BUCKET: &str = "strata-test";
pub const ACCESS_KEY: &str = "strata-test";
pub const SECRET_KEY: &str = "strata-test-secret";

/// Where `make deps` puts `weed`.
pub fn weed_binary() -> Option<PathBuf> {
    let tools = std::env::var_os("STRATA_TOOLS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/strata/tools"))
        })?;
    let weed = tools.join("bin/weed");
    if weed.is_file() {
        return Some(weed);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but SeaweedFS is missing at {} (`make deps` builds it)",
        weed.display()
    );
    eprintln!(
        "skipping: no SeaweedFS at {} (CI fails instead)",
        weed.display()
    );
    None
}

/// `n` distinct free ports: all held at once while chosen, so none comes back twice.
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// A running SeaweedFS.
pub struct Seaweed {
    child: Option<Child>,
    args: Vec<String>,
    weed: PathBuf,
    pub dir: tempfile::TempDir,
    pub endpoint: String,
    prefixes: AtomicU64,
    restarts: u32,
    sockets: Vec<PathBuf>,
}

impl Seaweed {
    /// Starts one and waits until its S3 gateway stores objects; `None` when `weed` is missing
    /// outside CI.
    pub fn start() -> Option<Seaweed> {
        let weed = weed_binary()?;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let ids = dir.path().join("identities.json");
        std::fs::write(
            &ids,
            format!(
                r#"{{"identities":[{{"name":"strata","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#
            ),
        )
        .unwrap();
        let mut ports = free_ports(8).into_iter();
        let mut p = |flag: &str| format!("-{flag}={}", ports.next().unwrap());
        let s3_flag = p("s3.port");
        let s3 = s3_flag.trim_start_matches("-s3.port=").to_string();
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let args = vec![
            // Its own logs stay in its directory, not in /tmp.
            format!("-logdir={}", logs.display()),
            "server".to_string(),
            format!("-dir={}", data.display()),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            "-master.telemetry=false".into(),
            p("master.port"),
            p("master.port.grpc"),
            p("volume.port"),
            p("volume.port.grpc"),
            p("filer.port"),
            p("filer.port.grpc"),
            "-s3".into(),
            s3_flag,
            p("s3.port.grpc"),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            format!("-s3.config={}", ids.display()),
            "-master.volumeSizeLimitMB=64".into(),
            "-volume.max=100".into(),
            // A restarted master elects itself in a second, not ten (the outage tests).
            "-master.electionTimeout=1s".into(),
            format!(
                "-filer.localSocket={}",
                dir.path().join("filer.sock").display()
            ),
            format!("-s3.localSocket={}", dir.path().join("s3.sock").display()),
        ];
        // Its gRPC services also listen on Unix sockets it always makes in /tmp, named by port:
        // removed when it stops.
        let sockets = args
            .iter()
            .filter_map(|a| {
                let (flag, port) = a.strip_prefix('-')?.split_once('=')?;
                let service = flag.strip_suffix(".port.grpc")?;
                Some(PathBuf::from(format!(
                    "/tmp/seaweedfs-{service}-grpc-{port}.sock"
                )))
            })
            .collect();
        let mut s = Seaweed {
            child: None,
            args,
            weed,
            dir,
            endpoint: format!("http://127.0.0.1:{s3}"),
            prefixes: AtomicU64::new(0),
            restarts: 0,
            sockets,
        };
        s.resume();
        Some(s)
    }

    /// Stops the server (the outage tests); `resume` starts it again on the same data and ports.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for socket in &self.sockets {
            let _ = std::fs::remove_file(socket);
        }
    }

    /// Starts the server and waits until it serves.
    pub fn resume(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("weed.log"))
            .unwrap();
        let mut cmd = Command::new(&self.weed);
        cmd.args(&self.args);
        if self.restarts > 0 {
            // The master's raft state from the last run makes it wait out an election before it
            // serves; the topology comes back from the volume servers' heartbeats anyway.
            cmd.arg("-master.resumeState=false");
        }
        self.restarts += 1;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        // SAFETY: only async-signal-safe calls between fork and exec: prctl, which asks the
        // kernel to kill the server when the thread that started it ends. Exercised by every
        // test that starts SeaweedFS.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        self.child = Some(cmd.spawn().expect("starting weed"));
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        let url = BucketUrl::parse(&format!("s3://{BUCKET}/ready")).unwrap();
        loop {
            let ready =
                strata_bucket::Client::connect(&url, Some(&self.endpoint), Some(&credentials()))
                    .and_then(|c| c.put_overwrite("ping", bytes::Bytes::from_static(b"1")));
            match ready {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => {
                    let log = std::fs::read_to_string(self.dir.path().join("weed.log"))
                        .unwrap_or_default();
                    // A Go panic says why first; otherwise the last lines.
                    let tail: String = match log.find("panic:") {
                        Some(at) => log[at..].lines().take(12).collect::<Vec<_>>().join("\n"),
                        None => log.lines().rev().take(30).collect::<Vec<_>>().join("\n"),
                    };
                    panic!("SeaweedFS did not come up in 90 s: {e}\n{tail}");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(300)),
            }
        }
    }

    /// A prefix no other test of this process uses.
    pub fn fresh_url(&self, name: &str) -> BucketUrl {
        let n = self.prefixes.fetch_add(1, Ordering::Relaxed);
        BucketUrl::parse(&format!("s3://{BUCKET}/{name}-{}-{n}", std::process::id())).unwrap()
    }

    pub fn config(
        &self,
        url: &BucketUrl,
        cache_dir: PathBuf,
        durability: Durability,
    ) -> BucketConfig {
        BucketConfig {
            endpoint: Some(self.endpoint.clone()),
            credentials: Some(credentials()),
            durability,
            // The tests collect garbage when they mean to.
            gc_interval: None,
            // Takeovers wait out a lease: short here, so the many tests that take a store over
            // do not wait seconds each.
            lease: std::time::Duration::from_millis(300),
            ..BucketConfig::new(url.clone(), cache_dir)
        }
    }
}

pub fn credentials() -> Credentials {
    Credentials {
        access_key_id: ACCESS_KEY.into(),
        secret_access_key: SECRET_KEY.into(),
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One SeaweedFS for the whole test binary, started by a thread that lives as long as the
/// process (so the death signal comes only when the process ends).
pub fn shared() -> Option<&'static Seaweed> {
    use std::sync::OnceLock;
    static ONE: OnceLock<Option<&'static Seaweed>> = OnceLock::new();
    *ONE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let s = Seaweed::start().map(|s| &*Box::leak(Box::new(s)));
            if let Some(s) = s {
                let pid = s.child.as_ref().map_or(0, Child::id);
                let _ = AT_EXIT.set((pid, s.dir.path().to_path_buf(), s.sockets.clone()));
                // SAFETY: registers a plain extern "C" function; it runs once, at exit.
                unsafe {
                    libc::atexit(stop_at_exit);
                }
            }
            tx.send(s).unwrap();
            loop {
                std::thread::park();
            }
        });
        rx.recv().unwrap()
    })
}

/// The shared server's process and directory, for `stop_at_exit`.
static AT_EXIT: std::sync::OnceLock<(u32, PathBuf, Vec<PathBuf>)> = std::sync::OnceLock::new();

/// Stops the shared server and deletes its data when the test binary exits (a leaked static is
/// never dropped).
extern "C" fn stop_at_exit() {
    if let Some((pid, dir, sockets)) = AT_EXIT.get() {
        for socket in sockets {
            let _ = std::fs::remove_file(socket);
        }
        // SAFETY: kill and waitpid on the server's own pid, a child of this process.
        unsafe {
            libc::kill(*pid as libc::pid_t, libc::SIGKILL);
            libc::waitpid(*pid as libc::pid_t, std::ptr::null_mut(), 0);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
