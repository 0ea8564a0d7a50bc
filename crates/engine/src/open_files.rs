//! Readers of open files, bounded: the table cache and the blob store each keep at most
//! `max_open_files` open, closing the least recently used, so a store with many files (a
//! mount that spills every large write into a value file of its own) does not run out of
//! descriptors. Sharded by file number.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

const SHARDS: usize = 16;

/// Each reader with the tick of its last use. Hashed as the block cache hashes its keys: every
/// point read looks up a reader per table it probes, and SipHash showed in that profile.
type Shard<T> = HashMap<u64, (Arc<T>, u64), BuildHasherDefault<crate::cache::KeyHasher>>;

pub(crate) struct OpenFiles<T> {
    shards: Vec<Mutex<Shard<T>>>,
    per_shard: usize,
    clock: AtomicU64,
    /// Readers held open past the bound (`hold`): a replica beside its writer holds every file
    /// its reads may reach, since the writer may delete one before the replica opens it again.
    held: Mutex<HashMap<u64, Arc<T>, BuildHasherDefault<crate::cache::KeyHasher>>>,
}

impl<T> OpenFiles<T> {
    pub(crate) fn new(max_open: usize) -> Self {
        OpenFiles {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: (max_open / SHARDS).max(1),
            clock: AtomicU64::new(0),
            held: Mutex::new(HashMap::default()),
        }
    }

    fn shard(&self, number: u64) -> &Mutex<Shard<T>> {
        &self.shards[number as usize % SHARDS]
    }

    /// The open reader of file `number`, if there is one.
    pub(crate) fn get(&self, number: u64) -> Option<Arc<T>> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some((reader, last_use)) = self.shard(number).lock().get_mut(&number) {
            *last_use = tick;
            return Some(reader.clone());
        }
        // Only a miss looks further (it precedes an open anyway), and a held reader found goes
        // into its shard, so the next read finds it there without the one lock of every shard;
        // inserted under the held lock, so that `hold` cannot replace it meanwhile.
        let held = self.held.lock();
        let reader = held.get(&number).cloned()?;
        Some(self.insert(number, reader))
    }

    /// Holds open a reader of each of `numbers` not held yet, opened by `open` (or the one
    /// already open), until `release_except` lets go of it. A reader `stale` says no longer
    /// fits (held, or open in its shard) is opened again and replaces it, where its file still
    /// opens (else it stays: it still reads).
    pub(crate) fn hold<E>(
        &self,
        numbers: impl IntoIterator<Item = u64>,
        open: impl Fn(u64) -> Result<Arc<T>, E>,
        stale: impl Fn(u64, &T) -> bool,
    ) -> Result<(), E> {
        for n in numbers {
            let held = self.held.lock().get(&n).cloned();
            let (current, is_held) = match held {
                Some(reader) => (Some(reader), true),
                None => (self.shard(n).lock().get(&n).map(|(r, _)| r.clone()), false),
            };
            let (reader, replaced) = match current {
                Some(reader) if !stale(n, &reader) => match is_held {
                    true => continue,
                    false => (reader, false),
                },
                // Not opened under a lock: opening reads the disk.
                Some(old) => match open(n) {
                    Ok(fresh) => (fresh, true),
                    Err(_) if is_held => continue,
                    Err(_) => (old, false),
                },
                None => (open(n)?, false),
            };
            // Swapped in under the held lock, a replaced reader's shard copy dropped inside it:
            // a `get` that missed its shard re-inserts what `held` has under the same lock, so
            // never a reader replaced here.
            let mut held = self.held.lock();
            held.insert(n, reader);
            if replaced {
                self.shard(n).lock().remove(&n);
            }
        }
        Ok(())
    }

    /// Lets go of every held reader but those of `numbers`, closing them: no read reaches
    /// their files any more, and an open descriptor would keep a deleted file's space.
    pub(crate) fn release_except(&self, numbers: &std::collections::BTreeSet<u64>) {
        let mut released = Vec::new();
        self.held.lock().retain(|n, _| {
            let keep = numbers.contains(n);
            if !keep {
                released.push(*n);
            }
            keep
        });
        for n in released {
            self.shard(n).lock().remove(&n);
        }
    }

    /// Keeps `reader` (opened outside any lock) for file `number`, closing the least recently
    /// used of its shard if full; if another thread opened the file meanwhile, that reader is
    /// kept and returned instead.
    pub(crate) fn insert(&self, number: u64, reader: Arc<T>) -> Arc<T> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut shard = self.shard(number).lock();
        if shard.len() >= self.per_shard
            && !shard.contains_key(&number)
            && let Some(oldest) = shard.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| *k)
        {
            shard.remove(&oldest);
        }
        shard.entry(number).or_insert((reader, tick)).0.clone()
    }

    /// Closes file `number`'s reader (once no read holds it): the file is being deleted.
    pub(crate) fn remove(&self, number: u64) {
        self.shard(number).lock().remove(&number);
        self.held.lock().remove(&number);
    }

    /// Readers held open (`hold`).
    pub(crate) fn held_count(&self) -> usize {
        self.held.lock().len()
    }

    /// Readers kept open.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_its_bound_and_closes_the_least_recently_used() {
        let open = OpenFiles::new(SHARDS * 2);
        // Files 0, 16 and 32 share a shard that holds two.
        open.insert(0, Arc::new("a"));
        open.insert(16, Arc::new("b"));
        assert_eq!(open.get(0).as_deref(), Some(&"a"));
        open.insert(32, Arc::new("c"));
        assert!(open.get(16).is_none(), "16 was used least recently");
        assert_eq!(open.get(0).as_deref(), Some(&"a"));
        assert_eq!(open.get(32).as_deref(), Some(&"c"));
        // A second open of a kept file returns the first reader.
        assert_eq!(*open.insert(32, Arc::new("d")), "c");
        assert_eq!(open.len(), 2);
        open.remove(0);
        assert!(open.get(0).is_none());
        for n in 0..1000 {
            open.insert(n, Arc::new("x"));
        }
        assert_eq!(open.len(), SHARDS * 2);
    }

    #[test]
    fn held_readers_outlive_the_bound_until_released() {
        let open = OpenFiles::new(SHARDS);
        open.insert(0, Arc::new("open"));
        let opened = |n: u64| Ok::<_, ()>(Arc::new(if n == 1 { "one" } else { "other" }));
        open.hold([0, 1], opened, |_, _| false).unwrap();
        // A file open already is held as it is; another is opened.
        assert_eq!(open.get(1).as_deref(), Some(&"one"));
        // Shard 0 holds one: every other file there evicts 0, which stays held.
        for n in 1..100 {
            open.insert(n * SHARDS as u64, Arc::new("x"));
        }
        assert_eq!(open.get(0).as_deref(), Some(&"open"), "evicted, still held");
        open.release_except(&[1].into());
        assert!(open.get(0).is_none(), "released, closed in its shard too");
        assert_eq!(open.get(1).as_deref(), Some(&"one"));
        assert_eq!(open.hold([32], |_| Err("gone"), |_, _| false), Err("gone"));
        open.remove(1);
        assert!(open.get(1).is_none());
    }

    #[test]
    fn a_held_reader_that_no_longer_fits_is_opened_again_where_its_file_opens() {
        let open = OpenFiles::new(SHARDS);
        open.hold([0, 1], |_| Ok::<_, ()>(Arc::new("at L0")), |_, _| false)
            .unwrap();
        assert_eq!(open.get(0).as_deref(), Some(&"at L0"));
        let moved = |_: u64, r: &&str| *r == "at L0";
        let reopen = |n: u64| match n {
            0 => Ok(Arc::new("below L0")),
            _ => Err(()),
        };
        open.hold([0, 1], reopen, moved).unwrap();
        assert_eq!(open.get(0).as_deref(), Some(&"below L0"), "replaced");
        assert_eq!(
            open.get(1).as_deref(),
            Some(&"at L0"),
            "kept: it still reads"
        );
    }
}
