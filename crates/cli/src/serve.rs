//! `strata serve`: one open store behind the REST API and, with `--mount`, the mount too.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use strata_admin_api::{Limits, MountLink, Security, ServeConfig};
use strata_fusefs::MountConfig;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where the API listens; a non-loopback address needs --token-file.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
    /// Also mount the column family `--cf` here, live on the same store.
    #[arg(long)]
    mount: Option<PathBuf>,
    /// Open the store read-only: every change is refused (403, EROFS).
    #[arg(long)]
    read_only: bool,
    /// Serve a replica of this store (`s3://BUCKET/PREFIX`, or a directory a writer beside
    /// keeps) instead of --db: read-only, following its writer every --poll-ms; a bucket
    /// replica's working copy is its own (default: the store's cache directory + `@replica`).
    #[arg(long, value_name = "STORE")]
    pub replica_of: Option<String>,
    /// How often a replica looks for new versions, in milliseconds; a read with `min_seq`
    /// asks at once.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 1000,
        requires = "replica_of"
    )]
    poll_ms: u64,
    /// A file holding the bearer token: at least 16 of letters, digits and -._~+/ (then = at the
    /// end), the file owned by this user and private to it (chmod 600); default:
    /// DIR/serve.token, made at the first start (a replica of a directory: DIR/serve-replica.token).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Another Host header name to accept (the loopback names always are).
    #[arg(long)]
    allow_host: Vec<String>,
    /// An origin whose pages may call the API (CORS); none by default.
    #[arg(long)]
    cors_origin: Vec<String>,
    #[command(flatten)]
    awake: crate::mount::KeepAwakeArg,
    /// Fill an empty store with a small demo keyspace first (`make run`).
    #[arg(long)]
    seed_demo: bool,
    /// Largest request body in bytes (a raw PUT streams, up to --max-raw-value).
    #[arg(long, default_value_t = Limits::default().body_bytes)]
    body_limit: usize,
    /// Largest value a raw PUT may stream into the store, in bytes.
    #[arg(long, default_value_t = Limits::default().raw_value_bytes)]
    max_raw_value: u64,
    /// Where `POST /api/v1/admin:backup` backs the served store up, live: `s3://BUCKET/PREFIX`
    /// or a directory, as `strata backup create --to`. Without it the route answers 409.
    #[arg(long, value_name = "DEST")]
    pub backup_to: Option<String>,
    /// Most bytes of files the store no longer needs that a running live backup of a local
    /// store may keep on disk; past it the store deletes them and the backup fails (409, try
    /// again). 0: only a disk about to fill takes them back. A store in a bucket is backed up
    /// from the bucket and keeps nothing: refused there.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 0,
        requires = "backup_to"
    )]
    backup_hold_limit: u64,
}

/// Serves the store `source` names (a directory or a bucket URL), opened at `db_dir`.
pub fn run(
    db_dir: &Path,
    cf: &str,
    args: ServeArgs,
    source: &str,
    bucket: &crate::store::BucketArgs,
) -> Result<(), String> {
    crate::mount::tune_malloc();
    crate::mount::raise_open_file_limit();
    // Lines go out through a thread of their own until this returns (every mutation is logged).
    let _log = crate::log_lines::init("info");
    let hub = Arc::new(strata_admin_api::EventHub::default());
    let replica = args.replica_of.is_some();
    if replica && args.seed_demo {
        return Err("--seed-demo writes: a replica is read-only".into());
    }
    let read_only = args.read_only || replica;
    let opening = match replica {
        true => crate::mount::Opening::Replica(Duration::from_millis(args.poll_ms)),
        false if read_only => crate::mount::Opening::ReadOnly,
        false => crate::mount::Opening::Write,
    };
    // A mount over a replica drops the kernel's caches each time the replica moves on.
    let moved_on = Arc::new(strata_fusefs::ReplicaInvalidation::default());
    let mut listeners: Vec<Arc<dyn strata_engine::EventListener>> = vec![hub.clone()];
    if replica && args.mount.is_some() {
        listeners.push(moved_on.clone());
    }
    // A read-only open of a directory takes no lock: a writer beside may delete any file a
    // backup is copying, and this process cannot hold its deletions back.
    if args.backup_to.is_some() && read_only && !crate::store::is_bucket() {
        return Err(format!(
            "--backup-to: a read-only server of a directory cannot keep the files a backup \
             copies (a writer beside it deletes them); back {} up through its writer \
             (`strata serve --backup-to`), or with `strata backup create` while no process \
             has it open",
            db_dir.display()
        ));
    }
    if args.backup_hold_limit > 0 && crate::store::is_bucket() {
        return Err(
            "--backup-hold-limit bounds what a live backup of a local store keeps on disk; a \
             store in a bucket is backed up from the bucket, which keeps nothing for it"
                .into(),
        );
    }
    let backups = match &args.backup_to {
        Some(dest) => Some(Arc::new(crate::serve_backups::ServedBackups::new(
            source, dest, bucket, read_only,
        )?) as Arc<dyn strata_admin_api::BackupTarget>),
        None => None,
    };
    let db = crate::mount::open_store(db_dir, cf, opening, listeners, args.backup_hold_limit)?;
    if args.seed_demo && !read_only && crate::demo::seed_if_empty(&db)? {
        log::info!(target: "strata::api", "seeded {} with the demo keyspace", db_dir.display());
    }
    // A replica of a directory is opened in its writer's directory: with the writer's token,
    // whoever may read the replica could write through the writer. It makes its own.
    let own_token = match replica && !crate::store::is_bucket() {
        true => db_dir.join("serve-replica.token"),
        false => db_dir.join("serve.token"),
    };
    let token = strata_admin_api::token_at(&own_token, args.token_file.as_deref(), &args.listen)
        .map_err(|e| format!("token: {e}"))?;
    // A terminal gets a console link that signs in by itself; a log gets no secret.
    let console_link = if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        format!("#token={token}")
    } else {
        String::new()
    };
    let mut security = Security::loopback(token);
    security
        .allowed_hosts
        .extend(args.allow_host.iter().cloned());
    let (mounted, link) = match &args.mount {
        None => (None, None),
        Some(mnt) => {
            strata_fusefs::check_fuse()?;
            let fs = crate::mount::filesystem(&db, cf, read_only, args.awake.keep_cpus_awake())?;
            // Before the mount serves: nothing the kernel caches is older than this sequence.
            moved_on.attach(fs.invalidator(), db.latest_sequence());
            let config = MountConfig {
                read_only,
                ..MountConfig::default()
            };
            let m = strata_fusefs::spawn(fs, mnt, &config)
                .map_err(|e| format!("cannot mount at {}: {e}", mnt.display()))?;
            let link = MountLink {
                column_family: cf.to_string(),
                invalidator: m.invalidator(),
                replica: replica.then(|| moved_on.clone()),
            };
            (Some(m), Some(link))
        }
    };
    let config = ServeConfig {
        listen: args.listen,
        read_only,
        limits: Limits {
            body_bytes: args.body_limit,
            raw_value_bytes: args.max_raw_value,
            ..Limits::default()
        },
        security,
        mount: link,
        events: Some(hub),
        backups,
    };
    let token_hint = match &args.token_file {
        Some(f) => f.display().to_string(),
        None => own_token.display().to_string(),
    };
    let mount_line = args
        .mount
        .as_ref()
        .map(|m| format!("mounted at {}\n", m.display()))
        .unwrap_or_default();
    let served = strata_admin_api::serve(db.clone(), config, |addr| {
        let banner = format!(
            "serving {} on http://{addr} (token in {token_hint})\nconsole: http://{addr}/{console_link}\n{mount_line}try: curl -H \"Authorization: Bearer $(cat {token_hint})\" http://{addr}/api/v1/stats\nCtrl-C stops\n",
            db_dir.display()
        );
        // In one write, and never fatal: a reader that stops after the first line (a script
        // taking the address, `strata serve | head -1`) or a closed stdout must not stop the
        // server, as `println!` would by panicking on the broken pipe.
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(banner.as_bytes()).and_then(|()| out.flush()) {
            log::warn!(target: "strata::api", "printing the address to stdout: {e}");
        }
    });
    // Unmount first, storing open files: the kernel must stop sending requests before the
    // store closes. Files still open keep the mount alive; another signal forces.
    let unmounted = match mounted {
        Some(m) => {
            let again = crate::mount::Stops::watch()?;
            let stopped = crate::mount::stop(m, &db, &again);
            again.close();
            stopped.map_err(|e| format!("unmount: {e}"))
        }
        None => Ok(()),
    };
    let closed = db.close().map_err(|e| format!("closing the store: {e}"));
    served.map_err(|e| format!("serve: {e}"))?;
    unmounted?;
    closed?;
    log::info!(target: "strata::api", "stopped; store closed");
    Ok(())
}
