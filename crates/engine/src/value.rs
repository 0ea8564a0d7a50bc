//! `PinnableValue`: a value returned without copying it out of the block it lives in.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::block::Block;

/// A value read from the store. When it came from a table it borrows the cached block (kept alive
/// until this value drops) instead of copying; values from memtables are owned.
#[derive(Clone)]
pub struct PinnableValue {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Pinned {
        block: Arc<Block>,
        start: usize,
        len: usize,
    },
    Owned(Vec<u8>),
    /// A blob value, shared with the blob cache.
    Shared {
        data: Arc<Vec<u8>>,
    },
}

impl PinnableValue {
    pub(crate) fn pinned(block: Arc<Block>, start: usize, len: usize) -> Self {
        PinnableValue {
            repr: Repr::Pinned { block, start, len },
        }
    }

    pub(crate) fn owned(v: Vec<u8>) -> Self {
        PinnableValue {
            repr: Repr::Owned(v),
        }
    }

    pub(crate) fn shared(data: Arc<Vec<u8>>) -> Self {
        PinnableValue {
            repr: Repr::Shared { data },
        }
    }

    /// The `len` bytes at `start` of this value (an inline value inside a blob index).
    pub(crate) fn narrow(self, start: usize, len: usize) -> Self {
        match self.repr {
            Repr::Pinned {
                block, start: s, ..
            } => PinnableValue::pinned(block, s + start, len),
            Repr::Owned(mut v) => {
                v.truncate(start + len);
                v.drain(..start);
                PinnableValue::owned(v)
            }
            Repr::Shared { data } => PinnableValue::owned(data[start..start + len].to_vec()),
        }
    }

    /// True when the value borrows a block instead of owning a copy.
    pub fn is_pinned(&self) -> bool {
        matches!(self.repr, Repr::Pinned { .. })
    }

    /// The value as an owned vector (copies a pinned value).
    pub fn into_vec(self) -> Vec<u8> {
        match self.repr {
            Repr::Owned(v) => v,
            Repr::Pinned { .. } | Repr::Shared { .. } => self.deref().to_vec(),
        }
    }
}

/// Part of a value, as a ranged read returns it: the bytes asked for, cut at the value's end
/// (none when the range starts there or past it), and the whole value's length.
#[derive(Clone, Debug)]
pub struct ValueRange {
    /// The whole value's length.
    pub value_len: u64,
    /// The bytes of the range that lie within the value.
    pub bytes: PinnableValue,
}

/// `offset..offset + len` within a value of `value_len` bytes, cut at its end.
pub(crate) fn clip(offset: u64, len: u64, value_len: u64) -> (u64, u64) {
    (
        offset.min(value_len),
        offset.saturating_add(len).min(value_len),
    )
}

impl ValueRange {
    /// `offset..offset + len` of a whole `value` (cut at its end).
    pub(crate) fn within(value: PinnableValue, offset: u64, len: u64) -> Self {
        let value_len = value.len() as u64;
        let (start, end) = clip(offset, len, value_len);
        ValueRange {
            value_len,
            bytes: value.narrow(start as usize, (end - start) as usize),
        }
    }
}

impl Deref for PinnableValue {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.repr {
            Repr::Pinned { block, start, len } => &block.data()[*start..*start + *len],
            Repr::Owned(v) => v,
            Repr::Shared { data } => data,
        }
    }
}

/// A value held by its owner, as the store would return it.
impl From<Vec<u8>> for PinnableValue {
    fn from(v: Vec<u8>) -> Self {
        PinnableValue::owned(v)
    }
}

impl AsRef<[u8]> for PinnableValue {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq<[u8]> for PinnableValue {
    fn eq(&self, other: &[u8]) -> bool {
        self.deref() == other
    }
}

impl PartialEq<&[u8]> for PinnableValue {
    fn eq(&self, other: &&[u8]) -> bool {
        self.deref() == *other
    }
}

impl PartialEq for PinnableValue {
    fn eq(&self, other: &Self) -> bool {
        self.deref() == other.deref()
    }
}

impl fmt::Debug for PinnableValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnableValue")
            .field("pinned", &self.is_pinned())
            .field("value", &String::from_utf8_lossy(self))
            .finish()
    }
}
