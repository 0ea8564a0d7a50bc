//! Internal keys: the user key followed by an 8-byte trailer `(sequence << 8) | kind`, ordered by user
//! key ascending, then trailer descending, so the newest version of a key comes first.

use std::cmp::Ordering;

/// A write's position in the store's history.
pub type SequenceNumber = u64;

/// Largest sequence number that fits beside the kind byte.
pub(crate) const MAX_SEQUENCE: SequenceNumber = (1 << 56) - 1;

/// What an internal entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum ValueKind {
    Delete = 0,
    Put = 1,
    /// The value is a blob index (`blob::BlobIndex`): a value in a blob file, or one with an
    /// expiration. Kind 2 is taken by range deletions.
    BlobIndex = 3,
}

/// The kind used in seek targets: it sorts before every real entry of the same sequence number.
pub(crate) const KIND_FOR_SEEK: u8 = 0xff;

impl ValueKind {
    pub(crate) fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            3 => Some(ValueKind::BlobIndex),
            _ => None,
        }
    }
}

#[inline]
pub(crate) fn pack_trailer(seq: SequenceNumber, kind: u8) -> u64 {
    (seq << 8) | kind as u64
}

/// Appends the internal key for `user_key` at `seq` with `kind` to `dst`.
pub(crate) fn append_internal_key(
    dst: &mut Vec<u8>,
    user_key: &[u8],
    seq: SequenceNumber,
    kind: u8,
) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

pub(crate) fn internal_key(user_key: &[u8], seq: SequenceNumber, kind: u8) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 8);
    append_internal_key(&mut k, user_key, seq, kind);
    k
}

/// A seek target that finds the newest entry for `user_key` visible at `seq`.
pub(crate) fn lookup_key(user_key: &[u8], seq: SequenceNumber) -> Vec<u8> {
    internal_key(user_key, seq, KIND_FOR_SEEK)
}

/// Lookup keys up to this long (user key and trailer) are held in place by [`LookupKey`].
const INLINE_LOOKUP: usize = 56;

/// A lookup key (`lookup_key`) held in place when short, as most keys are, so that a batch of
/// many lookups (MultiGet) allocates nothing per key; a longer one is on the heap.
#[derive(Debug, Clone)]
pub(crate) enum LookupKey {
    Inline { len: u8, bytes: [u8; INLINE_LOOKUP] },
    Heap(Vec<u8>),
}

impl LookupKey {
    pub(crate) fn new(user_key: &[u8], seq: SequenceNumber) -> Self {
        let len = user_key.len() + 8;
        if len > INLINE_LOOKUP {
            return LookupKey::Heap(lookup_key(user_key, seq));
        }
        let mut bytes = [0; INLINE_LOOKUP];
        let (user, trailer) = bytes[..len].split_at_mut(user_key.len());
        user.copy_from_slice(user_key);
        trailer.copy_from_slice(&pack_trailer(seq, KIND_FOR_SEEK).to_le_bytes());
        LookupKey::Inline {
            len: len as u8,
            bytes,
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            LookupKey::Inline { len, bytes } => &bytes[..*len as usize],
            LookupKey::Heap(k) => k,
        }
    }
}

impl std::ops::Deref for LookupKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// The user-key part. Internal keys are at least 8 bytes wherever this is called (checked on decode).
#[inline]
pub(crate) fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len() - 8]
}

#[inline]
pub(crate) fn trailer(ikey: &[u8]) -> u64 {
    crate::coding::fixed64(ikey, ikey.len() - 8)
}

#[inline]
pub(crate) fn sequence(ikey: &[u8]) -> SequenceNumber {
    trailer(ikey) >> 8
}

#[inline]
pub(crate) fn kind_byte(ikey: &[u8]) -> u8 {
    trailer(ikey) as u8
}

/// Bytewise order, as `a.cmp(b)`. Keys are short and this runs a few dozen times per memtable
/// insert, so eight bytes are compared at a time inline rather than through a call to `memcmp`.
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    if common > 64 {
        // Long shared prefixes are memcmp's strength (it compares a vector register at a time).
        return a.cmp(b);
    }
    let (a_words, _) = a[..common].as_chunks::<8>();
    let (b_words, _) = b[..common].as_chunks::<8>();
    for (x, y) in a_words.iter().zip(b_words) {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
    }
    let done = a_words.len() * 8;
    for (x, y) in a[done..common].iter().zip(&b[done..common]) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// The comparator for internal keys.
#[inline]
pub(crate) fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match compare_bytes(user_key(a), user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

/// A short user key `s` with `start <= s < limit`, to keep index blocks small.
pub(crate) fn shortest_separator(start: &[u8], limit: &[u8]) -> Vec<u8> {
    let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if common >= start.len().min(limit.len()) {
        return start.to_vec(); // one is a prefix of the other
    }
    let (byte, limit_byte) = (start[common], limit[common]);
    if byte < 0xff && byte + 1 < limit_byte {
        let mut s = start[..=common].to_vec();
        s[common] += 1;
        return s;
    }
    // The next byte up is the limit's: keep it, and bump the first later byte that can be bumped;
    // the result is above `start` there and still below `limit` at `common`.
    for i in common + 1..start.len() {
        if start[i] < 0xff {
            let mut s = start[..=i].to_vec();
            s[i] += 1;
            return s;
        }
    }
    start.to_vec()
}

/// A short user key `s >= start`, used after a table's last block.
pub(crate) fn short_successor(start: &[u8]) -> Vec<u8> {
    for (i, &b) in start.iter().enumerate() {
        if b != 0xff {
            let mut s = start[..=i].to_vec();
            s[i] += 1;
            return s;
        }
    }
    start.to_vec()
}

/// What a memtable (or table) knows about a key at a snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup<T> {
    Found(T),
    /// A blob index (`ValueKind::BlobIndex`): the reader resolves it into the value, or into
    /// absence when it expired or its blob file was evicted.
    Indexed(T),
    Deleted,
    NotFound,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lookup key held in place is the same bytes as one built on the heap, at every length
    /// around the cut-over, for the smallest and largest sequence numbers.
    #[test]
    fn lookup_keys_in_place_and_on_the_heap_are_the_same_bytes() {
        for len in [0, 1, 47, 48, 49, 100] {
            let user: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            for seq in [0, 1, MAX_SEQUENCE] {
                let k = LookupKey::new(&user, seq);
                assert_eq!(&*k, lookup_key(&user, seq).as_slice(), "{len} {seq}");
                assert_eq!(
                    matches!(k, LookupKey::Inline { .. }),
                    len + 8 <= INLINE_LOOKUP,
                    "{len}"
                );
            }
        }
    }

    #[test]
    fn compare_bytes_orders_as_slices_do() {
        // Shared prefixes of every length up to past the memcmp cut-over, then a differing byte
        // at each position of a word, or one key a prefix of the other.
        let mut cases = 0;
        for prefix in [0usize, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 100] {
            let base: Vec<u8> = (0..prefix).map(|i| (i * 37 % 251) as u8).collect();
            // Tails of a word or more that differ at two places in opposite directions, so a
            // word compared in the wrong byte order gets them wrong.
            let tails: [&[u8]; 7] = [
                &[],
                &[0],
                &[0xff],
                &[1, 0],
                &[0, 2],
                &[1, 0, 0, 0, 0, 0, 0, 0, 0],
                &[0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            ];
            for tail_a in tails {
                for tail_b in tails {
                    let a = [&base[..], tail_a].concat();
                    let b = [&base[..], tail_b].concat();
                    assert_eq!(compare_bytes(&a, &b), a.cmp(&b), "{a:?} vs {b:?}");
                    assert_eq!(compare_bytes(&b, &a), b.cmp(&a), "{b:?} vs {a:?}");
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 12 * 7 * 7);
    }

    #[test]
    fn newer_sorts_first_and_seek_kind_first() {
        let a = internal_key(b"k", 5, ValueKind::Put as u8);
        let b = internal_key(b"k", 4, ValueKind::Put as u8);
        let c = internal_key(b"l", 9, ValueKind::Put as u8);
        assert_eq!(compare_internal(&a, &b), Ordering::Less);
        assert_eq!(compare_internal(&b, &c), Ordering::Less);
        let seek = lookup_key(b"k", 5);
        assert_eq!(compare_internal(&seek, &a), Ordering::Less);
        assert_eq!(sequence(&a), 5);
        assert_eq!(kind_byte(&a), 1);
        assert_eq!(user_key(&a), b"k");
    }

    #[test]
    fn separators_stay_in_range() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"abcdef", b"abzz"),
            (b"abc", b"abd"),
            (b"ab", b"abc"),
            (b"a\xff", b"b"),
            (b"", b"a"),
            (b"0189-kkkk", b"020"),
            (b"01\xff\xff", b"02"),
        ];
        for (start, limit) in cases {
            let s = shortest_separator(start, limit);
            assert!(s.as_slice() >= *start && s.as_slice() < *limit, "{s:?}");
        }
        assert_eq!(shortest_separator(b"abcdef", b"abzz"), b"abd");
        assert_eq!(shortest_separator(b"018-kkkk", b"020-kkkk"), b"019");
        assert_eq!(short_successor(b"\xff\xffa"), b"\xff\xffb");
        assert_eq!(short_successor(b"\xff"), b"\xff");
    }
}
