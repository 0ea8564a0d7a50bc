//! A store's files are its owner's alone: the directory a store makes is 0700 and every file in
//! it 0600, whatever the umask, so another account on the machine reads nothing of it. Shared
//! with its group, the directory is 0750 and the files 0640, and stay so.

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

/// Modes of the store's directory and of each file in it.
fn modes(path: &std::path::Path) -> (u32, Vec<(String, u32)>) {
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let mut files: Vec<_> = std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                mode(&p),
            )
        })
        .collect();
    files.sort();
    (mode(path), files)
}

#[test]
fn a_store_shared_with_its_group_stays_shared_and_verify_names_loose_modes() {
    let dir = crate::common::tempdir();
    let path = dir.path().join("store");
    let db = Db::open(&path, Options::default()).unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    drop(db);
    assert!(
        strata_engine::verify_store(&path, &Options::default())
            .unwrap()
            .warnings
            .is_empty()
    );
    // A file its group may read, in a store that is not shared with it, is named.
    let current = path.join("CURRENT");
    std::fs::set_permissions(&current, std::fs::Permissions::from_mode(0o640)).unwrap();
    let warnings = strata_engine::verify_store(&path, &Options::default())
        .unwrap()
        .warnings;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("CURRENT") && warnings[0].contains("0640"),
        "{warnings:?}"
    );
    std::fs::set_permissions(&current, std::fs::Permissions::from_mode(0o600)).unwrap();

    // Shared at open: the directory and every file open to the group, none to others.
    let shared = Options {
        share_with_group: true,
        ..Options::default()
    };
    let db = Db::open(&path, shared).unwrap();
    let (dir_mode, files) = modes(&path);
    assert_eq!(dir_mode, 0o750);
    assert!(files.iter().all(|(_, m)| *m == 0o640), "{files:?}");
    drop(db);
    // Opened again without the option, files made later follow the directory: still shared.
    let db = Db::open(&path, Options::default()).unwrap();
    let before = modes(&path).1.len();
    db.put("k2", vec![1u8; 1000]).unwrap();
    db.flush().unwrap();
    drop(db);
    let (dir_mode, files) = modes(&path);
    assert_eq!(dir_mode, 0o750);
    assert!(files.len() > before, "{files:?}");
    assert!(files.iter().all(|(_, m)| *m == 0o640), "{files:?}");
    assert!(
        strata_engine::verify_store(&path, &Options::default())
            .unwrap()
            .warnings
            .is_empty()
    );
    // A directory other accounts may enter is named, and shares nothing (a 0755 one is what
    // `mkdir` makes, not a choice): the group's files are then named too.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let warnings = strata_engine::verify_store(&path, &Options::default())
        .unwrap()
        .warnings;
    assert_eq!(warnings.len(), 1 + files.len(), "{warnings:?}");
    assert!(warnings[0].contains("other accounts"), "{warnings:?}");
    assert!(
        warnings[1..].iter().all(|w| w.contains("not shared")),
        "{warnings:?}"
    );
}
