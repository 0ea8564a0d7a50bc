//! Batched MultiGet through a version's tables: L0's tables one by one; each level below it as a
//! whole, its keys' searches (index, then data block) stepped together across tables so that
//! their cache misses overlap. Each table's filter and index are taken from the cache once per
//! batch, not once per key.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{FileMetaData, Version};
use crate::block::{Block, BlockIter};
use crate::key::{self, Lookup, compare_internal};
use crate::sst::{
    BlockHandle, BlockReadOptions, PendingKey, TableCache, TableReader, data_blocks, fail_keys,
};

impl Version {
    /// Searches the tables for every unresolved key `order` names (ascending by user key), level
    /// by level: each table is asked once for all the keys it may hold, and a key found or deleted
    /// at one level is not looked up below it.
    pub(crate) fn multi_get(
        &self,
        tables: &TableCache,
        keys: &mut [PendingKey<'_>],
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
            multi_get_file(tables, f, 0, keys, &group, opts);
            pending.retain(|&i| !keys[i].is_resolved());
        }
        let mut groups: Vec<(&FileMetaData, Vec<usize>)> = Vec::new();
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
                    groups.push((f, std::mem::take(&mut group)));
                }
                start = end;
                fi += 1;
            }
            multi_get_level(tables, level, &groups, keys, opts);
            groups.clear();
            pending.retain(|&i| !keys[i].is_resolved());
        }
    }
}

fn multi_get_file(
    tables: &TableCache,
    f: &FileMetaData,
    level: usize,
    keys: &mut [PendingKey<'_>],
    group: &[usize],
    opts: BlockReadOptions,
) {
    if group.is_empty() {
        return;
    }
    match tables.get_for(f.number, level, opts) {
        Ok(t) => t.multi_get(keys, group, opts),
        Err(e) => fail_keys(keys, group, &e),
    }
}

/// Looks up one level's keys (`groups`: each table with the keys in its range, ascending), in
/// phases over all of them: filters; the index searches; the data blocks; the searches within
/// them. The searches of each phase are stepped together (`Block::restarts_within`) so that
/// their cache misses overlap. A table's index is searched first for its first and last keys,
/// then for the keys between within the span those two found: keys close together (a dense
/// batch, a narrow range) cost a few rounds each, not a whole binary search. A table with range
/// tombstones takes its own path (`TableReader::multi_get`), which settles what they cover.
fn multi_get_level(
    tables: &TableCache,
    level: usize,
    groups: &[(&FileMetaData, Vec<usize>)],
    keys: &mut [PendingKey<'_>],
    opts: BlockReadOptions,
) {
    let mut opened = Vec::with_capacity(groups.len());
    for (f, group) in groups {
        match tables.get_for(f.number, level, opts) {
            Ok(table) if !table.range_tombstones().is_empty() => table.multi_get(keys, group, opts),
            Ok(table) => opened.push((table, group)),
            Err(e) => fail_keys(keys, group, &e),
        }
    }
    // Every table's filter lines start loading before any is checked.
    let filters: Vec<_> = opened
        .iter()
        .map(|(table, group)| {
            table.prefetch_filter(group.iter().map(|&i| keys[i].hash), opts.cache_only)
        })
        .collect();
    // Each table with its index block, and where its candidates (the keys its filter lets
    // through) start in `candidates`.
    let mut searched: Vec<(&TableReader, Arc<Block>, usize)> = Vec::with_capacity(opened.len());
    let mut candidates: Vec<usize> = Vec::new();
    for ((table, group), filter) in opened.iter().zip(&filters) {
        let start = candidates.len();
        match filter {
            Ok(filter) => table.filter_group(filter, keys, group, &mut candidates),
            Err(e) => {
                fail_keys(keys, group, e);
                continue;
            }
        }
        if candidates.len() == start {
            continue;
        }
        match table.index_block(opts.cache_only) {
            Ok(index) => searched.push((&**table, index, start)),
            Err(e) => {
                fail_keys(keys, &candidates[start..], &e);
                candidates.truncate(start);
            }
        }
    }
    if searched.is_empty() {
        return;
    }
    let ranges: Vec<std::ops::Range<usize>> = searched
        .iter()
        .enumerate()
        .map(|(t, &(_, _, start))| {
            let end = searched.get(t + 1).map_or(candidates.len(), |s| s.2);
            start..end
        })
        .collect();
    // The restart each candidate's index search found; `None` for a damaged index.
    let mut restarts: Vec<Option<u32>> = vec![None; candidates.len()];
    let mut found = Vec::new();
    // (candidate, its table) for the first and last candidate of each table, searched across
    // the whole index.
    let ends: Vec<(usize, usize)> = ranges
        .iter()
        .enumerate()
        .flat_map(|(t, r)| {
            [r.start, r.end - 1]
                .into_iter()
                .take(r.len().min(2))
                .map(move |c| (c, t))
        })
        .collect();
    let searches: Vec<(&Block, &[u8])> = ends
        .iter()
        .map(|&(c, t)| (&*searched[t].1, keys[candidates[c]].lookup.as_slice()))
        .collect();
    Block::restarts_before(&searches, &mut found);
    for (&(c, _), &r) in ends.iter().zip(&found) {
        restarts[c] = r;
    }
    // The keys between, within the span their table's ends found.
    let mut middles: Vec<(usize, usize)> = Vec::new();
    let mut bounds: Vec<(u32, u32)> = Vec::new();
    for (t, r) in ranges.iter().enumerate() {
        if let (Some(lo), Some(hi)) = (restarts[r.start], restarts[r.end - 1]) {
            for c in r.start + 1..r.end.saturating_sub(1) {
                middles.push((c, t));
                bounds.push((lo, hi));
            }
        }
    }
    let searches: Vec<(&Block, &[u8])> = middles
        .iter()
        .map(|&(c, t)| (&*searched[t].1, keys[candidates[c]].lookup.as_slice()))
        .collect();
    Block::restarts_within(&searches, bounds, &mut found);
    for (&(c, _), &r) in middles.iter().zip(&found) {
        restarts[c] = r;
    }
    // (candidate, its table, its data block's handle) for the keys whose index points into a
    // block. A table's damaged end leaves the keys between it unsearched: they fail with it.
    let mut handles: Vec<(usize, usize, BlockHandle)> = Vec::with_capacity(candidates.len());
    for (t, r) in ranges.iter().enumerate() {
        let (table, index, _) = &searched[t];
        let mut index_it = index.iter();
        for c in r.clone() {
            let p = &mut keys[candidates[c]];
            match table.data_handle_at(&mut index_it, restarts[c], &p.lookup) {
                Ok(Some(handle)) => handles.push((c, t, handle)),
                Ok(None) => {}
                Err(e) => {
                    p.error = Some(e);
                    // The next key starts afresh rather than from where damage stopped this one.
                    index_it = index.iter();
                }
            }
        }
    }
    let wanted: Vec<(&TableReader, BlockHandle)> = handles
        .iter()
        .map(|&(_, t, handle)| (searched[t].0, handle))
        .collect();
    // (candidate, its table, its data block) for the keys whose block could be read.
    let mut located: Vec<(usize, usize, Arc<Block>)> = Vec::with_capacity(handles.len());
    for (&(c, t, _), block) in handles.iter().zip(data_blocks(&wanted, opts)) {
        match block {
            Ok(block) => located.push((c, t, block)),
            Err(e) => keys[candidates[c]].error = Some(e),
        }
    }
    for (_, _, block) in &located {
        block.prefetch_restarts();
    }
    let searches: Vec<(&Block, &[u8])> = located
        .iter()
        .map(|(c, _, block)| (&**block, keys[candidates[*c]].lookup.as_slice()))
        .collect();
    Block::restarts_before(&searches, &mut found);
    for ((_, _, block), start) in located.iter().zip(&found) {
        if let Some(r) = *start {
            block.prefetch_interval(r);
        }
    }
    // One iterator per block, reused by its keys: a key after the previous one in the same
    // interval continues the scan from where that one stopped.
    let mut it: Option<(&Arc<Block>, BlockIter)> = None;
    for ((c, t, block), start) in located.iter().zip(found) {
        let p = &mut keys[candidates[*c]];
        let it = match &mut it {
            Some((current, it)) if Arc::ptr_eq(current, block) => it,
            _ => &mut it.insert((block, block.iter())).1,
        };
        match searched[*t].0.get_in_block(block, it, start, &p.lookup) {
            Ok(Lookup::NotFound) => {}
            Ok(found) => p.outcome = Some(found),
            Err(e) => p.error = Some(e),
        }
    }
}
