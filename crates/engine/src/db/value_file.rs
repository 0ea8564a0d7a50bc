//! Value files: a value too large to hold in memory, written in place into a file of its own that
//! the store then adopts as a sealed blob file. Its bytes reach the disk once: they are never
//! copied into a write batch and then again into a shared blob file.
//!
//! A value file is laid out as a blob file of one record (doc/format.md) from the start: the
//! value's bytes sit where the record puts them, behind room for the record's header and key.
//! Until it is written, it is named `NNNNNN.blob.tmp`, which every open deletes; writing it fills
//! in the record header and the footer, renames it to `NNNNNN.blob`, names it in the MANIFEST and
//! writes its blob index with the rest of the batch.

use std::path::PathBuf;
use std::sync::Arc;

use super::{Db, WriteBatch};
use crate::blob::{BlobHeader, ChunkSums, HEADER_SIZE, RECORD_HEADER_SIZE};
use crate::db::column_family::ColumnFamily;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, PositionalFile};
use crate::key::SequenceNumber;
use crate::options::{MAX_WRITE_SIZE, WriteOptions, oversized_key};

/// How much of a value file commit reads at a time when it must checksum the value again.
const READ_BACK_CHUNK: usize = 1 << 20;

/// A value being written in place; see the module documentation. Made by
/// [`Db::create_value_file`], stored by [`Db::write_with_value_file`]. Dropped unwritten, its file
/// is removed.
#[derive(Debug)]
pub struct ValueFile {
    pub(super) cf: ColumnFamily,
    pub(super) key: Vec<u8>,
    pub(super) number: u64,
    pub(super) tmp_path: PathBuf,
    pub(super) file: Arc<dyn PositionalFile>,
    pub(super) fs: Arc<dyn FileSystem>,
    pub(super) len: u64,
    /// Checksums of the value's chunks while it was written front to back, so that storing it
    /// need not read it back; `None` after any other write.
    pub(super) sums: Option<ChunkSums>,
    /// Renamed into the store: nothing to remove on drop.
    pub(super) adopted: bool,
}

impl ValueFile {
    /// The key the value will be stored under.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The value's length so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True while nothing is written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the value's first byte sits in the file.
    fn data_offset(&self) -> u64 {
        (HEADER_SIZE + RECORD_HEADER_SIZE + self.key.len()) as u64
    }

    fn check_end(end: Option<u64>) -> Result<u64> {
        end.filter(|&e| e <= MAX_WRITE_SIZE).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "value would exceed the limit of {MAX_WRITE_SIZE} bytes"
            ))
        })
    }

    /// Writes `data` at `offset` of the value, zero-filling any gap.
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let end = Self::check_end(offset.checked_add(data.len() as u64))?;
        self.file.write_all_at(data, self.data_offset() + offset)?;
        self.sums = match self.sums.take() {
            Some(mut sums) if offset == self.len => {
                sums.append(data);
                Some(sums)
            }
            _ => None,
        };
        self.len = self.len.max(end);
        Ok(())
    }

    /// Reads from `offset` into `buf`; returns the bytes read (fewer at the end of the value).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if offset >= self.len {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(self.len - offset) as usize;
        self.file
            .read_exact_at(&mut buf[..n], self.data_offset() + offset)?;
        Ok(n)
    }

    /// Cuts the value to `len` bytes, or extends it with zeros.
    pub fn set_len(&mut self, len: u64) -> Result<()> {
        Self::check_end(Some(len))?;
        if len == self.len {
            return Ok(());
        }
        self.file.set_len(self.data_offset() + len)?;
        self.sums = None;
        self.len = len;
        Ok(())
    }

    /// The trailer of the value's chunk checksums: the ones kept while writing, or read back.
    pub(super) fn chunk_trailer(&mut self) -> Result<Vec<u8>> {
        if let Some(sums) = self.sums.take() {
            return Ok(sums.finish());
        }
        let mut sums = ChunkSums::default();
        let mut buf = vec![0u8; READ_BACK_CHUNK.min(self.len as usize)];
        let mut at = 0;
        while at < self.len {
            let n = self.read_at(at, &mut buf)?;
            sums.append(&buf[..n]);
            at += n as u64;
        }
        Ok(sums.finish())
    }
}

impl Drop for ValueFile {
    fn drop(&mut self) {
        if !self.adopted {
            // Failing leaves a `.tmp` file, which the next open deletes.
            let _ = self.fs.remove(&self.tmp_path);
        }
    }
}

impl Db {
    /// A new, empty value file for `key` of `cf`, whose options must keep blob files
    /// (`enable_blob_files`). Write it with [`ValueFile::write_at`], then store it with
    /// [`Db::write_with_value_file`]. Values of any size (up to [`MAX_WRITE_SIZE`]) work; it pays
    /// off for values too large to hold in memory comfortably.
    pub fn create_value_file(&self, cf: &ColumnFamily, key: impl AsRef<[u8]>) -> Result<ValueFile> {
        let inner = &self.inner;
        inner.check_writable()?;
        let data = cf.resolve(inner.id)?;
        if !data.opts.enable_blob_files {
            return Err(Error::InvalidArgument(format!(
                "column family {} keeps no blob files, so it cannot take a value file",
                data.name
            )));
        }
        let key = key.as_ref();
        if let Some(why) = oversized_key(key.len()) {
            return Err(Error::InvalidArgument(why));
        }
        let number = inner.versions.lock().new_file_number();
        let tmp_path = crate::filename::value_file_tmp(&inner.dir, number);
        let file = Arc::from(inner.fs.create_positional(&tmp_path)?);
        let vf = ValueFile {
            cf: cf.clone(),
            key: key.to_vec(),
            number,
            tmp_path,
            file,
            fs: inner.fs.clone(),
            len: 0,
            sums: Some(ChunkSums::default()),
            adopted: false,
        };
        let header = BlobHeader {
            column_family: data.id,
            compression: false,
            ttl_range: None,
        };
        // Durable now, while the file is tiny: once the MANIFEST names the file its header must
        // be there, and syncing it then would sync the whole value.
        vf.file.write_all_at(&header.encode(), 0)?;
        vf.file.sync()?;
        Ok(vf)
    }

    /// Applies `batch` and stores `value` as the value of its key, atomically: the value file
    /// becomes a blob file of the store and its index is written after `batch`'s records (so it
    /// wins over a put of the same key in `batch`). With `sync`, the value is durable when this
    /// returns; without, it is as durable as any unsynced write (a later synced write covers it).
    /// Answers the sequence number the write committed at, as `write_sequenced` does.
    pub fn write_with_value_file(
        &self,
        batch: WriteBatch,
        value: ValueFile,
        opts: &WriteOptions,
    ) -> Result<SequenceNumber> {
        self.check_batch(&batch, true)?;
        let cf = value.cf.resolve(self.inner.id)?.clone();
        let (batch, pending) = self.inner.adopt_value_file(batch, &cf, value, opts.sync)?;
        let (batch, _separated) = self.inner.separate_values(batch)?;
        let written = self.inner.write(batch, opts);
        drop(pending);
        written
    }
}
