#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use super::format::FOOTER_SIZE;
use super::*;
use crate::fs::StdFileSystem;

fn header(ttl: Option<(u64, u64)>) -> BlobHeader {
    BlobHeader {
        column_family: 0,
        compression: true,
        ttl_range: ttl,
    }
}

fn write_file(
    dir: &Path,
    number: u64,
    values: &[(&[u8], Vec<u8>, u64)],
    seal: bool,
) -> Vec<BlobRef> {
    let fs = StdFileSystem;
    let mut w = BlobFileWriter::create(&fs, dir, number, header(None), 3, 1 << 20).unwrap();
    let refs = values
        .iter()
        .map(|(k, v, exp)| w.add(k, v, *exp).unwrap())
        .collect();
    if seal {
        w.finish().unwrap();
    } else {
        w.flush().unwrap();
    }
    refs
}

#[test]
fn records_read_back_compressed_or_not_and_footer_is_found_without_a_scan() {
    let dir = crate::test_dir::tempdir();
    let compressible = vec![b'a'; 4000];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..5000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let refs = write_file(
        dir.path(),
        7,
        &[
            (b"k1", compressible.clone(), 0),
            (b"k2", random.clone(), 99),
        ],
        true,
    );
    assert!(refs[0].stored == Stored::Zstd && refs[0].size < 100);
    // Incompressible and longer than a chunk: kept as it is, chunked.
    assert_eq!(refs[1].stored, Stored::Chunked);
    let fs = StdFileSystem;
    let r = BlobFileReader::open(&fs, &crate::filename::blob_file(dir.path(), 7)).unwrap();
    assert_eq!(r.read(refs[0], Owner::Key(b"k1")).unwrap(), compressible);
    assert_eq!(r.read(refs[1], Owner::Key(b"k2")).unwrap(), random);
    // The wrong key for a record is corruption, not someone else's value.
    assert!(
        r.read(refs[0], Owner::Key(b"k2"))
            .unwrap_err()
            .is_corruption()
    );
    let found = r.recover().unwrap();
    assert!(found.sealed);
    assert_eq!(found.footer.records, 2);
    assert_eq!(found.footer.expiration_range, (99, 99));
    assert_eq!(found.footer.record_bytes, refs[0].size + refs[1].size);
}

#[test]
fn unsealed_file_keeps_its_intact_prefix_and_reports_the_torn_tail() {
    let dir = crate::test_dir::tempdir();
    let refs = write_file(
        dir.path(),
        3,
        &[
            (b"a", vec![1; 300], 0),
            (b"b", vec![2; 300], 0),
            (b"c", vec![3; 300], 0),
        ],
        false,
    );
    let path = crate::filename::blob_file(dir.path(), 3);
    // Cut the last record short, as a crash during its write would.
    let data = std::fs::read(&path).unwrap();
    std::fs::write(&path, &data[..data.len() - 10]).unwrap();
    let fs = StdFileSystem;
    let r = BlobFileReader::open(&fs, &path).unwrap();
    let found = r.recover().unwrap();
    assert!(!found.sealed);
    assert_eq!(found.footer.records, 2);
    assert_eq!(found.torn_bytes, refs[2].size - 10);
    assert!(found.cut_short);
    assert_eq!(r.read(refs[1], Owner::Key(b"b")).unwrap(), vec![2; 300]);
    let err = r.read(refs[2], Owner::Key(b"c")).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

/// A sealed file whose footer is damaged reads as unsealed with a torn tail, but one that is no
/// append a crash cut short: the footer's bytes are damage. So is a whole record gone wrong.
#[test]
fn a_damaged_footer_or_record_is_not_a_record_cut_short() {
    let dir = crate::test_dir::tempdir();
    let values = [(&b"a"[..], vec![1; 300], 0), (&b"b"[..], vec![2; 300], 0)];
    write_file(dir.path(), 4, &values, true);
    let path = crate::filename::blob_file(dir.path(), 4);
    let pristine = std::fs::read(&path).unwrap();
    let fs = StdFileSystem;
    let damaged_at = |at: usize| {
        let mut data = pristine.clone();
        data[at] ^= 0x40;
        std::fs::write(&path, &data).unwrap();
        BlobFileReader::open(&fs, &path).unwrap().recover().unwrap()
    };
    // A flip anywhere in the footer: its fields, its checksum, its magic.
    for at in [3, 33, 38] {
        let found = damaged_at(pristine.len() - FOOTER_SIZE + at);
        assert!(!found.sealed);
        assert_eq!(found.torn_bytes, FOOTER_SIZE as u64);
        assert!(!found.cut_short, "a flip at byte {at} of the footer");
    }
    // A record's header and a 19-byte key a crash left alone are a footer's length, but no
    // footer: cut short.
    let key = [b'k'; 19];
    let refs = write_file(dir.path(), 7, &[(&key[..], vec![3; 300], 0)], false);
    let path = crate::filename::blob_file(dir.path(), 7);
    let data = std::fs::read(&path).unwrap();
    let at = refs[0].offset as usize;
    std::fs::write(&path, &data[..at + FOOTER_SIZE]).unwrap();
    let found = BlobFileReader::open(&fs, &path).unwrap().recover().unwrap();
    assert_eq!(found.torn_bytes, FOOTER_SIZE as u64);
    assert!(found.cut_short);
    // Unsealed, its last record whole but with a byte flipped.
    let refs = write_file(dir.path(), 6, &values, false);
    let path = crate::filename::blob_file(dir.path(), 6);
    let mut data = std::fs::read(&path).unwrap();
    data[refs[1].offset as usize + 30] ^= 0x40;
    std::fs::write(&path, &data).unwrap();
    let found = BlobFileReader::open(&fs, &path).unwrap().recover().unwrap();
    assert_eq!(found.torn_bytes, refs[1].size);
    assert!(!found.cut_short);
}

#[test]
fn a_flipped_byte_in_a_record_is_corruption_naming_the_file() {
    let dir = crate::test_dir::tempdir();
    let refs = write_file(dir.path(), 5, &[(b"key", vec![9; 400], 0)], true);
    let path = crate::filename::blob_file(dir.path(), 5);
    let clean = std::fs::read(&path).unwrap();
    let fs = StdFileSystem;
    let start = refs[0].offset as usize;
    for i in start..start + refs[0].size as usize {
        let mut bad = clean.clone();
        bad[i] ^= 0x01;
        std::fs::write(&path, &bad).unwrap();
        let r = BlobFileReader::open(&fs, &path).unwrap();
        match r.read(refs[0], Owner::Key(b"key")) {
            Err(crate::Error::Corruption { file, .. }) => assert_eq!(file, path),
            other => panic!("byte {i}: {other:?}"),
        }
    }
}

/// A store of sealed files `numbers` (one small record each) in `dir`.
fn store_of_files(dir: &Path, numbers: &[u64]) -> (Arc<BlobStore>, Arc<Stats>) {
    let stats = Arc::new(Stats::default());
    let store = BlobStore::new(
        dir,
        Arc::new(StdFileSystem),
        crate::fs::Deletions::new(Arc::new(StdFileSystem), 0),
        stats.clone(),
        None,
        1000,
    );
    for &n in numbers {
        write_file(dir, n, &[(b"k", vec![0; 10], 0)], true);
        store.insert(Arc::new(BlobFile::new(
            n,
            0,
            None,
            BlobFileMeta {
                footer: BlobFooter::default(),
                file_size: 0,
                garbage_bytes: 0,
                borrowed_bytes: 0,
                state: BlobFileState::Sealed,
            },
        )));
    }
    (store, stats)
}

#[test]
fn retired_files_are_deleted_only_after_every_older_view_is_gone() {
    let dir = crate::test_dir::tempdir();
    let (store, stats) = store_of_files(dir.path(), &[1, 2]);
    let exists = |n| crate::filename::blob_file(dir.path(), n).exists();
    let old_view = store.current_epoch();
    store.retire(&[1], BlobFileState::Obsolete);
    let middle_view = store.current_epoch();
    store.retire(&[2], BlobFileState::Obsolete);
    // The middle view ends first: file 2 must wait for the old view too.
    drop(middle_view);
    assert!(exists(1) && exists(2));
    drop(old_view);
    assert!(!exists(1) && !exists(2));
    assert_eq!(stats.blob_files_deleted.get(), 2);
    store.shutdown();
}

/// With a deleter (the database's background pool), the thread that ends an epoch or drops the
/// last pin only queues the files and wakes the pool, which removes them; closing takes the
/// deleter away and removes what is queued, and later files go at once.
#[test]
fn with_a_deleter_files_are_queued_for_the_pool_and_closing_drains_them() {
    let dir = crate::test_dir::tempdir();
    let (store, stats) = store_of_files(dir.path(), &[1, 2, 3]);
    let exists = |n| crate::filename::blob_file(dir.path(), n).exists();
    let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = woken.clone();
    store.set_deleter(Arc::new(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    let woken = || woken.load(std::sync::atomic::Ordering::SeqCst);
    let view = store.current_epoch();
    let pin = store.pin_files(vec![2]);
    store.retire(&[1, 2], BlobFileState::Obsolete);
    drop(view);
    assert_eq!(woken(), 1, "the epoch's end wakes the pool");
    assert!(
        exists(1) && exists(2),
        "the reader's thread removes nothing"
    );
    store.delete_queued();
    assert!(
        !exists(1) && exists(2),
        "the pool removes the unpinned file"
    );
    drop(pin);
    assert_eq!(woken(), 2, "the last pin's drop wakes the pool");
    assert!(exists(2));
    // Closing with a file queued and another waiting for a view.
    let view = store.current_epoch();
    store.retire(&[3], BlobFileState::Obsolete);
    store.shutdown();
    assert!(!exists(2), "closing drains the queue");
    drop(view);
    assert!(
        !exists(3),
        "after closing, the thread that lets go removes the file"
    );
    assert_eq!(woken(), 2);
    assert_eq!(stats.blob_files_deleted.get(), 3);
}

/// A pinned file outlives its epoch until its last pin goes; an unpinned one retired with it
/// does not wait for the pins.
#[test]
fn pinned_files_are_deleted_when_the_last_pin_goes() {
    let dir = crate::test_dir::tempdir();
    let (store, stats) = store_of_files(dir.path(), &[1, 2]);
    let exists = |n| crate::filename::blob_file(dir.path(), n).exists();
    let view = store.current_epoch();
    let first = store.pin_files(vec![1, 1]);
    let second = store.pin_files(vec![1]);
    store.retire(&[1, 2], BlobFileState::Obsolete);
    drop(view);
    assert!(
        exists(1) && !exists(2),
        "the epoch's end deletes only the unpinned file"
    );
    drop(first);
    assert!(exists(1), "another reader still pins it");
    drop(second);
    assert!(!exists(1));
    assert_eq!(stats.blob_files_deleted.get(), 2);
    // Pins of a file that is never retired keep nothing afterwards.
    drop(store.pin_files(vec![3]));
    store.shutdown();
}

#[test]
fn zeros_a_writer_reserved_past_its_records_are_not_a_torn_tail() {
    let dir = crate::test_dir::tempdir();
    let fs = StdFileSystem;
    let values: &[(&[u8], Vec<u8>, u64)] = &[(b"a", vec![1; 300], 0), (b"b", vec![2; 500], 5)];
    for seal in [false, true] {
        let number = 10 + seal as u64;
        let refs = write_file(dir.path(), number, values, seal);
        let path = crate::filename::blob_file(dir.path(), number);
        let mut data = std::fs::read(&path).unwrap();
        let data_len = data.len() as u64;
        // As a crash leaves a file extended ahead of its writer (before or after the footer).
        data.resize(data.len() + 70_000, 0);
        std::fs::write(&path, &data).unwrap();
        let r = BlobFileReader::open(&fs, &path).unwrap();
        let found = r.recover().unwrap();
        assert_eq!(found.sealed, seal);
        assert_eq!(found.torn_bytes, 0);
        assert_eq!(found.file_size, data_len);
        assert_eq!(found.spare_bytes, 70_000);
        assert_eq!(found.footer.records, 2);
        assert_eq!(found.footer.expiration_range, (5, 5));
        if seal {
            assert_eq!(r.verify_sealed(&found).unwrap(), 2);
        }
        assert_eq!(r.read(refs[1], Owner::Key(b"b")).unwrap(), vec![2; 500]);
        // A byte that is not zero in the spare space is damage.
        let at = data.len() - 1000;
        data[at] = 1;
        std::fs::write(&path, &data).unwrap();
        let found = BlobFileReader::open(&fs, &path).unwrap().recover().unwrap();
        assert!(!found.sealed);
        assert_eq!(found.torn_bytes, data.len() as u64 - found.file_size);
        assert!(
            !found.cut_short,
            "a stray byte far past the records is not an append"
        );
        assert_eq!(found.spare_bytes, 0);
        assert_eq!(found.footer.records, 2);
    }
}

/// A value of text with one incompressible chunk (the second), `chunks` chunks long.
fn mostly_text(chunks: usize, seed: u64) -> Vec<u8> {
    let mut v: Vec<u8> = (0..chunks * format::CHUNK_SIZE - 77)
        .map(|i| b"the quick brown fox "[i % 20])
        .collect();
    let mut x = seed | 1;
    for b in v
        .iter_mut()
        .skip(format::CHUNK_SIZE)
        .take(format::CHUNK_SIZE)
    {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    v
}

#[test]
fn compressed_chunks_read_by_range_and_a_scan_steps_over_them() {
    let dir = crate::test_dir::tempdir();
    let (a, b) = (mostly_text(6, 1), mostly_text(3, 2));
    let values: &[(&[u8], Vec<u8>, u64)] = &[(b"a", a.clone(), 0), (b"bb", b.clone(), 7)];
    let refs = write_file(dir.path(), 20, values, false);
    assert_eq!(refs[0].stored, Stored::ChunkedZstd);
    assert!(refs[0].size < a.len() as u64 / 2, "{}", refs[0].size);
    let fs = StdFileSystem;
    let path = crate::filename::blob_file(dir.path(), 20);
    let r = BlobFileReader::open(&fs, &path).unwrap();
    assert_eq!(r.read(refs[0], Owner::Key(b"a")).unwrap(), a);
    assert_eq!(r.read(refs[1], Owner::Key(b"bb")).unwrap(), b);
    assert_eq!(r.value_len(refs[0], b"a").unwrap(), a.len() as u64);
    for (at, len) in [
        (0u64, 10u64),
        (4090, 20),
        (5000, 9000),
        (0, 1 << 30),
        (24_000, 100),
    ] {
        let (n, got) = r
            .read_range(refs[0], Owner::Key(b"a"), (at, len), None)
            .unwrap();
        let (s, e) = crate::value::clip(at, len, a.len() as u64);
        assert_eq!(
            (n, &got[..]),
            (a.len() as u64, &a[s as usize..e as usize]),
            "{at}+{len}"
        );
    }
    let (_, got) = r
        .read_range(refs[1], Owner::KeyLen(2), (100, 8000), None)
        .unwrap();
    assert_eq!(got, &b[100..8100]);
    // An unsealed file is scanned record by record, past the compressed ones.
    let found = r.recover().unwrap();
    assert!(!found.sealed && found.torn_bytes == 0);
    assert_eq!(found.footer.records, 2);
    assert_eq!(found.footer.record_bytes, refs[0].size + refs[1].size);
    // A flipped byte in the third chunk's stored bytes fails exactly the reads that cover it,
    // naming the file.
    let mut data = std::fs::read(&path).unwrap();
    let table_at = refs[0].offset as usize + RECORD_HEADER_SIZE + 1;
    let chunks_at = table_at + 6 * chunks::ENTRY_SIZE;
    let third = chunks::entry_end(&data[table_at..], 1) as usize;
    data[chunks_at + third + 3] ^= 0x20;
    std::fs::write(&path, &data).unwrap();
    let r = BlobFileReader::open(&fs, &path).unwrap();
    let chunk = format::CHUNK_SIZE as u64;
    assert!(
        r.read_range(refs[0], Owner::Key(b"a"), (0, 2 * chunk), None)
            .is_ok()
    );
    assert!(
        r.read_range(refs[0], Owner::Key(b"a"), (3 * chunk, 100), None)
            .is_ok()
    );
    for (at, len) in [(2 * chunk, 1), (chunk, 2 * chunk), (0, 1 << 30)] {
        match r.read_range(refs[0], Owner::Key(b"a"), (at, len), None) {
            Err(crate::Error::Corruption { file, detail }) => {
                assert_eq!(file, path);
                assert!(detail.contains("chunk 2"), "{detail}");
            }
            other => panic!("{at}+{len}: {other:?}"),
        }
    }
    assert!(
        r.read(refs[0], Owner::Key(b"a"))
            .unwrap_err()
            .is_corruption()
    );
    // The scan stops at the damaged record, and the one after it is torn with it.
    let found = r.recover().unwrap();
    assert_eq!(found.footer.records, 0);
    assert!(found.torn_bytes > 0);
}

/// A streamed record is the raw-chunked record `add` writes of the same value, byte for byte,
/// asked of its source a step at a time; a source handing over too little fails it.
#[test]
fn a_streamed_record_is_written_a_step_at_a_time_as_add_writes_it() {
    let dir = crate::test_dir::tempdir();
    let value: Vec<u8> = (0..(2 << 20) + 4321u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let fs = StdFileSystem;
    let raw = BlobHeader {
        compression: false,
        ..header(None)
    };
    let mut whole = BlobFileWriter::create(&fs, dir.path(), 1, raw, 3, 1 << 20).unwrap();
    let mut streamed = BlobFileWriter::create(&fs, dir.path(), 2, raw, 3, 1 << 20).unwrap();
    let a = whole.add(b"key", &value, 7).unwrap();
    let mut asked = Vec::new();
    let b = streamed
        .add_streamed(b"key", value.len() as u64, 7, |at, len| {
            asked.push((at, len));
            Ok(value[at as usize..(at + len) as usize].to_vec())
        })
        .unwrap();
    assert_eq!(asked, [(0, 1 << 20), (1 << 20, 1 << 20), (2 << 20, 4321)]);
    assert_eq!((a.size, a.stored), (b.size, b.stored));
    assert_eq!(whole.footer(), streamed.footer());
    whole.finish().unwrap();
    streamed.finish().unwrap();
    let one = std::fs::read(crate::filename::blob_file(dir.path(), 1)).unwrap();
    let two = std::fs::read(crate::filename::blob_file(dir.path(), 2)).unwrap();
    assert!(one == two, "the files differ");
    let r = BlobFileReader::open(&fs, &crate::filename::blob_file(dir.path(), 2)).unwrap();
    assert!(r.read(b, Owner::Key(b"key")).unwrap() == value);

    let mut short = BlobFileWriter::create(&fs, dir.path(), 3, raw, 3, 1 << 20).unwrap();
    let e = short
        .add_streamed(b"key", 3 * 4096, 0, |_, len| Ok(vec![0; len as usize - 1]))
        .unwrap_err();
    assert!(e.to_string().contains("handed over"), "{e}");
    assert!(
        short
            .add_streamed(b"key", 4096, 0, |_, _| Ok(Vec::new()))
            .is_err()
    );
}

/// Checksums of a value appended in pieces of every size match those of it appended at once.
#[test]
fn chunk_sums_do_not_depend_on_how_the_value_is_split() {
    let value: Vec<u8> = (0..5 * 4096 + 77u32)
        .map(|i| (i * 31 % 253) as u8)
        .collect();
    let mut once = ChunkSums::default();
    once.append(&value);
    let once = once.finish();
    assert_eq!(once.len(), 6 * 4);
    for piece in [1, 100, 4095, 4096, 4097, 9000] {
        let mut split = ChunkSums::default();
        for part in value.chunks(piece) {
            split.append(part);
        }
        assert_eq!(split.finish(), once, "pieces of {piece}");
    }
    assert_eq!(&once[..4], &crc32c::crc32c(&value[..4096]).to_le_bytes());
}
