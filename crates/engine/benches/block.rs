//! Block encode, decode-and-scan, and seek.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use strata_engine::__bench::{encode_block, scan_block, seek_block};

fn bench(c: &mut Criterion) {
    // About a 4 KiB block of 16-byte keys and 100-byte values, as tables hold.
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..32u32)
        .map(|i| (format!("{:016}", i * 3).into_bytes(), vec![b'v'; 100]))
        .collect();
    c.bench_function("block_encode_4k", |b| {
        b.iter(|| black_box(encode_block(&entries, 16)))
    });
    let block = encode_block(&entries, 16);
    c.bench_function("block_decode_scan_4k", |b| {
        b.iter(|| black_box(scan_block(block.clone())))
    });
    c.bench_function("block_seek_4k", |b| {
        b.iter(|| black_box(seek_block(&block, b"0000000000000045")))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
