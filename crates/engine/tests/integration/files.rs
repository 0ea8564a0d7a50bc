//! A store's files are its owner's alone: the directory a store makes is 0700 and every file in
//! it 0600, whatever the umask, so another account on the machine reads nothing of it.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::field_reassign_with_default)]

use std::os::unix::fs::PermissionsExt;

use strata_engine::{Db, Options};

#[test]
fn a_new_store_and_every_file_in_it_are_private_to_its_owner() {
    let dir = crate::common::tempdir();
    let path = dir.path().join("a").join("store");
    let mut o = Options::default();
    o.enable_blob_files = true;
    o.min_blob_size = 1024;
    let db = Db::open(&path, o).unwrap();
    db.put("small", "v").unwrap();
    db.put("large", vec![7u8; 100_000]).unwrap();
    db.flush().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o700, "the store's directory");
    let mut seen = 0;
    for entry in std::fs::read_dir(&path).unwrap() {
        let file = entry.unwrap().path();
        if file.is_file() {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
            seen += 1;
        }
    }
    // LOCK, CURRENT, a MANIFEST, a WAL, a table and a blob file at least.
    assert!(seen >= 6, "{seen} files");
    drop(db);
}
