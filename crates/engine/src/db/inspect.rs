//! What the console and the REST API show beyond properties: a column family's range tombstones,
//! paged, and an estimate of the keys and bytes in a key range (a delete-range dry run).

use std::cmp::Reverse;

use serde::Serialize;

use super::DbInner;
use super::column_family::ColumnFamilyData;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key;
use crate::memtable::MemTable;
use crate::range_del::RangeTombstone;

/// Where a range tombstone is kept.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[non_exhaustive]
pub enum TombstoneLocation {
    /// In a memtable, not yet flushed.
    Memtable,
    /// In table `number` at `level`. A compaction may split one tombstone across several tables,
    /// each keeping the part within its key range.
    Table { number: u64, level: usize },
}

/// A range tombstone as written: it deletes the keys in `[start, end)` written before
/// `sequence`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RangeTombstoneInfo {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub sequence: u64,
    pub location: TombstoneLocation,
}

impl RangeTombstoneInfo {
    /// Pages are ordered by start, end, newest first, then location.
    fn order(&self) -> (&[u8], &[u8], Reverse<u64>, TombstoneLocation) {
        (
            &self.start,
            &self.end,
            Reverse(self.sequence),
            self.location,
        )
    }
}

/// One page of a column family's range tombstones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RangeTombstonePage {
    pub tombstones: Vec<RangeTombstoneInfo>,
    /// More follow: ask again with the last one as `after`.
    pub more: bool,
}

/// Estimated keys and bytes in a key range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RangeEstimate {
    /// Entries in the range: exact in memtables; in tables, each table's entries scaled by the
    /// share of its data blocks the range spans. Overwritten and deleted keys count until
    /// compaction drops them, as in RocksDB's estimates.
    pub keys: u64,
    /// Bytes of keys and values in memtables, and of table data the range spans.
    pub bytes: u64,
}

impl DbInner {
    pub(super) fn range_tombstones(
        &self,
        cf: &ColumnFamilyData,
        after: Option<&RangeTombstoneInfo>,
        limit: usize,
    ) -> Result<RangeTombstonePage> {
        let view = cf.current_view();
        let mut all = Vec::new();
        let info = |t: RangeTombstone, location| RangeTombstoneInfo {
            start: t.start,
            end: t.end,
            sequence: t.seq,
            location,
        };
        for mem in std::iter::once(&view.mem).chain(&view.imm) {
            for t in mem.range_tombstones_as_written() {
                all.push(info(t, TombstoneLocation::Memtable));
            }
        }
        for (level, files) in view.version.levels.iter().enumerate() {
            for f in files.iter().filter(|f| f.num_range_deletions > 0) {
                let table = self.tables.get(f.number, level)?;
                for t in table.range_tombstones_as_written()? {
                    let location = TombstoneLocation::Table {
                        number: f.number,
                        level,
                    };
                    all.push(info(t, location));
                }
            }
        }
        all.sort_by(|a, b| a.order().cmp(&b.order()));
        let from = match after {
            Some(a) => all.partition_point(|t| t.order() <= a.order()),
            None => 0,
        };
        let mut tombstones: Vec<_> = all.drain(from..).collect();
        let more = tombstones.len() > limit;
        tombstones.truncate(limit);
        Ok(RangeTombstonePage { tombstones, more })
    }

    pub(super) fn estimate_range(
        &self,
        cf: &ColumnFamilyData,
        start: &[u8],
        end: &[u8],
    ) -> Result<RangeEstimate> {
        let mut estimate = RangeEstimate::default();
        if start >= end {
            return Ok(estimate);
        }
        let view = cf.current_view();
        for mem in std::iter::once(&view.mem).chain(&view.imm) {
            count_in_memtable(mem, start, end, &mut estimate);
        }
        for (level, files) in view.version.levels.iter().enumerate() {
            for f in files {
                let (lo, hi) = (key::user_key(&f.smallest), key::user_key(&f.largest));
                if hi < start || lo >= end {
                    continue;
                }
                if lo >= start && hi < end {
                    estimate.keys += f.num_entries;
                    estimate.bytes += f.file_size;
                    continue;
                }
                let table = self.tables.get(f.number, level)?;
                let data = table.properties().data_size.max(1);
                let from = table.approximate_offset_of(start)?;
                let to = table.approximate_offset_of(end)?.max(from);
                // The block holding the range's first keys counts whole: a range inside one
                // block still holds keys.
                let spanned = if to == from {
                    (data / table.properties().num_data_blocks.max(1)).min(data)
                } else {
                    to - from
                };
                estimate.bytes += spanned;
                estimate.keys += (f.num_entries as u128 * spanned as u128 / data as u128) as u64;
            }
        }
        Ok(estimate)
    }
}

fn count_in_memtable(
    mem: &std::sync::Arc<MemTable>,
    start: &[u8],
    end: &[u8],
    into: &mut RangeEstimate,
) {
    let mut it = mem.iter();
    it.seek(&key::lookup_key(start, key::MAX_SEQUENCE));
    while it.valid() && key::user_key(it.key()) < end {
        into.keys += 1;
        into.bytes += (key::user_key(it.key()).len() + it.value().len()) as u64;
        it.next();
    }
}
