//! Ranged reads and streamed values: every place a value can live (memtable, table, a blob
//! record of each layout, a value file), checked against the bytes written, at snapshots held
//! across overwrites, with a reader racing a writer, and with one damaged chunk.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::field_reassign_with_default
)]

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_engine::{
    ColumnFamilyOptions, Compression, Db, ErrorKind, MAX_VALUE_SIZE, Options, ReadOptions,
    WriteBatch, WriteOptions,
};

use crate::common::{self, files_with_extension};

const CHUNK: usize = 4 << 10;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
        .collect()
}

fn options() -> Options {
    let mut o = Options::default();
    o.create_missing_column_families = true;
    o.cf.enable_blob_files = true;
    o.cf.min_blob_size = 4096;
    o.cf.blob_compression = Compression::None;
    o.column_families.insert(
        "zstd".into(),
        ColumnFamilyOptions {
            enable_blob_files: true,
            min_blob_size: 4096,
            blob_compression: Compression::Zstd,
            ..Default::default()
        },
    );
    o.column_families
        .insert("inline".into(), ColumnFamilyOptions::default());
    o
}

/// Text, but for its second chunk of noise: compressed chunk by chunk, one kept as written.
fn text_with_noise(len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|i| b"lorem ipsum dolor "[i % 18]).collect();
    let noise = pattern(CHUNK, 11);
    v[CHUNK..2 * CHUNK].copy_from_slice(&noise);
    v
}

/// Checks `count` random ranges (and the edges) of `key` in `cf` against `want`.
fn check_ranges(db: &Db, opts: &ReadOptions, cf: &str, key: &str, want: &[u8], count: usize) {
    let cf = db.cf(cf).unwrap();
    let mut rng = StdRng::seed_from_u64(want.len() as u64);
    let n = want.len() as u64;
    let mut ranges: Vec<(u64, u64)> = vec![
        (0, 0),
        (0, n),
        (0, n + 10),
        (n, 5),
        (n + 1, 5),
        (n.saturating_sub(1), 1),
    ];
    for _ in 0..count {
        let offset = rng.random_range(0..=n);
        let len = rng.random_range(0..=(2 * CHUNK as u64 + 10));
        ranges.push((offset, len));
    }
    for (offset, len) in ranges {
        let got = db
            .read_range_cf(opts, &cf, key, offset, len)
            .unwrap()
            .unwrap();
        assert_eq!(got.value_len, n, "{key}");
        let start = offset.min(n) as usize;
        let end = (offset + len).min(n) as usize;
        assert!(
            got.bytes[..] == want[start..end],
            "{key}: {len} bytes at {offset} of {n}"
        );
    }
}

/// Reads `key` whole through a value reader in steps of `step` bytes.
fn stream(db: &Db, opts: &ReadOptions, cf: &str, key: &str, step: usize) -> Vec<u8> {
    let cf = db.cf(cf).unwrap();
    let mut reader = db.value_reader_cf(opts, &cf, key).unwrap().unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; step];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert_eq!(out.len() as u64, reader.value_len());
    out
}

#[test]
fn ranges_of_values_wherever_they_live_match_what_was_written() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let values: Vec<(&str, &str, Vec<u8>)> = vec![
        ("inline", "small", pattern(300, 1)),
        ("inline", "table", pattern(100_000, 2)),
        ("default", "raw-blob", pattern(4096, 3)),
        ("default", "chunked", pattern(5 * CHUNK + 123, 4)),
        ("default", "exact-chunks", pattern(3 * CHUNK, 5)),
        ("zstd", "compressed", vec![7u8; 300_000]),
        ("zstd", "incompressible", pattern(2 * CHUNK + 1, 6)),
        ("zstd", "mixed-chunks", text_with_noise(9 * CHUNK + 5)),
    ];
    for (cf, key, value) in &values {
        db.put_cf(&db.cf(cf).unwrap(), key, value).unwrap();
    }
    // A value file of several MiB.
    let big = pattern((3 << 20) + 17, 9);
    let mut vf = db
        .create_value_file(&db.default_cf(), "value-file")
        .unwrap();
    for part in big.chunks(250_000) {
        vf.write_at(vf.len(), part).unwrap();
    }
    db.write_with_value_file(WriteBatch::new(), vf, &WriteOptions::default())
        .unwrap();
    let check_all = |db: &Db| {
        let opts = ReadOptions::default();
        for (cf, key, value) in &values {
            let size = db.value_size_cf(&db.cf(cf).unwrap(), key).unwrap();
            assert_eq!(size, Some(value.len() as u64), "{key}");
            check_ranges(db, &opts, cf, key, value, 40);
            assert!(stream(db, &opts, cf, key, 10_000) == *value, "{key}");
        }
        let size = db.value_size_cf(&db.default_cf(), "value-file").unwrap();
        assert_eq!(size, Some(big.len() as u64));
        check_ranges(db, &opts, "default", "value-file", &big, 40);
        assert!(stream(db, &opts, "default", "value-file", 1 << 20) == big);
        assert!(db.read_range("absent", 0, 10).unwrap().is_none());
    };
    check_all(&db); // memtables and blob files
    for cf in ["default", "zstd", "inline"] {
        db.flush_cf(&db.cf(cf).unwrap()).unwrap();
    }
    check_all(&db); // tables
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    check_all(&db);
}

#[test]
#[cfg_attr(target_os = "wasi", ignore = "needs threads")]
fn a_reader_and_ranges_at_a_snapshot_keep_the_old_value_across_overwrites() {
    let dir = common::tempdir();
    let db = Arc::new(Db::open(dir.path(), options()).unwrap());
    let old = pattern(4 * CHUNK + 5, 1);
    db.put("k", &old).unwrap();
    let snapshot = db.snapshot();
    let at_snapshot = ReadOptions {
        snapshot: Some(snapshot),
        ..Default::default()
    };
    let mut reader = db
        .value_reader_cf(&ReadOptions::default(), &db.default_cf(), "k")
        .unwrap()
        .unwrap();
    // Another thread overwrites and deletes the key a thousand times while it is read.
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..1_000u32 {
                if i % 3 == 2 {
                    db.delete("k").unwrap();
                } else {
                    db.put("k", pattern(CHUNK + i as usize, i as u8)).unwrap();
                }
                if i % 250 == 0 {
                    db.flush().unwrap();
                }
            }
        })
    };
    let mut got = Vec::new();
    let mut buf = vec![0u8; 3000];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    writer.join().unwrap();
    assert!(
        got == old,
        "the reader's own snapshot kept the value it began"
    );
    check_ranges(&db, &at_snapshot, "default", "k", &old, 50);
    reader.seek(SeekFrom::Start(CHUNK as u64 - 2)).unwrap();
    let mut four = [0u8; 4];
    reader.read_exact(&mut four).unwrap();
    assert_eq!(four[..], old[CHUNK - 2..CHUNK + 2]);
    assert_eq!(
        reader.seek(SeekFrom::End(-1)).unwrap(),
        old.len() as u64 - 1
    );
    assert!(reader.seek(SeekFrom::Current(-(old.len() as i64))).is_err());
    // A reader outliving its store's close answers Closed, never a file gone meanwhile.
    db.close().unwrap();
    let e = reader.read_step(10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
}

/// The value of "big" in `cf` (`value`, six chunks, stored in `blob`) has a damaged chunk 2:
/// every chunk but it reads (twice, the second time through the cached head and index page),
/// each range over it fails naming the file and the chunk, and so do a whole read and a
/// stream, which stops before it.
fn only_chunk_2_fails(db: &Db, cf: &str, value: &[u8], blob: &Path) {
    let cf = db.cf(cf).unwrap();
    let opts = ReadOptions::default();
    for c in [0usize, 1, 3, 5] {
        for _ in 0..2 {
            let got = db
                .read_range_cf(&opts, &cf, "big", (c * CHUNK) as u64, CHUNK as u64)
                .unwrap()
                .unwrap();
            assert!(
                got.bytes[..] == value[c * CHUNK..(c + 1) * CHUNK],
                "chunk {c}"
            );
        }
    }
    for (offset, len) in [(2 * CHUNK, 1), (2 * CHUNK - 1, 2), (0, 6 * CHUNK)] {
        let e = db
            .read_range_cf(&opts, &cf, "big", offset as u64, len as u64)
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        assert!(e.to_string().contains(&*blob.to_string_lossy()), "{e}");
        assert!(e.to_string().contains("chunk 2"), "{e}");
    }
    assert_eq!(
        db.get_cf(&cf, "big").unwrap_err().kind(),
        ErrorKind::Corruption
    );
    let mut reader = db.value_reader_cf(&opts, &cf, "big").unwrap().unwrap();
    let mut sink = Vec::new();
    let e = reader.read_to_end(&mut sink).unwrap_err();
    assert!(e.to_string().contains("chunk 2"), "{e}");
    assert_eq!(
        sink.len(),
        2 * CHUNK,
        "the stream stops before the damaged chunk"
    );
}

#[test]
fn a_flipped_byte_fails_only_the_ranges_that_cover_its_chunk() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let value = pattern(6 * CHUNK, 3);
    let mut vf = db.create_value_file(&db.default_cf(), "big").unwrap();
    vf.write_at(0, &value).unwrap();
    db.write_with_value_file(WriteBatch::new(), vf, &WriteOptions::default())
        .unwrap();
    db.close().unwrap();
    drop(db);
    let blob = files_with_extension(dir.path(), "blob").pop().unwrap();
    let mut bytes = std::fs::read(&blob).unwrap();
    // The file header (32), the record header (21) and the key (3) come first; damage chunk 2.
    let chunk2 = 32 + 21 + 3 + 2 * CHUNK + 100;
    bytes[chunk2] ^= 0x40;
    std::fs::write(&blob, &bytes).unwrap();

    let db = Db::open(dir.path(), options()).unwrap();
    only_chunk_2_fails(&db, "default", &value, &blob);
}

#[test]
fn a_flipped_byte_in_a_compressed_chunk_fails_only_the_ranges_that_cover_it() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let value = text_with_noise(6 * CHUNK);
    let zstd = db.cf("zstd").unwrap();
    db.put_cf(&zstd, "big", &value).unwrap();
    // Stored in far fewer bytes than it holds: its chunks are compressed.
    db.close().unwrap();
    drop(db);
    let blob = files_with_extension(dir.path(), "blob").pop().unwrap();
    let mut bytes = std::fs::read(&blob).unwrap();
    assert!(bytes.len() < value.len() / 2, "{} bytes", bytes.len());
    // The file header (32), the record header (21), the key (3), then six table entries (an
    // end and a checksum each); chunk 2 starts where entry 1 says chunk 1 ends.
    let table = 32 + 21 + 3;
    let end_of_1 = u32::from_le_bytes(bytes[table + 8..table + 12].try_into().unwrap());
    bytes[table + 6 * 8 + end_of_1 as usize + 5] ^= 0x40;
    std::fs::write(&blob, &bytes).unwrap();

    let db = Db::open(dir.path(), options()).unwrap();
    only_chunk_2_fails(&db, "zstd", &value, &blob);
}

#[test]
fn ranges_past_the_largest_value_or_overflowing_are_refused() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put("k", "value").unwrap();
    let past = db.read_range("k", MAX_VALUE_SIZE + 1, 1).unwrap_err();
    assert_eq!(past.kind(), ErrorKind::InvalidArgument, "{past}");
    let overflow = db.read_range("k", 10, u64::MAX).unwrap_err();
    assert_eq!(overflow.kind(), ErrorKind::InvalidArgument, "{overflow}");
    // Past the end of this value (but not of every value): nothing, and its length.
    let beyond = db.read_range("k", 100, 10).unwrap().unwrap();
    assert_eq!((beyond.value_len, beyond.bytes.len()), (5, 0));
}

/// A reader of a value that was appended to (an extent list over several records) reads a step
/// at a time, as it does a chunked record: opening it and reading 4 KiB reads a few chunks, not
/// the 8 MiB value.
#[test]
fn a_reader_of_an_appended_value_reads_only_the_steps_asked_for() {
    let dir = common::tempdir();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut want = pattern(8 << 20, 1);
    db.put("k", &want).unwrap();
    let tail = pattern(100, 2);
    let mut batch = WriteBatch::new();
    batch.append("k", &tail);
    db.write(batch, &WriteOptions::default()).unwrap();
    want.extend_from_slice(&tail);
    let read_before = db.statistics().blob_bytes_read;
    let mut reader = db
        .value_reader_cf(&ReadOptions::default(), &db.default_cf(), "k")
        .unwrap()
        .unwrap();
    let mut first = vec![0u8; CHUNK];
    reader.read_exact(&mut first).unwrap();
    assert!(first == want[..CHUNK]);
    let read = db.statistics().blob_bytes_read - read_before;
    assert!(
        read < 1 << 20,
        "{read} bytes read for 4 KiB of an 8 MiB value"
    );
    reader.seek(SeekFrom::Start(0)).unwrap();
    let mut all = Vec::new();
    reader.read_to_end(&mut all).unwrap();
    assert!(all == want);
}

/// A reader pins the value it opened: it looks the key up once, not at every step, and the
/// blob file it reads stays on disk while it lives though the key is deleted and the file
/// collected; once the reader is dropped the file goes.
#[test]
fn a_reader_keeps_the_file_it_reads_until_it_is_dropped() {
    let dir = common::tempdir();
    let mut o = options();
    o.blob_file_size = 64 << 10;
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 1.0;
    let db = Db::open(dir.path(), o).unwrap();
    let value = pattern(40_000, 3);
    db.put("k", &value).unwrap();
    // Fills the first file, so that it is sealed and may be collected.
    db.put("filler", pattern(40_000, 4)).unwrap();
    let blobs = || files_with_extension(dir.path(), "blob");
    let first = blobs()[0].clone();
    let mut reader = db
        .value_reader_cf(&ReadOptions::default(), &db.default_cf(), "k")
        .unwrap()
        .unwrap();
    let mut head = vec![0u8; 1000];
    reader.read_exact(&mut head).unwrap();
    let gets = db.statistics().gets;
    db.delete("k").unwrap();
    db.delete("filler").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    common::background_work(&db);
    assert!(db.get("k").unwrap().is_none());
    assert!(
        first.exists(),
        "the file a reader reads was deleted under it"
    );
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    head.extend_from_slice(&rest);
    assert!(head == value, "the reader kept the value it opened");
    assert_eq!(
        db.statistics().gets - gets,
        1,
        "only the test's own get looked the key up"
    );
    drop(reader);
    db.compact_range(None, None).unwrap();
    common::background_work(&db);
    assert!(
        !first.exists(),
        "the collected file outlived its last reader"
    );
}

/// Garbage collection moves values larger than it holds in memory a step at a time: a whole
/// value and an appended value's large piece, in a plain column family and a compressing one,
/// read back the same after the move and after a reopen, by range and whole.
#[test]
fn garbage_collection_moves_large_values_a_step_at_a_time() {
    let dir = common::tempdir();
    let mut o = options();
    for cf in [&mut o.cf, o.column_families.get_mut("zstd").unwrap()] {
        // One record a file: each is sealed once written, and may be collected.
        cf.blob_file_size = 4096;
        cf.enable_blob_garbage_collection = true;
        cf.blob_garbage_collection_age_cutoff = 1.0;
    }
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let big = pattern((9 << 20) + 5, 1);
    let text = text_with_noise(9 << 20);
    let mut want = Vec::new();
    for (name, value) in [("default", &big), ("zstd", &text)] {
        let cf = db.cf(name).unwrap();
        db.put_cf(&cf, "whole", value).unwrap();
        db.put_cf(&cf, "appended", value).unwrap();
        let mut batch = WriteBatch::new();
        batch.append_cf(&cf, "appended", b"tail");
        db.write(batch, &WriteOptions::default()).unwrap();
        let mut appended = value.clone();
        appended.extend_from_slice(b"tail");
        want.push((name, "whole", value.clone()));
        want.push((name, "appended", appended));
    }
    let before = db.statistics().blob_gc_relocated_keys;
    for name in ["default", "zstd"] {
        let cf = db.cf(name).unwrap();
        // Seals the file written last, so that every value's file may be collected.
        db.put_cf(&cf, "filler", pattern(2 * CHUNK, 2)).unwrap();
        db.flush_cf(&cf).unwrap();
        db.compact_range_cf(&cf, None, None).unwrap();
    }
    common::background_work(&db);
    let moved = db.statistics().blob_gc_relocated_keys - before;
    assert!(moved >= 4, "{moved} keys moved");
    let check = |db: &Db| {
        for (name, key, value) in &want {
            let cf = db.cf(name).unwrap();
            assert!(
                db.get_cf(&cf, key).unwrap().unwrap()[..] == value[..],
                "{key}"
            );
            check_ranges(db, &ReadOptions::default(), name, key, value, 20);
        }
    };
    check(&db);
    drop(db);
    check(&Db::open(dir.path(), o).unwrap());
}

/// A reader keeps only the files its value lies in: a file wholly garbage while it lives is
/// deleted at once, as if no reader were open.
#[test]
fn a_reader_keeps_no_file_but_its_own() {
    let dir = common::tempdir();
    let mut o = options();
    // One record a file: each is sealed at the next write.
    o.blob_file_size = 4096;
    let db = Db::open(dir.path(), o).unwrap();
    let value = pattern(40_000, 5);
    db.put("k", &value).unwrap();
    db.put("x", pattern(40_000, 6)).unwrap();
    db.put("z", pattern(8_000, 7)).unwrap();
    let blobs = || {
        let mut files = files_with_extension(dir.path(), "blob");
        files.sort();
        files
    };
    let (own, other) = (blobs()[0].clone(), blobs()[1].clone());
    let mut reader = db
        .value_reader_cf(&ReadOptions::default(), &db.default_cf(), "k")
        .unwrap()
        .unwrap();
    db.delete("x").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    common::background_work(&db);
    assert!(
        !other.exists(),
        "a file the reader does not read was kept for it"
    );
    assert!(own.exists());
    let mut got = Vec::new();
    reader.read_to_end(&mut got).unwrap();
    assert!(got == value);
}
