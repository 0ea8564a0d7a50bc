//! Ranged reads of chunked records (stored 2 and 3): the header and key, the checksums (or table
//! entries) of the chunks a range touches, and those chunks; nothing else of the record.
//!
//! A warm read should cost about one `pread` of its chunks, so the two small pieces every read
//! needs besides them are kept in the block cache once read: the record's head (re-verified
//! against each reader's key, a CRC of a few bytes) and the page of checksums or table entries
//! (4 KiB, covering 4 MiB of a raw value or 2 MiB of a compressed one) the chunks lie in.

use std::sync::Arc;

use super::BlobStore;
use super::chunks::{ENTRY_SIZE, entry_end, table_len, unpack};
use super::format::{
    CHUNK_SIZE, Owner, RECORD_HEADER_SIZE, Stored, chunk_trailer_len, verify_chunked_head,
    verify_chunks,
};
use super::index::{BlobIndex, BlobRef};
use super::reader::BlobFileReader;
use crate::cache::{BlockCache, CacheKey, CachedBlock, Priority};
use crate::error::Result;
use crate::value::{PinnableValue, ValueRange, clip};

/// Marks the cache key of a record's head: tables' blocks and whole blob values are keyed by
/// their offset in the file, always below 2^62, so the marked keys never meet theirs.
const HEAD_KEY: u64 = 1 << 63;
/// Marks the cache key of a page of a record's checksums or table entries (keyed by where the
/// page starts in the file).
const INDEX_PAGE_KEY: u64 = 1 << 62;
/// Bytes of checksums or table entries cached as one piece.
const INDEX_PAGE: u64 = 4096;

/// Checksums or table entries: part of one cached page, or copied from several.
enum IndexBytes {
    Page(Arc<Vec<u8>>, std::ops::Range<usize>),
    Joined(Vec<u8>),
}

impl std::ops::Deref for IndexBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            IndexBytes::Page(page, wanted) => &page[wanted.clone()],
            IndexBytes::Joined(bytes) => bytes,
        }
    }
}

/// A chunked record a value reader keeps: where it is and its verified head, so that each read
/// of it reads only the chunks it returns (and their page of checksums or entries). Its file's
/// reader is asked of the store each read, so readers stay within `max_open_files`.
#[derive(Debug)]
pub(crate) struct PinnedRecord {
    blob: BlobRef,
    key_len: usize,
    value_len: u64,
    stored: Stored,
    /// When the value expires (seconds since the epoch); 0 when it never does.
    expiration: u64,
}

impl PinnedRecord {
    pub(crate) fn value_len(&self) -> u64 {
        self.value_len
    }
}

impl BlobStore {
    /// Pins the chunked record `index` (the value of `key`) points at; `None` when its value
    /// expired or its file was evicted (or the index is not of a chunked record: callers ask
    /// only of those).
    pub(crate) fn pin_record(
        &self,
        index: &[u8],
        key: &[u8],
        now: u64,
    ) -> Result<Option<PinnedRecord>> {
        let decoded = self.decode_index(index, key)?;
        let (expiration, blob) = match decoded {
            BlobIndex::Blob { expiration, blob } if blob.stored.is_chunked() => (expiration, blob),
            _ => return Ok(None),
        };
        if !self.is_live(&decoded, now) {
            return Ok(None);
        }
        let (value_len, stored) = self.reader(blob.file, key)?.chunked_head(
            blob,
            Owner::Key(key),
            self.piece_cache(true),
        )?;
        Ok(Some(PinnedRecord {
            blob,
            key_len: key.len(),
            value_len,
            stored,
            expiration,
        }))
    }

    /// `offset..offset + len` of the pinned record's value (`key`'s), cut at its end; `None`
    /// once the value expired (`now` is asked only of a value that can) or its file was evicted.
    pub(crate) fn read_pinned(
        &self,
        pinned: &PinnedRecord,
        key: &[u8],
        range: (u64, u64),
        fill_cache: bool,
        now: impl FnOnce() -> u64,
    ) -> Result<Option<ValueRange>> {
        let expired = pinned.expiration != 0 && now() >= pinned.expiration;
        if expired || self.is_evicted(pinned.blob.file) {
            return Ok(None);
        }
        let bytes = self.reader(pinned.blob.file, key)?.read_chunks(
            pinned.blob,
            pinned.key_len,
            (pinned.value_len, pinned.stored),
            range,
            self.piece_cache(fill_cache),
        )?;
        self.stats.blob_reads.inc();
        self.stats.blob_bytes_read.add(bytes.len() as u64);
        Ok(Some(ValueRange {
            value_len: pinned.value_len,
            bytes: PinnableValue::owned(bytes),
        }))
    }
}

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
    /// record `blob`), a cached page at a time: the page itself when they lie in one (as all
    /// but a read across a page's edge do), else copied together.
    fn read_index(
        &self,
        blob: BlobRef,
        cache: PieceCache<'_>,
        (index_at, index_len): (u64, u64),
        (lo, hi): (u64, u64),
    ) -> Result<IndexBytes> {
        let mut joined = Vec::new();
        let mut start = lo / INDEX_PAGE * INDEX_PAGE;
        while start < hi {
            let len = INDEX_PAGE.min(index_len - start);
            let at = index_at + start;
            let page = self.cached(
                cache,
                (blob.file, INDEX_PAGE_KEY | (blob.offset + at)),
                || self.read_in_record(blob, at, len as usize),
            )?;
            let wanted = (lo.max(start) - start) as usize..(hi.min(start + len) - start) as usize;
            if start + len >= hi && joined.is_empty() {
                return Ok(IndexBytes::Page(page, wanted));
            }
            joined.extend_from_slice(&page[wanted]);
            start += len;
        }
        Ok(IndexBytes::Joined(joined))
    }

    /// The bytes `offset..offset + len` of the value of the chunked record `blob` (`owner`'s),
    /// cut at the value's end, reading and verifying only the chunks that hold them; returns
    /// the value's length with them.
    pub(crate) fn read_range(
        &self,
        blob: BlobRef,
        owner: Owner<'_>,
        range: (u64, u64),
        cache: PieceCache<'_>,
    ) -> Result<(u64, Vec<u8>)> {
        let head = self.chunked_head(blob, owner, cache)?;
        let bytes = self.read_chunks(blob, owner.key_len(), head, range, cache)?;
        Ok((head.0, bytes))
    }

    /// As `read_range`, for a record whose head (`value_len`, `stored`, after a key of
    /// `key_len` bytes) was read and verified already.
    fn read_chunks(
        &self,
        blob: BlobRef,
        key_len: usize,
        (value_len, stored): (u64, Stored),
        (offset, len): (u64, u64),
        cache: PieceCache<'_>,
    ) -> Result<Vec<u8>> {
        let (start, end) = clip(offset, len, value_len);
        if start == end {
            return Ok(Vec::new());
        }
        let chunk = CHUNK_SIZE as u64;
        let (first, last) = (start / chunk, (end - 1) / chunk);
        let value_at = (RECORD_HEADER_SIZE + key_len) as u64;
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
        Ok(data)
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
