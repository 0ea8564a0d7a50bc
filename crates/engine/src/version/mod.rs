//! Versions: which tables are live, at which level. A `Version` is immutable; every flush (and later
//! compaction) installs a new one through a `VersionEdit` logged to the MANIFEST first.

mod edit;
mod level_iter;
mod level_tombstones;
mod set;

use std::cmp::Ordering;
use std::sync::Arc;

pub(crate) use edit::{FileMetaData, VersionEdit, decode_cf_options, encode_cf_options};
pub(crate) use level_iter::LevelIter;
pub(crate) use level_tombstones::LevelTombstones;
pub(crate) use set::VersionSet;

use crate::error::Result;
use crate::key::Lookup;
use crate::key::{self, compare_internal};
use crate::sst::{BlockReadOptions, PendingKey, TableCache};
use crate::value::PinnableValue;

pub(crate) const NUM_LEVELS: usize = 7;

/// Whether every sequence number in `[lo, hi]` lies in one of `ranges` (inclusive).
pub(crate) fn seqs_covered(mut ranges: Vec<(u64, u64)>, lo: u64, hi: u64) -> bool {
    ranges.sort_unstable();
    // `next` is the smallest sequence number of [lo, hi] not yet known to be covered.
    let mut next = lo;
    for (start, end) in ranges {
        if start > next {
            return false;
        }
        next = next.max(end.saturating_add(1));
        if next > hi {
            return true;
        }
    }
    false
}

/// The live tables at one moment. L0 is ordered newest first; deeper levels by smallest key, with
/// no overlap between files of one level.
#[derive(Debug, Clone, Default)]
pub(crate) struct Version {
    pub levels: [Vec<Arc<FileMetaData>>; NUM_LEVELS],
}

impl Version {
    /// Applies an edit, producing the next version.
    pub(crate) fn apply(&self, edit: &VersionEdit) -> Version {
        let mut next = self.clone();
        let mut removed: Vec<Arc<FileMetaData>> = Vec::new();
        for (level, number) in &edit.deleted_files {
            let files = &mut next.levels[*level];
            if let Some(i) = files.iter().position(|f| f.number == *number) {
                removed.push(files.remove(i));
            }
        }
        for (level, f) in &edit.new_files {
            // A table moved to another level keeps its `Arc`: files are deleted once no version
            // holds their `Arc`, so a fresh one would let a later compaction of the moved table
            // delete it under a reader of a version from before the move.
            let moved = removed.iter().find(|r| r.number == f.number && ***r == *f);
            next.levels[*level].push(moved.cloned().unwrap_or_else(|| Arc::new(f.clone())));
        }
        next.levels[0].sort_by(|a, b| {
            b.largest_seq
                .cmp(&a.largest_seq)
                .then(b.number.cmp(&a.number))
        });
        for level in next.levels.iter_mut().skip(1) {
            level.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
        }
        next
    }

    pub(crate) fn num_files(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// Searches the tables, newest data first, for the entry `lookup` selects.
    pub(crate) fn get(
        &self,
        tables: &TableCache,
        lookup: &[u8],
        hash: u64,
        opts: BlockReadOptions,
    ) -> Result<Lookup<PinnableValue>> {
        let user_key = key::user_key(lookup);
        for f in &self.levels[0] {
            if !f.covers(user_key) {
                continue;
            }
            match tables.get(f.number, 0)?.get(lookup, hash, opts)? {
                Lookup::NotFound => {}
                found => return Ok(found),
            }
        }
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            // First file whose largest key is >= the lookup key.
            let i =
                files.partition_point(|f| compare_internal(&f.largest, lookup) == Ordering::Less);
            let Some(f) = files.get(i) else { continue };
            if user_key < key::user_key(&f.smallest) {
                continue;
            }
            match tables.get(f.number, level)?.get(lookup, hash, opts)? {
                Lookup::NotFound => {}
                found => return Ok(found),
            }
        }
        Ok(Lookup::NotFound)
    }

    /// Searches the tables for every unresolved key `order` names (ascending by user key), level
    /// by level: each table is asked once for all the keys it may hold, and a key found or deleted
    /// at one level is not looked up below it.
    pub(crate) fn multi_get(
        &self,
        tables: &TableCache,
        keys: &mut [PendingKey],
        order: &[usize],
        opts: BlockReadOptions,
    ) {
        let mut pending: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| !keys[i].is_resolved())
            .collect();
        let mut group = Vec::new();
        for f in &self.levels[0] {
            if pending.is_empty() {
                return;
            }
            group.clear();
            group.extend(
                pending
                    .iter()
                    .copied()
                    .filter(|&i| f.covers(keys[i].user_key())),
            );
            Self::multi_get_file(tables, f, 0, keys, &group, opts);
            pending.retain(|&i| !keys[i].is_resolved());
        }
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            if pending.is_empty() {
                return;
            }
            // Both the keys and the files are sorted: one merge walk groups keys by file.
            let mut fi = 0;
            let mut start = 0;
            while start < pending.len() && fi < files.len() {
                let f = &files[fi];
                group.clear();
                let mut end = start;
                while end < pending.len() {
                    let k = &keys[pending[end]];
                    if compare_internal(&f.largest, &k.lookup) == Ordering::Less {
                        break;
                    }
                    if k.user_key() >= key::user_key(&f.smallest) {
                        group.push(pending[end]);
                    }
                    end += 1;
                }
                if !group.is_empty() {
                    Self::multi_get_file(tables, f, level, keys, &group, opts);
                }
                start = end;
                fi += 1;
            }
            pending.retain(|&i| !keys[i].is_resolved());
        }
    }

    fn multi_get_file(
        tables: &TableCache,
        f: &FileMetaData,
        level: usize,
        keys: &mut [PendingKey],
        group: &[usize],
        opts: BlockReadOptions,
    ) {
        if group.is_empty() {
            return;
        }
        match tables.get(f.number, level) {
            Ok(t) => t.multi_get(keys, group, opts),
            Err(e) => {
                for &i in group {
                    keys[i].error = Some(e.duplicate());
                }
            }
        }
    }
}

#[cfg(test)]
mod move_tests {
    use super::*;

    fn table(number: u64) -> FileMetaData {
        FileMetaData::for_test(number, "a", "b", 100)
    }

    #[test]
    fn a_trivial_move_keeps_the_tables_identity() {
        let v0 = Version::default().apply(&VersionEdit {
            new_files: vec![(0, table(7))],
            ..Default::default()
        });
        let v1 = v0.apply(&VersionEdit {
            deleted_files: vec![(0, 7)],
            new_files: vec![(1, table(7))],
            ..Default::default()
        });
        assert!(v1.levels[0].is_empty());
        assert!(Arc::ptr_eq(&v0.levels[0][0], &v1.levels[1][0]));
        // Every version holds the moved table's one `Arc`; a new table gets its own.
        let v2 = v1.apply(&VersionEdit {
            new_files: vec![(0, table(8))],
            ..Default::default()
        });
        assert_eq!(Arc::strong_count(&v2.levels[1][0]), 3);
        assert_eq!(Arc::strong_count(&v2.levels[0][0]), 1);
    }
}
