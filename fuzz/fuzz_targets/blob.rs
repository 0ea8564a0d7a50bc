//! Arbitrary bytes as a blob: decoded and walked; only errors, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    strata_engine::__fuzz::blob(data);
});
