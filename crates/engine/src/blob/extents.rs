//! Extent values (doc/format.md, blob index form 3): a value as a list of pieces (zero runs,
//! small inline bytes, ranges of blob records), so that writing part of a value, appending to it
//! or giving it to another key rewrites the list and the new bytes, never the old bytes.
//!
//! This module is the list and its arithmetic only; reading the records and deciding when to fold
//! pieces into new records is the database's (`db::partial`).

use super::format::Stored;
use super::index::BlobRef;
use crate::coding::{get_varint64, put_varint64};

/// The blob index form byte of an extent list.
pub(crate) const EXTENTS: u8 = 3;
/// Inline pieces longer than this are written to a blob record.
pub(crate) const INLINE_EXTENT_MAX: u64 = 1 << 10;
/// A list longer than this is folded down to `FOLDED_EXTENTS` pieces, joining only pieces
/// smaller than `LARGE_PIECE`: a list of large pieces may stay longer.
pub(crate) const MAX_EXTENTS: usize = 256;
/// A piece this long is never copied by a fold: joining it would copy megabytes under the WAL
/// lock to save a few dozen bytes of list (a file written in 4 MiB steps and then appended to
/// had every 64th append copy hundreds of MiB). A list of such pieces is at most
/// `MAX_VALUE_SIZE / LARGE_PIECE` long (65,536 pieces, ~1.3 MiB rewritten per write; a file
/// the mount wrote, in 4 MiB steps, has a quarter of that).
pub(crate) const LARGE_PIECE: u64 = 1 << 20;
pub(crate) const FOLDED_EXTENTS: usize = 192;

const ZEROS: u8 = 0;
const INLINE: u8 = 1;
const BORROWED: u8 = 2;
const MADE_HERE: u8 = 3;

/// Where an extent's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A run of zero bytes (a hole left by a write past the end, or a truncate that grew).
    Zeros,
    /// The bytes themselves; the extent's length is theirs.
    Inline(Vec<u8>),
    /// The bytes at `at` of the value held by the record `blob`, whose key is `key_len` bytes long.
    /// `made_here`: the write that made this list also wrote the record (its blob file's footer
    /// counts it); otherwise the list borrows it and the reference is counted apart.
    Record {
        blob: BlobRef,
        key_len: u32,
        at: u64,
        made_here: bool,
    },
}

/// One piece of a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Extent {
    pub len: u64,
    pub piece: Piece,
}

impl Extent {
    pub(crate) fn zeros(len: u64) -> Self {
        Extent {
            len,
            piece: Piece::Zeros,
        }
    }

    pub(crate) fn inline(bytes: Vec<u8>) -> Self {
        Extent {
            len: bytes.len() as u64,
            piece: Piece::Inline(bytes),
        }
    }

    /// The whole value of a record, borrowed.
    pub(crate) fn record(blob: BlobRef, key_len: u32, value_len: u64, made_here: bool) -> Self {
        Extent {
            len: value_len,
            piece: Piece::Record {
                blob,
                key_len,
                at: 0,
                made_here,
            },
        }
    }

    /// The extent cut at `n` bytes: its first `n` bytes and the rest.
    fn split(self, n: u64) -> (Extent, Extent) {
        let rest = self.len - n;
        let (a, b) = match self.piece {
            Piece::Zeros => (Piece::Zeros, Piece::Zeros),
            Piece::Inline(mut bytes) => {
                let tail = bytes.split_off(n as usize);
                (Piece::Inline(bytes), Piece::Inline(tail))
            }
            Piece::Record {
                blob,
                key_len,
                at,
                made_here,
            } => (
                Piece::Record {
                    blob,
                    key_len,
                    at,
                    made_here,
                },
                Piece::Record {
                    blob,
                    key_len,
                    at: at + n,
                    made_here,
                },
            ),
        };
        (
            Extent { len: n, piece: a },
            Extent {
                len: rest,
                piece: b,
            },
        )
    }

    /// `next` joined onto this extent when their bytes follow on; `Err(next)` otherwise.
    fn join(&mut self, next: Extent) -> Result<(), Extent> {
        match (&mut self.piece, next.piece) {
            (Piece::Zeros, Piece::Zeros) => {}
            (Piece::Inline(a), Piece::Inline(b)) => a.extend_from_slice(&b),
            (
                Piece::Record {
                    blob,
                    at,
                    made_here,
                    ..
                },
                Piece::Record {
                    blob: b2,
                    at: at2,
                    made_here: m2,
                    ..
                },
            ) if *blob == b2 && *at + self.len == at2 => *made_here |= m2,
            (_, piece) => {
                return Err(Extent {
                    len: next.len,
                    piece,
                });
            }
        }
        self.len += next.len;
        Ok(())
    }
}

/// A value as a list of extents, with the expiration it carries (0: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Extents {
    pub expiration: u64,
    pub list: Vec<Extent>,
}

impl Extents {
    /// The value's length.
    pub(crate) fn len(&self) -> u64 {
        self.list.iter().map(|e| e.len).sum()
    }

    /// Index of the first extent starting at `at` (`list.len()` at the end), splitting the
    /// extent that spans it; `at` is at most the value's length.
    fn cut(&mut self, at: u64) -> usize {
        let mut start = 0;
        for i in 0..self.list.len() {
            let len = self.list[i].len;
            if at == start {
                return i;
            }
            if at < start + len {
                let e = self.list.remove(i);
                let (a, b) = e.split(at - start);
                self.list.insert(i, b);
                self.list.insert(i, a);
                return i + 1;
            }
            start += len;
        }
        self.list.len()
    }

    /// Puts `new` (pieces of `new_len` bytes in all) at `offset`, over what was there; a gap
    /// past the end is zeros.
    pub(crate) fn splice(&mut self, offset: u64, new: Vec<Extent>) {
        let len = self.len();
        if offset > len {
            self.list.push(Extent::zeros(offset - len));
        }
        let new_len: u64 = new.iter().map(|e| e.len).sum();
        let end = (offset + new_len).min(self.len());
        let first = self.cut(offset);
        let last = self.cut(end);
        self.list.splice(first..last, new);
        self.normalize();
    }

    /// Cuts the value to `len` bytes, or grows it with zeros.
    pub(crate) fn truncate(&mut self, len: u64) {
        let now = self.len();
        if len < now {
            let keep = self.cut(len);
            self.list.truncate(keep);
        } else if len > now {
            self.list.push(Extent::zeros(len - now));
        }
        self.normalize();
    }

    /// Drops empty extents and joins neighbours whose bytes follow on.
    pub(crate) fn normalize(&mut self) {
        let mut out: Vec<Extent> = Vec::with_capacity(self.list.len());
        for e in self.list.drain(..) {
            if e.len == 0 {
                continue;
            }
            match out.last_mut() {
                Some(last) => {
                    if let Err(e) = last.join(e) {
                        out.push(e);
                    }
                }
                None => out.push(e),
            }
        }
        self.list = out;
    }

    /// Marks every record as borrowed: the list as another entry (a later version, or a copy)
    /// holds it.
    pub(crate) fn borrow_all(&mut self) {
        for e in &mut self.list {
            if let Piece::Record { made_here, .. } = &mut e.piece {
                *made_here = false;
            }
        }
    }

    /// Each record the list names, once, with whether this list's write made it (sorted: a
    /// list of hundreds of pieces is counted with every write).
    pub(crate) fn records(&self) -> Vec<(BlobRef, bool)> {
        let mut all: Vec<(BlobRef, bool)> = self
            .list
            .iter()
            .filter_map(|e| match e.piece {
                Piece::Record {
                    blob, made_here, ..
                } => Some((blob, made_here)),
                _ => None,
            })
            .collect();
        all.sort_unstable();
        let mut out: Vec<(BlobRef, bool)> = Vec::with_capacity(all.len());
        for (blob, made_here) in all {
            match out.last_mut() {
                Some((b, m)) if *b == blob => *m |= made_here,
                _ => out.push((blob, made_here)),
            }
        }
        out
    }

    /// The records the list borrows (each once): those its write did not make, each counted as
    /// a reference of its file when the entry is written.
    pub(crate) fn borrowed(&self) -> Vec<BlobRef> {
        self.records()
            .into_iter()
            .filter(|(_, made_here)| !made_here)
            .map(|(b, _)| b)
            .collect()
    }

    /// The pieces covering `start..end` (within the value): each extent cut to the range, with
    /// the offset within it where the range begins.
    pub(crate) fn covering(&self, start: u64, end: u64) -> Vec<(&Extent, u64, u64)> {
        let mut out = Vec::new();
        let mut at = 0;
        for e in &self.list {
            let (lo, hi) = (at, at + e.len);
            at = hi;
            if hi <= start {
                continue;
            }
            if lo >= end {
                break;
            }
            let from = start.max(lo) - lo;
            let to = end.min(hi) - lo;
            out.push((e, from, to - from));
        }
        out
    }

    /// The blob index holding this list.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 24 * self.list.len());
        out.push(EXTENTS);
        put_varint64(&mut out, self.expiration);
        put_varint64(&mut out, self.list.len() as u64);
        for e in &self.list {
            match &e.piece {
                Piece::Zeros => {
                    out.push(ZEROS);
                    put_varint64(&mut out, e.len);
                }
                Piece::Inline(bytes) => {
                    out.push(INLINE);
                    put_varint64(&mut out, e.len);
                    out.extend_from_slice(bytes);
                }
                Piece::Record {
                    blob,
                    key_len,
                    at,
                    made_here,
                } => {
                    out.push(if *made_here { MADE_HERE } else { BORROWED });
                    put_varint64(&mut out, e.len);
                    put_varint64(&mut out, blob.file);
                    put_varint64(&mut out, blob.offset);
                    put_varint64(&mut out, blob.size);
                    out.push(blob.stored as u8);
                    put_varint64(&mut out, u64::from(*key_len));
                    put_varint64(&mut out, *at);
                }
            }
        }
        out
    }

    /// Decodes a blob index of form 3 (its first byte included); `None` when malformed.
    pub(crate) fn decode(data: &[u8]) -> Option<Extents> {
        if data.first() != Some(&EXTENTS) {
            return None;
        }
        let mut pos = 1;
        let expiration = get_varint64(data, &mut pos)?;
        let count = get_varint64(data, &mut pos)?;
        // Each extent takes at least two bytes: a count past that is damage, not an allocation.
        if count > (data.len() as u64) / 2 {
            return None;
        }
        let mut list = Vec::with_capacity(count as usize);
        let mut total = 0u64;
        for _ in 0..count {
            let tag = *data.get(pos)?;
            pos += 1;
            let len = get_varint64(data, &mut pos)?;
            // No value is longer than the largest one a write may make: a damaged length must
            // not reach an allocation or overflow an offset.
            total = total.checked_add(len)?;
            if len == 0 || total > crate::options::MAX_VALUE_SIZE {
                return None;
            }
            let piece = match tag {
                ZEROS => Piece::Zeros,
                INLINE => {
                    let end = pos.checked_add(usize::try_from(len).ok()?)?;
                    let bytes = data.get(pos..end)?.to_vec();
                    pos = end;
                    Piece::Inline(bytes)
                }
                BORROWED | MADE_HERE => {
                    let file = get_varint64(data, &mut pos)?;
                    let offset = get_varint64(data, &mut pos)?;
                    let size = get_varint64(data, &mut pos)?;
                    let stored = Stored::from_byte(*data.get(pos)?)?;
                    pos += 1;
                    let key_len = u32::try_from(get_varint64(data, &mut pos)?).ok()?;
                    let at = get_varint64(data, &mut pos)?;
                    at.checked_add(len)?;
                    Piece::Record {
                        blob: BlobRef {
                            file,
                            offset,
                            size,
                            stored,
                        },
                        key_len,
                        at,
                        made_here: tag == MADE_HERE,
                    }
                }
                _ => return None,
            };
            list.push(Extent { len, piece });
        }
        (pos == data.len()).then_some(Extents { expiration, list })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(file: u64) -> BlobRef {
        BlobRef {
            file,
            offset: 32,
            size: 9000,
            stored: Stored::Chunked,
        }
    }

    /// The value a list stands for, with record bytes made up from their position.
    fn bytes(x: &Extents) -> Vec<u8> {
        let mut out = Vec::new();
        for e in &x.list {
            match &e.piece {
                Piece::Zeros => out.extend(std::iter::repeat_n(0u8, e.len as usize)),
                Piece::Inline(b) => out.extend_from_slice(b),
                Piece::Record { blob, at, .. } => {
                    out.extend((0..e.len).map(|i| (blob.file as u8) ^ ((at + i) as u8) | 1))
                }
            }
        }
        out
    }

    #[test]
    fn splices_truncates_and_joins_like_a_byte_vector() {
        let mut x = Extents::default();
        x.list.push(Extent::record(blob(7), 3, 8000, true));
        let mut model = bytes(&x);
        // Overwrite in the middle, write past the end, append, shrink and grow.
        x.splice(100, vec![Extent::inline(b"hello".to_vec())]);
        model[100..105].copy_from_slice(b"hello");
        assert_eq!(bytes(&x), model);
        x.splice(9000, vec![Extent::inline(b"far".to_vec())]);
        model.resize(9000, 0);
        model.extend_from_slice(b"far");
        assert_eq!(bytes(&x), model);
        let len = x.len();
        x.splice(len, vec![Extent::inline(b"!".to_vec())]);
        model.push(b'!');
        assert_eq!(bytes(&x), model);
        // Inline neighbours joined: "far" and "!" are one extent.
        assert_eq!(x.list.last(), Some(&Extent::inline(b"far!".to_vec())));
        x.truncate(50);
        model.truncate(50);
        assert_eq!(bytes(&x), model);
        x.truncate(70);
        model.resize(70, 0);
        assert_eq!(bytes(&x), model);
        // A split record rejoins when the hole between its halves is written by itself again.
        let mut y = Extents::default();
        y.list.push(Extent::record(blob(9), 3, 8000, false));
        let mut hole = y.clone();
        hole.splice(10, vec![Extent::inline(b"xy".to_vec())]);
        assert_eq!(hole.list.len(), 3);
        let middle = Extent {
            len: 2,
            piece: Piece::Record {
                blob: blob(9),
                key_len: 3,
                at: 10,
                made_here: false,
            },
        };
        hole.splice(10, vec![middle]);
        assert_eq!(hole, y);
    }

    #[test]
    fn a_list_round_trips_and_damage_is_refused() {
        let mut x = Extents {
            expiration: 99,
            list: vec![
                Extent::zeros(10),
                Extent::inline(b"abc".to_vec()),
                Extent::record(blob(4), 5, 700, true),
            ],
        };
        x.list.push(Extent::record(blob(4), 5, 700, false));
        let e = x.encode();
        assert_eq!(Extents::decode(&e), Some(x.clone()));
        assert_eq!(x.records(), vec![(blob(4), true)]);
        x.borrow_all();
        assert_eq!(x.records(), vec![(blob(4), false)]);
        for cut in 0..e.len() {
            assert_eq!(Extents::decode(&e[..cut]), None, "cut at {cut}");
        }
        let mut longer = e.clone();
        longer.push(0);
        assert_eq!(Extents::decode(&longer), None);
        // A length no value can have is damage, not an allocation.
        let huge = Extents {
            expiration: 0,
            list: vec![Extent::zeros(u64::MAX / 2)],
        };
        assert_eq!(Extents::decode(&huge.encode()), None);
        // A huge count is refused before it is allocated.
        assert_eq!(Extents::decode(&[EXTENTS, 0, 0xff, 0xff, 0xff, 0x7f]), None);
    }

    #[test]
    fn covering_cuts_each_piece_to_the_range() {
        let x = Extents {
            expiration: 0,
            list: vec![Extent::zeros(10), Extent::inline(b"abcdef".to_vec())],
        };
        let c: Vec<(u64, u64)> = x.covering(8, 13).iter().map(|(_, o, l)| (*o, *l)).collect();
        assert_eq!(c, vec![(8, 2), (0, 3)]);
        assert!(x.covering(16, 20).is_empty());
    }
}
