//! Bloom filters: building a table filter, and queries (hits and misses) on the table and memtable
//! variants at 10 bits per key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use strata_engine::__bench::{MemtableFilter, build_table_filter, table_filter_may_contain};

fn bench(c: &mut Criterion) {
    let keys: Vec<Vec<u8>> = (0..100_000u32)
        .map(|i| format!("{i:016}").into_bytes())
        .collect();
    let absent: Vec<Vec<u8>> = (0..100_000u32)
        .map(|i| format!("x{i:015}").into_bytes())
        .collect();
    c.bench_function("table_filter_build_100k", |b| {
        b.iter(|| black_box(build_table_filter(&keys, 10)))
    });
    let filter = build_table_filter(&keys, 10);
    let mut i = 0usize;
    c.bench_function("table_filter_query_hit", |b| {
        b.iter(|| {
            i = (i + 7919) % keys.len();
            black_box(table_filter_may_contain(&filter, &keys[i]))
        })
    });
    c.bench_function("table_filter_query_miss", |b| {
        b.iter(|| {
            i = (i + 7919) % absent.len();
            black_box(table_filter_may_contain(&filter, &absent[i]))
        })
    });
    c.bench_function("memtable_filter_add_100k", |b| {
        b.iter(|| {
            let f = MemtableFilter::new(keys.len() * 10 / 8);
            for k in &keys {
                f.add(k);
            }
            f
        })
    });
    let mem = MemtableFilter::new(keys.len() * 10 / 8);
    for k in &keys {
        mem.add(k);
    }
    c.bench_function("memtable_filter_query_miss", |b| {
        b.iter(|| {
            i = (i + 7919) % absent.len();
            black_box(mem.may_contain(&absent[i]))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
