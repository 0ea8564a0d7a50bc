//! A filesystem that fails on command and forgets what was never synced, as a power loss would.
//!
//! It writes to the real filesystem but remembers, per file, how many bytes were last made durable
//! by `sync`, and which directory entries (files created, renames) no `sync_dir` has covered yet.
//! [`FaultInjectionFs::deactivate`] models the moment power goes: every later call fails, so a
//! store being dropped cannot write more. [`FaultInjectionFs::drop_unsynced_data`] then rewinds
//! the directory to what a disk would hold after the crash: files cut back to their synced length,
//! unsynced renames undone, unsynced creations removed. Deletions are taken as durable.
//!
//! Separately, rules make chosen operations fail with `EIO` or `ENOSPC` after N calls or at random,
//! to check that the engine returns the error, stops writing where it must, and never damages what
//! is already on disk.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{
    FileLock, FileSystem, PositionalFile, RandomAccessFile, StdFileSystem, WritableFile, io_err,
};
use crate::error::{Error, Result};

mod survivors;
use survivors::Survivors;

/// The operations a fault rule can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FsOp {
    /// Positional reads and whole-file reads.
    Read,
    /// Appends to a file being written.
    Write,
    /// `sync` of a file being written.
    Sync,
    /// Creating a file.
    Create,
    /// Renaming a file.
    Rename,
    /// Removing a file.
    Remove,
    /// Syncing a directory.
    SyncDir,
}

impl FsOp {
    /// Every operation.
    pub const ALL: [FsOp; 7] = [
        FsOp::Read,
        FsOp::Write,
        FsOp::Sync,
        FsOp::Create,
        FsOp::Rename,
        FsOp::Remove,
        FsOp::SyncDir,
    ];
    /// Everything that changes the disk.
    pub const MUTATING: [FsOp; 6] = [
        FsOp::Write,
        FsOp::Sync,
        FsOp::Create,
        FsOp::Rename,
        FsOp::Remove,
        FsOp::SyncDir,
    ];
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultError {
    /// `EIO`: the device failed.
    Eio,
    /// `ENOSPC`: the device is full.
    NoSpace,
}

impl FaultError {
    fn os_error(self) -> std::io::Error {
        // The platform's own numbers: WASI's differ from Linux's (there 28 is EINVAL).
        #[cfg(any(target_os = "linux", target_os = "wasi"))]
        let (eio, enospc) = (libc::EIO, libc::ENOSPC);
        #[cfg(not(any(target_os = "linux", target_os = "wasi")))]
        let (eio, enospc) = (5, 28);
        match self {
            FaultError::Eio => std::io::Error::from_raw_os_error(eio),
            FaultError::NoSpace => std::io::Error::from_raw_os_error(enospc),
        }
    }
}

/// When a rule fires.
#[derive(Debug, Clone, Copy)]
enum Trigger {
    /// Every call after the first `n` matching ones.
    After(u64),
    /// Each matching call with probability 1/n.
    OneIn(u64),
}

#[derive(Debug, Clone)]
struct Rule {
    ops: Vec<FsOp>,
    trigger: Trigger,
    error: FaultError,
    seen: u64,
}

#[derive(Debug)]
struct Renamed {
    from: PathBuf,
    to: PathBuf,
    /// What `to` held before, restored when the rename is undone.
    replaced: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct FaultState {
    active: bool,
    /// Durable length of every file written through this filesystem.
    synced_len: HashMap<PathBuf, u64>,
    /// Files created at their expected size (`create_sized`) and not yet trimmed, with the bytes
    /// appended: past those they hold zeros, and a power loss zeroes their unsynced bytes rather
    /// than cutting the file.
    extended: HashMap<PathBuf, Extended>,
    /// Files whose creation no directory sync has covered.
    unsynced_creates: HashSet<PathBuf>,
    /// Renames no directory sync has covered, oldest first.
    unsynced_renames: Vec<Renamed>,
    /// Where each file renamed so far went, so that a positional file synced after its rename is
    /// credited under its new name.
    moved: HashMap<PathBuf, PathBuf>,
    rules: Vec<Rule>,
    rng: XorShift,
    injected: u64,
}

/// A file created at its expected size and not yet trimmed.
#[derive(Debug, Default)]
struct Extended {
    /// Bytes appended: past them the file holds zeros.
    appended: u64,
    /// Where each append not yet synced ended: the points from which an older version of a page
    /// can read as zeros.
    append_ends: Vec<u64>,
}

/// Writes `data` at `offset` of `file`, on every target (WASI has no `FileExt::write_all_at`).
fn write_at(file: &File, data: &[u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut file = file;
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(data)
}

/// xorshift64*: reproducible from a seed, no dependency needed.
#[derive(Debug, Default)]
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

impl FaultState {
    /// `Err` when `op` on `path` must fail now.
    fn check(&mut self, op: FsOp, path: &Path) -> Result<()> {
        if !self.active {
            return Err(Error::io(
                format!("{op:?} {} after simulated power loss", path.display()),
                std::io::Error::from_raw_os_error(5),
            ));
        }
        for rule in self.rules.iter_mut().filter(|r| r.ops.contains(&op)) {
            rule.seen += 1;
            let fire = match rule.trigger {
                Trigger::After(n) => rule.seen > n,
                Trigger::OneIn(n) => self.rng.next().is_multiple_of(n.max(1)),
            };
            if fire {
                self.injected += 1;
                return Err(Error::io(
                    format!("injected {op:?} fault on {}", path.display()),
                    rule.error.os_error(),
                ));
            }
        }
        Ok(())
    }
}

/// A [`FileSystem`] over the real one that injects errors and simulates power loss, for tests; see
/// the module documentation.
#[derive(Debug, Clone)]
pub struct FaultInjectionFs {
    state: Arc<Mutex<FaultState>>,
}

impl Default for FaultInjectionFs {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultInjectionFs {
    /// An active filesystem with no fault rules.
    pub fn new() -> Self {
        FaultInjectionFs {
            state: Arc::new(Mutex::new(FaultState {
                active: true,
                rng: XorShift(0x9e37_79b9_7f4a_7c15),
                ..Default::default()
            })),
        }
    }

    /// From now on, every call of one of `ops` after the first `n` fails with `error`.
    pub fn fail_after(&self, ops: &[FsOp], n: u64, error: FaultError) {
        self.add_rule(ops, Trigger::After(n), error);
    }

    /// From now on, each call of one of `ops` fails with probability `1/one_in`; `seed` makes the
    /// sequence of failures reproducible.
    pub fn fail_randomly(&self, ops: &[FsOp], one_in: u64, error: FaultError, seed: u64) {
        let mut st = self.state.lock();
        st.rng = XorShift(seed | 1);
        drop(st);
        self.add_rule(ops, Trigger::OneIn(one_in), error);
    }

    fn add_rule(&self, ops: &[FsOp], trigger: Trigger, error: FaultError) {
        self.state.lock().rules.push(Rule {
            ops: ops.to_vec(),
            trigger,
            error,
            seen: 0,
        });
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.state.lock().rules.clear();
    }

    /// How many errors the rules have injected so far.
    pub fn injected(&self) -> u64 {
        self.state.lock().injected
    }

    /// The power goes: every later call fails until [`Self::drop_unsynced_data`].
    pub fn deactivate(&self) {
        self.state.lock().active = false;
    }

    /// Rewinds the disk to what survives a power loss that lost every unsynced byte, then accepts
    /// calls again (fault rules are kept). Call it once nothing holds a file open for writing (the
    /// store was dropped), or a late writer could write past the cut.
    pub fn drop_unsynced_data(&self) -> Result<()> {
        self.rewind(|_, _| Survivors::Prefix(0))
    }

    /// As [`Self::drop_unsynced_data`], except that each file keeps a random share of its unsynced
    /// tail (none, some, possibly cut mid-record, or all), as a disk that wrote back some pages
    /// before the power went would; a file extended ahead may instead keep a random set of its
    /// unsynced pages, as [`Self::drop_random_unsynced_pages`] does.
    pub fn drop_random_unsynced_data(&self, seed: u64) -> Result<()> {
        let mut rng = XorShift(seed | 1);
        self.rewind(move |_, unsynced| match rng.next() % 4 {
            0 => Survivors::Prefix(0),
            1 => Survivors::Prefix(unsynced),
            2 => Survivors::Prefix(rng.next() % (unsynced + 1)),
            _ => Survivors::Pages(rng.next()),
        })
    }

    /// As [`Self::drop_unsynced_data`], except that a file extended ahead (`create_sized`) keeps
    /// each 4 KiB page of its unsynced bytes or not, at random: writeback has no order, so the
    /// pages that reached the disk before the power went need not be a prefix, and what did not
    /// reads back as zeros between bytes that did. Other files keep a random prefix.
    pub fn drop_random_unsynced_pages(&self, seed: u64) -> Result<()> {
        let mut rng = XorShift(seed | 1);
        self.rewind(move |_, _| Survivors::Pages(rng.next()))
    }

    /// `survivors(path, unsynced_bytes)` says which unsynced bytes of a file survive.
    fn rewind(&self, mut survivors: impl FnMut(&Path, u64) -> Survivors) -> Result<()> {
        let mut st = self.state.lock();
        let mut files: Vec<(&PathBuf, &u64)> = st.synced_len.iter().collect();
        files.sort();
        for (path, &synced) in files {
            if st.unsynced_creates.contains(path) {
                continue;
            }
            match OpenOptions::new().write(true).open(path) {
                Ok(f) => {
                    if let Some(ext) = st.extended.get(path) {
                        // The file keeps its size; what the disk never got reads as zeros.
                        let appended = ext.appended;
                        let from = synced.min(appended);
                        let lost =
                            survivors(path, appended - from).lost(from, appended, &ext.append_ends);
                        for (start, end) in lost {
                            let zeros = vec![0u8; (end - start) as usize];
                            write_at(&f, &zeros, start).map_err(|e| io_err("zero", path, e))?;
                        }
                        continue;
                    }
                    let len = f.metadata().map_err(|e| io_err("stat", path, e))?.len();
                    let unsynced = len.saturating_sub(synced);
                    let cut = synced.min(len) + survivors(path, unsynced).prefix(unsynced);
                    f.set_len(cut).map_err(|e| io_err("truncate", path, e))?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("open", path, e)),
            }
        }
        for r in std::mem::take(&mut st.unsynced_renames).into_iter().rev() {
            if r.to.exists() {
                std::fs::rename(&r.to, &r.from).map_err(|e| io_err("undo rename", &r.to, e))?;
            }
            if let Some(old) = r.replaced {
                std::fs::write(&r.to, old).map_err(|e| io_err("restore", &r.to, e))?;
            }
        }
        for path in std::mem::take(&mut st.unsynced_creates) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove", &path, e)),
            }
        }
        st.synced_len.clear();
        st.extended.clear();
        st.active = true;
        Ok(())
    }

    /// A new file for appends, extended to `expected_len` when given (`create_sized`).
    fn create_extended(
        &self,
        path: &Path,
        expected_len: Option<u64>,
    ) -> Result<Box<dyn WritableFile>> {
        self.check(FsOp::Create, path)?;
        let file = super::create_truncated(path)?;
        if let Some(len) = expected_len {
            file.set_len(len).map_err(|e| io_err("extend", path, e))?;
        }
        self.note_created(path);
        if expected_len.is_some() {
            let ext = Extended::default();
            self.state.lock().extended.insert(path.to_path_buf(), ext);
        }
        Ok(Box::new(FaultWritableFile {
            path: path.to_path_buf(),
            file,
            buf: Vec::new(),
            written: 0,
            fs: self.clone(),
            sized: expected_len.is_some(),
            append_ends: Vec::new(),
        }))
    }

    /// Records a new, empty file whose directory entry is not yet durable.
    fn note_created(&self, path: &Path) {
        let mut st = self.state.lock();
        st.synced_len.insert(path.to_path_buf(), 0);
        st.unsynced_creates.insert(path.to_path_buf());
    }

    fn check(&self, op: FsOp, path: &Path) -> Result<()> {
        self.state.lock().check(op, path)
    }
}

/// A file being written: its own buffer, so that bytes never handed over die with a crash instead
/// of being written by a destructor after the cut.
#[derive(Debug)]
struct FaultWritableFile {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    written: u64,
    fs: FaultInjectionFs,
    /// Created at its expected size (`create_sized`): bytes go at `written`, not at the file's
    /// end, and the spare space goes when the file is finished or dropped.
    sized: bool,
    /// Where each append still in `buf` ends (sized files).
    append_ends: Vec<u64>,
}

impl FaultWritableFile {
    /// Gives back a sized file's spare space, as the mapped file does.
    fn trim(&mut self) -> Result<()> {
        if self.sized {
            self.file
                .set_len(self.written)
                .map_err(|e| io_err("trim", &self.path, e))?;
            self.fs.state.lock().extended.remove(&self.path);
            self.sized = false;
        }
        Ok(())
    }
}

impl WritableFile for FaultWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.fs.check(FsOp::Write, &self.path)?;
        self.buf.extend_from_slice(data);
        if self.sized {
            self.append_ends.push(self.written + self.buf.len() as u64);
        }
        if self.buf.len() >= super::WRITE_BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.fs.check(FsOp::Write, &self.path)?;
        let wrote = if self.sized {
            write_at(&self.file, &self.buf, self.written)
        } else {
            self.file.write_all(&self.buf)
        };
        wrote.map_err(|e| io_err("write", &self.path, e))?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        if self.sized {
            let mut st = self.fs.state.lock();
            let ext = st.extended.entry(self.path.clone()).or_default();
            ext.appended = self.written;
            ext.append_ends.append(&mut self.append_ends);
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.fs.check(FsOp::Sync, &self.path)?;
        self.file
            .sync_data()
            .map_err(|e| io_err("sync", &self.path, e))?;
        let mut st = self.fs.state.lock();
        st.synced_len.insert(self.path.clone(), self.written);
        if let Some(ext) = st.extended.get_mut(&self.path) {
            ext.append_ends.retain(|&end| end > self.written);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.flush()?;
        self.trim()?;
        self.sync()
    }
}

/// A positional file: faults as for appends; a power loss keeps what its last `sync` covered,
/// under whatever name the file has by then.
#[derive(Debug)]
struct FaultPositionalFile {
    path: PathBuf,
    inner: Box<dyn PositionalFile>,
    fs: FaultInjectionFs,
}

impl PositionalFile for FaultPositionalFile {
    fn write_all_at(&self, data: &[u8], offset: u64) -> Result<()> {
        self.fs.check(FsOp::Write, &self.path)?;
        self.inner.write_all_at(data, offset)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.fs.check(FsOp::Read, &self.path)?;
        self.inner.read_exact_at(buf, offset)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.fs.check(FsOp::Write, &self.path)?;
        self.inner.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        self.fs.check(FsOp::Sync, &self.path)?;
        self.inner.sync()?;
        let mut st = self.fs.state.lock();
        let mut path = &self.path;
        // Bounded: names reused by later renames could form a cycle.
        for _ in 0..st.moved.len() {
            match st.moved.get(path) {
                Some(to) => path = to,
                None => break,
            }
        }
        let path = path.clone();
        let len = std::fs::metadata(&path)
            .map_err(|e| io_err("stat", &path, e))?
            .len();
        st.synced_len.insert(path, len);
        Ok(())
    }
}

impl Drop for FaultWritableFile {
    fn drop(&mut self) {
        if self.fs.state.lock().active {
            let _ = self.flush();
            let _ = self.trim();
        }
    }
}

#[derive(Debug)]
struct FaultRandomAccessFile {
    path: PathBuf,
    inner: Arc<dyn RandomAccessFile>,
    fs: FaultInjectionFs,
}

impl RandomAccessFile for FaultRandomAccessFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.fs.check(FsOp::Read, &self.path)?;
        self.inner.read_exact_at(buf, offset)
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
}

impl FileSystem for FaultInjectionFs {
    fn share_with_group(&self, dir: &Path, files: &[String]) -> Result<()> {
        super::modes::share_with_group(dir, files)
    }

    fn loose_modes(&self, dir: &Path) -> Vec<String> {
        super::modes::loose_modes(dir)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create_extended(path, None)
    }

    /// As the local disk's mapped files: extended to `expected_len` at once, zeros past what was
    /// appended until finished or dropped; a power loss zeroes unsynced bytes in place.
    fn create_sized(&self, path: &Path, expected_len: u64) -> Result<Box<dyn WritableFile>> {
        self.create_extended(path, Some(expected_len))
    }

    /// Cutting back is a write; the real `reopen` syncs what the cut leaves, so all of it is durable.
    fn reopen(&self, path: &Path, len: u64) -> Result<Box<dyn WritableFile>> {
        self.check(FsOp::Write, path)?;
        let file = super::open_cut(path, len)?;
        let mut st = self.state.lock();
        st.synced_len.insert(path.to_path_buf(), len);
        st.extended.remove(path);
        drop(st);
        Ok(Box::new(FaultWritableFile {
            path: path.to_path_buf(),
            file,
            buf: Vec::new(),
            written: len,
            fs: self.clone(),
            sized: false,
            append_ends: Vec::new(),
        }))
    }

    fn create_positional(&self, path: &Path) -> Result<Box<dyn PositionalFile>> {
        self.check(FsOp::Create, path)?;
        let inner = StdFileSystem.create_positional(path)?;
        self.note_created(path);
        Ok(Box::new(FaultPositionalFile {
            path: path.to_path_buf(),
            inner,
            fs: self.clone(),
        }))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.check(FsOp::Read, path)?;
        Ok(Arc::new(FaultRandomAccessFile {
            path: path.to_path_buf(),
            inner: StdFileSystem.open_random(path)?,
            fs: self.clone(),
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.check(FsOp::Read, path)?;
        StdFileSystem.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(FsOp::Rename, from)?;
        let replaced = match std::fs::read(to) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err("read", to, e)),
        };
        StdFileSystem.rename(from, to)?;
        let mut st = self.state.lock();
        if let Some(len) = st.synced_len.remove(from) {
            st.synced_len.insert(to.to_path_buf(), len);
        }
        st.moved.insert(from.to_path_buf(), to.to_path_buf());
        st.unsynced_renames.push(Renamed {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            replaced,
        });
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.check(FsOp::Remove, path)?;
        StdFileSystem.remove(path)?;
        let mut st = self.state.lock();
        st.synced_len.remove(path);
        st.unsynced_creates.remove(path);
        Ok(())
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.check(FsOp::Write, path)?;
        StdFileSystem.truncate(path, len)?;
        if let Some(synced) = self.state.lock().synced_len.get_mut(path) {
            *synced = len;
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.check(FsOp::Read, dir)?;
        StdFileSystem.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.check(FsOp::Create, dir)?;
        StdFileSystem.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.check(FsOp::SyncDir, dir)?;
        StdFileSystem.sync_dir(dir)?;
        let mut st = self.state.lock();
        st.unsynced_creates.retain(|p| p.parent() != Some(dir));
        st.unsynced_renames.retain(|r| r.to.parent() != Some(dir));
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.check(FsOp::Create, path)?;
        StdFileSystem.lock(path)
    }
}

#[cfg(test)]
mod tests;
