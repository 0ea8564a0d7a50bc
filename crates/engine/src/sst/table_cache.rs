//! Open table readers, bounded by `max_open_files` (`OpenFiles`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use super::reader::{MetaBlocks, TableReader};
use crate::cache::BlockCache;
use crate::error::Result;
use crate::filename::table_file;
use crate::fs::FileSystem;
use crate::open_files::OpenFiles;
use crate::stats::Stats;

pub(crate) struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    readers: OpenFiles<TableReader>,
    block_cache: Option<Arc<BlockCache>>,
    meta_blocks: MetaPolicy,
    stats: Arc<Stats>,
}

/// Where readers keep index and filter blocks, from the options.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MetaPolicy {
    /// `cache_index_and_filter_blocks`.
    pub cache: bool,
    /// `pin_l0_filter_and_index_blocks_in_cache`.
    pub pin_l0: bool,
}

impl MetaPolicy {
    /// The home of a table's index and filter, decided when its reader opens: a table opened at
    /// L0 stays pinned after it moves down, until its reader is closed.
    fn for_level(self, level: usize) -> MetaBlocks {
        match (self.cache, self.pin_l0 && level == 0) {
            (false, _) => MetaBlocks::Held,
            (true, true) => MetaBlocks::Pinned,
            (true, false) => MetaBlocks::Cached,
        }
    }
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("dir", &self.dir)
            .finish()
    }
}

impl TableCache {
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn FileSystem>,
        max_open_files: usize,
        block_cache: Option<Arc<BlockCache>>,
        meta_blocks: MetaPolicy,
        stats: Arc<Stats>,
    ) -> Self {
        TableCache {
            dir,
            fs,
            readers: OpenFiles::new(max_open_files),
            block_cache,
            meta_blocks,
            stats,
        }
    }

    /// The reader for table `number`, at `level` of its version, opening it if needed.
    pub(crate) fn get(&self, number: u64, level: usize) -> Result<Arc<TableReader>> {
        if let Some(reader) = self.readers.get(number) {
            return Ok(reader);
        }
        let reader = self.open(number, level)?;
        Ok(self.readers.insert(number, reader))
    }

    /// The reader for table `number` if it is open: nothing is read.
    pub(crate) fn get_open(&self, number: u64) -> Option<Arc<TableReader>> {
        self.readers.get(number)
    }

    /// Holds the readers of `tables` (number to level) open until `release_except`
    /// (`OpenFiles::hold`). The level places a table's index and filter, as `get` would: a
    /// table held from L0 keeps them pinned, and one held since it moved below L0 is opened
    /// again there, so that what a replica pins stays bounded by its L0 (a writer's reader
    /// lets go as its cache of open tables turns over; a held one never would).
    pub(crate) fn hold(&self, tables: &std::collections::BTreeMap<u64, usize>) -> Result<()> {
        let level = |n: u64| tables.get(&n).copied().unwrap_or(1);
        self.readers.hold(
            tables.keys().copied(),
            |n| self.open(n, level(n)),
            |n, reader| reader.pins_meta() && level(n) > 0,
        )
    }

    /// How many readers `hold` keeps open.
    pub(crate) fn held_count(&self) -> usize {
        self.readers.held_count()
    }

    /// Lets go of every held reader but those of `numbers`.
    pub(crate) fn release_except(&self, numbers: &BTreeSet<u64>) {
        self.readers.release_except(numbers);
    }

    /// A reader of table `number`, opened now (outside any lock: opening reads the footer,
    /// index and filter from disk).
    fn open(&self, number: u64, level: usize) -> Result<Arc<TableReader>> {
        let path = table_file(&self.dir, number);
        let file = self.fs.open_random(&path)?;
        let reader = Arc::new(TableReader::open(
            file,
            &path,
            number,
            self.block_cache.clone(),
            self.meta_blocks.for_level(level),
            self.stats.clone(),
        )?);
        self.stats.table_opens.inc();
        Ok(reader)
    }

    /// The reader of table `number` at `level` for a read with `opts`: a cache-only read takes
    /// only a table already open (opening one reads its file).
    pub(crate) fn get_for(
        &self,
        number: u64,
        level: usize,
        opts: super::BlockReadOptions,
    ) -> Result<Arc<TableReader>> {
        if !opts.cache_only {
            return self.get(number, level);
        }
        self.readers.get(number).ok_or_else(|| {
            super::reader::not_in_memory("the open table", &table_file(&self.dir, number))
        })
    }

    /// Forgets a table whose file is being deleted.
    pub(crate) fn evict(&self, number: u64) {
        self.readers.remove(number);
    }
}
