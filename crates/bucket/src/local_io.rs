//! What the backend does with files in the working copy that the engine does not: reading them
//! back a bounded buffer at a time to check them, and naming them in its errors.

use std::fs::File;
use std::os::unix::fs::FileExt;

use strata_engine::Error;

/// Maps an I/O failure to the engine's error, saying what was being done.
pub(crate) fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::Io {
        context: what,
        source: e,
    }
}

/// The CRC32C of the first `len` bytes of `file`, read a megabyte at a time.
pub(crate) fn crc_of_prefix(file: &File, len: u64) -> std::io::Result<u32> {
    let mut crc = 0u32;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < len {
        let n = (len - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        at += n as u64;
    }
    Ok(crc)
}

/// The length and CRC32C of the whole file at `path`; `None` when it cannot be read.
pub(crate) fn crc_of(path: &std::path::Path) -> Option<(u64, u32)> {
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    Some((len, crc_of_prefix(&file, len).ok()?))
}
