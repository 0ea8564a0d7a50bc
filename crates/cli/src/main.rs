//! `strata`: data commands over a store (ldb-style), and `strata bench` (db_bench-style).

mod bench;
mod codec;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use strata_engine::{Db, Options, ReadOptions, WriteOptions};

#[derive(Parser, Debug)]
#[command(
    name = "strata",
    version,
    about = "Strata: an LSM-tree key-value store"
)]
struct Cli {
    /// The store's directory.
    #[arg(long, global = true, default_value = "./strata-data")]
    db: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Sets KEY to VALUE (UTF-8, or hex with a 0x prefix).
    Put {
        key: String,
        value: String,
        /// fsync the WAL before returning.
        #[arg(long)]
        sync: bool,
    },
    /// Prints the value of KEY.
    Get { key: String },
    /// Deletes KEY.
    Delete {
        key: String,
        #[arg(long)]
        sync: bool,
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
    /// Runs db_bench-style workloads (flags as db_bench names them).
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata: {e}");
            ExitCode::FAILURE
        }
    }
}

fn open(dir: &PathBuf) -> Result<Db, String> {
    Db::open(dir, Options::default()).map_err(|e| format!("cannot open {}: {e}", dir.display()))
}

fn run(cli: Cli) -> Result<(), String> {
    let err = |e: strata_engine::Error| e.to_string();
    match cli.command {
        Command::Bench(args) => bench::run(&cli.db, args),
        Command::Put { key, value, sync } => {
            let db = open(&cli.db)?;
            let opts = WriteOptions {
                sync,
                ..Default::default()
            };
            db.put_with(&opts, codec::decode(&key)?, codec::decode(&value)?)
                .map_err(err)
        }
        Command::Get { key } => {
            let db = open(&cli.db)?;
            match db.get(codec::decode(&key)?).map_err(err)? {
                Some(v) => {
                    println!("{}", codec::encode(&v));
                    Ok(())
                }
                None => Err(format!("{key}: not found")),
            }
        }
        Command::Delete { key, sync } => {
            let db = open(&cli.db)?;
            let opts = WriteOptions {
                sync,
                ..Default::default()
            };
            db.delete_with(&opts, codec::decode(&key)?).map_err(err)
        }
        Command::Scan {
            prefix,
            from,
            to,
            limit,
        } => {
            let db = open(&cli.db)?;
            let mut opts = ReadOptions {
                fill_cache: false,
                ..Default::default()
            };
            if let Some(p) = &prefix {
                let p = codec::decode(p)?;
                opts.upper_bound = codec::prefix_successor(&p);
                opts.lower_bound = Some(p);
            } else {
                opts.lower_bound = from.as_deref().map(codec::decode).transpose()?;
                opts.upper_bound = to.as_deref().map(codec::decode).transpose()?;
            }
            let mut it = db.iter(&opts).map_err(err)?;
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
            let db = open(&cli.db)?;
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
            let db = open(&cli.db)?;
            db.flush().map_err(err)
        }
        Command::Compact { from, to } => {
            let db = open(&cli.db)?;
            let from = from.as_deref().map(codec::decode).transpose()?;
            let to = to.as_deref().map(codec::decode).transpose()?;
            db.compact_range(from.as_deref(), to.as_deref())
                .map_err(err)?;
            let p = db.properties();
            for l in p.levels.iter().filter(|l| l.files > 0) {
                println!("L{}: {} files, {} bytes", l.level, l.files, l.bytes);
            }
            Ok(())
        }
    }
}
