//! Helpers shared by the integration tests.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use strata_engine::DbIterator;

/// Every entry an iterator yields from the start, checking its status at the end.
pub fn collect(mut it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

/// Every entry an iterator yields from the end, in key order, checking its status at the end.
pub fn collect_backward(mut it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    out.reverse();
    out
}

/// Every file in `dir` with its length, by name: what a check that nothing changed compares.
pub fn list_dir(dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    files.sort();
    files
}

/// Files in a store's directory whose extension is `ext`, by path.
pub fn files_with_extension(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

/// How many files in `dir` whose extension is `ext` this process holds open (Linux: read from
/// `/proc/self/fd`).
#[cfg(target_os = "linux")]
pub fn open_files_with_extension(dir: &Path, ext: &str) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| p.starts_with(dir) && p.extension().is_some_and(|x| x == ext))
        .count()
}

/// Table files in a store's directory.
pub fn tables_on_disk(dir: &Path) -> usize {
    files_with_extension(dir, "sst").len()
}

/// A filesystem over `inner` that runs a hook before every `create`; the create fails with the
/// hook's error. Tests use it to refuse or hold back particular files, to watch removals
/// (`on_remove`), and to pass for a network filesystem (`not_local`).
pub struct HookedFs {
    inner: std::sync::Arc<dyn strata_engine::FileSystem>,
    hook: Box<BeforeCreate>,
    on_remove: Option<Box<BeforeRemove>>,
    on_open: Option<Box<BeforeCreate>>,
    on_refresh: Option<Box<InsteadOfRefresh>>,
    local: bool,
}

/// Answers a replica's `refresh` in place of the disk (which always says "may have changed").
type InsteadOfRefresh = dyn Fn() -> strata_engine::Result<bool> + Send + Sync;

/// Runs before a create; an error fails it.
type BeforeCreate = dyn Fn(&Path) -> strata_engine::Result<()> + Send + Sync;

/// Runs before a remove.
type BeforeRemove = dyn Fn(&Path) + Send + Sync;

impl HookedFs {
    pub fn new(
        inner: std::sync::Arc<dyn strata_engine::FileSystem>,
        hook: impl Fn(&Path) -> strata_engine::Result<()> + Send + Sync + 'static,
    ) -> Self {
        HookedFs {
            inner,
            hook: Box::new(hook),
            on_remove: None,
            on_open: None,
            on_refresh: None,
            local: true,
        }
    }

    /// Says appends may wait on something other than this machine, as NFS or FUSE would.
    pub fn not_local(mut self) -> Self {
        self.local = false;
        self
    }

    /// Also runs `watch` before every `remove`.
    pub fn on_remove(mut self, watch: impl Fn(&Path) + Send + Sync + 'static) -> Self {
        self.on_remove = Some(Box::new(watch));
        self
    }

    /// Runs `hook` before every `open_random`; an error fails it.
    pub fn on_open(
        mut self,
        hook: impl Fn(&Path) -> strata_engine::Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.on_open = Some(Box::new(hook));
        self
    }

    /// Answers each `refresh` with `answer` (which may also wait, or panic).
    pub fn on_refresh(
        mut self,
        answer: impl Fn() -> strata_engine::Result<bool> + Send + Sync + 'static,
    ) -> Self {
        self.on_refresh = Some(Box::new(answer));
        self
    }
}

impl std::fmt::Debug for HookedFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookedFs")
            .field("inner", &self.inner)
            .finish()
    }
}

impl strata_engine::FileSystem for HookedFs {
    fn create(&self, path: &Path) -> strata_engine::Result<Box<dyn strata_engine::WritableFile>> {
        (self.hook)(path)?;
        self.inner.create(path)
    }
    fn create_sized(
        &self,
        path: &Path,
        expected_len: u64,
    ) -> strata_engine::Result<Box<dyn strata_engine::WritableFile>> {
        (self.hook)(path)?;
        self.inner.create_sized(path, expected_len)
    }
    fn open_random(
        &self,
        path: &Path,
    ) -> strata_engine::Result<std::sync::Arc<dyn strata_engine::RandomAccessFile>> {
        if let Some(hook) = &self.on_open {
            hook(path)?;
        }
        self.inner.open_random(path)
    }
    fn read_all(&self, path: &Path) -> strata_engine::Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> strata_engine::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> strata_engine::Result<()> {
        if let Some(watch) = &self.on_remove {
            watch(path);
        }
        self.inner.remove(path)
    }
    fn reopen(
        &self,
        path: &Path,
        len: u64,
    ) -> strata_engine::Result<Box<dyn strata_engine::WritableFile>> {
        self.inner.reopen(path, len)
    }
    fn truncate(&self, path: &Path, len: u64) -> strata_engine::Result<()> {
        self.inner.truncate(path, len)
    }
    fn list(&self, dir: &Path) -> strata_engine::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> strata_engine::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> strata_engine::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> strata_engine::Result<Box<dyn strata_engine::FileLock>> {
        self.inner.lock(path)
    }
    fn appends_are_local(&self, dir: &Path) -> bool {
        self.local && self.inner.appends_are_local(dir)
    }
    fn refresh(
        &self,
        dir: &Path,
        reading: &std::collections::BTreeSet<String>,
    ) -> strata_engine::Result<bool> {
        match &self.on_refresh {
            Some(answer) => answer(),
            None => self.inner.refresh(dir, reading),
        }
    }
}

/// Options of a write that returns once it is durable.
pub fn synced() -> strata_engine::WriteOptions {
    strata_engine::WriteOptions {
        sync: true,
        ..Default::default()
    }
}

/// `len` bytes no compressor shrinks (xorshift), the same for the same `seed` and different
/// for each.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Copies a store's files as a crash would leave them: whatever reached the OS.
pub fn crash_copy(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A temporary directory on every target: WASI has no system temp directory, so there it is
/// under `$TMPDIR` (the runner, `strata-wasi-run`, preopens one).
pub fn tempdir() -> tempfile::TempDir {
    #[cfg(target_os = "wasi")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let dir = std::env::var_os("TMPDIR").unwrap_or_else(|| "/tmp".into());
            let _ = tempfile::env::override_temp_dir(Path::new(&dir));
        });
    }
    tempfile::tempdir().unwrap()
}

/// Lets background work run. Natively the engine's threads do it and this does nothing; under
/// WASI (the inline executor) the embedder drives it through `Db::maintenance`, as a host does
/// every so many writes.
pub fn background_work(db: &strata_engine::Db) {
    #[cfg(target_os = "wasi")]
    while db.maintenance().unwrap_or(false) {}
    let _ = db;
}
