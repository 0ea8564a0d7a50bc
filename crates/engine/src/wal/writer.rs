use super::{BLOCK_SIZE, FragmentType, HEADER_SIZE, fragment_crc};
use crate::error::Result;
use crate::fs::WritableFile;
use std::time::Instant;

/// Appends framed records to a log file.
#[derive(Debug)]
pub(crate) struct LogWriter {
    file: Box<dyn WritableFile>,
    block_offset: usize,
    scratch: Vec<u8>,
    bytes_written: u64,
}

impl LogWriter {
    pub(crate) fn new(file: Box<dyn WritableFile>) -> Self {
        LogWriter {
            file,
            block_offset: 0,
            scratch: Vec::new(),
            bytes_written: 0,
        }
    }

    /// Appends to `file`, which already holds `len` bytes of whole records (a log cut back to
    /// its last good record by [`crate::fs::FileSystem::reopen`]).
    pub(crate) fn resume(file: Box<dyn WritableFile>, len: u64) -> Self {
        LogWriter {
            file,
            block_offset: (len % BLOCK_SIZE as u64) as usize,
            scratch: Vec::new(),
            bytes_written: len,
        }
    }

    /// Frames `record` and appends it; returns the bytes appended.
    pub(crate) fn add_record(&mut self, record: &[u8]) -> Result<usize> {
        if HEADER_SIZE + record.len() <= BLOCK_SIZE - self.block_offset {
            // Fits the current block whole: header and payload go straight to the file's buffer,
            // without a copy into scratch first.
            let header = fragment_header(FragmentType::Full, record);
            self.file.append(&header)?;
            self.file.append(record)?;
            let n = HEADER_SIZE + record.len();
            self.block_offset += n;
            self.bytes_written += n as u64;
            return Ok(n);
        }
        self.scratch.clear();
        let mut rest = record;
        let mut first = true;
        loop {
            let left_in_block = BLOCK_SIZE - self.block_offset;
            if left_in_block < HEADER_SIZE {
                // Too small for a header: pad so the next fragment starts a block.
                self.scratch.extend(std::iter::repeat_n(0u8, left_in_block));
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let take = rest.len().min(avail);
            let last = take == rest.len();
            let ty = match (first, last) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, true) => FragmentType::Last,
                (false, false) => FragmentType::Middle,
            };
            let payload = &rest[..take];
            self.scratch
                .extend_from_slice(&fragment_header(ty, payload));
            self.scratch.extend_from_slice(payload);
            self.block_offset += HEADER_SIZE + take;
            rest = &rest[take..];
            first = false;
            if last {
                break;
            }
        }
        self.file.append(&self.scratch)?;
        self.bytes_written += self.scratch.len() as u64;
        Ok(self.scratch.len())
    }

    /// `WritableFile::reserves_ahead`.
    pub(crate) fn reserves_ahead(&self) -> bool {
        self.file.reserves_ahead()
    }

    pub(crate) fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Syncs for the last time: nothing is appended after (a sealed WAL). A backend that keeps
    /// WALs elsewhere too completes its copy here.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.file.finish()
    }

    /// When the file would have a sync as far as `durability` start (`WritableFile::sync_not_before`).
    pub(crate) fn sync_not_before(
        &self,
        durability: Option<crate::fs::Durability>,
    ) -> Option<Instant> {
        self.file.sync_not_before(durability)
    }

    /// Syncs as far as `durability`, or the store's default when `None`.
    pub(crate) fn sync_to(&mut self, durability: Option<crate::fs::Durability>) -> Result<()> {
        match durability {
            Some(d) => self.file.sync_to(d),
            None => self.file.sync(),
        }
    }

    pub(crate) fn bytes_written(&self) -> u64 {
        self.bytes_written
    }
}

/// `crc: u32 LE | length: u16 LE | type: u8` for one fragment carrying `payload`.
fn fragment_header(ty: FragmentType, payload: &[u8]) -> [u8; HEADER_SIZE] {
    let mut h = [0u8; HEADER_SIZE];
    h[..4].copy_from_slice(&fragment_crc(ty as u8, payload).to_le_bytes());
    h[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    h[6] = ty as u8;
    h
}
