//! `strata bench`: db_bench's workloads, flag names and output lines, over Strata or (with the
//! `rocksdb` feature) RocksDB with equivalent options, so both can be compared in one run.

mod appends;
mod bucket;
mod engine;
#[cfg(feature = "fjall")]
mod fjall;
mod memory;
mod page_cache;
mod ranges;
#[cfg(feature = "rocksdb")]
mod rocks;
mod wasm;
mod workloads;

use std::path::{Path, PathBuf};

use clap::Args;
use strata_engine::CacheKind;

pub use engine::BenchEngine;

fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        other => Err(format!("expected true, false, 1 or 0, got {other}")),
    }
}

/// db_bench's flags (the subset Strata implements), with db_bench's names.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Comma-separated workloads, run in order on one store: fillseq, fillrandom, overwrite,
    /// readrandom, readmissing, multireadrandom, readseq, seekrandom, readwhilewriting, compact,
    /// flush, waitforcompaction, stats, dropcache (the OS page cache lets go of the store's
    /// files, so the next reads go to the device), and readrange (--reads 4 KiB reads at random
    /// offsets of one --value_size value, beside pread on a plain file; needs
    /// --enable_blob_files), and appendrandom (--appends appends of --append_size random bytes
    /// to one --value_size value, beside write (and fdatasync with --sync) on a plain file).
    #[arg(
        long,
        default_value = "fillseq,fillrandom,readrandom,readseq,seekrandom"
    )]
    pub benchmarks: String,
    /// Number of keys.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub num: u64,
    /// Reads for read workloads (-1: as many as --num).
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    pub reads: i64,
    /// Bytes per key.
    #[arg(long = "key_size", default_value_t = 16)]
    pub key_size: usize,
    /// Bytes per value.
    #[arg(long = "value_size", default_value_t = 100)]
    pub value_size: usize,
    /// Threads running each workload (operations are split between them).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Keep the store's existing data instead of starting empty.
    #[arg(long = "use_existing_db", num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub use_existing_db: bool,
    /// fsync every write.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub sync: bool,
    /// Skip the WAL.
    #[arg(long = "disable_wal", num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub disable_wal: bool,
    /// none or zstd.
    #[arg(long = "compression_type", default_value = "none")]
    pub compression_type: String,
    /// Block cache bytes.
    #[arg(long = "cache_size", default_value_t = 8 << 20)]
    pub cache_size: usize,
    /// Block cache eviction: lru_cache, or clock_cache (RocksDB: hyper_clock_cache, also accepted).
    #[arg(long = "cache_type", default_value = "lru_cache")]
    pub cache_type: String,
    /// Block cache shards are 2^this (-1: chosen from the capacity).
    #[arg(long = "cache_numshardbits", default_value_t = -1, allow_hyphen_values = true)]
    pub cache_numshardbits: i32,
    /// Share of the LRU cache kept for index and filter blocks and blocks read twice (Strata only:
    /// RocksDB's binding does not expose it; its default is the same 0.5).
    #[arg(long = "cache_high_pri_pool_ratio", default_value_t = 0.5)]
    pub cache_high_pri_pool_ratio: f64,
    /// Keep index and filter blocks in the block cache instead of in each open table.
    #[arg(long = "cache_index_and_filter_blocks", num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub cache_index_and_filter_blocks: bool,
    /// With --cache_index_and_filter_blocks, L0 tables hold theirs so they are never evicted.
    #[arg(long = "pin_l0_filter_and_index_blocks_in_cache", num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    /// Memtable: skip_list, or bloom (the skip list with a whole-key Bloom filter in front,
    /// --memtable_bloom_size_ratio or 0.1 of the write buffer).
    #[arg(long = "memtablerep", default_value = "skip_list")]
    pub memtablerep: String,
    /// Bloom filter bits per key (0: no filter).
    #[arg(long = "bloom_bits", default_value_t = 10)]
    pub bloom_bits: u32,
    /// Memtable Bloom filter size as a fraction of the write buffer (0: none).
    #[arg(long = "memtable_bloom_size_ratio", default_value_t = 0.0)]
    pub memtable_bloom_size_ratio: f64,
    /// Put whole keys in the memtable Bloom filter.
    #[arg(long = "memtable_whole_key_filtering", num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub memtable_whole_key_filtering: bool,
    /// Memtable size in bytes.
    #[arg(long = "write_buffer_size", default_value_t = 64 << 20)]
    pub write_buffer_size: usize,
    /// Column families the keys are spread over (key number modulo this), the default one
    /// included, as db_bench does.
    #[arg(long = "num_column_families", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub num_column_families: u32,
    /// Keys per write batch of the fill workloads and per multireadrandom batch, as db_bench's
    /// `--batch_size`. Unset: fills write one key per batch and multireadrandom reads 32.
    #[arg(long = "batch_size", value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: Option<u64>,
    /// multireadrandom: a batch's keys are a random first key and then every `stride`-th key after
    /// it (0: every key random), as db_bench does.
    #[arg(long = "multiread_stride", default_value_t = 0)]
    pub multiread_stride: u64,
    /// multireadrandom through the engine's batched MultiGet (true) or a loop of gets (false).
    #[arg(long = "multiread_batched", num_args = 0..=1, default_missing_value = "true", default_value = "true", value_parser = parse_bool)]
    pub multiread_batched: bool,
    /// Fill workloads write a range deletion every this many writes (0: none), as db_bench does.
    #[arg(long = "writes_per_range_tombstone", default_value_t = 0)]
    pub writes_per_range_tombstone: u64,
    /// Writes before the first range deletion.
    #[arg(long = "writes_before_delete_range", default_value_t = 0)]
    pub writes_before_delete_range: u64,
    /// Keys each range deletion spans, from a random first key.
    #[arg(long = "range_tombstone_width", default_value_t = 100)]
    pub range_tombstone_width: u64,
    /// Range deletions written in all (over every fill workload and thread).
    #[arg(long = "max_num_range_tombstones", default_value_t = 0)]
    pub max_num_range_tombstones: u64,
    /// Write each range deletion as point deletions of every key it spans instead (one batch),
    /// for comparison.
    #[arg(long = "expand_range_tombstones", num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub expand_range_tombstones: bool,
    /// Live WAL bytes past which the column families holding the oldest WAL are flushed
    /// (0: four times every column family's memtable budget).
    #[arg(long = "max_total_wal_size", default_value_t = 0)]
    pub max_total_wal_size: u64,
    /// Background threads.
    #[arg(long = "max_background_jobs", default_value_t = 2)]
    pub max_background_jobs: usize,
    /// L0 files that trigger a compaction.
    #[arg(long = "level0_file_num_compaction_trigger", default_value_t = 4)]
    pub level0_file_num_compaction_trigger: usize,
    /// L0 files at which writes slow down.
    #[arg(long = "level0_slowdown_writes_trigger", default_value_t = 20)]
    pub level0_slowdown_writes_trigger: usize,
    /// L0 files at which writes stop.
    #[arg(long = "level0_stop_writes_trigger", default_value_t = 36)]
    pub level0_stop_writes_trigger: usize,
    /// Target bytes of the first level below L0.
    #[arg(long = "max_bytes_for_level_base", default_value_t = 256 << 20)]
    pub max_bytes_for_level_base: u64,
    /// Growth factor between levels.
    #[arg(long = "max_bytes_for_level_multiplier", default_value_t = 10)]
    pub max_bytes_for_level_multiplier: u64,
    /// Compaction output file size.
    #[arg(long = "target_file_size_base", default_value_t = 64 << 20)]
    pub target_file_size_base: u64,
    /// Size levels from the bottom up.
    #[arg(long = "level_compaction_dynamic_level_bytes", num_args = 0..=1, default_missing_value = "true", default_value = "true", value_parser = parse_bool)]
    pub level_compaction_dynamic_level_bytes: bool,
    /// Turn automatic compactions off.
    #[arg(long = "disable_auto_compactions", num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub disable_auto_compactions: bool,
    /// readwhilewriting: writes per second for the writer thread (0: as fast as it can).
    #[arg(long = "benchmark_write_rate_limit", default_value_t = 0)]
    pub benchmark_write_rate_limit: u64,
    /// Key-value separation: values of at least --min_blob_size bytes go to blob files.
    #[arg(long = "enable_blob_files", num_args = 0..=1, default_missing_value = "true", default_value = "false", value_parser = parse_bool)]
    pub enable_blob_files: bool,
    /// Smallest value stored in a blob file.
    #[arg(long = "min_blob_size", default_value_t = 4096)]
    pub min_blob_size: usize,
    /// Size at which a blob file is sealed and another begun.
    #[arg(long = "blob_file_size", default_value_t = 256 << 20)]
    pub blob_file_size: u64,
    /// Fill workloads write every value with this TTL in seconds (0: none; Strata only).
    #[arg(long, default_value_t = 0)]
    pub ttl: u64,
    /// Engine: strata (native), wasm (the same engine as a WebAssembly component under
    /// wasmtime), rocksdb (needs the `rocksdb` cargo feature), fjall (the `fjall` feature, on by
    /// default), or memory (a BTreeMap behind a lock: the memory-speed reference).
    #[arg(long, default_value = "strata")]
    pub engine: String,
    /// Seed for key and value generation.
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
    /// appendrandom: how many appends.
    #[arg(long, default_value_t = 10_000)]
    pub appends: u64,
    /// appendrandom: bytes per append.
    #[arg(long = "append_size", default_value_t = 100)]
    pub append_size: usize,
    /// A store in a bucket: seconds the store stays open and idle after the workloads, to count
    /// the requests an idle store makes.
    #[arg(long = "bucket_idle_secs", default_value_t = 10)]
    pub bucket_idle_secs: u64,
}

impl BenchArgs {
    /// Keys per write batch of a fill.
    pub fn write_batch(&self) -> u64 {
        self.batch_size.unwrap_or(1)
    }

    /// Keys per multireadrandom batch.
    pub fn multiread_batch(&self) -> u64 {
        self.batch_size.unwrap_or(32)
    }

    /// The memtable Bloom filter's (size ratio, whole-key filtering) after --memtablerep.
    pub fn memtable_bloom(&self) -> Result<(f64, bool), String> {
        match self.memtablerep.as_str() {
            "skip_list" | "skiplist" => Ok((
                self.memtable_bloom_size_ratio,
                self.memtable_whole_key_filtering,
            )),
            "bloom" => Ok((
                if self.memtable_bloom_size_ratio > 0.0 {
                    self.memtable_bloom_size_ratio
                } else {
                    0.1
                },
                true,
            )),
            other => Err(format!("unknown --memtablerep {other}: skip_list or bloom")),
        }
    }

    /// The eviction --cache_type asks for.
    pub fn cache_kind(&self) -> Result<CacheKind, String> {
        match self.cache_type.as_str() {
            "lru_cache" | "lru" => Ok(CacheKind::Lru),
            "clock_cache" | "hyper_clock_cache" | "clock" => Ok(CacheKind::Clock),
            other => Err(format!(
                "unknown --cache_type {other}: lru_cache or clock_cache"
            )),
        }
    }

    pub fn reads(&self) -> u64 {
        if self.reads < 0 {
            self.num
        } else {
            self.reads as u64
        }
    }
}

/// `strata bench`'s flags parsed from `flags`, as the command line gives them.
#[cfg(test)]
fn parse_flags(flags: &[&str]) -> BenchArgs {
    use clap::Parser;
    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        bench: BenchArgs,
    }
    Command::parse_from(std::iter::once("bench").chain(flags.iter().copied())).bench
}

pub fn run(default_db: &Path, args: BenchArgs) -> Result<(), String> {
    if args.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    if args.key_size < 8 {
        return Err("--key_size must be at least 8".into());
    }
    if crate::store::is_bucket() {
        return bucket::run(default_db, &args);
    }
    run_on(default_db, &args, strata_engine::Options::default()).map(|_| ())
}

/// Whether `dir` holds a store of one of the engines: Strata's and RocksDB's `CURRENT` or
/// `IDENTITY`, or fjall's `version` file, which begins with its magic bytes.
fn holds_a_store(dir: &Path) -> bool {
    let fjall_version = std::fs::read(dir.join("version")).unwrap_or_default();
    dir.join("CURRENT").exists()
        || dir.join("IDENTITY").exists()
        || fjall_version.starts_with(b"FJL")
}

/// The workloads on the store at `default_db`, opened with `base`'s storage; returns the key
/// and value bytes they wrote.
fn run_on(
    default_db: &Path,
    args: &BenchArgs,
    base: strata_engine::Options,
) -> Result<u64, String> {
    let args = args.clone();
    let dir: PathBuf = default_db.to_path_buf();
    if !args.use_existing_db && dir.exists() {
        let empty = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .next()
            .is_none();
        // A benchmark starts from an empty store, as db_bench does, but never deletes what is not one.
        if !empty && !holds_a_store(&dir) {
            return Err(format!(
                "{} is not empty and holds no store: refusing to delete it (pick another --db)",
                dir.display()
            ));
        }
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    let engine: Box<dyn BenchEngine> = match args.engine.as_str() {
        "strata" => Box::new(engine::StrataEngine::open(&dir, &args, base)?),
        "wasm" => Box::new(wasm::WasmEngine::open(&dir, &args)?),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Box::new(rocks::RocksEngine::open(&dir, &args)?),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => {
            return Err(
                "this strata was built without RocksDB: rebuild with `--features rocksdb`".into(),
            );
        }
        #[cfg(feature = "fjall")]
        "fjall" => Box::new(fjall::FjallEngine::open(&dir, &args)?),
        #[cfg(not(feature = "fjall"))]
        "fjall" => {
            return Err(
                "this strata was built without fjall: rebuild with `--features fjall`".into(),
            );
        }
        "memory" => Box::new(memory::MemoryEngine::open(&args)?),
        other => {
            return Err(format!(
                "unknown engine {other}: strata, wasm, rocksdb, fjall or memory"
            ));
        }
    };
    println!("Engine:     {}", engine.name());
    println!("Keys:       {} bytes each", args.key_size);
    println!("Values:     {} bytes each", args.value_size);
    println!("Entries:    {}", args.num);
    println!("Compression: {}", args.compression_type);
    println!("------------------------------------------------");
    let counters = workloads::RunCounters::default();
    for name in args
        .benchmarks
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let line = workloads::run(name, engine.as_ref(), &dir, &args, &counters)?;
        println!("{line}");
    }
    engine.close()?;
    Ok(counters
        .user_bytes
        .load(std::sync::atomic::Ordering::Relaxed))
}
