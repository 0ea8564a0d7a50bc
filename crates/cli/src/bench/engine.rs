//! The operations a benchmark needs, implemented by each engine.

use std::path::Path;

use strata_engine::{
    Clock, ColumnFamily, ColumnFamilyOptions, Compression, Db, DbIterator, Options, ReadOptions,
    SystemClock, WriteBatch, WriteOptions,
};

use super::BenchArgs;

/// One engine under test. Reads return the value's length so no engine pays for a copy.
pub trait BenchEngine: Send + Sync {
    fn name(&self) -> String;
    fn write(&self, entries: &[(Vec<u8>, &[u8])]) -> Result<(), String>;
    /// Deletes `[start, end)` with one range tombstone (in every column family).
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String>;
    /// Deletes `keys` with point tombstones, in one batch.
    fn delete(&self, keys: &[Vec<u8>]) -> Result<(), String>;
    fn get(&self, key: &[u8]) -> Result<Option<usize>, String>;
    /// Batched lookup of `keys` (the engine's MultiGet); lengths in input order.
    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<usize>>, String>;
    /// Seeks one iterator to each of `n` keys from `next_key` (as db_bench reuses one iterator per
    /// thread); returns how many seeks landed on an entry.
    fn seek_random(&self, n: u64, next_key: &mut dyn FnMut() -> Vec<u8>) -> Result<u64, String>;
    /// Reads every entry in order; (entries, bytes).
    fn scan(&self) -> Result<(u64, u64), String>;
    fn flush(&self) -> Result<(), String>;
    /// Compacts the whole key space.
    fn compact(&self) -> Result<(), String>;
    /// Waits until no flush or compaction is running or due.
    fn wait_for_compaction(&self) -> Result<(), String>;
    /// Bytes written to disk so far, by what wrote them.
    fn disk_bytes_written(&self) -> Option<DiskWrites>;
    fn stats(&self) -> String;
    fn close(&self) -> Result<(), String>;
    /// Stores a value of `len` bytes under `key` without holding it whole: `fill(offset, buf)`
    /// gives its bytes a step at a time. Only engines with ranged values offer it.
    fn put_streamed(
        &self,
        key: &[u8],
        len: u64,
        fill: &mut dyn FnMut(u64, &mut [u8]),
    ) -> Result<(), String> {
        let _ = (key, len, fill);
        Err(format!("{} has no streamed values", self.name()))
    }
    /// Appends `data` to `key`'s value (with the run's write options).
    fn append(&self, key: &[u8], data: &[u8]) -> Result<(), String> {
        let _ = (key, data);
        Err(format!("{} has no appends", self.name()))
    }
    /// Reads `len` bytes at `offset` of `key`'s value; returns how many there were.
    fn read_range(&self, key: &[u8], offset: u64, len: u64) -> Result<usize, String> {
        let _ = (key, offset, len);
        Err(format!("{} has no ranged reads", self.name()))
    }
    /// Looks `key` up once and returns what reads `len` bytes at `offset` of the value found,
    /// as an open file reads (how many there were).
    fn range_reader(&self, key: &[u8]) -> Result<RangeReader<'_>, String> {
        let _ = key;
        Err(format!("{} has no value readers", self.name()))
    }
}

/// Reads `len` bytes at `offset` of one value; returns how many there were.
pub type RangeReader<'a> = Box<dyn Fn(u64, u64) -> Result<usize, String> + 'a>;

/// Bytes an engine wrote, by kind, as its own counters report them.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskWrites {
    pub wal: u64,
    /// Tables written by flushes.
    pub flush: u64,
    /// Tables written by compactions.
    pub compaction: u64,
    /// Blob files (values kept apart from the tables).
    pub blob: u64,
}

impl DiskWrites {
    pub fn total(&self) -> u64 {
        self.wal + self.flush + self.compaction + self.blob
    }
}

pub struct StrataEngine {
    db: Db,
    /// Key number `n` lives in `cfs[n % cfs.len()]` (db_bench's layout).
    cfs: Vec<ColumnFamily>,
    write: WriteOptions,
    /// Seconds every written value lives (0: forever).
    ttl: u64,
}

/// The numeric value of a bench key (zero-padded decimal), as db_bench picks column families by it.
pub(super) fn key_number(key: &[u8]) -> u64 {
    key.iter()
        .filter(|b| b.is_ascii_digit())
        .fold(0u64, |n, b| {
            n.wrapping_mul(10).wrapping_add((b - b'0') as u64)
        })
}

impl StrataEngine {
    /// Opens the store at `dir` with `base`'s storage (the local disk's defaults, or a
    /// bucket's filesystem) and the benchmark's options.
    pub fn open(dir: &Path, args: &BenchArgs, base: Options) -> Result<Self, String> {
        let compression = match args.compression_type.as_str() {
            "none" => Compression::None,
            "zstd" => Compression::Zstd,
            other => return Err(format!("unknown --compression_type {other}: none or zstd")),
        };
        let (memtable_bloom_size_ratio, memtable_whole_key_filtering) = args.memtable_bloom()?;
        let cf = ColumnFamilyOptions {
            compression,
            bloom_bits_per_key: args.bloom_bits,
            memtable_bloom_size_ratio,
            memtable_whole_key_filtering,
            write_buffer_size: args.write_buffer_size,
            level0_file_num_compaction_trigger: args.level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger: args.level0_slowdown_writes_trigger,
            level0_stop_writes_trigger: args.level0_stop_writes_trigger,
            max_bytes_for_level_base: args.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: args.max_bytes_for_level_multiplier,
            target_file_size_base: args.target_file_size_base,
            level_compaction_dynamic_level_bytes: args.level_compaction_dynamic_level_bytes,
            disable_auto_compactions: args.disable_auto_compactions,
            enable_blob_files: args.enable_blob_files,
            min_blob_size: args.min_blob_size,
            blob_file_size: args.blob_file_size,
            blob_compression: compression,
            ..Default::default()
        };
        let names = column_family_names(args);
        let opts = Options {
            cache_size: args.cache_size,
            cache_kind: args.cache_kind()?,
            cache_shard_bits: u32::try_from(args.cache_numshardbits).ok(),
            high_pri_pool_ratio: args.cache_high_pri_pool_ratio,
            cache_index_and_filter_blocks: args.cache_index_and_filter_blocks,
            pin_l0_filter_and_index_blocks_in_cache: args.pin_l0_filter_and_index_blocks_in_cache,
            max_background_jobs: args.max_background_jobs,
            max_total_wal_size: args.max_total_wal_size,
            column_families: names.iter().map(|n| (n.clone(), cf.clone())).collect(),
            create_missing_column_families: true,
            cf,
            ..base
        };
        let db = Db::open(dir, opts).map_err(|e| e.to_string())?;
        let mut cfs = vec![db.default_cf()];
        for name in &names {
            cfs.push(db.cf(name).map_err(err)?);
        }
        Ok(StrataEngine {
            db,
            cfs,
            write: WriteOptions {
                sync: args.sync,
                disable_wal: args.disable_wal,
                ..Default::default()
            },
            ttl: args.ttl,
        })
    }
}

/// The column families besides the default one, named as db_bench names them.
pub(super) fn column_family_names(args: &BenchArgs) -> Vec<String> {
    (1..args.num_column_families)
        .map(|i| format!("column_family_name_{i:06}"))
        .collect()
}

fn err(e: strata_engine::Error) -> String {
    e.to_string()
}

impl StrataEngine {
    fn cf_of(&self, key: &[u8]) -> &ColumnFamily {
        &self.cfs[(key_number(key) % self.cfs.len() as u64) as usize]
    }
}

impl BenchEngine for StrataEngine {
    fn name(&self) -> String {
        format!("strata {}", env!("CARGO_PKG_VERSION"))
    }

    fn write(&self, entries: &[(Vec<u8>, &[u8])]) -> Result<(), String> {
        let mut b = WriteBatch::new();
        let expiration = (self.ttl > 0).then(|| SystemClock.now_secs().saturating_add(self.ttl));
        for (k, v) in entries {
            match expiration {
                Some(e) => b.put_until_cf(self.cf_of(k), k, v, e),
                None if self.cfs.len() == 1 => b.put(k, v),
                None => b.put_cf(self.cf_of(k), k, v),
            }
        }
        self.db.write(b, &self.write).map_err(err)
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        let mut b = WriteBatch::new();
        for cf in &self.cfs {
            b.delete_range_cf(cf, start, end);
        }
        self.db.write(b, &self.write).map_err(err)
    }

    fn delete(&self, keys: &[Vec<u8>]) -> Result<(), String> {
        let mut b = WriteBatch::new();
        for k in keys {
            b.delete_cf(self.cf_of(k), k);
        }
        self.db.write(b, &self.write).map_err(err)
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, String> {
        let v = if self.cfs.len() == 1 {
            self.db.get(key)
        } else {
            self.db.get_cf(self.cf_of(key), key)
        };
        Ok(v.map_err(err)?.map(|v| v.len()))
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<usize>>, String> {
        let opts = ReadOptions::default();
        let results = if self.cfs.len() == 1 {
            self.db.multi_get(&opts, keys)
        } else {
            let keyed: Vec<(&ColumnFamily, &Vec<u8>)> =
                keys.iter().map(|k| (self.cf_of(k), k)).collect();
            self.db.multi_get_cf(&opts, &keyed)
        };
        results
            .into_iter()
            .map(|r| r.map(|v| v.map(|v| v.len())).map_err(err))
            .collect()
    }

    fn seek_random(&self, n: u64, next_key: &mut dyn FnMut() -> Vec<u8>) -> Result<u64, String> {
        // One iterator per column family, made on first use.
        let mut iters: Vec<Option<DbIterator>> = (0..self.cfs.len()).map(|_| None).collect();
        let mut found = 0;
        for _ in 0..n {
            let key = next_key();
            let i = (key_number(&key) % self.cfs.len() as u64) as usize;
            let it = match &mut iters[i] {
                Some(it) => it,
                slot => slot.insert(
                    self.db
                        .iter_cf(&ReadOptions::default(), &self.cfs[i])
                        .map_err(err)?,
                ),
            };
            it.seek(&key);
            found += it.valid() as u64;
        }
        for it in iters.iter().flatten() {
            it.status().map_err(err)?;
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64), String> {
        let (mut n, mut bytes) = (0u64, 0u64);
        for cf in &self.cfs {
            let mut it = self.db.iter_cf(&ReadOptions::default(), cf).map_err(err)?;
            it.seek_to_first();
            while it.valid() {
                n += 1;
                bytes += (it.key().len() + it.value().len()) as u64;
                it.next();
            }
            it.status().map_err(err)?;
        }
        Ok((n, bytes))
    }

    fn flush(&self) -> Result<(), String> {
        for cf in &self.cfs {
            self.db.flush_cf(cf).map_err(err)?;
        }
        Ok(())
    }

    fn compact(&self) -> Result<(), String> {
        for cf in &self.cfs {
            self.db.compact_range_cf(cf, None, None).map_err(err)?;
        }
        Ok(())
    }

    fn wait_for_compaction(&self) -> Result<(), String> {
        // Settled on three polls in a row: a finished compaction queues the next one itself,
        // and one poll could fall in between.
        let mut settled_polls = 0;
        loop {
            let p = self.db.properties();
            if let Some(e) = p.background_error {
                return Err(e);
            }
            let settled = p.flushes_running == 0
                && p.compactions_running == 0
                && p.column_families.iter().all(|cf| {
                    cf.immutable_memtables == 0 && cf.levels.iter().all(|l| l.score < 1.0)
                });
            settled_polls = if settled { settled_polls + 1 } else { 0 };
            if settled_polls == 3 {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn disk_bytes_written(&self) -> Option<DiskWrites> {
        let s = self.db.statistics();
        Some(DiskWrites {
            wal: s.wal_bytes,
            flush: s.flush_bytes,
            compaction: s.compaction_bytes_written,
            blob: s.blob_bytes_written,
        })
    }

    fn stats(&self) -> String {
        let p = self.db.properties();
        let s = self.db.statistics();
        let cache = p.block_cache.clone().unwrap_or_default();
        // Levels summed over the column families.
        let mut sums = [(0usize, 0u64, 0u64, 0u64); 7];
        for cf in &p.column_families {
            for l in &cf.levels {
                let e = &mut sums[l.level.min(6)];
                e.0 += l.files;
                e.1 += l.bytes;
                e.2 += l.compactions;
                e.3 += l.range_deletions;
            }
        }
        let mut levels: Vec<String> = sums
            .iter()
            .enumerate()
            .filter(|(_, (files, ..))| *files > 0)
            .map(|(level, (files, bytes, compactions, range_dels))| {
                format!(
                    "L{level}: {files} files, {bytes} bytes, {compactions} compactions, \
                     {range_dels} range tombstones"
                )
            })
            .collect();
        if p.column_families.len() > 1 {
            levels.push(format!(
                "{} column families; {} live WAL files, {} bytes",
                p.column_families.len(),
                p.live_wal_files,
                p.live_wal_bytes
            ));
        }
        format!(
            "{}\nblock cache: {} hits, {} misses (data {}/{}, index {}/{}, filter {}/{} hits/misses), {} bytes used, {} pinned; bloom: {} checked, {} useful; write groups: {} for {} batches\n\
             compactions: {} ({} trivial moves), {} bytes read, {} bytes written; stalls: {} ({} slowdowns, {} stops, {} us)\n\
             range deletions: {} written, {} entries hidden from reads, {} iterator reseeks; compaction dropped {} covered entries and {} tombstones, deleted {} covered tables\n\
             blobs: {} live files, {} bytes ({} live, {} garbage); {} values written, {} bytes; {} reads ({}/{} cache hits/misses); gc relocated {} values, {} bytes; {} files deleted, {} expired, {} evicted",
            levels.join("\n"),
            s.block_cache_hit,
            s.block_cache_miss,
            s.block_cache_data_hit,
            s.block_cache_data_miss,
            s.block_cache_index_hit,
            s.block_cache_index_miss,
            s.block_cache_filter_hit,
            s.block_cache_filter_miss,
            cache.usage,
            cache.pinned_usage,
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
            s.write_stall_micros,
            s.range_deletes,
            s.range_del_hidden,
            s.range_del_reseeks,
            s.compaction_keys_range_deleted,
            s.compaction_range_tombstones_dropped,
            s.tables_dropped_by_range_deletion,
            p.blobs.live_blob_files,
            p.blobs.blob_file_bytes,
            p.blobs.blob_live_bytes,
            p.blobs.blob_garbage_bytes,
            s.blob_values_written,
            s.blob_bytes_written,
            s.blob_reads,
            s.blob_cache_hit,
            s.blob_cache_miss,
            s.blob_gc_relocated_keys,
            s.blob_gc_relocated_bytes,
            s.blob_files_deleted,
            s.blob_files_expired,
            s.blob_fifo_evicted_files
        )
    }

    fn close(&self) -> Result<(), String> {
        self.db.close().map_err(err)
    }

    /// Through a value file in the default column family (which needs --enable_blob_files).
    fn put_streamed(
        &self,
        key: &[u8],
        len: u64,
        fill: &mut dyn FnMut(u64, &mut [u8]),
    ) -> Result<(), String> {
        let mut file = self
            .db
            .create_value_file(&self.db.default_cf(), key)
            .map_err(err)?;
        let mut buf = vec![0u8; 1 << 20];
        while file.len() < len {
            let n = (len - file.len()).min(buf.len() as u64) as usize;
            fill(file.len(), &mut buf[..n]);
            file.write_at(file.len(), &buf[..n]).map_err(err)?;
        }
        self.db
            .write_with_value_file(WriteBatch::new(), file, &self.write)
            .map(|_committed_at| ())
            .map_err(err)
    }

    fn append(&self, key: &[u8], data: &[u8]) -> Result<(), String> {
        let mut batch = WriteBatch::new();
        batch.append(key, data);
        self.db.write(batch, &self.write).map_err(err)
    }

    fn read_range(&self, key: &[u8], offset: u64, len: u64) -> Result<usize, String> {
        let range = self.db.read_range(key, offset, len).map_err(err)?;
        range
            .map(|r| r.bytes.len())
            .ok_or_else(|| format!("{} is absent", String::from_utf8_lossy(key)))
    }

    fn range_reader(&self, key: &[u8]) -> Result<RangeReader<'_>, String> {
        let reader = self
            .db
            .value_reader_cf(&ReadOptions::default(), &self.db.default_cf(), key)
            .map_err(err)?
            .ok_or_else(|| format!("{} is absent", String::from_utf8_lossy(key)))?;
        Ok(Box::new(move |offset, len| {
            reader
                .read_at(offset, len)
                .map(|r| r.bytes.len())
                .map_err(err)
        }))
    }
}
