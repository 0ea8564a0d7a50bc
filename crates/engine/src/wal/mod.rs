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

#[cfg(test)]
mod tests;
