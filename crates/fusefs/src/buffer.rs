//! An open file's contents while it is written: in memory while small, spilled to an unnamed
//! temporary file in the store's directory once past `spill_at`, so memory per open file is
//! bounded.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

#[derive(Debug)]
pub(crate) enum Buffer {
    Memory(Vec<u8>),
    Spilled { file: File, len: u64 },
}

impl Buffer {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Buffer::Memory(v) => v.len() as u64,
            Buffer::Spilled { len, .. } => *len,
        }
    }

    /// Up to `size` bytes from `offset` (fewer at the end).
    pub(crate) fn read(&self, offset: u64, size: usize) -> std::io::Result<Vec<u8>> {
        let len = self.len();
        if offset >= len {
            return Ok(Vec::new());
        }
        let n = (size as u64).min(len - offset) as usize;
        match self {
            Buffer::Memory(v) => Ok(v[offset as usize..offset as usize + n].to_vec()),
            Buffer::Spilled { file, .. } => {
                let mut out = vec![0; n];
                file.read_exact_at(&mut out, offset)?;
                Ok(out)
            }
        }
    }

    /// Writes `data` at `offset`, filling any gap with zeros; spills past `spill_at` bytes.
    pub(crate) fn write(
        &mut self,
        offset: u64,
        data: &[u8],
        spill_at: u64,
        spill_dir: &Path,
    ) -> std::io::Result<()> {
        let end = offset + data.len() as u64;
        if let Buffer::Memory(v) = self
            && end > spill_at
        {
            let file = tempfile::tempfile_in(spill_dir)?;
            file.write_all_at(v, 0)?;
            *self = Buffer::Spilled {
                file,
                len: v.len() as u64,
            };
        }
        match self {
            Buffer::Memory(v) => {
                let (offset, end) = (offset as usize, end as usize);
                if v.len() < end {
                    v.resize(end, 0);
                }
                v[offset..end].copy_from_slice(data);
            }
            Buffer::Spilled { file, len } => {
                file.write_all_at(data, offset)?;
                *len = (*len).max(end);
            }
        }
        Ok(())
    }

    pub(crate) fn set_len(&mut self, new_len: u64) -> std::io::Result<()> {
        match self {
            Buffer::Memory(v) => v.resize(new_len as usize, 0),
            Buffer::Spilled { file, len } => {
                file.set_len(new_len)?;
                *len = new_len;
            }
        }
        Ok(())
    }

    /// The whole contents, for the store.
    pub(crate) fn contents(&self) -> std::io::Result<std::borrow::Cow<'_, [u8]>> {
        match self {
            Buffer::Memory(v) => Ok(std::borrow::Cow::Borrowed(v)),
            Buffer::Spilled { len, .. } => {
                Ok(std::borrow::Cow::Owned(self.read(0, *len as usize)?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_past_the_threshold_spill_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Buffer::Memory(Vec::new());
        b.write(0, b"hello", 16, dir.path()).unwrap();
        b.write(8, b"world", 16, dir.path()).unwrap();
        assert!(matches!(b, Buffer::Memory(_)));
        assert_eq!(b.read(0, 100).unwrap(), b"hello\0\0\0world");
        b.write(20, b"!", 16, dir.path()).unwrap();
        assert!(matches!(b, Buffer::Spilled { .. }));
        assert_eq!(b.len(), 21);
        assert_eq!(b.read(5, 3).unwrap(), b"\0\0\0");
        assert_eq!(b.read(20, 10).unwrap(), b"!");
        assert_eq!(b.read(21, 10).unwrap(), b"");
        b.set_len(5).unwrap();
        assert_eq!(&*b.contents().unwrap(), b"hello");
        // The spill file has no name: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
