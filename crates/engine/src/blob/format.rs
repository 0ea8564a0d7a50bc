//! The blob file format (doc/format.md): a fixed header, records, and a fixed footer written when
//! the file is sealed. Every part carries a CRC32C, so a record is verified on every read and a
//! file cut short by a crash (no footer) is told apart from a sealed one.
//!
//! ```text
//! header (32): magic u32 | version u8 | compression u8 | has_ttl u8 | 0 u8 | column family u32
//!              | expiration range lo u64 | hi u64 | crc32c u32 of the 28 bytes before
//! record:      crc32c u32 | key len u32 | value len u32 | expiration u64 | stored u8 | key
//!              | value | (chunked only) crc32c u32 of each CHUNK_SIZE chunk of the value
//!              (compressed chunks: key | chunk table | chunks as stored, see `super::chunks`)
//! footer (40): records u64 | record bytes u64 | expiration min u64 | max u64
//!              | crc32c u32 of the 32 bytes before | magic u32
//! ```
//! All integers little-endian. Expiration 0 means none; the header's range is the TTL bucket the
//! file serves, the footer's the records' actual range.

use crate::coding::{crc32c, fixed32, fixed64, put_fixed32, put_fixed64};

pub(crate) const MAGIC: u32 = 0x5342_4c42; // "BLBS" read little-endian
/// Version 2 files may hold chunked records and version 3 files compressed chunks, which older
/// readers would take for damage: they refuse the file by its version instead. Older files read
/// as they are.
pub(crate) const VERSION: u8 = 3;
const OLDEST_VERSION: u8 = 1;
pub(crate) const HEADER_SIZE: usize = 32;
pub(crate) const FOOTER_SIZE: usize = 40;
pub(crate) const RECORD_HEADER_SIZE: usize = 21;
/// A chunked record's unit of verification: a ranged read reads and checks whole chunks, so a
/// page-sized read costs about a page (64 KiB chunks made a 4 KiB read 7-11x `pread`'s time).
pub(crate) const CHUNK_SIZE: usize = 4 << 10;

/// How a record holds its value: the record header's last byte, and a blob index's last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Stored {
    /// As written; the record's checksum covers the value.
    Raw = 0,
    /// One zstd frame; the record's checksum covers it.
    Zstd = 1,
    /// As written, followed by a checksum of each `CHUNK_SIZE` chunk; the record's checksum
    /// covers the header and key only, so a range is read and verified without the rest.
    Chunked = 2,
    /// A table of chunk ends and checksums, then each chunk, zstd-compressed where that made it
    /// shorter (`super::chunks`); the record's checksum covers the header and key only.
    ChunkedZstd = 3,
}

impl Stored {
    pub(crate) fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(Stored::Raw),
            1 => Some(Stored::Zstd),
            2 => Some(Stored::Chunked),
            3 => Some(Stored::ChunkedZstd),
            _ => None,
        }
    }

    /// Whether a range of the value is read and verified a chunk at a time.
    pub(crate) fn is_chunked(self) -> bool {
        matches!(self, Stored::Chunked | Stored::ChunkedZstd)
    }
}

/// Chunks of a value of `value_len` bytes (the last one may be short).
pub(crate) fn chunk_count(value_len: u64) -> u64 {
    value_len.div_ceil(CHUNK_SIZE as u64)
}

/// Bytes of a chunked record's trailer for a value of `value_len` bytes.
pub(crate) fn chunk_trailer_len(value_len: u64) -> u64 {
    4 * chunk_count(value_len)
}

/// The checksums of a value's chunks, fed with the value front to back.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChunkSums {
    trailer: Vec<u8>,
    current: u32,
    filled: usize,
}

impl ChunkSums {
    pub(crate) fn append(&mut self, mut data: &[u8]) {
        // Whole chunks at a chunk's start: one call each, on the faster whole-input CRC.
        while self.filled == 0 && data.len() >= CHUNK_SIZE {
            put_fixed32(&mut self.trailer, crc32c(&data[..CHUNK_SIZE]));
            data = &data[CHUNK_SIZE..];
        }
        while !data.is_empty() {
            let take = (CHUNK_SIZE - self.filled).min(data.len());
            self.current = crc32c::crc32c_append(self.current, &data[..take]);
            self.filled += take;
            data = &data[take..];
            if self.filled == CHUNK_SIZE {
                put_fixed32(&mut self.trailer, self.current);
                (self.current, self.filled) = (0, 0);
            }
        }
    }

    /// The record's trailer: each chunk's CRC32C, little-endian.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        if self.filled > 0 {
            put_fixed32(&mut self.trailer, self.current);
        }
        self.trailer
    }
}

/// Checks `chunks` (whole chunks of a value, the last possibly short) against `sums`, their
/// trailer entries; names the first bad chunk, counting from `first`.
pub(crate) fn verify_chunks(chunks: &[u8], sums: &[u8], first: u64) -> Result<(), String> {
    for (i, chunk) in chunks.chunks(CHUNK_SIZE).enumerate() {
        let want = sums.get(4 * i..4 * i + 4).map(|b| fixed32(b, 0));
        if want != Some(crc32c(chunk)) {
            return Err(format!("chunk {} checksum mismatch", first + i as u64));
        }
    }
    Ok(())
}

/// A blob file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlobHeader {
    pub column_family: u32,
    /// Values may be zstd-compressed (each record says whether it is).
    pub compression: bool,
    /// The TTL bucket `[lo, hi)` the file serves; `None` for a file of values without TTL.
    pub ttl_range: Option<(u64, u64)>,
}

impl BlobHeader {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_SIZE);
        put_fixed32(&mut out, MAGIC);
        out.push(VERSION);
        out.push(self.compression as u8);
        out.push(self.ttl_range.is_some() as u8);
        out.push(0);
        put_fixed32(&mut out, self.column_family);
        let (lo, hi) = self.ttl_range.unwrap_or((0, 0));
        put_fixed64(&mut out, lo);
        put_fixed64(&mut out, hi);
        let crc = crc32c(&out);
        put_fixed32(&mut out, crc);
        out
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Self, String> {
        if b.len() < HEADER_SIZE {
            return Err("file shorter than a blob header".into());
        }
        if fixed32(b, 0) != MAGIC {
            return Err("not a blob file (bad magic)".into());
        }
        if crc32c(&b[..28]) != fixed32(b, 28) {
            return Err("header checksum mismatch".into());
        }
        if !(OLDEST_VERSION..=VERSION).contains(&b[4]) {
            return Err(format!("unknown blob format version {}", b[4]));
        }
        Ok(BlobHeader {
            column_family: fixed32(b, 8),
            compression: b[5] != 0,
            ttl_range: (b[6] != 0).then(|| (fixed64(b, 12), fixed64(b, 20))),
        })
    }
}

/// A sealed file's footer (or what a scan of an unsealed one found).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlobFooter {
    pub records: u64,
    /// Bytes of records (the file minus header and footer).
    pub record_bytes: u64,
    /// Smallest and largest expiration among the records; (0, 0) when none has one.
    pub expiration_range: (u64, u64),
}

impl BlobFooter {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_SIZE);
        put_fixed64(&mut out, self.records);
        put_fixed64(&mut out, self.record_bytes);
        put_fixed64(&mut out, self.expiration_range.0);
        put_fixed64(&mut out, self.expiration_range.1);
        let crc = crc32c(&out);
        put_fixed32(&mut out, crc);
        put_fixed32(&mut out, MAGIC);
        out
    }

    /// `None` when `b` is not an intact footer (a file cut short holds records there).
    pub(crate) fn decode(b: &[u8]) -> Option<Self> {
        if b.len() != FOOTER_SIZE || fixed32(b, 36) != MAGIC || crc32c(&b[..32]) != fixed32(b, 32) {
            return None;
        }
        Some(BlobFooter {
            records: fixed64(b, 0),
            record_bytes: fixed64(b, 8),
            expiration_range: (fixed64(b, 16), fixed64(b, 24)),
        })
    }

    /// Counts one more record.
    pub(crate) fn note(&mut self, size: u64, expiration: u64) {
        self.records += 1;
        self.record_bytes += size;
        if expiration != 0 {
            let (lo, hi) = &mut self.expiration_range;
            *lo = if *lo == 0 {
                expiration
            } else {
                (*lo).min(expiration)
            };
            *hi = (*hi).max(expiration);
        }
    }
}

/// The header of a record of `key` and `stored_value`; the record is this, the key, the value.
/// Its checksum covers all three, so a writer can append the parts without gathering them.
pub(crate) fn record_header(
    key: &[u8],
    stored_value: &[u8],
    expiration: u64,
    compressed: bool,
) -> [u8; RECORD_HEADER_SIZE] {
    let mut h = header_fields(
        key,
        stored_value.len() as u32,
        expiration,
        raw_or_zstd(compressed),
    );
    let crc = crc32c::crc32c_append(head_crc(&h, key), stored_value);
    h[..4].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The header of a chunked record of `key` and a value of `value_len` bytes: its checksum
/// covers the header and the key; the trailer after the value covers the value.
pub(crate) fn chunked_record_header(
    key: &[u8],
    value_len: u32,
    expiration: u64,
) -> [u8; RECORD_HEADER_SIZE] {
    head_only_header(key, value_len, expiration, Stored::Chunked)
}

/// The header of a record of `key` whose checksum covers the header and key only, the value's
/// chunks being checked on their own (`stored` is `Chunked` or `ChunkedZstd`).
pub(crate) fn head_only_header(
    key: &[u8],
    value_len: u32,
    expiration: u64,
    stored: Stored,
) -> [u8; RECORD_HEADER_SIZE] {
    let mut h = header_fields(key, value_len, expiration, stored);
    let crc = head_crc(&h, key);
    h[..4].copy_from_slice(&crc.to_le_bytes());
    h
}

fn raw_or_zstd(compressed: bool) -> Stored {
    if compressed {
        Stored::Zstd
    } else {
        Stored::Raw
    }
}

/// A record header with everything but its checksum.
fn header_fields(
    key: &[u8],
    value_len: u32,
    expiration: u64,
    stored: Stored,
) -> [u8; RECORD_HEADER_SIZE] {
    let mut h = [0u8; RECORD_HEADER_SIZE];
    h[4..8].copy_from_slice(&(key.len() as u32).to_le_bytes());
    h[8..12].copy_from_slice(&value_len.to_le_bytes());
    h[12..20].copy_from_slice(&expiration.to_le_bytes());
    h[20] = stored as u8;
    h
}

/// The CRC32C of a record up to its value: the header after the checksum field, then the key.
fn head_crc(header: &[u8; RECORD_HEADER_SIZE], key: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c(&header[4..]), key)
}

/// Whose record a read expects.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Owner<'a> {
    /// The record of this key: checked byte for byte.
    Key(&'a [u8]),
    /// A record an extent list borrows (perhaps another key's), whose key is this long; its
    /// checksum covers the key, so the head still proves the record is whole.
    KeyLen(u32),
}

impl Owner<'_> {
    pub(crate) fn key_len(&self) -> usize {
        match self {
            Owner::Key(k) => k.len(),
            Owner::KeyLen(n) => *n as usize,
        }
    }

    /// Whether a record of key `key` is the one expected.
    pub(crate) fn accepts(&self, key: &[u8]) -> bool {
        match self {
            Owner::Key(k) => *k == key,
            Owner::KeyLen(n) => key.len() == *n as usize,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Owner::Key(k) => format!("key {}", crate::error::show_key(k)),
            Owner::KeyLen(n) => format!("a key of {n} bytes"),
        }
    }
}

/// Checks a chunked record's header and key (`head`, as stored) and that they are `owner`'s;
/// returns the value's length and how its chunks are stored.
pub(crate) fn verify_chunked_head(head: &[u8], owner: Owner<'_>) -> Result<(u64, Stored), String> {
    if head.len() != RECORD_HEADER_SIZE + owner.key_len()
        || fixed32(head, 4) as usize != owner.key_len()
        || !owner.accepts(&head[RECORD_HEADER_SIZE..])
    {
        return Err(format!("record does not belong to {}", owner.describe()));
    }
    let stored = Stored::from_byte(head[20]).filter(|s| s.is_chunked());
    match stored {
        Some(stored) if crc32c(&head[4..]) == fixed32(head, 0) => {
            Ok((u64::from(fixed32(head, 8)), stored))
        }
        _ => Err("record checksum mismatch".into()),
    }
}

/// One record as stored.
#[derive(Debug)]
pub(crate) struct Record<'a> {
    pub key: &'a [u8],
    /// The value as stored: compressed, without a chunked record's trailer, or a table and
    /// compressed chunks.
    pub stored_value: &'a [u8],
    /// The value's own length, as the header says (a compressed one's is its frame's).
    pub value_len: u64,
    pub expiration: u64,
    pub stored: Stored,
}

/// Whether `b`, a footer's length, is a footer with at most one of its parts damaged: its magic
/// is there, or its checksum matches its fields (a flip hits one or the other). A record's
/// header and key as long as a footer match neither but by a 2^-32 chance.
pub(crate) fn looks_like_footer(b: &[u8]) -> bool {
    b.len() == FOOTER_SIZE && (fixed32(b, 36) == MAGIC || crc32c(&b[..32]) == fixed32(b, 32))
}

/// The length of the record starting at `b`, from its header and, for compressed chunks, the
/// last entry of its chunk table. `Err(n)` when `b` must hold at least `n` bytes to tell (the
/// header's, or up to that entry). In u64: two 32-bit lengths from a damaged header can
/// overflow a 32-bit `usize`.
pub(crate) fn record_len(b: &[u8]) -> Result<u64, u64> {
    if b.len() < RECORD_HEADER_SIZE {
        return Err(RECORD_HEADER_SIZE as u64);
    }
    let value_len = u64::from(fixed32(b, 8));
    let head = RECORD_HEADER_SIZE as u64 + u64::from(fixed32(b, 4));
    match Stored::from_byte(b[20]) {
        Some(Stored::ChunkedZstd) => {
            let table_end = head + super::chunks::table_len(value_len);
            if value_len == 0 {
                return Ok(table_end);
            }
            let last = table_end - super::chunks::ENTRY_SIZE as u64;
            let entry = usize::try_from(last)
                .ok()
                .and_then(|at| Some(at..at.checked_add(4)?));
            match entry.and_then(|range| b.get(range)) {
                Some(end) => Ok(table_end + u64::from(fixed32(end, 0))),
                None => Err(table_end),
            }
        }
        Some(Stored::Chunked) => Ok(head + value_len + chunk_trailer_len(value_len)),
        // Unknown layouts are damage, which `decode_record` names.
        Some(Stored::Raw | Stored::Zstd) | None => Ok(head + value_len),
    }
}

/// Decodes and verifies a whole record.
pub(crate) fn decode_record(b: &[u8]) -> Result<Record<'_>, String> {
    let len = record_len(b).map_err(|_| "record shorter than its header and chunk table")?;
    if len != b.len() as u64 {
        return Err(format!(
            "record length {len} does not match the {} bytes read",
            b.len()
        ));
    }
    let stored =
        Stored::from_byte(b[20]).ok_or_else(|| format!("unknown record layout {}", b[20]))?;
    let key_len = fixed32(b, 4) as usize;
    let value_at = RECORD_HEADER_SIZE + key_len;
    let value_len = u64::from(fixed32(b, 8));
    // For compressed chunks the record's length does not bound `value_len`: the value area is
    // the rest of the record. For the others `len` (checked above) does.
    let value_end = match stored {
        Stored::ChunkedZstd => b.len(),
        _ => value_at + value_len as usize,
    };
    if stored.is_chunked() {
        if crc32c(&b[4..value_at]) != fixed32(b, 0) {
            return Err("record checksum mismatch".into());
        }
        if stored == Stored::ChunkedZstd {
            super::chunks::verify_whole(&b[value_at..], value_len)?;
        } else {
            verify_chunks(&b[value_at..value_end], &b[value_end..], 0)?;
        }
    } else if crc32c(&b[4..]) != fixed32(b, 0) {
        return Err("record checksum mismatch".into());
    }
    Ok(Record {
        key: &b[RECORD_HEADER_SIZE..value_at],
        stored_value: &b[value_at..value_end],
        value_len,
        expiration: fixed64(b, 12),
        stored,
    })
}

/// A whole chunked record of `key` and `value`.
#[cfg(test)]
pub(crate) fn chunked_record(key: &[u8], value: &[u8], expiration: u64) -> Vec<u8> {
    let mut sums = ChunkSums::default();
    sums.append(value);
    let head = chunked_record_header(key, value.len() as u32, expiration);
    [&head[..], key, value, &sums.finish()].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_claiming_two_huge_lengths_does_not_wrap() {
        let mut b = vec![0u8; RECORD_HEADER_SIZE];
        b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            record_len(&b),
            Ok(RECORD_HEADER_SIZE as u64 + 2 * u64::from(u32::MAX))
        );
        assert!(decode_record(&b).is_err());
    }

    #[test]
    fn a_chunked_record_verifies_each_chunk_and_its_head_alone() {
        let value: Vec<u8> = (0..(2 * CHUNK_SIZE + 100))
            .map(|i| (i % 251) as u8)
            .collect();
        let rec = chunked_record(b"key", &value, 5);
        assert_eq!(record_len(&rec), Ok(rec.len() as u64));
        assert_eq!(rec.len(), RECORD_HEADER_SIZE + 3 + value.len() + 12);
        let r = decode_record(&rec).unwrap();
        assert_eq!(
            (r.key, r.stored_value, r.stored),
            (&b"key"[..], &value[..], Stored::Chunked)
        );
        let head = &rec[..RECORD_HEADER_SIZE + 3];
        assert_eq!(
            verify_chunked_head(head, Owner::Key(b"key")),
            Ok((value.len() as u64, Stored::Chunked))
        );
        assert!(verify_chunked_head(head, Owner::Key(b"kez")).is_err());
        assert_eq!(
            verify_chunked_head(head, Owner::KeyLen(3)),
            Ok((value.len() as u64, Stored::Chunked))
        );
        assert!(verify_chunked_head(head, Owner::KeyLen(4)).is_err());
        // A flipped byte in the second chunk fails that chunk only.
        let mut bad = rec.clone();
        bad[RECORD_HEADER_SIZE + 3 + CHUNK_SIZE + 7] ^= 1;
        assert_eq!(
            decode_record(&bad).unwrap_err(),
            "chunk 1 checksum mismatch"
        );
        let at = RECORD_HEADER_SIZE + 3;
        let sums = &bad[at + value.len()..];
        assert!(verify_chunks(&bad[at..at + CHUNK_SIZE], &sums[..4], 0).is_ok());
        assert!(verify_chunks(&bad[at + CHUNK_SIZE..at + 2 * CHUNK_SIZE], &sums[4..8], 1).is_err());
        for i in [0, 5, 20, 22] {
            let mut bad = rec.clone();
            bad[i] ^= 0x10;
            assert!(decode_record(&bad).is_err(), "byte {i}");
        }
        // An empty value has no chunks.
        let empty = chunked_record(b"k", b"", 0);
        assert_eq!(decode_record(&empty).unwrap().stored_value, b"");
    }

    #[test]
    fn parts_round_trip_and_any_flipped_byte_is_caught() {
        let h = BlobHeader {
            column_family: 3,
            compression: true,
            ttl_range: Some((100, 200)),
        };
        let enc = h.encode();
        assert_eq!(enc.len(), HEADER_SIZE);
        assert_eq!(BlobHeader::decode(&enc), Ok(h));
        let mut f = BlobFooter::default();
        f.note(50, 0);
        f.note(60, 150);
        f.note(70, 120);
        assert_eq!(f.expiration_range, (120, 150));
        let fe = f.encode();
        assert_eq!(fe.len(), FOOTER_SIZE);
        assert_eq!(BlobFooter::decode(&fe), Some(f));
        let rec = [
            &record_header(b"key", b"value", 7, false)[..],
            b"key",
            b"value",
        ]
        .concat();
        let r = decode_record(&rec).unwrap();
        assert_eq!(
            (r.key, r.stored_value, r.expiration),
            (&b"key"[..], &b"value"[..], 7)
        );
        for i in 0..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 0x10;
            assert!(decode_record(&bad).is_err(), "byte {i}");
        }
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x10;
            assert!(BlobHeader::decode(&bad).is_err(), "header byte {i}");
        }
        for i in 0..fe.len() {
            let mut bad = fe.clone();
            bad[i] ^= 0x10;
            assert!(BlobFooter::decode(&bad).is_none(), "footer byte {i}");
        }
    }
}
