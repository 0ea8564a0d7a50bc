//! Copying a data object from one bucket (or prefix) to another, and checking one: a piece at a
//! time, so memory is bounded by the piece however big the object, and never trusting a copy
//! whose length and CRC differ from what the record says.

use std::path::PathBuf;

use bytes::Bytes;
use strata_engine::{Error, Result};

use crate::client::{Client, Created};

use crate::shared::PIECE;

fn mismatch(client: &Client, key: &str, got: (u64, u32), want: (u64, u32)) -> Error {
    Error::Corruption {
        file: PathBuf::from(client.object(key)),
        detail: format!(
            "holds {} bytes of CRC {:#010x}; its record says {} of {:#010x}",
            got.0, got.1, want.0, want.1
        ),
    }
}

fn missing(client: &Client, key: &str) -> Error {
    Error::Corruption {
        file: PathBuf::from(client.object(key)),
        detail: "missing: a record names it, the bucket has no such object".into(),
    }
}

/// Reads the whole object `key`, a ranged GET per piece (each under the request timeout however
/// big the object), and checks it holds `len` bytes of CRC32C `crc`.
pub(crate) fn verify_object(client: &Client, key: &str, len: u64, crc: u32) -> Result<()> {
    let Some(found) = client.head(key)? else {
        return Err(missing(client, key));
    };
    if found != len {
        return Err(mismatch(client, key, (found, 0), (len, crc)));
    }
    let (mut at, mut got) = (0u64, 0u32);
    while at < len {
        let piece = client.get_range(key, at..at + PIECE.min(len - at))?;
        if piece.is_empty() {
            break;
        }
        got = crc32c::crc32c_append(got, &piece);
        at += piece.len() as u64;
    }
    if (at, got) != (len, crc) {
        return Err(mismatch(client, key, (at, got), (len, crc)));
    }
    Ok(())
}

/// Copies `from`'s object `key` (`len` bytes of CRC `crc`) to `to` as `to_key` (see
/// `put_checked`), renewing `lease` (the copy's hold on `from`'s version) as each piece is
/// read when it is due: one large object on a slow link may take longer than the lease.
pub(crate) fn copy_object(
    from: &Client,
    (key, len, crc): (&str, u64, u32),
    to: &Client,
    to_key: &str,
    lease: Option<&crate::lease::ReaderLease>,
) -> Result<()> {
    let read = |at: u64, n: u64| {
        if let Some(lease) = lease {
            lease.renew_if_due(from)?;
        }
        if (at, n) == (0, len) {
            from.get(key)?.ok_or_else(|| missing(from, key))
        } else {
            from.get_range(key, at..at + n)
        }
    };
    put_checked(to, to_key, len, crc, read, |got| {
        mismatch(from, key, got, (len, crc))
    })
}

/// PUTs the `len` bytes of CRC `crc` that `read(offset, n)` gives as `to`'s object `key`,
/// checking them before the object exists: a single create-only PUT up to a piece, else a
/// multipart upload (one piece in memory) whose parts are checked as they pass, deleted again if
/// the whole does not match. A multipart upload cannot be create-only, so an object already
/// there is checked instead of replaced, as is one a create-only PUT finds (names are never
/// reused for other bytes). `differs(got)` is the error when what was read is not what was
/// promised.
pub(crate) fn put_checked(
    to: &Client,
    key: &str,
    len: u64,
    crc: u32,
    mut read: impl FnMut(u64, u64) -> Result<Bytes>,
    differs: impl Fn((u64, u32)) -> Error,
) -> Result<()> {
    if len <= PIECE {
        let bytes = read(0, len)?;
        let got = (bytes.len() as u64, crc32c::crc32c(&bytes));
        if got != (len, crc) {
            return Err(differs(got));
        }
        return match to.put_create(key, bytes)? {
            Created::Yes => Ok(()),
            Created::AlreadyThere => verify_object(to, key, len, crc),
        };
    }
    if to.head(key)?.is_some() {
        return verify_object(to, key, len, crc);
    }
    let (mut at, mut sent) = (0u64, 0u32);
    to.put_multipart(key, || {
        if at >= len {
            return Ok(None);
        }
        let n = PIECE.min(len - at);
        let piece = read(at, n)?;
        if piece.len() as u64 != n {
            return Err(differs((at + piece.len() as u64, sent)));
        }
        sent = crc32c::crc32c_append(sent, &piece);
        at += n;
        // Checked before the last part goes, so a mismatch aborts the upload instead of
        // completing it over what may be another run's good copy.
        if at == len && sent != crc {
            return Err(differs((len, sent)));
        }
        Ok(Some(piece))
    })?;
    if sent != crc {
        to.delete(key)?;
        return Err(differs((len, sent)));
    }
    Ok(())
}

/// A data object's name in a store it is copied into: under epoch 0 (never a writer's), then
/// the copying run's own name (two runs into one store never share one), its place in the copy,
/// and the file name the source gave it.
pub(crate) fn copied_key(run: &str, index: usize, source_key: &str) -> String {
    let base = source_key.rsplit('/').next().unwrap_or(source_key);
    format!("data/0000000000/{run}/{index:08}-{base}")
}
