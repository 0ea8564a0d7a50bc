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

use parking_lot::{Condvar, Mutex, MutexGuard};
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

/// Where each page of the copy stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    Missing,
    /// A reader is fetching it: others wait for it rather than GET it again.
    Fetching,
    Here,
}

/// The pages of the copy. Its lock is never held across a request to the bucket, so a read
/// of pages already here is never stuck behind another reader's GET (which may be waiting
/// out an outage).
#[derive(Debug)]
struct Pages {
    state: Vec<Page>,
    /// Pages not `Here`.
    missing: usize,
}

impl Pages {
    /// Claims for the caller each run of missing pages in `first..=last` (as `Fetching`), and
    /// returns them as page ranges.
    fn claim(&mut self, first: usize, last: usize) -> Vec<std::ops::Range<usize>> {
        let mut runs = Vec::new();
        let mut p = first;
        while p <= last {
            if self.state[p] != Page::Missing {
                p += 1;
                continue;
            }
            let start = p;
            while p <= last && self.state[p] == Page::Missing {
                self.state[p] = Page::Fetching;
                p += 1;
            }
            runs.push(start..p);
        }
        runs
    }
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
    /// Signalled whenever fetched pages arrive or a fetch gives its pages up.
    arrived: Condvar,
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
        let state: Vec<Page> = match std::fs::read(&pages_path) {
            Ok(bytes) => match bytes.split(|&b| b == b'\n').next() {
                Some(key)
                    if key == remote.key.as_bytes() && bytes.len() == key.len() + 1 + count =>
                {
                    bytes[key.len() + 1..]
                        .iter()
                        .map(|&b| if b == 1 { Page::Here } else { Page::Missing })
                        .collect()
                }
                _ => vec![Page::Missing; count],
            },
            Err(_) => vec![Page::Missing; count],
        };
        let missing = state.iter().filter(|&&p| p != Page::Here).count();
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
            pages: Mutex::new(Pages { state, missing }),
            arrived: Condvar::new(),
        })
    }

    /// Fetches the pages `first..=last` the copy lacks, a ranged GET per run of them, and
    /// waits for those another reader is fetching (taking them over should that reader fail).
    fn fetch(&self, first: usize, last: usize) -> Result<()> {
        let mut pages = self.pages.lock();
        loop {
            let runs = pages.claim(first, last);
            if runs.is_empty() {
                if pages.state[first..=last].iter().all(|&p| p == Page::Here) {
                    return Ok(());
                }
                self.arrived.wait(&mut pages);
                continue;
            }
            let mut done = 0;
            // Even a panic gives the claimed pages back, or their waiters would wait forever.
            let fetched = MutexGuard::unlocked(&mut pages, || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.fetch_runs(&runs, &mut done)
                }))
            });
            for (i, run) in runs.iter().enumerate() {
                let now = if i < done { Page::Here } else { Page::Missing };
                pages.state[run.clone()].fill(now);
            }
            pages.missing -= runs[..done].iter().map(|r| r.len()).sum::<usize>();
            self.arrived.notify_all();
            fetched.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            self.save(&pages)?;
            if pages.missing == 0 {
                self.complete(&mut pages)?;
            }
        }
    }

    /// GETs each run of pages (claimed by the caller) into the copy, counting in `done` the
    /// runs that arrived.
    fn fetch_runs(&self, runs: &[std::ops::Range<usize>], done: &mut usize) -> Result<()> {
        for run in runs {
            let from = run.start as u64 * PAGE;
            let to = (run.end as u64 * PAGE).min(self.remote.len);
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
            *done += 1;
        }
        Ok(())
    }

    fn save(&self, pages: &Pages) -> Result<()> {
        let mut out = Vec::with_capacity(self.remote.key.len() + 1 + pages.state.len());
        out.extend_from_slice(self.remote.key.as_bytes());
        out.push(b'\n');
        out.extend(pages.state.iter().map(|&p| u8::from(p == Page::Here)));
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
            pages.missing = pages.state.len();
            pages.state.fill(Page::Missing);
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
