use std::path::Path;
use std::sync::Arc;

use super::format::BlockChecksum;
use super::reader::{MetaBlocks, TableReader};
use super::*;
use crate::bloom::key_hash;
use crate::cache::BlockCache;
use crate::error::Error;
use crate::fs::{FileSystem, StdFileSystem};
use crate::iter::InternalIterator;
use crate::iter::testutil::{collect_backward, collect_forward};
use crate::key::Lookup;
use crate::key::{internal_key, lookup_key, user_key};
use crate::options::CacheKind;
use crate::options::Compression;
use crate::stats::Stats;

const READ: BlockReadOptions = BlockReadOptions {
    fill_cache: true,
    verify_checksums: true,
    cache_only: false,
};

fn opts(compression: Compression) -> TableOptions {
    TableOptions {
        block_size: 256,
        restart_interval: 4,
        compression,
        zstd_level: 3,
        bloom_bits_per_key: 10,
        column_family: 0,
    }
}

fn entries(n: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let kind = if i % 10 == 3 { 0 } else { 1 };
            let v = if kind == 0 {
                vec![]
            } else {
                format!("value-{i}-{}", "x".repeat((i % 7) as usize)).into_bytes()
            };
            (
                internal_key(
                    format!("user{:06}", i * 2).as_bytes(),
                    1000 - i as u64,
                    kind,
                ),
                v,
            )
        })
        .collect()
}

fn build(path: &Path, es: &[(Vec<u8>, Vec<u8>)], o: TableOptions) -> (TableProperties, u64) {
    build_checksummed(path, es, o, BlockChecksum::WRITTEN)
}

/// A table whose blocks are checksummed with `checksum` (format version 1 or 2).
fn build_checksummed(
    path: &Path,
    es: &[(Vec<u8>, Vec<u8>)],
    o: TableOptions,
    checksum: BlockChecksum,
) -> (TableProperties, u64) {
    let mut b =
        TableBuilder::new(StdFileSystem.create(path).unwrap(), path, o).with_checksum(checksum);
    for (k, v) in es {
        b.add(k, v).unwrap();
    }
    b.finish().unwrap()
}

fn open(path: &Path, cache: Option<Arc<BlockCache>>) -> crate::Result<Arc<TableReader>> {
    let file = StdFileSystem.open_random(path)?;
    Ok(Arc::new(TableReader::open(
        file,
        path,
        1,
        cache,
        MetaBlocks::Held,
        Arc::new(Stats::default()),
    )?))
}

#[test]
fn build_and_read_back_every_way() {
    let dir = crate::test_dir::tempdir();
    // Format version 1 (CRC32C trailers) is what earlier versions wrote: it must still read.
    for (compression, checksum) in [
        (Compression::None, BlockChecksum::WRITTEN),
        (Compression::Zstd, BlockChecksum::WRITTEN),
        (Compression::None, BlockChecksum::Crc32c),
        (Compression::Zstd, BlockChecksum::Crc32c),
    ] {
        let path = dir.path().join(format!("{compression:?}-{checksum:?}.sst"));
        let es = entries(1000);
        let (props, size) = build_checksummed(&path, &es, opts(compression), checksum);
        assert_eq!(props.num_entries, 1000);
        assert_eq!(props.num_deletions, 100);
        assert!(props.num_data_blocks > 10);
        assert_eq!(props.smallest_key, es[0].0);
        assert_eq!(props.largest_key, es[999].0);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        let t = open(
            &path,
            Some(Arc::new(BlockCache::new(1 << 20, 2, CacheKind::Lru, 0.5))),
        )
        .unwrap();
        assert_eq!(t.properties(), &props);
        assert_eq!(collect_forward(&mut t.iter(READ).unwrap()), es);
        assert_eq!(collect_backward(&mut t.iter(READ).unwrap()), es);
        assert_eq!(t.verify().unwrap(), 1000);
        for i in [0u32, 3, 500, 999] {
            let uk = format!("user{:06}", i * 2);
            let got = t
                .get(
                    &lookup_key(uk.as_bytes(), u64::MAX >> 8),
                    key_hash(uk.as_bytes()),
                    READ,
                )
                .unwrap();
            if i % 10 == 3 {
                assert_eq!(got, Lookup::Deleted);
            } else {
                match got {
                    Lookup::Found(v) => {
                        assert_eq!(&*v, &es[i as usize].1[..]);
                        assert!(v.is_pinned());
                    }
                    other => panic!("{other:?}"),
                }
            }
            // Older than the entry: invisible.
            let old = t
                .get(&lookup_key(uk.as_bytes(), 0), key_hash(uk.as_bytes()), READ)
                .unwrap();
            assert_eq!(old, Lookup::NotFound);
            let missing = format!("user{:06}", i * 2 + 1);
            let got = t
                .get(
                    &lookup_key(missing.as_bytes(), 5000),
                    key_hash(missing.as_bytes()),
                    READ,
                )
                .unwrap();
            assert_eq!(got, Lookup::NotFound);
        }
        let mut it = t.iter(READ).unwrap();
        it.seek(&lookup_key(b"user000501", 5000));
        assert_eq!(user_key(it.key()), b"user000502");
        it.seek_for_prev(&lookup_key(b"user000501", 0));
        assert_eq!(user_key(it.key()), b"user000500");
        it.seek(&lookup_key(b"zzz", 5000));
        assert!(!it.valid());
        it.status().unwrap();
    }
}

#[test]
fn index_separators_are_shortened() {
    let dir = crate::test_dir::tempdir();
    let path = dir.path().join("t.sst");
    let long: Vec<_> = (0..200u32)
        .map(|i| {
            (
                internal_key(format!("{:03}-{}", i * 2, "k".repeat(200)).as_bytes(), 1, 1),
                b"v".to_vec(),
            )
        })
        .collect();
    let (props, _) = build(&path, &long, opts(Compression::None));
    // Each index key is a 3-4 byte separator instead of a 204-byte user key.
    assert!(props.index_size < props.num_data_blocks * 40, "{props:?}");
    let t = open(&path, None).unwrap();
    assert_eq!(collect_forward(&mut t.iter(READ).unwrap()), long);
}

#[test]
fn every_flipped_byte_is_detected_or_harmless() {
    let dir = crate::test_dir::tempdir();
    let path = dir.path().join("t.sst");
    let es = entries(60);
    build(&path, &es, opts(Compression::Zstd));
    let good = std::fs::read(&path).unwrap();
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x01;
        std::fs::write(&path, &bad).unwrap();
        let result = open(&path, None).and_then(|t| {
            t.verify()?;
            Ok(collect_forward(&mut t.iter(READ).unwrap()))
        });
        match result {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path, "byte {i}"),
            Err(e) => panic!("byte {i}: unexpected error {e}"),
            // A flip in the filter can only make it say "maybe" more or less often; never wrong data.
            Ok(got) => assert_eq!(got, es, "byte {i} changed what is read"),
        }
    }
}

#[test]
fn truncated_file_is_corruption() {
    let dir = crate::test_dir::tempdir();
    let path = dir.path().join("t.sst");
    build(&path, &entries(50), opts(Compression::None));
    let good = std::fs::read(&path).unwrap();
    for len in [0, 10, good.len() / 2, good.len() - 1] {
        std::fs::write(&path, &good[..len]).unwrap();
        assert!(open(&path, None).unwrap_err().is_corruption(), "len {len}");
    }
}

#[test]
fn out_of_order_add_is_rejected() {
    let dir = crate::test_dir::tempdir();
    let path = dir.path().join("t.sst");
    let mut b = TableBuilder::new(
        StdFileSystem.create(&path).unwrap(),
        &path,
        opts(Compression::None),
    );
    b.add(&internal_key(b"b", 1, 1), b"").unwrap();
    assert!(b.add(&internal_key(b"a", 1, 1), b"").is_err());
}

#[test]
fn range_tombstones_round_trip_through_their_block() {
    use crate::range_del::RangeTombstone;
    let dir = crate::test_dir::tempdir();
    for with_entries in [true, false] {
        let path = dir.path().join(format!("rd{with_entries}.sst"));
        let mut b = TableBuilder::new(
            StdFileSystem.create(&path).unwrap(),
            &path,
            opts(Compression::Zstd),
        );
        if with_entries {
            for (k, v) in entries(100) {
                b.add(&k, &v).unwrap();
            }
        }
        b.add_range_tombstone(RangeTombstone::new(b"user000010", b"user000050", 2000));
        b.add_range_tombstone(RangeTombstone::new(b"user000000", b"user000020", 2001));
        b.add_range_tombstone(RangeTombstone::new(b"user000030", b"user000031", 5));
        let (props, _) = b.finish().unwrap();
        assert_eq!(props.num_range_deletions, 3);
        assert_eq!(props.largest_seq, 2001);
        let t = open(&path, None).unwrap();
        assert_eq!(t.properties().num_range_deletions, 3);
        let rd = t.range_tombstones();
        assert_eq!(rd.max_covering_seq(b"user000015", u64::MAX), Some(2001));
        assert_eq!(rd.max_covering_seq(b"user000030", 1999), Some(5));
        assert_eq!(rd.max_covering_seq(b"user000030", 4), None);
        assert_eq!(rd.max_covering_seq(b"user000050", u64::MAX), None);
        if with_entries {
            assert_eq!(collect_forward(&mut t.iter(READ).unwrap()).len(), 100);
        }
    }
    // A table without any has an empty list.
    let path = dir.path().join("plain.sst");
    build(&path, &entries(10), opts(Compression::None));
    assert!(open(&path, None).unwrap().range_tombstones().is_empty());
}
