//! Writes a table: `data blocks | filter | range deletions | properties | metaindex | index |
//! footer`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::format::{BLOCK_TRAILER, BlockChecksum, BlockHandle, Footer, frame_block};
use super::properties::{BlobReference, TableProperties};
use crate::blob::BlobIndex;
use crate::block::BlockBuilder;
use crate::bloom::FilterBuilder;
use crate::coding::put_length_prefixed;
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{self, KIND_FOR_SEEK, MAX_SEQUENCE, ValueKind, compare_internal};
use crate::options::Compression;
use crate::range_del::{RANGE_DELETION_KIND, RangeTombstone};

pub(crate) const FILTER_BLOCK_NAME: &str = "filter.strata.bloom";
pub(crate) const PROPERTIES_BLOCK_NAME: &str = "strata.properties";
pub(crate) const RANGE_DEL_BLOCK_NAME: &str = "strata.range_del";

/// Settings a table is built with.
#[derive(Debug, Clone)]
pub(crate) struct TableOptions {
    pub block_size: usize,
    pub restart_interval: usize,
    pub compression: Compression,
    pub zstd_level: i32,
    pub bloom_bits_per_key: u32,
    /// Recorded in the table's properties, so `repair` can return a table no MANIFEST names to
    /// its column family.
    pub column_family: u32,
}

impl TableOptions {
    pub(crate) fn from_options(o: &crate::ColumnFamilyOptions, column_family: u32) -> Self {
        TableOptions {
            column_family,
            block_size: o.block_size,
            restart_interval: o.block_restart_interval,
            compression: o.compression,
            zstd_level: o.zstd_level,
            bloom_bits_per_key: o.bloom_bits_per_key,
        }
    }
}

pub(crate) struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    opts: TableOptions,
    checksum: BlockChecksum,
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<FilterBuilder>,
    props: TableProperties,
    /// Handle of the last data block, waiting for the next key to pick its index separator.
    pending_index: Option<BlockHandle>,
    framed: Vec<u8>,
    range_tombstones: Vec<RangeTombstone>,
    /// Per blob file, the entries whose value lives there.
    blob_references: BTreeMap<u64, u64>,
}

impl TableBuilder {
    pub(crate) fn new(file: Box<dyn WritableFile>, path: &Path, opts: TableOptions) -> Self {
        let filter =
            (opts.bloom_bits_per_key > 0).then(|| FilterBuilder::new(opts.bloom_bits_per_key));
        TableBuilder {
            file,
            path: path.to_path_buf(),
            data_block: BlockBuilder::new(opts.restart_interval),
            // Index entries are binary-searched directly: a restart at every entry.
            index_block: BlockBuilder::new(1),
            props: TableProperties {
                compression: (opts.compression == Compression::Zstd) as u64,
                column_family: opts.column_family.into(),
                smallest_seq: u64::MAX,
                ..Default::default()
            },
            opts,
            checksum: BlockChecksum::WRITTEN,
            offset: 0,
            filter,
            pending_index: None,
            framed: Vec::new(),
            range_tombstones: Vec::new(),
            blob_references: BTreeMap::new(),
        }
    }

    /// A table in an older format (its blocks checksummed with `checksum`), as earlier
    /// versions wrote them, to test that they still read.
    #[cfg(test)]
    pub(crate) fn with_checksum(mut self, checksum: BlockChecksum) -> Self {
        self.checksum = checksum;
        self
    }

    /// Adds an entry; internal keys must be strictly increasing.
    pub(crate) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if ikey.len() < 8
            || (!self.data_block.last_key().is_empty()
                && compare_internal(self.data_block.last_key(), ikey) != std::cmp::Ordering::Less)
        {
            return Err(Error::InvalidArgument(format!(
                "table {}: keys added out of order",
                self.path.display()
            )));
        }
        if let Some(handle) = self.pending_index.take() {
            let sep = index_separator(self.data_block.last_key(), ikey);
            self.add_index_entry(&sep, handle);
        }
        let user_key = key::user_key(ikey);
        if let Some(f) = self.filter.as_mut() {
            f.add_key(user_key);
        }
        let seq = key::sequence(ikey);
        let p = &mut self.props;
        if p.num_entries == 0 {
            p.smallest_key = ikey.to_vec();
        }
        p.num_entries += 1;
        let kind = key::kind_byte(ikey);
        if kind == ValueKind::Delete as u8 {
            p.num_deletions += 1;
        } else if kind == ValueKind::BlobIndex as u8
            && let Some(index) = BlobIndex::decode(value)
        {
            for blob in index.records() {
                *self.blob_references.entry(blob.file).or_default() += 1;
            }
        }
        p.raw_key_size += user_key.len() as u64;
        p.raw_value_size += value.len() as u64;
        p.smallest_seq = p.smallest_seq.min(seq);
        p.largest_seq = p.largest_seq.max(seq);
        self.data_block.add(ikey, value);
        if self.data_block.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn add_index_entry(&mut self, sep: &[u8], handle: BlockHandle) {
        let mut v = Vec::with_capacity(16);
        handle.encode_to(&mut v);
        self.index_block.add(sep, &v);
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let raw = self.data_block.finish();
        let handle = self.write_block(&raw, self.opts.compression)?;
        self.props.num_data_blocks += 1;
        self.props.data_size += handle.size + BLOCK_TRAILER as u64;
        self.pending_index = Some(handle);
        Ok(())
    }

    fn write_block(&mut self, raw: &[u8], compression: Compression) -> Result<BlockHandle> {
        frame_block(
            raw,
            compression,
            self.opts.zstd_level,
            self.checksum,
            &mut self.framed,
        )?;
        let handle = BlockHandle {
            offset: self.offset,
            size: (self.framed.len() - BLOCK_TRAILER) as u64,
        };
        self.file.append(&self.framed)?;
        self.offset += self.framed.len() as u64;
        Ok(handle)
    }

    /// Bytes written so far: what the file holds before its last block and meta blocks.
    pub(crate) fn file_size(&self) -> u64 {
        self.offset
    }

    /// Adds a range tombstone; it goes to the range-deletion block, in any order. The table's key
    /// range grows to cover it, so that reads and compactions find it wherever it deletes.
    pub(crate) fn add_range_tombstone(&mut self, t: RangeTombstone) {
        let p = &mut self.props;
        p.num_range_deletions += 1;
        p.smallest_seq = p.smallest_seq.min(t.seq);
        p.largest_seq = p.largest_seq.max(t.seq);
        self.range_tombstones.push(t);
    }

    /// The internal-key range the range tombstones span: from the first start at the newest
    /// sequence number starting there, to a sentinel at the last end that sorts before every real
    /// entry of that user key (the end is exclusive, and may be the next table's first key).
    fn range_tombstone_bounds(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let first = self
            .range_tombstones
            .iter()
            .min_by(|a, b| a.start.cmp(&b.start).then(b.seq.cmp(&a.seq)))?;
        let last_end = self.range_tombstones.iter().map(|t| &t.end).max()?;
        Some((
            key::internal_key(&first.start, first.seq, RANGE_DELETION_KIND),
            key::internal_key(last_end, MAX_SEQUENCE, RANGE_DELETION_KIND),
        ))
    }

    /// The range-deletion block: one entry per tombstone, `internal key (start, seq, 2) -> end`,
    /// in internal key order, never compressed (it is read whole at open).
    fn write_range_tombstones(&mut self) -> Result<BlockHandle> {
        let mut ts = std::mem::take(&mut self.range_tombstones);
        ts.sort_by(|a, b| a.start.cmp(&b.start).then(b.seq.cmp(&a.seq)));
        let mut block = BlockBuilder::new(self.opts.restart_interval);
        for t in &ts {
            block.add(
                &key::internal_key(&t.start, t.seq, RANGE_DELETION_KIND),
                &t.end,
            );
        }
        let raw = block.finish();
        self.write_block(&raw, Compression::None)
    }

    /// Writes the meta blocks and footer, syncs, and returns the table's properties and size.
    pub(crate) fn finish(mut self) -> Result<(TableProperties, u64)> {
        self.flush_data_block()?;
        if let Some(handle) = self.pending_index.take() {
            let sep = index_successor(self.data_block.last_key());
            self.add_index_entry(&sep, handle);
        }
        let mut meta: Vec<(&str, BlockHandle)> = Vec::new();
        if let Some(mut f) = self.filter.take()
            && f.num_keys() > 0
        {
            let data = f.finish();
            let h = self.write_block(&data, Compression::None)?;
            self.props.filter_size = h.size + BLOCK_TRAILER as u64;
            meta.push((FILTER_BLOCK_NAME, h));
        }
        self.props.largest_key = self.data_block.last_key().to_vec();
        self.props.blob_references = self
            .blob_references
            .iter()
            .map(|(&blob_file, &indexes)| BlobReference { blob_file, indexes })
            .collect();
        if let Some((lo, hi)) = self.range_tombstone_bounds() {
            let p = &mut self.props;
            if p.num_entries == 0 || compare_internal(&lo, &p.smallest_key).is_lt() {
                p.smallest_key = lo;
            }
            if p.num_entries == 0 || compare_internal(&hi, &p.largest_key).is_gt() {
                p.largest_key = hi;
            }
        }
        if !self.range_tombstones.is_empty() {
            let h = self.write_range_tombstones()?;
            meta.push((RANGE_DEL_BLOCK_NAME, h));
        }
        if self.props.num_entries == 0 && self.props.num_range_deletions == 0 {
            self.props.smallest_seq = 0;
        }
        let index_raw = self.index_block.finish();
        // The index size is known before it is written; record it in the properties first.
        self.props.index_size = index_raw.len() as u64 + BLOCK_TRAILER as u64;
        let props = self.props.encode();
        meta.push((
            PROPERTIES_BLOCK_NAME,
            self.write_block(&props, Compression::None)?,
        ));
        let mut metaindex = Vec::new();
        for (name, h) in &meta {
            put_length_prefixed(&mut metaindex, name.as_bytes());
            h.encode_to(&mut metaindex);
        }
        let metaindex = self.write_block(&metaindex, Compression::None)?;
        let index = self.write_block(&index_raw, Compression::None)?;
        let footer = Footer {
            metaindex,
            index,
            checksum: self.checksum,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.sync()?;
        Ok((self.props, self.offset))
    }
}

/// An index key `k` with `last <= k < next` in internal order, shorter than `last` where possible.
fn index_separator(last: &[u8], next: &[u8]) -> Vec<u8> {
    let (lu, nu) = (key::user_key(last), key::user_key(next));
    let sep = key::shortest_separator(lu, nu);
    if sep.len() < lu.len() && sep.as_slice() > lu {
        key::internal_key(&sep, MAX_SEQUENCE, KIND_FOR_SEEK)
    } else {
        last.to_vec()
    }
}

fn index_successor(last: &[u8]) -> Vec<u8> {
    let lu = key::user_key(last);
    let succ = key::short_successor(lu);
    if succ.len() < lu.len() && succ.as_slice() > lu {
        key::internal_key(&succ, MAX_SEQUENCE, KIND_FOR_SEEK)
    } else {
        last.to_vec()
    }
}
