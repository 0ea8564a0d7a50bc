//! The benchmark's engine through the WebAssembly component: the same workloads and flags,
//! each call crossing into the sandbox, so native and WASM compare on one machine and one run.

use std::path::Path;
use std::time::Duration;

use strata_wasi_host::{
    BatchOp, Compression, Direction, KeyRange, Limits, OpenOptions, ScanOptions, WasiDb,
    WriteBatch, default_options,
};

use super::BenchArgs;
use super::engine::{BenchEngine, DiskWrites};

pub struct WasmEngine {
    db: WasiDb,
    sync: bool,
    ttl: u64,
}

fn err(e: strata_wasi_host::Error) -> String {
    e.to_string()
}

impl WasmEngine {
    pub fn open(dir: &Path, args: &BenchArgs) -> Result<Self, String> {
        if args.num_column_families > 1 {
            return Err("--engine wasm runs one column family (the component's store)".into());
        }
        let options = OpenOptions {
            create_if_missing: true,
            compression: match args.compression_type.as_str() {
                "none" => Compression::None,
                "zstd" => Compression::Zstd,
                other => return Err(format!("unknown --compression_type {other}: none or zstd")),
            },
            bloom_bits_per_key: args.bloom_bits,
            write_buffer_size: args.write_buffer_size as u64,
            enable_blob_files: args.enable_blob_files,
            min_blob_size: args.min_blob_size as u64,
            cache_size: args.cache_size as u64,
            ..default_options()
        };
        // A bench fills gigabytes in one call now and then (a compaction): no deadline to speak of.
        let limits = Limits {
            memory_bytes: 4 << 30,
            call_deadline: Duration::from_secs(3600),
            ..Limits::default()
        };
        let db = WasiDb::open(dir, limits, options).map_err(err)?;
        let s = db.start_report();
        println!(
            "Component:  started in {:.1} ms ({})",
            s.elapsed.as_secs_f64() * 1e3,
            if s.from_disk_cache {
                "warm: compiled code from the cache"
            } else {
                "cold: compiled now"
            }
        );
        Ok(WasmEngine {
            db,
            sync: args.sync,
            ttl: args.ttl,
        })
    }

    fn scan_from(
        &self,
        start: Option<Vec<u8>>,
        keys_only: bool,
    ) -> Result<strata_wasi_host::Scan, String> {
        self.db
            .scan(
                &ScanOptions {
                    start,
                    end: None,
                    direction: Direction::Forward,
                    keys_only,
                },
                None,
            )
            .map_err(err)
    }
}

impl BenchEngine for WasmEngine {
    fn name(&self) -> String {
        "strata (wasm32-wasip2 component under wasmtime 48)".into()
    }

    fn write(&self, entries: &[(Vec<u8>, &[u8])]) -> Result<(), String> {
        if self.ttl > 0 {
            for (k, v) in entries {
                self.db
                    .put_with_ttl(k, v, Duration::from_secs(self.ttl), self.sync)
                    .map_err(err)?;
            }
            return Ok(());
        }
        if let [(k, v)] = entries {
            return self.db.put_with(k, v, self.sync).map_err(err);
        }
        let mut batch = WriteBatch::new();
        for (k, v) in entries {
            batch.put(k, v);
        }
        self.db.write(&batch, self.sync).map_err(err)
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        let range = KeyRange {
            start: start.to_vec(),
            end: end.to_vec(),
        };
        self.db
            .write_ops(&[BatchOp::DeleteRange(range)], self.sync)
            .map_err(err)
    }

    fn delete(&self, keys: &[Vec<u8>]) -> Result<(), String> {
        let mut batch = WriteBatch::new();
        for k in keys {
            batch.delete(k);
        }
        self.db.write(&batch, self.sync).map_err(err)
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, String> {
        Ok(self.db.get(key).map_err(err)?.map(|v| v.len()))
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<usize>>, String> {
        Ok(self
            .db
            .multi_get(keys)
            .map_err(err)?
            .into_iter()
            .map(|v| v.map(|v| v.len()))
            .collect())
    }

    fn seek_random(&self, n: u64, next_key: &mut dyn FnMut() -> Vec<u8>) -> Result<u64, String> {
        let mut found = 0;
        for _ in 0..n {
            let scan = self.scan_from(Some(next_key()), true)?;
            found += u64::from(!self.db.next_page(&scan, 1).map_err(err)?.is_empty());
            self.db.end_scan(scan).map_err(err)?;
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64), String> {
        let scan = self.scan_from(None, false)?;
        let (mut entries, mut bytes) = (0u64, 0u64);
        loop {
            let page = self.db.next_page(&scan, 4096).map_err(err)?;
            if page.is_empty() {
                break;
            }
            entries += page.len() as u64;
            bytes += page
                .iter()
                .map(|e| (e.key.len() + e.value.len()) as u64)
                .sum::<u64>();
        }
        self.db.end_scan(scan).map_err(err)?;
        Ok((entries, bytes))
    }

    fn flush(&self) -> Result<(), String> {
        self.db.flush().map_err(err)
    }

    fn compact(&self) -> Result<(), String> {
        self.db.compact_range(None, None).map_err(err)
    }

    fn wait_for_compaction(&self) -> Result<(), String> {
        while self.db.maintenance(64).map_err(err)? {}
        Ok(())
    }

    fn disk_bytes_written(&self) -> Option<DiskWrites> {
        None
    }

    fn stats(&self) -> String {
        match self.db.properties() {
            Ok(p) => p
                .levels
                .iter()
                .filter(|l| l.files > 0)
                .map(|l| format!("L{}: {} files, {} bytes\n", l.level, l.files, l.bytes))
                .collect(),
            Err(e) => e.to_string(),
        }
    }

    fn close(&self) -> Result<(), String> {
        self.db.close().map_err(err)
    }
}
