//! Memtable insert and point lookup.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use strata_engine::__bench::Memtable;

fn keys(n: u64) -> Vec<Vec<u8>> {
    // A multiplicative hash spreads the keys so inserts land all over the list.
    (0..n)
        .map(|i| {
            format!(
                "{:016}",
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 1_000_000_007
            )
            .into_bytes()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let ks = keys(100_000);
    let value = [7u8; 100];
    c.bench_function("memtable_insert_100k", |b| {
        b.iter_batched(
            || Memtable::new(64 << 20),
            |m| {
                for (i, k) in ks.iter().enumerate() {
                    m.put(i as u64 + 1, k, &value);
                }
                m
            },
            BatchSize::LargeInput,
        )
    });
    let m = Memtable::new(64 << 20);
    for (i, k) in ks.iter().enumerate() {
        m.put(i as u64 + 1, k, &value);
    }
    let mut i = 0usize;
    c.bench_function("memtable_get_hit", |b| {
        b.iter(|| {
            i = (i + 7919) % ks.len();
            black_box(m.contains(&ks[i], u64::MAX >> 8))
        })
    });
    c.bench_function("memtable_get_miss", |b| {
        b.iter(|| black_box(m.contains(b"not-a-key-at-all", u64::MAX >> 8)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
