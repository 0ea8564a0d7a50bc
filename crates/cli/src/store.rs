//! Where `--db` points: a directory, or `s3://BUCKET/PREFIX`, a store in a bucket worked on in a
//! local cache directory. Every command opens its store through [`options`], so each accepts
//! both.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use strata_bucket::{BucketConfig, BucketFs, BucketUrl, Durability};
use strata_engine::Options;

/// The `--db` flags of a bucket store.
#[derive(clap::Args, Debug, Clone)]
pub struct BucketArgs {
    /// For an `s3://` store: the local working copy and cache (default:
    /// ~/.cache/strata/bucket/BUCKET/PREFIX). One process at a time uses a cache directory.
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// For an `s3://` store: how much of the store's tables and blob files the cache may hold
    /// (bytes, or with K, M, G or T); past it the least recently read go, the bucket keeping
    /// them. Default: no bound.
    // Its own id: `strata bench` has a `--cache_size` (the block cache's) of another type.
    #[arg(long = "cache-size", id = "bucket_cache_size", global = true, value_name = "SIZE", value_parser = parse_size)]
    pub cache_size: Option<u64>,
    /// For an `s3://` store: the S3 endpoint (`http://127.0.0.1:8333`); default
    /// `AWS_ENDPOINT_URL`, else AWS. Credentials and region come from the `AWS_*` variables.
    #[arg(long, global = true, value_name = "URL")]
    pub s3_endpoint: Option<String>,
    /// For an `s3://` store: `local` (the WAL on this disk; tables and the MANIFEST in the
    /// bucket, so losing this machine loses what was not flushed) or `bucket` (a synced write
    /// returns once it is in the bucket).
    #[arg(long, global = true, value_enum, default_value_t = DurabilityArg::Local)]
    pub durability: DurabilityArg,
    /// For an `s3://` store at `bucket` durability: the least milliseconds between two WAL
    /// uploads; synced writes arriving meanwhile share one PUT (each waits up to this long).
    #[arg(long, global = true, value_name = "MS", default_value_t = 0)]
    pub commit_interval_ms: u64,
    /// For an `s3://` store: open its checkpoint NAME (read-only) instead of its newest
    /// version; for `strata clone`, clone it.
    #[arg(long, global = true, value_name = "NAME")]
    pub checkpoint: Option<String>,
    /// Set by `serve --replica-of`: the store is a replica's, in a working copy of its own.
    #[arg(skip)]
    pub replica: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurabilityArg {
    Local,
    Bucket,
}

/// A bucket store's settings, once `--db` named one.
#[derive(Debug)]
struct Bucket {
    url: BucketUrl,
    args: BucketArgs,
    cache_dir: PathBuf,
}

static BUCKET: OnceLock<Bucket> = OnceLock::new();

/// Reads `--db`: the directory the engine opens (a bucket store's cache directory).
pub fn resolve(db: &str, args: &BucketArgs) -> Result<PathBuf, String> {
    if !BucketUrl::is_bucket(db) {
        if args.cache_dir.is_some()
            || args.s3_endpoint.is_some()
            || args.cache_size.is_some()
            || args.checkpoint.is_some()
        {
            return Err(format!(
                "--cache-dir, --cache-size, --s3-endpoint and --checkpoint are for a store in a \
                 bucket (--db s3://…), not {db}"
            ));
        }
        return Ok(PathBuf::from(db));
    }
    let url = BucketUrl::parse(db).map_err(|e| e.to_string())?;
    // A checkpoint's or a replica's working copy is its own: the store's is a writer's.
    let suffix = match (&args.checkpoint, args.replica) {
        (Some(name), _) => {
            strata_bucket::checkpoint::check_name(name).map_err(|e| e.to_string())?;
            Some(format!("@checkpoint-{name}"))
        }
        (None, true) => Some("@replica".to_string()),
        (None, false) => None,
    };
    let cache_dir = match (&args.cache_dir, suffix) {
        (Some(d), _) => d.clone(),
        (None, None) => default_cache_dir(&url)?,
        (None, Some(suffix)) => {
            let dir = default_cache_dir(&url)?;
            let last = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            dir.with_file_name(format!("{last}{suffix}"))
        }
    };
    let bucket = Bucket {
        url,
        args: args.clone(),
        cache_dir: cache_dir.clone(),
    };
    let _ = BUCKET.set(bucket);
    Ok(cache_dir)
}

fn default_cache_dir(url: &BucketUrl) -> Result<PathBuf, String> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or("no --cache-dir, and neither XDG_CACHE_HOME nor HOME is set")?;
    let mut dir = base.join("strata/bucket").join(&url.bucket);
    if !url.prefix.is_empty() {
        dir = dir.join(&url.prefix);
    }
    Ok(dir)
}

/// Whether `--db` named a bucket store.
pub fn is_bucket() -> bool {
    BUCKET.get().is_some()
}

/// The options a command opens the store at `dir` with: the defaults, and for a bucket store
/// the bucket's filesystem, claimed for writing unless `read_only`.
pub fn options(read_only: bool) -> Result<Options, String> {
    if BUCKET.get().is_none() {
        return Ok(Options::default());
    }
    bucket_options(read_only).map(|(_, opts)| opts)
}

/// For a bucket store: its filesystem (a handle on its counters) and the options with it.
pub fn bucket_options(read_only: bool) -> Result<(BucketFs, Options), String> {
    let b = BUCKET
        .get()
        .ok_or("--db names a directory, not a store in a bucket")?;
    bucket_options_in(read_only, b.cache_dir.clone())
}

/// `bucket_options`, with the working copy in `cache_dir` (a second open in one process).
pub fn bucket_options_in(
    read_only: bool,
    cache_dir: PathBuf,
) -> Result<(BucketFs, Options), String> {
    let b = BUCKET
        .get()
        .ok_or("--db names a directory, not a store in a bucket")?;
    if let (Some(name), false) = (&b.args.checkpoint, read_only) {
        return Err(format!(
            "checkpoint {name} opens read-only: this command writes (serve and mount take \
             --read-only)"
        ));
    }
    let config = BucketConfig {
        endpoint: b.args.s3_endpoint.clone(),
        durability: match b.args.durability {
            DurabilityArg::Local => Durability::Local,
            DurabilityArg::Bucket => Durability::Remote,
        },
        read_only,
        checkpoint: b.args.checkpoint.clone(),
        cache_size: b.args.cache_size,
        commit_interval: std::time::Duration::from_millis(b.args.commit_interval_ms),
        ..BucketConfig::new(b.url.clone(), cache_dir)
    };
    let fs = BucketFs::open(&config).map_err(|e| format!("cannot open {}: {e}", b.url))?;
    let opts = Options {
        filesystem: Arc::new(fs.clone()),
        ..Options::default()
    };
    Ok((fs, opts))
}

/// `strata bucket check URL`: the conformance check, with the flags' endpoint.
pub fn check(url: &str, args: &BucketArgs) -> Result<(), String> {
    let url = BucketUrl::parse(url).map_err(|e| e.to_string())?;
    let client = strata_bucket::Client::connect(&url, args.s3_endpoint.as_deref(), None)
        .map_err(|e| e.to_string())?;
    let who = format!("check-{}", std::process::id());
    strata_bucket::check_conformance(&client, &who).map_err(|e| e.to_string())?;
    println!(
        "{url}: conditional writes are honoured (a create-only PUT over an object is refused)"
    );
    Ok(())
}

/// For messages: what `--db` named.
pub fn describe(dir: &Path) -> String {
    match BUCKET.get() {
        Some(b) => format!("{} (cached in {})", b.url, dir.display()),
        None => dir.display().to_string(),
    }
}

/// `1048576`, `512M`, `10G`: bytes.
fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or a number with K, M, G or T)"))?;
    let shift = match unit
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("{s:?}: the unit is K, M, G or T")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is more bytes than a 64-bit count holds"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sizes_parse_with_and_without_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("10G").unwrap(), 10 << 30);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert!(parse_size("").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
