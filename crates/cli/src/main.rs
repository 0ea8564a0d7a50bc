//! `strata`: data commands over a store (ldb-style), and `strata bench` (db_bench-style).

mod apibench;
mod bench;
mod codec;
mod demo;
mod fsbench;
mod log_format;
mod log_lines;
mod mount;
mod replica_bench;
mod serve;
mod serve_backups;
mod store;
mod stress;
mod versions;
mod wasm;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strata_engine::{
    Clock, ColumnFamily, ColumnFamilyOptions, Db, Options, ReadOptions, WriteBatch, WriteOptions,
};

/// Where `--db` points unless given.
const DEFAULT_DB: &str = "./strata-data";

#[derive(Parser, Debug)]
#[command(
    name = "strata",
    version,
    about = "Strata: an LSM-tree key-value store"
)]
struct Cli {
    /// The store: a directory, or `s3://BUCKET/PREFIX` for a store in an S3-compatible bucket
    /// (see --cache-dir, --s3-endpoint and --durability).
    #[arg(long, global = true, default_value = DEFAULT_DB)]
    db: String,
    #[command(flatten)]
    bucket: store::BucketArgs,
    /// The column family the data commands, `flush` and `compact` work on.
    #[arg(long, global = true, default_value = "default")]
    cf: String,
    /// Run the data commands natively, or through the WebAssembly component (sandboxed to the
    /// store's directory). `strata bench --engine` is the benchmark's own choice.
    #[arg(long, value_enum, default_value_t = EngineChoice::Native)]
    engine: EngineChoice,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum EngineChoice {
    Native,
    Wasm,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Sets KEY to VALUE (UTF-8, or hex with a 0x prefix).
    Put {
        key: String,
        value: String,
        /// Sync the WAL before returning: `--sync` as far as the store's default,
        /// `--sync=local` to this machine's disk, `--sync=bucket` to the store's bucket.
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "default", value_enum)]
        sync: Option<SyncTo>,
        /// Seconds until the key expires (it then reads as absent).
        #[arg(long, conflicts_with_all = ["append", "offset"])]
        ttl: Option<u64>,
        /// Append VALUE to the key's value (a missing key starts empty); costs VALUE, not the
        /// value's size.
        #[arg(long, conflicts_with = "offset")]
        append: bool,
        /// Write VALUE at byte N of the key's value, which must exist (zeros fill a gap past its
        /// end).
        #[arg(long, value_name = "N")]
        offset: Option<u64>,
    },
    /// Prints the value of KEY: text as is (lines and tabs included), anything else as 0x hex.
    Get {
        key: String,
        /// Write the value's bytes unchanged, nothing added (`get --raw KEY > FILE`); the value
        /// is streamed, never held whole.
        #[arg(long)]
        raw: bool,
        /// Only these bytes: `A-B` (inclusive), `A-` (to the end) or `-N` (the last N).
        #[arg(long, value_name = "A-B", allow_hyphen_values = true)]
        range: Option<String>,
    },
    /// Deletes KEY.
    Delete {
        key: String,
        /// Sync the WAL before returning (`--sync`, `--sync=local`, `--sync=bucket`).
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "default", value_enum)]
        sync: Option<SyncTo>,
    },
    /// Deletes every key in [FROM, TO) with one range tombstone.
    DeleteRange {
        /// First key deleted (inclusive).
        #[arg(long)]
        from: String,
        /// End of the range (exclusive).
        #[arg(long)]
        to: String,
        /// Sync the WAL before returning (`--sync`, `--sync=local`, `--sync=bucket`).
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "default", value_enum)]
        sync: Option<SyncTo>,
    },
    /// Prints keys and values in order.
    Scan {
        /// Only keys starting with this prefix.
        #[arg(long, conflicts_with_all = ["from", "to"])]
        prefix: Option<String>,
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// At most this many entries.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Prints the store's properties and statistics as JSON.
    Stats,
    /// Flushes the memtable to a table.
    Flush,
    /// Compacts the store (or `--from`/`--to`) down to its deepest level.
    Compact {
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key (inclusive).
        #[arg(long)]
        to: Option<String>,
    },
    /// Creates, drops or lists column families.
    #[command(subcommand)]
    Cf(CfCommand),
    /// Inspects blob files.
    #[command(subcommand)]
    Blob(BlobCommand),
    /// Runs db_bench-style workloads (flags as db_bench names them).
    Bench(Box<bench::BenchArgs>),
    /// Runs db_stress-style randomized operations verified against an expected-state file, or
    /// with --crash_test, kills and restarts such runs to check recovery.
    Stress(Box<stress::StressArgs>),
    /// Lets the owner's group read the store: its directory becomes 0750 and its files 0640,
    /// and files made later follow the directory (`chmod 700 DIR` and `chmod 600 DIR/*` make it
    /// private again).
    Share,
    /// Checks every checksum of every file of a closed store and that each file the MANIFEST
    /// names exists; exits non-zero when anything is damaged. Warns about file modes looser
    /// than the store's directory says (a private store's 0640 file, anything other accounts
    /// may read).
    Verify {
        /// As JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Mounts the column family `--cf` as a filesystem at MOUNTPOINT: keys are paths, values are
    /// file contents. Runs in the background once mounted unless --foreground.
    Mount(mount::MountArgs),
    /// Serves the store: the REST API (and console) on --listen, and with --mount the same
    /// store as a filesystem, until Ctrl-C or SIGTERM.
    Serve(serve::ServeArgs),
    /// Commands about buckets (`--db s3://BUCKET/PREFIX`).
    #[command(subcommand)]
    Bucket(BucketCommand),
    /// Named versions of a store in a bucket (`--db s3://…`), made beside its writer.
    #[command(subcommand)]
    Checkpoint(versions::CheckpointCommand),
    /// Makes a writable store from another's newest version (or --checkpoint NAME's), in
    /// seconds: in the same bucket it refers to the source's objects instead of copying them.
    Clone(versions::CloneArgs),
    /// Backups of a store in a bucket (`--db s3://…`) to another bucket or prefix.
    #[command(subcommand)]
    Backup(versions::BackupCommand),
    /// The REST API over loopback from many connections beside the engine doing the same work
    /// (GET, PUT, batchGet of 100, scan of 100), or a mixed load read back (--mixed-only). Needs
    /// a new store at --db.
    ApiBench(apibench::ApiBenchArgs),
    /// A writer and a replica of a new store in a bucket (`--db s3://…`), in one process: how
    /// long the replica takes to show a burst (1 GiB unless told), and how far behind it runs
    /// under a steady load, beside the floor its poll interval sets.
    ReplicaBench(replica_bench::ReplicaBenchArgs),
    /// The mount against a plain directory: small-file create, stat, read, rename and unlink,
    /// `ls -l` of a large directory, sequential write and read, a directory rename. Needs a new
    /// store at --db.
    FsBench(fsbench::FsBenchArgs),
    /// Unmounts a filesystem `strata mount` mounted; the mount process then closes the store.
    Umount { mountpoint: PathBuf },
    /// Rebuilds the MANIFEST of a damaged store from its intact tables, blob files and WALs
    /// (RocksDB's RepairDB), keeps damaged files aside in DIR/lost/, compacts, and reports what
    /// it kept and lost. The way out when an open fails with a corruption error.
    Repair {
        /// As JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum BlobCommand {
    /// Prints the column family's blob files: number, size, records, live and garbage bytes,
    /// TTL and expiration range, state.
    List {
        /// As JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum BucketCommand {
    /// Checks that the S3 server at --s3-endpoint refuses a create-only PUT over an existing
    /// object, as a store's fencing needs (a store refuses to open for writing otherwise).
    Check {
        /// s3://BUCKET/PREFIX: where the probe object is written (and deleted).
        url: String,
    },
}

#[derive(Subcommand, Debug)]
enum CfCommand {
    /// Creates a column family (with the default column family options).
    Create { name: String },
    /// Drops a column family and its data.
    Drop { name: String },
    /// Prints the column families, one per line.
    List,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A server outlives whoever read its first lines (`strata serve | head -1`, a supervisor
    // that closed its stdout): for it a broken pipe is an error to report, never the end.
    if !matches!(cli.command, Command::Serve(_) | Command::Mount(_)) {
        restore_sigpipe();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Output piped into a reader that stops early (`strata scan | head -1`) ends the process quietly,
/// as it does for other Unix tools, instead of a panic in `println!`.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called in `main` before any other thread exists (parsing the arguments starts
    // none), and SIG_DFL is a valid disposition for SIGPIPE. Exercised by the CLI test that
    // pipes `scan` into `head`.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// How a command opens the store. Only commands that write may create it, so a mistyped `--db`
/// says there is no store instead of making an empty one; commands that only read open it
/// read-only, so they work beside a process writing it and write nothing themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Write, creating the store if there is none.
    Create,
    /// Write to an existing store.
    Write,
    /// Read an existing store.
    Read,
}

fn open(dir: &PathBuf, access: Access) -> Result<Db, String> {
    let opts = Options {
        create_if_missing: access == Access::Create,
        ..store::options(access == Access::Read)?
    };
    let opened = match access {
        Access::Read => Db::open_read_only(dir, opts),
        Access::Create | Access::Write => Db::open(dir, opts),
    };
    opened.map_err(|e| format!("cannot open {}: {e}", dir.display()))
}

/// Opens the store and looks up the column family `--cf` names.
fn open_cf(dir: &PathBuf, name: &str, access: Access) -> Result<(Db, ColumnFamily), String> {
    let db = open(dir, access)?;
    let cf = db.cf(name).map_err(|e| e.to_string())?;
    Ok((db, cf))
}

/// Writes one batch, filled by `fill`, to the column family `cf_name`.
/// Writes bytes `start..end` of `reader`'s value to stdout: streamed as they are with `raw`,
/// else as text (read whole, then escaped).
fn get_part(
    reader: &mut strata_engine::ValueReader,
    start: u64,
    end: u64,
    raw: bool,
) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom, Write};
    reader
        .seek(SeekFrom::Start(start))
        .map_err(|e| format!("read: {e}"))?;
    let mut part = reader.take(end - start);
    if !raw {
        let mut bytes = Vec::new();
        part.read_to_end(&mut bytes)
            .map_err(|e| format!("read: {e}"))?;
        return codec::print_value(&bytes, false);
    }
    let mut out = std::io::stdout().lock();
    std::io::copy(&mut part, &mut out)
        .and_then(|_| out.flush())
        .map_err(|e| format!("get: {e}"))
}

fn write_one(
    dir: &PathBuf,
    cf_name: &str,
    access: Access,
    sync: Option<SyncTo>,
    fill: impl FnOnce(&Db, &mut WriteBatch, &ColumnFamily) -> Result<(), String>,
) -> Result<(), String> {
    let (db, cf) = open_cf(dir, cf_name, access)?;
    let mut batch = WriteBatch::new();
    fill(&db, &mut batch, &cf)?;
    let opts = WriteOptions {
        sync: sync.is_some(),
        durability: sync.and_then(SyncTo::durability),
        ..Default::default()
    };
    db.write(batch, &opts).map_err(|e| e.to_string())
}

/// How far a write is synced: `--sync` alone is the store's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SyncTo {
    #[value(hide = true)]
    Default,
    Local,
    Bucket,
}

impl SyncTo {
    fn durability(self) -> Option<strata_engine::Durability> {
        match self {
            SyncTo::Default => None,
            SyncTo::Local => Some(strata_engine::Durability::Local),
            SyncTo::Bucket => Some(strata_engine::Durability::Remote),
        }
    }
}

/// True when `dir` holds anything a store is made of (a CURRENT may be missing or damaged).
fn holds_store_files(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name == "CURRENT"
                || name.starts_with("MANIFEST-")
                || [".sst", ".log", ".blob"].iter().any(|s| name.ends_with(s))
        })
    })
}

fn verify(dir: &std::path::Path, json: bool) -> Result<(), String> {
    let opts = store::options(true)?;
    if !holds_store_files(dir) {
        return Err(format!("no store at {}", store::describe(dir)));
    }
    let report = strata_engine::verify_store(dir, &opts)
        .map_err(|e| format!("cannot verify {}: {e}", dir.display()))?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
    } else {
        println!("file\tkind\tbytes\tentries\tstatus");
        for f in &report.files {
            let status = match (&f.problem, &f.note) {
                (Some(problem), _) => problem.clone(),
                (None, Some(note)) => format!("ok: {note}"),
                (None, None) => "ok".to_string(),
            };
            println!(
                "{}\t{}\t{}\t{}\t{status}",
                f.name, f.kind, f.bytes, f.entries
            );
        }
    }
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    match report.damaged().count() {
        0 => Ok(()),
        n => Err(format!(
            "{n} of {} files damaged (`strata repair` rebuilds the store from the intact ones)",
            report.files.len()
        )),
    }
}

fn share(dir: &std::path::Path) -> Result<(), String> {
    if store::is_bucket() {
        return Err(
            "share is for a store in a directory; a bucket's access is the bucket's policy".into(),
        );
    }
    // Never the modes of a directory that holds no store (a mistyped `--db ~`).
    if !holds_store_files(dir) {
        return Err(format!("no store at {}", dir.display()));
    }
    let opts = Options {
        create_if_missing: false,
        share_with_group: true,
        ..Options::default()
    };
    let db = Db::open(dir, opts).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    db.close().map_err(|e| e.to_string())?;
    println!(
        "{}: shared with its owner's group (directory 0750, files 0640)",
        dir.display()
    );
    Ok(())
}

fn repair(dir: &std::path::Path, json: bool) -> Result<(), String> {
    let opts = store::options(false)?;
    if !holds_store_files(dir) {
        return Err(format!("no store at {}", store::describe(dir)));
    }
    let report = strata_engine::repair_store(dir, &opts)
        .map_err(|e| format!("cannot repair {}: {e}", dir.display()))?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    if !report.manifest_read {
        println!(
            "no MANIFEST could be read: every intact table was put back, so keys deleted before \
             may have returned"
        );
    }
    println!(
        "kept {} tables and {} blob files; replayed {} WAL records into {} tables",
        report.tables_kept,
        report.blob_files_kept,
        report.wal_records_replayed,
        report.tables_from_wals
    );
    println!("column families: {}", report.column_families.join(", "));
    for lost in &report.lost {
        println!("lost: {}: {}", lost.name, lost.reason);
    }
    if !report.lost.is_empty() {
        println!(
            "what is lost is kept in {}, where it exists",
            dir.join("lost").display()
        );
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), String> {
    let err = |e: strata_engine::Error| e.to_string();
    match &cli.command {
        Command::Bucket(BucketCommand::Check { url }) => return store::check(url, &cli.bucket),
        Command::Checkpoint(c) => return versions::checkpoint(&cli.db, &cli.bucket, c),
        Command::Clone(c) => return versions::clone(&cli.bucket, c),
        Command::Backup(c) => return versions::backup(&cli.db, &cli.bucket, c),
        _ => {}
    }
    if matches!(&cli.command, Command::Serve(a) if a.backup_to.is_some())
        && cli.bucket.checkpoint.is_some()
    {
        return Err(
            "--backup-to backs up the store's newest version, and --checkpoint serves another: \
             serve the newest version to back it up"
                .into(),
        );
    }
    let (db_arg, bucket) = match &cli.command {
        Command::Serve(args) => match &args.replica_of {
            Some(_) if cli.db != DEFAULT_DB => {
                return Err(format!(
                    "--replica-of names the store a replica serves; --db {} names another",
                    cli.db
                ));
            }
            Some(_) if cli.bucket.checkpoint.is_some() => {
                return Err(
                    "--checkpoint pins a version that never changes, and a replica follows the \
                     newest: serve a checkpoint with --db s3://… --checkpoint NAME --read-only"
                        .into(),
                );
            }
            Some(source) => {
                let replica = store::BucketArgs {
                    replica: true,
                    ..cli.bucket.clone()
                };
                (source.clone(), replica)
            }
            None => (cli.db.clone(), cli.bucket.clone()),
        },
        _ => (cli.db.clone(), cli.bucket.clone()),
    };
    // A local store served with `--backup-to s3://…` takes `--s3-endpoint` for its backups.
    let backs_up = matches!(&cli.command, Command::Serve(a) if a.backup_to.is_some());
    let db = match backs_up && !strata_bucket::BucketUrl::is_bucket(&db_arg) {
        true => store::resolve(
            &db_arg,
            &store::BucketArgs {
                s3_endpoint: None,
                ..bucket.clone()
            },
        )?,
        false => store::resolve(&db_arg, &bucket)?,
    };
    if store::is_bucket() {
        let local_only = match cli.command {
            _ if cli.engine == EngineChoice::Wasm => Some("--engine wasm"),
            Command::Stress(_) => Some("stress"),
            Command::FsBench(_) => Some("fs-bench"),
            Command::ApiBench(_) => Some("api-bench"),
            _ => None,
        };
        if let Some(what) = local_only {
            return Err(format!(
                "{what} runs on a store in a directory, not in a bucket"
            ));
        }
    }
    if cli.engine == EngineChoice::Wasm {
        return wasm::run(&db, &cli.cf, cli.command);
    }
    match cli.command {
        Command::Bucket(_) | Command::Checkpoint(_) | Command::Clone(_) | Command::Backup(_) => {
            Ok(())
        }
        Command::Bench(args) => bench::run(&db, *args),
        Command::Verify { json } => verify(&db, json),
        Command::Share => share(&db),
        Command::Repair { json } => repair(&db, json),
        Command::Stress(args) => stress::run(&db, *args),
        Command::Mount(args) => mount::run(&db, &cli.cf, args),
        Command::Umount { mountpoint } => mount::unmount(&mountpoint),
        Command::FsBench(args) => fsbench::run(&db, args),
        Command::Serve(args) => serve::run(&db, &cli.cf, args, &db_arg, &bucket),
        Command::ApiBench(args) => apibench::run(&db, args),
        Command::ReplicaBench(args) => replica_bench::run(&db, &args),
        Command::Cf(command) => {
            let access = match command {
                CfCommand::Create { .. } => Access::Create,
                CfCommand::Drop { .. } => Access::Write,
                CfCommand::List => Access::Read,
            };
            let db = open(&db, access)?;
            match command {
                CfCommand::Create { name } => db
                    .create_cf(&name, ColumnFamilyOptions::default())
                    .map(|_| ())
                    .map_err(err),
                CfCommand::Drop { name } => db.drop_cf(&db.cf(&name).map_err(err)?).map_err(err),
                CfCommand::List => {
                    for name in db.list_cf() {
                        println!("{name}");
                    }
                    Ok(())
                }
            }
        }
        Command::Put {
            key,
            value,
            sync,
            ttl,
            append,
            offset,
        } => write_one(&db, &cli.cf, Access::Create, sync, |_, batch, cf| {
            let (key, value) = (codec::decode(&key)?, codec::decode(&value)?);
            if append {
                batch.append_cf(cf, key, value);
                return Ok(());
            }
            if let Some(at) = offset {
                batch.write_at_cf(cf, key, at, value);
                return Ok(());
            }
            match ttl {
                Some(0) => return Err("--ttl must be at least 1 second".into()),
                Some(secs) => {
                    // A TTL past the end of time never expires; wrapping would expire it at once.
                    let now = strata_engine::SystemClock.now_secs();
                    batch.put_until_cf(cf, key, value, now.saturating_add(secs))
                }
                None => batch.put_cf(cf, key, value),
            }
            Ok(())
        }),
        Command::Blob(BlobCommand::List { json }) => {
            let (db, cf) = open_cf(&db, &cli.cf, Access::Read)?;
            let files = db.properties_cf(&cf).map_err(err)?.blob_files;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&files).map_err(|e| e.to_string())?
                );
                return Ok(());
            }
            println!("number\tbytes\trecords\tlive\tgarbage\tttl\texpiration\tstate");
            for f in files {
                let exp = f
                    .expiration_range
                    .map_or("-".to_string(), |(lo, hi)| format!("{lo}..{hi}"));
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}\t{exp}\t{:?}",
                    f.number,
                    f.file_size,
                    f.records,
                    f.live_bytes,
                    f.garbage_bytes,
                    if f.has_ttl { "yes" } else { "no" },
                    f.state
                );
            }
            Ok(())
        }
        Command::Get { key, raw, range } => {
            let (db, cf) = open_cf(&db, &cli.cf, Access::Read)?;
            let opts = ReadOptions::default();
            let Some(mut reader) = db
                .value_reader_cf(&opts, &cf, codec::decode(&key)?)
                .map_err(err)?
            else {
                return Err(format!("{key}: not found"));
            };
            let (start, end) = match range {
                Some(spec) => codec::resolve_range(&spec, reader.value_len())?,
                None => (0, reader.value_len()),
            };
            get_part(&mut reader, start, end, raw)
        }
        // A mounted file's record goes with its key, and a subtree's directories with it.
        Command::Delete { key, sync } => {
            write_one(&db, &cli.cf, Access::Write, sync, |db, batch, cf| {
                strata_fusefs::delete_with_metadata(db, batch, cf, &codec::decode(&key)?);
                Ok(())
            })
        }
        Command::DeleteRange { from, to, sync } => {
            write_one(&db, &cli.cf, Access::Write, sync, |db, batch, cf| {
                let (from, to) = (codec::decode(&from)?, codec::decode(&to)?);
                strata_fusefs::delete_range_with_metadata(db, batch, cf, &from, &to);
                Ok(())
            })
        }
        Command::Scan {
            prefix,
            from,
            to,
            limit,
        } => {
            let (db, cf) = open_cf(&db, &cli.cf, Access::Read)?;
            let mut opts = ReadOptions {
                fill_cache: false,
                ..Default::default()
            };
            (opts.lower_bound, opts.upper_bound) =
                codec::scan_bounds(prefix.as_deref(), from.as_deref(), to.as_deref())?;
            let mut it = db.iter_cf(&opts, &cf).map_err(err)?;
            it.seek_to_first();
            let mut n = 0;
            while it.valid() && limit.is_none_or(|l| n < l) {
                println!(
                    "{} => {}",
                    codec::encode(it.key()),
                    codec::encode(it.value())
                );
                n += 1;
                it.next();
            }
            it.status().map_err(err)
        }
        Command::Stats => {
            let db = open(&db, Access::Read)?;
            let out = serde_json::json!({
                "properties": db.properties(),
                "statistics": db.statistics(),
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
            );
            Ok(())
        }
        Command::Flush => {
            let (db, cf) = open_cf(&db, &cli.cf, Access::Write)?;
            db.flush_cf(&cf).map_err(err)
        }
        Command::Compact { from, to } => {
            let (db, cf) = open_cf(&db, &cli.cf, Access::Write)?;
            let from = from.as_deref().map(codec::decode).transpose()?;
            let to = to.as_deref().map(codec::decode).transpose()?;
            db.compact_range_cf(&cf, from.as_deref(), to.as_deref())
                .map_err(err)?;
            let p = db.properties_cf(&cf).map_err(err)?;
            for l in p.levels.iter().filter(|l| l.files > 0) {
                println!("L{}: {} files, {} bytes", l.level, l.files, l.bytes);
            }
            Ok(())
        }
    }
}
