//! Names of the files in a store directory.

use std::path::{Path, PathBuf};

pub(crate) const CURRENT: &str = "CURRENT";
pub(crate) const LOCK: &str = "LOCK";
/// Where files are kept aside that an open could not prove obsolete, or that `repair` found
/// damaged: never deleted by the engine.
pub(crate) const LOST_DIR: &str = "lost";

pub(crate) fn table_name(number: u64) -> String {
    format!("{number:06}.sst")
}

pub(crate) fn wal_name(number: u64) -> String {
    format!("{number:06}.log")
}

pub(crate) fn blob_name(number: u64) -> String {
    format!("{number:06}.blob")
}

pub(crate) fn table_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(table_name(number))
}

pub(crate) fn wal_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(wal_name(number))
}

pub(crate) fn blob_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(blob_name(number))
}

/// A value file being written (`db::value_file`); named a temporary file so that an open
/// deletes it if the process dies first.
pub(crate) fn value_file_tmp(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.blob.tmp"))
}

pub(crate) fn manifest_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    Table(u64),
    Wal(u64),
    Blob(u64),
    Manifest(u64),
    Temp,
    Other,
}

pub(crate) fn parse(name: &str) -> FileKind {
    if let Some(n) = name.strip_suffix(".sst").and_then(|n| n.parse().ok()) {
        FileKind::Table(n)
    } else if let Some(n) = name.strip_suffix(".log").and_then(|n| n.parse().ok()) {
        FileKind::Wal(n)
    } else if let Some(n) = name.strip_suffix(".blob").and_then(|n| n.parse().ok()) {
        FileKind::Blob(n)
    } else if let Some(n) = name.strip_prefix("MANIFEST-").and_then(|n| n.parse().ok()) {
        FileKind::Manifest(n)
    } else if name.ends_with(".tmp") {
        FileKind::Temp
    } else {
        FileKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        let d = Path::new("/d");
        let tmp = value_file_tmp(d, 7);
        assert_eq!(
            parse(tmp.file_name().unwrap().to_str().unwrap()),
            FileKind::Temp
        );
        assert_eq!(
            parse(table_file(d, 7).file_name().unwrap().to_str().unwrap()),
            FileKind::Table(7)
        );
        assert_eq!(
            parse(wal_file(d, 1234567).file_name().unwrap().to_str().unwrap()),
            FileKind::Wal(1234567)
        );
        assert_eq!(parse(&manifest_name(3)), FileKind::Manifest(3));
        assert_eq!(
            parse(blob_file(d, 42).file_name().unwrap().to_str().unwrap()),
            FileKind::Blob(42)
        );
        assert_eq!(parse("CURRENT.tmp"), FileKind::Temp);
        assert_eq!(parse("LOCK"), FileKind::Other);
        assert_eq!(parse("x.sst"), FileKind::Other);
    }
}
