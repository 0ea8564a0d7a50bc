//! Blob indexes: what the LSM stores (as a `BlobIndex` entry) in place of a value that lives in a
//! blob file or carries an expiration. Three forms, as RocksDB's BlobDB:
//!
//! - `0 | expiration: varint64 | value...`: a small value with a TTL, kept inline;
//! - `1 | file: varint64 | offset: varint64 | size: varint64 | stored: u8`: a blob;
//! - `2 | expiration: varint64 | file | offset | size | stored`: a blob with a TTL.
//!
//! `stored` is the record's layout (`format::Stored`): 0 raw, 1 zstd, 2 chunked.
//!
//! `offset` and `size` locate the whole record (header, key and value) in the blob file, so one
//! read fetches and verifies it.

use super::extents::{EXTENTS, Extents};
use super::format::Stored;
use crate::coding::{get_varint64, put_varint64};

const INLINE_TTL: u8 = 0;
const BLOB: u8 = 1;
const BLOB_TTL: u8 = 2;

/// Where a blob record lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BlobRef {
    pub file: u64,
    pub offset: u64,
    pub size: u64,
    /// How the record holds the value.
    pub stored: Stored,
}

/// A decoded blob index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlobIndex<'a> {
    /// A small value kept inline with its expiration.
    Inline { expiration: u64, value: &'a [u8] },
    /// A value in a blob file; `expiration` is 0 when it never expires.
    Blob { expiration: u64, blob: BlobRef },
    /// A value pieced together from extents (`Extents::decode(data)` succeeds).
    Extents { expiration: u64, data: &'a [u8] },
}

impl<'a> BlobIndex<'a> {
    /// Decodes an index; `None` when it is malformed.
    pub(crate) fn decode(data: &'a [u8]) -> Option<Self> {
        let ty = *data.first()?;
        let mut pos = 1;
        let expiration = match ty {
            INLINE_TTL | BLOB_TTL => get_varint64(data, &mut pos)?,
            BLOB => 0,
            EXTENTS => {
                let x = Extents::decode(data)?;
                return Some(BlobIndex::Extents {
                    expiration: x.expiration,
                    data,
                });
            }
            _ => return None,
        };
        if ty == INLINE_TTL {
            return Some(BlobIndex::Inline {
                expiration,
                value: &data[pos..],
            });
        }
        let file = get_varint64(data, &mut pos)?;
        let offset = get_varint64(data, &mut pos)?;
        let size = get_varint64(data, &mut pos)?;
        let stored = Stored::from_byte(*data.get(pos)?)?;
        (pos + 1 == data.len()).then_some(BlobIndex::Blob {
            expiration,
            blob: BlobRef {
                file,
                offset,
                size,
                stored,
            },
        })
    }

    /// When the value expires (seconds since the epoch); 0: never.
    pub(crate) fn expiration(&self) -> u64 {
        match *self {
            BlobIndex::Inline { expiration, .. }
            | BlobIndex::Blob { expiration, .. }
            | BlobIndex::Extents { expiration, .. } => expiration,
        }
    }

    /// True once the clock reads `now` or later than the expiration.
    pub(crate) fn is_expired(&self, now: u64) -> bool {
        let e = self.expiration();
        e != 0 && now >= e
    }

    /// The blob record, for the forms that point into a file.
    pub(crate) fn blob(&self) -> Option<BlobRef> {
        match *self {
            BlobIndex::Blob { blob, .. } => Some(blob),
            BlobIndex::Inline { .. } | BlobIndex::Extents { .. } => None,
        }
    }

    /// Every blob record the index names, each once.
    pub(crate) fn records(&self) -> Vec<BlobRef> {
        match *self {
            BlobIndex::Blob { blob, .. } => vec![blob],
            BlobIndex::Inline { .. } => Vec::new(),
            BlobIndex::Extents { data, .. } => Extents::decode(data)
                .map(|x| x.records().into_iter().map(|(b, _)| b).collect())
                .unwrap_or_default(),
        }
    }
}

/// Encodes an inline value with an expiration.
pub(crate) fn encode_inline(expiration: u64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 11);
    out.push(INLINE_TTL);
    put_varint64(&mut out, expiration);
    out.extend_from_slice(value);
    out
}

/// Encodes a reference to a blob record; `expiration` 0 means none.
pub(crate) fn encode_blob(expiration: u64, blob: BlobRef) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    if expiration == 0 {
        out.push(BLOB);
    } else {
        out.push(BLOB_TTL);
        put_varint64(&mut out, expiration);
    }
    put_varint64(&mut out, blob.file);
    put_varint64(&mut out, blob.offset);
    put_varint64(&mut out, blob.size);
    out.push(blob.stored as u8);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_round_trip_and_damage_is_refused() {
        let inline = encode_inline(1234, b"small");
        assert_eq!(
            BlobIndex::decode(&inline),
            Some(BlobIndex::Inline {
                expiration: 1234,
                value: b"small"
            })
        );
        let blob = BlobRef {
            file: 7,
            offset: 32,
            size: 4117,
            stored: Stored::Zstd,
        };
        for (exp, blob) in [
            (0, blob),
            (99, blob),
            (
                5,
                BlobRef {
                    stored: Stored::Chunked,
                    ..blob
                },
            ),
        ] {
            let e = encode_blob(exp, blob);
            let d = BlobIndex::decode(&e).unwrap();
            assert_eq!(d.blob(), Some(blob));
            assert_eq!(d.expiration(), exp);
            assert_eq!(d.is_expired(100), exp != 0);
            // Truncated or extended forms are damage.
            assert_eq!(BlobIndex::decode(&e[..e.len() - 1]), None);
            let mut longer = e.clone();
            longer.push(0);
            assert_eq!(BlobIndex::decode(&longer), None);
        }
        assert_eq!(BlobIndex::decode(&[9, 1, 2]), None);
        assert_eq!(BlobIndex::decode(&[]), None);
        assert!(!BlobIndex::decode(&inline).unwrap().is_expired(1233));
        assert!(BlobIndex::decode(&inline).unwrap().is_expired(1234));
    }
}
