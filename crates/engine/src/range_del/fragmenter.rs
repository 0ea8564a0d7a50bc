//! Fragmenting: overlapping tombstones become non-overlapping fragments, each with the stack of
//! sequence numbers of the tombstones that cover it. The fragments sit in one vector (sorted by
//! start, so a binary search finds the one holding a key with few key comparisons however many
//! tombstones overlap there) and their sequence numbers, newest first, in another, each fragment
//! owning a contiguous run.
//!
//! Lookups binary-search the fragments' ends. To keep that search in a few cache lines rather
//! than a pointer chase per step, the ends' common prefix is stored once and the next 8 bytes of
//! each end as a big-endian `u64` in a dense array; full keys are compared only among ends whose
//! 8 bytes tie. Starts get the same treatment, and each fragment's newest sequence number sits in
//! a dense array too, so a point lookup usually touches no fragment and no key bytes at all.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::RangeTombstone;
use crate::key::SequenceNumber;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    /// This fragment's sequence numbers are `seqs[seq_begin..seq_end]`, descending.
    seq_begin: u32,
    seq_end: u32,
}

/// A set of range tombstones in fragmented, binary-searchable form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FragmentedTombstones {
    fragments: Vec<Fragment>,
    seqs: Vec<SequenceNumber>,
    /// The prefix every fragment's end shares.
    common: Vec<u8>,
    /// Per fragment: the 8 bytes of its end after `common`, zero-padded, big-endian.
    end_keys: Vec<u64>,
    /// Per fragment: the same for its start, or 0 when the start does not begin with `common`
    /// (it is then below every key that does).
    start_keys: Vec<u64>,
    /// Per fragment: its newest sequence number.
    newest: Vec<SequenceNumber>,
}

impl FragmentedTombstones {
    /// Fragments `tombstones` (in any order; empty ranges are ignored).
    pub(crate) fn new(mut tombstones: Vec<RangeTombstone>) -> Self {
        tombstones.retain(|t| t.start < t.end);
        tombstones.sort_by(|a, b| a.start.cmp(&b.start));
        let mut out = FragmentedTombstones::default();
        // Tombstones that have started and not yet ended, by end key (smallest first).
        let mut active: BinaryHeap<Reverse<(&[u8], SequenceNumber)>> = BinaryHeap::new();
        let mut next = 0;
        // Where the next fragment starts: the last boundary passed.
        let mut pos: Option<&[u8]> = None;
        loop {
            // The next boundary is the nearer of the next start and the nearest end.
            let next_start = tombstones.get(next).map(|t| t.start.as_slice());
            let next_end = active.peek().map(|Reverse((end, _))| *end);
            let boundary = match (next_start, next_end) {
                (None, None) => break,
                (Some(s), None) => s,
                (None, Some(e)) => e,
                (Some(s), Some(e)) => s.min(e),
            };
            if let Some(from) = pos
                && from < boundary
                && !active.is_empty()
            {
                out.push(from, boundary, active.iter().map(|Reverse((_, seq))| *seq));
            }
            while active
                .peek()
                .is_some_and(|Reverse((end, _))| *end <= boundary)
            {
                active.pop();
            }
            while let Some(t) = tombstones
                .get(next)
                .filter(|t| t.start.as_slice() == boundary)
            {
                active.push(Reverse((t.end.as_slice(), t.seq)));
                next += 1;
            }
            pos = Some(boundary);
        }
        out.index();
        out
    }

    /// Builds the search index over the fragments' ends.
    fn index(&mut self) {
        self.common.clear();
        self.end_keys.clear();
        self.start_keys.clear();
        self.newest.clear();
        let (Some(first), Some(last)) = (self.fragments.first(), self.fragments.last()) else {
            return;
        };
        // Ends ascend: the first and last share what all of them share.
        let shared = first
            .end
            .iter()
            .zip(&last.end)
            .take_while(|(a, b)| a == b)
            .count();
        self.common = first.end[..shared].to_vec();
        self.end_keys = self
            .fragments
            .iter()
            .map(|f| prefix_u64(&f.end[shared..]))
            .collect();
        self.start_keys = self
            .fragments
            .iter()
            .map(|f| match f.start.strip_prefix(self.common.as_slice()) {
                Some(rest) => prefix_u64(rest),
                None => 0,
            })
            .collect();
        self.newest = self
            .fragments
            .iter()
            .map(|f| self.seqs[f.seq_begin as usize])
            .collect();
    }

    /// Adds a fragment after the last one; nothing when `seqs` is empty.
    fn push(&mut self, start: &[u8], end: &[u8], seqs: impl Iterator<Item = SequenceNumber>) {
        let seq_begin = self.seqs.len();
        self.seqs.extend(seqs);
        let run = &mut self.seqs[seq_begin..];
        run.sort_unstable_by(|a, b| b.cmp(a));
        let mut kept = 0;
        for i in 0..run.len() {
            if kept == 0 || run[kept - 1] != run[i] {
                run[kept] = run[i];
                kept += 1;
            }
        }
        self.seqs.truncate(seq_begin + kept);
        if kept == 0 {
            return;
        }
        self.fragments.push(Fragment {
            start: start.to_vec(),
            end: end.to_vec(),
            seq_begin: seq_begin as u32,
            seq_end: self.seqs.len() as u32,
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// Fragments.
    pub(crate) fn len(&self) -> usize {
        self.fragments.len()
    }

    /// The first fragment that ends after `user_key`: the one holding it, if any does, else the
    /// next one (`len()` when none is left). Iterators position themselves with this.
    pub(crate) fn seek(&self, user_key: &[u8]) -> usize {
        self.locate(user_key).0
    }

    /// `seek`, and the key's 8 bytes after `common` when it begins with `common`.
    fn locate(&self, user_key: &[u8]) -> (usize, Option<u64>) {
        let c = self.common.len();
        let n = c.min(user_key.len());
        match user_key[..n].cmp(&self.common[..n]) {
            // Every end starts with `common`: the key is below all of them, or above.
            std::cmp::Ordering::Less => return (0, None),
            std::cmp::Ordering::Greater => return (self.fragments.len(), None),
            std::cmp::Ordering::Equal if user_key.len() < c => return (0, None),
            std::cmp::Ordering::Equal => {}
        }
        let k = prefix_u64(&user_key[c..]);
        let lo = self.end_keys.partition_point(|&e| e < k);
        let ties = self.end_keys[lo..].partition_point(|&e| e == k);
        let i =
            lo + self.fragments[lo..lo + ties].partition_point(|f| f.end.as_slice() <= user_key);
        (i, Some(k))
    }

    /// The fragment holding `user_key`, if one does.
    pub(crate) fn holding(&self, user_key: &[u8]) -> Option<usize> {
        let (i, k) = self.locate(user_key);
        if i >= self.fragments.len() {
            return None;
        }
        let starts_at_or_below = match k.map(|k| self.start_keys[i].cmp(&k)) {
            Some(std::cmp::Ordering::Less) => true,
            Some(std::cmp::Ordering::Greater) => false,
            _ => self.fragments[i].start.as_slice() <= user_key,
        };
        starts_at_or_below.then_some(i)
    }

    /// Fragment `i`: its range and its sequence numbers, newest first.
    pub(crate) fn fragment(&self, i: usize) -> (&[u8], &[u8], &[SequenceNumber]) {
        let f = &self.fragments[i];
        (
            &f.start,
            &f.end,
            &self.seqs[f.seq_begin as usize..f.seq_end as usize],
        )
    }

    /// The newest tombstone covering `user_key` that a read at `read_seq` sees, if any.
    pub(crate) fn max_covering_seq(
        &self,
        user_key: &[u8],
        read_seq: SequenceNumber,
    ) -> Option<SequenceNumber> {
        let i = self.holding(user_key)?;
        if self.newest[i] <= read_seq {
            return Some(self.newest[i]);
        }
        let seqs = self.fragment(i).2;
        let visible = seqs.partition_point(|&s| s > read_seq);
        seqs.get(visible).copied()
    }

    /// The tombstones again, one per (fragment, sequence number), clipped to `[lower, upper)`
    /// (`None`: unbounded): what a table whose keys span that range must keep.
    pub(crate) fn truncated(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<RangeTombstone> {
        let first = lower.map_or(0, |l| self.seek(l));
        let mut out = Vec::new();
        for i in first..self.fragments.len() {
            let (start, end, seqs) = self.fragment(i);
            if upper.is_some_and(|u| start >= u) {
                break;
            }
            let start = lower.map_or(start, |l| start.max(l));
            let end = upper.map_or(end, |u| end.min(u));
            if start < end {
                out.extend(seqs.iter().map(|&seq| RangeTombstone::new(start, end, seq)));
            }
        }
        out
    }

    /// Tombstones: the (fragment, sequence number) pairs.
    pub(crate) fn num_tombstones(&self) -> usize {
        self.seqs.len()
    }

    /// The same fragments keeping, of each one's sequence numbers, only those some reader can
    /// still tell apart: the newest in each stripe between consecutive `snapshots` (ascending),
    /// and the newest above the last. Compaction writes these.
    pub(crate) fn for_snapshots(&self, snapshots: &[SequenceNumber]) -> FragmentedTombstones {
        self.retain_seqs(|_, _, seq, previous| {
            previous.is_none_or(|p| stripe(snapshots, p) != stripe(snapshots, seq))
        })
    }

    /// The same fragments keeping the sequence numbers `keep` accepts; it is given each
    /// fragment's range, a sequence number, and the newer one before it in the fragment.
    pub(crate) fn retain_seqs(
        &self,
        mut keep: impl FnMut(&[u8], &[u8], SequenceNumber, Option<SequenceNumber>) -> bool,
    ) -> FragmentedTombstones {
        let mut out = FragmentedTombstones::default();
        for i in 0..self.fragments.len() {
            let (start, end, seqs) = self.fragment(i);
            let kept: Vec<SequenceNumber> = seqs
                .iter()
                .enumerate()
                .filter(|&(j, &s)| keep(start, end, s, j.checked_sub(1).map(|p| seqs[p])))
                .map(|(_, &s)| s)
                .collect();
            out.push(start, end, kept.into_iter());
        }
        out.index();
        out
    }
}

/// Up to 8 bytes of `bytes`, zero-padded, as a big-endian number: numbers order as the padded
/// bytes do, and a tie leaves the order to the full keys.
fn prefix_u64(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(b)
}

/// Which stripe between `snapshots` (ascending) sequence number `seq` falls in: how many
/// snapshots lie below it. Readers at snapshots in one stripe all see the same versions.
pub(crate) fn stripe(snapshots: &[SequenceNumber], seq: SequenceNumber) -> usize {
    snapshots.partition_point(|&snap| snap < seq)
}

/// Where an entry stands among its key's versions (`VersionWalk::step`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct VersionPlace {
    /// The newest version of its user key.
    pub first_of_key: bool,
    /// The newest version in its snapshot stripe; any other is seen by no reader, and flushes
    /// and compactions drop it.
    pub newest_in_stripe: bool,
    pub stripe: usize,
}

/// Follows entries in internal-key order (each user key's versions newest first) and places each
/// among its key's versions.
#[derive(Debug, Default)]
pub(crate) struct VersionWalk {
    key: Vec<u8>,
    /// The previous entry's stripe; `None` before the first entry.
    last_stripe: Option<usize>,
}

impl VersionWalk {
    pub(crate) fn step(
        &mut self,
        user_key: &[u8],
        seq: SequenceNumber,
        snapshots: &[SequenceNumber],
    ) -> VersionPlace {
        if self.last_stripe.is_none() || self.key.as_slice() != user_key {
            self.key.clear();
            self.key.extend_from_slice(user_key);
            self.last_stripe = None;
        }
        let stripe = stripe(snapshots, seq);
        let place = VersionPlace {
            first_of_key: self.last_stripe.is_none(),
            newest_in_stripe: self.last_stripe != Some(stripe),
            stripe,
        };
        self.last_stripe = Some(stripe);
        place
    }
}

/// Whether one of a fragment's tombstones (`seqs`, newest first) hides entries with sequence
/// numbers from `oldest` to `newest` from every reader: it is newer than all of them, with no
/// snapshot between it and the oldest. The oldest tombstone newer than them is the one to ask.
pub(crate) fn hides_from_every_reader(
    seqs: &[SequenceNumber],
    oldest: SequenceNumber,
    newest: SequenceNumber,
    snapshots: &[SequenceNumber],
) -> bool {
    let newer = seqs.partition_point(|&t| t > newest);
    newer > 0 && stripe(snapshots, seqs[newer - 1]) == stripe(snapshots, oldest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone::new(start.as_bytes(), end.as_bytes(), seq)
    }

    /// The fragments as (start, end, seqs) strings, for readable assertions.
    fn shape(f: &FragmentedTombstones) -> Vec<(String, String, Vec<u64>)> {
        (0..f.len())
            .map(|i| {
                let (s, e, seqs) = f.fragment(i);
                (
                    String::from_utf8(s.to_vec()).unwrap(),
                    String::from_utf8(e.to_vec()).unwrap(),
                    seqs.to_vec(),
                )
            })
            .collect()
    }

    fn frag(s: &str, e: &str, seqs: &[u64]) -> (String, String, Vec<u64>) {
        (s.to_string(), e.to_string(), seqs.to_vec())
    }

    #[test]
    fn overlapping_tombstones_with_different_seqs() {
        let f = FragmentedTombstones::new(vec![t("a", "e", 10), t("c", "g", 5), t("d", "f", 7)]);
        assert_eq!(
            shape(&f),
            vec![
                frag("a", "c", &[10]),
                frag("c", "d", &[10, 5]),
                frag("d", "e", &[10, 7, 5]),
                frag("e", "f", &[7, 5]),
                frag("f", "g", &[5]),
            ]
        );
        assert_eq!(f.max_covering_seq(b"a", 100), Some(10));
        assert_eq!(f.max_covering_seq(b"d", 9), Some(7));
        assert_eq!(f.max_covering_seq(b"d", 6), Some(5));
        assert_eq!(f.max_covering_seq(b"d", 4), None, "older read sees none");
        assert_eq!(f.max_covering_seq(b"f", 100), Some(5));
        assert_eq!(f.max_covering_seq(b"g", 100), None, "end is exclusive");
        assert_eq!(f.max_covering_seq(b"0", 100), None);
    }

    #[test]
    fn identical_starts_and_duplicates() {
        let f = FragmentedTombstones::new(vec![
            t("b", "d", 3),
            t("b", "f", 9),
            t("b", "d", 3),
            t("b", "c", 1),
        ]);
        assert_eq!(
            shape(&f),
            vec![
                frag("b", "c", &[9, 3, 1]),
                frag("c", "d", &[9, 3]),
                frag("d", "f", &[9]),
            ]
        );
    }

    #[test]
    fn gaps_adjacent_empty_and_single_key_ranges() {
        let f = FragmentedTombstones::new(vec![
            t("a", "b", 1),
            t("b", "c", 2),   // adjacent: its own fragment
            t("x", "x", 3),   // empty
            t("m", "k", 4),   // inverted: empty
            t("k", "k\0", 5), // exactly one key
        ]);
        assert_eq!(
            shape(&f),
            vec![
                frag("a", "b", &[1]),
                frag("b", "c", &[2]),
                frag("k", "k\0", &[5]),
            ]
        );
        assert_eq!(f.max_covering_seq(b"b", 10), Some(2));
        assert_eq!(f.max_covering_seq(b"c", 10), None);
        assert_eq!(f.max_covering_seq(b"k", 10), Some(5));
        assert_eq!(f.max_covering_seq(b"k\0", 10), None);
        assert_eq!(f.max_covering_seq(b"x", 10), None);
        assert!(FragmentedTombstones::new(vec![t("q", "q", 1)]).is_empty());
    }

    #[test]
    fn nested_ranges() {
        let f = FragmentedTombstones::new(vec![t("a", "z", 1), t("f", "h", 8)]);
        assert_eq!(
            shape(&f),
            vec![
                frag("a", "f", &[1]),
                frag("f", "h", &[8, 1]),
                frag("h", "z", &[1]),
            ]
        );
    }

    #[test]
    fn truncation_at_file_boundaries() {
        let f = FragmentedTombstones::new(vec![t("a", "m", 4), t("h", "q", 6)]);
        // A table holding keys in [c, k): only the part of each tombstone inside it.
        assert_eq!(
            f.truncated(Some(b"c"), Some(b"k")),
            vec![t("c", "h", 4), t("h", "k", 6), t("h", "k", 4)]
        );
        assert_eq!(f.truncated(Some(b"q"), None), vec![]);
        assert_eq!(f.truncated(None, Some(b"a")), vec![]);
        assert_eq!(
            f.truncated(Some(b"p"), None),
            vec![t("p", "q", 6)],
            "starts inside a fragment"
        );
        // Re-fragmenting the unbounded truncation gives the same fragments back.
        assert_eq!(FragmentedTombstones::new(f.truncated(None, None)), f);
    }

    #[test]
    fn snapshots_keep_one_seq_per_stripe() {
        let f = FragmentedTombstones::new(vec![
            t("a", "c", 3),
            t("a", "c", 5),
            t("a", "c", 12),
            t("a", "c", 15),
        ]);
        // Snapshots at 4 and 13: stripes (.., 4], (4, 13], (13, ..).
        let kept = f.for_snapshots(&[4, 13]);
        assert_eq!(shape(&kept), vec![frag("a", "c", &[15, 12, 3])]);
        // No snapshot: only the newest matters.
        assert_eq!(shape(&f.for_snapshots(&[])), vec![frag("a", "c", &[15])]);
    }

    /// A seeded xorshift generator: `rnd(n)` is below `n`.
    fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    #[test]
    fn agrees_with_brute_force() {
        // Pseudo-random tombstones over a small alphabet, checked key by key and seq by seq.
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1du64);
        for _ in 0..200 {
            let ts: Vec<RangeTombstone> = (0..rnd(12))
                .map(|_| {
                    let a = rnd(26) as u8 + b'a';
                    let b = rnd(26) as u8 + b'a';
                    RangeTombstone::new(&[a], &[b], rnd(20) + 1)
                })
                .collect();
            let f = FragmentedTombstones::new(ts.clone());
            for k in b'a'..=b'z' {
                for read in 0..22 {
                    let want = ts
                        .iter()
                        .filter(|t| t.start[0] <= k && k < t.end[0] && t.seq <= read)
                        .map(|t| t.seq)
                        .max();
                    assert_eq!(
                        f.max_covering_seq(&[k], read),
                        want,
                        "{ts:?} key {k} at {read}"
                    );
                }
            }
            for i in 1..f.len() {
                assert!(f.fragment(i - 1).1 <= f.fragment(i).0, "fragments overlap");
            }
        }
    }

    #[test]
    fn seek_agrees_with_a_plain_search() {
        // Keys of many lengths over bytes that stress the padded 8-byte comparison (0x00 pads,
        // 0xff), mostly behind a shared prefix so the index has one to strip.
        let mut rnd = xorshift(0x9e37_79b9_7f4a_7c15u64);
        let alphabet = [0u8, 1, b'a', b'b', 0xfe, 0xff];
        let key = |rnd: &mut dyn FnMut(u64) -> u64| {
            let mut k = if rnd(4) == 0 {
                Vec::new()
            } else {
                b"user/".to_vec()
            };
            for _ in 0..rnd(14) {
                k.push(alphabet[rnd(alphabet.len() as u64) as usize]);
            }
            k
        };
        for _ in 0..300 {
            let ts: Vec<RangeTombstone> = (0..rnd(30))
                .map(|_| {
                    let (a, b) = (key(&mut rnd), key(&mut rnd));
                    RangeTombstone::new(&a, &b, rnd(9) + 1)
                })
                .collect();
            let f = FragmentedTombstones::new(ts);
            for _ in 0..200 {
                let k = key(&mut rnd);
                let plain = f
                    .fragments
                    .partition_point(|fr| fr.end.as_slice() <= k.as_slice());
                assert_eq!(f.seek(&k), plain, "key {k:?}");
                for read in [0, 3, 9] {
                    let want = (plain < f.len())
                        .then(|| f.fragment(plain))
                        .filter(|(start, _, _)| *start <= k.as_slice())
                        .and_then(|(_, _, seqs)| seqs.iter().copied().find(|&q| q <= read));
                    assert_eq!(f.max_covering_seq(&k, read), want, "key {k:?} at {read}");
                }
            }
        }
    }
}
