//! `strata bench --db s3://BUCKET/PREFIX`: the workloads on a store on the local disk first,
//! then the same on the store in the bucket, in one run; then what the bucket was asked for:
//! requests per GiB written, bytes uploaded per byte written, and the requests of the store
//! left idle.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_bucket::BucketFs;
use strata_engine::{FileSystem, Options};

use super::BenchArgs;

pub fn run(cache_dir: &Path, args: &BenchArgs) -> Result<(), String> {
    if args.engine != "strata" {
        return Err(format!(
            "--engine {} runs on a directory; a store in a bucket benchmarks with --engine strata",
            args.engine
        ));
    }
    let mut local = cache_dir.as_os_str().to_owned();
    local.push(".local-bench");
    let local = Path::new(&local);
    println!("== on the local disk: {}", local.display());
    super::run_on(local, args, Options::default())?;

    let (fs, base) = crate::store::bucket_options(false)?;
    if !args.use_existing_db
        && fs
            .list(fs.root())
            .map_err(|e| e.to_string())?
            .iter()
            .any(|n| n == "CURRENT")
    {
        return Err(format!(
            "{} already holds a store: a benchmark starts from an empty one (pick a fresh \
             prefix, or --use_existing_db)",
            crate::store::describe(cache_dir)
        ));
    }
    println!(
        "== in the bucket: {} at {} durability",
        crate::store::describe(cache_dir),
        match fs.durability() {
            strata_bucket::Durability::Local => "local",
            strata_bucket::Durability::Remote => "bucket",
        }
    );
    let existing = BenchArgs {
        use_existing_db: true,
        ..args.clone()
    };
    let written = super::run_on(cache_dir, &existing, base)?;
    let used = fs.requests();
    let total = used.gets + used.puts + used.deletes + used.lists;
    println!(
        "bucket       : {} PUTs, {} GETs, {} LISTs, {} DELETEs; {:.1} MB up, {:.1} MB down",
        used.puts,
        used.gets,
        used.lists,
        used.deletes,
        used.bytes_up as f64 / 1e6,
        used.bytes_down as f64 / 1e6
    );
    if written > 0 {
        let gib = written as f64 / (1u64 << 30) as f64;
        println!(
            "bucket       : {:.1} requests per GiB written; {:.2} bytes up per byte written",
            total as f64 / gib,
            used.bytes_up as f64 / written as f64
        );
    }
    idle(&fs, Duration::from_secs(args.bucket_idle_secs))
}

/// Keeps the store open and unused for `span`, and prints the requests it made meanwhile.
fn idle(fs: &BucketFs, span: Duration) -> Result<(), String> {
    if span.is_zero() {
        return Ok(());
    }
    let root = fs.root().to_path_buf();
    let db = strata_engine::Db::open(
        &root,
        Options {
            filesystem: Arc::new(fs.clone()),
            ..Options::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let before = fs.requests();
    let started = Instant::now();
    std::thread::sleep(span);
    let after = fs.requests();
    drop(db);
    let made = (after.gets + after.puts + after.deletes + after.lists)
        - (before.gets + before.puts + before.deletes + before.lists);
    println!(
        "bucket idle  : {made} requests in {:.0} s ({:.2} per second)",
        started.elapsed().as_secs_f64(),
        made as f64 / started.elapsed().as_secs_f64()
    );
    Ok(())
}
