//! Batched MultiGet through a version's tables: L0's tables one by one; each level below it as a
//! whole, its keys' index searches stepped together across tables so their cache misses overlap.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{FileMetaData, Version};
use crate::block::Block;
use crate::key::{self, Lookup, compare_internal};
use crate::sst::{BlockHandle, BlockReadOptions, PendingKey, TableCache, TableReader, data_blocks};

impl Version {
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

/// Looks up one level's keys (`groups`: each table with the keys in its range), in phases over
/// all of them: filters; the index searches, stepped together across tables (`restarts_before`);
/// the data blocks; the searches within them, stepped together too. A table with range tombstones
/// takes its own path (`TableReader::multi_get`), which settles what they cover.
fn multi_get_level(
    tables: &TableCache,
    level: usize,
    groups: &[(&FileMetaData, Vec<usize>)],
    keys: &mut [PendingKey],
    opts: BlockReadOptions,
) {
    let mut opened = Vec::with_capacity(groups.len());
    for (f, group) in groups {
        match tables.get(f.number, level) {
            Ok(table) => {
                table.prefetch_filter(group.iter().map(|&i| keys[i].hash));
                opened.push((table, group));
            }
            Err(e) => {
                for &i in group {
                    keys[i].error = Some(e.duplicate());
                }
            }
        }
    }
    // (key, its table) for the keys a filter lets through.
    let mut candidates: Vec<(usize, Arc<TableReader>)> = Vec::new();
    for (table, group) in opened {
        if !table.range_tombstones().is_empty() {
            table.multi_get(keys, group, opts);
            continue;
        }
        for &i in group {
            match table.may_contain(keys[i].hash) {
                Ok(true) => candidates.push((i, table.clone())),
                Ok(false) => {}
                Err(e) => keys[i].error = Some(e),
            }
        }
    }
    if candidates.is_empty() {
        return;
    }
    // (candidate, its table's index block) for the candidates whose index could be read.
    let mut searching: Vec<(usize, Arc<Block>)> = Vec::with_capacity(candidates.len());
    for (c, (i, table)) in candidates.iter().enumerate() {
        match table.index_block() {
            Ok(b) => searching.push((c, b)),
            Err(e) => keys[*i].error = Some(e),
        }
    }
    let mut restarts = Vec::new();
    {
        let searches: Vec<(&Block, &[u8])> = searching
            .iter()
            .map(|(c, index)| (&**index, keys[candidates[*c].0].lookup.as_slice()))
            .collect();
        Block::restarts_before(&searches, &mut restarts);
    }
    // (candidate, its data block's handle) for the keys whose index points into a block.
    let mut handles: Vec<(usize, BlockHandle)> = Vec::with_capacity(searching.len());
    for ((c, index), restart) in searching.iter().zip(restarts.iter().copied()) {
        let (i, table) = &candidates[*c];
        match table.data_handle_at(index, restart, &keys[*i].lookup) {
            Ok(Some(handle)) => handles.push((*c, handle)),
            Ok(None) => {}
            Err(e) => keys[*i].error = Some(e),
        }
    }
    let wanted: Vec<(&TableReader, BlockHandle)> = handles
        .iter()
        .map(|&(c, handle)| (&*candidates[c].1, handle))
        .collect();
    // (candidate, its data block) for the keys whose block could be read.
    let mut located: Vec<(usize, Arc<Block>)> = Vec::with_capacity(handles.len());
    for ((c, _), block) in handles.iter().zip(data_blocks(&wanted, opts)) {
        match block {
            Ok(block) => located.push((*c, block)),
            Err(e) => keys[candidates[*c].0].error = Some(e),
        }
    }
    let mut starts = Vec::new();
    {
        let searches: Vec<(&Block, &[u8])> = located
            .iter()
            .map(|(c, block)| (&**block, keys[candidates[*c].0].lookup.as_slice()))
            .collect();
        Block::restarts_before(&searches, &mut starts);
    }
    for ((c, block), start) in located.iter().zip(starts) {
        let (i, table) = &candidates[*c];
        let p = &mut keys[*i];
        match table.get_in_block(block, start, &p.lookup) {
            Ok(Lookup::NotFound) => {}
            Ok(found) => p.outcome = Some(found),
            Err(e) => p.error = Some(e),
        }
    }
}
