//! The README's host example: open a store inside the component, write, read, scan.
//! `cargo run -p strata-wasi-host --example embed -- ./data`

use std::time::Duration;
use strata_wasi_host::{Limits, WasiDb, default_options};

fn main() -> Result<(), strata_wasi_host::Error> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "./data".into());
    let limits = Limits {
        memory_bytes: 256 << 20,
        call_deadline: Duration::from_secs(5),
        ..Limits::default()
    };
    let db = WasiDb::open(&dir, limits, default_options())?;
    db.put_with("users/alice", r#"{"age": 31}"#, true)?;
    assert_eq!(
        db.get("users/alice")?.as_deref(),
        Some(&br#"{"age": 31}"#[..])
    );
    for entry in db.scan_all(Some(&b"users/"[..]), Some(&b"users0"[..]))? {
        println!("{}", String::from_utf8_lossy(&entry.key));
    }
    db.close()
}
