//! Offline checking of a closed store: every checksum of every file (table blocks, WAL and
//! MANIFEST records, blob records, headers and footers), every record's structure, and that each
//! file the MANIFEST names exists. Damage is reported per file, never a panic; only a failure to
//! read the directory itself is an error. `strata verify --db DIR` prints the report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use crate::blob::reader::BlobFileReader;
use crate::db::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, CURRENT, FileKind, LOCK, LOST_DIR};
use crate::fs::FileSystem;
use crate::options::Options;
use crate::sst::{MetaBlocks, TableReader};
use crate::stats::Stats;
use crate::version::{VersionEdit, VersionSet};
use crate::wal::{LogReader, ReadOutcome, SealChain, decode_seal, record_after_seal};

/// What `verify_store` found in one file.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// What is wrong with it, or `None` when every check passed (or the file holds nothing the
    /// store needs).
    pub problem: Option<String>,
    /// What the file is when that is not plain: a crash's leftover that no MANIFEST names (the
    /// next open deletes it), a log whose last record a crash cut short, a file kept aside in
    /// `lost/`. Not damage.
    pub note: Option<String>,
}

/// The result of `verify_store`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Every file checked, in name order, then files the MANIFEST names that are missing.
    pub files: Vec<FileReport>,
    /// What is open to more accounts than the store means to be (its directory or a file
    /// other accounts may read; a file its group may read in a store not shared with it), a
    /// line each with the fix. Not damage.
    pub warnings: Vec<String>,
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
    let versions = VersionSet::recover(dir, fs.clone());
    // Whether each WAL holds no record (`None`: it could not be read). An empty WAL holds
    // nothing: only the newest WAL with a record may be torn or unsealed.
    let wals_empty: BTreeMap<u64, Option<bool>> = names
        .iter()
        .filter_map(|n| match filename::parse(n) {
            FileKind::Wal(n) => Some(n),
            _ => None,
        })
        .map(|n| {
            let path = filename::wal_file(dir, n);
            (n, crate::wal::holds_no_record(fs.as_ref(), &path).ok())
        })
        .collect();
    let newest_wal = wals_empty
        .iter()
        .filter(|(_, empty)| **empty == Some(false))
        .map(|(&n, _)| n)
        .max();
    let mut seals = BTreeMap::new();
    let (mut wal_blob_ends, mut table_blob_ends) = (BTreeMap::new(), BTreeMap::new());
    let mut blob_ends = BTreeMap::new();
    let referenced = versions.as_ref().ok().map(Referenced::new);
    let mut report = VerifyReport {
        warnings: fs.loose_modes(dir),
        ..VerifyReport::default()
    };
    for name in names {
        let path = dir.join(&name);
        let kind = filename::parse(&name);
        let (kind_name, checked) = match kind {
            FileKind::Table(n) => ("table", check_table(&fs, &path, n)),
            FileKind::Wal(_) => ("wal", check_wal(fs.as_ref(), &path)),
            FileKind::Manifest(_) => ("manifest", check_log(fs.as_ref(), &path, false, check_edit)),
            FileKind::Blob(n) => ("blob", check_blob(fs.as_ref(), &path, n)),
            _ if name == CURRENT => ("current", Ok(Checked::whole(1))),
            _ => continue,
        };
        let bytes = fs.open_random(&path).and_then(|f| f.len()).unwrap_or(0);
        let mut file = FileReport {
            name,
            kind: kind_name.to_string(),
            bytes,
            entries: 0,
            problem: None,
            note: None,
        };
        match checked {
            Ok(c) => {
                file.entries = c.entries;
                // A WAL of zeros only holds nothing (made, then a crash): not a torn one.
                let empty_wal = match kind {
                    FileKind::Wal(n) => wals_empty.get(&n).copied().flatten().unwrap_or(bytes == 0),
                    _ => false,
                };
                match kind {
                    FileKind::Wal(n) => {
                        seals.insert(n, (empty_wal, c.sealed_to));
                        wal_blob_ends.insert(n, c.blob_ends);
                    }
                    FileKind::Table(n) => {
                        table_blob_ends.insert(n, c.blob_ends);
                    }
                    _ => blob_ends.extend(c.blob_ends),
                }
                match (kind, c.torn_tail) {
                    // Synced whole when the next one started: only the newest can be torn.
                    (FileKind::Wal(_), Some(_)) if empty_wal => {}
                    (FileKind::Wal(n), Some(torn)) if Some(n) != newest_wal => {
                        file.problem = Some(format!("{torn}, but a newer WAL follows it"));
                    }
                    (_, torn) => file.note = torn,
                }
            }
            Err(e) => file.problem = Some(e.to_string()),
        }
        if let Some(leftover) = referenced.as_ref().and_then(|r| r.leftover(kind)) {
            // What no MANIFEST needs cannot damage the store, whatever state it is in.
            file.note = Some(match file.problem.take() {
                Some(p) => format!("{leftover}; it is also unreadable: {p}"),
                None => leftover.to_string(),
            });
        }
        report.files.push(file);
    }
    report_lost_files(dir, fs.as_ref(), &mut report);
    match versions {
        Ok(v) => {
            check_wal_seals(dir, &v, &seals, &mut report);
            // What vouches for blob records: the live tables, and every live WAL but an
            // unsealed newest one (its last writes may be a crash's, cut with their records).
            let mut vouching: Vec<(String, &BTreeMap<u64, u64>)> = Vec::new();
            for (&wal, needs) in wal_blob_ends.range(v.min_log_number()..) {
                let sealed = seals.get(&wal).is_some_and(|(_, to)| to.is_some());
                if Some(wal) != newest_wal || sealed {
                    let why = "synced whole: a newer WAL or its seal follows it";
                    vouching.push((format!("WAL {wal} ({why})"), needs));
                }
            }
            let live = |&(n, _): &(&u64, _)| referenced.as_ref().is_some_and(|r| r.needs_table(*n));
            for (n, needs) in table_blob_ends.iter().filter(live) {
                vouching.push((format!("table {n}"), needs));
            }
            check_blob_records_needed(&vouching, &blob_ends, &mut report);
            check_manifest_names_exist(dir, &v, &mut report)
        }
        Err(e) => report_unrecoverable(e, &mut report),
    }
    Ok(report)
}

/// Checks every checksum of an open store's live tables and sealed blob files, while it serves
/// reads and writes. Its WALs and MANIFEST are being appended to: `verify_store` checks those on
/// the closed store. A file a compaction deleted during the check is noted, not reported.
pub fn verify_live(db: &crate::Db) -> Result<VerifyReport> {
    let props = db.properties();
    let fs = db.filesystem();
    let dir = db.path();
    let mut report = VerifyReport {
        warnings: fs.loose_modes(dir),
        ..VerifyReport::default()
    };
    let tables = props.column_families.iter().flat_map(|cf| {
        cf.levels
            .iter()
            .flat_map(|l| l.file_list.iter().map(|f| f.number))
    });
    let blobs = props.column_families.iter().flat_map(|cf| {
        cf.blob_files
            .iter()
            .filter(|b| b.state == crate::BlobFileState::Sealed)
            .map(|b| b.number)
    });
    let files: Vec<(FileKind, std::path::PathBuf)> = tables
        .map(|n| (FileKind::Table(n), filename::table_file(dir, n)))
        .chain(blobs.map(|n| (FileKind::Blob(n), filename::blob_file(dir, n))))
        .collect();
    for (kind, path) in files {
        let (kind_name, checked) = match kind {
            FileKind::Table(n) => ("table", check_table(&fs, &path, n)),
            FileKind::Blob(n) => ("blob", check_blob(fs.as_ref(), &path, n)),
            _ => continue,
        };
        let mut file = FileReport {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kind: kind_name.to_string(),
            bytes: fs.open_random(&path).and_then(|f| f.len()).unwrap_or(0),
            entries: 0,
            problem: None,
            note: None,
        };
        match checked {
            Ok(c) => file.entries = c.entries,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                file.note = Some("deleted by a compaction during the check".to_string());
            }
            Err(e) => file.problem = Some(e.to_string()),
        }
        report.files.push(file);
    }
    Ok(report)
}

/// What a file check found: entries or records read, and a note when a log's last record was
/// cut short.
struct Checked {
    entries: u64,
    torn_tail: Option<String>,
    /// For a WAL: the next WAL its seal names.
    sealed_to: Option<u64>,
    /// For a WAL: per blob file its writes point into, where the furthest record they need ends.
    /// For a blob file: where its intact records end (one entry, its own number).
    blob_ends: BTreeMap<u64, u64>,
}

impl Checked {
    fn whole(entries: u64) -> Self {
        Checked {
            entries,
            torn_tail: None,
            sealed_to: None,
            blob_ends: BTreeMap::new(),
        }
    }
}

/// Each live WAL a newer one follows must end in a seal naming it (recovery's rule); a break is
/// reported on the WAL before it.
fn check_wal_seals(
    dir: &Path,
    v: &VersionSet,
    seals: &BTreeMap<u64, (bool, Option<u64>)>,
    report: &mut VerifyReport,
) {
    let mut blame = |wal: u64, e: Error| {
        let name = filename::wal_file(dir, wal);
        if let Some(file) = report
            .files
            .iter_mut()
            .find(|f| Some(f.name.as_str()) == name.file_name().and_then(|s| s.to_str()))
        {
            file.problem.get_or_insert_with(|| e.to_string());
        }
    };
    let live = || seals.range(v.min_log_number()..);
    let mut chain = SealChain::new(dir, v.sealed_wals_from(), true);
    let mut previous = None;
    for (&n, &(_, sealed_to)) in live().filter(|(_, (empty, _))| !empty) {
        if let Err(e) = chain.enter(n)
            && let Some(prev) = previous
        {
            blame(prev, e);
        }
        if let Some(next) = sealed_to {
            // The WAL was read whole already: only the chain matters here.
            let _ = chain.seal(&filename::wal_file(dir, n), next);
        }
        previous = Some(n);
    }
    let files: Vec<(u64, bool)> = live().map(|(&n, &(empty, _))| (n, empty)).collect();
    let max_log_number = v
        .column_families()
        .values()
        .map(|cf| cf.log_number)
        .max()
        .unwrap_or(0);
    if let (Err(e), Some(last)) = (chain.finish(&files, max_log_number), previous) {
        blame(last, e);
    }
}

/// Which files the recovered MANIFEST needs.
struct Referenced {
    tables: BTreeSet<u64>,
    blobs: BTreeSet<u64>,
    min_log: u64,
    manifest: u64,
}

impl Referenced {
    fn new(v: &VersionSet) -> Self {
        Referenced {
            tables: v.live_tables().collect(),
            blobs: v
                .column_families()
                .values()
                .flat_map(|cf| cf.blob_files.keys().copied())
                .collect(),
            min_log: v.min_log_number(),
            manifest: v.manifest_number(),
        }
    }

    fn needs_table(&self, number: u64) -> bool {
        self.tables.contains(&number)
    }

    /// Why a file of `kind` is a leftover no MANIFEST needs, or `None` when it is needed.
    fn leftover(&self, kind: FileKind) -> Option<&'static str> {
        let unnamed = match kind {
            FileKind::Table(n) => !self.tables.contains(&n),
            FileKind::Blob(n) => !self.blobs.contains(&n),
            FileKind::Wal(n) => n < self.min_log,
            FileKind::Manifest(n) => n != self.manifest,
            _ => false,
        };
        unnamed.then_some(
            "unreferenced leftover: the MANIFEST does not need it (unfinished or superseded work \
             of a crash, which the next open removes)",
        )
    }
}

/// Adds a report for each file kept aside in `lost/`: never read by the store, so not damage.
fn report_lost_files(dir: &Path, fs: &dyn FileSystem, report: &mut VerifyReport) {
    let lost = dir.join(LOST_DIR);
    if !fs.exists(&lost) {
        return;
    }
    let Ok(mut names) = fs.list(&lost) else {
        return;
    };
    names.sort();
    for name in names {
        let bytes = fs
            .open_random(&lost.join(&name))
            .and_then(|f| f.len())
            .unwrap_or(0);
        report.files.push(FileReport {
            name: format!("{LOST_DIR}/{name}"),
            kind: "lost".to_string(),
            bytes,
            entries: 0,
            problem: None,
            note: Some(
                "kept aside by an open that could not prove it obsolete, or by repair; the store \
                 does not read it"
                    .to_string(),
            ),
        });
    }
}

fn check_table(fs: &Arc<dyn FileSystem>, path: &Path, number: u64) -> Result<Checked> {
    let file = fs.open_random(path)?;
    let stats = Arc::new(Stats::default());
    let table = TableReader::open(file, path, number, None, MetaBlocks::Held, stats)?;
    let mut ends = BTreeMap::new();
    let entries = Arc::new(table).verify_each(|key, value| {
        if crate::key::kind_byte(key) == crate::key::ValueKind::BlobIndex as u8
            && let Some(index) = crate::blob::BlobIndex::decode(value)
        {
            note_blob_ends(&index, &mut ends);
        }
    })?;
    let mut checked = Checked::whole(entries);
    checked.blob_ends = ends;
    Ok(checked)
}

/// Notes where the furthest record `index` points at ends, per blob file.
fn note_blob_ends(index: &crate::blob::BlobIndex<'_>, ends: &mut BTreeMap<u64, u64>) {
    for blob in index.records() {
        let end = ends.entry(blob.file).or_insert(0);
        *end = (*end).max(blob.offset.saturating_add(blob.size));
    }
}

/// Reads every record of a log strictly: damage anywhere is reported, and so is a tail of wrong
/// bytes; a last record cut short (what a crash during an unsynced append leaves, and what
/// recovery drops) is a note.
fn check_log(
    fs: &dyn FileSystem,
    path: &Path,
    wal: bool,
    mut check_record: impl FnMut(&[u8], &Path) -> Result<Option<u64>>,
) -> Result<Checked> {
    let data = crate::wal::read_log(fs, path)?;
    // Every offset, for WALs too: at worst a value holding log bytes makes a crash's torn tail
    // read as damage here, which only errs towards reporting.
    let mut reader =
        LogReader::new(&data, path, ReadOutcome::FailOnMidLogDamage).scanning_every_offset();
    if wal {
        reader = reader.reading_a_wal();
    }
    let mut records = 0;
    let mut sealed_to = None;
    while let Some(record) = reader.next_record()? {
        if let Some(next) = sealed_to {
            return Err(record_after_seal(path, next));
        }
        sealed_to = check_record(&record, path)?;
        records += 1;
    }
    let torn = reader.torn_tail_bytes;
    if let Some(why) = reader.tail_damage {
        return Err(Error::corruption(
            path,
            format!(
                "{why} in the last {torn} bytes after {records} intact records (wrong bytes, not a \
                 write cut short)"
            ),
        ));
    }
    Ok(Checked {
        entries: records,
        sealed_to,
        blob_ends: BTreeMap::new(),
        torn_tail: (torn > 0).then(|| match reader.lost_write_at {
            Some(at) => format!(
                "the last {torn} bytes start at offset {at}, where zeros run to a sector's end \
                 (a write a power loss kept from the disk, after the last sync); recovery drops \
                 them"
            ),
            None => format!(
                "the last {torn} bytes are a record cut short (a crash during a write that was \
                 never synced); recovery drops them"
            ),
        }),
    })
}

/// Reads a WAL as `check_log` does, noting where in each blob file the records its writes need
/// end.
fn check_wal(fs: &dyn FileSystem, path: &Path) -> Result<Checked> {
    let mut ends = BTreeMap::new();
    let mut checked = check_log(fs, path, true, |record, path| {
        check_wal_record(record, path, &mut ends)
    })?;
    checked.blob_ends = ends;
    Ok(checked)
}

/// A write batch, or a seal (returned: the next WAL it names).
fn check_wal_record(
    record: &[u8],
    path: &Path,
    blob_ends: &mut BTreeMap<u64, u64>,
) -> Result<Option<u64>> {
    if let Some(next) = decode_seal(record) {
        return Ok(Some(next));
    }
    let batch = WriteBatch::from_bytes(record.to_vec())
        .ok_or_else(|| Error::corruption(path, "WAL record shorter than a batch header"))?;
    batch
        .for_each_blob_index(|_, index| note_blob_ends(index, blob_ends))
        .map_err(|d| Error::corruption(path, d))?;
    Ok(None)
}

fn check_edit(record: &[u8], path: &Path) -> Result<Option<u64>> {
    VersionEdit::decode(record, path).map(|_| None)
}

/// Every blob record a live table or a WAL synced whole points at must be among its blob file's
/// intact records, as recovery and reads require: only the newest WAL, unsealed, may point past
/// them (the blob append and the write were cut by a crash together, neither synced). A blob file
/// missing altogether is reported elsewhere (evicted, expired or named by the MANIFEST as
/// missing).
fn check_blob_records_needed(
    vouching: &[(String, &BTreeMap<u64, u64>)],
    blob_ends: &BTreeMap<u64, u64>,
    report: &mut VerifyReport,
) {
    for (who, needs) in vouching {
        for (&blob, &needed) in needs.iter() {
            let Some(&end) = blob_ends.get(&blob).filter(|&&end| end < needed) else {
                continue;
            };
            let name = filename::blob_file(Path::new(""), blob);
            let name = name.to_string_lossy();
            if let Some(file) = report.files.iter_mut().find(|f| f.name == name) {
                file.note = None;
                file.problem.get_or_insert_with(|| {
                    format!(
                        "its intact records end at byte {end}, but {who} needs them up to byte \
                         {needed}"
                    )
                });
            }
        }
    }
}

/// Reads every record of a blob file. An unsealed one may end in zeros a writer reserved, or in
/// one record a crash cut short (reported as a note: recovery drops it, as it drops a WAL's);
/// anything else after its intact records is damage, a damaged footer included.
fn check_blob(fs: &dyn FileSystem, path: &Path, number: u64) -> Result<Checked> {
    let reader = BlobFileReader::open(fs, path)?;
    let found = reader.recover()?;
    let records = if found.sealed {
        reader.verify_sealed(&found)?
    } else {
        found.footer.records
    };
    let mut checked = Checked::whole(records);
    checked
        .blob_ends
        .insert(number, crate::blob::records_end(&found.footer));
    if !found.sealed && found.torn_bytes > 0 {
        if !found.cut_short {
            return Err(Error::corruption(
                path,
                format!(
                    "unsealed, and the last {} bytes are not an intact record, nor one record \
                     cut short (damage)",
                    found.torn_bytes
                ),
            ));
        }
        checked.torn_tail = Some(format!(
            "unsealed, and the last {} bytes hold a record cut short (a crash during an append \
             that was never synced); recovery drops it",
            found.torn_bytes
        ));
    }
    Ok(checked)
}

/// Reports the file recovery blames (the MANIFEST, or else CURRENT) when the store's state cannot
/// be recovered.
fn report_unrecoverable(e: Error, report: &mut VerifyReport) {
    let blamed = match &e {
        Error::Corruption { file, .. } => file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        _ => CURRENT.to_string(),
    };
    let problem = Some(format!("the store's state cannot be recovered: {e}"));
    let target = if report.files.iter().any(|f| f.name == blamed) {
        blamed
    } else {
        CURRENT.to_string()
    };
    match report.files.iter_mut().find(|f| f.name == target) {
        Some(file) => {
            file.problem = problem;
            file.note = None;
        }
        None => report.files.push(FileReport {
            name: CURRENT.to_string(),
            kind: "current".to_string(),
            bytes: 0,
            entries: 0,
            problem,
            note: None,
        }),
    }
}

/// Adds a report for each table or blob file the MANIFEST names that is not in the directory.
fn check_manifest_names_exist(dir: &Path, versions: &VersionSet, report: &mut VerifyReport) {
    let present: BTreeSet<String> = report.files.iter().map(|f| f.name.clone()).collect();
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
                note: None,
            });
        }
    }
}
