//! What an operator calls on a store beside reads and writes: flushes, manual compactions,
//! background work run by the embedder, properties, range introspection and statistics.

use std::sync::Arc;

use super::{
    ColumnFamily, ColumnFamilyProperties, Db, Properties, RangeEstimate, RangeTombstoneInfo,
    RangeTombstonePage,
};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::stats::Statistics;

impl Db {
    /// Flushes the default column family's memtable to a table and waits for it (and every older
    /// memtable) to be written.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.flush(&self.inner.default_cf.data)
    }

    /// Flushes column family `cf`.
    pub fn flush_cf(&self, cf: &ColumnFamily) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.flush(cf.resolve(self.inner.id)?)
    }

    /// Compacts the default column family's tables holding keys in `[start, end]` (`None`:
    /// open-ended) down to the deepest level with data, dropping overwritten versions and
    /// deletions no snapshot needs.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.check_writable()?;
        self.inner
            .compact_range(&self.inner.default_cf.data, start, end)
    }

    /// [`Db::compact_range`] on column family `cf`.
    pub fn compact_range_cf(
        &self,
        cf: &ColumnFamily,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        self.inner.check_writable()?;
        self.inner
            .compact_range(cf.resolve(self.inner.id)?, start, end)
    }

    /// Runs pending background work (flushes, then compactions) now. With [`crate::Executor::Inline`]
    /// (WASI) the embedder calls this between requests; returns true when it did something.
    pub fn maintenance(&self) -> Result<bool> {
        self.inner.check_writable()?;
        self.inner.maintenance()
    }

    /// Runs one job of pending background work now (one memtable's flush, else one compaction),
    /// so an embedder with [`crate::Executor::Inline`] can bound each call; true when more may
    /// be due.
    pub fn maintenance_step(&self) -> Result<bool> {
        self.inner.check_writable()?;
        self.inner.maintenance_step()
    }

    /// The store's shape now: WAL, cache, sequence numbers, and per column family its memtables
    /// and files and bytes per level.
    pub fn properties(&self) -> Properties {
        self.inner.properties()
    }

    /// One column family's shape.
    pub fn properties_cf(&self, cf: &ColumnFamily) -> Result<ColumnFamilyProperties> {
        let data = cf.resolve(self.inner.id)?;
        self.inner.cf_properties(data).ok_or_else(|| {
            Error::InvalidArgument(format!("column family {} was dropped", data.name))
        })
    }

    /// Up to `limit` of `cf`'s range tombstones as written, wherever they are kept (memtables,
    /// tables), ordered by start key, end key, newest first, then location; `after` is the
    /// last one of the previous page. For the console and the REST API.
    pub fn range_tombstones_cf(
        &self,
        cf: &ColumnFamily,
        after: Option<&RangeTombstoneInfo>,
        limit: usize,
    ) -> Result<RangeTombstonePage> {
        self.inner.check_open()?;
        let data = cf.resolve(self.inner.id)?;
        self.inner.range_tombstones(data, after, limit)
    }

    /// Estimated keys and bytes in `[start, end)` of `cf`, without reading the data: what a
    /// `delete_range(start, end)` would cover. Memtables are counted exactly, tables through
    /// their index blocks.
    pub fn estimate_range_cf(
        &self,
        cf: &ColumnFamily,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<RangeEstimate> {
        self.inner.check_open()?;
        let data = cf.resolve(self.inner.id)?;
        self.inner
            .estimate_range(data, start.as_ref(), end.as_ref())
    }

    /// The filesystem the store's files are on (for checks that read them).
    pub(crate) fn filesystem(&self) -> Arc<dyn FileSystem> {
        self.inner.fs.clone()
    }

    /// Counters since open.
    pub fn statistics(&self) -> Statistics {
        self.inner.stats.snapshot()
    }

    /// The storage backend's own counters, when it keeps any (a store in a bucket: requests,
    /// bytes moved, its cache, the writer epoch); `None` on the local disk.
    pub fn storage_stats(&self) -> Option<crate::fs::StorageStats> {
        self.inner.fs.storage_stats()
    }
}
