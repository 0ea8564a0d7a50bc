//! `repair_store`, the way out of a store whose MANIFEST or CURRENT is damaged or missing (RocksDB's
//! `RepairDB`): a new MANIFEST is rebuilt from the files that are intact, damaged files are kept
//! aside in `lost/`, and every column family is then compacted so its levels are sorted again.
//!
//! Invariants:
//! - Nothing is deleted: a file that cannot be used is moved to `lost/`, with the reason in the
//!   report.
//! - What the old MANIFEST still says is trusted first (column family names and options, levels,
//!   which files an edit had deleted); a table it does not know returns to the column family its
//!   properties name, at L0.
//! - A table or blob file numbered below the old MANIFEST's next file number that no surviving
//!   edit names had been deleted by an edit (or was the output of unfinished work): putting it
//!   back could bring deleted keys back, so it goes to `lost/`. Without any readable MANIFEST,
//!   every intact table is put back (and deleted keys may return: the report says so).
//! - WAL records are replayed into L0 tables, except those of WALs every column family had
//!   flushed; a WAL with damaged regions is replayed around them and then kept in `lost/`.
//! - A blob file that is damaged or missing is recorded as evicted, so indexes into it read as
//!   absent instead of failing every read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::Db;
use crate::blob::BlobFileReader;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind, LOCK, LOST_DIR};
use crate::fs::FileSystem;
use crate::memtable::MemTable;
use crate::options::{ColumnFamilyOptions, Options};
use crate::sst::{MetaBlocks, TableReader};
use crate::stats::Stats;
use crate::version::{FileMetaData, VersionEdit, VersionSet, decode_cf_options};

mod wals;

/// A file `repair_store` moved to `lost/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LostFile {
    /// Its name in the store's directory (it now lives in `lost/`).
    pub name: String,
    /// Why it was not used.
    pub reason: String,
}

/// What `repair_store` kept and lost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    /// The column families of the repaired store.
    pub column_families: Vec<String>,
    /// Intact tables put back into the new MANIFEST.
    pub tables_kept: u64,
    /// Intact blob files put back.
    pub blob_files_kept: u64,
    /// WAL records replayed into new tables.
    pub wal_records_replayed: u64,
    /// Tables written from those records.
    pub tables_from_wals: u64,
    /// Whether some of the old MANIFEST could be read (without it, keys deleted before may
    /// return, and column families are named after their ids).
    pub manifest_read: bool,
    /// Files moved to `lost/`, and files the store needed that were missing.
    pub lost: Vec<LostFile>,
}

/// Rebuilds the MANIFEST of the store in `dir` from its intact files, keeps damaged ones aside in
/// `lost/`, then opens the store and compacts every column family. The store must be closed.
pub fn repair_store(dir: &Path, opts: &Options) -> Result<RepairReport> {
    let fs = opts.filesystem.clone();
    if !fs.exists(dir) {
        return Err(Error::InvalidArgument(format!(
            "no store at {}: the directory does not exist",
            dir.display()
        )));
    }
    let report = {
        let _lock = fs.lock(&dir.join(LOCK))?;
        Repair::new(dir, opts)?.run()?
    };
    // Tables put back at L0 may overlap in sequence ranges; one compaction per column family
    // sorts them into levels again.
    let db = Db::open(
        dir,
        Options {
            create_if_missing: false,
            ..opts.clone()
        },
    )?;
    for name in db.list_cf() {
        let cf = db.cf(&name)?;
        db.compact_range_cf(&cf, None, None)?;
    }
    db.close()?;
    Ok(report)
}

/// One column family of the store being rebuilt.
struct CfPlan {
    name: String,
    options: ColumnFamilyOptions,
    /// Encoded options to record (empty for the default column family).
    recorded: Vec<u8>,
    /// WALs below this hold nothing of it that is not in its tables.
    log_number: u64,
    tables: Vec<(usize, FileMetaData)>,
    blob_files: Vec<(u64, u64)>,
    evicted: Vec<(u64, u64)>,
    mem: Option<Arc<MemTable>>,
}

impl CfPlan {
    /// A column family with nothing in it yet.
    fn new(name: String, options: ColumnFamilyOptions, recorded: Vec<u8>) -> Self {
        CfPlan {
            name,
            options,
            recorded,
            log_number: 0,
            tables: Vec::new(),
            blob_files: Vec::new(),
            evicted: Vec::new(),
            mem: None,
        }
    }
}

struct Repair<'a> {
    dir: &'a Path,
    opts: &'a Options,
    fs: Arc<dyn FileSystem>,
    names: Vec<String>,
    /// What the old MANIFEST still says, if any of it could be read.
    known: Option<VersionSet>,
    /// The old MANIFEST, when it is damaged (kept aside at the end).
    damaged_manifest: Option<(PathBuf, String)>,
    cfs: BTreeMap<u32, CfPlan>,
    /// Intact tables the old MANIFEST does not name, with the column family they record: placed
    /// once every table has been read.
    unnamed: Vec<(PathBuf, FileMetaData, u32)>,
    next_file: u64,
    last_sequence: u64,
    report: RepairReport,
    /// Bytes of records in each blob file kept, from its footer or scan.
    blob_record_bytes: BTreeMap<u64, u64>,
}

impl<'a> Repair<'a> {
    fn new(dir: &'a Path, opts: &'a Options) -> Result<Self> {
        let fs = opts.filesystem.clone();
        let mut names = fs.list(dir)?;
        names.sort();
        let mut repair = Repair {
            dir,
            opts,
            fs,
            names,
            known: None,
            damaged_manifest: None,
            cfs: BTreeMap::new(),
            unnamed: Vec::new(),
            next_file: 1,
            last_sequence: 0,
            report: RepairReport::default(),
            blob_record_bytes: BTreeMap::new(),
        };
        repair.read_old_manifest()?;
        repair.plan_column_families()?;
        Ok(repair)
    }

    fn run(mut self) -> Result<RepairReport> {
        let names = self.names.clone();
        for name in &names {
            match filename::parse(name) {
                FileKind::Table(n) => self.add_table(name, n)?,
                FileKind::Blob(n) => self.add_blob_file(name, n)?,
                _ => {}
            }
        }
        self.place_unnamed_tables()?;
        self.record_missing_blob_files();
        let mut wals: Vec<u64> = names
            .iter()
            .filter_map(|n| match filename::parse(n) {
                FileKind::Wal(n) => Some(n),
                _ => None,
            })
            .collect();
        wals.sort_unstable();
        for n in wals {
            self.replay_wal(n)?;
        }
        let ids: Vec<u32> = self.cfs.keys().copied().collect();
        for id in ids {
            self.flush_memtable(id)?;
        }
        self.write_manifest()?;
        if let Some((path, why)) = self.damaged_manifest.take() {
            self.keep_aside(&path, why)?;
        }
        self.report.column_families = self.cfs.values().map(|cf| cf.name.clone()).collect();
        Ok(self.report)
    }

    /// Reads what can be read of the MANIFEST CURRENT names or, failing that, of the newest one.
    fn read_old_manifest(&mut self) -> Result<()> {
        let named = VersionSet::current_manifest(self.dir, self.fs.as_ref()).ok();
        let newest = self
            .names
            .iter()
            .filter_map(|n| match filename::parse(n) {
                FileKind::Manifest(m) => Some(m),
                _ => None,
            })
            .max()
            .map(|m| self.dir.join(filename::manifest_name(m)));
        let Some(path) = named.or(newest) else {
            return Ok(());
        };
        let (set, unusable) = VersionSet::recover_lenient(self.dir, self.fs.clone(), &path)?;
        if let Err(e) = VersionSet::recover(self.dir, self.fs.clone()) {
            self.damaged_manifest = Some((path, e.to_string()));
        } else if unusable > 0 {
            self.damaged_manifest = Some((path, format!("{unusable} records unusable")));
        }
        self.report.manifest_read = true;
        self.known = Some(set);
        Ok(())
    }

    fn plan_column_families(&mut self) -> Result<()> {
        let default = CfPlan::new("default".into(), self.opts.cf.clone(), Vec::new());
        self.cfs.insert(0, default);
        let Some(known) = &self.known else {
            return Ok(());
        };
        self.next_file = known.next_file_number();
        self.last_sequence = known.last_sequence();
        let manifest = self.dir.join("MANIFEST");
        for (&id, cf) in known.column_families() {
            let options = if id == 0 {
                self.opts.cf.clone()
            } else if let Some(o) = self.opts.column_families.get(&cf.name) {
                o.clone()
            } else {
                decode_cf_options(&cf.options, &manifest).unwrap_or_default()
            };
            let plan = self.cfs.entry(id).or_insert_with(|| {
                CfPlan::new(
                    cf.name.clone(),
                    ColumnFamilyOptions::default(),
                    cf.options.clone(),
                )
            });
            plan.options = options;
            plan.log_number = cf.log_number;
            plan.evicted = cf
                .evicted_blob_files
                .iter()
                .map(|(&n, &s)| (n, s))
                .collect();
        }
        Ok(())
    }

    /// The column family `id` of a file no surviving edit names; `None` when it was dropped.
    fn column_family_for(&mut self, id: u32) -> Option<u32> {
        if self.cfs.contains_key(&id) {
            return Some(id);
        }
        if let Some(known) = &self.known
            && id <= known.max_column_family()
        {
            return None; // ids are never reused: this one was dropped
        }
        self.cfs.insert(
            id,
            CfPlan::new(
                format!("recovered-{id}"),
                ColumnFamilyOptions::default(),
                crate::version::encode_cf_options(&ColumnFamilyOptions::default()),
            ),
        );
        Some(id)
    }

    /// Where the old MANIFEST had table `number` live: its column family and level.
    fn known_place(&self, number: u64) -> Option<(u32, usize)> {
        let known = self.known.as_ref()?;
        for (&id, cf) in known.column_families() {
            for (level, files) in cf.current.levels.iter().enumerate() {
                if files.iter().any(|f| f.number == number) {
                    return Some((id, level));
                }
            }
        }
        None
    }

    fn add_table(&mut self, name: &str, number: u64) -> Result<()> {
        self.next_file = self.next_file.max(number + 1);
        let path = self.dir.join(name);
        let opened = self.fs.open_random(&path).and_then(|file| {
            let size = file.len()?;
            let stats = Arc::new(Stats::default());
            let table = Arc::new(TableReader::open(
                file,
                &path,
                number,
                None,
                MetaBlocks::Held,
                stats,
            )?);
            table.verify()?;
            let props = table.properties().clone();
            let cf = u32::try_from(props.column_family).unwrap_or(u32::MAX);
            Ok((FileMetaData::from_table(number, size, props), cf))
        });
        let (meta, recorded_cf) = match opened {
            Ok(found) => found,
            Err(e) => return self.keep_aside(&path, format!("damaged table: {e}")),
        };
        let Some((cf, level)) = self.known_place(number) else {
            self.unnamed.push((path, meta, recorded_cf));
            return Ok(());
        };
        self.last_sequence = self.last_sequence.max(meta.largest_seq);
        if let Some(plan) = self.cfs.get_mut(&cf) {
            plan.tables.push((level, meta));
        }
        self.report.tables_kept += 1;
        Ok(())
    }

    /// Puts back each intact table the old MANIFEST does not name, at L0 of the column family it
    /// records, unless it is obsolete: every write it holds is also in a table kept (the input of
    /// a compaction whose deletion a crash cut short, or its unfinished output), or, with an
    /// intact MANIFEST, an edit had deleted it. Putting an obsolete table back could bring keys
    /// back whose deletion has since been compacted away.
    fn place_unnamed_tables(&mut self) -> Result<()> {
        // Per column family: sequence numbers are shared by all of them.
        let kept: BTreeMap<u32, Vec<(u64, u64)>> = self
            .cfs
            .iter()
            .map(|(&id, p)| {
                let ranges = p
                    .tables
                    .iter()
                    .map(|(_, f)| (f.smallest_seq, f.largest_seq));
                (id, ranges.collect())
            })
            .collect();
        let intact_next = match (&self.known, &self.damaged_manifest) {
            (Some(k), None) => Some(k.next_file_number()),
            _ => None,
        };
        for (path, meta, recorded_cf) in std::mem::take(&mut self.unnamed) {
            let deleted = intact_next.is_some_and(|next| meta.number < next);
            let covered = self.known.is_some()
                && kept.get(&recorded_cf).is_some_and(|ranges| {
                    crate::version::seqs_covered(
                        ranges.clone(),
                        meta.smallest_seq,
                        meta.largest_seq,
                    )
                });
            if deleted || covered {
                let why = if deleted {
                    "the MANIFEST had deleted it"
                } else {
                    "obsolete: every write it holds is in the tables kept"
                };
                self.keep_aside(
                    &path,
                    format!("{why} (putting it back could bring deleted keys back)"),
                )?;
                continue;
            }
            let Some(cf) = self.column_family_for(recorded_cf) else {
                self.keep_aside(
                    &path,
                    format!("its column family {recorded_cf} was dropped"),
                )?;
                continue;
            };
            self.last_sequence = self.last_sequence.max(meta.largest_seq);
            if let Some(plan) = self.cfs.get_mut(&cf) {
                plan.tables.push((0, meta));
            }
            self.report.tables_kept += 1;
        }
        Ok(())
    }

    fn add_blob_file(&mut self, name: &str, number: u64) -> Result<()> {
        self.next_file = self.next_file.max(number + 1);
        let path = self.dir.join(name);
        let known_cf = self.known.as_ref().and_then(|k| {
            k.column_families()
                .iter()
                .find(|(_, cf)| cf.blob_files.contains_key(&number))
                .map(|(&id, cf)| (id, cf.blob_files[&number]))
        });
        let checked = BlobFileReader::open(self.fs.as_ref(), &path).and_then(|reader| {
            let found = reader.recover()?;
            if found.sealed {
                reader.verify_sealed(&found)?;
            }
            Ok((found.header.column_family, found.footer.record_bytes))
        });
        let (header_cf, record_bytes) = match checked {
            Ok(found) => found,
            Err(e) => {
                if let Some((cf, _)) = known_cf {
                    self.evict(cf, number);
                }
                return self.keep_aside(
                    &path,
                    format!("damaged blob file (its values now read as absent): {e}"),
                );
            }
        };
        let garbage = match known_cf {
            Some((_, garbage)) => garbage,
            None if self
                .known
                .as_ref()
                .is_some_and(|k| number < k.next_file_number()) =>
            {
                return self.keep_aside(&path, "the MANIFEST had deleted or evicted it".into());
            }
            None => 0,
        };
        let cf = known_cf.map_or(header_cf, |(cf, _)| cf);
        match self.column_family_for(cf) {
            Some(cf) => {
                if let Some(plan) = self.cfs.get_mut(&cf) {
                    plan.blob_files.push((number, garbage));
                    self.blob_record_bytes.insert(number, record_bytes);
                }
                self.report.blob_files_kept += 1;
                Ok(())
            }
            None => self.keep_aside(&path, format!("its column family {cf} was dropped")),
        }
    }

    /// Blob files the old MANIFEST named that are gone: evicted, so indexes into them read as
    /// absent.
    fn record_missing_blob_files(&mut self) {
        let Some(known) = &self.known else { return };
        let present: BTreeSet<&str> = self.names.iter().map(String::as_str).collect();
        let mut missing = Vec::new();
        for (&id, cf) in known.column_families() {
            for &n in cf.blob_files.keys() {
                let path = filename::blob_file(self.dir, n);
                let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("");
                let kept = self
                    .cfs
                    .get(&id)
                    .is_some_and(|p| p.blob_files.iter().any(|(b, _)| *b == n));
                if !present.contains(name) && !kept {
                    missing.push((id, n, name.to_string()));
                }
            }
        }
        for (id, n, name) in missing {
            self.evict(id, n);
            self.report.lost.push(LostFile {
                name,
                reason: "missing (its values now read as absent)".into(),
            });
        }
    }

    fn evict(&mut self, cf: u32, number: u64) {
        let seq = self.last_sequence;
        if let Some(plan) = self.cfs.get_mut(&cf) {
            plan.evicted.push((number, seq));
        }
    }

    /// Moves `path` into `lost/` and reports why.
    fn keep_aside(&mut self, path: &Path, reason: String) -> Result<()> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let lost = self.dir.join(LOST_DIR);
        self.fs.create_dir_all(&lost)?;
        self.fs.rename(path, &lost.join(&name))?;
        self.fs.sync_dir(&lost)?;
        self.fs.sync_dir(self.dir)?;
        self.report.lost.push(LostFile { name, reason });
        Ok(())
    }

    /// Writes the new MANIFEST and points CURRENT at it.
    fn write_manifest(&mut self) -> Result<()> {
        demote_overlapping_tables(&mut self.cfs);
        // Garbage and borrowed bytes counted afresh from what the kept tables name.
        let tables = self
            .cfs
            .values()
            .flat_map(|p| p.tables.iter().map(|(_, t)| t.number));
        let named = super::repair_refs::named_blob_bytes(self.fs.as_ref(), self.dir, tables)?;
        let mut borrowed = BTreeMap::new();
        for plan in self.cfs.values_mut() {
            for (n, garbage) in &mut plan.blob_files {
                let records = self.blob_record_bytes.get(n).copied().unwrap_or(0);
                let (g, b) =
                    super::repair_refs::accounting(records, named.get(n).copied().unwrap_or(0));
                *garbage = g;
                if b > 0 {
                    borrowed.insert(*n, b);
                }
            }
        }
        let mut set = VersionSet::new_empty(self.dir, self.fs.clone());
        let max_cf = self
            .cfs
            .keys()
            .copied()
            .max()
            .unwrap_or(0)
            .max(self.known.as_ref().map_or(0, VersionSet::max_column_family));
        // Every file above is numbered below this; WALs too, so the next open removes them.
        let log_number = self.next_file;
        set.apply_recovered(&VersionEdit {
            next_file_number: Some(self.next_file),
            last_sequence: Some(self.last_sequence),
            max_column_family: Some(max_cf),
            ..Default::default()
        })?;
        for (&id, plan) in &self.cfs {
            let edit = VersionEdit {
                column_family: id,
                add_column_family: (id != 0).then(|| plan.name.clone()),
                cf_options: (id != 0 && !plan.recorded.is_empty()).then(|| plan.recorded.clone()),
                log_number: Some(log_number),
                new_files: plan.tables.clone(),
                blob_files_added: plan.blob_files.iter().map(|(n, _)| *n).collect(),
                blob_garbage: plan
                    .blob_files
                    .iter()
                    .filter(|(_, g)| *g > 0)
                    .copied()
                    .collect(),
                blob_refs_added: plan
                    .blob_files
                    .iter()
                    .filter_map(|(n, _)| Some((*n, *borrowed.get(n)?)))
                    .collect(),
                blob_files_evicted: plan.evicted.clone(),
                ..Default::default()
            };
            set.apply_recovered(&edit)?;
        }
        set.write_snapshot(self.last_sequence)
    }
}

/// Tables whose level the old MANIFEST gave but which overlap another of that level (its record
/// was stale) go to L0, where overlap is allowed; the compaction after repair sorts them.
fn demote_overlapping_tables(cfs: &mut BTreeMap<u32, CfPlan>) {
    for plan in cfs.values_mut() {
        let mut by_level: BTreeMap<usize, Vec<FileMetaData>> = BTreeMap::new();
        for (level, meta) in plan.tables.drain(..) {
            by_level.entry(level).or_default().push(meta);
        }
        let mut tables = Vec::new();
        for (level, mut files) in by_level {
            if level == 0 {
                tables.extend(files.into_iter().map(|f| (0, f)));
                continue;
            }
            files.sort_by(|a, b| crate::key::compare_internal(&a.smallest, &b.smallest));
            let mut last_largest: Option<Vec<u8>> = None;
            for f in files {
                let overlaps = last_largest
                    .as_ref()
                    .is_some_and(|l| crate::key::user_key(&f.smallest) <= crate::key::user_key(l));
                if overlaps {
                    tables.push((0, f));
                } else {
                    last_largest = Some(f.largest.clone());
                    tables.push((level, f));
                }
            }
        }
        plan.tables = tables;
    }
}
