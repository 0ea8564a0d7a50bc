//! Batched point lookups in one table (MultiGet): the keys go down the table together, phase by
//! phase, so each phase issues every key's memory loads before any key waits on one.

use std::sync::Arc;

use super::format::{BlockHandle, stored_len};
use super::reader::{BlockReadOptions, FilterRef, TableReader};
use crate::block::{Block, BlockIter};
use crate::bloom;
use crate::error::{Error, Result};
use crate::fs::{BatchRead, read_batch};
use crate::iter::InternalIterator;
use crate::key::{self, Lookup};
use crate::value::PinnableValue;

/// Index entries a batched lookup steps through to reach the next key's block before it falls back
/// to a binary search of the index.
const INDEX_STEPS: usize = 4;

/// One key of a batched lookup, on its way down the tree. `'m` is the memtables it was looked
/// up in: a value found there is borrowed from them, not copied out.
#[derive(Debug)]
pub(crate) struct PendingKey<'m> {
    /// The lookup key: user key and the batch's sequence number.
    pub lookup: key::LookupKey,
    pub hash: u64,
    /// Found or deleted: the search stops here.
    pub outcome: Option<Lookup<PinnableValue>>,
    /// Found in a memtable, which the batch holds until it hands the value over.
    pub in_memtable: Option<&'m [u8]>,
    pub error: Option<Error>,
    /// The newest range tombstone covering the key in the source being searched: an entry older
    /// than it reads as deleted.
    pub covered_below: u64,
}

impl PendingKey<'_> {
    pub(crate) fn new(user_key: &[u8], seq: u64) -> Self {
        PendingKey {
            lookup: key::LookupKey::new(user_key, seq),
            hash: bloom::key_hash(user_key),
            outcome: None,
            in_memtable: None,
            error: None,
            covered_below: 0,
        }
    }

    /// A key refused before its search starts.
    pub(crate) fn failed(error: Error) -> Self {
        PendingKey {
            lookup: key::LookupKey::new(&[], 0),
            hash: 0,
            outcome: None,
            in_memtable: None,
            error: Some(error),
            covered_below: 0,
        }
    }

    pub(crate) fn user_key(&self) -> &[u8] {
        key::user_key(&self.lookup)
    }

    pub(crate) fn is_resolved(&self) -> bool {
        self.outcome.is_some() || self.in_memtable.is_some() || self.error.is_some()
    }
}

/// Fails the keys `group` names with `e`.
pub(crate) fn fail_keys(keys: &mut [PendingKey<'_>], group: &[usize], e: &Error) {
    for &i in group {
        keys[i].error = Some(e.duplicate());
    }
}

/// How `data_blocks` gets one block.
enum Fetch {
    Done(Result<Arc<Block>>),
    /// The block the previous request named.
    AsPrevious,
    /// The next of the batch's reads.
    Read,
}

/// The data blocks `wanted` names (a table and a handle each; several blocks of one table, and
/// the same block twice in a row, are fine), as `TableReader::data_block` gives them, except
/// that the blocks the cache lacks are read together (`fs::read_batch`): a batch of keys waits
/// on the device about once rather than once per block.
pub(crate) fn data_blocks(
    wanted: &[(&TableReader, BlockHandle)],
    opts: BlockReadOptions,
) -> Vec<Result<Arc<Block>>> {
    let mut fetches = Vec::with_capacity(wanted.len());
    let mut reads = Vec::new();
    let mut previous: Option<(&TableReader, BlockHandle)> = None;
    for &(table, handle) in wanted {
        let fetch = if previous.is_some_and(|(t, h)| std::ptr::eq(t, table) && h == handle) {
            Fetch::AsPrevious
        } else if let Some(cached) = table.cached_data_block(handle, opts.cache_only) {
            Fetch::Done(cached)
        } else if opts.cache_only {
            Fetch::Done(Err(super::reader::not_in_memory(
                "a data block",
                table.path(),
            )))
        } else {
            match stored_len(table.file(), table.path(), handle) {
                Ok(len) => {
                    reads.push(BatchRead::new(table.file(), handle.offset, len));
                    Fetch::Read
                }
                Err(e) => Fetch::Done(Err(e)),
            }
        };
        fetches.push(fetch);
        previous = Some((table, handle));
    }
    read_batch(&mut reads);
    let mut stored = reads.into_iter().map(BatchRead::into_result);
    let mut blocks: Vec<Result<Arc<Block>>> = Vec::with_capacity(wanted.len());
    for (fetch, &(table, handle)) in fetches.into_iter().zip(wanted) {
        let block = match (fetch, blocks.last()) {
            (Fetch::Done(block), _) => block,
            (Fetch::AsPrevious, Some(Ok(block))) => Ok(block.clone()),
            (Fetch::AsPrevious, Some(Err(e))) => Err(e.duplicate()),
            (Fetch::Read, _) => match stored.next() {
                Some(bytes) => table.data_block_read(handle, bytes, opts),
                None => table.data_block(handle, opts),
            },
            (Fetch::AsPrevious, None) => table.data_block(handle, opts),
        };
        blocks.push(block);
    }
    blocks
}

impl TableReader {
    /// The restart a search of one of this table's blocks found (`Block::restarts_before` or
    /// `restart_before`): `None` means the block's restart array is damaged.
    fn restart_found(&self, restart: Option<u32>, block: &str) -> Result<u32> {
        restart
            .ok_or_else(|| Error::corruption(&self.path, format!("{block}: damaged restart entry")))
    }

    /// The data block that may hold `lookup`, once a search of this table's index block found
    /// `restart` (`Block::restarts_before`); `None` past the table's last block. `it` iterates
    /// the index block, reused across a batch's ascending keys (no iterator, and no key
    /// buffer, per key; a key in the interval where the last one stopped scans on from there).
    pub(crate) fn data_handle_at(
        &self,
        it: &mut BlockIter,
        restart: Option<u32>,
        lookup: &[u8],
    ) -> Result<Option<BlockHandle>> {
        let restart = self.restart_found(restart, "index block")?;
        it.seek_forward_from(restart, lookup);
        if !it.valid() {
            self.corrupt_in(it)?;
            return Ok(None);
        }
        self.decode_handle(it.value()).map(Some)
    }

    /// Appends to `passed` the keys of `group` that `filter` (from `prefetch_filter` for them)
    /// lets through, in order.
    pub(crate) fn filter_group(
        &self,
        filter: &FilterRef<'_>,
        keys: &[PendingKey<'_>],
        group: &[usize],
        passed: &mut Vec<usize>,
    ) {
        passed.extend(
            group
                .iter()
                .copied()
                .filter(|&i| self.check_filter(filter, keys[i].hash)),
        );
    }

    /// What data `block` of this table holds for `lookup`, once a search of its restarts found
    /// `start`. For tables without range tombstones (`multi_get` settles those).
    /// `it` iterates `block`; left where an earlier, smaller key stopped, it scans on from there.
    pub(crate) fn get_in_block(
        &self,
        block: &Arc<Block>,
        it: &mut BlockIter,
        start: Option<u32>,
        lookup: &[u8],
    ) -> Result<Lookup<PinnableValue>> {
        let start = self.restart_found(start, "block")?;
        it.seek_forward_from(start, lookup);
        self.entry_at(block, it, lookup, 0)
    }

    /// Looks up the keys `group` names (ascending) in one pass, in phases so that each issues
    /// the memory loads of every key before the next waits on any of them: the filter for the
    /// whole group after its cache lines are prefetched; then one index seek per data block
    /// rather than per key, each block taken from the cache once for all the keys it holds (their
    /// values share it) with its restart points prefetched; then each key's restart interval,
    /// prefetched; then the scans. Outcomes go to `keys`.
    pub(crate) fn multi_get(
        &self,
        keys: &mut [PendingKey<'_>],
        group: &[usize],
        opts: BlockReadOptions,
    ) {
        if self.range_tombstones.is_empty() {
            return self.multi_get_points(keys, group, opts);
        }
        for &i in group {
            keys[i].covered_below = self.covering_seq(&keys[i].lookup);
        }
        self.multi_get_points(keys, group, opts);
        for &i in group {
            let p = &mut keys[i];
            if p.covered_below > 0 && !p.is_resolved() {
                p.outcome = Some(self.settle(Lookup::NotFound, p.covered_below));
            }
        }
    }

    fn multi_get_points(
        &self,
        keys: &mut [PendingKey<'_>],
        group: &[usize],
        opts: BlockReadOptions,
    ) {
        let filter =
            match self.prefetch_filter(group.iter().map(|&i| keys[i].hash), opts.cache_only) {
                Ok(f) => f,
                Err(e) => return fail_keys(keys, group, &e),
            };
        // (key, its block in `handles`) for the keys the filter lets through.
        let mut located: Vec<(usize, usize)> = Vec::with_capacity(group.len());
        let mut handles: Vec<(&TableReader, BlockHandle)> = Vec::new();
        let mut index: Option<BlockIter> = None;
        // Cleared once stepping fails: the keys are then too far apart for it to pay.
        let mut stepping = true;
        // The index key that bounds the last block from above.
        let mut bound: Vec<u8> = Vec::new();
        for &i in group {
            let p = &mut keys[i];
            if !self.check_filter(&filter, p.hash) {
                continue;
            }
            if !handles.is_empty() && key::compare_internal(&p.lookup, &bound).is_le() {
                located.push((i, handles.len() - 1));
                continue;
            }
            let index = match &mut index {
                Some(it) => {
                    // Keys ascend: the block holding this one is usually a few index entries
                    // further on, cheaper to step to than to binary-search for.
                    let mut steps = 0;
                    if stepping {
                        while it.valid()
                            && steps < INDEX_STEPS
                            && key::compare_internal(it.key(), &p.lookup).is_lt()
                        {
                            it.next();
                            steps += 1;
                        }
                    }
                    if !stepping || steps == INDEX_STEPS {
                        stepping = false;
                        it.seek(&p.lookup);
                    }
                    it
                }
                None => match self.index_block(opts.cache_only) {
                    Ok(b) => {
                        let it = index.insert(b.iter());
                        it.seek(&p.lookup);
                        it
                    }
                    Err(e) => return fail_keys(keys, group, &e),
                },
            };
            if !index.valid() {
                if let Err(e) = self.corrupt_in(index) {
                    p.error = Some(e);
                }
                // Past the table's last block: so are all the later keys.
                break;
            }
            match self.decode_handle(index.value()) {
                Ok(handle) => {
                    handles.push((self, handle));
                    bound.clear();
                    bound.extend_from_slice(index.key());
                    located.push((i, handles.len() - 1));
                }
                Err(e) => p.error = Some(e),
            }
        }
        let blocks = data_blocks(&handles, opts);
        for block in blocks.iter().flatten() {
            block.prefetch_restarts();
        }
        // (key, its block's number, the block) for the keys whose block could be read.
        let mut found: Vec<(usize, usize, &Arc<Block>)> = Vec::with_capacity(located.len());
        for (i, b) in located {
            match &blocks[b] {
                Ok(block) => found.push((i, b, block)),
                Err(e) => keys[i].error = Some(e.duplicate()),
            }
        }
        let starts: Vec<Option<u32>> = found
            .iter()
            .map(|&(i, _, block)| {
                let start = block.restart_before(&keys[i].lookup);
                if let Some(r) = start {
                    block.prefetch_interval(r);
                }
                start
            })
            .collect();
        // One iterator per block, reused by its keys: a key after the previous one in the same
        // interval continues the scan from where that one stopped.
        let mut it: Option<(usize, BlockIter)> = None;
        for (&(i, b, block), start) in found.iter().zip(starts) {
            let p = &mut keys[i];
            let start = match self.restart_found(start, "block") {
                Ok(start) => start,
                Err(e) => {
                    p.error = Some(e);
                    continue;
                }
            };
            let it = match &mut it {
                Some((current, it)) if *current == b => it,
                _ => &mut it.insert((b, block.iter())).1,
            };
            it.seek_forward_from(start, &p.lookup);
            match self.entry_at(block, it, &p.lookup, p.covered_below) {
                Ok(Lookup::NotFound) => {}
                Ok(found) => p.outcome = Some(found),
                Err(e) => p.error = Some(e),
            }
        }
    }
}
