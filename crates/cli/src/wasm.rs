//! `strata --engine wasm ...`: the data commands run through the engine compiled to a
//! WebAssembly component (`strata-wasi-host`), confined to the store's directory. Output is the
//! native commands' own, so the two can be compared line for line.

use std::path::Path;
use std::time::Duration;

use strata_wasi_host::{Direction, Limits, ScanOptions, WasiDb, default_options};

use crate::{Command, codec};

fn open(dir: &Path, create: bool) -> Result<WasiDb, String> {
    let options = strata_wasi_host::OpenOptions {
        create_if_missing: create,
        ..default_options()
    };
    let db = WasiDb::open(dir, Limits::default(), options).map_err(|e| e.to_string())?;
    let s = db.start_report();
    log::info!(
        "component started in {:?} ({})",
        s.elapsed,
        if s.from_disk_cache {
            "compiled code from the cache"
        } else {
            "compiled now"
        }
    );
    Ok(db)
}

/// Runs `command` through the component; only the data commands and flush/compact are there.
pub fn run(dir: &Path, cf: &str, command: Command) -> Result<(), String> {
    if cf != "default" {
        return Err(
            "--engine wasm works on the default column family (the component's store interface)"
                .into(),
        );
    }
    let e = |e: strata_wasi_host::Error| e.to_string();
    match command {
        Command::Put {
            key,
            value,
            sync,
            ttl,
            append,
            offset,
        } => {
            // The component's store is on a disk it sees: every level is an fsync there.
            let sync = sync.is_some();
            let db = open(dir, true)?;
            let (key, value) = (codec::decode(&key)?, codec::decode(&value)?);
            if append {
                db.append(&key, &value, sync).map_err(e)?;
                return db.close().map_err(e);
            }
            if let Some(at) = offset {
                db.write_at(&key, at, &value, sync).map_err(e)?;
                return db.close().map_err(e);
            }
            match ttl {
                Some(0) => return Err("--ttl must be at least 1 second".into()),
                Some(secs) => db
                    .put_with_ttl(&key, &value, Duration::from_secs(secs), sync)
                    .map_err(e)?,
                None => db.put_with(&key, &value, sync).map_err(e)?,
            }
            db.close().map_err(e)
        }
        Command::Get { key, raw, range } => {
            let db = open(dir, false)?;
            let name = codec::decode(&key)?;
            let value = match range {
                None => db.get(&name).map_err(e)?,
                Some(spec) => match db.length(&name).map_err(e)? {
                    None => None,
                    Some(len) => {
                        let (start, end) = codec::resolve_range(&spec, len)?;
                        let part = db.read_range(&name, start, end - start).map_err(e)?;
                        part.map(|p| p.bytes)
                    }
                },
            };
            match value {
                Some(v) => codec::print_value(&v, raw),
                None => Err(format!("{key}: not found")),
            }
        }
        Command::Delete { key, sync } => {
            let sync = sync.is_some();
            let db = open(dir, false)?;
            db.write_ops(
                &[strata_wasi_host::BatchOp::Delete(codec::decode(&key)?)],
                sync,
            )
            .map_err(e)?;
            db.close().map_err(e)
        }
        Command::DeleteRange { from, to, sync } => {
            let sync = sync.is_some();
            let db = open(dir, false)?;
            let range = strata_wasi_host::KeyRange {
                start: codec::decode(&from)?,
                end: codec::decode(&to)?,
            };
            db.write_ops(&[strata_wasi_host::BatchOp::DeleteRange(range)], sync)
                .map_err(e)?;
            db.close().map_err(e)
        }
        Command::Scan {
            prefix,
            from,
            to,
            limit,
        } => {
            let db = open(dir, false)?;
            let (start, end) =
                codec::scan_bounds(prefix.as_deref(), from.as_deref(), to.as_deref())?;
            let scan = db
                .scan(
                    &ScanOptions {
                        start,
                        end,
                        direction: Direction::Forward,
                        keys_only: false,
                    },
                    None,
                )
                .map_err(e)?;
            let mut left = limit.unwrap_or(usize::MAX);
            while left > 0 {
                let page = db
                    .next_page(&scan, u32::try_from(left.min(1024)).unwrap_or(1024))
                    .map_err(e)?;
                if page.is_empty() {
                    break;
                }
                left -= page.len();
                for entry in page {
                    println!(
                        "{} => {}",
                        codec::encode(&entry.key),
                        codec::encode(&entry.value)
                    );
                }
            }
            db.end_scan(scan).map_err(e)
        }
        Command::Flush => {
            let db = open(dir, false)?;
            db.flush().map_err(e)?;
            db.close().map_err(e)
        }
        Command::Compact { from, to } => {
            let db = open(dir, false)?;
            let from = from.as_deref().map(codec::decode).transpose()?;
            // The native command's `--to` is inclusive; the component's end is too.
            let to = to.as_deref().map(codec::decode).transpose()?;
            db.compact_range(from.as_deref(), to.as_deref())
                .map_err(e)?;
            db.close().map_err(e)
        }
        _ => {
            Err("--engine wasm runs put, get, delete, delete-range, scan, flush and compact".into())
        }
    }
}
