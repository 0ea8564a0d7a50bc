//! `strata checkpoint`, `strata clone` and `strata backup`: versions of a store in a bucket,
//! made beside its writer (doc/bucket.md, "Checkpoints, clones and backups").

use std::time::{Duration, Instant};

use clap::Subcommand;
use strata_bucket::{BucketUrl, Client, backup, checkpoint};

use crate::store::BucketArgs;

#[derive(Subcommand, Debug)]
pub enum CheckpointCommand {
    /// Pins the store's newest version as NAME: garbage collection keeps everything it needs,
    /// and `--checkpoint NAME` opens it (read-only) or clones it.
    Create { name: String },
    /// Prints the checkpoints, and the pins clones keep in their source.
    List {
        /// As JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Drops checkpoint NAME; garbage collection may then delete what only it kept.
    Drop { name: String },
}

#[derive(clap::Args, Debug)]
pub struct CloneArgs {
    /// The store to clone: s3://BUCKET/PREFIX (its newest version, or --checkpoint's).
    pub source: String,
    /// Where the clone goes: an empty s3://BUCKET/PREFIX. In the source's bucket nothing is
    /// copied; in another, every object is.
    pub target: String,
}

#[derive(Subcommand, Debug)]
pub enum BackupCommand {
    /// Backs up --db's newest version into --to, copying only the objects it lacks. A store in a
    /// directory is backed up closed (not while `strata serve` holds it).
    Create(To),
    /// Prints the backups in --to.
    List {
        #[command(flatten)]
        to: To,
        /// As JSON (one array) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Reads every object of a backup (default: each, newest first) and checks its length and
    /// CRC; exits non-zero naming the first damaged object.
    Verify {
        #[command(flatten)]
        to: To,
        /// Only this backup.
        number: Option<u64>,
    },
    /// Restores a backup (default: the newest that verifies) as a new store at TARGET: an empty
    /// s3://BUCKET/PREFIX, or an empty or absent directory. A local store's backup restores into
    /// a bucket too, and a bucket store's into a directory.
    Restore {
        #[command(flatten)]
        to: To,
        target: String,
        /// This backup rather than the newest that verifies.
        #[arg(long)]
        backup: Option<u64>,
    },
    /// Deletes old backups (the newest always stays) and the objects only they named.
    Prune {
        #[command(flatten)]
        to: To,
        /// Keep this many of the newest.
        #[arg(long)]
        keep: Option<usize>,
        /// Delete those older than this many days.
        #[arg(long, value_name = "DAYS")]
        older_than_days: Option<u64>,
    },
}

#[derive(clap::Args, Debug)]
pub struct To {
    /// Where the backups are: s3://BUCKET/PREFIX (another bucket, or a prefix outside the
    /// store), or a directory on this machine (a path, or file:///PATH).
    #[arg(long, value_name = "DEST")]
    pub to: String,
}

fn client(url: &str, args: &BucketArgs) -> Result<Client, String> {
    let url = BucketUrl::parse(url).map_err(|e| e.to_string())?;
    Client::connect(&url, args.s3_endpoint.as_deref(), None).map_err(|e| e.to_string())
}

/// The backup destination `dest`: a bucket URL, or a directory (`file:///PATH` or a path).
pub fn destination(dest: &str, args: &BucketArgs) -> Result<Client, String> {
    destination_of(None, dest, args)
}

/// `destination`, for backups of the local store in `store` when given: a directory inside it
/// is refused before it is made.
pub fn destination_of(
    store: Option<&std::path::Path>,
    dest: &str,
    args: &BucketArgs,
) -> Result<Client, String> {
    if BucketUrl::is_bucket(dest) {
        return client(dest, args);
    }
    let dir = dest.strip_prefix("file://").unwrap_or(dest);
    if dir.is_empty() || dest.contains("://") && !dest.starts_with("file://") {
        return Err(format!(
            "{dest:?} is neither s3://BUCKET/PREFIX nor a directory"
        ));
    }
    let dir = std::path::Path::new(dir);
    if let Some(store) = store {
        backup::refuse_inside_store(store, dir).map_err(err)?;
    }
    Client::directory(dir).map_err(|e| e.to_string())
}

fn err(e: strata_engine::Error) -> String {
    e.to_string()
}

fn when(millis: u64) -> String {
    crate::log_format::utc_text(millis / 1000)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// The requests a command made, and how long it took: what it cost, printed.
fn cost(clients: &[&Client], started: Instant) -> String {
    let (mut n, mut up, mut down) = (0, 0, 0);
    for c in clients {
        let r = c.requests();
        n += r.gets + r.puts + r.lists + r.deletes;
        up += r.bytes_up;
        down += r.bytes_down;
    }
    format!(
        "{n} requests, {} up, {} down, {:.2} s",
        mib(up),
        mib(down),
        started.elapsed().as_secs_f64()
    )
}

/// A bar on stderr as objects are copied: redrawn in place on a terminal, else a line per
/// tenth of the bytes.
fn show_progress(what: &'static str) -> impl Fn(backup::Progress) {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let last_tenth = std::cell::Cell::new(0u64);
    move |p: backup::Progress| {
        let frac = if p.bytes == 0 {
            1.0
        } else {
            p.bytes_done as f64 / p.bytes as f64
        };
        let tenth = (frac * 10.0) as u64;
        let finished = p.objects_done == p.objects;
        if !terminal && tenth == last_tenth.get() && !finished {
            return;
        }
        last_tenth.set(tenth);
        let width = 30;
        let filled = ((frac * width as f64) as usize).min(width);
        let line = format!(
            "{what} [{}{}] {:>3.0}%  {}/{} objects, {} of {}",
            "#".repeat(filled),
            ".".repeat(width - filled),
            frac * 100.0,
            p.objects_done,
            p.objects,
            mib(p.bytes_done),
            mib(p.bytes)
        );
        if terminal {
            eprint!("\r{line}{}", if finished { "\n" } else { "" });
        } else {
            eprintln!("{line}");
        }
    }
}

/// What a pin is for, when its name says it is the store's own: a lease's expiry, or a
/// clone's pin whose clone was never made (it died first), which only keeps space.
fn note(i: &strata_bucket::CheckpointInfo, args: &BucketArgs) -> String {
    if let Some(expiry) = i
        .name
        .strip_prefix("lease-")
        .and_then(|r| r.get(..20))
        .and_then(|d| d.parse::<u64>().ok())
    {
        // Collection judges it by when the bucket took its last renewal; the expiry is its
        // holder's reckoning.
        return format!("lease, renewed to {} by its holder's clock", when(expiry));
    }
    if i.name.starts_with("clone-") {
        let made = client(&i.source, args).and_then(|c| c.list("log/").map_err(err));
        return match made {
            Ok(records) if records.is_empty() => {
                "the clone was never made: dropping this only frees space".into()
            }
            Ok(_) => "keeps what the clone refers to".into(),
            Err(e) => format!("clone not checked: {e}"),
        };
    }
    String::new()
}

pub fn checkpoint(db: &str, args: &BucketArgs, command: &CheckpointCommand) -> Result<(), String> {
    let c = client(db, args)?;
    match command {
        CheckpointCommand::Create { name } => {
            let started = Instant::now();
            let info = checkpoint::create(&c, name).map_err(err)?;
            println!(
                "checkpoint {name}: record {}, {} files, {} objects, {} ({})",
                info.seq,
                info.files,
                info.objects,
                mib(info.bytes),
                cost(&[&c], started)
            );
        }
        CheckpointCommand::List { json } => {
            let all = checkpoint::list(&c).map_err(err)?;
            let notes: Vec<String> = all.iter().map(|i| note(i, args)).collect();
            if *json {
                let rows: Vec<_> = all
                    .iter()
                    .zip(&notes)
                    .map(|(i, note)| {
                        serde_json::json!({
                            "name": i.name, "record": i.seq, "created": when(i.created_millis),
                            "for": i.source, "files": i.files, "objects": i.objects,
                            "bytes": i.bytes, "note": note,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            } else {
                println!(
                    "{:<40} {:>10} {:<21} {:>7} {:>12}  for",
                    "name", "record", "created", "objects", "size"
                );
                for (i, note) in all.iter().zip(&notes) {
                    println!(
                        "{:<40} {:>10} {:<21} {:>7} {:>12}  {}{}",
                        i.name,
                        i.seq,
                        when(i.created_millis),
                        i.objects,
                        mib(i.bytes),
                        i.source,
                        if note.is_empty() {
                            String::new()
                        } else {
                            format!("  ({note})")
                        }
                    );
                }
            }
        }
        CheckpointCommand::Drop { name } => {
            checkpoint::drop(&c, name).map_err(err)?;
            println!("checkpoint {name} dropped");
        }
    }
    Ok(())
}

pub fn clone(args: &BucketArgs, clone: &CloneArgs) -> Result<(), String> {
    let (src, dst) = (client(&clone.source, args)?, client(&clone.target, args)?);
    let started = Instant::now();
    let report = strata_bucket::clone_store(
        &src,
        &dst,
        args.checkpoint.as_deref(),
        &show_progress("copying"),
    )
    .map_err(err)?;
    println!(
        "cloned {} (record {}) into {}: {} files, {} objects referred to, {} copied ({}); {}",
        clone.source,
        report.seq,
        clone.target,
        report.files,
        report.objects_referred,
        report.objects_copied,
        mib(report.bytes_copied),
        cost(&[&src, &dst], started)
    );
    if let Some(pin) = report.source_pin {
        println!(
            "the source keeps the clone's objects under checkpoint {pin}; the clone drops it \
             once it refers to none of them"
        );
    }
    Ok(())
}

pub fn backup(db: &str, args: &BucketArgs, command: &BackupCommand) -> Result<(), String> {
    let started = Instant::now();
    match command {
        BackupCommand::Create(to) => {
            let local = (!BucketUrl::is_bucket(db)).then(|| std::path::Path::new(db));
            let dest = destination_of(local, &to.to, args)?;
            let progress = show_progress("backing up");
            let (r, spent) = if BucketUrl::is_bucket(db) {
                let src = client(db, args)?;
                let r = backup::create(&src, &dest, &progress).map_err(err)?;
                (r, cost(&[&src, &dest], started))
            } else {
                let r = backup::create_from_dir(std::path::Path::new(db), &dest, &progress)
                    .map_err(err)?;
                (r, cost(&[&dest], started))
            };
            println!(
                "backup {} of {} (record {}): {} objects copied ({}), {} there already; {spent}",
                r.backup.number,
                r.backup.source,
                r.backup.seq,
                r.copied,
                mib(r.bytes_copied),
                r.already_there,
            );
        }
        BackupCommand::List { to, json } => {
            let dest = destination(&to.to, args)?;
            let all = backup::list(&dest).map_err(err)?;
            if *json {
                let rows: Vec<_> = all
                    .iter()
                    .map(|b| {
                        serde_json::json!({
                            "number": b.number, "record": b.seq, "created": when(b.created_millis),
                            "source": b.source, "files": b.files, "objects": b.objects,
                            "bytes": b.bytes,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            } else {
                println!(
                    "{:>6} {:>10} {:<21} {:>7} {:>12}  source",
                    "backup", "record", "created", "objects", "size"
                );
                for b in all {
                    println!(
                        "{:>6} {:>10} {:<21} {:>7} {:>12}  {}",
                        b.number,
                        b.seq,
                        when(b.created_millis),
                        b.objects,
                        mib(b.bytes),
                        b.source
                    );
                }
            }
        }
        BackupCommand::Verify { to, number } => {
            let dest = destination(&to.to, args)?;
            let numbers: Vec<u64> = match number {
                Some(n) => vec![*n],
                None => backup::list(&dest)
                    .map_err(err)?
                    .iter()
                    .rev()
                    .map(|b| b.number)
                    .collect(),
            };
            for n in numbers {
                let b = backup::verify(&dest, n).map_err(|e| format!("backup {n}: {e}"))?;
                println!("backup {n}: {} objects, {}: good", b.objects, mib(b.bytes));
            }
        }
        BackupCommand::Restore { to, target, backup } => {
            let dest = destination(&to.to, args)?;
            let progress = show_progress("restoring");
            let (r, spent) = if BucketUrl::is_bucket(target) {
                let target_client = client(target, args)?;
                let r = backup::restore(&dest, *backup, &target_client, &progress).map_err(err)?;
                (r, cost(&[&dest, &target_client], started))
            } else {
                let dir = std::path::Path::new(target);
                let r = backup::restore_to_dir(&dest, *backup, dir, &progress).map_err(err)?;
                (r, cost(&[&dest], started))
            };
            for (n, why) in &r.skipped {
                println!("backup {n} skipped: {why}");
            }
            println!(
                "restored backup {} (record {} of {}) into {target}: {} objects, {}; {spent}",
                r.backup.number,
                r.backup.seq,
                r.backup.source,
                r.objects,
                mib(r.bytes),
            );
        }
        BackupCommand::Prune {
            to,
            keep,
            older_than_days,
        } => {
            if keep.is_none() && older_than_days.is_none() {
                return Err("prune needs --keep N or --older-than-days D".into());
            }
            let dest = destination(&to.to, args)?;
            let age = older_than_days.map(|d| Duration::from_secs(d.saturating_mul(86_400)));
            let r = backup::prune(&dest, *keep, age).map_err(err)?;
            println!(
                "{} backups deleted, {} kept; {} objects deleted",
                r.backups_deleted, r.backups_kept, r.objects_deleted
            );
        }
    }
    Ok(())
}
