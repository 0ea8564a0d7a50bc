//! One read of a batch issued together (a MultiGet's missing blocks), so that their waits on the
//! device overlap instead of adding up (`fs::read_batch`). On Linux they go through io_uring
//! (`uring.rs`) when the files offer a descriptor ([`RandomAccessFile::raw_fd`]); any read that
//! path does not complete, and every read elsewhere, is a `read_vec_at` of its own
//! (`BatchRead::into_result`), whose errors name the file.

use super::RandomAccessFile;
use crate::error::Result;

/// One read of a batch: `len` bytes at `offset` of `file`.
#[derive(Debug)]
pub(crate) struct BatchRead<'a> {
    pub file: &'a dyn RandomAccessFile,
    pub offset: u64,
    pub len: usize,
    /// The bytes, when `read_batch` could read them together with the others.
    pub done: Option<Vec<u8>>,
}

impl<'a> BatchRead<'a> {
    pub(crate) fn new(file: &'a dyn RandomAccessFile, offset: u64, len: usize) -> Self {
        BatchRead {
            file,
            offset,
            len,
            done: None,
        }
    }

    /// The bytes read; a read `read_batch` left undone is performed now, alone.
    pub(crate) fn into_result(self) -> Result<Vec<u8>> {
        match self.done {
            Some(bytes) => Ok(bytes),
            None => self.file.read_vec_at(self.len, self.offset),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::fs::{FaultInjectionFs, FileSystem, StdFileSystem, read_batch};

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    /// More reads than a ring takes at once, from two files, one of which offers no descriptor
    /// (every read of it goes one by one); a read past the end fails naming the file.
    #[test]
    fn batches_read_exactly_the_bytes_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let data = pattern(1 << 20);
        let (a, b) = (dir.path().join("a.sst"), dir.path().join("b.sst"));
        std::fs::write(&a, &data).unwrap();
        std::fs::write(&b, &data).unwrap();
        let plain = StdFileSystem.open_random(&a).unwrap();
        let wrapped = FaultInjectionFs::new().open_random(&b).unwrap();
        let wanted: Vec<(usize, u64, usize)> = (0..150)
            .map(|i| (i % 3, (i as u64 * 6007) % 900_000, 1 + (i * 131) % 5000))
            .collect();
        let mut reads: Vec<BatchRead<'_>> = wanted
            .iter()
            .map(|&(f, offset, len)| {
                let file = if f == 2 {
                    wrapped.as_ref()
                } else {
                    plain.as_ref()
                };
                BatchRead::new(file, offset, len)
            })
            .collect();
        reads.push(BatchRead::new(plain.as_ref(), (1 << 20) - 10, 20));
        read_batch(&mut reads);
        let past_end = reads.pop().unwrap().into_result().unwrap_err();
        assert!(past_end.to_string().contains("a.sst"), "{past_end}");
        for (r, &(_, offset, len)) in reads.into_iter().zip(&wanted) {
            let at = offset as usize;
            assert_eq!(
                r.into_result().unwrap(),
                &data[at..at + len],
                "{offset}+{len}"
            );
        }
    }
}
