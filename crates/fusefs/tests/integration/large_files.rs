//! Files past the write-back size: written to the store in ranges as they are written (with or
//! without blob files), EFBIG past the largest value, and whole across fsync, rename and truncate.

use std::sync::Arc;

use strata_engine::{Db, Options};

use crate::common::{Mount, fuse_available, small_write_back, temporary_files, write_a_large_file};

#[test]
fn a_large_file_reaches_the_store_as_it_is_written_and_past_the_largest_value_is_efbig() {
    let Some(m) = Mount::with(small_write_back(), false) else {
        return;
    };
    // No more than the write-back bound waited in memory.
    let while_open = write_a_large_file(&m, "large.bin");
    assert!(while_open >= 23 << 20, "{while_open}");
    let f = m.path().join("large.bin");
    let h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    use std::os::unix::fs::FileExt;
    let e = h.write_at(b"x", strata_engine::MAX_VALUE_SIZE).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EFBIG));
    let e = h.set_len(strata_engine::MAX_VALUE_SIZE + 1).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EFBIG));
}

#[test]
fn without_blob_files_a_large_file_is_written_in_ranges_too() {
    if !fuse_available() {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(store.path(), Options::default()).unwrap());
    assert!(!db.default_cf().options().enable_blob_files);
    let m = Mount::over(
        db,
        store,
        tempfile::tempdir().unwrap(),
        small_write_back(),
        false,
    );
    let while_open = write_a_large_file(&m, "large.bin");
    assert!(while_open >= 23 << 20, "{while_open}");
}

#[test]
fn a_large_file_keeps_its_bytes_across_fsync_rename_and_truncate() {
    use std::io::{Read, Seek, SeekFrom, Write};
    let Some(m) = Mount::with(small_write_back(), false) else {
        return;
    };
    let block = |i: u8| vec![i; 1 << 20];
    let (a, b) = (m.path().join("a.bin"), m.path().join("b.bin"));
    let mut h = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&a)
        .unwrap();
    let mut want = Vec::new();
    for i in 0..3 {
        h.write_all(&block(i)).unwrap();
        want.extend_from_slice(&block(i));
    }
    h.sync_all().unwrap();
    assert!(m.db.get_cf(&m.cf(), "a.bin").unwrap().unwrap().as_ref() == &want[..]);
    // Written again after the fsync, renamed while open, cut short, then read through the
    // same descriptor: every step sees the bytes so far.
    h.write_all(&block(3)).unwrap();
    want.extend_from_slice(&block(3));
    std::fs::rename(&a, &b).unwrap();
    h.set_len(want.len() as u64 - 100).unwrap();
    want.truncate(want.len() - 100);
    h.seek(SeekFrom::Start((2 << 20) - 1)).unwrap();
    let mut two = [0; 2];
    h.read_exact(&mut two).unwrap();
    assert_eq!(two, [1, 2]);
    drop(h);
    assert!(!a.exists());
    assert_eq!(std::fs::read(&b).unwrap(), want);
    assert!(m.db.get_cf(&m.cf(), "a.bin").unwrap().is_none());
    assert!(m.db.get_cf(&m.cf(), "b.bin").unwrap().unwrap().as_ref() == &want[..]);
    assert_eq!(temporary_files(&m), Vec::<String>::new());
}
