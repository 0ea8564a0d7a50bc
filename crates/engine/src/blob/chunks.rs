//! Compressed chunks (doc/format.md, stored 3): a value cut into `CHUNK_SIZE` chunks, each
//! compressed alone when that makes it shorter, behind a table of where each chunk ends and its
//! checksum. A ranged read then verifies and decompresses only the chunks it returns.
//!
//! ```text
//! record: header (stored 3) | key | (end u32 | crc32c u32) per chunk | the chunks as stored
//! ```

use super::format::{CHUNK_SIZE, chunk_count};
use crate::coding::{crc32c, fixed32, put_fixed32};

/// Bytes of one chunk's table entry: where its stored bytes end, and their CRC32C.
pub(crate) const ENTRY_SIZE: usize = 8;

/// Bytes of the table of a value of `value_len` bytes.
pub(crate) fn table_len(value_len: u64) -> u64 {
    ENTRY_SIZE as u64 * chunk_count(value_len)
}

/// A value packed as compressed chunks: its table and the chunks as stored.
#[derive(Debug)]
pub(crate) struct Packed {
    pub table: Vec<u8>,
    pub chunks: Vec<u8>,
}

impl Packed {
    /// Bytes of the table and the chunks together.
    pub(crate) fn len(&self) -> usize {
        self.table.len() + self.chunks.len()
    }
}

/// Compresses each chunk of `value` at `level`, keeping a chunk as written where zstd would not
/// make it shorter; `None` when zstd fails (the caller keeps the value uncompressed).
pub(crate) fn pack(value: &[u8], level: i32) -> Option<Packed> {
    let mut table = Vec::with_capacity(table_len(value.len() as u64) as usize);
    let mut chunks = Vec::with_capacity(value.len() / 2);
    for chunk in value.chunks(CHUNK_SIZE) {
        let start = chunks.len();
        match crate::compression::compress_zstd(chunk, level).ok()? {
            frame if frame.len() < chunk.len() => chunks.extend_from_slice(&frame),
            _ => chunks.extend_from_slice(chunk),
        }
        // The chunks total at most the value's length, which a record header holds in a u32.
        let end = u32::try_from(chunks.len()).ok()?;
        put_fixed32(&mut table, end);
        put_fixed32(&mut table, crc32c(&chunks[start..]));
    }
    Some(Packed { table, chunks })
}

/// Where chunk `entry`'s stored bytes end, as its table entry says.
pub(crate) fn entry_end(entries: &[u8], entry: usize) -> u64 {
    u64::from(fixed32(entries, ENTRY_SIZE * entry))
}

/// Walks chunks `first..` of a value of `value_len` bytes, from `entries` (their table entries)
/// and `stored` (their stored bytes, which begin at `start` counted from the first chunk):
/// checks each against its entry, that it is stored in at most its own length, and that the
/// chunks fill `stored` exactly, handing `each(i, stored bytes, length)` every chunk checked.
/// Names the first bad chunk.
fn walk(
    entries: &[u8],
    start: u64,
    stored: &[u8],
    (first, value_len): (u64, u64),
    mut each: impl FnMut(usize, &[u8], usize) -> Result<(), String>,
) -> Result<(), String> {
    let count = entries.len() / ENTRY_SIZE;
    let mut at = start;
    for i in 0..count {
        let chunk = first + i as u64;
        let len = value_len
            .saturating_sub(chunk * CHUNK_SIZE as u64)
            .min(CHUNK_SIZE as u64) as usize;
        let end = entry_end(entries, i);
        let bytes = end
            .checked_sub(start)
            .zip(at.checked_sub(start))
            .and_then(|(e, a)| stored.get(a as usize..e as usize))
            .ok_or_else(|| format!("chunk {chunk}: table entry ends at {end}, out of order"))?;
        if crc32c(bytes) != fixed32(entries, ENTRY_SIZE * i + 4) {
            return Err(format!("chunk {chunk} checksum mismatch"));
        }
        if bytes.len() > len {
            return Err(format!(
                "chunk {chunk} is stored in {} bytes, more than its {len}",
                bytes.len()
            ));
        }
        each(i, bytes, len)?;
        at = end;
    }
    if at - start != stored.len() as u64 {
        return Err(format!(
            "chunks {first}..{} end at {at}, the record says {}",
            first + count as u64,
            start + stored.len() as u64
        ));
    }
    Ok(())
}

/// The value bytes of chunks `first..` of a value of `value_len` bytes (see `walk` for
/// `entries`, `start` and `stored`), each checked and decompressed where it is a frame.
pub(crate) fn unpack(
    entries: &[u8],
    start: u64,
    stored: &[u8],
    first: u64,
    value_len: u64,
) -> Result<Vec<u8>, String> {
    let count = (entries.len() / ENTRY_SIZE) as u64;
    let from = first * CHUNK_SIZE as u64;
    let to = ((first + count) * CHUNK_SIZE as u64).min(value_len);
    let mut out = vec![0u8; to.saturating_sub(from) as usize];
    walk(
        entries,
        start,
        stored,
        (first, value_len),
        |i, bytes, len| {
            let piece = out
                .get_mut(i * CHUNK_SIZE..i * CHUNK_SIZE + len)
                .ok_or("more table entries than the value has chunks")?;
            if bytes.len() == len {
                piece.copy_from_slice(bytes);
                return Ok(());
            }
            let chunk = first + i as u64;
            let n = crate::compression::decompress_zstd_into(bytes, piece)
                .map_err(|e| format!("chunk {chunk}: {e}"))?;
            match n == len {
                true => Ok(()),
                false => Err(format!(
                    "chunk {chunk} decompresses to {n} bytes, not {len}"
                )),
            }
        },
    )?;
    Ok(out)
}

/// The whole value of a compressed-chunk record, from what follows its key (`table_and_chunks`).
pub(crate) fn unpack_whole(table_and_chunks: &[u8], value_len: u64) -> Result<Vec<u8>, String> {
    let (entries, stored) = split_table(table_and_chunks, value_len)?;
    unpack(entries, 0, stored, 0, value_len)
}

/// Checks every chunk of a compressed-chunk record against its table entry without
/// decompressing it (a scan, or a whole read that decompresses next).
pub(crate) fn verify_whole(table_and_chunks: &[u8], value_len: u64) -> Result<(), String> {
    let (entries, stored) = split_table(table_and_chunks, value_len)?;
    walk(entries, 0, stored, (0, value_len), |_, _, _| Ok(()))
}

fn split_table(table_and_chunks: &[u8], value_len: u64) -> Result<(&[u8], &[u8]), String> {
    let table = usize::try_from(table_len(value_len))
        .ok()
        .filter(|&t| t <= table_and_chunks.len())
        .ok_or("record shorter than its chunk table")?;
    Ok(table_and_chunks.split_at(table))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(len: usize) -> Vec<u8> {
        // Compressible text with an incompressible stretch, so both kinds of chunk appear.
        let mut v: Vec<u8> = (0..len).map(|i| b"abcabcabd"[i % 9]).collect();
        let mut x = 12345u32;
        for b in v.iter_mut().skip(CHUNK_SIZE).take(CHUNK_SIZE) {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            *b = (x >> 16) as u8;
        }
        v
    }

    #[test]
    fn chunks_round_trip_whole_and_by_range_raw_or_compressed() {
        let value = sample(5 * CHUNK_SIZE + 123);
        let p = pack(&value, 3).unwrap();
        assert_eq!(p.table.len(), 6 * ENTRY_SIZE);
        assert!(p.chunks.len() < value.len() / 2);
        // The random chunk is kept as written.
        assert_eq!(
            entry_end(&p.table, 1) - entry_end(&p.table, 0),
            CHUNK_SIZE as u64
        );
        let whole = [&p.table[..], &p.chunks].concat();
        assert_eq!(unpack_whole(&whole, value.len() as u64).unwrap(), value);
        for (first, last) in [(0usize, 0usize), (1, 2), (3, 5), (5, 5)] {
            let start = if first == 0 {
                0
            } else {
                entry_end(&p.table, first - 1)
            };
            let end = entry_end(&p.table, last);
            let got = unpack(
                &p.table[first * ENTRY_SIZE..(last + 1) * ENTRY_SIZE],
                start,
                &p.chunks[start as usize..end as usize],
                first as u64,
                value.len() as u64,
            )
            .unwrap();
            let to = ((last + 1) * CHUNK_SIZE).min(value.len());
            assert_eq!(
                got,
                &value[first * CHUNK_SIZE..to],
                "chunks {first}..={last}"
            );
        }
    }

    #[test]
    fn a_damaged_chunk_or_entry_fails_with_its_chunk_named() {
        let value = sample(3 * CHUNK_SIZE);
        let p = pack(&value, 3).unwrap();
        let whole = [&p.table[..], &p.chunks].concat();
        let len = value.len() as u64;
        for i in 0..whole.len() {
            let mut bad = whole.clone();
            bad[i] ^= 0x04;
            assert!(unpack_whole(&bad, len).is_err(), "byte {i}");
            assert!(verify_whole(&bad, len).is_err(), "byte {i}");
        }
        assert_eq!(verify_whole(&whole, len), Ok(()));
        let mut bad = whole.clone();
        let in_third = p.table.len() + entry_end(&p.table, 1) as usize + 1;
        bad[in_third] ^= 1;
        assert_eq!(
            unpack_whole(&bad, len).unwrap_err(),
            "chunk 2 checksum mismatch"
        );
        // The first two chunks still read.
        let end = entry_end(&p.table, 1) as usize;
        let t = p.table.len();
        assert!(unpack(&bad[..2 * ENTRY_SIZE], 0, &bad[t..t + end], 0, len).is_ok());
        assert!(unpack_whole(&whole[..whole.len() - 1], len).is_err());
        assert!(unpack_whole(&whole[..5], len).is_err());
    }
}
