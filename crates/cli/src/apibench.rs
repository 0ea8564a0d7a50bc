//! `strata api-bench`: the REST API over loopback from many connections, beside the engine doing
//! the same work directly, so the HTTP cost is visible; and a mixed load whose every
//! acknowledged write is read back afterwards.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use strata_admin_api::codec::{base64 as b64, encode_path_key as path_key};
use strata_admin_api::{Limits, Security, ServeConfig};
use strata_engine::{Db, Options, ReadOptions};

#[derive(clap::Args, Debug)]
pub struct ApiBenchArgs {
    /// Client connections.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Seconds per workload.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Keys loaded before the read workloads.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Run only the mixed load (gets, puts, scans) and read every acknowledged write back.
    #[arg(long)]
    mixed_only: bool,
    /// Run the mixed load against this running `strata serve` (e.g. http://127.0.0.1:7070)
    /// instead of a server of its own, with the token in the store's `serve.token`.
    #[arg(long)]
    url: Option<String>,
}

const TOKEN: &str = "api-bench-token-0123456789abcdef";

fn key(i: u64) -> Vec<u8> {
    format!("key{i:012}").into_bytes()
}

/// Where the API is and the token it takes.
#[derive(Debug, Clone)]
struct Server {
    addr: SocketAddr,
    token: String,
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    token: String,
}

impl Conn {
    fn open(server: &Server) -> Result<Conn, String> {
        let addr = server.addr;
        let s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        Ok(Conn {
            writer: s.try_clone().map_err(|e| e.to_string())?,
            reader: BufReader::new(s),
            token: server.token.clone(),
        })
    }

    /// The status and body of one request.
    fn call(&mut self, method: &str, path: &str, body: &str) -> Result<(u16, Vec<u8>), String> {
        let io = |e: std::io::Error| format!("{method} {path}: {e}");
        write!(
            self.writer,
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.token,
            body.len()
        )
        .map_err(io)?;
        let mut line = String::new();
        self.reader.read_line(&mut line).map_err(io)?;
        let status: u16 = line
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line {line:?}"))?;
        let mut len = 0usize;
        loop {
            line.clear();
            self.reader.read_line(&mut line).map_err(io)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v
                    .trim()
                    .parse()
                    .map_err(|_| "bad content-length".to_string())?;
            }
        }
        let mut out = vec![0; len];
        self.reader.read_exact(&mut out).map_err(io)?;
        Ok((status, out))
    }
}

/// Per-thread latencies in microseconds, merged.
fn summary(name: &str, mut lat: Vec<u32>, secs: f64, items_per_op: u64) -> String {
    lat.sort_unstable();
    let n = lat.len().max(1);
    let p = |q: f64| {
        lat.get(((n as f64 * q) as usize).min(n - 1))
            .copied()
            .unwrap_or(0)
    };
    format!(
        "{name:<22} : {:10.0} ops/sec; p50 {:6} us, p99 {:6} us{}",
        lat.len() as f64 / secs,
        p(0.50),
        p(0.99),
        if items_per_op > 1 {
            format!(" ({items_per_op} keys per op)")
        } else {
            String::new()
        }
    )
}

/// Runs `op` on `threads` threads for `secs`; each call's latency is kept.
fn run_threads<S: Send>(
    threads: usize,
    secs: u64,
    setup: impl Fn(usize) -> Result<S, String> + Sync,
    op: impl Fn(&mut S, &mut rand::rngs::ThreadRng) -> Result<(), String> + Sync,
) -> Result<(Vec<u32>, f64), String> {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let results: Vec<Result<Vec<u32>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, setup, op) = (&stop, &setup, &op);
                scope.spawn(move || {
                    let mut state = setup(t)?;
                    let mut rng = rand::rng();
                    let mut lat = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let t0 = Instant::now();
                        op(&mut state, &mut rng)?;
                        lat.push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                    }
                    Ok(lat)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a client thread panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    Ok((all, elapsed))
}

fn expect(status: u16, want: u16, what: &str, body: &[u8]) -> Result<(), String> {
    if status == want {
        Ok(())
    } else {
        Err(format!(
            "{what}: status {status}: {}",
            String::from_utf8_lossy(body)
        ))
    }
}

pub fn run(db_dir: &Path, args: ApiBenchArgs) -> Result<(), String> {
    if let Some(url) = &args.url {
        return against_running_server(db_dir, url, &args);
    }
    if db_dir.exists() {
        return Err(format!(
            "{} exists: api-bench needs a new store",
            db_dir.display()
        ));
    }
    let db = Arc::new(Db::open(db_dir, Options::default()).map_err(|e| e.to_string())?);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = {
        let db = db.clone();
        std::thread::spawn(move || {
            let config = ServeConfig {
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                read_only: false,
                limits: Limits::default(),
                security: Security::loopback(TOKEN.into()),
                mount: None,
                events: None,
                backups: None,
            };
            strata_admin_api::serve_until(
                db,
                config,
                |a| {
                    let _ = addr_tx.send(a);
                },
                async {
                    let _ = stop_rx.await;
                },
            )
        })
    };
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| "the server did not start".to_string())?;
    let result = workloads(
        &db,
        &Server {
            addr,
            token: TOKEN.into(),
        },
        &args,
    );
    let _ = stop_tx.send(());
    let served = server
        .join()
        .map_err(|_| "the server thread panicked".to_string())?;
    db.close().map_err(|e| e.to_string())?;
    result?;
    served.map_err(|e| e.to_string())
}

/// The mixed load against a `strata serve` already running on the store in `db_dir`.
fn against_running_server(db_dir: &Path, url: &str, a: &ApiBenchArgs) -> Result<(), String> {
    let authority = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--url {url}: give http://HOST:PORT"))?
        .trim_end_matches('/');
    let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .map_err(|e| format!("--url {url}: {e}"))?
        .next()
        .ok_or_else(|| format!("--url {url}: no address"))?;
    let token_file = db_dir.join("serve.token");
    let token = std::fs::read_to_string(&token_file)
        .map_err(|e| format!("reading the token in {}: {e}", token_file.display()))?
        .trim()
        .to_string();
    let value = b64(&vec![b'v'; a.value_size]);
    println!(
        "api-bench: {} connections, {} s of mixed load, values of {} bytes, on {addr}",
        a.connections, a.secs, a.value_size
    );
    mixed(&Server { addr, token }, a, &value)
}

fn workloads(db: &Arc<Db>, server: &Server, a: &ApiBenchArgs) -> Result<(), String> {
    let addr = server.addr;
    let value = b64(&vec![b'v'; a.value_size]);
    let conn = |_| Conn::open(server);
    let n = a.keys;
    println!(
        "api-bench: {} connections, {} s per workload, {} keys of {} bytes, on {addr}",
        a.connections, a.secs, n, a.value_size
    );
    if a.mixed_only {
        return mixed(server, a, &value);
    }
    // Load through the engine: the read workloads need the keys, not a PUT benchmark.
    let mut batch = strata_engine::WriteBatch::new();
    for i in 0..n {
        batch.put(key(i), vec![b'v'; a.value_size]);
        if batch.len() >= 10_000 {
            db.write(std::mem::take(&mut batch), &Default::default())
                .map_err(|e| e.to_string())?;
        }
    }
    db.write(batch, &Default::default())
        .map_err(|e| e.to_string())?;
    let secs = a.secs;
    let threads = a.connections;

    // The HTTP floor: the same clients and server answering `/healthz`, which does no store
    // work. GET and PUT are measured against it (the goal: GET 0.7x, PUT 0.6x).
    let (lat, t) = run_threads(threads, secs, conn, |c, _| {
        let (s, b) = c.call("GET", "/healthz", "")?;
        expect(s, 200, "GET /healthz", &b)
    })?;
    let floor = lat.len() as f64 / t;
    println!("{}", summary("http.healthz (floor)", lat, t, 1));
    let of_floor = |name: &str, ops: usize, t: f64| {
        println!("{name:<23}: {:.2}x the floor", ops as f64 / t / floor);
    };

    let (lat, t) = run_threads(threads, secs, conn, |c, rng| {
        let k = key(rng.random_range(0..n));
        let (s, b) = c.call("GET", &format!("/api/v1/kv/{}", path_key(&k)), "")?;
        expect(s, 200, "GET", &b)
    })?;
    of_floor("http.get / floor", lat.len(), t);
    println!("{}", summary("http.get", lat, t, 1));
    let (lat, t) = run_threads(
        threads,
        secs,
        |_| Ok(()),
        |_, rng| {
            let k = key(rng.random_range(0..n));
            db.get(&k).map_err(|e| e.to_string())?.ok_or("missing")?;
            Ok(())
        },
    )?;
    println!("{}", summary("engine.get", lat, t, 1));

    let body = format!(r#"{{"value":"{value}"}}"#);
    let (lat, t) = run_threads(threads, secs, conn, |c, rng| {
        let k = key(rng.random_range(0..n));
        let (s, b) = c.call("PUT", &format!("/api/v1/kv/{}", path_key(&k)), &body)?;
        expect(s, 204, "PUT", &b)
    })?;
    of_floor("http.put / floor", lat.len(), t);
    println!("{}", summary("http.put", lat, t, 1));
    let raw = vec![b'v'; a.value_size];
    let (lat, t) = run_threads(
        threads,
        secs,
        |_| Ok(()),
        |_, rng| {
            db.put(key(rng.random_range(0..n)), &raw)
                .map_err(|e| e.to_string())
        },
    )?;
    println!("{}", summary("engine.put", lat, t, 1));

    let (lat, t) = run_threads(threads, secs, conn, |c, rng| {
        let keys: Vec<String> = (0..100)
            .map(|_| format!("\"{}\"", b64(&key(rng.random_range(0..n)))))
            .collect();
        let body = format!(r#"{{"keys":[{}]}}"#, keys.join(","));
        let (s, b) = c.call("POST", "/api/v1/kv:batchGet", &body)?;
        expect(s, 200, "batchGet", &b)
    })?;
    println!("{}", summary("http.batchGet100", lat, t, 100));
    let cf = db.default_cf();
    let (lat, t) = run_threads(
        threads,
        secs,
        |_| Ok(()),
        |_, rng| {
            let keys: Vec<Vec<u8>> = (0..100).map(|_| key(rng.random_range(0..n))).collect();
            let asks: Vec<_> = keys.iter().map(|k| (&cf, k)).collect();
            for r in db.multi_get_cf(&ReadOptions::default(), &asks) {
                r.map_err(|e| e.to_string())?;
            }
            Ok(())
        },
    )?;
    println!("{}", summary("engine.multiGet100", lat, t, 100));

    let (lat, t) = run_threads(threads, secs, conn, |c, rng| {
        let start = b64(&key(rng.random_range(0..n.saturating_sub(100).max(1))));
        let body = format!(r#"{{"start":"{start}","limit":100}}"#);
        let (s, b) = c.call("POST", "/api/v1/kv:scan", &body)?;
        expect(s, 200, "scan", &b)
    })?;
    println!("{}", summary("http.scan100", lat, t, 100));
    let (lat, t) = run_threads(
        threads,
        secs,
        |_| Ok(()),
        |_, rng| {
            let mut it = db
                .iter(&ReadOptions::default())
                .map_err(|e| e.to_string())?;
            it.seek(&key(rng.random_range(0..n.saturating_sub(100).max(1))));
            for _ in 0..100 {
                if !it.valid() {
                    break;
                }
                std::hint::black_box((it.key(), it.value()));
                it.next();
            }
            it.status().map_err(|e| e.to_string())
        },
    )?;
    println!("{}", summary("engine.scan100", lat, t, 100));
    Ok(())
}

/// Keys one connection wrote, with the sequence number of each acknowledged write.
type Acked = Vec<(Vec<u8>, u64)>;

/// Gets, puts and scans from every connection at once; each thread writes its own keys and
/// remembers what was acknowledged, and every one is read back through the API afterwards.
fn mixed(server: &Server, a: &ApiBenchArgs, value: &str) -> Result<(), String> {
    let acked: Vec<std::sync::Mutex<Acked>> = (0..a.connections)
        .map(|_| std::sync::Mutex::new(Vec::new()))
        .collect();
    let body = |v: u64| format!(r#"{{"value":"{}"}}"#, b64(format!("{value}{v}").as_bytes()));
    let (lat, t) = run_threads(
        a.connections,
        a.secs,
        |t| Ok((t, Conn::open(server)?, 0u64)),
        |(t, c, seq), rng| {
            *seq += 1;
            match rng.random_range(0..10) {
                0..=4 => {
                    let k = format!("mixed/{t:02}/{:06}", rng.random_range(0..1000)).into_bytes();
                    let (s, b) =
                        c.call("PUT", &format!("/api/v1/kv/{}", path_key(&k)), &body(*seq))?;
                    expect(s, 204, "PUT", &b)?;
                    if let Ok(mut list) = acked[*t].lock() {
                        list.push((k, *seq));
                    }
                    Ok(())
                }
                5..=8 => {
                    let k = format!("mixed/{t:02}/{:06}", rng.random_range(0..1000)).into_bytes();
                    let (s, b) = c.call("GET", &format!("/api/v1/kv/{}", path_key(&k)), "")?;
                    if s == 200 || s == 404 {
                        Ok(())
                    } else {
                        expect(s, 200, "GET", &b)
                    }
                }
                _ => {
                    let body = format!(
                        r#"{{"prefix":"{}","limit":50}}"#,
                        b64(format!("mixed/{t:02}/").as_bytes())
                    );
                    let (s, b) = c.call("POST", "/api/v1/kv:scan", &body)?;
                    expect(s, 200, "scan", &b)
                }
            }
        },
    )?;
    println!("{}", summary("http.mixed", lat, t, 1));
    // The newest acknowledged value of every key written must read back.
    let mut conn = Conn::open(server)?;
    let mut checked = 0u64;
    for list in &acked {
        let list = list.lock().map_err(|_| "poisoned".to_string())?;
        let mut newest = std::collections::BTreeMap::new();
        for (k, seq) in list.iter() {
            newest.insert(k.clone(), *seq);
        }
        for (k, seq) in newest {
            let (s, b) = conn.call("GET", &format!("/api/v1/kv/{}?raw=1", path_key(&k)), "")?;
            expect(s, 200, "read back", &b)?;
            // The stored bytes are the text that was base64-encoded in the PUT body.
            if b != format!("{value}{seq}").into_bytes() {
                return Err(format!("{} read back wrong", String::from_utf8_lossy(&k)));
            }
            checked += 1;
        }
    }
    println!("mixed: every acknowledged write read back ({checked} keys)");
    Ok(())
}
