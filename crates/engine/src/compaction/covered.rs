//! Tables wholly covered by a newer range tombstone: everything in them is deleted, so they can
//! leave the tree by a MANIFEST edit alone instead of being read and rewritten by a compaction.
//!
//! A table qualifies when one fragment of a tombstone in a newer level (or a newer L0 table)
//! spans its whole key range, and that tombstone is newer than every entry of the table with no
//! snapshot in between: no reader, now or at any snapshot, can see anything the table holds. The
//! table's own range tombstones go with it: the covering one is newer and wider than all of them.
//! Only tombstones already in tables count; one in a memtable is not durable until flushed.

use std::collections::HashSet;
use std::sync::Arc;

use crate::error::Result;
use crate::key::{self, SequenceNumber};
use crate::range_del::{FragmentedTombstones, hides_from_every_reader};
use crate::sst::TableCache;
use crate::version::{FileMetaData, NUM_LEVELS, Version};

/// A table holding range tombstones, and them.
struct Source {
    file: Arc<FileMetaData>,
    tombstones: Arc<FragmentedTombstones>,
}

/// The tables of `version` (not in `busy`) that newer range tombstones cover whole, by level.
pub(crate) fn covered_tables(
    version: &Version,
    tables: &TableCache,
    snapshots: &[SequenceNumber],
    busy: &HashSet<u64>,
) -> Result<Vec<(usize, Arc<FileMetaData>)>> {
    let mut sources: Vec<Vec<Source>> = Vec::with_capacity(NUM_LEVELS);
    for (level, files) in version.levels.iter().enumerate() {
        let mut with_tombstones = Vec::new();
        for f in files.iter().filter(|f| f.num_range_deletions > 0) {
            with_tombstones.push(Source {
                file: f.clone(),
                tombstones: tables.get(f.number, level)?.range_tombstones().clone(),
            });
        }
        sources.push(with_tombstones);
    }
    if sources.iter().all(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let mut covered = Vec::new();
    for (level, files) in version.levels.iter().enumerate() {
        for (i, f) in files.iter().enumerate() {
            if busy.contains(&f.number) {
                continue;
            }
            // L0 is ordered newest first: only the tables before this one are newer.
            let newer_l0 = if level == 0 {
                &files[..i]
            } else {
                &version.levels[0][..]
            };
            let by_l0 = sources[0]
                .iter()
                .filter(|s| newer_l0.iter().any(|g| g.number == s.file.number))
                .any(|s| covers(s, f, snapshots));
            let by_levels = (1..level).any(|l| {
                // Tables of one level do not overlap: only the one holding the smallest key can
                // cover the whole range.
                let lo = key::user_key(&f.smallest);
                let level_sources = &sources[l];
                let j = level_sources.partition_point(|s| key::user_key(&s.file.largest) < lo);
                level_sources
                    .get(j)
                    .is_some_and(|s| covers(s, f, snapshots))
            });
            if by_l0 || by_levels {
                covered.push((level, f.clone()));
            }
        }
    }
    Ok(covered)
}

/// Whether one fragment of `source`'s tombstones spans all of `f` and deletes all of it for
/// every reader.
fn covers(source: &Source, f: &FileMetaData, snapshots: &[SequenceNumber]) -> bool {
    let (lo, hi) = (key::user_key(&f.smallest), key::user_key(&f.largest));
    let list = &source.tombstones;
    let Some(i) = list.holding(lo) else {
        return false;
    };
    let (_, end, seqs) = list.fragment(i);
    end > hi && hides_from_every_reader(seqs, f.smallest_seq, f.largest_seq, snapshots)
}
