use std::path::Path;

use super::{BLOCK_SIZE, FragmentType, HEADER_SIZE, fragment_crc};
use crate::coding::fixed32;
use crate::error::{Error, Result};

/// How the reader treats a damaged record that intact records follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    /// Damage followed by intact records is an error: those records were acknowledged.
    FailOnMidLogDamage,
    /// Damage is skipped to the next block and counted.
    SkipDamage,
}

/// The damage a crash can leave at a log's end: bytes that never reached the disk, or space the
/// filesystem had allocated but not yet filled.
const CUT_SHORT: [&str; 3] = [
    "truncated fragment header",
    "truncated fragment",
    "zeroed space",
];

/// Whether the log holds nothing but zeros from a byte inside the fragment at `pos` (of payload
/// length `len`) to its end, which lies past the fragment's: a record whose copy into a log
/// extended ahead of its writer (`FileSystem::create_sized`, a mapped WAL) a crash cut short,
/// the rest of its place still zeros, as a log a crash cut during a `write` ends early. A log
/// that ends where the fragment does was not extended ahead (a MANIFEST): there a record whose
/// last bytes are zeros and whose checksum fails is damage.
fn ends_in_zeros_within(data: &[u8], pos: usize, len: usize) -> bool {
    let end = pos + HEADER_SIZE + len;
    let last_written = data[pos..]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(pos, |p| pos + p + 1);
    data.len() > end && last_written < end
}

/// Why an intact fragment is damage: it does not continue the record before it.
const OUT_OF_ORDER: &str = "fragment out of order";

/// The unit a disk writes whole: what a power loss keeps from the disk is whole sectors.
pub(super) const SECTOR: usize = 512;

/// Whether the damaged fragment at `pos` ends in a lost write: bytes a power loss kept from the
/// disk, not bytes gone wrong. A disk writes whole sectors, and holds for each the version of
/// some moment; writeback has no order, so a sector holding an older version can have sectors
/// after it that hold their last. But a sync makes every byte before it durable, so such a
/// sector lies past the last sync, and so does everything after it. A record reaches the log as
/// its header and then its payload (or as one copy, split across blocks), so an older version of
/// a sector is zeros from one of those points to the sector's end: from the fragment's start,
/// from its payload's start, or from the start of a sector (wholly inside the data) that begins
/// inside it. Zeros starting anywhere else, or a wrong byte, are no lost write.
fn ends_in_lost_write(data: &[u8], pos: usize) -> bool {
    let block_end = (pos / BLOCK_SIZE + 1) * BLOCK_SIZE;
    // The fragment's extent as its header gives it, or just the header when that is damaged too.
    let end = match data.get(pos + 4..pos + HEADER_SIZE) {
        Some(&[lo, hi, ty]) if FragmentType::from_u8(ty).is_some() => {
            (pos + HEADER_SIZE + u16::from_le_bytes([lo, hi]) as usize).min(block_end)
        }
        _ => pos + HEADER_SIZE,
    };
    let zeros_to_sector_end = |from: usize| {
        let sector_end = (from / SECTOR + 1) * SECTOR;
        sector_end <= data.len() && data[from..sector_end].iter().all(|&b| b == 0)
    };
    zeros_to_sector_end(pos)
        || (pos + HEADER_SIZE < end && zeros_to_sector_end(pos + HEADER_SIZE))
        || ((pos / SECTOR + 1) * SECTOR..end)
            .step_by(SECTOR)
            .any(zeros_to_sector_end)
}

/// Reads the records of a whole log held in memory.
pub(crate) struct LogReader<'a> {
    data: &'a [u8],
    pos: usize,
    file: &'a Path,
    mode: ReadOutcome,
    /// Bytes dropped at the end: a write cut short, or damage no intact record follows.
    pub(crate) torn_tail_bytes: usize,
    /// Why the tail was dropped, when it was not merely cut short (bytes missing or zeroed, as a
    /// crash leaves them) but wrong: a checksum mismatch, an unknown type. A crash cannot write
    /// wrong bytes into a synced log, so a caller that synced every record calls that damage.
    pub(crate) tail_damage: Option<&'static str>,
    /// Where the tail dropped began with a lost write (`ends_in_lost_write`), which a power loss
    /// leaves, only past the last sync.
    pub(crate) lost_write_at: Option<usize>,
    /// Damaged regions skipped in `SkipDamage` mode.
    pub(crate) skipped_regions: usize,
    done: bool,
    /// Look for intact fragments after damage at every offset, not only at block starts.
    every_offset: bool,
    /// A WAL: damage that ends in a lost write (`ends_in_lost_write`) ends the log.
    wal: bool,
}

enum Physical<'a> {
    Fragment(FragmentType, &'a [u8]),
    /// Damage at this offset; the reader moves on to the next block.
    Bad(usize, &'static str),
    Eof,
}

impl<'a> LogReader<'a> {
    pub(crate) fn new(data: &'a [u8], file: &'a Path, mode: ReadOutcome) -> Self {
        LogReader {
            data,
            pos: 0,
            file,
            mode,
            torn_tail_bytes: 0,
            tail_damage: None,
            lost_write_at: None,
            skipped_regions: 0,
            done: false,
            every_offset: false,
            wal: false,
        }
    }

    /// Tells damage from a torn tail by looking for an intact fragment at every offset after it,
    /// not only at block starts: damage inside the last block is then found too. For the
    /// MANIFEST, whose records hold no user values; a WAL record's value may itself contain
    /// bytes that parse as a fragment, which would make a torn tail look like damage.
    pub(crate) fn scanning_every_offset(mut self) -> Self {
        self.every_offset = true;
        self
    }

    /// Reads a WAL: damage that ends in a lost write (`ends_in_lost_write`) ends it, in either
    /// mode, as a torn tail does: the records after it were never synced, and keeping them
    /// without the lost ones would keep later writes without earlier ones. Not for the MANIFEST,
    /// whose every edit is synced alone: there only the last can be cut, and zeros inside a
    /// record followed by others are damage.
    pub(crate) fn reading_a_wal(mut self) -> Self {
        self.wal = true;
        self
    }

    fn parse_at(
        data: &[u8],
        pos: usize,
    ) -> std::result::Result<(FragmentType, usize), &'static str> {
        let block_left = BLOCK_SIZE - pos % BLOCK_SIZE;
        if data.len() - pos < HEADER_SIZE {
            return Err("truncated fragment header");
        }
        let len = u16::from_le_bytes([data[pos + 4], data[pos + 5]]) as usize;
        let ty_byte = data[pos + 6];
        if ty_byte == 0 && len == 0 {
            return Err("zeroed space");
        }
        let Some(ty) = FragmentType::from_u8(ty_byte) else {
            return Err(if ends_in_zeros_within(data, pos, len) {
                "truncated fragment header"
            } else {
                "unknown fragment type"
            });
        };
        if HEADER_SIZE + len > block_left {
            return Err("fragment crosses a block boundary");
        }
        if pos + HEADER_SIZE + len > data.len() {
            // A crash leaves a prefix of the fragment, whose checksum cannot match; bytes that do
            // match are the whole fragment with its length field damaged.
            let rest = &data[pos + HEADER_SIZE..];
            if fixed32(data, pos) == fragment_crc(ty_byte, rest) {
                return Err("fragment length damaged");
            }
            return Err("truncated fragment");
        }
        let payload = &data[pos + HEADER_SIZE..pos + HEADER_SIZE + len];
        if fixed32(data, pos) != fragment_crc(ty_byte, payload) {
            return Err(if ends_in_zeros_within(data, pos, len) {
                "truncated fragment"
            } else {
                "checksum mismatch"
            });
        }
        Ok((ty, len))
    }

    fn next_physical(&mut self) -> Physical<'a> {
        loop {
            if self.pos >= self.data.len() {
                return Physical::Eof;
            }
            let block_left = BLOCK_SIZE - self.pos % BLOCK_SIZE;
            if block_left < HEADER_SIZE {
                self.pos += block_left; // trailer padding
                continue;
            }
            return match Self::parse_at(self.data, self.pos) {
                Ok((ty, len)) => {
                    let payload = &self.data[self.pos + HEADER_SIZE..self.pos + HEADER_SIZE + len];
                    self.pos += HEADER_SIZE + len;
                    Physical::Fragment(ty, payload)
                }
                Err(why) => {
                    let at = self.pos;
                    self.pos = (at / BLOCK_SIZE + 1) * BLOCK_SIZE;
                    Physical::Bad(at, why)
                }
            };
        }
    }

    /// True when some block at or after `from` starts with an intact fragment.
    fn intact_fragment_after(&self, from: usize) -> bool {
        if self.every_offset {
            return (from + 1..self.data.len()).any(|pos| {
                BLOCK_SIZE - pos % BLOCK_SIZE >= HEADER_SIZE
                    && Self::parse_at(self.data, pos).is_ok()
            });
        }
        let mut block = from.div_ceil(BLOCK_SIZE) * BLOCK_SIZE;
        while block < self.data.len() {
            if Self::parse_at(self.data, block).is_ok() {
                return true;
            }
            block += BLOCK_SIZE;
        }
        false
    }

    /// Handles damage at `damaged`, in a record that began at `at` (the bytes dropped at a torn
    /// tail start there): `Ok(true)` to keep reading, `Ok(false)` at a torn tail. Intact
    /// fragments are looked for after the damage, not after the record's start: a record cut in
    /// its last block by a crash is followed by its own intact first fragments, and is a torn
    /// tail all the same.
    /// In a WAL, a lost write (`reading_a_wal`) ends the log as a torn tail does, whatever follows.
    fn on_damage(&mut self, at: usize, damaged: usize, why: &'static str) -> Result<bool> {
        // A fragment out of order is intact itself: only bytes that fail their checks can be a
        // lost write.
        let lost_write = self.wal && why != OUT_OF_ORDER && ends_in_lost_write(self.data, damaged);
        if lost_write || !self.intact_fragment_after(damaged) {
            if lost_write {
                self.lost_write_at = Some(damaged);
            }
            self.torn_tail_bytes = self.data.len() - at;
            if !lost_write && !CUT_SHORT.contains(&why) {
                self.tail_damage = Some(why);
            }
            self.done = true;
            return Ok(false);
        }
        match self.mode {
            ReadOutcome::FailOnMidLogDamage => Err(Error::corruption(
                self.file,
                format!("{why} at offset {at}, followed by intact records"),
            )),
            ReadOutcome::SkipDamage => {
                self.skipped_regions += 1;
                Ok(true)
            }
        }
    }

    /// The next whole record, or `None` at the end (or at a torn tail).
    pub(crate) fn next_record(&mut self) -> Result<Option<Vec<u8>>> {
        let mut assembling: Option<(usize, Vec<u8>)> = None;
        while !self.done {
            let start = self.pos;
            match self.next_physical() {
                Physical::Eof => {
                    if let Some((at, _)) = assembling {
                        self.torn_tail_bytes = self.data.len() - at;
                    }
                    self.done = true;
                }
                Physical::Bad(damaged, why) => {
                    let at = assembling.take().map_or(damaged, |(s, _)| s.min(damaged));
                    if !self.on_damage(at, damaged, why)? {
                        return Ok(None);
                    }
                }
                Physical::Fragment(ty, payload) => match (ty, assembling.as_mut()) {
                    (FragmentType::Full, None) => return Ok(Some(payload.to_vec())),
                    (FragmentType::First, None) => assembling = Some((start, payload.to_vec())),
                    (FragmentType::Middle, Some((_, buf))) => buf.extend_from_slice(payload),
                    (FragmentType::Last, Some((_, buf))) => {
                        buf.extend_from_slice(payload);
                        return Ok(assembling.take().map(|(_, b)| b));
                    }
                    _ => {
                        let at = assembling.take().map_or(start, |(s, _)| s);
                        if !self.on_damage(at, start, OUT_OF_ORDER)? {
                            return Ok(None);
                        }
                        // A First or Full fragment may begin a new record right here.
                        if matches!(ty, FragmentType::Full) {
                            return Ok(Some(payload.to_vec()));
                        }
                        if matches!(ty, FragmentType::First) {
                            assembling = Some((start, payload.to_vec()));
                        }
                    }
                },
            }
        }
        Ok(None)
    }
}
