//! Cache-local Bloom filters. Both variants confine a key's probes to one 64-byte cache line,
//! chosen with fastrange (a multiply-shift instead of `%`) from the upper half of one 64-bit hash
//! per key: the table variant is built once and stored in the filter block; the memtable variant
//! takes concurrent inserts and queries on atomic 64-bit words.

mod memtable;
mod table;

pub(crate) use memtable::MemtableBloom;
pub(crate) use table::{FilterBuilder, may_contain, prefetch};

/// The hash every filter is built from; computed once per key and reused for every table.
#[inline]
pub(crate) fn key_hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

/// Starts loading the cache line holding `byte` without waiting for it; it cannot fault. A
/// prefetch instruction on x86_64, a load whose value is dropped on WebAssembly, nothing elsewhere.
#[inline]
pub(crate) fn prefetch_line(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults and reads nothing into the program; the
    // pointer comes from a live reference anyway, and SSE (which the intrinsic requires) is part of
    // the x86_64 baseline. Exercised by `bloom::table::tests::prefetch_leaves_answers_alone`.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (byte as *const u8).cast::<i8>(),
        );
    }
    // WebAssembly has no prefetch, but the CPU running it does not wait on a load nothing uses
    // yet: loading a batch's lines up front overlaps their misses as the x86 hint does (the
    // component's MultiGet on a store larger than the CPU caches: 1.54-1.64x native time before,
    // 1.36-1.49x after). A volatile read is one that neither LLVM nor Cranelift drops.
    #[cfg(target_arch = "wasm32")]
    // SAFETY: `byte` is a live reference, so reading the byte it points at is sound. Exercised
    // on wasm32 by the same test, which `make wasm-test` runs under wasmtime.
    unsafe {
        std::ptr::read_volatile(byte);
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "wasm32")))]
    let _ = byte;
}

#[inline]
pub(crate) fn fastrange32(hash: u32, n: u32) -> u32 {
    ((hash as u64 * n as u64) >> 32) as u32
}

/// Counts how many of 1,000,000 keys absent from a filter it claims to hold; prints and returns
/// the rate.
#[cfg(test)]
pub(crate) fn measured_false_positive_rate(name: &str, may_contain: impl Fn(u64) -> bool) -> f64 {
    let absent = 1_000_000u32;
    let fp = (0..absent)
        .filter(|i| may_contain(key_hash(format!("absent{i:010}").as_bytes())))
        .count();
    let rate = fp as f64 / absent as f64;
    eprintln!(
        "{name}: {fp} false positives in {absent} absent keys ({:.3}%)",
        rate * 100.0
    );
    rate
}
