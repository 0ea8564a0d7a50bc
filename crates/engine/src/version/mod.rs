//! Versions: which tables are live, at which level. A `Version` is immutable; every flush (and later
//! compaction) installs a new one through a `VersionEdit` logged to the MANIFEST first.

mod edit;
mod set;

use std::cmp::Ordering;
use std::sync::Arc;

pub(crate) use edit::{FileMetaData, VersionEdit, decode_cf_options, encode_cf_options};
pub(crate) use set::VersionSet;

use crate::error::Result;
use crate::key::{self, compare_internal};
use crate::memtable::Lookup;
use crate::sst::{BlockReadOptions, TableCache};
use crate::value::PinnableValue;

pub(crate) const NUM_LEVELS: usize = 7;

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
        for (level, number) in &edit.deleted_files {
            next.levels[*level].retain(|f| f.number != *number);
        }
        for (level, f) in &edit.new_files {
            next.levels[*level].push(Arc::new(f.clone()));
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
            if user_key < key::user_key(&f.smallest) || user_key > key::user_key(&f.largest) {
                continue;
            }
            match tables.get(f.number)?.get(lookup, hash, opts)? {
                Lookup::NotFound => {}
                found => return Ok(found),
            }
        }
        for files in &self.levels[1..] {
            // First file whose largest key is >= the lookup key.
            let i =
                files.partition_point(|f| compare_internal(&f.largest, lookup) == Ordering::Less);
            let Some(f) = files.get(i) else { continue };
            if user_key < key::user_key(&f.smallest) {
                continue;
            }
            match tables.get(f.number)?.get(lookup, hash, opts)? {
                Lookup::NotFound => {}
                found => return Ok(found),
            }
        }
        Ok(Lookup::NotFound)
    }
}
