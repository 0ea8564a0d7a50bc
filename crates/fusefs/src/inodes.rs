//! Inode numbers for paths the kernel holds: stable while the kernel knows a path (counted by
//! lookup and forget), freed when it forgets it, so memory follows what the kernel caches.

use std::collections::{BTreeMap, HashMap};

use crate::path;

/// The root directory's inode (FUSE's fixed number).
pub(crate) const ROOT: u64 = 1;

/// Where an inode's bytes live once no path names it: a key no path can be (it starts with a
/// NUL), so listings never show it.
const ORPHAN: &[u8] = b"\0orphan\0";

/// Where one side of a `RENAME_EXCHANGE` is put aside (followed by its key) while the other
/// moves across: a key no path can be, used by the store's batch and by this table alike.
pub(crate) const EXCHANGE_ASIDE: &[u8] = b"\0exchange\0";

/// The key of inode `ino` once it is unlinked or renamed over while open.
pub(crate) fn orphan_key(ino: u64) -> Vec<u8> {
    [ORPHAN, &ino.to_be_bytes()].concat()
}

/// Whether `key` is an orphan's: no path names it.
pub(crate) fn is_orphan(key: &[u8]) -> bool {
    key.starts_with(ORPHAN)
}

/// Every orphan key lies in `[start, end)`.
pub(crate) fn orphan_range() -> (Vec<u8>, Vec<u8>) {
    let mut end = ORPHAN.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    (ORPHAN.to_vec(), end)
}

#[derive(Debug)]
struct Node {
    key: Vec<u8>,
    lookups: u64,
    /// Bumped whenever the mount changes the file's bytes.
    version: u64,
    /// The version the kernel's page cache was last filled from (at an open).
    cached: Option<u64>,
    /// Unlinked or renamed over, its bytes were moved to its orphan key, to go when the kernel
    /// forgets it.
    kept: bool,
}

#[derive(Debug)]
pub(crate) struct InodeTable {
    nodes: HashMap<u64, Node>,
    by_key: BTreeMap<Vec<u8>, u64>,
    next: u64,
}

impl Default for InodeTable {
    fn default() -> Self {
        let mut t = InodeTable {
            nodes: HashMap::new(),
            by_key: BTreeMap::new(),
            next: ROOT + 1,
        };
        t.nodes.insert(
            ROOT,
            Node {
                key: Vec::new(),
                lookups: 1,
                version: 0,
                cached: None,
                kept: false,
            },
        );
        t.by_key.insert(Vec::new(), ROOT);
        t
    }
}

impl InodeTable {
    /// The key of inode `ino`, if the kernel still holds it.
    pub fn key(&self, ino: u64) -> Option<&[u8]> {
        self.nodes.get(&ino).map(|n| n.key.as_slice())
    }

    /// The inode of `key` if one is assigned, without counting a lookup.
    pub fn peek(&self, key: &[u8]) -> Option<u64> {
        self.by_key.get(key).copied()
    }

    /// The inode of `key`, assigned if new, with one more lookup counted.
    pub fn lookup(&mut self, key: &[u8]) -> u64 {
        if let Some(&ino) = self.by_key.get(key) {
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.lookups += 1;
            }
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(
            ino,
            Node {
                key: key.to_vec(),
                lookups: 1,
                version: 0,
                cached: None,
                kept: false,
            },
        );
        self.by_key.insert(key.to_vec(), ino);
        ino
    }

    /// The file's bytes changed: pages the kernel cached before are stale.
    pub fn changed(&mut self, ino: u64) {
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.version += 1;
        }
    }

    /// At an open: whether the kernel may keep the pages it cached for `ino` (nothing changed
    /// them since the last open). Records that the cache now follows this version.
    pub fn open_keeps_cache(&mut self, ino: u64) -> bool {
        let Some(n) = self.nodes.get_mut(&ino) else {
            return false;
        };
        let keep = n.cached == Some(n.version);
        n.cached = Some(n.version);
        keep
    }

    /// The kernel dropped `n` references to `ino`. Returns the orphan key whose bytes were kept
    /// for it ([`InodeTable::keep`]) when this was its last: they can go.
    pub fn forget(&mut self, ino: u64, n: u64) -> Option<Vec<u8>> {
        if ino == ROOT {
            return None;
        }
        let node = self.nodes.get_mut(&ino)?;
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups > 0 {
            return None;
        }
        let key = std::mem::take(&mut node.key);
        let kept = node.kept;
        self.nodes.remove(&ino);
        if self.by_key.get(&key) == Some(&ino) {
            self.by_key.remove(&key);
        }
        (kept && is_orphan(&key)).then_some(key)
    }

    /// The bytes of `ino` are being moved to its orphan key, to stay until it is forgotten.
    pub fn keep(&mut self, ino: u64) {
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.kept = true;
        }
    }

    /// The entry at `from` (and everything below it) now lives at `to`; an inode that was at
    /// `to` keeps its number but no key (the kernel is told it is gone).
    pub fn rename(&mut self, from: &[u8], to: &[u8]) {
        self.detach_subtree(to);
        let moved: Vec<(Vec<u8>, u64)> = self
            .by_key
            .range(from.to_vec()..)
            .take_while(|(k, _)| k.starts_with(from))
            .filter(|(k, _)| path::is_within(k, from))
            .map(|(k, &i)| (k.clone(), i))
            .collect();
        for (old, ino) in moved {
            self.by_key.remove(&old);
            let new = path::rebase(&old, from, to);
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.key = new.clone();
            }
            self.by_key.insert(new, ino);
        }
    }

    /// Swaps the entries at `a` and `b` (`RENAME_EXCHANGE`).
    pub fn exchange(&mut self, a: &[u8], b: &[u8]) {
        let swap: Vec<u8> = [EXCHANGE_ASIDE, a].concat();
        self.rename(a, &swap);
        self.rename(b, a);
        self.rename(&swap, b);
    }

    /// The entry at `key` is gone: its inode (and those below) keep their numbers until
    /// forgotten, but resolve to no key.
    pub fn detach_subtree(&mut self, key: &[u8]) {
        let gone: Vec<(Vec<u8>, u64)> = self
            .by_key
            .range(key.to_vec()..)
            .take_while(|(k, _)| k.starts_with(key))
            .filter(|(k, _)| path::is_within(k, key))
            .map(|(k, &i)| (k.clone(), i))
            .collect();
        for (k, ino) in gone {
            if ino == ROOT {
                continue;
            }
            self.by_key.remove(&k);
            if let Some(n) = self.nodes.get_mut(&ino) {
                n.key = orphan_key(ino);
            }
        }
    }

    /// Assigned keys in `[start, end)`, with their inodes.
    pub fn range(&self, start: &[u8], end: &[u8]) -> Vec<(Vec<u8>, u64)> {
        if start >= end {
            return Vec::new();
        }
        self.by_key
            .range(start.to_vec()..end.to_vec())
            .map(|(k, &i)| (k.clone(), i))
            .collect()
    }

    /// Every assigned key with its inode, the root's (empty) key first.
    pub fn all(&self) -> Vec<(Vec<u8>, u64)> {
        self.by_key.iter().map(|(k, &i)| (k.clone(), i)).collect()
    }

    /// Inodes the kernel holds now (the root included).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_stable_while_held_and_freed_when_forgotten() {
        let mut t = InodeTable::default();
        let a = t.lookup(b"a");
        assert_eq!(t.lookup(b"a"), a);
        t.forget(a, 1);
        assert_eq!(t.key(a), Some(&b"a"[..]));
        t.forget(a, 1);
        assert_eq!(t.key(a), None);
        assert_eq!(t.len(), 1);
        assert_ne!(t.lookup(b"a"), a);
        t.forget(ROOT, 10);
        assert_eq!(t.key(ROOT), Some(&b""[..]));
    }

    #[test]
    fn the_page_cache_is_kept_only_while_nothing_changed() {
        let mut t = InodeTable::default();
        let a = t.lookup(b"a");
        assert!(!t.open_keeps_cache(a));
        assert!(t.open_keeps_cache(a));
        t.changed(a);
        assert!(!t.open_keeps_cache(a));
        assert!(t.open_keeps_cache(a));
        assert!(!t.open_keeps_cache(999));
    }

    #[test]
    fn a_rename_moves_the_subtree_and_detaches_the_target() {
        let mut t = InodeTable::default();
        let d = t.lookup(b"d");
        let f = t.lookup(b"d/f");
        let other = t.lookup(b"dx");
        let target = t.lookup(b"e");
        t.rename(b"d", b"e");
        assert_eq!(t.key(d), Some(&b"e"[..]));
        assert_eq!(t.key(f), Some(&b"e/f"[..]));
        assert_eq!(t.key(other), Some(&b"dx"[..]));
        assert_eq!(t.peek(b"e"), Some(d));
        assert_ne!(t.key(target), Some(&b"e"[..]));
        t.exchange(b"e/f", b"dx");
        assert_eq!(t.key(f), Some(&b"dx"[..]));
        assert_eq!(t.key(other), Some(&b"e/f"[..]));
    }
}
