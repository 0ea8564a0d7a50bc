//! Reads records of one blob file, verifying each; recovers a file that a crash left unsealed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::chunks::unpack_whole;
use super::format::{
    BlobFooter, BlobHeader, CHUNK_SIZE, FOOTER_SIZE, HEADER_SIZE, Owner, RECORD_HEADER_SIZE,
    Record, Stored, chunk_trailer_len, decode_record, record_len,
};
use super::index::BlobRef;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RandomAccessFile};

/// An open blob file.
#[derive(Debug)]
pub(crate) struct BlobFileReader {
    pub(crate) path: PathBuf,
    file: Arc<dyn RandomAccessFile>,
}

/// What opening an existing file found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recovered {
    pub header: BlobHeader,
    pub footer: BlobFooter,
    /// The file had its footer.
    pub sealed: bool,
    /// Bytes at the end of an unsealed file that do not form a whole, intact record (a write cut
    /// short by a crash); zeros a writer had reserved past its last record are not counted.
    pub torn_bytes: u64,
    /// The torn bytes are one record whose end was never written (a crash mid-append), not a
    /// damaged record or footer: what `verify` may excuse, as it excuses a WAL's cut-short tail.
    pub cut_short: bool,
    /// Where the file's data ends: the whole of a sealed file, an unsealed one's intact records.
    pub file_size: u64,
    /// Zeros past `file_size` that a crashed writer had reserved (recovery trims them).
    pub spare_bytes: u64,
}

impl BlobFileReader {
    /// Reads every record of a sealed file against its footer, whose counts were trusted to
    /// open it (`verify`, paranoid opens and repair); returns the records.
    pub(crate) fn verify_sealed(&self, found: &Recovered) -> Result<u64> {
        let (mut records, mut bytes) = (0u64, 0u64);
        let end = found.file_size - FOOTER_SIZE as u64;
        let damaged = self.for_each_record(end, |_, size, _| {
            records += 1;
            bytes += size;
        })?;
        if damaged || records != found.footer.records || bytes != found.footer.record_bytes {
            return Err(Error::corruption(
                &self.path,
                format!(
                    "{records} intact records of {bytes} bytes, the footer says {} of {}",
                    found.footer.records, found.footer.record_bytes
                ),
            ));
        }
        Ok(records)
    }

    /// Opens `path` for reading records, without looking at header or footer (the file may still
    /// be being written).
    pub(crate) fn open(fs: &dyn FileSystem, path: &Path) -> Result<Self> {
        Ok(Self::from_file(path, fs.open_random(path)?))
    }

    pub(crate) fn from_file(path: &Path, file: Arc<dyn RandomAccessFile>) -> Self {
        BlobFileReader {
            path: path.to_path_buf(),
            file,
        }
    }

    pub(super) fn corruption(&self, detail: impl Into<String>) -> Error {
        Error::corruption(&self.path, detail)
    }

    /// Reads the header and, by seeking to the end, the footer. A file without an intact footer
    /// (its writer crashed) is scanned record by record: the intact prefix is what it holds, and
    /// the bytes after it, unless all zero, are reported as torn. Such a file is never appended
    /// to again.
    pub(crate) fn recover(&self) -> Result<Recovered> {
        let len = self.file.len()?;
        let mut head = [0u8; HEADER_SIZE];
        if len < HEADER_SIZE as u64 {
            return Err(self.corruption("file shorter than a blob header"));
        }
        self.file.read_exact_at(&mut head, 0)?;
        let header = BlobHeader::decode(&head).map_err(|e| self.corruption(e))?;
        if len >= (HEADER_SIZE + FOOTER_SIZE) as u64 {
            let mut tail = [0u8; FOOTER_SIZE];
            self.file
                .read_exact_at(&mut tail, len - FOOTER_SIZE as u64)?;
            if let Some(footer) = BlobFooter::decode(&tail) {
                if footer.record_bytes + (HEADER_SIZE + FOOTER_SIZE) as u64 != len {
                    return Err(self.corruption(format!(
                        "footer counts {} bytes of records in a file of {len} bytes",
                        footer.record_bytes
                    )));
                }
                return Ok(Recovered {
                    header,
                    footer,
                    sealed: true,
                    torn_bytes: 0,
                    cut_short: false,
                    file_size: len,
                    spare_bytes: 0,
                });
            }
        }
        let mut footer = BlobFooter::default();
        let mut offset = HEADER_SIZE as u64;
        let stopped_early = self.for_each_record(len, |_, size, r| {
            footer.note(size, r.expiration);
            offset += size;
        })?;
        // A writer may have extended the file ahead of its appends (`FileSystem::create_sized`),
        // so a crash can leave zeros after the last record, or after a footer it had written but
        // not yet trimmed the file to. Neither is damage.
        let mut sealed = false;
        let mut data_end = offset;
        let mut torn = false;
        if stopped_early {
            let footer_end = offset + FOOTER_SIZE as u64;
            let footer_follows = footer_end <= len && {
                let mut tail = [0u8; FOOTER_SIZE];
                self.file.read_exact_at(&mut tail, offset)?;
                BlobFooter::decode(&tail) == Some(footer)
            };
            if footer_follows && self.is_zero(footer_end, len)? {
                sealed = true;
                data_end = footer_end;
            } else {
                torn = !self.is_zero(offset, len)?;
            }
        }
        let cut_short = torn && self.is_cut_short(offset, len)?;
        Ok(Recovered {
            header,
            footer,
            sealed,
            torn_bytes: if torn { len - data_end } else { 0 },
            cut_short,
            file_size: data_end,
            spare_bytes: if torn { 0 } else { len - data_end },
        })
    }

    /// True when the bytes from `at` (after the last intact record) up to `len` are the start of
    /// one record and then zeros or the end of the file: an append a crash stopped part way, in a
    /// file extended ahead of it or not. A sealed file whose footer is damaged ends in exactly a
    /// footer's bytes with its magic or checksum intact, and a damaged whole record ends in its
    /// own last written byte: neither is cut short.
    fn is_cut_short(&self, at: u64, len: u64) -> Result<bool> {
        if at + FOOTER_SIZE as u64 == len {
            // A footer's bytes, by its magic or its checksum (a record's header and key a crash
            // left alone can be exactly as long).
            let mut tail = [0u8; FOOTER_SIZE];
            self.file.read_exact_at(&mut tail, at)?;
            if super::format::looks_like_footer(&tail) {
                return Ok(false);
            }
        }
        let written_end = self.written_end(at, len)?;
        let mut head = vec![0u8; RECORD_HEADER_SIZE.min((len - at) as usize)];
        self.file.read_exact_at(&mut head, at)?;
        let declared_end = match record_len(&head) {
            Ok(size) => at.saturating_add(size),
            Err(need) => {
                let readable = need.min(len - at);
                let Ok(n) = usize::try_from(readable) else {
                    return Ok(false);
                };
                let mut buf = vec![0u8; n];
                self.file.read_exact_at(&mut buf, at)?;
                match record_len(&buf) {
                    Ok(size) => at.saturating_add(size),
                    // The header or chunk table itself was not wholly written.
                    Err(_) => return Ok(written_end < at.saturating_add(need)),
                }
            }
        };
        Ok(written_end < declared_end)
    }

    /// Where the last byte that is not zero in `[from, to)` ends (`from` when there is none).
    fn written_end(&self, from: u64, to: u64) -> Result<u64> {
        let mut buf = vec![0u8; 64 << 10];
        let mut end = to;
        while end > from {
            let n = (end - from).min(buf.len() as u64) as usize;
            let start = end - n as u64;
            self.file.read_exact_at(&mut buf[..n], start)?;
            if let Some(last) = buf[..n].iter().rposition(|&b| b != 0) {
                return Ok(start + last as u64 + 1);
            }
            end = start;
        }
        Ok(from)
    }

    /// True when the bytes in `[from, to)` are all zero.
    fn is_zero(&self, mut from: u64, to: u64) -> Result<bool> {
        let mut buf = vec![0u8; 64 << 10];
        while from < to {
            let n = (to - from).min(buf.len() as u64) as usize;
            self.file.read_exact_at(&mut buf[..n], from)?;
            if buf[..n].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            from += n as u64;
        }
        Ok(true)
    }

    /// Calls `f(offset, size, record)` for each intact record from the header up to `end`; stops
    /// at the first damaged or incomplete one and returns true if it met one.
    pub(crate) fn for_each_record(
        &self,
        end: u64,
        mut f: impl FnMut(u64, u64, &Record<'_>),
    ) -> Result<bool> {
        let mut offset = HEADER_SIZE as u64;
        let mut buf = Vec::new();
        while offset < end {
            let mut head = [0u8; super::format::RECORD_HEADER_SIZE];
            if end - offset < head.len() as u64 {
                return Ok(true);
            }
            self.file.read_exact_at(&mut head, offset)?;
            let size = match record_len(&head) {
                Ok(size) => size,
                // Compressed chunks: the length is in the table's last entry.
                Err(need) if need <= end - offset => {
                    buf.resize(need as usize, 0);
                    self.file.read_exact_at(&mut buf, offset)?;
                    match record_len(&buf) {
                        Ok(size) => size,
                        Err(_) => return Ok(true),
                    }
                }
                Err(_) => return Ok(true),
            };
            if size > end - offset {
                return Ok(true);
            }
            let Ok(len) = usize::try_from(size) else {
                return Ok(true);
            };
            buf.resize(len, 0);
            self.file.read_exact_at(&mut buf, offset)?;
            let Ok(record) = decode_record(&buf) else {
                return Ok(true);
            };
            f(offset, size, &record);
            offset += size;
        }
        Ok(false)
    }

    /// The first `len` bytes of the record `blob` points at; a record past the end of the file
    /// is corruption.
    pub(super) fn read_record_prefix(&self, blob: BlobRef, len: usize) -> Result<Vec<u8>> {
        self.read_in_record(blob, 0, len)
    }

    /// `len` bytes from `at` within the record `blob` points at; past the end of the file is
    /// corruption.
    pub(super) fn read_in_record(&self, blob: BlobRef, at: u64, len: usize) -> Result<Vec<u8>> {
        self.file
            .read_vec_at(len, blob.offset + at)
            .map_err(|e| match e {
                Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                    self.corruption(format!(
                        "record at offset {} ({} bytes) lies past the end of the file",
                        blob.offset, blob.size
                    ))
                }
                other => other,
            })
    }

    /// Reads, verifies and decompresses the value `blob` points at, which must be `owner`'s.
    pub(crate) fn read(&self, blob: BlobRef, owner: Owner<'_>) -> Result<Vec<u8>> {
        let size = usize::try_from(blob.size)
            .map_err(|_| self.corruption(format!("blob size {} out of range", blob.size)))?;
        let buf = self.read_record_prefix(blob, size)?;
        let record = decode_record(&buf)
            .map_err(|e| self.corruption(format!("record at offset {}: {e}", blob.offset)))?;
        if !owner.accepts(record.key) {
            return Err(self.corruption(format!(
                "record at offset {} belongs to key {}, not {}",
                blob.offset,
                crate::error::show_key(record.key),
                owner.describe()
            )));
        }
        decode_value(&record)
            .map_err(|e| self.corruption(format!("record at offset {}: {e}", blob.offset)))
    }

    /// The length of the value record `blob` holds, without reading the value: a raw or chunked
    /// value's from the index, a compressed one's from its zstd frame header (whose record's key
    /// must be `key`); the value's checksums are checked when it is read, not here.
    pub(crate) fn value_len(&self, blob: BlobRef, key: &[u8]) -> Result<u64> {
        let overhead = (super::format::RECORD_HEADER_SIZE + key.len()) as u64;
        let stored = blob.size.checked_sub(overhead).ok_or_else(|| {
            self.corruption(format!(
                "record at offset {} ({} bytes) is shorter than its header and key",
                blob.offset, blob.size
            ))
        })?;
        match blob.stored {
            Stored::Raw => return Ok(stored),
            Stored::ChunkedZstd => return Ok(self.chunked_head(blob, Owner::Key(key), None)?.0),
            Stored::Chunked => {
                // `stored` is the value and a sum per chunk: solved for the value, no read.
                let sums = stored.div_ceil(CHUNK_SIZE as u64 + 4);
                return match stored.checked_sub(4 * sums) {
                    Some(value_len) if chunk_trailer_len(value_len) == 4 * sums => Ok(value_len),
                    _ => Err(self.corruption(format!(
                        "record at offset {}: {} bytes do not hold a chunked value",
                        blob.offset, blob.size
                    ))),
                };
            }
            Stored::Zstd => {}
        }
        // The header, the key, and at most a zstd frame header (18 bytes).
        let buf = self.read_record_prefix(blob, blob.size.min(overhead + 18) as usize)?;
        let key_len = crate::coding::fixed32(&buf, 4) as usize;
        let at = super::format::RECORD_HEADER_SIZE;
        if key_len != key.len() || &buf[at..at + key_len] != key {
            return Err(self.corruption(format!(
                "record at offset {} does not belong to key {}",
                blob.offset,
                crate::error::show_key(key)
            )));
        }
        zstd::zstd_safe::get_frame_content_size(&buf[overhead as usize..])
            .ok()
            .flatten()
            .ok_or_else(|| {
                self.corruption(format!(
                    "record at offset {}: zstd frame header is damaged",
                    blob.offset
                ))
            })
    }
}

/// The record's value, decompressed.
pub(crate) fn decode_value(record: &Record<'_>) -> std::result::Result<Vec<u8>, String> {
    match record.stored {
        Stored::Zstd => crate::compression::decompress_zstd(record.stored_value),
        Stored::ChunkedZstd => unpack_whole(record.stored_value, record.value_len),
        Stored::Raw | Stored::Chunked => Ok(record.stored_value.to_vec()),
    }
}
