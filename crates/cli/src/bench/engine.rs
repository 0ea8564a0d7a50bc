//! The operations a benchmark needs, implemented by each engine.

use std::path::Path;

use strata_engine::{Compression, Db, Options, ReadOptions, WriteBatch, WriteOptions};

use super::BenchArgs;

/// One engine under test. Reads return the value's length so no engine pays for a copy.
pub trait BenchEngine: Send + Sync {
    fn name(&self) -> String;
    fn write(&self, entries: &[(Vec<u8>, &[u8])]) -> Result<(), String>;
    fn get(&self, key: &[u8]) -> Result<Option<usize>, String>;
    /// Seeks one iterator to each of `n` keys from `next_key` (as db_bench reuses one iterator per
    /// thread); returns how many seeks landed on an entry.
    fn seek_random(&self, n: u64, next_key: &mut dyn FnMut() -> Vec<u8>) -> Result<u64, String>;
    /// Reads every entry in order; (entries, bytes).
    fn scan(&self) -> Result<(u64, u64), String>;
    fn flush(&self) -> Result<(), String>;
    /// Compacts the whole key space.
    fn compact(&self) -> Result<(), String>;
    /// Bytes written to disk so far: WAL, flushes and compactions.
    fn disk_bytes_written(&self) -> Option<u64>;
    fn stats(&self) -> String;
    fn close(&self) -> Result<(), String>;
}

pub struct StrataEngine {
    db: Db,
    write: WriteOptions,
}

impl StrataEngine {
    pub fn open(dir: &Path, args: &BenchArgs) -> Result<Self, String> {
        let compression = match args.compression_type.as_str() {
            "none" => Compression::None,
            "zstd" => Compression::Zstd,
            other => return Err(format!("unknown --compression_type {other}: none or zstd")),
        };
        let opts = Options {
            compression,
            cache_size: args.cache_size,
            bloom_bits_per_key: args.bloom_bits,
            memtable_bloom_size_ratio: args.memtable_bloom_size_ratio,
            memtable_whole_key_filtering: args.memtable_whole_key_filtering,
            write_buffer_size: args.write_buffer_size,
            max_background_jobs: args.max_background_jobs,
            level0_file_num_compaction_trigger: args.level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger: args.level0_slowdown_writes_trigger,
            level0_stop_writes_trigger: args.level0_stop_writes_trigger,
            max_bytes_for_level_base: args.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: args.max_bytes_for_level_multiplier,
            target_file_size_base: args.target_file_size_base,
            level_compaction_dynamic_level_bytes: args.level_compaction_dynamic_level_bytes,
            disable_auto_compactions: args.disable_auto_compactions,
            ..Options::default()
        };
        let db = Db::open(dir, opts).map_err(|e| e.to_string())?;
        Ok(StrataEngine {
            db,
            write: WriteOptions {
                sync: args.sync,
                disable_wal: args.disable_wal,
            },
        })
    }
}

fn err(e: strata_engine::Error) -> String {
    e.to_string()
}

impl BenchEngine for StrataEngine {
    fn name(&self) -> String {
        format!("strata {}", env!("CARGO_PKG_VERSION"))
    }

    fn write(&self, entries: &[(Vec<u8>, &[u8])]) -> Result<(), String> {
        let mut b = WriteBatch::new();
        for (k, v) in entries {
            b.put(k, v);
        }
        self.db.write(b, &self.write).map_err(err)
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, String> {
        Ok(self.db.get(key).map_err(err)?.map(|v| v.len()))
    }

    fn seek_random(&self, n: u64, next_key: &mut dyn FnMut() -> Vec<u8>) -> Result<u64, String> {
        let mut it = self.db.iter(&ReadOptions::default()).map_err(err)?;
        let mut found = 0;
        for _ in 0..n {
            it.seek(&next_key());
            found += it.valid() as u64;
        }
        it.status().map_err(err)?;
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64), String> {
        let mut it = self.db.iter(&ReadOptions::default()).map_err(err)?;
        let (mut n, mut bytes) = (0u64, 0u64);
        it.seek_to_first();
        while it.valid() {
            n += 1;
            bytes += (it.key().len() + it.value().len()) as u64;
            it.next();
        }
        it.status().map_err(err)?;
        Ok((n, bytes))
    }

    fn flush(&self) -> Result<(), String> {
        self.db.flush().map_err(err)
    }

    fn compact(&self) -> Result<(), String> {
        self.db.compact_range(None, None).map_err(err)
    }

    fn disk_bytes_written(&self) -> Option<u64> {
        let s = self.db.statistics();
        Some(s.wal_bytes + s.flush_bytes + s.compaction_bytes_written)
    }

    fn stats(&self) -> String {
        let p = self.db.properties();
        let s = self.db.statistics();
        let levels: Vec<String> = p
            .levels
            .iter()
            .filter(|l| l.files > 0)
            .map(|l| {
                format!(
                    "L{}: {} files, {} bytes, score {:.2}, {} compactions",
                    l.level, l.files, l.bytes, l.score, l.compactions
                )
            })
            .collect();
        format!(
            "{}\nblock cache: {} hits, {} misses; bloom: {} checked, {} useful; write groups: {} for {} batches\n\
             compactions: {} ({} trivial moves), {} bytes read, {} bytes written; stalls: {} ({} slowdowns, {} stops, {} us)",
            levels.join("\n"),
            s.block_cache_hit,
            s.block_cache_miss,
            s.bloom_checked,
            s.bloom_useful,
            s.write_groups,
            s.write_batches,
            s.compactions,
            s.trivial_moves,
            s.compaction_bytes_read,
            s.compaction_bytes_written,
            s.write_stalls,
            s.write_slowdowns,
            s.write_stops,
            s.write_stall_micros
        )
    }

    fn close(&self) -> Result<(), String> {
        self.db.close().map_err(err)
    }
}
