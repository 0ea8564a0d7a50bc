//! The backups `strata serve --backup-to DEST` makes when asked (`POST /api/v1/admin:backup`):
//! of a local store, live from the crash image the engine lists; of a store in a bucket, from
//! the bucket, as `strata backup create` does.

use std::sync::Mutex;

use strata_admin_api::{BackupMade, BackupSummary, BackupTarget};
use strata_bucket::backup::{self, BackupInfo, Progress};
use strata_bucket::{BucketUrl, Client};
use strata_engine::{Db, Result};

use crate::store::BucketArgs;

pub struct ServedBackups {
    destination: String,
    dest: Client,
    /// The served store's bucket, when it is in one.
    source: Option<Client>,
    /// One backup at a time, whoever asks.
    running: Mutex<()>,
    /// The served store is read-only (a replica, `--read-only`): it cannot flush.
    read_only: bool,
}

impl std::fmt::Debug for ServedBackups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedBackups")
            .field("destination", &self.destination)
            .finish()
    }
}

impl ServedBackups {
    /// Backups of the store `served` (`--db` or a bucket URL) to `destination`.
    pub fn new(
        served: &str,
        destination: &str,
        args: &BucketArgs,
        read_only: bool,
    ) -> Result<ServedBackups, String> {
        let source = match BucketUrl::is_bucket(served) {
            true => {
                let parsed = BucketUrl::parse(served).map_err(|e| e.to_string())?;
                Some(
                    Client::connect(&parsed, args.s3_endpoint.as_deref(), None)
                        .map_err(|e| format!("{served}: {e}"))?,
                )
            }
            false => None,
        };
        let local = source.is_none().then(|| std::path::Path::new(served));
        let dest = crate::versions::destination_of(local, destination, args)
            .map_err(|e| format!("--backup-to {destination}: {e}"))?;
        Ok(ServedBackups {
            destination: dest.place().to_string(),
            dest,
            source,
            running: Mutex::new(()),
            read_only,
        })
    }
}

fn summary(b: BackupInfo) -> BackupSummary {
    BackupSummary {
        number: b.number,
        created_millis: b.created_millis,
        source: b.source,
        files: b.files,
        objects: b.objects,
        bytes: b.bytes,
    }
}

/// Logs the copy's progress each tenth of its bytes.
fn log_progress() -> impl Fn(Progress) {
    let last_tenth = std::sync::atomic::AtomicU64::new(0);
    move |p: Progress| {
        let tenth = (p.bytes_done * 10).checked_div(p.bytes).unwrap_or(10);
        if last_tenth.swap(tenth, std::sync::atomic::Ordering::Relaxed) != tenth {
            log::info!(
                target: "strata::api",
                "backup: {}/{} objects, {} of {} bytes",
                p.objects_done,
                p.objects,
                p.bytes_done,
                p.bytes
            );
        }
    }
}

impl BackupTarget for ServedBackups {
    fn destination(&self) -> String {
        self.destination.clone()
    }

    fn create(&self, db: &Db, flush: bool) -> Result<BackupMade> {
        let _one = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let progress = log_progress();
        let report = match &self.source {
            Some(src) => {
                if flush && self.read_only {
                    return Err(strata_engine::Error::InvalidArgument(
                        "this server is read-only and cannot flush; a backup from the bucket \
                         holds every write its writer synced there: ask without flush"
                            .into(),
                    ));
                }
                if flush {
                    db.flush()?;
                }
                backup::create(src, &self.dest, &progress)?
            }
            None => backup::create_live(db, flush, &self.dest, &progress)?,
        };
        Ok(BackupMade {
            backup: summary(report.backup),
            destination: self.destination.clone(),
            copied: report.copied,
            bytes_copied: report.bytes_copied,
            already_there: report.already_there,
        })
    }

    fn list(&self) -> Result<Vec<BackupSummary>> {
        Ok(backup::list(&self.dest)?.into_iter().map(summary).collect())
    }
}
