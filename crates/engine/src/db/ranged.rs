//! Ranged reads: part of a value, and a reader that streams a whole one through a bounded buffer.
//!
//! A value in a chunked blob record (every blob value over one chunk, its chunks compressed or
//! not, and every value file) is read a chunk at a time, only where the range lies, each chunk
//! verified (and decompressed) on its own; a value in a table, a memtable or an older record is
//! found as `get` finds it and cut. A reader of such a value holds it whole, read once; a reader
//! of any other keeps the blob index it found (and the files it names) and reads it by range.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use super::column_family::{ColumnFamily, ColumnFamilyData};
use super::{Db, DbInner};
use crate::blob::{BlobIndex, FilePins, PinnedRecord};
use crate::error::{Error, Result, show_key};
use crate::key::Lookup;
use crate::options::{MAX_VALUE_SIZE, ReadOptions};
use crate::value::{PinnableValue, ValueRange, clip};

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

    /// A reader of `key`'s whole value in column family `cf` as `opts` sees it; `None` when the
    /// key is absent. The key is looked up once: the reader keeps the value it found, and the
    /// blob files holding it stay on disk until it is dropped, whatever is written meanwhile. A
    /// value in blob records (chunked, or an extent list) is read a step (at most 1 MiB) at a
    /// time; any other is read once, whole, and held.
    pub fn value_reader_cf(
        &self,
        opts: &ReadOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<ValueReader>> {
        self.inner.check_open()?;
        if opts.cache_only {
            return Err(Error::InvalidArgument(
                "a value reader cannot be cache-only: its steps read blob files".into(),
            ));
        }
        let cf = cf.resolve(self.inner.id)?;
        let key = key.as_ref().to_vec();
        let (found, view) = self.inner.get_entry(opts, cf, &key)?;
        let now = self.inner.now();
        let blobs = &self.inner.blobs;
        let found = match found {
            Lookup::Indexed(index) => {
                let decoded = blobs.decode_index(&index, &key)?;
                // The files a stepped read reaches: pinned while the view still holds them, so
                // none can go before.
                let files = decoded.records().iter().map(|b| b.file).collect();
                match decoded {
                    BlobIndex::Blob { blob, .. } if blob.stored.is_chunked() => blobs
                        .pin_record(&index, &key, now)?
                        .map(|pinned| (pinned.value_len(), Source::Record(pinned), files)),
                    // The length comes from the list; each step reads the pieces it covers.
                    BlobIndex::Extents { .. } => blobs
                        .value_len(&index, &key, now)?
                        .map(|len| (len, Source::Extents(index), files)),
                    _ => self.whole(Lookup::Indexed(index), &key, opts)?,
                }
            }
            found => self.whole(found, &key, opts)?,
        };
        let Some((value_len, source, files)) = found else {
            return Ok(None);
        };
        let pins = blobs.pin_files(files);
        drop(view);
        Ok(Some(ValueReader {
            inner: self.inner.clone(),
            _pins: pins,
            fill_cache: opts.fill_cache,
            key,
            value_len,
            source,
            position: 0,
        }))
    }
}

impl Db {
    /// A value a reader holds whole: one in a table or a memtable, or a record that can only be
    /// verified whole, read once and never again per step.
    fn whole(
        &self,
        found: Lookup<PinnableValue>,
        key: &[u8],
        opts: &ReadOptions,
    ) -> Result<Option<(u64, Source, Vec<u64>)>> {
        Ok(self
            .inner
            .settle_value(found, key, opts)?
            .map(|v| (v.len() as u64, Source::Whole(v), Vec::new())))
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
        super::read::refuse_blob_reads(opts, &found)?;
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
        if opts.cache_only {
            self.stats.gets.inc();
        }
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
    /// Keeps the blob files the value lies in (and only those) from being deleted.
    _pins: FilePins,
    fill_cache: bool,
    key: Vec<u8>,
    value_len: u64,
    source: Source,
    position: u64,
}

/// Where a [`ValueReader`] reads from.
#[derive(Debug)]
enum Source {
    /// The value itself, read once, whole.
    Whole(PinnableValue),
    /// A chunked record, read a step at a time.
    Record(PinnedRecord),
    /// The blob index of an extent list, read a step at a time.
    Extents(PinnableValue),
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

    /// At most `len` bytes at `offset` of the value, cut at its end and at one step (1 MiB),
    /// without moving the position; `Closed` once the store is closed, as every other read.
    pub fn read_at(&self, offset: u64, len: u64) -> Result<ValueRange> {
        self.inner.check_open()?;
        let len = len.min(READ_STEP);
        check_range(offset, len)?;
        match &self.source {
            Source::Whole(v) => {
                let (start, end) = clip(offset, len, self.value_len);
                Ok(ValueRange {
                    value_len: self.value_len,
                    bytes: PinnableValue::owned(v[start as usize..end as usize].to_vec()),
                })
            }
            Source::Record(pinned) => {
                let range = self.inner.blobs.read_pinned(
                    pinned,
                    &self.key,
                    (offset, len),
                    self.fill_cache,
                    || self.inner.now(),
                )?;
                self.counted(range)
            }
            Source::Extents(index) => {
                let range = self.inner.blobs.read_range(
                    index.clone(),
                    &self.key,
                    self.inner.now(),
                    (offset, len),
                    self.fill_cache,
                )?;
                self.counted(range)
            }
        }
    }

    /// A step's range, counted as read; a value gone is an error.
    fn counted(&self, range: Option<ValueRange>) -> Result<ValueRange> {
        let range = range.ok_or_else(|| {
            // The files stay, but an expiry or an eviction still ends the value.
            Error::Io {
                context: format!("reading the value of {}", show_key(&self.key)),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the value expired or was evicted while it was being read",
                ),
            }
        })?;
        self.inner.stats.bytes_read.add(range.bytes.len() as u64);
        Ok(range)
    }

    /// Reads up to `max` bytes (at most one step) from the current position and moves past
    /// them.
    pub fn read_step(&mut self, max: usize) -> Result<ValueRange> {
        let range = self.read_at(self.position, max as u64)?;
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
