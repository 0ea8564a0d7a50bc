//! Reads a table: the properties are loaded at open and kept with the reader; data blocks go
//! through the block cache, and index and filter blocks too when `cache_index_and_filter_blocks`
//! asks for it (held by the reader otherwise).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::builder::{FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME, RANGE_DEL_BLOCK_NAME};
use super::format::{
    BlockChecksum, BlockHandle, FOOTER_SIZE, Footer, decode_block, read_block, stored_len,
};
use super::properties::TableProperties;
use crate::block::{Block, BlockIter};
use crate::bloom;
use crate::cache::{BlockCache, CachedBlock, Priority};
use crate::coding::get_length_prefixed;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RandomAccessFile};
use crate::iter::InternalIterator;
use crate::key::Lookup;
use crate::key::{self, ValueKind};
use crate::range_del::{FragmentedTombstones, RANGE_DELETION_KIND, RangeTombstone};
use crate::stats::{BlockKind, Stats};
use crate::value::PinnableValue;

/// How a read treats the cache and checksums.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockReadOptions {
    pub fill_cache: bool,
    pub verify_checksums: bool,
    /// Only blocks in memory (held, or in the block cache): a block that would be read from the
    /// file fails the read with `Error::Incomplete` instead (`ReadOptions::cache_only`).
    pub cache_only: bool,
}

impl BlockReadOptions {
    /// A pass over whole tables (compaction, verification, repair): blocks read once are not
    /// worth caching; checksums verified.
    pub(crate) const ONE_PASS: BlockReadOptions = BlockReadOptions {
        fill_cache: false,
        verify_checksums: true,
        cache_only: false,
    };
}

/// The error of a cache-only read that would have to read `what` from `path`.
pub(crate) fn not_in_memory(what: &str, path: &Path) -> Error {
    Error::Incomplete(format!("{what} of {} is not in memory", path.display()))
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
pub(crate) enum FilterRef<'a> {
    None,
    Borrowed(&'a [u8]),
    Cached(Arc<Vec<u8>>),
}

impl FilterRef<'_> {
    pub(super) fn bytes(&self) -> Option<&[u8]> {
        match self {
            FilterRef::None => None,
            FilterRef::Borrowed(f) => Some(f),
            FilterRef::Cached(f) => Some(f),
        }
    }
}

pub(crate) struct TableReader {
    file: Arc<dyn RandomAccessFile>,
    pub(super) path: PathBuf,
    file_number: u64,
    /// How this table's blocks are checksummed (its footer's format version).
    checksum: BlockChecksum,
    index: Meta<Arc<Block>>,
    filter: Option<Meta<Arc<Vec<u8>>>>,
    props: TableProperties,
    /// The range-deletion block, fragmented once at open.
    pub(super) range_tombstones: Arc<FragmentedTombstones>,
    range_del_block: Option<BlockHandle>,
    cache: Option<Arc<BlockCache>>,
    /// Whether its index and filter are pinned in the cache (`MetaBlocks::Pinned`).
    pins_meta: bool,
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
        let metaindex = read_block(file.as_ref(), path, footer.metaindex, footer.checksum, true)?;
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
            Some(h) => {
                TableProperties::decode(&read_block(file.as_ref(), path, h, footer.checksum, true)?)
                    .ok_or_else(|| Error::corruption(path, "properties block is damaged"))?
            }
            None => return Err(Error::corruption(path, "table has no properties block")),
        };
        let mut reader = TableReader {
            file,
            path: path.to_path_buf(),
            file_number,
            checksum: footer.checksum,
            index: Meta::Cached(footer.index),
            filter: filter_handle.map(Meta::Cached),
            props,
            range_tombstones: Arc::default(),
            range_del_block: None,
            stats,
            cache: None,
            pins_meta: false,
        };
        if let Some(h) = range_del_handle {
            reader.range_tombstones =
                Arc::new(FragmentedTombstones::new(reader.read_range_tombstones(h)?));
            reader.range_del_block = Some(h);
        }
        // Index and filter are read (and checked) at open whatever their home, so that a damaged
        // one fails the open rather than a later read, and the cache starts warm.
        let index = reader.read_index_block(footer.index)?;
        let filter = filter_handle.map(|h| reader.read_filter(h)).transpose()?;
        let meta_blocks = if cache.is_none() {
            MetaBlocks::Held
        } else {
            meta_blocks
        };
        reader.cache = cache;
        reader.pins_meta = meta_blocks == MetaBlocks::Pinned;
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

    /// Whether this reader keeps its index and filter pinned in the cache (opened at L0 with
    /// `pin_l0_filter_and_index_blocks_in_cache`).
    pub(crate) fn pins_meta(&self) -> bool {
        self.pins_meta
    }

    /// Reads `handle`'s block from the file, counting the bytes.
    fn read_raw(&self, handle: BlockHandle, verify_checksum: bool) -> Result<Vec<u8>> {
        let raw = read_block(
            self.file.as_ref(),
            &self.path,
            handle,
            self.checksum,
            verify_checksum,
        )?;
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

    /// Reads the index block, checksum verified, with its probe words.
    fn read_index_block(&self, handle: BlockHandle) -> Result<Arc<Block>> {
        Ok(Arc::new(Block::new_index(
            self.read_raw(handle, true)?,
            &self.path,
        )?))
    }

    /// Reads and fragments the range-deletion block.
    fn read_range_tombstones(&self, handle: BlockHandle) -> Result<Vec<RangeTombstone>> {
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
        Ok(tombstones)
    }

    /// Where the data of keys from `user_key` on starts, in bytes from the file's start: the
    /// offset of the data block the index points `user_key` to, or the end of the data blocks
    /// when every key is smaller. Range estimates subtract two of these.
    pub(crate) fn approximate_offset_of(&self, user_key: &[u8]) -> Result<u64> {
        let mut index = self.index_block(false)?.iter();
        index.seek(&key::lookup_key(user_key, key::MAX_SEQUENCE));
        self.corrupt_in(&index)?;
        if !index.valid() {
            return Ok(self.props.data_size);
        }
        Ok(self.decode_handle(index.value())?.offset)
    }

    /// The range tombstones as written (unfragmented), read again from the table: for listings.
    pub(crate) fn range_tombstones_as_written(&self) -> Result<Vec<RangeTombstone>> {
        match self.range_del_block {
            Some(h) => self.read_range_tombstones(h),
            None => Ok(Vec::new()),
        }
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

    pub(super) fn corrupt_in(&self, it: &BlockIter) -> Result<()> {
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
        cache_only: bool,
        read: impl FnOnce() -> Result<CachedBlock>,
    ) -> Result<CachedBlock> {
        let key = (self.file_number, handle.offset);
        let Some(cache) = &self.cache else {
            if cache_only {
                return Err(not_in_memory("a block", &self.path));
            }
            return read();
        };
        if let Some(b) = cache.lookup(key) {
            self.stats.block_cache_lookup(kind, true);
            return Ok(b);
        }
        if cache_only {
            // Not counted: the read that follows counts the miss.
            return Err(not_in_memory("a block", &self.path));
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
        if let Some(cached) = self.cached_data_block(handle, opts.cache_only) {
            return cached;
        }
        if opts.cache_only {
            return Err(not_in_memory("a data block", &self.path));
        }
        let stored = stored_len(self.file.as_ref(), &self.path, handle)
            .and_then(|len| self.file.read_vec_at(len, handle.offset));
        self.data_block_read(handle, stored, opts)
    }

    /// The data block at `handle` if the cache holds it; `None` when it must be read (the miss
    /// is counted, unless the read is `cache_only`: the read that follows it counts it).
    pub(super) fn cached_data_block(
        &self,
        handle: BlockHandle,
        cache_only: bool,
    ) -> Option<Result<Arc<Block>>> {
        let cache = self.cache.as_ref()?;
        let found = cache.lookup((self.file_number, handle.offset));
        if found.is_some() || !cache_only {
            self.stats
                .block_cache_lookup(BlockKind::Data, found.is_some());
        }
        match found? {
            CachedBlock::Block(b) => Some(Ok(b)),
            _ => Some(Err(self.mistyped())),
        }
    }

    /// The data block at `handle` from `stored`, the bytes read for it (`stored_len` of them),
    /// checked, decompressed and, when `opts` says so, cached.
    pub(super) fn data_block_read(
        &self,
        handle: BlockHandle,
        stored: Result<Vec<u8>>,
        opts: BlockReadOptions,
    ) -> Result<Arc<Block>> {
        let stored = stored?;
        self.stats.bytes_read_from_disk.add(handle.size);
        let raw = decode_block(
            stored,
            &self.path,
            handle,
            self.checksum,
            opts.verify_checksums,
        )?;
        let block = Arc::new(Block::new(raw, &self.path)?);
        if opts.fill_cache
            && let Some(cache) = &self.cache
        {
            self.add_to_cache(
                cache,
                handle,
                BlockKind::Data,
                CachedBlock::Block(block.clone()),
            );
        }
        Ok(block)
    }

    /// The file, for reads batched across tables.
    pub(super) fn file(&self) -> &dyn RandomAccessFile {
        self.file.as_ref()
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The index block, from the reader or the cache (only those, when `cache_only`).
    pub(crate) fn index_block(&self, cache_only: bool) -> Result<Arc<Block>> {
        let handle = match &self.index {
            Meta::Held(b) => return Ok(b.clone()),
            Meta::Cached(h) => *h,
        };
        let read = || self.read_index_block(handle).map(CachedBlock::Block);
        match self.through_cache(handle, BlockKind::Index, true, cache_only, read)? {
            CachedBlock::Block(b) => Ok(b),
            _ => Err(self.mistyped()),
        }
    }

    /// The filter block, if the table has one (from memory only, when `cache_only`).
    pub(super) fn filter_block(&self, cache_only: bool) -> Result<FilterRef<'_>> {
        let handle = match &self.filter {
            None => return Ok(FilterRef::None),
            Some(Meta::Held(f)) => return Ok(FilterRef::Borrowed(f)),
            Some(Meta::Cached(h)) => *h,
        };
        let read = || self.read_filter(handle).map(CachedBlock::Filter);
        match self.through_cache(handle, BlockKind::Filter, true, cache_only, read)? {
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

    pub(super) fn decode_handle(&self, value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode(value, &mut 0).ok_or_else(|| {
            Error::corruption(&self.path, "index entry holds a damaged block handle")
        })
    }

    /// True when `filter` says `hash`'s key may be in the table.
    #[inline]
    pub(super) fn check_filter(&self, filter: &FilterRef<'_>, hash: u64) -> bool {
        match filter.bytes() {
            None => true,
            Some(f) => {
                self.stats.bloom_checked.inc();
                let maybe = bloom::may_contain(f, hash);
                if !maybe {
                    self.stats.bloom_useful.inc();
                }
                maybe
            }
        }
    }

    /// True when the filter says `hash`'s key may be in the table.
    pub(crate) fn may_contain(&self, hash: u64, cache_only: bool) -> Result<bool> {
        Ok(self.check_filter(&self.filter_block(cache_only)?, hash))
    }

    /// Starts loading the cache line of this table's filter that a lookup of the key with
    /// `hash` checks, when the reader holds its filter (a filter in the block cache would cost
    /// a cache lookup, perhaps a read, for a hint).
    pub(crate) fn prefetch_held_filter(&self, hash: u64) {
        if let Some(Meta::Held(f)) = &self.filter {
            bloom::prefetch(f, hash);
        }
    }

    /// The filter block, after starting to load its cache line for each of `hashes`, so that
    /// checking them later (`filter_group`) does not wait.
    pub(crate) fn prefetch_filter(
        &self,
        hashes: impl Iterator<Item = u64>,
        cache_only: bool,
    ) -> Result<FilterRef<'_>> {
        let filter = self.filter_block(cache_only)?;
        if let Some(f) = filter.bytes() {
            for hash in hashes {
                bloom::prefetch(f, hash);
            }
        }
        Ok(filter)
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
        if !self.may_contain(hash, opts.cache_only)? {
            return Ok(Lookup::NotFound);
        }
        let mut index = self.index_block(opts.cache_only)?.iter();
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
    pub(super) fn covering_seq(&self, lookup: &[u8]) -> u64 {
        if self.range_tombstones.is_empty() {
            return 0;
        }
        self.range_tombstones
            .max_covering_seq(key::user_key(lookup), key::sequence(lookup))
            .unwrap_or(0)
    }

    /// A key absent from this table but covered by one of its tombstones is deleted.
    pub(super) fn settle(&self, found: Lookup<PinnableValue>, cover: u64) -> Lookup<PinnableValue> {
        match found {
            Lookup::NotFound if cover > 0 => {
                self.stats.range_del_hidden.inc();
                Lookup::Deleted
            }
            other => other,
        }
    }

    /// What `it`, positioned by a seek for `lookup` in `block`, says about `lookup`'s user key.
    pub(super) fn entry_at(
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

    /// Reads and checks every block; used by paranoid open and `strata verify`.
    pub(crate) fn verify(self: &Arc<Self>) -> Result<u64> {
        self.verify_each(|_, _| {})
    }

    /// `verify`, handing each entry (internal key, value) to `f` as it is read.
    pub(crate) fn verify_each(self: &Arc<Self>, mut f: impl FnMut(&[u8], &[u8])) -> Result<u64> {
        let mut it = self.iter(BlockReadOptions::ONE_PASS)?;
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
            f(it.key(), it.value());
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
