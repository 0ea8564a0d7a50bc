//! A real mount in a temporary directory, over a store in another, unmounted when dropped.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

use strata_engine::{ColumnFamily, Db, Options};
use strata_fusefs::{FsConfig, FsStats, Invalidator, MountConfig, Mounted, StrataFs};

/// Shared while a test starts processes (`fusermount3` behind every mount and unmount, the
/// tools some tests run); exclusive while `write_a_large_file` holds its file open. A process
/// forked meanwhile inherits the file's descriptor, and its exec closes it, which is a flush:
/// the file would reach the store before the test looks at what its open state left on disk.
static STARTING_PROCESSES: RwLock<()> = RwLock::new(());

pub fn starting_processes() -> RwLockReadGuard<'static, ()> {
    STARTING_PROCESSES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
}

pub struct Mount {
    pub db: Arc<Db>,
    pub stats: Arc<FsStats>,
    pub invalidator: Invalidator,
    mounted: Option<Mounted>,
    // Dropped after the mount.
    pub dir: tempfile::TempDir,
    pub store: tempfile::TempDir,
}

/// Whether this machine can mount FUSE filesystems. Under `CI` it must: a missing `/dev/fuse`
/// fails the suite instead of skipping it.
pub fn fuse_available() -> bool {
    let Err(missing) = strata_fusefs::check_fuse() else {
        return true;
    };
    assert!(std::env::var_os("CI").is_none(), "CI is set but {missing}");
    eprintln!("skipping: {missing} (CI fails instead)");
    false
}

impl Mount {
    pub fn new() -> Option<Mount> {
        Mount::with(FsConfig::default(), false)
    }

    pub fn with(config: FsConfig, read_only: bool) -> Option<Mount> {
        if !fuse_available() {
            return None;
        }
        let store = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut opts = Options::default();
        strata_fusefs::prepare_options(&mut opts, &config.column_family);
        let db = Arc::new(Db::open(store.path(), opts).unwrap());
        Some(Mount::over(db, store, dir, config, read_only))
    }

    /// Mounts an already open store.
    pub fn over(
        db: Arc<Db>,
        store: tempfile::TempDir,
        dir: tempfile::TempDir,
        config: FsConfig,
        read_only: bool,
    ) -> Mount {
        let fs = StrataFs::new(db.clone(), config).unwrap();
        let stats = fs.stats();
        let mc = MountConfig {
            read_only,
            ..MountConfig::default()
        };
        let mounted = {
            let _starting = starting_processes();
            strata_fusefs::spawn(fs, dir.path(), &mc).unwrap()
        };
        Mount {
            db,
            stats,
            invalidator: mounted.invalidator(),
            mounted: Some(mounted),
            dir,
            store,
        }
    }

    /// Unmounts; hands back the store and its directory, for a reopen.
    pub fn unmount_keeping_store(mut self) -> (Arc<Db>, tempfile::TempDir) {
        if let Some(m) = self.mounted.take() {
            let _starting = starting_processes();
            m.unmount().unwrap();
        }
        let store = std::mem::replace(&mut self.store, tempfile::tempdir().unwrap());
        (self.db.clone(), store)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn cf(&self) -> ColumnFamily {
        self.db.default_cf()
    }

    /// Every key of the mounted (data) column family, in order.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        self.db
            .iter_cf(&strata_engine::ReadOptions::default(), &self.cf())
            .unwrap()
            .forward()
            .map(|e| e.unwrap().0)
            .collect()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(m) = self.mounted.take() {
            let _starting = starting_processes();
            let _ = m.unmount();
        }
    }
}

/// What a tree holds, as far as both a plain directory and the mount must agree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File { perm: u32, bytes: Vec<u8> },
    Dir { perm: u32 },
    Symlink(PathBuf),
    Fifo,
}

pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Node>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().to_path_buf();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let ft = m.file_type();
        let perm = m.permissions().mode() & 0o7777;
        let node = if ft.is_symlink() {
            Node::Symlink(std::fs::read_link(&p).unwrap())
        } else if ft.is_dir() {
            walk(root, &p, out);
            Node::Dir { perm }
        } else if ft.is_file() {
            let bytes = std::fs::read(&p).unwrap();
            assert_eq!(bytes.len() as u64, m.size(), "{}: size", p.display());
            Node::File { perm, bytes }
        } else {
            Node::Fifo
        };
        out.insert(rel, node);
    }
}

/// (used blocks, block size) from statvfs.
pub fn fs_stats(p: &Path) -> (u64, u64) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is NUL-terminated and `s` is valid for one statvfs.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) }, 0);
    // SAFETY: statvfs returned 0, so it filled the struct.
    let s = unsafe { s.assume_init() };
    (s.f_blocks - s.f_bfree, s.f_frsize)
}

/// A mount whose open files send their writes to the store past 1 MiB.
pub fn small_write_back() -> FsConfig {
    FsConfig {
        write_back: 1 << 20,
        ..FsConfig::default()
    }
}

/// Names of temporary files in the store's directory.
pub fn temporary_files(m: &Mount) -> Vec<String> {
    std::fs::read_dir(m.store.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".tmp") || n.starts_with("tmp") || n.ends_with(".tmp"))
        .collect()
}

/// Writes a 24 MiB file in 1 MiB writes and checks it through the mount and the store; returns
/// the length the store held before the file was flushed.
pub fn write_a_large_file(m: &Mount, name: &str) -> u64 {
    let data: Vec<u8> = (0..24u32 << 20).map(|i| (i % 253) as u8).collect();
    let f = m.path().join(name);
    let while_open = {
        use std::io::Write;
        let _alone = STARTING_PROCESSES
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut h = std::fs::File::create(&f).unwrap();
        for chunk in data.chunks(1 << 20) {
            h.write_all(chunk).unwrap();
        }
        assert_eq!(temporary_files(m), Vec::<String>::new());
        let while_open = m.db.value_size_cf(&m.cf(), name).unwrap().unwrap();
        h.sync_all().unwrap();
        while_open
    };
    assert_eq!(std::fs::read(&f).unwrap(), data);
    let got = m.db.get_cf(&m.cf(), name).unwrap().unwrap();
    assert!(got.as_ref() == &data[..]);
    // Nothing is left beside the store's own files.
    assert_eq!(temporary_files(m), Vec::<String>::new());
    while_open
}

/// The fsx binary: `STRATA_FSX`, else where `make deps` installs it.
fn fsx_binary() -> Option<std::path::PathBuf> {
    let path = match std::env::var_os("STRATA_FSX") {
        Some(p) => p.into(),
        None => {
            let tools = std::env::var_os("STRATA_TOOLS").map_or_else(
                || {
                    Path::new(&std::env::var_os("HOME").unwrap_or_default())
                        .join(".cache/strata/tools")
                },
                Into::into,
            );
            tools.join("bin/fsx")
        }
    };
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but fsx is missing at {} (`make deps` installs it)",
        path.display()
    );
    eprintln!(
        "fsx not found at {}: skipping (CI fails instead)",
        path.display()
    );
    None
}

/// Runs fsx on one file of the mount; it checks every read against what it wrote.
pub fn run_fsx(m: &Mount) {
    let Some(fsx) = fsx_binary() else { return };
    let ops = std::env::var("STRATA_FSX_OPS").unwrap_or_else(|_| "3000".into());
    let seed = std::env::var("STRATA_FSX_SEED").unwrap_or_else(|_| "1".into());
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fsx.toml");
    let artifacts = tempfile::tempdir().unwrap();
    let _starting = starting_processes();
    let out = std::process::Command::new(fsx)
        .arg("-f")
        .arg(&config)
        .args(["-N", &ops, "-S", &seed, "-P"])
        .arg(artifacts.path())
        .arg(m.path().join("fsx.dat"))
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "fsx -S {seed} -N {ops} failed:\n{log}"
    );
    assert!(log.contains("All operations completed A-OK"), "{log}");
}
