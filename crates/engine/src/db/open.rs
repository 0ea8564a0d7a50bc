//! Opening a store: lock the directory, replay the MANIFEST, replay WAL files newer than the last
//! flush into L0 tables, write a fresh MANIFEST and WAL, delete what is obsolete.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex, RwLock};

use super::background::Scheduler;
use super::column_family::{
    CfState, CfTracker, ColumnFamily, ColumnFamilyData, Registry, put_slot,
};
use super::replay::{Replay, replay_wals};
use super::reserve::DiskReserve;
use super::write::{WalState, WriteQueue};
use super::{DbInner, State};
use crate::blob::{BlobFile, BlobFileMeta, BlobFileReader, BlobFileState, BlobStore};
use crate::cache::{BlockCache, default_shard_bits};
use crate::error::{Error, Result};
use crate::filename::{self, CURRENT, FileKind, LOCK, LOST_DIR, wal_file};
use crate::fs::{Deletions, FileSystem};
use crate::options::{ColumnFamilyOptions, Options};
use crate::snapshot::SnapshotList;
use crate::sst::{MetaPolicy, TableCache};
use crate::stats::Stats;
use crate::version::{VersionEdit, VersionSet, decode_cf_options, encode_cf_options};
use crate::wal::LogWriter;

/// Distinguishes stores open in this process, so a column family handle cannot be used on the
/// wrong one.
static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OpenMode {
    ReadWrite,
    /// No lock, nothing written, created or deleted, no background work: the WALs are replayed
    /// into memory only, and every mutating call is refused.
    ReadOnly,
}

pub(super) fn open(dir: &Path, opts: Options, mode: OpenMode) -> Result<Arc<DbInner>> {
    opts.validate()?;
    let read_only = mode == OpenMode::ReadOnly;
    let fs = opts.filesystem.clone();
    if !fs.exists(dir) {
        if !opts.create_if_missing || read_only {
            return Err(Error::InvalidArgument(format!(
                "no store at {}: the directory does not exist",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)?;
    }
    let lock = if read_only {
        None
    } else {
        Some(fs.lock(&dir.join(LOCK))?)
    };
    let stats = Arc::new(Stats::default());
    let block_cache = (opts.cache_size > 0).then(|| {
        Arc::new(BlockCache::new(
            opts.cache_size,
            opts.cache_shard_bits
                .unwrap_or_else(|| default_shard_bits(opts.cache_size)),
            opts.cache_kind,
            opts.high_pri_pool_ratio,
        ))
    });
    let tables = Arc::new(TableCache::new(
        dir.to_path_buf(),
        fs.clone(),
        opts.max_open_files,
        block_cache.clone(),
        MetaPolicy {
            cache: opts.cache_index_and_filter_blocks,
            pin_l0: opts.pin_l0_filter_and_index_blocks_in_cache,
        },
        stats.clone(),
    ));

    let mut versions = if fs.exists(&dir.join(CURRENT)) {
        if opts.error_if_exists {
            return Err(Error::InvalidArgument(format!(
                "{} already holds a store",
                dir.display()
            )));
        }
        VersionSet::recover(dir, fs.clone())?
    } else {
        if let Some(found) = data_files_without_current(fs.as_ref(), dir)? {
            return Err(Error::corruption(
                dir.join(CURRENT),
                format!(
                    "missing, but {} holds {found}: the store's history is lost, not absent, so \
                     it is not created anew (`strata repair` rebuilds it)",
                    dir.display()
                ),
            ));
        }
        if !opts.create_if_missing || read_only {
            return Err(Error::InvalidArgument(format!(
                "no store at {}: the directory holds no CURRENT file",
                dir.display()
            )));
        }
        let mut v = VersionSet::new_empty(dir, fs.clone());
        v.write_snapshot(0)?;
        v
    };
    let manifest_path = dir.join(filename::manifest_name(versions.manifest_number()));

    // Each column family's options: the default one's from `opts`, a named one's from
    // `opts.column_families` if given there, else as recorded.
    let mut cf_opts: BTreeMap<u32, ColumnFamilyOptions> = BTreeMap::new();
    for (&id, cf) in versions.column_families() {
        let o = if id == 0 {
            opts.cf.clone()
        } else if let Some(o) = opts.column_families.get(&cf.name) {
            o.clone()
        } else {
            decode_cf_options(&cf.options, &manifest_path)?
        };
        cf_opts.insert(id, o);
    }
    let existing: HashSet<&str> = versions
        .column_families()
        .values()
        .map(|cf| cf.name.as_str())
        .collect();
    let mut missing: Vec<String> = opts
        .column_families
        .keys()
        .filter(|n| !existing.contains(n.as_str()))
        .cloned()
        .collect();
    missing.sort();
    if let Some(name) = missing.first()
        && (!opts.create_missing_column_families || read_only)
    {
        return Err(Error::InvalidArgument(format!(
            "column family {name} does not exist (create_missing_column_families is false)"
        )));
    }
    for (&id, o) in &cf_opts {
        if id != 0 {
            versions.set_recorded_options(id, encode_cf_options(o));
        }
    }

    let names = fs.list(dir)?;
    let min_log = versions.min_log_number();
    let mut wals = Vec::new();
    let mut on_disk_tables = HashSet::new();
    for name in &names {
        match filename::parse(name) {
            FileKind::Wal(n) => {
                versions.mark_file_number_used(n);
                if n >= min_log {
                    wals.push(n);
                }
            }
            FileKind::Table(n) => {
                versions.mark_file_number_used(n);
                on_disk_tables.insert(n);
            }
            FileKind::Manifest(n) => versions.mark_file_number_used(n),
            FileKind::Blob(n) => versions.mark_file_number_used(n),
            _ => {}
        }
    }
    let live_files: Vec<u64> = versions.live_tables().collect();
    for &n in &live_files {
        if !on_disk_tables.contains(&n) {
            return Err(Error::corruption(
                filename::table_file(dir, n),
                "table named by the MANIFEST is missing",
            ));
        }
    }
    if opts.paranoid_checks {
        for (n, level) in versions.live_tables_by_level() {
            tables.get(n, level)?.verify()?;
        }
    }

    let deletions = Deletions::new(fs.clone(), opts.max_held_deletion_bytes);
    versions.share_deletions(deletions.clone());
    let blobs = BlobStore::new(
        dir,
        fs.clone(),
        deletions.clone(),
        stats.clone(),
        block_cache.clone(),
        opts.max_open_files,
    );
    let unsealed_blobs =
        recover_blob_files(&versions, &blobs, &stats, opts.paranoid_checks, read_only)?;
    let mut recovered_mems = BTreeMap::new();

    // Tables replayed from the WALs, the fresh WAL and the fresh MANIFEST are new files no durable
    // MANIFEST names until CURRENT names the fresh one: should the open fail before that (a full
    // disk), they are removed, or each attempt would leave more behind.
    let mut created = Vec::new();
    let manifest_before = versions.manifest_number();
    let persisted = if read_only {
        let (last_seq, skipped, _) = replay_wals(
            dir,
            &opts,
            &mut versions,
            &cf_opts,
            &mut wals,
            &blobs,
            Replay::IntoMemory {
                mems: &mut recovered_mems,
                after: 0,
            },
        )?;
        Ok(Persisted {
            last_seq,
            skipped,
            wal_number: 0,
            wal_writer: None,
            redundant_tables: HashSet::new(),
        })
    } else {
        replay_and_persist(
            dir,
            &opts,
            &mut versions,
            &cf_opts,
            FoundFiles {
                wals: &mut wals,
                tables: &on_disk_tables,
            },
            &blobs,
            &mut created,
        )
    };
    let persisted = match persisted {
        Ok(p) => {
            stats.wal_records_skipped.add(p.skipped);
            p
        }
        Err(e) => {
            let still_old = VersionSet::current_manifest(dir, fs.as_ref())
                .is_ok_and(|p| p == dir.join(filename::manifest_name(manifest_before)));
            if still_old {
                for path in &created {
                    let _ = fs.remove(path);
                }
            }
            return Err(e);
        }
    };
    let Persisted {
        last_seq,
        wal_number,
        wal_writer,
        redundant_tables,
        ..
    } = persisted;
    let kept_aside = if read_only {
        0
    } else {
        remove_obsolete_files(fs.as_ref(), dir, &versions, &redundant_tables, wal_number)?
    };
    stats.files_kept_aside.add(kept_aside);

    let db_id = NEXT_DB_ID.fetch_add(1, Ordering::Relaxed);
    let mut registry = Registry::default();
    let mut cf_states = Vec::new();
    for (&id, cf) in versions.column_families() {
        let o = cf_opts.remove(&id).unwrap_or_default();
        let data = Arc::new(ColumnFamilyData::new(
            db_id,
            id,
            cf.name.clone(),
            o,
            cf.current.clone(),
            blobs.current_epoch(),
        ));
        if let Some(mem) = recovered_mems.remove(&id) {
            data.install_recovered_memtable(mem);
        }
        registry.insert(data.clone());
        put_slot(&mut cf_states, id as usize, CfState::new(data));
    }
    let default_cf = registry
        .get(0)
        .cloned()
        .map(|data| ColumnFamily { data })
        .ok_or_else(|| Error::corruption(&manifest_path, "no default column family"))?;
    let memtable_budget = cf_states
        .iter()
        .flatten()
        .map(|cs| cs.data.memtable_budget())
        .sum();
    let mut tracker = CfTracker::default();
    for cs in cf_states.iter().flatten() {
        tracker.set_pressure(cs.data.id, cs.data.current_view().pressure);
    }
    let scheduler = Scheduler::new(opts.executor);
    let threads = opts.max_background_jobs;
    let inner = Arc::new(DbInner {
        id: db_id,
        dir: dir.to_path_buf(),
        appends_are_local: fs.appends_are_local(dir),
        wal_room_ahead: std::sync::atomic::AtomicBool::new(true),
        fs,
        stats,
        tables,
        block_cache,
        versions: Mutex::new(versions),
        registry: RwLock::new(registry),
        cf_admin: Mutex::new(()),
        default_cf,
        state: Mutex::new(State {
            cfs: cf_states,
            tracker,
            live_wals: if read_only {
                Vec::new()
            } else {
                vec![(wal_number, 0)]
            },
            current_wal: wal_number,
            wal_released_up_to: 0,
            memtable_budget,
            bg_error: None,
            flushes_running: 0,
        }),
        state_cv: Condvar::new(),
        last_sequence: AtomicU64::new(last_seq),
        snapshots: Arc::new(SnapshotList::default()),
        queue: Mutex::new(WriteQueue::default()),
        queue_cv: Condvar::new(),
        wal: Mutex::new(WalState {
            writer: wal_writer,
            number: wal_number,
            delayed_until: None,
            damaged_from: None,
            sync_failed: false,
        }),
        scheduler,
        compactions_running: Mutex::new(0),
        compaction_cv: Condvar::new(),
        deletions,
        blob_sync_failed: std::sync::atomic::AtomicBool::new(false),
        obsolete: Mutex::new(Vec::new()),
        unlogged_tables: Mutex::new(Vec::new()),
        blobs,
        blob_writers: Mutex::new(Default::default()),
        blob_threshold: AtomicU64::new(u64::MAX),
        blob_admin: Mutex::new(()),
        closed: AtomicBool::new(false),
        lock: Mutex::new(lock),
        reserve: DiskReserve::new(dir.to_path_buf(), opts.reserved_disk_bytes),
        read_only,
        catching_up: Mutex::new(super::catch_up::Since::open(if read_only {
            unsealed_blobs
        } else {
            Vec::new()
        })),
        pinned_views: RwLock::new(None),
        opts,
    });
    inner.update_blob_threshold();
    if read_only {
        let seq = inner.last_sequence.load(Ordering::Acquire);
        inner.pin_views(&inner.state.lock(), seq);
        return Ok(inner);
    }
    if inner.opts.share_with_group {
        // Only now that recovery proved this a store, and only its own files.
        let names: Vec<String> = inner
            .fs
            .list(dir)?
            .into_iter()
            .filter(|n| is_store_file(n))
            .collect();
        inner.fs.share_with_group(dir, &names)?;
    }
    inner.reserve.ensure(inner.fs.as_ref())?;
    inner.scheduler.start(threads, inner.clone())?;
    if let Some(deleter) = inner.scheduler.blob_deleter() {
        // A reader that lets go of a blob file's last view may be an async server's worker:
        // the pool removes the file, not that thread.
        inner.blobs.set_deleter(deleter);
    }
    for name in missing {
        let o = inner
            .opts
            .column_families
            .get(&name)
            .cloned()
            .unwrap_or_default();
        inner.create_cf(&name, o)?;
    }
    // Files that expired or became garbage while the store was closed go now.
    inner.blob_housekeeping_all()?;
    // A store reopened with too many L0 files (or oversized levels) starts compacting at once.
    for data in inner.registry.read().by_id.iter().flatten() {
        inner.scheduler.schedule_compaction(data);
    }
    Ok(inner)
}

/// What recovery made durable, or (read-only) holds in memory.
struct Persisted {
    last_seq: u64,
    /// Damaged WAL regions skipped.
    skipped: u64,
    wal_number: u64,
    wal_writer: Option<LogWriter>,
    /// Tables no edit names that were read and proven to hold nothing the live files do not.
    redundant_tables: HashSet<u64>,
}

/// The WALs to replay and the tables found in the store's directory.
struct FoundFiles<'a> {
    wals: &'a mut [u64],
    tables: &'a HashSet<u64>,
}

/// Replays the WALs into L0 tables, then starts a fresh WAL and a fresh MANIFEST that records the
/// recovered state and that every older WAL is obsolete (until CURRENT names it, a crash replays
/// the old WALs again). Every file it creates is pushed to `created`. Returns the last sequence
/// number, the damaged WAL regions skipped, the fresh WAL, and the unnamed tables proven
/// redundant.
fn replay_and_persist(
    dir: &Path,
    opts: &Options,
    versions: &mut VersionSet,
    cf_opts: &BTreeMap<u32, ColumnFamilyOptions>,
    found: FoundFiles<'_>,
    blobs: &BlobStore,
    created: &mut Vec<PathBuf>,
) -> Result<Persisted> {
    let FoundFiles {
        wals,
        tables: on_disk_tables,
    } = found;
    let (last_seq, skipped, wal_spans) = replay_wals(
        dir,
        opts,
        versions,
        cf_opts,
        wals,
        blobs,
        Replay::ToTables(created),
    )?;
    let redundant_tables = check_unnamed_tables(
        dir,
        opts.filesystem.as_ref(),
        versions,
        on_disk_tables,
        &wal_spans,
    )?;
    let wal_number = versions.new_file_number();
    let wal_path = wal_file(dir, wal_number);
    created.push(wal_path.clone());
    // The local disk maps it only where that is safe (`fs_kind::mapping_is_safe`).
    let wal_writer = LogWriter::new(
        opts.filesystem
            .create_sized(&wal_path, super::room::expected_wal_len(opts))?,
    );
    let ids: Vec<u32> = versions.column_families().keys().copied().collect();
    for id in ids {
        versions.apply_recovered(&VersionEdit {
            column_family: id,
            log_number: Some(wal_number),
            ..Default::default()
        })?;
    }
    // Every WAL from this open on is sealed when replaced; older ones were all replayed above.
    versions.set_sealed_wals_from(wal_number);
    versions.write_snapshot(last_seq)?;
    Ok(Persisted {
        last_seq,
        skipped,
        wal_number,
        wal_writer: Some(wal_writer),
        redundant_tables,
    })
}

/// A table on disk that no recovered edit names is deleted by the open only when the version set
/// shows it unneeded (`VersionSet::unnamed_table_is_unneeded`). One that may hold writes no other
/// file holds (the MANIFEST lost an edit: cut at a record boundary, or torn) fails the open with
/// `Corruption` naming the MANIFEST, before anything is deleted. One that cannot be read was
/// never finished (a finished table was synced before any edit named it) and is left to
/// `remove_obsolete_files`. Returns the unnamed tables it read (each proven redundant).
fn check_unnamed_tables(
    dir: &Path,
    fs: &dyn FileSystem,
    versions: &VersionSet,
    on_disk_tables: &HashSet<u64>,
    wal_spans: &[(u64, u64)],
) -> Result<HashSet<u64>> {
    let mut redundant = HashSet::new();
    let live: HashSet<u64> = versions.live_tables().collect();
    let manifest = dir.join(filename::manifest_name(versions.manifest_number()));
    for &n in on_disk_tables.iter().filter(|n| !live.contains(n)) {
        let path = filename::table_file(dir, n);
        let Ok(props) = crate::sst::read_properties(fs, &path, n) else {
            continue;
        };
        redundant.insert(n);
        if props.num_entries + props.num_range_deletions == 0
            || versions.unnamed_table_is_unneeded(
                n,
                props.column_family,
                (props.smallest_seq, props.largest_seq),
                wal_spans,
            )
        {
            continue;
        }
        return Err(Error::corruption(
            manifest,
            format!(
                "table {n} (sequence numbers {}..={}), which no record names, holds writes no \
                 live table holds: the MANIFEST lost an edit that had been made durable \
                 (`strata repair` rebuilds it from the files)",
                props.smallest_seq, props.largest_seq
            ),
        ));
    }
    Ok(redundant)
}

/// What data files `dir` holds when it has no CURRENT (`None` when none could hold data): tables,
/// blob files, WALs that are not empty. A MANIFEST alone is what a crash during a store's creation
/// leaves, so it does not count.
fn data_files_without_current(fs: &dyn FileSystem, dir: &Path) -> Result<Option<String>> {
    if !fs.exists(dir) {
        return Ok(None);
    }
    let (mut tables, mut blob_files, mut wals) = (0, 0, 0);
    for name in fs.list(dir)? {
        match filename::parse(&name) {
            FileKind::Table(_) => tables += 1,
            FileKind::Blob(_) => blob_files += 1,
            FileKind::Wal(_) if !crate::wal::holds_no_record(fs, &dir.join(&name))? => wals += 1,
            _ => {}
        }
    }
    let counts = [
        (tables, "table"),
        (blob_files, "blob file"),
        (wals, "WAL file"),
    ];
    let found: Vec<String> = counts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}{}", if *n == 1 { "" } else { "s" }))
        .collect();
    Ok((!found.is_empty()).then(|| found.join(", ")))
}

/// Deletes WALs older than `wal_number`, superseded MANIFESTs, temp files, and tables and blob
/// files no version names (left by a flush or compaction that crashed before its MANIFEST edit).
/// After a MANIFEST whose last record was cut short (`recovered_torn_tail`), a table or blob file no
/// surviving edit names may be the lost edit's, so it is not deleted but moved to `lost/`.
/// Returns how many files were moved there.
fn remove_obsolete_files(
    fs: &dyn FileSystem,
    dir: &Path,
    versions: &VersionSet,
    redundant_tables: &HashSet<u64>,
    wal_number: u64,
) -> Result<u64> {
    let live_tables: HashSet<u64> = versions.live_tables().collect();
    let live_blobs: HashSet<u64> = versions
        .column_families()
        .values()
        .flat_map(|cf| cf.blob_files.keys().copied())
        .collect();
    let manifest_number = versions.manifest_number();
    let torn_tail = versions.recovered_torn_tail();
    let mut kept_aside = 0;
    for name in fs.list(dir)? {
        let (obsolete, data) = match filename::parse(&name) {
            FileKind::Wal(n) => (n < wal_number, false),
            FileKind::Table(n) => (!live_tables.contains(&n), true),
            FileKind::Blob(n) => (!live_blobs.contains(&n), true),
            FileKind::Manifest(n) => (n != manifest_number, false),
            FileKind::Temp => (true, false),
            FileKind::Other => (false, false),
        };
        if !obsolete {
            continue;
        }
        // A table `check_unnamed_tables` let through holds nothing the live files do not; one it
        // could not read, and a blob file, may still be the lost edit's.
        let redundant =
            matches!(filename::parse(&name), FileKind::Table(n) if redundant_tables.contains(&n));
        if data && torn_tail && !redundant {
            let lost = dir.join(LOST_DIR);
            fs.create_dir_all(&lost)?;
            fs.rename(&dir.join(&name), &lost.join(&name))?;
            fs.sync_dir(&lost)?;
            fs.sync_dir(dir)?;
            kept_aside += 1;
        } else {
            fs.remove(&dir.join(&name))?;
        }
    }
    Ok(kept_aside)
}

/// Opens every blob file the MANIFEST names: the footer of a sealed one, a scan of one a crash
/// left unsealed (its intact prefix is what it holds). A file that is missing or whose header is
/// damaged fails the open with `Corruption`. `paranoid` also reads every record of the sealed ones.
/// Returns the files found unsealed: a writer beside a read-only store may still be appending
/// to them (`catch_up.rs` reads them again).
pub(super) fn recover_blob_files(
    versions: &VersionSet,
    blobs: &BlobStore,
    stats: &Stats,
    paranoid: bool,
    read_only: bool,
) -> Result<Vec<u64>> {
    let mut unsealed = Vec::new();
    for (&cf, data) in versions.column_families() {
        for (&number, &garbage) in &data.blob_files {
            if blobs.get(number).is_some() {
                // Known already (a read-only store catching up).
                continue;
            }
            let path = blobs.path(number);
            let reader = BlobFileReader::open(blobs.filesystem(), &path).map_err(|e| match e {
                Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                    Error::corruption(&path, "blob file named by the MANIFEST is missing")
                }
                other => other,
            })?;
            let found = reader.recover()?;
            if paranoid && found.sealed {
                reader.verify_sealed(&found)?;
            }
            if found.torn_bytes > 0 {
                stats.blob_torn_files.inc();
            }
            if !found.sealed {
                unsealed.push(number);
            }
            if found.spare_bytes > 0 && !read_only {
                // Or every later open would read the zeros again (up to `blob_file_size`).
                blobs.filesystem().truncate(&path, found.file_size)?;
            }
            blobs.insert(Arc::new(BlobFile::new(
                number,
                cf,
                found.header.ttl_range,
                BlobFileMeta {
                    footer: found.footer,
                    file_size: found.file_size,
                    garbage_bytes: garbage,
                    borrowed_bytes: data.blob_borrowed.get(&number).copied().unwrap_or(0),
                    state: BlobFileState::Sealed,
                },
            )));
        }
        for &number in data.evicted_blob_files.keys() {
            blobs.mark_evicted(number);
        }
    }
    Ok(unsealed)
}

/// Whether `name` is one of the files a store keeps in its directory (what sharing opens to the
/// group; a token file or anything else a user keeps there is not).
fn is_store_file(name: &str) -> bool {
    matches!(
        filename::parse(name),
        FileKind::Table(_) | FileKind::Wal(_) | FileKind::Blob(_) | FileKind::Manifest(_)
    ) || [CURRENT, LOCK, super::reserve::RESERVE].contains(&name)
}
