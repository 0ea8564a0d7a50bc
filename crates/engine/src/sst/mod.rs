//! Sorted string tables: the immutable files flushes and compactions write.

mod builder;
mod format;
mod multi_get;
mod properties;
mod reader;
mod table_cache;
mod table_iter;

pub(crate) use builder::{TableBuilder, TableOptions};
pub(crate) use format::BlockHandle;
pub(crate) use multi_get::{PendingKey, data_blocks, fail_keys};
pub use properties::{BlobReference, TableProperties};
pub(crate) use properties::{decode_blob_references, encode_blob_references};
pub(crate) use reader::{BlockReadOptions, MetaBlocks, TableReader};
pub(crate) use table_cache::{MetaPolicy, TableCache};
pub(crate) use table_iter::TableIter;

/// The properties of the table at `path`, read without a cache.
pub(crate) fn read_properties(
    fs: &dyn crate::fs::FileSystem,
    path: &std::path::Path,
    number: u64,
) -> crate::Result<TableProperties> {
    TableReader::open_uncached(fs, path, number).map(|t| t.properties().clone())
}

#[cfg(test)]
mod tests;
