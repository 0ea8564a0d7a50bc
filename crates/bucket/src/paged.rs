//! A placed file read before the cache holds it: fetched a page (64 KiB) at a time with ranged
//! GETs into a sparse local file (`NAME.partial`), whose fetched pages a sidecar lists
//! (`NAME.partial.pages`: the object's key, then a byte per page), so a restart reuses them.
//! The table's footer, index and filter are read first and stay; a point read then costs the
//! pages of its data block. Once every page is there the file is renamed into place, whole, and
//! checked against the log's CRC first. The engine verifies each block's own checksum as it
//! reads, so a damaged page is an error naming the file, never wrong data.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_engine::{Error, RandomAccessFile, Result};

use crate::cache::Remote;
use crate::local_io::{crc_of_prefix, io};
use crate::shared::Shared;

/// Bytes per fetched page.
pub(crate) const PAGE: u64 = 64 << 10;

/// The sparse copy and its page list beside the store file `path`.
pub(crate) fn partial_paths(path: &Path) -> (PathBuf, PathBuf) {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let mut pages = partial.clone();
    pages.push(".pages");
    (PathBuf::from(partial), PathBuf::from(pages))
}

/// Whether `name` is one of the cache's own files for a partly fetched store file.
pub(crate) fn is_partial(name: &str) -> bool {
    name.ends_with(".partial") || name.ends_with(".partial.pages")
}

#[derive(Debug)]
struct Pages {
    have: Vec<bool>,
    missing: usize,
}

/// A placed file being fetched as it is read.
#[derive(Debug)]
pub(crate) struct PagedFile {
    shared: Arc<Shared>,
    name: String,
    path: PathBuf,
    partial: PathBuf,
    pages_path: PathBuf,
    remote: Remote,
    file: File,
    pages: Mutex<Pages>,
}

impl PagedFile {
    /// Opens (or resumes) the partial copy of `name` at `path`, the object `remote`.
    pub(crate) fn open(
        shared: Arc<Shared>,
        name: &str,
        path: &Path,
        remote: Remote,
    ) -> Result<PagedFile> {
        let (partial, pages_path) = partial_paths(path);
        let count = remote.len.div_ceil(PAGE) as usize;
        // Pages fetched by an earlier run count only if they were of this very object.
        let have = match std::fs::read(&pages_path) {
            Ok(bytes) => match bytes.split(|&b| b == b'\n').next() {
                Some(key)
                    if key == remote.key.as_bytes() && bytes.len() == key.len() + 1 + count =>
                {
                    bytes[key.len() + 1..].iter().map(|&b| b == 1).collect()
                }
                _ => vec![false; count],
            },
            Err(_) => vec![false; count],
        };
        let missing = have.iter().filter(|h| !**h).count();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(missing == count)
            .mode(0o600)
            .open(&partial)
            .map_err(io(format!("opening {}", partial.display())))?;
        file.set_len(remote.len)
            .map_err(io(format!("sizing {}", partial.display())))?;
        Ok(PagedFile {
            shared,
            name: name.to_string(),
            path: path.to_path_buf(),
            partial,
            pages_path,
            remote,
            file,
            pages: Mutex::new(Pages { have, missing }),
        })
    }

    /// Fetches the pages `first..=last` the copy lacks, a ranged GET per run of them.
    fn fetch(&self, first: usize, last: usize) -> Result<()> {
        let mut pages = self.pages.lock();
        if pages.have[first..=last].iter().all(|&h| h) {
            return Ok(());
        }
        let mut p = first;
        while p <= last {
            if pages.have[p] {
                p += 1;
                continue;
            }
            let start = p;
            while p <= last && !pages.have[p] {
                p += 1;
            }
            let from = start as u64 * PAGE;
            let to = (p as u64 * PAGE).min(self.remote.len);
            let bytes = self.shared.patiently("fetching pages of a file", || {
                self.shared.client.get_range(&self.remote.key, from..to)
            })?;
            if bytes.len() as u64 != to - from {
                return Err(Error::Corruption {
                    file: self.path.clone(),
                    detail: format!(
                        "the bucket gave {} bytes for {from}..{to} of {}",
                        bytes.len(),
                        self.remote.key
                    ),
                });
            }
            self.file
                .write_all_at(&bytes, from)
                .map_err(io(format!("writing {}", self.partial.display())))?;
            for h in &mut pages.have[start..p] {
                *h = true;
            }
            pages.missing -= p - start;
        }
        self.save(&pages)?;
        if pages.missing == 0 {
            self.complete(&mut pages)?;
        }
        Ok(())
    }

    fn save(&self, pages: &Pages) -> Result<()> {
        let mut out = Vec::with_capacity(self.remote.key.len() + 1 + pages.have.len());
        out.extend_from_slice(self.remote.key.as_bytes());
        out.push(b'\n');
        out.extend(pages.have.iter().map(|&h| u8::from(h)));
        // Not synced: a crash loses at most the list, and then the pages are fetched again.
        std::fs::write(&self.pages_path, out)
            .map_err(io(format!("writing {}", self.pages_path.display())))
    }

    /// Every page is here: checked whole against the log, then renamed into place.
    fn complete(&self, pages: &mut Pages) -> Result<()> {
        let crc = crc_of_prefix(&self.file, self.remote.len)
            .map_err(io(format!("reading {}", self.partial.display())))?;
        if crc != self.remote.crc {
            // Fetched again from nothing by the next read, here and after a restart.
            let _ = std::fs::remove_file(&self.pages_path);
            pages.missing = pages.have.len();
            pages.have.iter_mut().for_each(|h| *h = false);
            return Err(Error::Corruption {
                file: self.path.clone(),
                detail: format!(
                    "its pages from {} have CRC {crc:#010x}; the log recorded {:#010x}",
                    self.remote.key, self.remote.crc
                ),
            });
        }
        if self.shared.cache.missing(&self.name).as_ref() != Some(&self.remote) {
            // Removed, replaced or fetched whole meanwhile: this copy is only this reader's now.
            let _ = std::fs::remove_file(&self.partial);
            let _ = std::fs::remove_file(&self.pages_path);
            return Ok(());
        }
        self.file
            .sync_all()
            .map_err(io(format!("syncing {}", self.partial.display())))?;
        std::fs::rename(&self.partial, &self.path).map_err(io(format!(
            "renaming {} into place",
            self.partial.display()
        )))?;
        let _ = std::fs::remove_file(&self.pages_path);
        self.shared.cache.fetched(&self.name);
        Ok(())
    }
}

impl RandomAccessFile for PagedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.remote.len)
            .ok_or_else(|| Error::Io {
                context: format!("reading {} past its end", self.path.display()),
                source: std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            })?;
        if buf.is_empty() {
            return Ok(());
        }
        self.fetch((offset / PAGE) as usize, ((end - 1) / PAGE) as usize)?;
        // The descriptor stays valid across the rename into place.
        self.file
            .read_exact_at(buf, offset)
            .map_err(io(format!("reading {}", self.path.display())))
    }

    fn len(&self) -> Result<u64> {
        Ok(self.remote.len)
    }
}
