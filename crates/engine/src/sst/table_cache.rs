//! Open table readers, bounded by `max_open_files`, sharded by file number.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::reader::{MetaBlocks, TableReader};
use crate::cache::BlockCache;
use crate::error::Result;
use crate::filename::table_file;
use crate::fs::FileSystem;
use crate::stats::Stats;

const SHARDS: usize = 16;

type Shard = HashMap<u64, (Arc<TableReader>, u64)>;

pub(crate) struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    clock: AtomicU64,
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
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: (max_open_files / SHARDS).max(1),
            clock: AtomicU64::new(0),
            block_cache,
            meta_blocks,
            stats,
        }
    }

    /// The reader for table `number`, at `level` of its version, opening it if needed.
    pub(crate) fn get(&self, number: u64, level: usize) -> Result<Arc<TableReader>> {
        let shard = &self.shards[number as usize % SHARDS];
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some((reader, last_use)) = shard.lock().get_mut(&number) {
            *last_use = tick;
            return Ok(reader.clone());
        }
        // Open outside the lock: opening reads the footer, index and filter from disk.
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
        let mut map = shard.lock();
        if map.len() >= self.per_shard
            && let Some(oldest) = map.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| *k)
        {
            map.remove(&oldest);
        }
        Ok(map.entry(number).or_insert((reader, tick)).0.clone())
    }

    /// Forgets a table whose file is being deleted.
    pub(crate) fn evict(&self, number: u64) {
        self.shards[number as usize % SHARDS].lock().remove(&number);
    }
}
