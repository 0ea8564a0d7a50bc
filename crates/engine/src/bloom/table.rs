//! The table filter: built once per table, stored in its filter block. Inside the key's cache line
//! each probe takes 9 bits of the hash's lower half, re-mixed by a multiplication per probe.

/// Bits per cache line.
const LINE_BITS: u32 = 512;
const LINE_BYTES: usize = 64;
/// Filter trailer: probe count (1) + line count (4).
const TRAILER: usize = 5;

use super::{fastrange32, key_hash};

/// Probes for a bits-per-key budget: fewer than the textbook optimum, because a cache-local filter
/// loses less to the penalty of a missing probe than it gains in speed.
fn probes_for(bits_per_key: u32) -> u8 {
    ((bits_per_key as f64 * 0.6).round() as u32).clamp(1, 24) as u8
}

#[inline]
fn next_probe(h: u32) -> u32 {
    h.wrapping_mul(0x9e37_79b9)
}

/// Collects key hashes for one table and lays out its filter.
#[derive(Debug, Default)]
pub(crate) struct FilterBuilder {
    hashes: Vec<u64>,
    bits_per_key: u32,
}

impl FilterBuilder {
    pub(crate) fn new(bits_per_key: u32) -> Self {
        FilterBuilder {
            hashes: Vec::new(),
            bits_per_key,
        }
    }

    /// Adds a user key; consecutive repeats (versions of one key) are counted once.
    pub(crate) fn add_key(&mut self, user_key: &[u8]) {
        let h = key_hash(user_key);
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    pub(crate) fn num_keys(&self) -> usize {
        self.hashes.len()
    }

    /// The filter block; empty when the table has no keys.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        if self.hashes.is_empty() {
            return Vec::new();
        }
        let total_bits = self.hashes.len() as u64 * self.bits_per_key as u64;
        let lines = total_bits
            .div_ceil(LINE_BITS as u64)
            .clamp(1, u32::MAX as u64) as u32;
        let probes = probes_for(self.bits_per_key);
        let mut data = vec![0u8; lines as usize * LINE_BYTES + TRAILER];
        for &h in &self.hashes {
            let line = fastrange32((h >> 32) as u32, lines) as usize * LINE_BYTES;
            let mut p = h as u32;
            for _ in 0..probes {
                let bit = (p >> 23) as usize; // top 9 bits: 0..512
                data[line + bit / 8] |= 1 << (bit % 8);
                p = next_probe(p);
            }
        }
        let n = data.len();
        data[n - TRAILER] = probes;
        data[n - 4..].copy_from_slice(&lines.to_le_bytes());
        self.hashes.clear();
        data
    }
}

/// The probe count and the offset of `hash`'s cache line, or `None` for a malformed filter.
#[inline]
fn locate(filter: &[u8], hash: u64) -> Option<(u8, usize)> {
    if filter.len() < TRAILER + LINE_BYTES {
        return None;
    }
    let n = filter.len();
    let probes = filter[n - TRAILER];
    let lines = crate::coding::fixed32(filter, n - 4);
    // In u64: a damaged line count times the line size can overflow a 32-bit usize.
    if u64::from(lines) * LINE_BYTES as u64 != (n - TRAILER) as u64 || probes == 0 {
        return None;
    }
    Some((
        probes,
        fastrange32((hash >> 32) as u32, lines) as usize * LINE_BYTES,
    ))
}

/// Asks the CPU to start loading `hash`'s cache line, so that a batch can issue all its loads
/// before the first probe waits on one.
#[inline]
pub(crate) fn prefetch(filter: &[u8], hash: u64) {
    if let Some((_, offset)) = locate(filter, hash) {
        crate::bloom::prefetch_line(&filter[offset]);
    }
}

/// Queries a filter block. A malformed filter answers "maybe" so that it can only cost a read.
#[inline]
pub(crate) fn may_contain(filter: &[u8], hash: u64) -> bool {
    let Some((probes, offset)) = locate(filter, hash) else {
        return true;
    };
    let line = &filter[offset..][..LINE_BYTES];
    let mut p = hash as u32;
    for _ in 0..probes {
        let bit = (p >> 23) as usize;
        if line[bit / 8] & (1 << (bit % 8)) == 0 {
            return false;
        }
        p = next_probe(p);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::key_hash;

    #[test]
    fn no_false_negatives() {
        let mut b = FilterBuilder::new(10);
        for i in 0..10_000u32 {
            b.add_key(&i.to_be_bytes());
        }
        let f = b.finish();
        for i in 0..10_000u32 {
            assert!(may_contain(&f, key_hash(&i.to_be_bytes())));
        }
    }

    #[test]
    fn false_positive_rate_at_10_bits_is_at_most_one_percent() {
        let n = 100_000u32;
        let mut b = FilterBuilder::new(10);
        for i in 0..n {
            b.add_key(format!("key{i:010}").as_bytes());
        }
        let f = b.finish();
        let rate =
            crate::bloom::measured_false_positive_rate("table filter", |h| may_contain(&f, h));
        assert!(rate <= 0.010, "false-positive rate {rate}");
        assert!(
            rate > 0.001,
            "a rate of {rate} means the filter is oversized"
        );
    }

    #[test]
    fn prefetch_leaves_answers_alone() {
        let mut b = FilterBuilder::new(10);
        for i in 0..1000u32 {
            b.add_key(&i.to_be_bytes());
        }
        let f = b.finish();
        for i in 0..2000u32 {
            let h = key_hash(&i.to_be_bytes());
            let before = may_contain(&f, h);
            prefetch(&f, h);
            assert_eq!(may_contain(&f, h), before);
        }
        prefetch(&[], 1); // malformed: nothing to load
    }

    #[test]
    fn damaged_or_empty_filter_says_maybe() {
        assert!(may_contain(&[], 42));
        assert!(may_contain(&[0u8; 10], 42));
        let mut b = FilterBuilder::new(10);
        b.add_key(b"k");
        let mut f = b.finish();
        let n = f.len();
        f[n - 4] = 9; // line count no longer matches the size
        assert!(may_contain(&f, key_hash(b"other")));
    }

    #[test]
    fn a_line_count_whose_size_wraps_32_bits_is_refused() {
        // 2^26 + 1 lines of 64 bytes is 2^32 + 64: on wasm32 a usize product wraps to the real
        // 64, and the probe would index far past the filter.
        let mut f = vec![0xffu8; LINE_BYTES + TRAILER];
        f[LINE_BYTES] = 6;
        f[LINE_BYTES + 1..].copy_from_slice(&((1u32 << 26) + 1).to_le_bytes());
        for i in 0..1000u32 {
            assert!(may_contain(&f, key_hash(&i.to_le_bytes())));
            prefetch(&f, key_hash(&i.to_le_bytes()));
        }
    }
}
