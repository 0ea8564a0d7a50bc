//! RocksDB under the same workloads, with the options Strata's flags map to.

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DB, DBCompressionType, IteratorMode,
    LruCacheOptions, Options, WriteBatch, WriteOptions,
};

use strata_engine::CacheKind;

use super::engine::DiskWrites;
use super::{BenchArgs, BenchEngine};

pub struct RocksEngine {
    db: DB,
    opts: Options,
    sync: bool,
    disable_wal: bool,
}

impl RocksEngine {
    pub fn open(dir: &Path, args: &BenchArgs) -> Result<Self, String> {
        if args.num_column_families > 1 {
            return Err("--num_column_families above 1 is measured with --engine strata".into());
        }
        let mut table = BlockBasedOptions::default();
        let cache = match args.cache_kind()? {
            // 0: RocksDB estimates the entry charge itself.
            CacheKind::Clock => Cache::new_hyper_clock_cache(args.cache_size, 0),
            CacheKind::Lru => {
                let mut lru = LruCacheOptions::default();
                lru.set_capacity(args.cache_size);
                lru.set_num_shard_bits(args.cache_numshardbits);
                Cache::new_lru_cache_opts(&lru)
            }
            other => return Err(format!("--cache_type {other:?} has no RocksDB counterpart")),
        };
        table.set_block_cache(&cache);
        table.set_cache_index_and_filter_blocks(args.cache_index_and_filter_blocks);
        table.set_cache_index_and_filter_blocks_with_high_priority(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(
            args.pin_l0_filter_and_index_blocks_in_cache,
        );
        if args.bloom_bits > 0 {
            table.set_bloom_filter(args.bloom_bits as f64, false);
        }
        table.set_format_version(5);
        // Strata's block size (it has no flag for it): stated, not left to RocksDB's default.
        table.set_block_size(strata_engine::ColumnFamilyOptions::default().block_size);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.enable_statistics();
        let (memtable_bloom_size_ratio, memtable_whole_key_filtering) = args.memtable_bloom()?;
        opts.set_memtable_prefix_bloom_ratio(memtable_bloom_size_ratio);
        opts.set_memtable_whole_key_filtering(memtable_whole_key_filtering);
        opts.set_level_zero_file_num_compaction_trigger(
            args.level0_file_num_compaction_trigger as i32,
        );
        opts.set_level_zero_slowdown_writes_trigger(args.level0_slowdown_writes_trigger as i32);
        opts.set_level_zero_stop_writes_trigger(args.level0_stop_writes_trigger as i32);
        opts.set_max_bytes_for_level_base(args.max_bytes_for_level_base);
        opts.set_max_bytes_for_level_multiplier(args.max_bytes_for_level_multiplier as f64);
        opts.set_target_file_size_base(args.target_file_size_base);
        opts.set_level_compaction_dynamic_level_bytes(args.level_compaction_dynamic_level_bytes);
        opts.set_disable_auto_compactions(args.disable_auto_compactions);
        opts.set_block_based_table_factory(&table);
        opts.set_write_buffer_size(args.write_buffer_size);
        opts.set_max_background_jobs(args.max_background_jobs as i32);
        opts.set_max_total_wal_size(args.max_total_wal_size);
        opts.set_enable_blob_files(args.enable_blob_files);
        opts.set_min_blob_size(args.min_blob_size as u64);
        opts.set_blob_file_size(args.blob_file_size);
        if args.ttl > 0 {
            return Err("--ttl is Strata's: RocksDB's integrated BlobDB has no TTL".into());
        }
        opts.set_compression_type(match args.compression_type.as_str() {
            "none" => DBCompressionType::None,
            "zstd" => DBCompressionType::Zstd,
            other => return Err(format!("unknown --compression_type {other}: none or zstd")),
        });
        // Opened with its column family named, so that `cf_handle("default")` works for MultiGet,
        // and described with these options: `open_cf` would give it `Options::default()`, and
        // none of the table, buffer, compaction or blob options would reach it.
        let default = ColumnFamilyDescriptor::new("default", opts.clone());
        let db = DB::open_cf_descriptors(&opts, dir, [default]).map_err(|e| e.to_string())?;
        Ok(RocksEngine {
            db,
            opts,
            sync: args.sync,
            disable_wal: args.disable_wal,
        })
    }

    fn write_batch(&self, b: WriteBatch) -> Result<(), String> {
        let mut w = WriteOptions::default();
        w.set_sync(self.sync);
        w.disable_wal(self.disable_wal);
        self.db.write_opt(b, &w).map_err(|e| e.to_string())
    }
}

impl BenchEngine for RocksEngine {
    fn name(&self) -> String {
        "rocksdb (rust-rocksdb 0.25)".into()
    }

    fn write(&self, entries: &[(Vec<u8>, &[u8])]) -> Result<(), String> {
        let mut b = WriteBatch::default();
        for (k, v) in entries {
            b.put(k, v);
        }
        self.write_batch(b)
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        let mut b = WriteBatch::default();
        b.delete_range(start, end);
        self.write_batch(b)
    }

    fn delete(&self, keys: &[Vec<u8>]) -> Result<(), String> {
        let mut b = WriteBatch::default();
        for k in keys {
            b.delete(k);
        }
        self.write_batch(b)
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, String> {
        Ok(self
            .db
            .get_pinned(key)
            .map_err(|e| e.to_string())?
            .map(|v| v.len()))
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<usize>>, String> {
        let cf = self
            .db
            .cf_handle("default")
            .ok_or("no default column family")?;
        self.db
            .batched_multi_get_cf(cf, keys, false)
            .into_iter()
            .map(|r| r.map(|v| v.map(|v| v.len())).map_err(|e| e.to_string()))
            .collect()
    }

    fn seek_random(&self, n: u64, next_key: &mut dyn FnMut() -> Vec<u8>) -> Result<u64, String> {
        let mut it = self.db.raw_iterator();
        let mut found = 0;
        for _ in 0..n {
            it.seek(next_key());
            found += it.valid() as u64;
        }
        it.status().map_err(|e| e.to_string())?;
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64), String> {
        let (mut n, mut bytes) = (0u64, 0u64);
        for item in self.db.iterator(IteratorMode::Start) {
            let (k, v) = item.map_err(|e| e.to_string())?;
            n += 1;
            bytes += (k.len() + v.len()) as u64;
        }
        Ok((n, bytes))
    }

    fn flush(&self) -> Result<(), String> {
        self.db.flush().map_err(|e| e.to_string())
    }

    fn wait_for_compaction(&self) -> Result<(), String> {
        self.db
            .wait_for_compact(&rocksdb::WaitForCompactOptions::default())
            .map_err(|e| e.to_string())
    }

    fn compact(&self) -> Result<(), String> {
        self.db.compact_range::<&[u8], &[u8]>(None, None);
        Ok(())
    }

    fn disk_bytes_written(&self) -> Option<DiskWrites> {
        // Tickers from RocksDB's statistics dump: "rocksdb.<name> COUNT : <n>".
        let dump = self.opts.get_statistics()?;
        let ticker = |name: &str| -> u64 {
            dump.lines()
                .find(|l| l.starts_with(&format!("rocksdb.{name} COUNT")))
                .and_then(|l| l.rsplit(':').next())
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0)
        };
        // `wal.bytes` counts the batches logged, without the log's 7-byte record headers, which
        // Strata's count holds: each group's leader logs one record (`write.self`), so its header
        // is added to count the same bytes. Fragments split at block ends and block trailers are
        // still left out (under 14 bytes per 32 KiB block), in RocksDB's favour.
        // `flush.write.bytes` counts all a flush writes, its blob files included, and so does
        // `blobdb.blob.file.bytes.written`: the blob bytes come off the flush's count so that
        // they are counted once (this process's wchar agrees). The bench never turns on
        // RocksDB's blob garbage collection, the only other writer of blob files.
        let blob = ticker("blobdb.blob.file.bytes.written");
        let flush = ticker("flush.write.bytes");
        Some(DiskWrites {
            wal: match ticker("wal.bytes") {
                0 => 0,
                batches => batches + 7 * ticker("write.self"),
            },
            flush: flush.saturating_sub(blob),
            compaction: ticker("compact.write.bytes"),
            blob: blob.min(flush),
        })
    }

    fn stats(&self) -> String {
        self.db
            .property_value("rocksdb.levelstats")
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn close(&self) -> Result<(), String> {
        self.db.flush_wal(true).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::parse_flags;
    use super::*;

    /// The options reach RocksDB: its own OPTIONS file, which it writes at open, says so.
    #[test]
    fn rocksdb_runs_with_the_flags_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let args = parse_flags(&[
            "--compression_type",
            "none",
            "--bloom_bits",
            "10",
            "--write_buffer_size",
            "3145728",
            "--enable_blob_files",
            "--min_blob_size",
            "1000",
        ]);
        let engine = RocksEngine::open(dir.path(), &args).unwrap();
        drop(engine);
        let options = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("OPTIONS-")
            })
            .max()
            .unwrap();
        let text = std::fs::read_to_string(options).unwrap();
        let cf = &text[text.find("[CFOptions \"default\"]").unwrap()..];
        for want in [
            "compression=kNoCompression",
            "write_buffer_size=3145728",
            "enable_blob_files=true",
            "min_blob_size=1000",
            "block_size=4096",
            "filter_policy=bloomfilter",
        ] {
            assert!(
                cf.contains(want),
                "{want} missing from RocksDB's OPTIONS:\n{cf}"
            );
        }
    }

    /// A flush's blob files are counted once: what the counters report as flushed and as blob
    /// files is what those files hold on disk.
    #[test]
    fn blob_files_are_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let args = parse_flags(&["--enable_blob_files", "--min_blob_size", "64"]);
        let engine = RocksEngine::open(dir.path(), &args).unwrap();
        let value = [7u8; 200];
        for chunk in 0..20u32 {
            let entries: Vec<(Vec<u8>, &[u8])> = (0..500u32)
                .map(|i| (format!("{:016}", chunk * 500 + i).into_bytes(), &value[..]))
                .collect();
            engine.write(&entries).unwrap();
        }
        engine.flush().unwrap();
        let counted = engine.disk_bytes_written().unwrap();
        let size_of = |ext: &str| -> u64 {
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == ext))
                .map(|p| std::fs::metadata(p).unwrap().len())
                .sum()
        };
        let (tables, blobs) = (size_of("sst"), size_of("blob"));
        assert!(blobs >= 10_000 * 200, "{blobs} bytes of blob files");
        assert_eq!(counted.blob, blobs, "{counted:?}");
        // RocksDB's flush count runs a few hundred bytes past its tables (a flush also writes
        // small files); counting the blob files twice would put it megabytes past.
        assert!(
            counted.flush.abs_diff(tables) < 4096,
            "{tables} bytes of tables, {counted:?}"
        );
        assert_eq!(counted.compaction, 0, "{counted:?}");
    }
}
