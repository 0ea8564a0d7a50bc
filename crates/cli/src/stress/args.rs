//! `strata stress` flags, with db_stress's names.

use std::path::PathBuf;

use clap::Args;

/// db_stress's flags (a subset), with db_stress's names.
#[derive(Args, Debug, Clone)]
pub struct StressArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Operations each thread runs.
    #[arg(long = "ops_per_thread", default_value_t = 20_000)]
    pub ops_per_thread: u64,
    /// Keys are 0..max_key.
    #[arg(long = "max_key", default_value_t = 10_000)]
    pub max_key: u64,
    /// Column families every write goes to (the default one included).
    #[arg(long = "column_families", default_value_t = 3)]
    pub column_families: usize,
    /// Percent of operations that are point reads.
    #[arg(long, default_value_t = 40)]
    pub readpercent: u32,
    /// Percent that are puts.
    #[arg(long, default_value_t = 35)]
    pub writepercent: u32,
    /// Percent that are deletes.
    #[arg(long, default_value_t = 10)]
    pub delpercent: u32,
    /// Percent that are range deletions (of up to `--range_width` keys).
    #[arg(long, default_value_t = 5)]
    pub delrangepercent: u32,
    /// Percent that are bounded iterations (forward or backward) over up to `--range_width` keys.
    #[arg(long, default_value_t = 5)]
    pub iterpercent: u32,
    /// Percent that are MultiGets of up to 8 keys.
    #[arg(long, default_value_t = 5)]
    pub multigetpercent: u32,
    /// One operation in this many (per thread) also takes a snapshot and reads a key in every
    /// column family at it, checked against the expected state; the snapshot is held for up to 64
    /// operations and the key read again at it, which must give the same bytes (0: never).
    #[arg(long = "acquire_snapshot_one_in", default_value_t = 20)]
    pub acquire_snapshot_one_in: u32,
    /// Keys a range deletion or an iteration spans at most.
    #[arg(long = "range_width", default_value_t = 10)]
    pub range_width: u64,
    /// Largest value in bytes (values vary from 20 bytes up to this).
    #[arg(long = "value_size", default_value_t = 200)]
    pub value_size: usize,
    /// Closes and reopens the store this many times during the run.
    #[arg(long, default_value_t = 0)]
    pub reopen: u32,
    /// fsync every write.
    #[arg(long)]
    pub sync: bool,
    /// Keep large values in blob files.
    #[arg(long = "enable_blob_files")]
    pub enable_blob_files: bool,
    /// Values at least this long go to blob files.
    #[arg(long = "min_blob_size", default_value_t = 100)]
    pub min_blob_size: u64,
    /// Puts carry this TTL in seconds (at least an hour, so nothing expires during a run).
    #[arg(long)]
    pub ttl: Option<u64>,
    /// The expected-state file (default: the store's directory name plus `.expected`).
    #[arg(long = "expected_state")]
    pub expected_state: Option<PathBuf>,
    /// Seed of the operation stream (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Only verify the store against the expected state, then exit.
    #[arg(long = "verify_only")]
    pub verify_only: bool,
    /// Run the crash-test driver: start, SIGKILL and restart the tool until `--duration` is up.
    #[arg(long = "crash_test")]
    pub crash_test: bool,
    /// Seconds the crash test runs.
    #[arg(long, default_value_t = 120)]
    pub duration: u64,
    /// Longest a child runs before the kill, in seconds (each run is random up to this).
    #[arg(long = "kill_interval", default_value_t = 6)]
    pub kill_interval: u64,
    /// Run until killed (the crash test's children).
    #[arg(long = "until_killed", hide = true)]
    pub until_killed: bool,
}
