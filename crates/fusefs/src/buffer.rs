//! An open file's contents: the store's value as read (shared, not copied), then, once written,
//! a copy in memory while small. Past the spill threshold the contents move out of memory, so
//! memory per open file is bounded: into a value file of the store (the bytes are written once,
//! where the store keeps them, and flushing adopts the file rather than copying it), or, for a
//! column family that keeps no blob files, into an unnamed temporary file.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use strata_engine::{ColumnFamily, Db, PinnableValue, ValueFile};

use crate::error::{FsError, Result};

#[derive(Debug)]
pub(crate) enum Buffer {
    /// The value as the store returned it, unchanged.
    Stored(PinnableValue),
    Memory(Vec<u8>),
    /// Spilled to a temporary file.
    Spilled {
        file: File,
        len: u64,
    },
    /// Spilled to a value file of the store, for the key the file had then.
    Value(ValueFile),
}

/// Where a buffer goes once it holds more than `at` bytes.
pub(crate) struct Spill<'a> {
    pub(crate) at: u64,
    pub(crate) to: SpillTo<'a>,
}

pub(crate) enum SpillTo<'a> {
    /// A value file for `key` of `cf`, which keeps blob files.
    ValueFile {
        db: &'a Db,
        cf: &'a ColumnFamily,
        key: &'a [u8],
    },
    /// An unnamed temporary file in this directory.
    TempFile(&'a Path),
}

fn spill_error(e: std::io::Error) -> FsError {
    FsError::io("spill file", e)
}

impl Spill<'_> {
    /// A spilled buffer holding `bytes`.
    fn spill(&self, bytes: &[u8]) -> Result<Buffer> {
        match &self.to {
            SpillTo::ValueFile { db, cf, key } => {
                let mut vf = db.create_value_file(cf, key)?;
                vf.write_at(0, bytes)?;
                Ok(Buffer::Value(vf))
            }
            SpillTo::TempFile(dir) => {
                let file = tempfile::tempfile_in(dir).map_err(spill_error)?;
                file.write_all_at(bytes, 0).map_err(spill_error)?;
                Ok(Buffer::Spilled {
                    file,
                    len: bytes.len() as u64,
                })
            }
        }
    }
}

impl Buffer {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Buffer::Stored(v) => v.len() as u64,
            Buffer::Memory(v) => v.len() as u64,
            Buffer::Spilled { len, .. } => *len,
            Buffer::Value(vf) => vf.len(),
        }
    }

    /// Up to `size` bytes from `offset` (fewer at the end).
    pub(crate) fn read(&self, offset: u64, size: usize) -> Result<Cow<'_, [u8]>> {
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
                file.read_exact_at(&mut out, offset).map_err(spill_error)?;
                Ok(Cow::Owned(out))
            }
            Buffer::Value(vf) => {
                let mut out = vec![0; n];
                let read = vf.read_at(offset, &mut out)?;
                out.truncate(read);
                Ok(Cow::Owned(out))
            }
        }
    }

    /// Makes the contents writable: a private copy, spilled if it is past the threshold already.
    fn own(&mut self, spill: &Spill) -> Result<()> {
        if let Buffer::Stored(v) = self {
            *self = if v.len() as u64 > spill.at {
                spill.spill(v)?
            } else {
                Buffer::Memory(v.to_vec())
            };
        }
        Ok(())
    }

    /// Makes the contents writable and spills them if they are to grow to `end` bytes, past the
    /// threshold.
    fn own_for(&mut self, end: u64, spill: &Spill) -> Result<()> {
        self.own(spill)?;
        if let Buffer::Memory(v) = self
            && end > spill.at
        {
            *self = spill.spill(v)?;
        }
        Ok(())
    }

    /// Writes `data` at `offset`, filling any gap with zeros.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8], spill: &Spill) -> Result<()> {
        let end = offset + data.len() as u64;
        self.own_for(end, spill)?;
        match self {
            Buffer::Memory(v) => {
                let (offset, end) = (offset as usize, end as usize);
                if v.len() < end {
                    v.resize(end, 0);
                }
                v[offset..end].copy_from_slice(data);
            }
            Buffer::Spilled { file, len } => {
                file.write_all_at(data, offset).map_err(spill_error)?;
                *len = (*len).max(end);
            }
            Buffer::Value(vf) => vf.write_at(offset, data)?,
            Buffer::Stored(_) => unreachable!("owned above"),
        }
        Ok(())
    }

    pub(crate) fn set_len(&mut self, new_len: u64, spill: &Spill) -> Result<()> {
        self.own_for(new_len, spill)?;
        match self {
            Buffer::Memory(v) => v.resize(new_len as usize, 0),
            Buffer::Spilled { file, len } => {
                file.set_len(new_len).map_err(spill_error)?;
                *len = new_len;
            }
            Buffer::Value(vf) => vf.set_len(new_len)?,
            Buffer::Stored(_) => unreachable!("owned above"),
        }
        Ok(())
    }

    /// The whole contents, for the store: a spilled file is mapped, not read into memory. A
    /// value file has none to give: it is stored as it is.
    pub(crate) fn contents(&self) -> Result<Contents<'_>> {
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
                        .map(file)
                        .map_err(spill_error)?
                };
                Contents::Mapped(map)
            }
            Buffer::Value(_) => {
                return Err(FsError::posix(
                    libc::EIO,
                    "a value file is stored whole, not copied",
                ));
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

#[cfg(test)]
mod tests {
    use strata_engine::{Options, WriteBatch, WriteOptions};

    use super::*;

    fn temp_spill(dir: &Path) -> Spill<'_> {
        Spill {
            at: 16,
            to: SpillTo::TempFile(dir),
        }
    }

    #[test]
    fn writes_past_the_threshold_spill_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let spill = temp_spill(dir.path());
        let mut b = Buffer::Memory(Vec::new());
        b.write(0, b"hello", &spill).unwrap();
        b.write(8, b"world", &spill).unwrap();
        assert!(matches!(b, Buffer::Memory(_)));
        assert_eq!(&*b.read(0, 100).unwrap(), b"hello\0\0\0world");
        b.write(20, b"!", &spill).unwrap();
        assert!(matches!(b, Buffer::Spilled { .. }));
        assert_eq!(b.len(), 21);
        assert_eq!(&*b.read(5, 3).unwrap(), b"\0\0\0");
        assert_eq!(&*b.read(20, 10).unwrap(), b"!");
        assert_eq!(&*b.read(21, 10).unwrap(), b"");
        b.set_len(5, &spill).unwrap();
        assert_eq!(&*b.contents().unwrap(), b"hello");
        // The spill file has no name: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_stored_value_is_copied_only_when_written() {
        let dir = tempfile::tempdir().unwrap();
        let spill = temp_spill(dir.path());
        let mut small = Buffer::Stored(PinnableValue::from(b"abc".to_vec()));
        assert_eq!(&*small.read(1, 10).unwrap(), b"bc");
        small.write(3, b"d", &spill).unwrap();
        assert!(matches!(small, Buffer::Memory(_)));
        assert_eq!(&*small.contents().unwrap(), b"abcd");
        let mut large = Buffer::Stored(PinnableValue::from(vec![7; 40]));
        large.set_len(30, &spill).unwrap();
        assert!(matches!(large, Buffer::Spilled { .. }));
        assert_eq!(&*large.contents().unwrap(), &[7; 30][..]);
    }

    #[test]
    fn a_buffer_spills_into_a_value_file_the_store_can_adopt() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = Options::default();
        opts.cf.enable_blob_files = true;
        let db = Db::open(dir.path(), opts).unwrap();
        let cf = db.default_cf();
        let spill = Spill {
            at: 16,
            to: SpillTo::ValueFile {
                db: &db,
                cf: &cf,
                key: b"big",
            },
        };
        let mut b = Buffer::Stored(PinnableValue::from(vec![1; 20]));
        b.write(30, b"tail", &spill).unwrap();
        assert_eq!(b.len(), 34);
        assert_eq!(&*b.read(18, 4).unwrap(), &[1, 1, 0, 0]);
        assert_eq!(&*b.read(30, 100).unwrap(), b"tail");
        b.set_len(32, &spill).unwrap();
        assert!(b.contents().is_err(), "a value file is stored, not copied");
        let Buffer::Value(vf) = b else {
            panic!("expected a value file, got {b:?}")
        };
        db.write_with_value_file(WriteBatch::new(), vf, &WriteOptions::default())
            .unwrap();
        let mut want = vec![1; 20];
        want.resize(30, 0);
        want.extend_from_slice(b"ta");
        assert_eq!(&*db.get(b"big").unwrap().unwrap(), &want[..]);
    }
}
