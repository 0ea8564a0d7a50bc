//! Probe words for an index block: 8 bytes of each restart key as a number, so a seek narrows
//! the restarts by searching one contiguous array before it decodes and compares whole keys.
//!
//! An index block has a restart per entry, thousands in a large table, and a binary search of
//! them decodes a restart slot, then the key it points to, at every step: two loads far apart in
//! the block, a varint decode and a memcmp. The words are 8 bytes apiece and adjacent, so the
//! search touches a few cache lines and compares integers; the whole keys are compared only
//! among the restarts whose word equals the target's, usually none or one.
//!
//! Invariant: key order implies word order (not strict). A key's word is:
//! - for a user key starting with `prefix`: its 8 bytes after the prefix, zero-padded, big-endian
//!   (padding sorts a key before every longer key it is a prefix of, as lexicographic order does);
//! - 0 for a user key below every key that starts with `prefix`, `u64::MAX` above them.
//!
//! So the prefix need not be shared by every restart key: it is the one most of them share. An
//! index block's last key is often a short successor (`1` after zero-padded decimal keys), which
//! shares nothing with the others; a common prefix of all the keys would then be empty, and
//! decimal keys' first 8 bytes all zeros.

use std::cmp::Ordering;

use crate::key;

/// Fewer restarts than this are searched as they are: the words would not pay for themselves.
pub(super) const MIN_RESTARTS: usize = 64;

#[derive(Debug)]
pub(super) struct Probes {
    /// The bytes most restart keys' user keys start with (those the keys at 1/16 and 15/16 of
    /// the block share): zero-padded decimal keys share many, and a word after them tells keys
    /// apart.
    prefix: Box<[u8]>,
    /// Each restart's word (the invariant above).
    words: Box<[u64]>,
    /// Every `GROUP`th word: a search finds its group here (a few KiB, which stay in cache)
    /// before it reads the group's two cache lines of `words`, instead of ten or more lines
    /// of `words` far apart.
    firsts: Box<[u64]>,
}

/// Words per group of `Probes::firsts`: two cache lines.
const GROUP: usize = 16;

/// The 8 bytes of `suffix` that a word holds, zero-padded.
fn word(suffix: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = suffix.len().min(8);
    bytes[..n].copy_from_slice(&suffix[..n]);
    u64::from_be_bytes(bytes)
}

impl Probes {
    /// The words of `user_keys` (each restart's user key, in order; at least one).
    pub(super) fn new(user_keys: &[&[u8]]) -> Probes {
        let n = user_keys.len();
        // The prefix of the middle 7/8 of the keys: the outliers at either end only lose the
        // words' help (0 or MAX), not correctness.
        let (a, b) = (user_keys[n / 16], user_keys[n - 1 - n / 16]);
        let shared = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let mut probes = Probes {
            prefix: a[..shared].into(),
            words: Box::default(),
            firsts: Box::default(),
        };
        probes.words = user_keys.iter().map(|k| probes.word_of(k)).collect();
        probes.firsts = probes.words.iter().step_by(GROUP).copied().collect();
        probes
    }

    /// `user_key`'s word (the invariant above).
    fn word_of(&self, user_key: &[u8]) -> u64 {
        let p = self.prefix.len();
        let head = &user_key[..user_key.len().min(p)];
        match head.cmp(&self.prefix[..head.len()]) {
            Ordering::Less => 0,
            // A shorter head equal to the prefix's start is a proper prefix of it: below.
            Ordering::Equal if head.len() < p => 0,
            Ordering::Equal => word(&user_key[p..]),
            Ordering::Greater => u64::MAX,
        }
    }

    /// The first restart whose word is `w` or more (`words.len()` when none is): its group from
    /// `firsts`, then its place in the group.
    fn first_at_least(&self, w: u64) -> usize {
        // Groups before `g` start below `w`; group `g` (if any) starts at `w` or more, so the
        // answer lies after the start of group `g - 1` and at most at the start of group `g`.
        let g = self.firsts.partition_point(|&x| x < w);
        if g == 0 {
            return 0;
        }
        let start = (g - 1) * GROUP;
        let end = (g * GROUP).min(self.words.len());
        start + self.words[start..end].partition_point(|&x| x < w)
    }

    /// Bytes held, for the cache's charge.
    pub(super) fn bytes(&self) -> usize {
        self.prefix.len() + (self.words.len() + self.firsts.len()) * 8
    }

    /// The restarts, first and last inclusive, among which the last restart whose key is below
    /// `target` lies (restart 0 when none is): the bounds a binary search on whole keys needs.
    pub(super) fn narrow(&self, target: &[u8]) -> (u32, u32) {
        let last = self.words.len() as u32 - 1;
        if target.len() < 8 {
            return (0, last);
        }
        let w = self.word_of(key::user_key(target));
        // Restarts before `below` have smaller words, so smaller keys; those from `above` on
        // have larger words, so larger keys.
        let below = self.first_at_least(w);
        // A run of equal words is usually short: stepped through, then searched if it is not.
        let words = &self.words;
        let mut above = below;
        while above < words.len() && words[above] == w && above - below < GROUP {
            above += 1;
        }
        if above < words.len() && words[above] == w {
            above += words[above..].partition_point(|&x| x == w);
        }
        (
            below.saturating_sub(1) as u32,
            above.saturating_sub(1) as u32,
        )
    }
}
