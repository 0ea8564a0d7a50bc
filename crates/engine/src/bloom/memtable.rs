//! The memtable filter: inserts and queries run concurrently on atomic 64-bit words. Each key's
//! probes stay in one 512-bit cache line and come in pairs, two bits per 64-bit word, so a query
//! touches at most `probes / 2` words of one line. That costs a little false-positive rate against
//! one bit per word, which the memtable accepts for speed: a memtable lookup a filter saves is cheap
//! compared with a table read.

use std::sync::atomic::{AtomicU64, Ordering};

use super::fastrange32;

const WORDS_PER_LINE: usize = 8;

#[derive(Debug)]
pub(crate) struct MemtableBloom {
    words: Box<[AtomicU64]>,
    lines: u32,
    /// Pairs of probes (one word each).
    word_probes: u32,
}

impl MemtableBloom {
    /// A filter of about `bytes` bytes (rounded up to whole cache lines) with `probes` probes per
    /// key (rounded up to an even number).
    pub(crate) fn new(bytes: usize, probes: u32) -> Self {
        let lines = bytes
            .div_ceil(WORDS_PER_LINE * 8)
            .clamp(1, u32::MAX as usize) as u32;
        let words = (0..lines as usize * WORDS_PER_LINE)
            .map(|_| AtomicU64::new(0))
            .collect();
        MemtableBloom {
            words,
            lines,
            word_probes: probes.div_ceil(2).max(1),
        }
    }

    /// The filter a memtable of `write_buffer_size` bytes gets at `size_ratio` (RocksDB's
    /// `memtable_prefix_bloom_size_ratio`), with 6 probes.
    pub(crate) fn for_memtable(write_buffer_size: usize, size_ratio: f64) -> Self {
        Self::new((write_buffer_size as f64 * size_ratio) as usize, 6)
    }

    /// The words a key touches and the two bits in each: the line from the hash's upper half, then
    /// a multiply-mixed expansion of the lower half gives, per word, its index (3 bits) and two bit
    /// positions (6 bits each).
    #[inline]
    fn probes(&self, hash: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        let base = fastrange32((hash >> 32) as u32, self.lines) as usize * WORDS_PER_LINE;
        let mut h = (hash as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..self.word_probes).map(move |_| {
            let word = base + (h >> 61) as usize;
            let mask = (1u64 << ((h >> 55) & 63)) | (1u64 << ((h >> 49) & 63));
            h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (word, mask)
        })
    }

    pub(crate) fn add(&self, hash: u64) {
        for (word, mask) in self.probes(hash) {
            // Relaxed suffices: a reader that misses a bit set concurrently is reading a key whose
            // insert has not been published yet (sequence numbers publish writes, with Release).
            self.words[word].fetch_or(mask, Ordering::Relaxed);
        }
    }

    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        self.probes(hash)
            .all(|(word, mask)| self.words[word].load(Ordering::Relaxed) & mask == mask)
    }

    pub(crate) fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::key_hash;
    use std::sync::Arc;

    #[cfg_attr(target_os = "wasi", ignore = "needs threads")]
    #[test]
    fn no_false_negatives_under_concurrent_inserts() {
        let bloom = Arc::new(MemtableBloom::new(64 << 10, 6));
        let writers: Vec<_> = (0..2u32)
            .map(|t| {
                let bloom = bloom.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u32 {
                        bloom.add(key_hash(format!("t{t}-{i}").as_bytes()));
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        for t in 0..2u32 {
            for i in 0..20_000u32 {
                assert!(bloom.may_contain(key_hash(format!("t{t}-{i}").as_bytes())));
            }
        }
    }

    #[test]
    fn false_positive_rate_at_10_bits_is_at_most_1_2_percent() {
        let n = 100_000usize;
        let bloom = MemtableBloom::new(n * 10 / 8, 6);
        for i in 0..n {
            bloom.add(key_hash(format!("key{i:010}").as_bytes()));
        }
        let rate =
            crate::bloom::measured_false_positive_rate("memtable filter", |h| bloom.may_contain(h));
        assert!(rate <= 0.012, "false-positive rate {rate}");
        assert!(
            rate > 0.002,
            "a rate of {rate} means the filter is oversized"
        );
        assert_eq!(bloom.bytes(), (n * 10 / 8).div_ceil(64) * 64);
    }
}
