//! Ranged reads: part of a value, and a reader that streams a whole one through a bounded buffer.
//!
//! A value in a chunked blob record (every blob value over one chunk, its chunks compressed or
//! not, and every value file) is read a chunk at a time, only where the range lies, each chunk
//! verified (and decompressed) on its own; a value in a table, a memtable or an older record is
//! found as `get` finds it and cut. A reader of such a value holds it whole, read once.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use super::column_family::{ColumnFamily, ColumnFamilyData};
use super::{Db, DbInner};
use crate::blob::BlobIndex;
use crate::error::{Error, Result, show_key};
use crate::key::Lookup;
use crate::options::{MAX_VALUE_SIZE, ReadOptions};
use crate::value::{PinnableValue, ValueRange};

/// How much a [`ValueReader`] reads from the store at a time, at most.
const READ_STEP: u64 = 1 << 20;

impl Db {
    /// `len` bytes at `offset` of the latest value of `key`, cut at the value's end, with the
    /// value's length; `None` when the key is absent.
    pub fn read_range(
        &self,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
    ) -> Result<Option<ValueRange>> {
        self.read_range_cf(
            &ReadOptions::default(),
            &self.default_cf(),
            key,
            offset,
            len,
        )
    }

    /// `len` bytes at `offset` of `key`'s value in column family `cf` as `opts` sees it (its
    /// snapshot, or the latest), cut at the value's end, with the value's length; `None` when
    /// the key is absent. An offset past the largest value the store holds, or a range whose
    /// end overflows, is `InvalidArgument`.
    pub fn read_range_cf(
        &self,
        opts: &ReadOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        offset: u64,
        len: u64,
    ) -> Result<Option<ValueRange>> {
        self.inner.check_open()?;
        check_range(offset, len)?;
        self.inner
            .read_range(opts, cf.resolve(self.inner.id)?, key.as_ref(), offset, len)
    }

    /// A reader of `key`'s whole value in column family `cf`, at `opts`' snapshot or at one it
    /// takes now, so every part it returns belongs to the same value; `None` when the key is
    /// absent. A value in a chunked record is read a step (at most 1 MiB) at a time; any other
    /// is read once, whole, and held.
    pub fn value_reader_cf(
        &self,
        opts: &ReadOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<ValueReader>> {
        self.inner.check_open()?;
        let cf = cf.resolve(self.inner.id)?.clone();
        let mut opts = opts.clone();
        if opts.snapshot.is_none() {
            opts.snapshot = Some(self.snapshot());
        }
        let key = key.as_ref().to_vec();
        let (found, _view) = self.inner.get_entry(&opts, &cf, &key)?;
        let chunked = match &found {
            Lookup::Indexed(index) => matches!(
                self.inner.blobs.decode_index(index, &key)?,
                BlobIndex::Blob { blob, .. } if blob.stored.is_chunked()
            ),
            _ => false,
        };
        let (value_len, whole) = if let (true, Lookup::Indexed(index)) = (chunked, &found) {
            // The length comes from the index, as a stat's does; each step reads its chunks.
            match self.inner.blobs.value_len(index, &key, self.inner.now())? {
                Some(len) => (len, None),
                None => return Ok(None),
            }
        } else {
            // Read whole once and served from memory: a value in a table or a memtable, or a
            // record that can only be verified whole, is never read again per step.
            match self.inner.settle_value(found, &key, &opts)? {
                Some(v) => (v.len() as u64, Some(v)),
                None => return Ok(None),
            }
        };
        Ok(Some(ValueReader {
            inner: self.inner.clone(),
            cf,
            opts,
            key,
            value_len,
            whole,
            position: 0,
        }))
    }
}

/// Refuses an offset past the largest value and a range whose end does not fit in 64 bits.
fn check_range(offset: u64, len: u64) -> Result<()> {
    if offset > MAX_VALUE_SIZE {
        return Err(Error::InvalidArgument(format!(
            "offset {offset} is past the largest value the store holds ({MAX_VALUE_SIZE} bytes)"
        )));
    }
    if offset.checked_add(len).is_none() {
        return Err(Error::InvalidArgument(format!(
            "the range of {len} bytes at offset {offset} overflows"
        )));
    }
    Ok(())
}

impl DbInner {
    pub(super) fn read_range(
        &self,
        opts: &ReadOptions,
        cf: &ColumnFamilyData,
        user_key: &[u8],
        offset: u64,
        len: u64,
    ) -> Result<Option<ValueRange>> {
        let (found, _view) = self.get_entry(opts, cf, user_key)?;
        let range = match found {
            Lookup::Found(v) => Some(ValueRange::within(v, offset, len)),
            Lookup::Indexed(index) => self.blobs.read_range(
                index,
                user_key,
                self.now(),
                (offset, len),
                opts.fill_cache,
            )?,
            Lookup::Deleted | Lookup::NotFound => None,
        };
        if let Some(r) = &range {
            self.stats.get_hits.inc();
            self.stats.bytes_read.add(r.bytes.len() as u64);
        }
        Ok(range)
    }
}

/// Streams one value of the store (see [`Db::value_reader_cf`]); `Seek` moves within it. An
/// engine error reaches the caller as an `io::Error` whose inner error is the engine's.
#[derive(Debug)]
pub struct ValueReader {
    inner: Arc<DbInner>,
    cf: Arc<ColumnFamilyData>,
    opts: ReadOptions,
    key: Vec<u8>,
    value_len: u64,
    /// The value, when it is not in a chunked record (read once, whole).
    whole: Option<PinnableValue>,
    position: u64,
}

impl ValueReader {
    /// The value's length.
    pub fn value_len(&self) -> u64 {
        self.value_len
    }

    /// Where the next read starts.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Reads up to `max` bytes (at most one step) from the current position; `Closed` once the
    /// store is closed, as every other read.
    pub fn read_step(&mut self, max: usize) -> Result<ValueRange> {
        self.inner.check_open()?;
        let want = (max as u64).min(READ_STEP);
        if let Some(v) = &self.whole {
            let start = self.position.min(self.value_len) as usize;
            let end = self.position.saturating_add(want).min(self.value_len) as usize;
            self.position += (end - start) as u64;
            return Ok(ValueRange {
                value_len: self.value_len,
                bytes: PinnableValue::owned(v[start..end].to_vec()),
            });
        }
        let range = self
            .inner
            .read_range(&self.opts, &self.cf, &self.key, self.position, want)?
            .ok_or_else(|| {
                // Only an expiry or an eviction ends a value under a snapshot.
                Error::Io {
                    context: format!("reading the value of {}", show_key(&self.key)),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "the value expired or was evicted while it was being read",
                    ),
                }
            })?;
        self.position += range.bytes.len() as u64;
        Ok(range)
    }
}

impl Read for ValueReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() || self.position >= self.value_len {
            return Ok(0);
        }
        let range = self.read_step(buf.len()).map_err(std::io::Error::other)?;
        buf[..range.bytes.len()].copy_from_slice(&range.bytes);
        Ok(range.bytes.len())
    }
}

impl Seek for ValueReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.value_len.checked_add_signed(d),
            SeekFrom::Current(d) => self.position.checked_add_signed(d),
        };
        let target = target.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start of the value",
            )
        })?;
        self.position = target;
        Ok(target)
    }
}
