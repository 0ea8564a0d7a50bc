//! Reading extent values (`super::extents`): each piece from where it lives, a record's bytes
//! through a ranged read of that record (or its cached whole value, for a record that is not
//! chunked).

use std::sync::Arc;

use super::BlobStore;
use super::extents::{Extent, Extents, Piece};
use super::format::Owner;
use super::index::BlobRef;
use crate::error::{Error, Result};
use crate::options::MAX_WRITE_SIZE;
use crate::value::clip;

impl BlobStore {
    /// The `len` bytes at `at` of the value of record `blob` (a key of `key_len` bytes), for an
    /// extent of `key`'s value.
    pub(crate) fn read_record_bytes(
        &self,
        blob: BlobRef,
        key_len: u32,
        (at, len): (u64, u64),
        key: &[u8],
    ) -> Result<Vec<u8>> {
        let owner = Owner::KeyLen(key_len);
        let bytes = if blob.stored.is_chunked() {
            let (_, bytes) = self.reader(blob.file, key)?.read_range(
                blob,
                owner,
                (at, len),
                self.piece_cache(true),
            )?;
            self.stats.blob_reads.inc();
            self.stats.blob_bytes_read.add(bytes.len() as u64);
            bytes
        } else {
            let whole = self.fetch_for(blob, key, owner, true)?;
            let (start, end) = clip(at, len, whole.len() as u64);
            whole[start as usize..end as usize].to_vec()
        };
        if bytes.len() as u64 != len {
            return Err(Error::corruption(
                self.path(blob.file),
                format!(
                    "an extent of key {} runs past the value of the record at offset {}",
                    crate::error::show_key(key),
                    blob.offset
                ),
            ));
        }
        Ok(bytes)
    }

    /// Appends `len` bytes from `from` within extent `e` of `key`'s value to `out`.
    pub(crate) fn read_extent_into(
        &self,
        e: &Extent,
        (from, len): (u64, u64),
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        match &e.piece {
            Piece::Zeros => out.resize(out.len() + in_memory(len, key)?, 0),
            Piece::Inline(bytes) => {
                out.extend_from_slice(&bytes[from as usize..(from + len) as usize]);
            }
            Piece::Record {
                blob, key_len, at, ..
            } => out.extend(self.read_record_bytes(*blob, *key_len, (at + from, len), key)?),
        }
        Ok(())
    }

    /// `offset..offset + len` of the extent value `x` of `key`, cut at its end.
    pub(crate) fn read_extents(
        &self,
        x: &Extents,
        key: &[u8],
        (offset, len): (u64, u64),
    ) -> Result<Vec<u8>> {
        let (start, end) = clip(offset, len, x.len());
        let mut out = Vec::with_capacity(in_memory(end - start, key)?);
        for (e, from, n) in x.covering(start, end) {
            self.read_extent_into(e, (from, n), key, &mut out)?;
        }
        Ok(out)
    }

    /// The extent list of blob index `index` (the value of `key`).
    pub(crate) fn decode_extents(&self, index: &[u8], key: &[u8]) -> Result<Extents> {
        Extents::decode(index).ok_or_else(|| {
            Error::corruption(
                &self.dir,
                format!(
                    "malformed extent list for key {}",
                    crate::error::show_key(key)
                ),
            )
        })
    }

    /// The whole extent value of `index`.
    /// Refuses a value longer than one write carries ([`MAX_WRITE_SIZE`]): built by partial
    /// writes, it may be up to `MAX_VALUE_SIZE`, which no caller should have to hold at once.
    pub(crate) fn read_whole_extents(&self, index: &[u8], key: &[u8]) -> Result<Arc<Vec<u8>>> {
        let x = self.decode_extents(index, key)?;
        if x.len() > MAX_WRITE_SIZE {
            return Err(Error::InvalidArgument(format!(
                "the value of key {} is {} bytes, more than a whole read returns ({MAX_WRITE_SIZE}): \
                 read it by range",
                crate::error::show_key(key),
                x.len()
            )));
        }
        Ok(Arc::new(self.read_extents(&x, key, (0, u64::MAX))?))
    }
}

/// `len` bytes as a length in memory; an error where it does not fit (a 32-bit target).
fn in_memory(len: u64, key: &[u8]) -> Result<usize> {
    usize::try_from(len).map_err(|_| {
        Error::InvalidArgument(format!(
            "{len} bytes of key {} do not fit in this process's memory",
            crate::error::show_key(key)
        ))
    })
}
