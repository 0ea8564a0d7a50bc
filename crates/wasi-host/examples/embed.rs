//! The README's host example, run by `scripts/readme-test.sh`: open the store in `./data` inside
//! the component, write, read, scan, and count through `wasi:keyvalue`.

use std::time::Duration;
use strata_wasi_host::{Limits, WasiDb, default_options};

fn main() -> Result<(), strata_wasi_host::Error> {
    let limits = Limits {
        memory_bytes: 256 << 20,
        call_deadline: Duration::from_secs(5),
        ..Limits::default()
    };
    let db = WasiDb::open("./data", limits, default_options())?;
    db.put_with("users/alice", r#"{"age": 31}"#, true)?;
    assert_eq!(
        db.get("users/alice")?.as_deref(),
        Some(&br#"{"age": 31}"#[..])
    );
    for entry in db.scan_all(Some(&b"users/"[..]), Some(&b"users0"[..]))? {
        println!("{}", String::from_utf8_lossy(&entry.key));
    }
    // The same store through wasi:keyvalue, as a component importing it sees it.
    let bucket = db.bucket("default")?;
    println!("visits: {}", bucket.increment("visits", 1)?);
    drop(bucket);
    db.close()
}
