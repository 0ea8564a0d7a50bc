//! Backups of a store in a local directory, in the same format as a bucket store's (so one
//! restores as either), and restores of any backup into a directory (doc/format.md,
//! "Checkpoints, clones and backups").
//!
//! A closed local store is backed up under its lock, so no process changes it meanwhile; an open
//! one, by the process that has it open (`create_live`), from the crash image the engine lists
//! and keeps on disk for the copy (`Db::live_files`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use strata_engine::{Db, Error, FileSystem, LiveFile, Result, StdFileSystem};

use crate::backup::{
    BackupReport, Chosen, Progress, RestoreReport, back_up, choose, info, next_number,
};
use crate::cache::Remote;
use crate::client::Client;
use crate::copy::put_checked;
use crate::local_io::{crc_of_prefix, io};
use crate::log::INLINE_LIMIT;
use crate::pin::{Pin, now_millis};
use crate::record::{Entry, Record};
use crate::replay::FileRecipe;

/// The store's own files: what a backup holds (not its lock, not what repair set aside).
fn is_store_file(name: &str) -> bool {
    let numbered = |suffix: &str| {
        name.strip_suffix(suffix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    name == "CURRENT"
        || name
            .strip_prefix("MANIFEST-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || numbered(".sst")
        || numbered(".log")
        || numbered(".blob")
}

/// Backs up the closed store in `dir` into `dest`.
pub fn create_from_dir(
    dir: &Path,
    dest: &Client,
    progress: &dyn Fn(Progress),
) -> Result<BackupReport> {
    let local = StdFileSystem;
    if !local.exists(&dir.join("CURRENT")) {
        return Err(Error::NotFound(format!(
            "no store at {} (it holds no CURRENT file)",
            dir.display()
        )));
    }
    let _lock = local.lock(&dir.join("LOCK")).map_err(|e| match e {
        // The lock's own words say who holds it; the kind is said once.
        Error::Busy(why) => Error::Busy(format!(
            "{why}: back {} up through that process (`strata serve --backup-to DEST`, then \
             `POST /api/v1/admin:backup`)",
            dir.display()
        )),
        other => other,
    })?;
    let mut files = Vec::new();
    for name in local.list(dir)?.into_iter().filter(|n| is_store_file(n)) {
        let path = dir.join(&name);
        let len = std::fs::metadata(&path)
            .map_err(io(format!("reading {}", path.display())))?
            .len();
        files.push(LiveFile { name, len });
    }
    back_up_image(dir, &files, None, dest, progress)
}

/// Backs up the local store `db` has open, while it keeps serving: the crash image
/// `Db::live_files` lists (every write acknowledged before the backup began; with `flush`,
/// writes made without the WAL too), its files kept on disk until the copy is done.
pub fn create_live(
    db: &Db,
    flush: bool,
    dest: &Client,
    progress: &dyn Fn(Progress),
) -> Result<BackupReport> {
    let live = db.live_files(flush)?;
    let made = back_up_image(&live.dir, &live.files, Some(&live.current), dest, progress);
    // A listed file missing is the store taking back its room, not damage: say so. Any other
    // failure (the destination's own) is reported as it is.
    match made {
        Err(Error::Io { ref source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            live.still_kept()?;
            made
        }
        made => made,
    }
}

/// Refuses to back up the local store in `store` into the directory `dest` when `dest` is the
/// store's directory or inside it: such a backup would be lost with the store, and its objects
/// would sit among the store's files. Call it before making `dest`; a backup checks again.
pub fn refuse_inside_store(store: &Path, dest: &Path) -> Result<()> {
    // The store may not exist yet (a server making it at its first start).
    let store_resolved = resolved(store)?;
    let dest_resolved = resolved(dest)?;
    // Bind mounts show one directory under two names, which no resolving of links makes
    // one; a container's two volumes may lie one inside the other on the host.
    let mounts = crate::mounts::Mounts::of_this_process();
    if mounts.is_inside(&dest_resolved, &store_resolved) {
        return Err(Error::InvalidArgument(format!(
            "{} is inside the store's directory {}: a backup there is lost with the store; \
             back up to a directory outside it",
            dest.display(),
            store_resolved.display()
        )));
    }
    // The other way round, the store would sit among the backup's objects, where a prune
    // deletes whatever no backup names.
    if mounts.is_inside(&store_resolved, &dest_resolved) {
        return Err(Error::InvalidArgument(format!(
            "the store's directory {} is inside {}: a prune there would delete the store's \
             files; back up to a directory beside it",
            store_resolved.display(),
            dest.display()
        )));
    }
    Ok(())
}

/// `path` made absolute with its links resolved as far as it exists (the rest may not yet):
/// each part that exists is resolved before a `..` after it goes up from it, as the system
/// would.
fn resolved(path: &Path) -> Result<PathBuf> {
    use std::path::Component;
    let absolute =
        std::path::absolute(path).map_err(io(format!("resolving {}", path.display())))?;
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => {
                out.push(other);
                if let Ok(real) = out.canonicalize() {
                    out = real;
                }
            }
        }
    }
    Ok(out)
}

/// Backs up `files` of the store in `dir` (each its first `len` bytes) and, given, `current` as
/// its CURRENT (else the CURRENT among `files`).
fn back_up_image(
    dir: &Path,
    files: &[LiveFile],
    current: Option<&[u8]>,
    dest: &Client,
    progress: &dyn Fn(Progress),
) -> Result<BackupReport> {
    if let Some(dest_dir) = dest.place().strip_prefix("file://") {
        refuse_inside_store(dir, Path::new(dest_dir))?;
    }
    let canonical = dir
        .canonicalize()
        .map_err(io(format!("resolving {}", dir.display())))?;
    let source = format!("file://{}", canonical.display());
    let number = next_number(dest, &source)?;
    // Small files (CURRENT, a short MANIFEST or WAL) ride in the backup's record; the rest are
    // objects named by their contents.
    let mut entries = Vec::new();
    let mut uploads = Vec::new();
    let inline = |entries: &mut Vec<Entry>, name: String, bytes: Vec<u8>| {
        entries.push(Entry::Truncate {
            name: name.clone(),
            len: 0,
        });
        if !bytes.is_empty() {
            entries.push(Entry::Append {
                name,
                offset: 0,
                bytes: Bytes::from(bytes),
            });
        }
    };
    if let Some(current) = current {
        inline(&mut entries, "CURRENT".to_string(), current.to_vec());
    }
    let mut files: Vec<&LiveFile> = files.iter().collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    for f in files {
        let path = dir.join(&f.name);
        let file = File::open(&path).map_err(io(format!("opening {}", path.display())))?;
        if f.len as usize <= INLINE_LIMIT {
            let mut bytes = vec![0u8; f.len as usize];
            file.read_exact_at(&mut bytes, 0)
                .map_err(io(format!("reading {}", path.display())))?;
            inline(&mut entries, f.name.clone(), bytes);
        } else {
            let crc =
                crc_of_prefix(&file, f.len).map_err(io(format!("reading {}", path.display())))?;
            let object = format!("objects/local/{}.{}-{crc:08x}", f.name, f.len);
            entries.push(Entry::Placed {
                name: f.name.clone(),
                len: f.len,
                crc,
                object: object.clone(),
            });
            uploads.push((path, object, f.len, crc));
        }
    }
    let backup = Pin {
        seq: 0,
        created_millis: now_millis(),
        source,
        record: Record { epoch: 0, entries },
    };
    let items: Vec<(String, u64)> = uploads
        .iter()
        .map(|(_, object, len, _)| (object.clone(), *len))
        .collect();
    // The image of a live store (given its CURRENT) is one its process keeps still; a closed
    // store's, one its lock keeps still.
    let live = current.is_some();
    back_up(dest, number, &backup, &items, progress, |i| {
        let (path, object, len, crc) = &uploads[i];
        upload_file(path, *len, *crc, dest, object, live)
    })
}

/// Uploads the file at `path` as `key`, checking it still holds `len` bytes of CRC `crc` as the
/// pieces pass. A change is `Busy` in the image of a `live` store (its process let go of the
/// file: try again), and `Corruption` in a closed one's, which nothing may change under its
/// lock.
fn upload_file(path: &Path, len: u64, crc: u32, to: &Client, key: &str, live: bool) -> Result<()> {
    let file = File::open(path).map_err(io(format!("opening {}", path.display())))?;
    let read = |at: u64, n: u64| -> Result<Bytes> {
        let mut buf = vec![0u8; n as usize];
        file.read_exact_at(&mut buf, at)
            .map_err(io(format!("reading {}", path.display())))?;
        Ok(Bytes::from(buf))
    };
    // Nothing the store keeps for a backup changes under it, so this is a store (or someone)
    // writing where it should not: the backup stops, names the file, and may be tried again.
    put_checked(to, key, len, crc, read, |(got_len, got_crc)| {
        let what = format!(
            "changed while it was backed up ({got_len} bytes of CRC {got_crc:#010x}, not {len} \
             of {crc:#010x}): no backup was made"
        );
        match live {
            true => Error::Busy(format!("{}: {what}; try again", path.display())),
            false => Error::Corruption {
                file: path.to_path_buf(),
                detail: what,
            },
        }
    })
}

/// Restores backup `number` (or the newest that verifies) of any store, local or in a bucket,
/// as a store in the directory `dir`, which must be empty or absent.
pub fn restore_to_dir(
    dest: &Client,
    number: Option<u64>,
    dir: &Path,
    progress: &dyn Fn(Progress),
) -> Result<RestoreReport> {
    let local = StdFileSystem;
    if local.exists(dir) && !local.list(dir)?.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} is not empty: a restore makes a new store",
            dir.display()
        )));
    }
    let Chosen {
        number: n,
        pin,
        skipped,
    } = choose(dest, number)?;
    // Built beside the directory and renamed into place whole: a restore that fails or is
    // killed leaves no half store there to block the next try (or to open), only its staging
    // directory, which the next try clears. A directory that is a mount point (an empty
    // volume) cannot be replaced by a rename: the store is built in it, as it stands.
    let in_place = is_mount_point(dir);
    let staging = match in_place {
        true => dir.to_path_buf(),
        false => staging_dir(dir)?,
    };
    if !in_place && local.exists(&staging) {
        std::fs::remove_dir_all(&staging).map_err(io(format!("clearing {}", staging.display())))?;
    }
    local.create_dir_all(&staging)?;
    let built = build_files(dest, n, &pin, &staging, progress);
    let bytes = match built {
        Ok(bytes) => bytes,
        Err(e) if in_place => return Err(e),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    local.sync_dir(&staging)?;
    if !in_place {
        // Over an empty directory, or where none is: the rename replaces it in one step.
        std::fs::rename(&staging, dir).map_err(io(format!(
            "moving the restored store from {} to {}",
            staging.display(),
            dir.display()
        )))?;
        if let Some(parent) = dir.parent() {
            local.sync_dir(parent)?;
        }
    }
    Ok(RestoreReport {
        backup: info(n, &pin),
        skipped,
        objects: pin.objects().len(),
        bytes,
    })
}

/// Whether `dir` is a directory on another filesystem than its parent's.
fn is_mount_point(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(absolute) = std::path::absolute(dir) else {
        return false;
    };
    match (
        std::fs::metadata(&absolute),
        absolute.parent().map(std::fs::metadata),
    ) {
        (Ok(d), Some(Ok(p))) => d.is_dir() && d.dev() != p.dev(),
        _ => false,
    }
}

/// Where a restore into `dir` builds the store first: a hidden sibling named after it.
fn staging_dir(dir: &Path) -> Result<PathBuf> {
    let absolute = std::path::absolute(dir).map_err(io(format!("resolving {}", dir.display())))?;
    let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
        return Err(Error::InvalidArgument(format!(
            "{} names no directory a store can be restored into",
            dir.display()
        )));
    };
    let mut staged = std::ffi::OsString::from(".");
    staged.push(name);
    staged.push(".restoring");
    Ok(parent.join(staged))
}

/// Builds each file of backup `n`'s `pin` in `dir`; the bytes its placed files hold.
fn build_files(
    dest: &Client,
    n: u64,
    pin: &Pin,
    dir: &Path,
    progress: &dyn Fn(Progress),
) -> Result<u64> {
    let objects = pin.objects();
    let mut done = Progress::of(objects.iter().map(|(_, len, _)| *len));
    for (name, recipe) in &pin.replayed().files {
        // A name from the backup stays inside the directory.
        if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\']) {
            return Err(Error::Corruption {
                file: PathBuf::from(dest.object(&format!("backup/{n:020}"))),
                detail: format!("names a file {name:?} outside the store's directory"),
            });
        }
        let path: PathBuf = dir.join(name);
        match recipe {
            FileRecipe::Placed { len, .. } => {
                if let Some(remote) = Remote::of(recipe) {
                    crate::working_copy::fetch_placed(dest, &remote, &path)?;
                }
                done.advance(*len, progress);
            }
            FileRecipe::Steps(steps) => crate::working_copy::build(dest, &path, steps)?,
        }
    }
    Ok(done.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_inside_the_store_is_refused_however_it_is_spelled() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("db");
        std::fs::create_dir(&store).unwrap();
        let inside = |dest: &Path| refuse_inside_store(&store, dest).is_err();
        assert!(inside(&store));
        assert!(inside(&store.join("backups/one")), "not made yet");
        assert!(inside(&tmp.path().join("elsewhere/../db/x")));
        std::os::unix::fs::symlink(&store, tmp.path().join("link")).unwrap();
        assert!(inside(&tmp.path().join("link/backups")), "through a link");
        assert!(!inside(&tmp.path().join("backups")));
        assert!(!inside(&tmp.path().join("db-backups")));
        assert!(!inside(&store.join("../backups")));
        assert!(inside(tmp.path()), "a destination holding the store");
        // A store not made yet is judged by where it will be.
        let new = tmp.path().join("new/db");
        assert!(refuse_inside_store(&new, &new.join("b")).is_err());
        assert!(refuse_inside_store(&new, &tmp.path().join("b")).is_ok());
    }

    #[test]
    fn only_the_stores_own_files_are_backed_up() {
        for name in [
            "CURRENT",
            "MANIFEST-000013",
            "000005.sst",
            "000012.log",
            "000007.blob",
        ] {
            assert!(is_store_file(name), "{name}");
        }
        for name in [
            "LOCK",
            "bucket.state",
            "CURRENT.tmp",
            "x.sst",
            ".sst",
            "MANIFEST-",
            "lost",
        ] {
            assert!(!is_store_file(name), "{name}");
        }
    }
}
