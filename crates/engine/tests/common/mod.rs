//! Helpers shared by the integration tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;

use strata_engine::DbIterator;

/// Every entry an iterator yields from the start, checking its status at the end.
pub fn collect(mut it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

/// Every entry an iterator yields from the end, in key order, checking its status at the end.
pub fn collect_backward(mut it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    out.reverse();
    out
}

/// Files in a store's directory whose extension is `ext`, by path.
pub fn files_with_extension(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect()
}

/// Table files in a store's directory.
pub fn tables_on_disk(dir: &Path) -> usize {
    files_with_extension(dir, "sst").len()
}
