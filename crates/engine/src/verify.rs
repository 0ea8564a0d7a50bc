//! Offline checking of a closed store: every checksum of every file (table blocks, WAL and
//! MANIFEST records, blob records, headers and footers), every record's structure, and that each
//! file the MANIFEST names exists. Damage is reported per file, never a panic; only a failure to
//! read the directory itself is an error. `strata verify --db DIR` prints the report.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::batch::WriteBatch;
use crate::blob::format::FOOTER_SIZE;
use crate::blob::reader::{BlobFileReader, Recovered};
use crate::error::{Error, Result};
use crate::filename::{self, CURRENT, FileKind, LOCK};
use crate::fs::FileSystem;
use crate::options::Options;
use crate::sst::{MetaBlocks, TableReader};
use crate::stats::Stats;
use crate::version::{VersionEdit, VersionSet};
use crate::wal::{LogReader, ReadOutcome};

/// What `verify_store` found in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// The file's name in the store's directory.
    pub name: String,
    /// `table`, `wal`, `manifest`, `blob` or `current`.
    pub kind: String,
    /// The file's size in bytes (0 when it is missing).
    pub bytes: u64,
    /// Entries (tables), records (WAL, MANIFEST, blob files) checked.
    pub entries: u64,
    /// What is wrong with it, or `None` when every check passed.
    pub problem: Option<String>,
}

/// The result of `verify_store`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Every file checked, in name order, then files the MANIFEST names that are missing.
    pub files: Vec<FileReport>,
}

impl VerifyReport {
    /// The files with a problem.
    pub fn damaged(&self) -> impl Iterator<Item = &FileReport> {
        self.files.iter().filter(|f| f.problem.is_some())
    }

    /// True when no file has a problem.
    pub fn is_ok(&self) -> bool {
        self.damaged().next().is_none()
    }
}

/// Checks every file of the store in `dir` (closed: the directory lock is taken, so an open store
/// gives `Busy`). Uses `opts.filesystem`.
pub fn verify_store(dir: &Path, opts: &Options) -> Result<VerifyReport> {
    let fs = opts.filesystem.clone();
    let _lock = fs.lock(&dir.join(LOCK))?;
    let mut names = fs.list(dir)?;
    names.sort();
    let mut report = VerifyReport::default();
    for name in names {
        let path = dir.join(&name);
        let (kind, checked) = match filename::parse(&name) {
            FileKind::Table(n) => ("table", check_table(&fs, &path, n)),
            FileKind::Wal(_) => ("wal", check_log(fs.as_ref(), &path, check_batch)),
            FileKind::Manifest(_) => ("manifest", check_log(fs.as_ref(), &path, check_edit)),
            FileKind::Blob(_) => ("blob", check_blob(fs.as_ref(), &path)),
            _ if name == CURRENT => ("current", Ok(1)),
            _ => continue,
        };
        let bytes = fs.open_random(&path).and_then(|f| f.len()).unwrap_or(0);
        report.files.push(FileReport {
            name,
            kind: kind.to_string(),
            bytes,
            entries: *checked.as_ref().unwrap_or(&0),
            problem: checked.err().map(|e| e.to_string()),
        });
    }
    check_manifest_names_exist(dir, fs, &mut report);
    Ok(report)
}

fn check_table(fs: &Arc<dyn FileSystem>, path: &Path, number: u64) -> Result<u64> {
    let file = fs.open_random(path)?;
    let stats = Arc::new(Stats::default());
    let table = TableReader::open(file, path, number, None, MetaBlocks::Held, stats)?;
    Arc::new(table).verify()
}

/// Reads every record of a log strictly: damage anywhere, a torn tail included, is reported.
fn check_log(
    fs: &dyn FileSystem,
    path: &Path,
    check_record: fn(&[u8], &Path) -> Result<()>,
) -> Result<u64> {
    let data = fs.read_all(path)?;
    let mut reader = LogReader::new(&data, path, ReadOutcome::FailOnMidLogDamage);
    let mut records = 0;
    while let Some(record) = reader.next_record()? {
        check_record(&record, path)?;
        records += 1;
    }
    if reader.torn_tail_bytes > 0 {
        return Err(Error::corruption(
            path,
            format!(
                "the last {} bytes are not an intact record (a write cut short by a crash, or \
                 damage) after {records} intact records",
                reader.torn_tail_bytes
            ),
        ));
    }
    Ok(records)
}

fn check_batch(record: &[u8], path: &Path) -> Result<()> {
    let batch = WriteBatch::from_bytes(record.to_vec())
        .ok_or_else(|| Error::corruption(path, "WAL record shorter than a batch header"))?;
    batch
        .for_each(|_| {})
        .map_err(|d| Error::corruption(path, d))
}

fn check_edit(record: &[u8], path: &Path) -> Result<()> {
    VersionEdit::decode(record, path).map(|_| ())
}

/// Reads every record of a blob file; an unsealed one must end in an intact record.
fn check_blob(fs: &dyn FileSystem, path: &Path) -> Result<u64> {
    let reader = BlobFileReader::open(fs, path)?;
    let found = reader.recover()?;
    if !found.sealed {
        if found.torn_bytes > 0 {
            return Err(Error::corruption(
                path,
                format!(
                    "unsealed, and the last {} bytes are not an intact record (a write cut \
                     short by a crash, or damage)",
                    found.torn_bytes
                ),
            ));
        }
        return Ok(found.footer.records);
    }
    check_sealed_blob(&reader, &found)
}

/// Reads every record of a sealed blob file against its footer, whose counts were trusted to open
/// it; paranoid open uses it too.
pub(crate) fn check_sealed_blob(reader: &BlobFileReader, found: &Recovered) -> Result<u64> {
    let path = &reader.path;
    let (mut records, mut bytes) = (0u64, 0u64);
    let end = found.file_size - FOOTER_SIZE as u64;
    let damaged = reader.for_each_record(end, |_, size, _| {
        records += 1;
        bytes += size;
    })?;
    if damaged || records != found.footer.records || bytes != found.footer.record_bytes {
        return Err(Error::corruption(
            path,
            format!(
                "{records} intact records of {bytes} bytes, the footer says {} of {}",
                found.footer.records, found.footer.record_bytes
            ),
        ));
    }
    Ok(records)
}

/// Adds a report for each table or blob file the MANIFEST names that is not in the directory
/// (and for CURRENT or its MANIFEST when they cannot be read).
fn check_manifest_names_exist(dir: &Path, fs: Arc<dyn FileSystem>, report: &mut VerifyReport) {
    let present: BTreeSet<String> = report.files.iter().map(|f| f.name.clone()).collect();
    let versions = match VersionSet::recover(dir, fs) {
        Ok(v) => v,
        Err(e) => {
            let problem = Some(format!("the store's state cannot be recovered: {e}"));
            match report.files.iter_mut().find(|f| f.name == CURRENT) {
                Some(current) => current.problem = problem,
                None => report.files.push(FileReport {
                    name: CURRENT.to_string(),
                    kind: "current".to_string(),
                    bytes: 0,
                    entries: 0,
                    problem,
                }),
            }
            return;
        }
    };
    let tables = versions
        .live_tables()
        .map(|n| (filename::table_file(dir, n), "table"));
    let blobs = versions
        .column_families()
        .values()
        .flat_map(|cf| {
            cf.blob_files
                .keys()
                .filter(|n| !cf.evicted_blob_files.contains_key(n))
        })
        .map(|&n| (filename::blob_file(dir, n), "blob"));
    let named: Vec<_> = tables.chain(blobs).collect();
    for (path, kind) in named {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !present.contains(&name) {
            report.files.push(FileReport {
                name,
                kind: kind.to_string(),
                bytes: 0,
                entries: 0,
                problem: Some("missing: the MANIFEST names it".to_string()),
            });
        }
    }
}
