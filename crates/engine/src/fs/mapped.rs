//! Appending through a shared memory mapping (Linux), for files of large records (blob files).
//!
//! A `write()` of a 4 KB value costs the writing thread a syscall plus the kernel's page-cache
//! work: finding or allocating the page, reserving its disk block. Here a helper thread does that
//! work ahead of the writer (`MADV_POPULATE_WRITE`), so an append is a copy into a page that is
//! already in the page cache, dirty and writable.
//!
//! Durability is that of `write()`: a store into a `MAP_SHARED` mapping is in the page cache the
//! moment it is made, so a process crash keeps it. `sync` is a synchronous msync of the appended
//! range, which on Linux is an fdatasync of that range: it writes back the pages dirtied through
//! the mapping but not the zeroed ones populated ahead.
//!
//! Only pages the helper populated are written through the mapping. Populating a page makes the
//! filesystem reserve its block, so a later store there cannot fault on a full disk, which would
//! kill the process with SIGBUS instead of returning an error. Bytes past the populated pages are
//! kept and written with `pwrite` on flush, which reports a full disk as an error. (As with any
//! mapped file, another process truncating the file under the writer would fault it; a store's
//! files are its own.)
//!
//! The file is extended (sparse) to its expected size when created; `finish`, or dropping the
//! writer, trims it to what was appended. A crash leaves the zero tail, which readers of the
//! format must take for empty space (the blob reader does).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::{WritableFile, create_truncated, io_err};
use crate::error::Result;

/// How far ahead of the writer the helper keeps pages populated: as much as the file already
/// holds, between these bounds. A file that is written slowly (one of many TTL buckets, say) so
/// reserves little memory and disk, and a fast one wakes the helper (one futex call) only once
/// per 2 MB appended, when it has used half of the window.
const MIN_AHEAD: usize = 64 << 10;
const MAX_AHEAD: usize = 4 << 20;
/// The most the helper populates in one call, so that one fast writer does not starve another.
const CHUNK: usize = 512 << 10;
/// A record at least this large that does not land on populated pages is written with pwrite
/// at once rather than buffered.
const WRITE_THROUGH: usize = 1 << 20;
/// Pages this far behind the writer leave the mapping (`MADV_DONTNEED`). They stay in the page
/// cache, dirty until written back, so nothing is lost; but otherwise every page stored through
/// the mapping would stay in this process's resident set until the file is finished, up to the
/// whole blob file (256 MiB by default) for each file being written.
const DROP_BEHIND: usize = 4 << 20;
/// Mappings stay below this; a larger expected size is written past it with pwrite.
const MAX_MAPPING: u64 = 1 << 30;

/// One file's mapping, shared by its writer and the helper thread. It is unmapped when the last
/// of them lets go, so the helper never touches an unmapped range.
#[derive(Debug)]
struct Region {
    base: *mut u8,
    /// A multiple of `page`.
    len: usize,
    page: usize,
    /// Bytes from the start whose pages are populated: the writer may store below this.
    populated: AtomicUsize,
    /// How far the writer wants pages populated.
    wanted: AtomicUsize,
    /// Set when the writer is done (or populating failed): the helper leaves the region alone.
    closed: AtomicBool,
}

// SAFETY: `base` is a shared mapping owned by the region (unmapped only in its Drop). The helper
// only asks the kernel to populate pages of it; the single writer is the only thread that stores
// into it, and only below `populated`, which the helper publishes with Release after populating.
unsafe impl Send for Region {}
// SAFETY: as for Send; `base`, `len` and `page` never change, and every other field is atomic.
unsafe impl Sync for Region {}

impl Region {
    /// Populates the next chunk the writer wants; false when there was nothing to do.
    fn populate_some(&self) -> bool {
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        let from = self.populated.load(Ordering::Relaxed);
        let to = self.wanted.load(Ordering::Relaxed).min(from + CHUNK);
        if to <= from {
            return false;
        }
        // SAFETY: [from, to) lies inside the mapping (`wanted` never exceeds `len`, and `from` is
        // page-aligned), which stays mapped while this region is alive. Populating changes no
        // byte of the file, so it is harmless even while the writer stores below `from`.
        let rc = unsafe {
            libc::madvise(
                self.base.add(from).cast(),
                to - from,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            // A full disk, or a kernel without MADV_POPULATE_WRITE (before 5.14): the writer
            // falls back to pwrite for everything past `populated`.
            self.closed.store(true, Ordering::Relaxed);
            return false;
        }
        self.populated.store(to, Ordering::Release);
        true
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are the mapping made in `MappedWritableFile::create`; no one
        // else can reach it once the last Arc is gone.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// The process-wide helper thread and the regions it serves.
#[derive(Debug)]
struct Populator {
    regions: Arc<Mutex<Vec<Arc<Region>>>>,
    thread: std::thread::Thread,
}

impl Populator {
    /// The helper, started on first use; `None` if no thread could be started (then writers
    /// use pwrite only).
    fn get() -> Option<&'static Populator> {
        static POPULATOR: OnceLock<Option<Populator>> = OnceLock::new();
        POPULATOR
            .get_or_init(|| {
                let regions: Arc<Mutex<Vec<Arc<Region>>>> = Arc::default();
                let served = Arc::clone(&regions);
                let handle = std::thread::Builder::new()
                    .name("strata-prefault".into())
                    .spawn(move || {
                        loop {
                            let list = served.lock().clone();
                            let mut busy = false;
                            for region in &list {
                                busy |= region.populate_some();
                            }
                            drop(list);
                            if !busy {
                                std::thread::park();
                            }
                        }
                    })
                    .ok()?;
                Some(Populator {
                    regions,
                    thread: handle.thread().clone(),
                })
            })
            .as_ref()
    }

    fn remove(&self, region: &Arc<Region>) {
        region.closed.store(true, Ordering::Relaxed);
        self.regions.lock().retain(|r| !Arc::ptr_eq(r, region));
    }
}

/// A file written by appends through a shared mapping; see the module comment.
#[derive(Debug)]
pub(crate) struct MappedWritableFile {
    path: PathBuf,
    file: File,
    /// `None` once finished.
    region: Option<Arc<Region>>,
    populator: &'static Populator,
    /// Bytes appended: the file's length once trimmed.
    len: u64,
    /// The last appended bytes, past the populated pages: written by pwrite on flush.
    pending: Vec<u8>,
    /// Bytes from the start whose pages have left the mapping (`DROP_BEHIND`).
    dropped: usize,
}

impl MappedWritableFile {
    /// Creates `path` sized for `expected_len` bytes; `None` when mapping is not possible here
    /// (the caller then writes the file the ordinary way).
    pub(crate) fn create(path: &Path, expected_len: u64) -> Result<Option<Self>> {
        let Some(populator) = Populator::get() else {
            return Ok(None);
        };
        let file = create_truncated(path)?;
        // SAFETY: sysconf only reads a system constant.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            n if n > 0 => n as usize,
            _ => 4096,
        };
        let len = expected_len
            .clamp(page as u64, MAX_MAPPING)
            .next_multiple_of(page as u64) as usize;
        file.set_len(len as u64)
            .map_err(|e| io_err("extend", path, e))?;
        // SAFETY: a fresh shared read-write mapping of the file's first `len` bytes, which exist
        // (set_len above); the kernel picks the address, so no existing mapping is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            // The ordinary create the caller falls back to truncates the file again.
            return Ok(None);
        }
        let region = Arc::new(Region {
            base: base.cast(),
            len,
            page,
            populated: AtomicUsize::new(0),
            wanted: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        });
        populator.regions.lock().push(Arc::clone(&region));
        let file = MappedWritableFile {
            path: path.to_path_buf(),
            file,
            region: Some(region),
            populator,
            len: 0,
            pending: Vec::new(),
            dropped: 0,
        };
        file.want_populated(0);
        Ok(Some(file))
    }

    /// Asks the helper for pages past `end` when fewer than half of the window are left.
    fn want_populated(&self, end: usize) {
        let Some(region) = &self.region else { return };
        let wanted = region.wanted.load(Ordering::Relaxed);
        let ahead = end.clamp(MIN_AHEAD, MAX_AHEAD);
        if wanted < region.len && end + ahead / 2 >= wanted {
            let target = (end + ahead).next_multiple_of(region.page).min(region.len);
            region.wanted.store(target, Ordering::Relaxed);
            self.populator.thread.unpark();
        }
    }

    /// Lets go of the mapped pages more than `DROP_BEHIND` behind the writer: whole pages below
    /// both what was appended (less what waits in `pending`) and what the helper populated, which
    /// the writer never stores into again.
    fn drop_behind(&mut self) {
        let Some(region) = &self.region else { return };
        let stored = (self.len as usize - self.pending.len())
            .min(region.populated.load(Ordering::Acquire))
            .min(region.len);
        let until = stored.saturating_sub(DROP_BEHIND) / region.page * region.page;
        if until < self.dropped + DROP_BEHIND {
            return;
        }
        // SAFETY: [dropped, until) is whole pages inside the mapping (until <= region.len), all
        // below anything the writer will store into again, and the helper only populates
        // above `populated`. For a shared file mapping MADV_DONTNEED only unmaps the pages from
        // this process: their contents, dirty or not, stay in the file's page cache.
        let rc = unsafe {
            libc::madvise(
                region.base.add(self.dropped).cast(),
                until - self.dropped,
                libc::MADV_DONTNEED,
            )
        };
        // A refusal only leaves the pages mapped, as they were.
        if rc == 0 {
            self.dropped = until;
        }
    }

    /// Stops the helper and unmaps (once the helper lets go), then trims the file to `len`.
    fn close_mapping(&mut self) -> Result<()> {
        if let Some(region) = self.region.take() {
            self.populator.remove(&region);
            drop(region);
            self.file
                .set_len(self.len)
                .map_err(|e| io_err("trim", &self.path, e))?;
        }
        Ok(())
    }
}

impl WritableFile for MappedWritableFile {
    fn reserves_ahead(&self) -> bool {
        self.region.is_some()
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        let start = self.len as usize;
        let end = start + data.len();
        match &self.region {
            Some(region)
                if self.pending.is_empty() && end <= region.populated.load(Ordering::Acquire) =>
            {
                // SAFETY: [start, end) lies below `populated`, so inside the mapping and on pages
                // the helper populated (Acquire pairs with its Release); this writer is the only
                // thread storing into the mapping, and `data` cannot overlap it (it is borrowed
                // from elsewhere while we hold `&mut self`).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        region.base.add(start),
                        data.len(),
                    );
                }
            }
            // A large record is written at once: buffering it would copy it twice.
            _ if self.pending.is_empty() && data.len() >= WRITE_THROUGH => self
                .file
                .write_all_at(data, start as u64)
                .map_err(|e| io_err("write", &self.path, e))?,
            _ => self.pending.extend_from_slice(data),
        }
        self.len = end as u64;
        self.want_populated(end);
        self.drop_behind();
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            let at = self.len - self.pending.len() as u64;
            self.file
                .write_all_at(&self.pending, at)
                .map_err(|e| io_err("write", &self.path, e))?;
            self.pending.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        match &self.region {
            // fdatasync would also write back the zeroed pages populated ahead of the writer; a
            // synchronous msync of the appended range syncs only those pages (and the metadata
            // that finds them: on Linux it is an fdatasync of that range).
            Some(region) if self.len as usize <= region.len => {
                // SAFETY: the range starts at the mapping's base and lies inside it.
                let rc =
                    unsafe { libc::msync(region.base.cast(), self.len as usize, libc::MS_SYNC) };
                if rc != 0 {
                    return Err(io_err("sync", &self.path, std::io::Error::last_os_error()));
                }
                Ok(())
            }
            _ => self
                .file
                .sync_data()
                .map_err(|e| io_err("sync", &self.path, e)),
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.flush()?;
        self.close_mapping()?;
        self.sync()
    }
}

impl Drop for MappedWritableFile {
    fn drop(&mut self) {
        // As for a buffered file: what was appended reaches the OS, and the spare space goes.
        let _ = self.flush();
        let _ = self.close_mapping();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Bytes that differ from one append to the next, so a misplaced copy shows.
    fn record(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i * 31 + j * 7 + 1) as u8).collect()
    }

    fn create(path: &Path, expected_len: u64) -> MappedWritableFile {
        MappedWritableFile::create(path, expected_len)
            .unwrap()
            .expect("mapping a fresh file")
    }

    /// Waits (up to 10 s) for the helper to populate `bytes` of the file.
    fn wait_populated(f: &MappedWritableFile, bytes: usize) {
        let region = f.region.as_ref().unwrap();
        for _ in 0..10_000 {
            if region.populated.load(Ordering::Acquire) >= bytes {
                return;
            }
            assert!(!region.closed.load(Ordering::Relaxed), "populating failed");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("the helper never populated {bytes} bytes");
    }

    #[test]
    fn appends_go_through_the_mapping_once_populated_and_past_it_by_pwrite() {
        let dir = crate::test_dir::tempdir();
        let path = dir.path().join("f");
        let capacity = 1 << 20;
        let mut f = create(&path, capacity);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), capacity);
        wait_populated(&f, 64 << 10);
        let mut expected = Vec::new();
        let mut i = 0;
        // Well past the mapping's end, in records of mixed sizes, some straddling pages.
        while expected.len() < 3 * capacity as usize {
            let r = record(i, [4126, 21, 9000, 1][i % 4]);
            f.append(&r).unwrap();
            if i == 0 {
                assert!(f.pending.is_empty(), "a populated page takes the copy");
            }
            if expected.len() + r.len() > capacity as usize {
                assert!(
                    !f.pending.is_empty(),
                    "past the mapping, bytes wait for pwrite"
                );
            }
            expected.extend_from_slice(&r);
            f.flush().unwrap();
            i += 1;
            if i % 100 == 0 {
                // What was flushed is what a reader (or a process crash) sees.
                let seen = std::fs::read(&path).unwrap();
                assert_eq!(&seen[..expected.len()], &expected[..], "after {i} appends");
            }
        }
        f.sync().unwrap();
        f.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    /// Resident kilobytes of the mapping that starts at `base`, from /proc/self/smaps.
    fn resident_kib(base: *mut u8) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let start = format!("{:x}-", base as usize);
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&start));
        lines.next().expect("the mapping is listed");
        lines
            .find_map(|l| l.strip_prefix("Rss:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap()
    }

    #[test]
    fn pages_far_behind_the_writer_leave_the_mapping_and_keep_their_bytes() {
        let dir = crate::test_dir::tempdir();
        let path = dir.path().join("f");
        let mut f = create(&path, 64 << 20);
        let base = f.region.as_ref().unwrap().base;
        let mut expected = Vec::new();
        for i in 0..512 {
            let r = record(i, 64 << 10);
            // Every record goes through the mapping.
            wait_populated(&f, expected.len() + r.len());
            f.append(&r).unwrap();
            expected.extend_from_slice(&r);
        }
        assert!(f.pending.is_empty());
        assert!(
            f.dropped >= expected.len() - 3 * DROP_BEHIND,
            "{}",
            f.dropped
        );
        let resident = resident_kib(base) << 10;
        assert!(
            resident <= (2 * DROP_BEHIND + MAX_AHEAD + (64 << 10)) as u64,
            "{resident} bytes of the mapping resident after {} appended",
            expected.len()
        );
        f.sync().unwrap();
        f.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn a_large_record_past_the_populated_pages_is_written_through() {
        let dir = crate::test_dir::tempdir();
        let path = dir.path().join("f");
        let mut f = create(&path, 1 << 20);
        let small = record(0, 100);
        let large = record(1, 3 << 20);
        f.append(&small).unwrap();
        f.flush().unwrap();
        f.append(&large).unwrap();
        assert!(f.pending.is_empty(), "a large record is not buffered");
        f.append(&small).unwrap();
        f.sync().unwrap();
        f.finish().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            [&small[..], &large, &small].concat()
        );
    }

    #[test]
    fn the_window_populated_ahead_grows_with_the_file() {
        let dir = crate::test_dir::tempdir();
        let mut f = create(&dir.path().join("f"), 64 << 20);
        let wanted =
            |f: &MappedWritableFile| f.region.as_ref().unwrap().wanted.load(Ordering::Relaxed);
        f.append(&record(0, 10_000)).unwrap();
        assert_eq!(
            wanted(&f),
            MIN_AHEAD,
            "a file barely written reserves little"
        );
        let mut len = 10_000;
        while len < 8 << 20 {
            f.append(&record(1, 4096)).unwrap();
            len += 4096;
            let w = wanted(&f);
            let ahead = len.clamp(MIN_AHEAD, MAX_AHEAD);
            assert!(
                w >= len + ahead / 2 && w <= len + ahead + 4096,
                "{w} at {len}"
            );
        }
        f.finish().unwrap();
    }

    #[test]
    fn dropping_trims_the_spare_space_and_a_crash_leaves_zeros_after_the_data() {
        let dir = crate::test_dir::tempdir();
        for crash in [false, true] {
            let path = dir.path().join(format!("f{crash}"));
            let mut f = create(&path, 256 << 10);
            wait_populated(&f, 8 << 10);
            let data = record(7, 5000);
            f.append(&data).unwrap();
            f.flush().unwrap();
            if crash {
                // The mapping and the file's extension stay, as after kill -9.
                std::mem::forget(f);
                let seen = std::fs::read(&path).unwrap();
                assert_eq!(seen.len(), 256 << 10);
                assert_eq!(&seen[..data.len()], &data[..]);
                assert!(seen[data.len()..].iter().all(|&b| b == 0));
            } else {
                drop(f);
                assert_eq!(std::fs::read(&path).unwrap(), data);
            }
        }
    }
}
