//! Versions: which tables are live, at which level. A `Version` is immutable; every flush (and later
//! compaction) installs a new one through a `VersionEdit` logged to the MANIFEST first.

mod edit;
mod level_iter;
mod level_tombstones;
mod multi_get;
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
use crate::sst::{BlockReadOptions, TableCache, TableReader};
use crate::value::PinnableValue;

pub(crate) const NUM_LEVELS: usize = 7;

/// A table a point lookup will search: its number and level, and its reader if it was open.
pub(crate) struct PointCandidate {
    number: u64,
    level: usize,
    reader: Option<Arc<TableReader>>,
}

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

    /// The tables a point lookup of `lookup` searches, in order (every L0 table whose range
    /// covers the key, newest first, then the one table per level that may), with the filter
    /// line each open one will check already loading. The caller searches the memtables
    /// meanwhile, so those cache misses overlap that search instead of following it, one table
    /// after another. A table not open yet is opened only if the search reaches it.
    pub(crate) fn point_candidates(
        &self,
        tables: &TableCache,
        lookup: &[u8],
        hash: u64,
    ) -> Vec<PointCandidate> {
        let user_key = key::user_key(lookup);
        let mut found = Vec::new();
        let mut add = |number: u64, level: usize| {
            let reader = tables.get_open(number);
            if let Some(r) = &reader {
                r.prefetch_held_filter(hash);
            }
            found.push(PointCandidate {
                number,
                level,
                reader,
            });
        };
        for f in &self.levels[0] {
            if f.covers(user_key) {
                add(f.number, 0);
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
            add(f.number, level);
        }
        found
    }

    /// The newest entry of `lookup` in `candidates` (from [`Version::point_candidates`]).
    pub(crate) fn get_in(
        tables: &TableCache,
        candidates: Vec<PointCandidate>,
        lookup: &[u8],
        hash: u64,
        opts: BlockReadOptions,
    ) -> Result<Lookup<PinnableValue>> {
        for c in candidates {
            let reader = match c.reader {
                Some(r) => r,
                None => tables.get_for(c.number, c.level, opts)?,
            };
            match reader.get(lookup, hash, opts)? {
                Lookup::NotFound => {}
                found => return Ok(found),
            }
        }
        Ok(Lookup::NotFound)
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
