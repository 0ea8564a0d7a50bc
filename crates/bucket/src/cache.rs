//! The working copy as a cache of the bucket: the files whose contents are exactly a placed
//! object (tables, sealed blob files) may leave the cache directory and come back when read.
//! Past the size bound, the least recently opened of them that no reader holds open are
//! evicted: a running read never loses its file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use strata_engine::{RandomAccessFile, Result};

use crate::paged::{PagedFile, partial_paths};

/// A placed object: what a file is, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remote {
    pub key: String,
    pub len: u64,
    pub crc: u32,
}

impl Remote {
    /// The object a placed file's recipe names, if it is one.
    pub(crate) fn of(recipe: &crate::replay::FileRecipe) -> Option<Remote> {
        match recipe {
            crate::replay::FileRecipe::Placed { key, len, crc } => Some(Remote {
                key: key.clone(),
                len: *len,
                crc: *crc,
            }),
            crate::replay::FileRecipe::Steps(_) => None,
        }
    }
}

#[derive(Debug)]
struct Entry {
    remote: Remote,
    /// The cache directory holds it.
    local: bool,
    /// When it was last opened (a tick of `Cache::clock`).
    used: u64,
    /// The last handle opened on it, while someone holds it.
    open: Option<Weak<dyn RandomAccessFile>>,
    /// Callers between finding the file here and holding it open (`Cache::pin`): not idle.
    pins: usize,
}

/// Keeps one file from eviction while held (`Cache::pin`).
#[derive(Debug)]
pub(crate) struct Pin<'a> {
    cache: &'a Cache,
    name: Option<String>,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        if let Some(name) = &self.name
            && let Some(e) = self.cache.entries.lock().get_mut(name)
        {
            e.pins = e.pins.saturating_sub(1);
        }
    }
}

/// What the cache knows of the placed files.
#[derive(Debug)]
pub(crate) struct Cache {
    entries: Mutex<BTreeMap<String, Entry>>,
    /// Bytes of placed files the cache directory may hold; `None` for no bound.
    limit: Option<u64>,
    clock: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    /// A lock per file being fetched whole, so two readers of one missing file fetch it once
    /// while fetches of different files go on side by side.
    fetching: Mutex<BTreeMap<String, Arc<Mutex<()>>>>,
    /// The partly fetched files open now: a second open of one shares its pages.
    paged: Mutex<BTreeMap<String, Weak<PagedFile>>>,
}

impl Cache {
    /// Runs `fetch` for the missing file `name` unless another thread fetched it meanwhile (then
    /// `Ok(false)`); fetches of one file take turns, of different files do not wait.
    pub(crate) fn fetch_once(
        &self,
        name: &str,
        fetch: impl FnOnce(Remote) -> Result<()>,
    ) -> Result<bool> {
        let turn = self
            .fetching
            .lock()
            .entry(name.to_string())
            .or_default()
            .clone();
        let fetched = {
            let _held = turn.lock();
            match self.missing(name) {
                None => Ok(false),
                Some(remote) => fetch(remote).map(|()| {
                    self.fetched(name);
                    true
                }),
            }
        };
        // The last one out drops the lock (turns are cloned only under the map's lock, so no
        // one can be about to wait on it): two fetches of one file never overlap.
        let mut fetching = self.fetching.lock();
        if Arc::strong_count(&turn) == 2 {
            fetching.remove(name);
        }
        fetched
    }

    /// `placed`: each placed file, and whether the cache directory holds it.
    pub(crate) fn new(placed: BTreeMap<String, (Remote, bool)>, limit: Option<u64>) -> Cache {
        let entries = placed
            .into_iter()
            .map(|(name, (remote, local))| {
                let entry = Entry {
                    remote,
                    local,
                    used: 0,
                    open: None,
                    pins: 0,
                };
                (name, entry)
            })
            .collect();
        Cache {
            entries: Mutex::new(entries),
            limit,
            clock: AtomicU64::new(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            fetching: Mutex::new(BTreeMap::new()),
            paged: Mutex::new(BTreeMap::new()),
        }
    }

    /// The object to fetch `name` from, if the bucket holds it and the cache does not.
    pub(crate) fn missing(&self, name: &str) -> Option<Remote> {
        let entries = self.entries.lock();
        entries
            .get(name)
            .filter(|e| !e.local)
            .map(|e| e.remote.clone())
    }

    /// Whether the bucket holds `name` whole and the cache does not.
    pub(crate) fn is_missing(&self, name: &str) -> bool {
        self.missing(name).is_some()
    }

    /// The placed files the cache does not hold.
    pub(crate) fn missing_names(&self) -> Vec<String> {
        let entries = self.entries.lock();
        entries
            .iter()
            .filter(|(_, e)| !e.local)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// `name` was fetched into the cache: the most recently used (so not the next evicted).
    pub(crate) fn fetched(&self, name: &str) {
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = self.entries.lock().get_mut(name) {
            e.local = true;
            e.used = used;
        }
    }

    /// `name` is now exactly `remote` (uploaded from the cache, which holds it).
    pub(crate) fn placed(&self, name: &str, remote: Remote) {
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        let entry = Entry {
            remote,
            local: true,
            used,
            open: None,
            pins: 0,
        };
        self.entries.lock().insert(name.to_string(), entry);
    }

    /// `name` is now exactly `remote`, which the cache lacks (a replica's log named it).
    pub(crate) fn expect(&self, name: &str, remote: Remote) {
        let entry = Entry {
            remote,
            local: false,
            used: 0,
            open: None,
            pins: 0,
        };
        self.entries.lock().insert(name.to_string(), entry);
    }

    /// `name`'s contents change (or it is gone): no object stands for it any more. Returns
    /// whether the cache lacked it.
    pub(crate) fn forget(&self, name: &str) -> bool {
        self.entries.lock().remove(name).is_some_and(|e| !e.local)
    }

    pub(crate) fn renamed(&self, from: &str, to: &str) {
        let mut entries = self.entries.lock();
        entries.remove(to);
        if let Some(e) = entries.remove(from) {
            entries.insert(to.to_string(), e);
        }
    }

    /// The partly fetched `name`, shared with any reader that has it open, or opened with
    /// `open`.
    pub(crate) fn paged(
        &self,
        name: &str,
        open: impl FnOnce() -> Result<PagedFile>,
    ) -> Result<Arc<PagedFile>> {
        let mut paged = self.paged.lock();
        if let Some(file) = paged.get(name).and_then(Weak::upgrade) {
            return Ok(file);
        }
        let file = Arc::new(open()?);
        paged.insert(name.to_string(), Arc::downgrade(&file));
        paged.retain(|_, w| w.strong_count() > 0);
        Ok(file)
    }

    /// Keeps `name` (if placed) from eviction until the pin is dropped: from the moment a
    /// caller finds it in the cache until it holds it open, or is done with it.
    pub(crate) fn pin(&self, name: Option<&str>) -> Pin<'_> {
        let name = name.and_then(|n| {
            let mut entries = self.entries.lock();
            let e = entries.get_mut(n)?;
            e.pins += 1;
            Some(n.to_string())
        });
        Pin { cache: self, name }
    }

    /// `name` was opened as `file`: it is in use, and the most recently used.
    pub(crate) fn opened(&self, name: &str, file: &Arc<dyn RandomAccessFile>) {
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = self.entries.lock().get_mut(name) {
            e.used = used;
            e.open = Some(Arc::downgrade(file));
        }
    }

    /// Past the bound, deletes the cached copies of the least recently opened placed files no
    /// one holds open, until under it (or nothing more can go). Returns the files evicted.
    pub(crate) fn evict(&self, root: &Path) -> Result<usize> {
        let Some(limit) = self.limit else {
            return Ok(0);
        };
        let mut entries = self.entries.lock();
        let size = |name: &str| std::fs::metadata(root.join(name)).map_or(0, |m| m.len());
        let mut total: u64 = entries
            .iter()
            .filter(|(_, e)| e.local)
            .map(|(n, _)| size(n))
            .sum();
        if total <= limit {
            return Ok(0);
        }
        let idle_entry =
            |e: &Entry| e.pins == 0 && e.open.as_ref().is_none_or(|w| w.strong_count() == 0);
        // Partly fetched copies no one reads go first: what they hold is fetched again cheaply.
        for (name, _) in entries.iter().filter(|(_, e)| !e.local && idle_entry(e)) {
            let (partial, pages) = partial_paths(&root.join(name));
            if partial.exists() {
                let _ = std::fs::remove_file(&partial);
                let _ = std::fs::remove_file(&pages);
            }
        }
        let mut idle: Vec<(u64, String)> = entries
            .iter()
            .filter(|(_, e)| e.local && idle_entry(e))
            .map(|(n, e)| (e.used, n.clone()))
            .collect();
        idle.sort();
        let mut evicted = 0;
        for (_, name) in idle {
            if total <= limit {
                break;
            }
            let bytes = size(&name);
            match std::fs::remove_file(root.join(&name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(strata_engine::Error::Io {
                        context: format!("evicting {} from the cache", root.join(&name).display()),
                        source: e,
                    });
                }
            }
            if let Some(e) = entries.get_mut(&name) {
                e.local = false;
                e.open = None;
            }
            total = total.saturating_sub(bytes);
            evicted += 1;
        }
        Ok(evicted)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn remote(key: &str, len: u64) -> Remote {
        Remote {
            key: key.into(),
            len,
            crc: 0,
        }
    }

    #[test]
    fn a_pinned_file_is_not_evicted_between_finding_it_and_opening_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut placed = BTreeMap::new();
        for name in ["a.sst", "b.sst"] {
            std::fs::write(dir.path().join(name), vec![0u8; 1000]).unwrap();
            placed.insert(name.to_string(), (remote(name, 1000), true));
        }
        let cache = Cache::new(placed, Some(0));
        let pin = cache.pin(Some("a.sst"));
        cache.evict(dir.path()).unwrap();
        assert!(dir.path().join("a.sst").exists(), "pinned: kept");
        assert!(!dir.path().join("b.sst").exists(), "idle: evicted");
        drop(pin);
        cache.evict(dir.path()).unwrap();
        assert!(!dir.path().join("a.sst").exists(), "unpinned: evicted");
    }

    #[test]
    fn one_file_is_fetched_once_and_two_files_side_by_side() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::mpsc;
        use std::time::Duration;
        let mut placed = BTreeMap::new();
        for name in ["a.sst", "b.sst"] {
            placed.insert(name.to_string(), (remote(name, 1), false));
        }
        let cache = Cache::new(placed, None);
        // Four readers of a.sst: one fetch. The fetch of b.sst starts while a.sst's is still
        // running (it waits for b's to begin): fetches of different files do not take turns.
        let fetches = AtomicUsize::new(0);
        let (began_b, b_began) = mpsc::channel::<()>();
        let b_began = parking_lot::Mutex::new(b_began);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    cache
                        .fetch_once("a.sst", |_| {
                            fetches.fetch_add(1, Ordering::SeqCst);
                            b_began
                                .lock()
                                .recv_timeout(Duration::from_secs(10))
                                .map_err(|_| strata_engine::Error::Busy("b never began".into()))
                        })
                        .unwrap();
                });
            }
            std::thread::sleep(Duration::from_millis(50));
            let fetched = cache.fetch_once("b.sst", |_| {
                began_b.send(()).unwrap();
                Ok(())
            });
            assert!(fetched.unwrap());
        });
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        assert!(cache.missing("a.sst").is_none() && cache.missing("b.sst").is_none());
        assert!(cache.fetching.lock().is_empty(), "the turns are dropped");
    }

    #[test]
    fn eviction_takes_the_least_recently_opened_and_never_an_open_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut placed = BTreeMap::new();
        for name in ["a.sst", "b.sst", "c.sst"] {
            std::fs::write(dir.path().join(name), vec![0u8; 1000]).unwrap();
            placed.insert(name.to_string(), (remote(name, 1000), true));
        }
        let cache = Cache::new(placed, Some(1500));
        let fs = strata_engine::StdFileSystem;
        use strata_engine::FileSystem;
        let a = fs.open_random(&dir.path().join("a.sst")).unwrap();
        let b = fs.open_random(&dir.path().join("b.sst")).unwrap();
        let c = fs.open_random(&dir.path().join("c.sst")).unwrap();
        cache.opened("a.sst", &a);
        cache.opened("b.sst", &b);
        cache.opened("c.sst", &c);
        drop((b, c));
        // a is the oldest but open; b and c are idle, b the older: b goes, then c.
        assert_eq!(cache.evict(dir.path()).unwrap(), 2);
        assert!(dir.path().join("a.sst").exists());
        assert_eq!(cache.missing_names(), vec!["b.sst", "c.sst"]);
        assert_eq!(cache.missing("b.sst"), Some(remote("b.sst", 1000)));
        drop(a);
        // Under the bound now: nothing more goes.
        assert_eq!(cache.evict(dir.path()).unwrap(), 0);
    }
}
