//! Reads a table: the properties are loaded at open and kept with the reader; data blocks go
//! through the block cache, and index and filter blocks too when `cache_index_and_filter_blocks`
//! asks for it (held by the reader otherwise).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::builder::{FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME, RANGE_DEL_BLOCK_NAME};
use super::format::{BlockHandle, FOOTER_SIZE, Footer, read_block};
use super::properties::TableProperties;
use crate::block::{Block, BlockIter};
use crate::cache::{BlockCache, CachedBlock, Priority};
use crate::coding::get_length_prefixed;
use crate::error::{Error, Result};
use crate::filter;
use crate::fs::{FileSystem, RandomAccessFile};
use crate::iter::InternalIterator;
use crate::key::Lookup;
use crate::key::{self, ValueKind};
use crate::range_del::{FragmentedTombstones, RANGE_DELETION_KIND, RangeTombstone};
use crate::stats::{BlockKind, Stats};
use crate::value::PinnableValue;

/// Index entries a batched lookup steps through to reach the next key's block before it falls back
/// to a binary search of the index.
const INDEX_STEPS: usize = 4;

/// One key of a batched lookup, on its way down the tree.
#[derive(Debug)]
pub(crate) struct PendingKey {
    /// The lookup key: user key and the batch's sequence number.
    pub lookup: Vec<u8>,
    pub hash: u64,
    /// Found or deleted: the search stops here.
    pub outcome: Option<Lookup<PinnableValue>>,
    pub error: Option<Error>,
    /// The newest range tombstone covering the key in the source being searched: an entry older
    /// than it reads as deleted.
    pub covered_below: u64,
}

impl PendingKey {
    pub(crate) fn new(user_key: &[u8], seq: u64) -> Self {
        PendingKey {
            lookup: key::lookup_key(user_key, seq),
            hash: filter::key_hash(user_key),
            outcome: None,
            error: None,
            covered_below: 0,
        }
    }

    /// A key refused before its search starts.
    pub(crate) fn failed(error: Error) -> Self {
        PendingKey {
            lookup: key::lookup_key(&[], 0),
            hash: 0,
            outcome: None,
            error: Some(error),
            covered_below: 0,
        }
    }

    pub(crate) fn user_key(&self) -> &[u8] {
        key::user_key(&self.lookup)
    }

    pub(crate) fn is_resolved(&self) -> bool {
        self.outcome.is_some() || self.error.is_some()
    }
}

/// How a read treats the cache and checksums.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockReadOptions {
    pub fill_cache: bool,
    pub verify_checksums: bool,
}

/// Where a reader keeps its index and filter blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum MetaBlocks {
    /// Loaded at open and owned by the reader, outside the block cache (the default).
    #[default]
    Held,
    /// In the block cache at high priority, looked up on every read and evictable.
    Cached,
    /// In the block cache, and the reader holds a handle: they count against the cache but are
    /// never evicted while the reader lives (L0 files, which every read consults).
    Pinned,
}

/// An index or filter block: owned by the reader, or found through the cache at each read.
enum Meta<T> {
    Held(T),
    Cached(BlockHandle),
}

/// A filter for one read: borrowed from the reader, or a cache handle held for the read.
enum FilterRef<'a> {
    None,
    Borrowed(&'a [u8]),
    Cached(Arc<Vec<u8>>),
}

impl FilterRef<'_> {
    fn bytes(&self) -> Option<&[u8]> {
        match self {
            FilterRef::None => None,
            FilterRef::Borrowed(f) => Some(f),
            FilterRef::Cached(f) => Some(f),
        }
    }
}

pub(crate) struct TableReader {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    file_number: u64,
    index: Meta<Arc<Block>>,
    filter: Option<Meta<Arc<Vec<u8>>>>,
    props: TableProperties,
    /// The range-deletion block, fragmented once at open.
    range_tombstones: Arc<FragmentedTombstones>,
    cache: Option<Arc<BlockCache>>,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for TableReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableReader")
            .field("path", &self.path)
            .finish()
    }
}

impl TableReader {
    pub(crate) fn open(
        file: Arc<dyn RandomAccessFile>,
        path: &Path,
        file_number: u64,
        cache: Option<Arc<BlockCache>>,
        meta_blocks: MetaBlocks,
        stats: Arc<Stats>,
    ) -> Result<Self> {
        let size = file.len()?;
        if size < FOOTER_SIZE as u64 {
            return Err(Error::corruption(
                path,
                format!("file of {size} bytes is too short to be a table"),
            ));
        }
        let mut footer = [0u8; FOOTER_SIZE];
        file.read_exact_at(&mut footer, size - FOOTER_SIZE as u64)?;
        let footer = Footer::decode(&footer, path)?;
        let metaindex = read_block(file.as_ref(), path, footer.metaindex, true)?;
        let (mut filter_handle, mut props_handle, mut range_del_handle) = (None, None, None);
        let mut pos = 0;
        while pos < metaindex.len() {
            let entry = get_length_prefixed(&metaindex, &mut pos)
                .and_then(|name| Some((name, BlockHandle::decode(&metaindex, &mut pos)?)));
            match entry {
                Some((name, h)) if name == FILTER_BLOCK_NAME.as_bytes() => filter_handle = Some(h),
                Some((name, h)) if name == PROPERTIES_BLOCK_NAME.as_bytes() => {
                    props_handle = Some(h)
                }
                Some((name, h)) if name == RANGE_DEL_BLOCK_NAME.as_bytes() => {
                    range_del_handle = Some(h)
                }
                Some(_) => {}
                None => return Err(Error::corruption(path, "metaindex block is damaged")),
            }
        }
        let props = match props_handle {
            Some(h) => TableProperties::decode(&read_block(file.as_ref(), path, h, true)?)
                .ok_or_else(|| Error::corruption(path, "properties block is damaged"))?,
            None => return Err(Error::corruption(path, "table has no properties block")),
        };
        let mut reader = TableReader {
            file,
            path: path.to_path_buf(),
            file_number,
            index: Meta::Cached(footer.index),
            filter: filter_handle.map(Meta::Cached),
            props,
            range_tombstones: Arc::default(),
            stats,
            cache: None,
        };
        if let Some(h) = range_del_handle {
            reader.range_tombstones = Arc::new(reader.read_range_tombstones(h)?);
        }
        // Index and filter are read (and checked) at open whatever their home, so that a damaged
        // one fails the open rather than a later read, and the cache starts warm.
        let index = reader.read_checked_block(footer.index)?;
        let filter = filter_handle.map(|h| reader.read_filter(h)).transpose()?;
        let meta_blocks = if cache.is_none() {
            MetaBlocks::Held
        } else {
            meta_blocks
        };
        reader.cache = cache;
        if meta_blocks != MetaBlocks::Held
            && let Some(cache) = &reader.cache
        {
            let index_block = CachedBlock::Block(index.clone());
            reader.add_to_cache(cache, footer.index, BlockKind::Index, index_block);
            if let (Some(h), Some(f)) = (filter_handle, &filter) {
                reader.add_to_cache(cache, h, BlockKind::Filter, CachedBlock::Filter(f.clone()));
            }
        }
        if meta_blocks != MetaBlocks::Cached {
            reader.index = Meta::Held(index);
            reader.filter = filter.map(Meta::Held);
        }
        Ok(reader)
    }

    /// Reads `handle`'s block from the file, counting the bytes.
    fn read_raw(&self, handle: BlockHandle, verify_checksum: bool) -> Result<Vec<u8>> {
        let raw = read_block(self.file.as_ref(), &self.path, handle, verify_checksum)?;
        self.stats.bytes_read_from_disk.add(handle.size);
        Ok(raw)
    }

    /// Reads `handle`'s block, checksum verified, and parses it as a block of entries.
    fn read_checked_block(&self, handle: BlockHandle) -> Result<Arc<Block>> {
        Ok(Arc::new(Block::new(
            self.read_raw(handle, true)?,
            &self.path,
        )?))
    }

    /// Reads and fragments the range-deletion block.
    fn read_range_tombstones(&self, handle: BlockHandle) -> Result<FragmentedTombstones> {
        let mut it = self.read_checked_block(handle)?.iter();
        let mut tombstones = Vec::new();
        it.seek_to_first();
        while it.valid() {
            if key::kind_byte(it.key()) != RANGE_DELETION_KIND {
                return Err(Error::corruption(
                    &self.path,
                    format!(
                        "range-deletion block holds an entry of kind {}",
                        key::kind_byte(it.key())
                    ),
                ));
            }
            tombstones.push(RangeTombstone::new(
                key::user_key(it.key()),
                it.value(),
                key::sequence(it.key()),
            ));
            it.next();
        }
        self.corrupt_in(&it)?;
        if tombstones.len() as u64 != self.props.num_range_deletions {
            return Err(Error::corruption(
                &self.path,
                format!(
                    "range-deletion block holds {} tombstones, the properties say {}",
                    tombstones.len(),
                    self.props.num_range_deletions
                ),
            ));
        }
        Ok(FragmentedTombstones::new(tombstones))
    }

    /// The table's range tombstones, fragmented.
    pub(crate) fn range_tombstones(&self) -> &Arc<FragmentedTombstones> {
        &self.range_tombstones
    }

    fn read_filter(&self, handle: BlockHandle) -> Result<Arc<Vec<u8>>> {
        Ok(Arc::new(self.read_raw(handle, true)?))
    }

    pub(crate) fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// Opens the table at `path` (footer, index, properties) without a cache, for a look at
    /// what it holds.
    pub(crate) fn open_uncached(fs: &dyn FileSystem, path: &Path, number: u64) -> Result<Self> {
        let file = fs.open_random(path)?;
        Self::open(
            file,
            path,
            number,
            None,
            MetaBlocks::Held,
            Arc::new(Stats::default()),
        )
    }

    fn corrupt_in(&self, it: &BlockIter) -> Result<()> {
        match it.error_detail() {
            Some(d) => Err(Error::corruption(&self.path, format!("block: {d}"))),
            None => Ok(()),
        }
    }

    /// Looks `handle`'s block of `kind` up in the cache; on a miss reads it with `read` and, when
    /// `fill` says so, caches it.
    fn through_cache(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
        fill: bool,
        read: impl FnOnce() -> Result<CachedBlock>,
    ) -> Result<CachedBlock> {
        let key = (self.file_number, handle.offset);
        let Some(cache) = &self.cache else {
            return read();
        };
        if let Some(b) = cache.lookup(key) {
            self.stats.block_cache_lookup(kind, true);
            return Ok(b);
        }
        self.stats.block_cache_lookup(kind, false);
        let block = read()?;
        if fill {
            self.add_to_cache(cache, handle, kind, block.clone());
        }
        Ok(block)
    }

    /// Caches `handle`'s block: index and filter blocks at high priority, data blocks low.
    fn add_to_cache(
        &self,
        cache: &BlockCache,
        handle: BlockHandle,
        kind: BlockKind,
        block: CachedBlock,
    ) {
        let priority = match kind {
            BlockKind::Data => Priority::Low,
            BlockKind::Index | BlockKind::Filter => Priority::High,
        };
        cache.insert((self.file_number, handle.offset), block, priority);
        self.stats.block_cache_add.inc();
    }

    /// Reads a data block through the cache.
    pub(crate) fn data_block(
        &self,
        handle: BlockHandle,
        opts: BlockReadOptions,
    ) -> Result<Arc<Block>> {
        let read = || {
            let raw = self.read_raw(handle, opts.verify_checksums)?;
            Ok(CachedBlock::Block(Arc::new(Block::new(raw, &self.path)?)))
        };
        match self.through_cache(handle, BlockKind::Data, opts.fill_cache, read)? {
            CachedBlock::Block(b) => Ok(b),
            _ => Err(self.mistyped()),
        }
    }

    /// The index block, from the reader or the cache.
    fn index_block(&self) -> Result<Arc<Block>> {
        let handle = match &self.index {
            Meta::Held(b) => return Ok(b.clone()),
            Meta::Cached(h) => *h,
        };
        let read = || self.read_checked_block(handle).map(CachedBlock::Block);
        match self.through_cache(handle, BlockKind::Index, true, read)? {
            CachedBlock::Block(b) => Ok(b),
            _ => Err(self.mistyped()),
        }
    }

    /// The filter block, if the table has one.
    fn filter_block(&self) -> Result<FilterRef<'_>> {
        let handle = match &self.filter {
            None => return Ok(FilterRef::None),
            Some(Meta::Held(f)) => return Ok(FilterRef::Borrowed(f)),
            Some(Meta::Cached(h)) => *h,
        };
        let read = || self.read_filter(handle).map(CachedBlock::Filter);
        match self.through_cache(handle, BlockKind::Filter, true, read)? {
            CachedBlock::Filter(f) => Ok(FilterRef::Cached(f)),
            _ => Err(self.mistyped()),
        }
    }

    /// A cache entry of the wrong type under this table's key: two tables shared a file number.
    fn mistyped(&self) -> Error {
        Error::corruption(
            &self.path,
            "block cache holds a block of another type at this table's offset",
        )
    }

    fn decode_handle(&self, value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode(value, &mut 0).ok_or_else(|| {
            Error::corruption(&self.path, "index entry holds a damaged block handle")
        })
    }

    /// True when `filter` says `hash`'s key may be in the table.
    #[inline]
    fn check_filter(&self, filter: &FilterRef<'_>, hash: u64) -> bool {
        match filter.bytes() {
            None => true,
            Some(f) => {
                self.stats.bloom_checked.inc();
                let maybe = filter::may_contain(f, hash);
                if !maybe {
                    self.stats.bloom_useful.inc();
                }
                maybe
            }
        }
    }

    /// True when the filter says `hash`'s key may be in the table.
    pub(crate) fn may_contain(&self, hash: u64) -> Result<bool> {
        Ok(self.check_filter(&self.filter_block()?, hash))
    }

    /// The newest entry for the lookup key's user key at or below its sequence number. A range
    /// tombstone of this table covering the key hides every older entry: the answer is then
    /// `Deleted`, for this table and every older source.
    pub(crate) fn get(
        &self,
        lookup: &[u8],
        hash: u64,
        opts: BlockReadOptions,
    ) -> Result<Lookup<PinnableValue>> {
        let cover = self.covering_seq(lookup);
        let found = self.get_point(lookup, hash, opts, cover)?;
        Ok(self.settle(found, cover))
    }

    fn get_point(
        &self,
        lookup: &[u8],
        hash: u64,
        opts: BlockReadOptions,
        cover: u64,
    ) -> Result<Lookup<PinnableValue>> {
        if !self.may_contain(hash)? {
            return Ok(Lookup::NotFound);
        }
        let mut index = self.index_block()?.iter();
        index.seek(lookup);
        if !index.valid() {
            self.corrupt_in(&index)?;
            return Ok(Lookup::NotFound);
        }
        let handle = self.decode_handle(index.value())?;
        let block = self.data_block(handle, opts)?;
        let mut it = block.iter();
        it.seek(lookup);
        self.entry_at(&block, &it, lookup, cover)
    }

    /// The sequence number of the newest of this table's range tombstones that covers the
    /// lookup key's user key and is visible at its sequence number; 0 when none is.
    fn covering_seq(&self, lookup: &[u8]) -> u64 {
        if self.range_tombstones.is_empty() {
            return 0;
        }
        self.range_tombstones
            .max_covering_seq(key::user_key(lookup), key::sequence(lookup))
            .unwrap_or(0)
    }

    /// A key absent from this table but covered by one of its tombstones is deleted.
    fn settle(&self, found: Lookup<PinnableValue>, cover: u64) -> Lookup<PinnableValue> {
        match found {
            Lookup::NotFound if cover > 0 => {
                self.stats.range_del_hidden.inc();
                Lookup::Deleted
            }
            other => other,
        }
    }

    /// What `it`, positioned by a seek for `lookup` in `block`, says about `lookup`'s user key.
    fn entry_at(
        &self,
        block: &Arc<Block>,
        it: &BlockIter,
        lookup: &[u8],
        covered_below: u64,
    ) -> Result<Lookup<PinnableValue>> {
        if !it.valid() {
            self.corrupt_in(it)?;
            return Ok(Lookup::NotFound);
        }
        if key::user_key(it.key()) != key::user_key(lookup) {
            return Ok(Lookup::NotFound);
        }
        if key::sequence(it.key()) < covered_below {
            self.stats.range_del_hidden.inc();
            return Ok(Lookup::Deleted);
        }
        match ValueKind::from_u8(key::kind_byte(it.key())) {
            Some(kind @ (ValueKind::Put | ValueKind::BlobIndex)) => {
                let (start, len) = it.value_range();
                let value = PinnableValue::pinned(block.clone(), start, len);
                Ok(if kind == ValueKind::Put {
                    Lookup::Found(value)
                } else {
                    Lookup::Indexed(value)
                })
            }
            Some(ValueKind::Delete) => Ok(Lookup::Deleted),
            None => Err(Error::corruption(
                &self.path,
                format!("unknown entry kind {}", key::kind_byte(it.key())),
            )),
        }
    }

    /// Looks up the keys `group` names (ascending) in one pass, in phases so that each issues
    /// the memory loads of every key before the next waits on any of them: the filter for the
    /// whole group after its cache lines are prefetched; then one index seek per data block
    /// rather than per key, each block taken from the cache once for all the keys it holds (their
    /// values share it) with its restart points prefetched; then each key's restart interval,
    /// prefetched; then the scans. Outcomes go to `keys`.
    pub(crate) fn multi_get(
        &self,
        keys: &mut [PendingKey],
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

    fn multi_get_points(&self, keys: &mut [PendingKey], group: &[usize], opts: BlockReadOptions) {
        let fail_all = |keys: &mut [PendingKey], e: Error| {
            for &i in group {
                keys[i].error = Some(e.duplicate());
            }
        };
        let filter = match self.filter_block() {
            Ok(f) => f,
            Err(e) => return fail_all(keys, e),
        };
        if let Some(f) = filter.bytes() {
            for &i in group {
                filter::prefetch(f, keys[i].hash);
            }
        }
        // (key, its block in `blocks`) for the keys the filter lets through.
        let mut located: Vec<(usize, usize)> = Vec::with_capacity(group.len());
        let mut blocks: Vec<Arc<Block>> = Vec::new();
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
            if !blocks.is_empty() && key::compare_internal(&p.lookup, &bound).is_le() {
                located.push((i, blocks.len() - 1));
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
                None => match self.index_block() {
                    Ok(b) => {
                        let it = index.insert(b.iter());
                        it.seek(&p.lookup);
                        it
                    }
                    Err(e) => return fail_all(keys, e),
                },
            };
            if !index.valid() {
                if let Err(e) = self.corrupt_in(index) {
                    p.error = Some(e);
                }
                // Past the table's last block: so are all the later keys.
                break;
            }
            match self
                .decode_handle(index.value())
                .and_then(|h| self.data_block(h, opts))
            {
                Ok(block) => {
                    block.prefetch_restarts();
                    blocks.push(block);
                    bound.clear();
                    bound.extend_from_slice(index.key());
                    located.push((i, blocks.len() - 1));
                }
                Err(e) => p.error = Some(e),
            }
        }
        let starts: Vec<Option<u32>> = located
            .iter()
            .map(|&(i, b)| {
                let start = blocks[b].restart_before(&keys[i].lookup);
                if let Some(r) = start {
                    blocks[b].prefetch_interval(r);
                }
                start
            })
            .collect();
        // One iterator per block, reused by its keys: a key after the previous one in the same
        // interval continues the scan from where that one stopped.
        let mut it: Option<(usize, BlockIter)> = None;
        for (&(i, b), start) in located.iter().zip(starts) {
            let p = &mut keys[i];
            let block = &blocks[b];
            let Some(start) = start else {
                p.error = Some(Error::corruption(
                    &self.path,
                    "block: damaged restart entry",
                ));
                continue;
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

    pub(crate) fn iter(self: &Arc<Self>, opts: BlockReadOptions) -> Result<TableIter> {
        Ok(TableIter {
            table: self.clone(),
            index: self.index_block()?.iter(),
            data: None,
            data_handle: None,
            opts,
            error: None,
        })
    }

    /// Reads and checks every block; used by paranoid open and `strata verify`.
    pub(crate) fn verify(self: &Arc<Self>) -> Result<u64> {
        let mut it = self.iter(BlockReadOptions {
            fill_cache: false,
            verify_checksums: true,
        })?;
        let mut n = 0;
        let mut prev: Vec<u8> = Vec::new();
        it.seek_to_first();
        while it.valid() {
            if !prev.is_empty()
                && key::compare_internal(&prev, it.key()) != std::cmp::Ordering::Less
            {
                return Err(Error::corruption(&self.path, "keys out of order"));
            }
            prev.clear();
            prev.extend_from_slice(it.key());
            n += 1;
            it.next();
        }
        it.status()?;
        if n != self.props.num_entries {
            return Err(Error::corruption(
                &self.path,
                format!(
                    "holds {n} entries, its properties say {}",
                    self.props.num_entries
                ),
            ));
        }
        Ok(n)
    }
}

/// Two-level iteration: the index picks the data block, the block iterator walks it.
pub(crate) struct TableIter {
    table: Arc<TableReader>,
    index: BlockIter,
    data: Option<BlockIter>,
    data_handle: Option<BlockHandle>,
    opts: BlockReadOptions,
    error: Option<Error>,
}

impl TableIter {
    fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.data = None;
        self.data_handle = None;
    }

    fn load_data_block(&mut self) {
        if !self.index.valid() {
            if let Err(e) = self.table.corrupt_in(&self.index) {
                self.fail(e);
            }
            self.data = None;
            self.data_handle = None;
            return;
        }
        let handle = match self.table.decode_handle(self.index.value()) {
            Ok(h) => h,
            Err(e) => return self.fail(e),
        };
        if self.data_handle == Some(handle) && self.data.is_some() {
            return;
        }
        match self.table.data_block(handle, self.opts) {
            Ok(b) => {
                self.data = Some(b.iter());
                self.data_handle = Some(handle);
            }
            Err(e) => self.fail(e),
        }
    }

    fn check_data_error(&mut self) -> bool {
        if let Some(d) = &self.data
            && let Err(e) = self.table.corrupt_in(d)
        {
            self.fail(e);
            return true;
        }
        false
    }

    /// Moves past data blocks with nothing left in the direction of travel.
    fn skip_empty_blocks(&mut self, forward: bool) {
        while self.error.is_none() && !self.data.as_ref().is_some_and(|d| d.valid()) {
            if self.check_data_error() || !self.index.valid() {
                self.data = None;
                return;
            }
            if forward {
                self.index.next();
            } else {
                self.index.prev();
            }
            self.load_data_block();
            if let Some(d) = self.data.as_mut() {
                if forward {
                    d.seek_to_first();
                } else {
                    d.seek_to_last();
                }
            }
        }
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        self.index.seek_to_first();
        self.load_data_block();
        if let Some(d) = self.data.as_mut() {
            d.seek_to_first();
        }
        self.skip_empty_blocks(true);
    }

    fn seek_to_last(&mut self) {
        self.index.seek_to_last();
        self.load_data_block();
        if let Some(d) = self.data.as_mut() {
            d.seek_to_last();
        }
        self.skip_empty_blocks(false);
    }

    fn seek(&mut self, target: &[u8]) {
        self.index.seek(target);
        self.load_data_block();
        if let Some(d) = self.data.as_mut() {
            d.seek(target);
        }
        self.skip_empty_blocks(true);
    }

    fn next(&mut self) {
        if let Some(d) = self.data.as_mut() {
            d.next();
        }
        self.skip_empty_blocks(true);
    }

    fn prev(&mut self) {
        if let Some(d) = self.data.as_mut() {
            d.prev();
        }
        self.skip_empty_blocks(false);
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}
