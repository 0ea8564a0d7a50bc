//! The log format shared by the WAL and the MANIFEST: records framed with a CRC, fragmented across
//! fixed 32 KiB blocks so that a reader can resynchronise at the next block after damage.

mod reader;
mod seal;
mod writer;

pub(crate) use reader::{LogReader, ReadOutcome};
pub(crate) use seal::{SealChain, decode_seal, record_after_seal, seal_record};
pub(crate) use writer::LogWriter;

pub(crate) const BLOCK_SIZE: usize = 32 * 1024;
/// crc (4) + length (2) + type (1).
pub(crate) const HEADER_SIZE: usize = 7;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FragmentType {
    Full = 1,
    First = 2,
    Middle = 3,
    Last = 4,
}

impl FragmentType {
    fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::Full),
            2 => Some(Self::First),
            3 => Some(Self::Middle),
            4 => Some(Self::Last),
            _ => None,
        }
    }
}

fn fragment_crc(ty: u8, payload: &[u8]) -> u32 {
    crate::coding::mask(crate::coding::masked_crc_extend(
        crc32c::crc32c(&[ty]),
        payload,
    ))
}

/// Whether the WAL at `path` holds no record: it is empty, or all zeros (a WAL is created at
/// its expected size, `FileSystem::create_sized`, so one a crash cut off before its first append
/// is zeros to its end). Zeros with anything after them are not empty: replay reports them.
pub(crate) fn holds_no_record(
    fs: &dyn crate::fs::FileSystem,
    path: &std::path::Path,
) -> crate::error::Result<bool> {
    let file = fs.open_random(path)?;
    let len = file.len()?;
    // A record begins with a fragment header whose type is never zero, so a log with one is
    // told at its first bytes; only a zeroed start is read on, a block at a time (a crashed
    // WAL is as long as it was created, 128 MiB by default), up to its first non-zero byte.
    let mut at = 0u64;
    while at < len {
        let n = (len - at).min(if at == 0 { HEADER_SIZE } else { BLOCK_SIZE } as u64) as usize;
        if file.read_vec_at(n, at)?.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// A log's bytes up to one block past the block holding its last non-zero byte: all a reader
/// needs of a WAL created at its expected size (`FileSystem::create_sized`, 128 MiB by default)
/// that a crash left ending in zeros, without holding those zeros in memory. A fragment never
/// crosses a block boundary, so every record is kept whole, and so are the zeros after a
/// cut-short one that tell it from damage (`reader::ends_in_zeros_within`): the reader sees what
/// it would in the whole file.
pub(crate) fn read_log(
    fs: &dyn crate::fs::FileSystem,
    path: &std::path::Path,
) -> crate::error::Result<Vec<u8>> {
    let file = fs.open_random(path)?;
    let len = file.len()?;
    let block = BLOCK_SIZE as u64;
    let mut scanned_from = len;
    while scanned_from > 0 {
        let start = (scanned_from - 1) / block * block;
        let chunk = file.read_vec_at((scanned_from - start) as usize, start)?;
        if let Some(at) = chunk.iter().rposition(|&b| b != 0) {
            let keep = ((start + at as u64) / block + 2) * block;
            return file.read_vec_at(keep.min(len) as usize, 0);
        }
        scanned_from = start;
    }
    file.read_vec_at(len.min(block) as usize, 0)
}

#[cfg(test)]
mod tests;
