//! Cache-local Bloom filters. Both variants confine a key's probes to one 64-byte cache line,
//! chosen with fastrange (a multiply-shift instead of `%`) from the upper half of one 64-bit hash
//! per key: the table variant is built once and stored in the filter block; the memtable variant
//! takes concurrent inserts and queries on atomic 64-bit words.

mod memtable;
mod table;

pub(crate) use memtable::MemtableBloom;
pub(crate) use table::{FilterBuilder, may_contain};

/// The hash every filter is built from; computed once per key and reused for every table.
#[inline]
pub(crate) fn key_hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

#[inline]
pub(crate) fn fastrange32(hash: u32, n: u32) -> u32 {
    ((hash as u64 * n as u64) >> 32) as u32
}
