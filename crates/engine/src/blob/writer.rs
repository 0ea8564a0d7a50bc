//! Appends records to one blob file and seals it with a footer.

use std::path::{Path, PathBuf};

use super::chunks::pack;
use super::format::{
    BlobFooter, BlobHeader, CHUNK_SIZE, ChunkSums, HEADER_SIZE, Stored, chunked_record_header,
    head_only_header, record_header,
};
use super::index::BlobRef;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};

/// The most a streamed record asks of its source at a time (a whole number of chunks).
pub(crate) const STREAMED_STEP: u64 = 1 << 20;

/// A blob file being written. Records are appended whole; `flush` hands them to the OS (a process
/// crash keeps them), `sync` makes them durable, `finish` writes the footer and syncs.
#[derive(Debug)]
pub(crate) struct BlobFileWriter {
    pub(crate) number: u64,
    path: PathBuf,
    file: Box<dyn WritableFile>,
    header: BlobHeader,
    zstd_level: i32,
    offset: u64,
    footer: BlobFooter,
}

impl BlobFileWriter {
    /// Creates file `number` in `dir`, expected to grow to about `expected_size` bytes, and
    /// writes its header.
    pub(crate) fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
        header: BlobHeader,
        zstd_level: i32,
        expected_size: u64,
    ) -> Result<Self> {
        let path = crate::filename::blob_file(dir, number);
        let mut file = fs.create_sized(&path, expected_size)?;
        file.append(&header.encode())?;
        Ok(BlobFileWriter {
            number,
            path,
            file,
            header,
            zstd_level,
            offset: HEADER_SIZE as u64,
            footer: BlobFooter::default(),
        })
    }

    /// Bytes written so far (header and records).
    pub(crate) fn file_size(&self) -> u64 {
        self.offset
    }

    /// What the records written so far add up to.
    pub(crate) fn footer(&self) -> BlobFooter {
        self.footer
    }

    /// Appends a record for `key`; the value is compressed when the file compresses and that
    /// saves at least an eighth. A value longer than a chunk is chunked, each chunk compressed
    /// alone when it is compressed at all, so that a range of it can be read and verified alone.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8], expiration: u64) -> Result<BlobRef> {
        let saves = |len: usize| len < value.len() - value.len() / 8;
        if value.len() > CHUNK_SIZE {
            let packed = match self.header.compression {
                true => pack(value, self.zstd_level).filter(|p| saves(p.len())),
                false => None,
            };
            let len = value.len() as u32;
            return match packed {
                Some(p) => {
                    let header = head_only_header(key, len, expiration, Stored::ChunkedZstd);
                    let parts = [&header[..], key, &p.table, &p.chunks];
                    self.append_record(parts, expiration, Stored::ChunkedZstd)
                }
                None => {
                    let mut sums = ChunkSums::default();
                    sums.append(value);
                    let sums = sums.finish();
                    let header = chunked_record_header(key, len, expiration);
                    let parts = [&header[..], key, value, &sums];
                    self.append_record(parts, expiration, Stored::Chunked)
                }
            };
        }
        let compressed = match self.header.compression {
            true => crate::compression::compress_zstd(value, self.zstd_level)
                .ok()
                .filter(|c| saves(c.len())),
            false => None,
        };
        let stored = compressed.as_deref().unwrap_or(value);
        let header = record_header(key, stored, expiration, compressed.is_some());
        let layout = match compressed {
            Some(_) => Stored::Zstd,
            None => Stored::Raw,
        };
        self.append_record([&header[..], key, stored, &[]], expiration, layout)
    }

    /// Appends a record of `key` whose value, `value_len` bytes (more than a chunk, at most 4 GiB),
    /// is stored as raw chunks (stored 2) and handed over by `fill(offset, len)` in order, at
    /// most `STREAMED_STEP` bytes a call, so that moving a large value holds a step of it and
    /// its checksums (4 bytes a chunk), never all of it. `fill` must return `len` bytes.
    pub(crate) fn add_streamed(
        &mut self,
        key: &[u8],
        value_len: u64,
        expiration: u64,
        mut fill: impl FnMut(u64, u64) -> Result<Vec<u8>>,
    ) -> Result<BlobRef> {
        let len = u32::try_from(value_len)
            .ok()
            .filter(|&l| l as usize > CHUNK_SIZE)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "a streamed record holds more than a chunk and at most 4 GiB, not {value_len} bytes"
                ))
            })?;
        let header = chunked_record_header(key, len, expiration);
        self.file.append(&header)?;
        self.file.append(key)?;
        let mut sums = ChunkSums::default();
        let mut at = 0;
        while at < value_len {
            let step = STREAMED_STEP.min(value_len - at);
            let bytes = fill(at, step)?;
            if bytes.len() as u64 != step {
                return Err(Error::InvalidArgument(format!(
                    "{} bytes handed over for {step} at offset {at} of a streamed record",
                    bytes.len()
                )));
            }
            sums.append(&bytes);
            self.file.append(&bytes)?;
            at += step;
        }
        let sums = sums.finish();
        self.file.append(&sums)?;
        let blob = BlobRef {
            file: self.number,
            offset: self.offset,
            size: (header.len() + key.len() + sums.len()) as u64 + value_len,
            stored: Stored::Chunked,
        };
        self.offset += blob.size;
        self.footer.note(blob.size, expiration);
        Ok(blob)
    }

    /// Appends one record made of `parts`, stored as `layout`.
    fn append_record(
        &mut self,
        parts: [&[u8]; 4],
        expiration: u64,
        layout: Stored,
    ) -> Result<BlobRef> {
        for part in parts {
            self.file.append(part)?;
        }
        let blob = BlobRef {
            file: self.number,
            offset: self.offset,
            size: parts.iter().map(|p| p.len() as u64).sum(),
            stored: layout,
        };
        self.offset += blob.size;
        self.footer.note(blob.size, expiration);
        Ok(blob)
    }

    /// Hands what was appended to the OS, so readers (and a process crash) see it.
    pub(crate) fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Writes the footer and syncs; returns the footer and the file's size.
    pub(crate) fn finish(mut self) -> Result<(BlobFooter, u64)> {
        let footer = self.footer;
        self.file.append(&footer.encode())?;
        self.file
            .finish()
            .map_err(|e| annotate(e, &self.path, "sealing"))?;
        Ok((footer, self.offset + super::format::FOOTER_SIZE as u64))
    }
}

fn annotate(e: Error, path: &Path, what: &str) -> Error {
    match e {
        Error::Io { context, source } => Error::Io {
            context: format!("{what} blob file {}: {context}", path.display()),
            source,
        },
        other => other,
    }
}
