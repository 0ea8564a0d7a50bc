use super::{BLOCK_SIZE, FragmentType, HEADER_SIZE, fragment_crc};
use crate::error::Result;
use crate::fs::WritableFile;

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

    /// Frames `record` and appends it with one write call; returns the bytes appended.
    pub(crate) fn add_record(&mut self, record: &[u8]) -> Result<usize> {
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
                .extend_from_slice(&fragment_crc(ty as u8, payload).to_le_bytes());
            self.scratch.extend_from_slice(&(take as u16).to_le_bytes());
            self.scratch.push(ty as u8);
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

    pub(crate) fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    pub(crate) fn bytes_written(&self) -> u64 {
        self.bytes_written
    }
}
