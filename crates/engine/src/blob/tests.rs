#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

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
    let compressible = vec![b'a'; 5000];
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
    assert!(refs[0].stored == Stored::Zstd && refs[0].size < 1000);
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
    assert_eq!(r.read(refs[1], Owner::Key(b"b")).unwrap(), vec![2; 300]);
    let err = r.read(refs[2], Owner::Key(b"c")).unwrap_err();
    assert!(err.is_corruption(), "{err}");
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

#[test]
fn retired_files_are_deleted_only_after_every_older_view_is_gone() {
    let dir = crate::test_dir::tempdir();
    let stats = Arc::new(Stats::default());
    let store = BlobStore::new(
        dir.path(),
        Arc::new(StdFileSystem),
        stats.clone(),
        None,
        1000,
    );
    for n in [1, 2] {
        write_file(dir.path(), n, &[(b"k", vec![0; 10], 0)], true);
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
        assert_eq!(found.spare_bytes, 0);
        assert_eq!(found.footer.records, 2);
    }
}
