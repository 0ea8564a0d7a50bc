//! Data and index blocks: prefix-compressed entries with a restart point every N keys.
//!
//! Entry: `shared: varint32 | unshared: varint32 | value_len: varint32 | key[shared..] | value`.
//! Trailer: `restart offsets: u32 LE * n | n: u32 LE`. A restart entry has `shared = 0`, so a seek
//! binary-searches the restarts on whole keys, then scans at most one interval. An index block
//! narrows that search first with its probe words (`probes.rs`).

mod probes;

use std::cmp::Ordering;
use std::sync::Arc;

use crate::coding::{fixed32, get_varint32, put_fixed32, put_varint32};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;

/// Builds one block.
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    pub(crate) fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval,
            last_key: Vec::new(),
        }
    }

    /// Adds an entry; keys must arrive in increasing internal order.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.buf.is_empty() {
            // The block's first entry, at the restart `restarts` starts with: it shares nothing
            // with the last key of the block before, which `last_key` still holds.
            0
        } else if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, (key.len() - shared) as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.counter += 1;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The last key added, kept across `finish` (empty before the first): a table's last key
    /// is its last data block's, with no copy of its own.
    pub(crate) fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Size of the block if finished now.
    pub(crate) fn estimated_size(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }

    /// The finished block contents; the builder is reset for reuse.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        out
    }
}

/// Bounds of a restart search at most this wide are not narrowed further by probe words.
const NARROW_ENOUGH: u32 = 64;

/// Cache lines of a restart interval a batched lookup prefetches before scanning it.
const PREFETCH_LINES: usize = 32;

/// An uncompressed, checked block. Shared via `Arc` between the cache, iterators and pinned values.
#[derive(Debug)]
pub(crate) struct Block {
    data: Vec<u8>,
    restarts_at: usize,
    num_restarts: u32,
    /// An index block's probe words (`Block::new_index`).
    /// Boxed: a data block (most blocks) pays one pointer for it.
    probes: Option<Box<probes::Probes>>,
}

impl Block {
    /// Validates the restart trailer; `file` names the table for the error.
    pub(crate) fn new(data: Vec<u8>, file: &std::path::Path) -> Result<Block> {
        let bad = |d: &str| Err(Error::corruption(file, format!("block: {d}")));
        if data.len() < 4 {
            return bad("shorter than its trailer");
        }
        let n = fixed32(&data, data.len() - 4);
        let Some(trailer) = (n as usize).checked_mul(4).and_then(|t| t.checked_add(4)) else {
            return bad("restart count overflows");
        };
        if n == 0 || trailer > data.len() {
            return bad("restart count does not fit the block");
        }
        let restarts_at = data.len() - trailer;
        for i in 0..n as usize {
            if fixed32(&data, restarts_at + i * 4) as usize >= restarts_at.max(1) {
                return bad("restart offset past the entries");
            }
        }
        Ok(Block {
            data,
            restarts_at,
            num_restarts: n,
            probes: None,
        })
    }

    /// [`Block::new`] for an index block, read once and searched by every lookup: with probe
    /// words when it has enough restarts to pay for them (`probes.rs`), and none when a restart
    /// entry is damaged, so that the search reports the damage as before.
    pub(crate) fn new_index(data: Vec<u8>, file: &std::path::Path) -> Result<Block> {
        let mut block = Block::new(data, file)?;
        if block.num_restarts as usize >= probes::MIN_RESTARTS {
            let user_keys: Option<Vec<&[u8]>> = (0..block.num_restarts)
                .map(|i| block.restart_key(i).map(crate::key::user_key))
                .collect();
            block.probes = user_keys.map(|k| Box::new(probes::Probes::new(&k)));
        }
        Ok(block)
    }

    /// The block's bytes.
    #[cfg(test)]
    pub(crate) fn size(&self) -> usize {
        self.data.len()
    }

    /// The memory the block holds: its bytes and its probe words (the cache's charge).
    pub(crate) fn memory(&self) -> usize {
        self.data.len() + self.probes.as_ref().map_or(0, |p| p.bytes())
    }

    pub(crate) fn data(&self) -> &[u8] {
        &self.data
    }

    /// The block's bytes, for reuse as a read buffer.
    pub(crate) fn into_data(self) -> Vec<u8> {
        self.data
    }

    fn restart(&self, i: u32) -> usize {
        fixed32(&self.data, self.restarts_at + i as usize * 4) as usize
    }

    /// Starts loading the restart array and the first entry of every restart interval (up to a
    /// few), the lines a seek reads first: a batch issues these for all its blocks before seeking.
    pub(crate) fn prefetch_restarts(&self) {
        crate::bloom::prefetch_line(&self.data[self.restarts_at]);
        for i in 0..self.num_restarts.min(4) {
            crate::bloom::prefetch_line(&self.data[self.restart(i)]);
        }
    }

    /// The last restart interval whose first key is below `target`: where a seek starts scanning.
    pub(crate) fn restart_before(&self, target: &[u8]) -> Option<u32> {
        let (mut lo, mut hi) = self.search_bounds(target);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if compare_internal(self.restart_key(mid)?, target) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    }

    /// The restarts, inclusive, a search for `target` must look among: all of them, or what the
    /// probe words leave.
    fn search_bounds(&self, target: &[u8]) -> (u32, u32) {
        match &self.probes {
            Some(p) => p.narrow(target),
            None => (0, self.num_restarts - 1),
        }
    }

    /// Starts loading restart slot `index` (the offset a binary search reads next).
    fn prefetch_restart_slot(&self, index: u32) {
        crate::bloom::prefetch_line(&self.data[self.restarts_at + index as usize * 4]);
    }

    /// Starts loading the start of the entry at restart `index` (its header and key).
    fn prefetch_restart_entry(&self, index: u32) {
        crate::bloom::prefetch_line(&self.data[self.restart(index)]);
    }

    /// Starts loading the first lines of restart interval `index`.
    pub(crate) fn prefetch_interval(&self, index: u32) {
        let start = self.restart(index);
        let end = if index + 1 < self.num_restarts {
            self.restart(index + 1)
        } else {
            self.restarts_at
        };
        for offset in (start..end).step_by(64).take(PREFETCH_LINES) {
            crate::bloom::prefetch_line(&self.data[offset]);
        }
    }

    /// Runs `restart_before` for many (block, target) searches at once, stepped together: each
    /// round first starts loading every search's next restart slot, then every slot's key, and
    /// only then compares, so a batch's cache misses overlap instead of queueing one by one (an
    /// index block of a large table has thousands of restarts). Results go to `found`.
    pub(crate) fn restarts_before(searches: &[(&Block, &[u8])], found: &mut Vec<Option<u32>>) {
        let whole = searches.iter().map(|_| (0, u32::MAX)).collect();
        Block::restarts_within(searches, whole, found);
    }

    /// `restarts_before`, where each search's answer is known to lie in the restarts `bounds`
    /// gives it, inclusive (clamped to the block): a key between two keys already searched for
    /// needs only the rounds that separate their answers.
    pub(crate) fn restarts_within(
        searches: &[(&Block, &[u8])],
        mut bounds: Vec<(u32, u32)>,
        found: &mut Vec<Option<u32>>,
    ) {
        found.clear();
        for ((block, target), b) in searches.iter().zip(&mut bounds) {
            b.1 = b.1.min(block.num_restarts - 1);
            // Narrow bounds (a batch's keys between two it searched) are left as they are:
            // the words' search would cost more than the few rounds it could save.
            if b.1 - b.0.min(b.1) > NARROW_ENOUGH {
                let (lo, hi) = block.search_bounds(target);
                b.1 = b.1.min(hi);
                b.0 = b.0.max(lo);
            }
            b.0 = b.0.min(b.1);
        }
        let mut damaged = vec![false; searches.len()];
        let mid = |(lo, hi): (u32, u32)| (lo + hi).div_ceil(2);
        loop {
            let mut active = false;
            for ((block, _), &b) in searches.iter().zip(&bounds) {
                if b.0 < b.1 {
                    block.prefetch_restart_slot(mid(b));
                    active = true;
                }
            }
            if !active {
                break;
            }
            for ((block, _), &b) in searches.iter().zip(&bounds) {
                if b.0 < b.1 {
                    block.prefetch_restart_entry(mid(b));
                }
            }
            for (((block, target), b), bad) in searches.iter().zip(&mut bounds).zip(&mut damaged) {
                if b.0 >= b.1 {
                    continue;
                }
                let m = mid(*b);
                match block.restart_key(m) {
                    Some(k) if compare_internal(k, target) == Ordering::Less => b.0 = m,
                    Some(_) => b.1 = m - 1,
                    None => {
                        *bad = true;
                        b.1 = b.0;
                    }
                }
            }
        }
        found.extend(
            bounds
                .iter()
                .zip(&damaged)
                .map(|(b, bad)| (!bad).then_some(b.0)),
        );
    }

    /// The whole key stored at a restart point (shared is 0 there).
    fn restart_key(&self, index: u32) -> Option<&[u8]> {
        let data = &self.data;
        let mut pos = self.restart(index);
        let shared = get_varint32(data, &mut pos)?;
        let unshared = get_varint32(data, &mut pos)? as usize;
        get_varint32(data, &mut pos)?;
        // A restart key is whole, and an internal key has at least its 8-byte trailer.
        if shared != 0 || unshared < 8 {
            return None;
        }
        data.get(pos..pos.checked_add(unshared)?)
    }

    pub(crate) fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter {
            block: self.clone(),
            current: self.restarts_at,
            next_offset: self.restarts_at,
            restart_index: 0,
            key: Vec::new(),
            value: (0, 0),
            error: None,
        }
    }
}

/// Walks one block. `current == restarts_at` means invalid.
#[derive(Debug)]
pub(crate) struct BlockIter {
    block: Arc<Block>,
    current: usize,
    next_offset: usize,
    restart_index: u32,
    key: Vec<u8>,
    value: (usize, usize),
    error: Option<String>,
}

impl BlockIter {
    /// Offset and length of the current value inside the block.
    pub(crate) fn value_range(&self) -> (usize, usize) {
        self.value
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_at;
        self.next_offset = self.block.restarts_at;
        self.key.clear();
    }

    fn corrupt(&mut self, why: &str) {
        self.error = Some(why.to_string());
        self.invalidate();
    }

    /// Decodes the entry at `next_offset`; false at the end or on damage.
    fn parse_next(&mut self) -> bool {
        let data = &self.block.data;
        let limit = self.block.restarts_at;
        let offset = self.next_offset;
        if offset >= limit {
            self.invalidate();
            return false;
        }
        let mut pos = offset;
        let (Some(shared), Some(unshared), Some(vlen)) = (
            get_varint32(data, &mut pos),
            get_varint32(data, &mut pos),
            get_varint32(data, &mut pos),
        ) else {
            self.corrupt("truncated entry header");
            return false;
        };
        let (shared, unshared, vlen) = (shared as usize, unshared as usize, vlen as usize);
        if shared > self.key.len() || pos + unshared + vlen > limit {
            self.corrupt("entry runs past the block");
            return false;
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(&data[pos..pos + unshared]);
        if self.key.len() < 8 {
            self.corrupt("key shorter than an internal key");
            return false;
        }
        self.value = (pos + unshared, vlen);
        self.current = offset;
        self.next_offset = pos + unshared + vlen;
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart(self.restart_index + 1) <= self.current
        {
            self.restart_index += 1;
        }
        true
    }

    fn seek_to_restart(&mut self, index: u32) {
        self.key.clear();
        self.restart_index = index;
        self.next_offset = self.block.restart(index);
        self.current = self.block.restarts_at;
    }

    /// Seeks to the first key at or after `target`, scanning from restart interval `index`
    /// (found by [`Block::restart_before`]).
    pub(crate) fn seek_from_restart(&mut self, index: u32, target: &[u8]) {
        self.seek_to_restart(index);
        self.scan_to(target);
    }

    /// As `seek_from_restart`, but when the iterator already sits in interval `index` (or later)
    /// at a key still below `target`, the scan goes on from there: batched lookups of ascending
    /// keys in one block decode each entry at most once.
    pub(crate) fn seek_forward_from(&mut self, index: u32, target: &[u8]) {
        if self.valid()
            && self.restart_index >= index
            && compare_internal(&self.key, target) == Ordering::Less
        {
            self.scan_to(target);
        } else {
            self.seek_from_restart(index, target);
        }
    }

    fn scan_to(&mut self, target: &[u8]) {
        while self.parse_next() {
            if compare_internal(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.current < self.block.restarts_at
    }

    fn seek_to_first(&mut self) {
        self.seek_to_restart(0);
        self.parse_next();
    }

    fn seek_to_last(&mut self) {
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next_offset < self.block.restarts_at {}
    }

    fn seek(&mut self, target: &[u8]) {
        match self.block.restart_before(target) {
            Some(index) => self.seek_from_restart(index, target),
            None => self.corrupt("damaged restart entry"),
        }
    }

    fn next(&mut self) {
        self.parse_next();
    }

    fn prev(&mut self) {
        let original = self.current;
        while self.block.restart(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        while self.parse_next() && self.next_offset < original {}
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        &self.block.data[self.value.0..self.value.0 + self.value.1]
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            None => Ok(()),
            Some(e) => Err(Error::corruption("<block>", e.clone())),
        }
    }
}

impl BlockIter {
    /// The damage met, if any, for the table reader to attach its file name to.
    pub(crate) fn error_detail(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

#[cfg(test)]
mod tests;
