//! Positional reads through `wasi:filesystem` itself on wasm32-wasip2. The standard library's
//! `read_at` there goes through wasi-libc, which opens an input stream, reads it into a fresh
//! list, copies that into the caller's zeroed buffer and closes the stream: three host calls,
//! a zero-fill and a copy per table block. `descriptor.read` is one host call whose list becomes
//! the block's buffer as it is.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use wasip2::filesystem::preopens::get_directories;
use wasip2::filesystem::types::{Descriptor, DescriptorFlags, ErrorCode, OpenFlags, PathFlags};

use super::{RandomAccessFile, io_err};
use crate::error::Result;

#[derive(Debug)]
pub(super) struct WasiRandomAccessFile {
    path: PathBuf,
    file: Descriptor,
    len: u64,
}

/// The preopened directories and the absolute guest paths they are mounted at; asked once, as
/// each call hands out new handles.
fn preopens() -> &'static [(Descriptor, PathBuf)] {
    static PREOPENS: OnceLock<Vec<(Descriptor, PathBuf)>> = OnceLock::new();
    PREOPENS.get_or_init(|| {
        get_directories()
            .into_iter()
            .map(|(dir, name)| (dir, PathBuf::from(name)))
            .filter(|(_, at)| at.is_absolute())
            .collect()
    })
}

fn io_error(code: ErrorCode) -> std::io::Error {
    let kind = match code {
        ErrorCode::NoEntry => std::io::ErrorKind::NotFound,
        ErrorCode::Access | ErrorCode::NotPermitted => std::io::ErrorKind::PermissionDenied,
        ErrorCode::IsDirectory => std::io::ErrorKind::IsADirectory,
        ErrorCode::InsufficientMemory => std::io::ErrorKind::OutOfMemory,
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, code)
}

/// Opens `path` for reading below the preopened directory holding it (the deepest), or `None`
/// when it is under none (a relative path), for the standard library to open.
pub(super) fn open(path: &Path) -> Option<Result<WasiRandomAccessFile>> {
    let (dir, rest) = preopens()
        .iter()
        .filter_map(|(dir, at)| Some((dir, path.strip_prefix(at).ok()?)))
        .min_by_key(|(_, rest)| rest.components().count())?;
    let rest = rest.to_str()?;
    let opened = dir
        .open_at(
            PathFlags::SYMLINK_FOLLOW,
            rest,
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
        .map_err(|e| io_err("open", path, io_error(e)))
        .and_then(|file| {
            let len = file
                .stat()
                .map_err(|e| io_err("stat", path, io_error(e)))?
                .size;
            Ok(WasiRandomAccessFile {
                path: path.to_path_buf(),
                file,
                len,
            })
        });
    Some(opened)
}

impl RandomAccessFile for WasiRandomAccessFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let bytes = self.read_vec_at(buf.len(), offset)?;
        buf.copy_from_slice(&bytes);
        Ok(())
    }

    fn read_vec_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        let mut out: Vec<u8> = Vec::new();
        while out.len() < len {
            let at = offset + out.len() as u64;
            let want = (len - out.len()) as u64;
            let (chunk, _end) = self
                .file
                .read(want, at)
                .map_err(|e| io_err("read", &self.path, io_error(e)))?;
            if chunk.is_empty() {
                let eof = std::io::ErrorKind::UnexpectedEof.into();
                return Err(io_err("read", &self.path, eof));
            }
            if out.is_empty() {
                out = chunk;
            } else {
                out.extend_from_slice(&chunk);
            }
        }
        Ok(out)
    }

    fn len(&self) -> Result<u64> {
        Ok(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_below_a_preopen_and_refuses_past_the_end() {
        let dir = crate::test_dir::tempdir();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = open(&path)
            .expect("the test directory is under a preopen")
            .unwrap();
        assert_eq!(file.len().unwrap(), 10_000);
        assert_eq!(file.read_vec_at(4096, 100).unwrap(), &data[100..4196]);
        let mut buf = [0u8; 10];
        file.read_exact_at(&mut buf, 9_990).unwrap();
        assert_eq!(buf, data[9_990..]);
        assert!(file.read_vec_at(11, 9_990).is_err());
        let missing = open(&dir.path().join("missing")).unwrap().unwrap_err();
        assert!(missing.to_string().contains("missing"), "{missing}");
        assert!(open(Path::new("relative/f")).is_none());
    }
}
