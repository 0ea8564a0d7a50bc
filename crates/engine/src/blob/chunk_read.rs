//! Ranged reads of chunked records (stored 2 and 3): the header and key, the checksums (or table
//! entries) of the chunks a range touches, and those chunks; nothing else of the record.
//!
//! A warm read should cost about one `pread` of its chunks, so the two small pieces every read
//! needs besides them are kept in the block cache once read: the record's head (re-verified
//! against each reader's key, a CRC of a few bytes) and the page of checksums or table entries
//! (4 KiB, covering 4 MiB of a raw value or 2 MiB of a compressed one) the chunks lie in.

use std::sync::Arc;

use super::chunks::{ENTRY_SIZE, entry_end, table_len, unpack};
use super::format::{
    CHUNK_SIZE, Owner, RECORD_HEADER_SIZE, Stored, chunk_trailer_len, verify_chunked_head,
    verify_chunks,
};
use super::index::BlobRef;
use super::reader::BlobFileReader;
use crate::cache::{BlockCache, CacheKey, CachedBlock, Priority};
use crate::error::Result;
use crate::value::clip;

/// Marks the cache key of a record's head: tables' blocks and whole blob values are keyed by
/// their offset in the file, always below 2^62, so the marked keys never meet theirs.
const HEAD_KEY: u64 = 1 << 63;
/// Marks the cache key of a page of a record's checksums or table entries (keyed by where the
/// page starts in the file).
const INDEX_PAGE_KEY: u64 = 1 << 62;
/// Bytes of checksums or table entries cached as one piece.
const INDEX_PAGE: u64 = 4096;

/// The block cache a ranged read may use, and whether it may add to it (`fill_cache`).
pub(crate) type PieceCache<'a> = Option<(&'a BlockCache, bool)>;

impl BlobFileReader {
    /// `load`ed once and then served from `cache` under `key`. A head is verified before it is
    /// cached; a page of checksums or entries is checked by the chunks it covers, each read.
    fn cached(
        &self,
        cache: PieceCache<'_>,
        key: CacheKey,
        load: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Arc<Vec<u8>>> {
        if let Some((c, _)) = cache
            && let Some(CachedBlock::Blob(bytes)) = c.lookup(key)
        {
            return Ok(bytes);
        }
        let bytes = Arc::new(load()?);
        if let Some((c, true)) = cache {
            c.insert(key, CachedBlock::Blob(bytes.clone()), Priority::High);
        }
        Ok(bytes)
    }

    /// Reads and verifies a chunked record's header and key, which must be `owner`'s; returns
    /// the value's length and how its chunks are stored.
    pub(super) fn chunked_head(
        &self,
        blob: BlobRef,
        owner: Owner<'_>,
        cache: PieceCache<'_>,
    ) -> Result<(u64, Stored)> {
        let head_len = RECORD_HEADER_SIZE + owner.key_len();
        let verify = |head: &[u8]| {
            verify_chunked_head(head, owner)
                .map_err(|e| self.corruption(format!("record at offset {}: {e}", blob.offset)))
        };
        let head = self.cached(cache, (blob.file, HEAD_KEY | blob.offset), || {
            let head = self.read_record_prefix(blob, head_len.min(blob.size as usize))?;
            verify(&head)?;
            Ok(head)
        })?;
        // Again on a hit: the cached head may be of a record another key (of another length)
        // asked for.
        let (value_len, stored) = verify(&head)?;
        let fits = match stored {
            Stored::ChunkedZstd => {
                // Each chunk is stored in at most its own length.
                let least = head_len as u64 + table_len(value_len);
                (least..=least + value_len).contains(&blob.size)
            }
            _ => blob.size == head_len as u64 + value_len + chunk_trailer_len(value_len),
        };
        if stored != blob.stored || !fits {
            return Err(self.corruption(format!(
                "record at offset {}: {} bytes do not hold a {value_len}-byte value",
                blob.offset, blob.size
            )));
        }
        Ok((value_len, stored))
    }

    /// Bytes `lo..hi` of the checksums or table (`index_len` bytes at `index_at` within the
    /// record `blob`), a cached page at a time.
    fn read_index(
        &self,
        blob: BlobRef,
        cache: PieceCache<'_>,
        (index_at, index_len): (u64, u64),
        (lo, hi): (u64, u64),
    ) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity((hi - lo) as usize);
        let mut start = lo / INDEX_PAGE * INDEX_PAGE;
        while start < hi {
            let len = INDEX_PAGE.min(index_len - start);
            let at = index_at + start;
            let page = self.cached(
                cache,
                (blob.file, INDEX_PAGE_KEY | (blob.offset + at)),
                || self.read_in_record(blob, at, len as usize),
            )?;
            let (from, to) = (lo.max(start) - start, hi.min(start + len) - start);
            out.extend_from_slice(&page[from as usize..to as usize]);
            start += len;
        }
        Ok(out)
    }

    /// The bytes `offset..offset + len` of the value of the chunked record `blob` (`owner`'s),
    /// cut at the value's end, reading and verifying only the chunks that hold them; returns
    /// the value's length with them.
    pub(crate) fn read_range(
        &self,
        blob: BlobRef,
        owner: Owner<'_>,
        (offset, len): (u64, u64),
        cache: PieceCache<'_>,
    ) -> Result<(u64, Vec<u8>)> {
        let (value_len, stored) = self.chunked_head(blob, owner, cache)?;
        let (start, end) = clip(offset, len, value_len);
        if start == end {
            return Ok((value_len, Vec::new()));
        }
        let chunk = CHUNK_SIZE as u64;
        let (first, last) = (start / chunk, (end - 1) / chunk);
        let value_at = (RECORD_HEADER_SIZE + owner.key_len()) as u64;
        let from = first * chunk;
        let mut data = match stored {
            Stored::ChunkedZstd => {
                self.read_packed(blob, cache, value_at, value_len, (first, last))?
            }
            _ => {
                let sums = self.read_index(
                    blob,
                    cache,
                    (value_at + value_len, chunk_trailer_len(value_len)),
                    (4 * first, 4 * (last + 1)),
                )?;
                let to = ((last + 1) * chunk).min(value_len);
                let data = self.read_in_record(blob, value_at + from, (to - from) as usize)?;
                verify_chunks(&data, &sums, first).map_err(|e| {
                    self.corruption(format!("record at offset {}: {e}", blob.offset))
                })?;
                data
            }
        };
        data.truncate((end - from) as usize);
        data.drain(..(start - from) as usize);
        Ok((value_len, data))
    }

    /// Chunks `first..=last` of the compressed-chunk record `blob`, whose table starts at
    /// `table_at` within it: their table entries (and the one before, where the first begins),
    /// then their stored bytes in one read, each verified and decompressed.
    fn read_packed(
        &self,
        blob: BlobRef,
        cache: PieceCache<'_>,
        table_at: u64,
        value_len: u64,
        (first, last): (u64, u64),
    ) -> Result<Vec<u8>> {
        let entry = ENTRY_SIZE as u64;
        let before = first.min(1);
        let entries = self.read_index(
            blob,
            cache,
            (table_at, table_len(value_len)),
            (entry * (first - before), entry * (last + 1)),
        )?;
        let (start, entries) = match before {
            1 => (entry_end(&entries, 0), &entries[ENTRY_SIZE..]),
            _ => (0, &entries[..]),
        };
        let chunks_at = table_at + table_len(value_len);
        let end = entry_end(entries, entries.len() / ENTRY_SIZE - 1);
        let bad = |e: String| self.corruption(format!("record at offset {}: {e}", blob.offset));
        if end < start || chunks_at + end > blob.size {
            return Err(bad(format!(
                "chunks {first}..={last} lie at {start}..{end}, outside the record"
            )));
        }
        let stored = self.read_in_record(blob, chunks_at + start, (end - start) as usize)?;
        unpack(entries, start, &stored, first, value_len).map_err(bad)
    }
}
