//! The filesystem seam. Every byte the engine reads or writes goes through [`FileSystem`], so that
//! tests can inject faults and drop unsynced data ([`FaultInjectionFs`]), and so the engine runs
//! under WASI unchanged. The traits and [`StdFileSystem`] are also at the crate root.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

mod batch;
pub(crate) mod buffers;
mod deletions;
mod fault;
mod fs_kind;
mod lock;
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
mod mapped;
mod modes;
#[cfg(target_os = "linux")]
mod small_disk;
mod storage_stats;
#[cfg(target_os = "linux")]
mod uring;
#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod wasip2;
pub(crate) use batch::BatchRead;
pub(crate) use deletions::{DeletionHold, Deletions};
pub use fault::{FaultError, FaultInjectionFs, FsOp};
#[cfg(target_os = "linux")]
pub use small_disk::SmallDisk;
pub use storage_stats::StorageStats;

/// Reads together what of `reads` it can (`done`); `into_result` reads the rest one by one.
/// Here, above both, so that `batch.rs` (the read) and `uring.rs` (one way to do it) do not
/// import each other.
pub(crate) fn read_batch(reads: &mut [BatchRead<'_>]) {
    #[cfg(target_os = "linux")]
    if reads.len() > 1 {
        uring::read_batch(reads);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = reads;
}

/// How far a sync must reach before it returns. On the local disk the two are one; a backend
/// that keeps the store beyond this machine (a bucket) tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Durability {
    /// This machine's disk: survives a crash and power loss, not the loss of the machine.
    Local,
    /// Wherever the store lives beyond this machine: survives its loss too.
    Remote,
}

/// A file being written from start to end (WAL, table, MANIFEST).
pub trait WritableFile: Send + Sync + Debug {
    /// Appends to the file; may buffer.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system (survives a process crash, not power loss).
    fn flush(&mut self) -> Result<()>;
    /// Flushes and makes the contents durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Syncs at least as far as `durability` (a WAL synced for one write that asked for more, or
    /// less, than the store's default). The default treats both as `sync`.
    fn sync_to(&mut self, durability: Durability) -> Result<()> {
        let _ = durability;
        self.sync()
    }
    /// The earliest a sync as far as `durability` (`None`: the store's default) should start,
    /// when this file spaces its syncs out (a bucket's commit interval): the engine waits for
    /// it before it gathers a group of writes, so writers that come meanwhile share the sync.
    /// `None` (the default): at once.
    fn sync_not_before(&self, durability: Option<Durability>) -> Option<std::time::Instant> {
        let _ = durability;
        None
    }
    /// Whether the file holds room reserved ahead of its appends (a file from
    /// [`FileSystem::create_sized`] on the local disk); dropping the writer gives it back.
    fn reserves_ahead(&self) -> bool {
        false
    }
    /// Syncs for the last time; the file ends at the last byte appended (a file from
    /// [`FileSystem::create_sized`] gives back its spare space). Nothing is appended after.
    fn finish(&mut self) -> Result<()> {
        self.sync()
    }
}

/// A file read at arbitrary offsets by several threads (tables).
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Fills `buf` from `offset`; reading past the end is an error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// The `len` bytes at `offset`, in a new buffer; reading past the end is an error. The
    /// default zero-fills the buffer first; a file that can read into fresh memory skips that
    /// (a block read from a cold cache pays for it on every read).
    fn read_vec_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }
    /// The file's length in bytes.
    fn len(&self) -> Result<u64>;
    /// True when the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// The descriptor a batch of reads (a MultiGet's missing blocks) may read through with
    /// io_uring, bypassing this trait; `None` (the default) has every read go through
    /// `read_vec_at`, as a file that injects faults or counts reads needs.
    #[cfg(target_os = "linux")]
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

/// A file written and read at any offset while it is filled (a value file, `Db::create_value_file`).
pub trait PositionalFile: Send + Sync + Debug {
    /// Writes all of `data` at `offset`, extending the file if needed.
    fn write_all_at(&self, data: &[u8], offset: u64) -> Result<()>;
    /// Fills `buf` from `offset`; reading past the end is an error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Cuts or extends (with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> Result<()>;
    /// Makes the contents durable (fdatasync).
    fn sync(&self) -> Result<()>;
}

/// Held while a directory is open; dropping it releases the lock.
pub trait FileLock: Send + Sync + Debug {}

/// What the engine needs from a filesystem.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates (or truncates) a file for writing.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates a file of appends expected to grow to about `expected_len` bytes. Until
    /// [`WritableFile::finish`] the file may hold zeroed spare space past the bytes appended, and
    /// a crash leaves it there: only formats whose readers take a zero tail for empty space (blob
    /// files, WALs) may use this. The default is [`FileSystem::create`].
    fn create_sized(&self, path: &Path, expected_len: u64) -> Result<Box<dyn WritableFile>> {
        let _ = expected_len;
        self.create(path)
    }
    /// Creates (or truncates) a file written at any offset. The default refuses: a filesystem
    /// that does not offer it cannot hold value files.
    fn create_positional(&self, path: &Path) -> Result<Box<dyn PositionalFile>> {
        Err(io_err(
            "create",
            path,
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "this filesystem has no positional files",
            ),
        ))
    }
    /// Opens a file for positional reads.
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file (WAL and MANIFEST replay, CURRENT).
    fn read_all(&self, path: &Path) -> Result<Vec<u8>>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Cuts a file to its first `len` bytes and syncs it (recovery gives back the spare space a
    /// crashed writer of a [`FileSystem::create_sized`] file had reserved).
    fn truncate(&self, path: &Path, len: u64) -> Result<()>;
    /// Cuts an existing file to its first `len` bytes, syncs it, and opens it to append after
    /// them: a log whose tail a failed write left unknown is resumed this way. The default
    /// refuses, and a store on such a filesystem stays stopped after a failed log write.
    fn reopen(&self, path: &Path, len: u64) -> Result<Box<dyn WritableFile>> {
        let _ = len;
        Err(io_err(
            "reopen",
            path,
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "this filesystem cannot reopen a file to append",
            ),
        ))
    }
    /// Names (not paths) of the entries in a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Makes a directory's entries (created, renamed, removed files) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// True when the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Takes an exclusive lock on `path`; `Busy` when another process holds it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Lets the owner's group read the store in `dir` from now on: the directory, and `files`
    /// (the store's own, by name), where the filesystem has owners and modes.
    fn share_with_group(&self, dir: &Path, files: &[String]) -> Result<()> {
        let _ = (dir, files);
        Ok(())
    }
    /// What in the store's directory `dir` is open to more accounts than the store means to
    /// be, a line each (`strata verify` prints them as warnings).
    fn loose_modes(&self, dir: &Path) -> Vec<String> {
        let _ = dir;
        Vec::new()
    }
    /// Whether appending to a file in `dir` waits on nothing but this machine (its page cache
    /// and disk): writes that must not wait (`Db::try_write`) are taken only then. A bucket
    /// store's WAL append may ask the bucket first; a directory on NFS or FUSE may wait on a
    /// server. Asked once, when the store opens.
    fn appends_are_local(&self, dir: &Path) -> bool {
        let _ = dir;
        true
    }
    /// For a replica (`Db::open_replica`), before each catch-up: brings `dir` up to date with
    /// where the store really lives (a bucket store replays its log's new records into the
    /// working copy). `Ok(false)` when nothing changed, so the catch-up is skipped. The local
    /// disk is kept current by the writer beside the replica: it may always have changed.
    ///
    /// `reading` names the table and blob files in `dir` that reads may still open: those of
    /// the version reads go to now and of every older one a read, an iterator or a snapshot
    /// still holds. A file the source no longer names may go once it is not among them, and
    /// not before.
    fn refresh(&self, dir: &Path, reading: &BTreeSet<String>) -> Result<bool> {
        let _ = (dir, reading);
        Ok(true)
    }
    /// Whether a reader of a directory sees its writer's deletions at once (the local disk:
    /// one directory for both), so that a replica must hold open every table and blob file its
    /// reads may reach: an unlinked file still reads through a descriptor open on it. A
    /// backend that keeps a reader's files until `refresh` is told no read needs them (a
    /// bucket's working copy) says no.
    fn shares_deletions_with_readers(&self) -> bool {
        true
    }
    /// A backend other than the local disk reports its own counters here (a bucket store's
    /// requests and cache); the local disk has none.
    fn storage_stats(&self) -> Option<StorageStats> {
        None
    }
}

/// The operating system's filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFileSystem;

impl StdFileSystem {
    /// A shareable handle.
    pub fn shared() -> Arc<dyn FileSystem> {
        Arc::new(StdFileSystem)
    }
}

/// Opens `path` for writing from empty, creating it if needed. Read access too, which mapping
/// the file for writing (`mapped.rs`) needs.
fn create_truncated(path: &Path) -> Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(true);
    open_private(&mut opts, path, "create")
}

/// Opens `path` with `opts` (`what` names the step in an error). A store's files are its
/// owner's alone (or its group's too, once shared: `modes.rs`), whatever the umask: another
/// account on the machine must not read what the REST token and the mount's modes guard. A new
/// file is made with that mode; a file a shared store opens is given it.
fn open_private(opts: &mut OpenOptions, path: &Path, what: &str) -> Result<File> {
    let mode = modes::new_file_mode(path);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(opts, mode);
    let file = opts.open(path).map_err(|e| io_err(what, path, e))?;
    #[cfg(unix)]
    modes::settle_new_file(&file, path, mode)?;
    #[cfg(not(unix))]
    let _ = mode;
    Ok(file)
}

/// Opens an existing `path` for writing, cut to `len` bytes (synced) and positioned at its end.
fn open_cut(path: &Path, len: u64) -> Result<File> {
    use std::io::{Seek, SeekFrom};
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| io_err("open", path, e))?;
    file.set_len(len)
        .and_then(|()| file.sync_data())
        .and_then(|()| file.seek(SeekFrom::Start(len)))
        .map_err(|e| io_err("truncate", path, e))?;
    Ok(file)
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", path.display()), e)
}

#[derive(Debug)]
struct StdWritableFile {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    /// Bytes written so far: where the next write goes (files are created empty).
    written: u64,
}

/// Writes `data` at `offset`. Under WASI a positional write is one `descriptor.write` call,
/// while a plain write goes through an output stream that a host may serve on another thread
/// (wasmtime's does: ~40 µs a WAL append against ~3 µs positioned). Elsewhere, a plain write.
fn write_out(file: &mut File, offset: u64, data: &[u8]) -> std::io::Result<()> {
    #[cfg(target_os = "wasi")]
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        let mut done = 0;
        while done < data.len() {
            let rest = &data[done..];
            let at = i64::try_from(offset + done as u64)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::FileTooLarge))?;
            // SAFETY: `fd` is the open descriptor `file` owns and keeps open for this call;
            // `rest` is a live slice and `pwrite` reads at most `rest.len()` bytes of it.
            // Exercised by every write of the WASI component's tests (crates/wasi-host).
            let n = unsafe { libc::pwrite(fd, rest.as_ptr().cast(), rest.len(), at) };
            match n {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n if n > 0 => done += n as usize,
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }
    #[cfg(not(target_os = "wasi"))]
    {
        let _ = offset;
        std::io::Write::write_all(file, data)
    }
}

const WRITE_BUFFER: usize = 64 * 1024;

impl WritableFile for StdWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.flush()?;
            if data.len() > WRITE_BUFFER {
                write_out(&mut self.file, self.written, data)
                    .map_err(|e| io_err("write", &self.path, e))?;
                self.written += data.len() as u64;
                return Ok(());
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            write_out(&mut self.file, self.written, &self.buf)
                .map_err(|e| io_err("write", &self.path, e))?;
            self.written += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file
            .sync_data()
            .map_err(|e| io_err("sync", &self.path, e))
    }
}

impl Drop for StdWritableFile {
    fn drop(&mut self) {
        // Unsynced bytes may be lost on a crash anyway; losing them on drop would be a bug.
        let _ = self.flush();
    }
}

/// A file read and written at offsets: shared as it is where the OS has positional I/O, behind
/// a lock (seek, then read or write) elsewhere.
#[derive(Debug)]
struct OffsetFile {
    #[cfg(unix)]
    file: File,
    #[cfg(not(unix))]
    file: parking_lot::Mutex<File>,
}

impl OffsetFile {
    fn new(file: File) -> OffsetFile {
        OffsetFile {
            #[cfg(unix)]
            file,
            #[cfg(not(unix))]
            file: parking_lot::Mutex::new(file),
        }
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            self.file.read_exact_at(buf, offset)
        }
        #[cfg(not(unix))]
        {
            use std::io::{Seek, SeekFrom};
            let mut f = self.file.lock();
            f.seek(SeekFrom::Start(offset))
                .and_then(|_| f.read_exact(buf))
        }
    }

    fn write_all_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            self.file.write_all_at(data, offset)
        }
        #[cfg(not(unix))]
        write_out(&mut self.file.lock(), offset, data)
    }

    /// Runs `f` on the file itself (set_len, sync, a raw descriptor).
    fn with<T>(&self, f: impl FnOnce(&File) -> T) -> T {
        #[cfg(unix)]
        {
            f(&self.file)
        }
        #[cfg(not(unix))]
        {
            f(&self.file.lock())
        }
    }
}

#[derive(Debug)]
struct StdRandomAccessFile {
    path: PathBuf,
    file: OffsetFile,
    len: u64,
}

impl RandomAccessFile for StdRandomAccessFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| io_err("read", &self.path, e))
    }

    #[cfg(target_os = "linux")]
    fn read_vec_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        use std::os::fd::AsRawFd;
        let fd = self.file.with(|f| f.as_raw_fd());
        let mut buf: Vec<u8> = buffers::take(len);
        let mut done = 0;
        while done < len {
            let at = offset
                .checked_add(done as u64)
                .and_then(|at| libc::off_t::try_from(at).ok())
                .ok_or_else(|| {
                    io_err("read", &self.path, std::io::ErrorKind::InvalidInput.into())
                })?;
            // SAFETY: the destination is `len - done` bytes of the vector's spare capacity
            // (`buffers::take(len)` has room for `len`), and pread writes at most that many.
            let n = unsafe { libc::pread(fd, buf.as_mut_ptr().add(done).cast(), len - done, at) };
            match n {
                n if n > 0 => done += n as usize,
                0 => {
                    let eof = std::io::ErrorKind::UnexpectedEof.into();
                    return Err(io_err("read", &self.path, eof));
                }
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(io_err("read", &self.path, e));
                    }
                }
            }
        }
        // SAFETY: the loop ends only once pread has written all `len` bytes.
        unsafe { buf.set_len(len) };
        Ok(buf)
    }

    fn len(&self) -> Result<u64> {
        Ok(self.len)
    }

    #[cfg(target_os = "linux")]
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.file.with(|f| f.as_raw_fd()))
    }
}

#[derive(Debug)]
struct StdPositionalFile {
    path: PathBuf,
    file: OffsetFile,
}

impl PositionalFile for StdPositionalFile {
    fn write_all_at(&self, data: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(data, offset)
            .map_err(|e| io_err("write", &self.path, e))
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| io_err("read", &self.path, e))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .with(|f| f.set_len(len))
            .map_err(|e| io_err("truncate", &self.path, e))
    }

    fn sync(&self) -> Result<()> {
        self.file
            .with(File::sync_data)
            .map_err(|e| io_err("sync", &self.path, e))
    }
}

impl FileSystem for StdFileSystem {
    fn appends_are_local(&self, dir: &Path) -> bool {
        fs_kind::appends_are_local(dir)
    }

    fn create_positional(&self, path: &Path) -> Result<Box<dyn PositionalFile>> {
        let file = create_truncated(path)?;
        Ok(Box::new(StdPositionalFile {
            path: path.to_path_buf(),
            file: OffsetFile::new(file),
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = create_truncated(path)?;
        Ok(Box::new(StdWritableFile {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(WRITE_BUFFER),
            written: 0,
        }))
    }

    fn reopen(&self, path: &Path, len: u64) -> Result<Box<dyn WritableFile>> {
        let file = open_cut(path, len)?;
        Ok(Box::new(StdWritableFile {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(WRITE_BUFFER),
            written: len,
        }))
    }

    /// On Linux the file is written through a mapping populated ahead of the writer
    /// (`mapped.rs`): an append of a large value costs a copy instead of a syscall and the
    /// kernel's page-cache work.
    fn create_sized(&self, path: &Path, expected_len: u64) -> Result<Box<dyn WritableFile>> {
        // Not where a store into the mapping could fault on a full disk or wait on a server.
        #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
        if fs_kind::mapping_is_safe(path.parent().unwrap_or(Path::new(".")))
            && let Some(file) = mapped::MappedWritableFile::create(path, expected_len)?
        {
            return Ok(Box::new(file));
        }
        let _ = expected_len;
        self.create(path)
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        if let Some(opened) = wasip2::open(path) {
            return Ok(Arc::new(opened?));
        }
        let file = File::open(path).map_err(|e| io_err("open", path, e))?;
        let len = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
        Ok(Arc::new(StdRandomAccessFile {
            path: path.to_path_buf(),
            file: OffsetFile::new(file),
            len,
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut out))
            .map_err(|e| io_err("read", path, e))?;
        Ok(out)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| io_err("rename", from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| io_err("remove", path, e))
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_err("open", path, e))?;
        file.set_len(len)
            .and_then(|()| file.sync_data())
            .map_err(|e| io_err("truncate", path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io_err("list", dir, e))? {
            let entry = entry.map_err(|e| io_err("list", dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        // The store's directory is its owner's alone, as its files are (`private`).
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, modes::PRIVATE_DIR);
        builder
            .create(dir)
            .map_err(|e| io_err("create directory", dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        #[cfg(unix)]
        {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err("sync directory", dir, e))
        }
        #[cfg(not(unix))]
        {
            // WASI has no directory handle to sync; the host's filesystem decides durability.
            let _ = dir;
            Ok(())
        }
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn share_with_group(&self, dir: &Path, files: &[String]) -> Result<()> {
        modes::share_with_group(dir, files)
    }

    fn loose_modes(&self, dir: &Path) -> Vec<String> {
        modes::loose_modes(dir)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        lock::lock_file(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_rename_list() {
        let dir = crate::test_dir::tempdir();
        let fs = StdFileSystem;
        let a = dir.path().join("a");
        let mut w = fs.create(&a).unwrap();
        w.append(b"hello ").unwrap();
        w.append(&vec![b'x'; WRITE_BUFFER + 10]).unwrap();
        w.sync().unwrap();
        drop(w);
        let r = fs.open_random(&a).unwrap();
        assert_eq!(r.len().unwrap(), 6 + WRITE_BUFFER as u64 + 10);
        let mut buf = [0u8; 5];
        r.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello");
        assert!(r.read_exact_at(&mut buf, r.len().unwrap() - 2).is_err());
        let b = dir.path().join("b");
        fs.rename(&a, &b).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        assert_eq!(fs.list(dir.path()).unwrap(), vec!["b".to_string()]);
        assert!(fs.read_all(&a).is_err());
    }

    /// The read into fresh memory gives the file's bytes, and fails past the end.
    #[test]
    fn read_vec_at_reads_exactly_the_bytes_asked_for() {
        let dir = crate::test_dir::tempdir();
        let fs = StdFileSystem;
        let a = dir.path().join("a");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut w = fs.create(&a).unwrap();
        w.append(&data).unwrap();
        w.sync().unwrap();
        drop(w);
        let r = fs.open_random(&a).unwrap();
        assert_eq!(r.read_vec_at(4096, 12_345).unwrap(), &data[12_345..16_441]);
        assert_eq!(r.read_vec_at(0, 5).unwrap(), Vec::<u8>::new());
        assert_eq!(r.read_vec_at(100_000, 0).unwrap(), data);
        assert!(r.read_vec_at(10, 99_995).is_err());
        assert!(r.read_vec_at(1, u64::MAX).is_err());
    }
}
