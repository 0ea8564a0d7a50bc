//! The working copy made to match the log: files the log names are rebuilt from their steps
//! or placed for fetching when first read; local files the log does not vouch for are set
//! aside in `lost/`, never deleted.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use strata_engine::{Error, FileSystem, Result, StdFileSystem};

use crate::cache::Remote;
use crate::client::Client;
use crate::files::Class;
use crate::local_io::{crc_of, io};
use crate::replay::{FileRecipe, Replayed, Source, Step};

/// Makes the working copy match the log; returns every placed file, and whether the working
/// copy holds it (one it lacks is fetched when first read). With `trusted` (this directory's writer is the newest) local files are kept as
/// they are: they hold at least what the log does, and local WALs the log never saw. Otherwise
/// every local store file the log does not vouch for is moved to `lost/`.
pub(crate) fn reconcile(
    client: &Client,
    root: &Path,
    replayed: &Replayed,
    trusted: bool,
) -> Result<BTreeMap<String, (Remote, bool)>> {
    let local = StdFileSystem;
    let mut present = Vec::new();
    let mut partials = Vec::new();
    for name in local.list(root)? {
        let path = root.join(&name);
        if crate::paged::is_partial(&name) {
            partials.push(name);
            continue;
        }
        if Class::of(&name) == Class::Local || !path.is_file() || name.ends_with(".fetch.tmp") {
            continue;
        }
        let keep = trusted
            || match replayed.files.get(&name) {
                Some(FileRecipe::Placed { len, crc, .. }) => same_contents(&path, *len, *crc),
                // Rebuilt below, and compared then.
                Some(FileRecipe::Steps(_)) => continue,
                None => false,
            };
        if keep {
            present.push(name);
        } else {
            set_aside(root, &name)?;
        }
    }
    let mut placed = BTreeMap::new();
    for (name, recipe) in &replayed.files {
        let here = present.contains(name);
        match recipe {
            FileRecipe::Placed { .. } => {
                if let Some(remote) = Remote::of(recipe) {
                    placed.insert(name.clone(), (remote, here));
                }
            }
            FileRecipe::Steps(_) if here => {}
            FileRecipe::Steps(steps) => build(client, &root.join(name), steps)?,
        }
    }
    // Partly fetched copies of files the cache lacks are resumed when read; the rest are only
    // the cache's, of files gone or now whole, and go.
    for name in partials {
        let base = name.trim_end_matches(".pages").trim_end_matches(".partial");
        if placed.get(base).is_none_or(|(_, here)| *here) {
            let _ = std::fs::remove_file(root.join(&name));
        }
    }
    local.sync_dir(root)?;
    Ok(placed)
}

fn same_contents(path: &Path, len: u64, crc: u32) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() == len) && crc_of(path) == Some((len, crc))
}

/// Moves a working-copy file the log does not vouch for into `lost/`, never deleting it.
fn set_aside(root: &Path, name: &str) -> Result<()> {
    let lost = root.join("lost");
    StdFileSystem.create_dir_all(&lost)?;
    let mut to = lost.join(name);
    let mut n = 1;
    while to.exists() {
        to = lost.join(format!("{name}.{n}"));
        n += 1;
    }
    log::warn!(
        "{}: not in the bucket's log as it is here; moved to {}",
        root.join(name).display(),
        to.display()
    );
    StdFileSystem.rename(&root.join(name), &to)
}

/// A temporary file beside `path`, private to its owner.
pub(crate) fn temp_beside(path: &Path) -> Result<(PathBuf, File)> {
    let mut name = path.as_os_str().to_owned();
    name.push(".fetch.tmp");
    let tmp = PathBuf::from(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(format!("creating {}", tmp.display())))?;
    Ok((tmp, file))
}

pub(crate) fn install(tmp: &Path, file: File, path: &Path) -> Result<()> {
    file.sync_all()
        .map_err(io(format!("syncing {}", tmp.display())))?;
    drop(file);
    std::fs::rename(tmp, path).map_err(io(format!("renaming {} into place", tmp.display())))
}

/// Writes into a file from an offset.
struct At<'a> {
    file: &'a File,
    pos: u64,
}

impl Write for At<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write_all_at(buf, self.pos)?;
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Downloads `key` into `file` at `offset`, checking it is the `len` bytes of CRC `crc` the log
/// recorded.
fn fetch_into(
    client: &Client,
    key: &str,
    file: &File,
    offset: u64,
    len: u64,
    crc: u32,
) -> Result<()> {
    let mut at = At { file, pos: offset };
    let (got_len, got_crc) = if len <= crate::shared::PIECE {
        client.get_into(key, &mut at)?
    } else {
        // A ranged GET per piece: each one a request under the timeout, however big the file.
        let (mut got, mut crc_so_far) = (0u64, 0u32);
        while got < len {
            let n = crate::shared::PIECE.min(len - got);
            let piece = client.get_range(key, got..got + n)?;
            at.write_all(&piece).map_err(|e| Error::Io {
                context: format!("writing the cached copy of {}", client.object(key)),
                source: e,
            })?;
            crc_so_far = crc32c::crc32c_append(crc_so_far, &piece);
            got += piece.len() as u64;
            if (piece.len() as u64) < n {
                break;
            }
        }
        (got, crc_so_far)
    };
    if (got_len, got_crc) != (len, crc) {
        return Err(Error::Corruption {
            file: PathBuf::from(client.object(key)),
            detail: format!(
                "holds {got_len} bytes of CRC {got_crc:#010x}; the log recorded {len} of {crc:#010x}"
            ),
        });
    }
    Ok(())
}

/// Fetches a placed file into the working copy.
pub(crate) fn fetch_placed(client: &Client, remote: &Remote, path: &Path) -> Result<()> {
    let (tmp, file) = temp_beside(path)?;
    fetch_into(client, &remote.key, &file, 0, remote.len, remote.crc)?;
    install(&tmp, file, path)
}

/// Builds a file from its steps; a different file already there is set aside first.
pub(crate) fn build(client: &Client, path: &Path, steps: &[Step]) -> Result<()> {
    let (tmp, file) = temp_beside(path)?;
    apply_steps(client, &file, &tmp, steps)?;
    if path.exists() {
        let same = crc_of(path).is_some() && crc_of(path) == crc_of(&tmp);
        if same {
            drop(file);
            return std::fs::remove_file(&tmp).map_err(io(format!("removing {}", tmp.display())));
        }
        if let (Some(root), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
        {
            set_aside(root, name)?;
        }
    }
    install(&tmp, file, path)
}

/// Makes `path` what `steps` build, replacing whatever it was in one rename (a replica's
/// working copy follows the log: what it held before is the log's too, not a loss).
pub(crate) fn rebuild(client: &Client, path: &Path, steps: &[Step]) -> Result<()> {
    let (tmp, file) = temp_beside(path)?;
    apply_steps(client, &file, &tmp, steps)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io(format!("renaming {} into place", tmp.display())))
}

/// Applies `steps` in order to `file` (at `path`, for messages).
pub(crate) fn apply_steps(client: &Client, file: &File, path: &Path, steps: &[Step]) -> Result<()> {
    for step in steps {
        match step {
            Step::Write {
                offset,
                source: Source::Inline(bytes),
            } => file
                .write_all_at(bytes, *offset)
                .map_err(io(format!("writing {}", path.display())))?,
            Step::Write {
                offset,
                source: Source::Object { key, len, crc },
            } => fetch_into(client, key, file, *offset, *len, *crc)?,
            Step::SetLen(len) => file
                .set_len(*len)
                .map_err(io(format!("sizing {}", path.display())))?,
        }
    }
    Ok(())
}
