//! Running the API: the token, the listener, and a clean shutdown on Ctrl-C or SIGTERM.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_engine::Db;

use crate::state::{AppState, Limits, MountLink, Security};

/// How `serve` runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Where to listen (default `127.0.0.1:7070`).
    pub listen: SocketAddr,
    pub read_only: bool,
    pub limits: Limits,
    pub security: Security,
    /// The mount sharing the store, when there is one.
    pub mount: Option<MountLink>,
    /// The hub the store was opened with as a listener, for `GET /api/v1/events`.
    pub events: Option<Arc<crate::events::EventHub>>,
    /// Where `POST /api/v1/admin:backup` backs the store up; `None`: the route answers 409.
    pub backups: Option<Arc<dyn crate::backups::BackupTarget>>,
}

/// The bearer token: `token_file`'s, or the one in `DIR/serve.token`, made at the first start;
/// either file must be private to this user and hold a token that meets the rules (`token.rs`).
/// A non-loopback listener needs an explicit token file.
pub fn token_for(
    store: &Path,
    token_file: Option<&Path>,
    listen: &SocketAddr,
) -> io::Result<String> {
    token_at(&store.join("serve.token"), token_file, listen)
}

/// [`token_for`], with the token made at the first start in `default_file`: a server that
/// must not share the store's own token (a replica beside its writer) names another.
pub fn token_at(
    default_file: &Path,
    token_file: Option<&Path>,
    listen: &SocketAddr,
) -> io::Result<String> {
    if let Some(f) = token_file {
        return crate::token::read_token_file(f);
    }
    if !listen.ip().is_loopback() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("listening on {listen} (not loopback) needs --token-file"),
        ));
    }
    let path: PathBuf = default_file.to_path_buf();
    match crate::token::read_token_file(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match crate::token::create_token_file(&path) {
                // Another start made it first: use that one.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    crate::token::read_token_file(&path)
                }
                made => made,
            }
        }
        read => read,
    }
}

/// Serves the API on `config.listen` until Ctrl-C or SIGTERM; `ready` is told the bound address
/// first. Returns once every request in flight has been answered.
pub fn serve(db: Arc<Db>, config: ServeConfig, ready: impl FnOnce(SocketAddr)) -> io::Result<()> {
    serve_until(db, config, ready, shutdown_signal())
}

/// [`serve`], until `stop` completes instead of a signal.
pub fn serve_until(
    db: Arc<Db>,
    config: ServeConfig,
    ready: impl FnOnce(SocketAddr),
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    if config.limits.body_bytes > crate::MAX_BODY_LIMIT {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a body limit of {} bytes is over the most a request body may be ({} bytes)",
                config.limits.body_bytes,
                crate::MAX_BODY_LIMIT
            ),
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("strata-api")
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        ready(listener.local_addr()?);
        let mut state = AppState::new(
            db,
            config.read_only,
            config.limits,
            config.security,
            config.mount,
        );
        if let Some(hub) = config.events {
            state = state.with_events(hub);
        }
        if let Some(target) = config.backups {
            state = state.with_backups(target);
        }
        let (stopping, shutdown) = tokio::sync::watch::channel(false);
        state = state.with_shutdown(shutdown);
        axum::serve(listener, crate::app(state))
            .with_graceful_shutdown(async move {
                stop.await;
                let _ = stopping.send(true);
            })
            .await
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!(target: "strata::api", "shutting down");
}
