//! Partial writes in a batch: bytes written at an offset, appended, a value cut or grown, a value
//! copied or renamed to another key. The write leader resolves each against the store before the
//! batch reaches the WAL (`db::partial`), so these records live only in a batch on its way in.
//!
//! A record of kind `PARTIAL_KIND`: key the key written, value `op: u8 | operands`:
//! `0 | offset: varint64 | bytes` (write at), `1 | bytes` (append), `2 | length: varint64`
//! (truncate), `3 | source key` (copy), `4 | source key` (rename).

use super::{ColumnFamily, WriteBatch, oversized_value};
use crate::coding::{get_varint64, put_varint64};
use crate::options::{MAX_VALUE_SIZE, oversized_key};

/// The record kind of a partial write (never in a WAL or a table).
pub(crate) const PARTIAL_KIND: u8 = 4;

const WRITE_AT: u8 = 0;
const APPEND: u8 = 1;
const TRUNCATE: u8 = 2;
const COPY: u8 = 3;
const RENAME: u8 = 4;

/// One partial write, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartialOp<'a> {
    WriteAt { offset: u64, data: &'a [u8] },
    Append(&'a [u8]),
    Truncate(u64),
    Copy { from: &'a [u8] },
    Rename { from: &'a [u8] },
}

impl<'a> PartialOp<'a> {
    /// The encoding as a short head and the bytes that follow it (a write's data, which the
    /// batch copies once, straight from the caller's buffer).
    fn encode_parts(&self) -> (Vec<u8>, &'a [u8]) {
        match *self {
            PartialOp::WriteAt { offset, data } => {
                let mut head = vec![WRITE_AT];
                put_varint64(&mut head, offset);
                (head, data)
            }
            PartialOp::Append(data) => (vec![APPEND], data),
            _ => (self.encode(), &[]),
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match *self {
            PartialOp::WriteAt { offset, data } => {
                out.push(WRITE_AT);
                put_varint64(&mut out, offset);
                out.extend_from_slice(data);
            }
            PartialOp::Append(data) => {
                out.push(APPEND);
                out.extend_from_slice(data);
            }
            PartialOp::Truncate(len) => {
                out.push(TRUNCATE);
                put_varint64(&mut out, len);
            }
            PartialOp::Copy { from } | PartialOp::Rename { from } => {
                out.push(if matches!(self, PartialOp::Copy { .. }) {
                    COPY
                } else {
                    RENAME
                });
                out.extend_from_slice(from);
            }
        }
        out
    }

    pub(crate) fn decode(v: &'a [u8]) -> Option<Self> {
        let (&op, rest) = v.split_first()?;
        let mut pos = 1;
        Some(match op {
            WRITE_AT => {
                let offset = get_varint64(v, &mut pos)?;
                PartialOp::WriteAt {
                    offset,
                    data: &v[pos..],
                }
            }
            APPEND => PartialOp::Append(rest),
            TRUNCATE => {
                let len = get_varint64(v, &mut pos)?;
                (pos == v.len()).then_some(PartialOp::Truncate(len))?
            }
            COPY => PartialOp::Copy { from: rest },
            RENAME => PartialOp::Rename { from: rest },
            _ => return None,
        })
    }

    /// Why the operation cannot be done on `key`, if it cannot (what is known without reading
    /// the store).
    pub(crate) fn invalid(&self, key: &[u8]) -> Option<String> {
        match *self {
            PartialOp::WriteAt { offset, data } => oversized_value(data.len()).or_else(|| {
                match offset.checked_add(data.len() as u64) {
                    Some(end) if end <= MAX_VALUE_SIZE => None,
                    _ => Some(format!(
                        "write of {} bytes at offset {offset} ends past the largest value \
                             ({MAX_VALUE_SIZE} bytes)",
                        data.len()
                    )),
                }
            }),
            PartialOp::Append(data) => oversized_value(data.len()),
            PartialOp::Truncate(len) => (len > MAX_VALUE_SIZE).then(|| {
                format!("truncate to {len} bytes: past the largest value ({MAX_VALUE_SIZE} bytes)")
            }),
            PartialOp::Copy { from } | PartialOp::Rename { from } => oversized_key(from.len())
                .or_else(|| {
                    (from == key).then(|| {
                        format!(
                            "{} of key {} onto itself",
                            if matches!(self, PartialOp::Copy { .. }) {
                                "copy"
                            } else {
                                "rename"
                            },
                            crate::error::show_key(key)
                        )
                    })
                }),
        }
    }
}

impl WriteBatch {
    fn add_partial(&mut self, cf: u32, key: &[u8], op: PartialOp<'_>) {
        if self.invalid.is_none() {
            self.invalid = op.invalid(key);
        }
        let (head, data) = op.encode_parts();
        self.partial_ops += 1;
        self.add_record_in_parts(PARTIAL_KIND, cf, key, Some((&head, data)));
    }

    /// Writes `data` at `offset` of `key`'s value, which must exist: bytes past its end extend
    /// it, and a gap between its end and `offset` reads as zeros. Costs the bytes written (and
    /// a list of the value's pieces), not the value's size.
    pub fn write_at(&mut self, key: impl AsRef<[u8]>, offset: u64, data: impl AsRef<[u8]>) {
        let data = data.as_ref();
        self.add_partial(0, key.as_ref(), PartialOp::WriteAt { offset, data });
    }

    /// [`WriteBatch::write_at`] in column family `cf`.
    pub fn write_at_cf(
        &mut self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        offset: u64,
        data: impl AsRef<[u8]>,
    ) {
        let data = data.as_ref();
        self.add_partial(cf.id(), key.as_ref(), PartialOp::WriteAt { offset, data });
    }

    /// Appends `data` to `key`'s value; a missing key starts empty (as `O_APPEND | O_CREAT`).
    /// Two batches appending to one key both land, one after the other.
    pub fn append(&mut self, key: impl AsRef<[u8]>, data: impl AsRef<[u8]>) {
        self.add_partial(0, key.as_ref(), PartialOp::Append(data.as_ref()));
    }

    /// [`WriteBatch::append`] in column family `cf`.
    pub fn append_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, data: impl AsRef<[u8]>) {
        self.add_partial(cf.id(), key.as_ref(), PartialOp::Append(data.as_ref()));
    }

    /// Cuts `key`'s value (which must exist) to `len` bytes, or grows it with zeros.
    pub fn truncate(&mut self, key: impl AsRef<[u8]>, len: u64) {
        self.add_partial(0, key.as_ref(), PartialOp::Truncate(len));
    }

    /// [`WriteBatch::truncate`] in column family `cf`.
    pub fn truncate_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, len: u64) {
        self.add_partial(cf.id(), key.as_ref(), PartialOp::Truncate(len));
    }

    /// Gives `to` the value of `from` (which must exist), expiration included. A value in blob
    /// files is shared, not copied: a few dozen bytes are written whatever its size.
    pub fn copy(&mut self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) {
        let from = from.as_ref();
        self.add_partial(0, to.as_ref(), PartialOp::Copy { from });
    }

    /// [`WriteBatch::copy`] within column family `cf`.
    pub fn copy_cf(&mut self, cf: &ColumnFamily, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) {
        let from = from.as_ref();
        self.add_partial(cf.id(), to.as_ref(), PartialOp::Copy { from });
    }

    /// Moves the value of `from` (which must exist) to `to` and deletes `from`, atomically; as
    /// cheap as [`WriteBatch::copy`].
    pub fn rename(&mut self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) {
        let from = from.as_ref();
        self.add_partial(0, to.as_ref(), PartialOp::Rename { from });
    }

    /// [`WriteBatch::rename`] within column family `cf`.
    pub fn rename_cf(&mut self, cf: &ColumnFamily, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) {
        let from = from.as_ref();
        self.add_partial(cf.id(), to.as_ref(), PartialOp::Rename { from });
    }

    /// Whether the batch holds partial writes, which the write leader resolves.
    pub(crate) fn has_partial_ops(&self) -> bool {
        self.partial_ops > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_round_trips_and_bad_ones_are_named() {
        for op in [
            PartialOp::WriteAt {
                offset: 300,
                data: b"abc",
            },
            PartialOp::Append(b""),
            PartialOp::Truncate(1 << 40),
            PartialOp::Copy { from: b"src" },
            PartialOp::Rename { from: b"src" },
        ] {
            assert_eq!(PartialOp::decode(&op.encode()), Some(op));
        }
        assert_eq!(PartialOp::decode(&[9]), None);
        assert_eq!(PartialOp::decode(&[TRUNCATE, 1, 2]), None);
        let past = PartialOp::WriteAt {
            offset: u64::MAX,
            data: b"x",
        };
        assert!(
            past.invalid(b"k")
                .unwrap()
                .contains("past the largest value")
        );
        assert!(
            PartialOp::Rename { from: b"k" }
                .invalid(b"k")
                .unwrap()
                .contains("onto itself")
        );
        let mut b = WriteBatch::new();
        b.truncate("k", MAX_VALUE_SIZE + 1);
        assert!(b.validation_error().is_some());
        assert!(b.has_partial_ops());
    }
}
