//! An open file's contents: the store's value as read (shared, not copied), then, once written,
//! a copy in memory while small, spilled to an unnamed temporary file in the store's directory
//! once past `spill_at`, so memory per open file is bounded.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use strata_engine::PinnableValue;

#[derive(Debug)]
pub(crate) enum Buffer {
    /// The value as the store returned it, unchanged.
    Stored(PinnableValue),
    Memory(Vec<u8>),
    Spilled {
        file: File,
        len: u64,
    },
}

impl Buffer {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Buffer::Stored(v) => v.len() as u64,
            Buffer::Memory(v) => v.len() as u64,
            Buffer::Spilled { len, .. } => *len,
        }
    }

    /// Up to `size` bytes from `offset` (fewer at the end).
    pub(crate) fn read(&self, offset: u64, size: usize) -> std::io::Result<Cow<'_, [u8]>> {
        let len = self.len();
        if offset >= len {
            return Ok(Cow::Borrowed(&[]));
        }
        let n = (size as u64).min(len - offset) as usize;
        let range = offset as usize..offset as usize + n;
        match self {
            Buffer::Stored(v) => Ok(Cow::Borrowed(&v[range])),
            Buffer::Memory(v) => Ok(Cow::Borrowed(&v[range])),
            Buffer::Spilled { file, .. } => {
                let mut out = vec![0; n];
                file.read_exact_at(&mut out, offset)?;
                Ok(Cow::Owned(out))
            }
        }
    }

    /// Makes the contents writable: a private copy, spilled if it is past `spill_at` already.
    fn own(&mut self, spill_at: u64, spill_dir: &Path) -> std::io::Result<()> {
        if let Buffer::Stored(v) = self {
            *self = if v.len() as u64 > spill_at {
                spill(v, spill_dir)?
            } else {
                Buffer::Memory(v.to_vec())
            };
        }
        Ok(())
    }

    /// Writes `data` at `offset`, filling any gap with zeros; spills past `spill_at` bytes.
    pub(crate) fn write(
        &mut self,
        offset: u64,
        data: &[u8],
        spill_at: u64,
        spill_dir: &Path,
    ) -> std::io::Result<()> {
        self.own(spill_at, spill_dir)?;
        let end = offset + data.len() as u64;
        if let Buffer::Memory(v) = self
            && end > spill_at
        {
            *self = spill(v, spill_dir)?;
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
            Buffer::Stored(_) => unreachable!("owned above"),
        }
        Ok(())
    }

    pub(crate) fn set_len(
        &mut self,
        new_len: u64,
        spill_at: u64,
        spill_dir: &Path,
    ) -> std::io::Result<()> {
        self.own(spill_at, spill_dir)?;
        if let Buffer::Memory(v) = self
            && new_len > spill_at
        {
            *self = spill(v, spill_dir)?;
        }
        match self {
            Buffer::Memory(v) => v.resize(new_len as usize, 0),
            Buffer::Spilled { file, len } => {
                file.set_len(new_len)?;
                *len = new_len;
            }
            Buffer::Stored(_) => unreachable!("owned above"),
        }
        Ok(())
    }

    /// The whole contents, for the store: a spilled file is mapped, not read into memory.
    pub(crate) fn contents(&self) -> std::io::Result<Contents<'_>> {
        Ok(match self {
            Buffer::Stored(v) => Contents::Borrowed(v),
            Buffer::Memory(v) => Contents::Borrowed(v),
            Buffer::Spilled { len: 0, .. } => Contents::Borrowed(&[]),
            Buffer::Spilled { file, len } => {
                // SAFETY: the spill file has no name, so no other process can open it, and this
                // buffer holds its only handle: nothing changes or truncates it while `&self`
                // borrows the map. Exercised by the spill tests here and the mount's large-file
                // test.
                let map = unsafe {
                    memmap2::MmapOptions::new()
                        .len(*len as usize)
                        .populate()
                        .map(file)?
                };
                Contents::Mapped(map)
            }
        })
    }
}

/// A buffer's whole contents.
pub(crate) enum Contents<'a> {
    Borrowed(&'a [u8]),
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Contents<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Contents::Borrowed(b) => b,
            Contents::Mapped(m) => m,
        }
    }
}

fn spill(bytes: &[u8], dir: &Path) -> std::io::Result<Buffer> {
    let file = tempfile::tempfile_in(dir)?;
    file.write_all_at(bytes, 0)?;
    Ok(Buffer::Spilled {
        file,
        len: bytes.len() as u64,
    })
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
        assert_eq!(&*b.read(0, 100).unwrap(), b"hello\0\0\0world");
        b.write(20, b"!", 16, dir.path()).unwrap();
        assert!(matches!(b, Buffer::Spilled { .. }));
        assert_eq!(b.len(), 21);
        assert_eq!(&*b.read(5, 3).unwrap(), b"\0\0\0");
        assert_eq!(&*b.read(20, 10).unwrap(), b"!");
        assert_eq!(&*b.read(21, 10).unwrap(), b"");
        b.set_len(5, 16, dir.path()).unwrap();
        assert_eq!(&*b.contents().unwrap(), b"hello");
        // The spill file has no name: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_stored_value_is_copied_only_when_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut small = Buffer::Stored(PinnableValue::from(b"abc".to_vec()));
        assert_eq!(&*small.read(1, 10).unwrap(), b"bc");
        small.write(3, b"d", 16, dir.path()).unwrap();
        assert!(matches!(small, Buffer::Memory(_)));
        assert_eq!(&*small.contents().unwrap(), b"abcd");
        let mut large = Buffer::Stored(PinnableValue::from(vec![7; 40]));
        large.set_len(30, 16, dir.path()).unwrap();
        assert!(matches!(large, Buffer::Spilled { .. }));
        assert_eq!(&*large.contents().unwrap(), &[7; 30][..]);
    }
}
