//! Opening a store: lock the directory, replay the MANIFEST, replay WAL files newer than the last
//! flush into L0 tables, write a fresh MANIFEST and WAL, delete what is obsolete.

use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use parking_lot::{Condvar, Mutex, RwLock};

use super::background::Scheduler;
use super::compact::CompactionState;
use super::flush::write_level0_table;
use super::snapshot::SnapshotList;
use super::write::{Pressure, WalState, WriteQueue};
use super::{DbInner, State, SuperVersion};
use crate::batch::WriteBatch;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::filename::{self, CURRENT, FileKind, LOCK, wal_file};
use crate::fs::FileSystem;
use crate::memtable::MemTable;
use crate::options::{Options, WalRecovery};
use crate::sst::{TableCache, TableOptions};
use crate::stats::Stats;
use crate::version::{VersionEdit, VersionSet};
use crate::wal::{LogReader, LogWriter, ReadOutcome};

pub(super) fn open(dir: &Path, opts: Options) -> Result<Arc<DbInner>> {
    opts.validate()?;
    let fs = opts.filesystem.clone();
    if !fs.exists(dir) {
        if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} does not exist (create_if_missing is false)",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)?;
    }
    let lock = fs.lock(&dir.join(LOCK))?;
    let stats = Arc::new(Stats::default());
    let block_cache = (opts.cache_size > 0).then(|| Arc::new(BlockCache::new(opts.cache_size, 4)));
    let tables = Arc::new(TableCache::new(
        dir.to_path_buf(),
        fs.clone(),
        opts.max_open_files,
        block_cache.clone(),
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
        if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} holds no store",
                dir.display()
            )));
        }
        let mut v = VersionSet::new_empty(dir, fs.clone());
        v.write_snapshot(0)?;
        v
    };

    let names = fs.list(dir)?;
    let mut wals = Vec::new();
    let mut on_disk_tables = HashSet::new();
    for name in &names {
        match filename::parse(name) {
            FileKind::Wal(n) => {
                versions.mark_file_number_used(n);
                if n >= versions.log_number() {
                    wals.push(n);
                }
            }
            FileKind::Table(n) => {
                versions.mark_file_number_used(n);
                on_disk_tables.insert(n);
            }
            FileKind::Manifest(n) => versions.mark_file_number_used(n),
            _ => {}
        }
    }
    let current = versions.current();
    for f in current.levels.iter().flatten() {
        if !on_disk_tables.contains(&f.number) {
            return Err(Error::corruption(
                filename::table_file(dir, f.number),
                "table named by the MANIFEST is missing",
            ));
        }
    }
    if opts.paranoid_checks {
        for f in current.levels.iter().flatten() {
            tables.get(f.number)?.verify()?;
        }
    }

    // Replay the WAL files, newest data last, flushing to L0 whenever a memtable fills.
    wals.sort_unstable();
    let table_opts = TableOptions::from_options(&opts);
    let mut last_seq = versions.last_sequence();
    let mut edit = VersionEdit::default();
    let mut mem = Arc::new(MemTable::new(
        0,
        opts.write_buffer_size,
        opts.memtable_bloom_ratio(),
    ));
    let mode = match opts.wal_recovery {
        WalRecovery::TolerateTornTail => ReadOutcome::FailOnMidLogDamage,
        WalRecovery::SkipCorrupted => ReadOutcome::SkipDamage,
    };
    for &number in &wals {
        let path = wal_file(dir, number);
        let data = fs.read_all(&path)?;
        let mut reader = LogReader::new(&data, &path, mode);
        while let Some(record) = reader.next_record()? {
            let batch = WriteBatch::from_bytes(record).ok_or_else(|| {
                Error::corruption(&path, "WAL record shorter than a batch header")
            })?;
            let mut seq = batch.sequence();
            let mut unknown_cf = None;
            batch
                .for_each(|r| {
                    if r.cf != 0 {
                        unknown_cf = Some(r.cf);
                    }
                    mem.add(seq, r.kind, r.key, r.value);
                    seq += 1;
                })
                .map_err(|d| Error::corruption(&path, d))?;
            if let Some(cf) = unknown_cf {
                return Err(Error::corruption(
                    &path,
                    format!("write for unknown column family {cf}"),
                ));
            }
            last_seq = last_seq.max(seq.saturating_sub(1));
            if mem.memory_usage() >= opts.write_buffer_size {
                let n = versions.new_file_number();
                if let Some(meta) = write_level0_table(fs.as_ref(), dir, n, &mem, &table_opts)? {
                    edit.new_files.push((0, meta));
                }
                mem = Arc::new(MemTable::new(
                    0,
                    opts.write_buffer_size,
                    opts.memtable_bloom_ratio(),
                ));
            }
        }
        stats.wal_records_skipped.add(reader.skipped_regions as u64);
    }
    let n = versions.new_file_number();
    if let Some(meta) = write_level0_table(fs.as_ref(), dir, n, &mem, &table_opts)? {
        edit.new_files.push((0, meta));
    }

    // A fresh WAL, then a fresh MANIFEST recording the recovered tables and that every older WAL is
    // obsolete. Until CURRENT names the new MANIFEST, a crash replays the old WALs again.
    let wal_number = versions.new_file_number();
    let wal_path = wal_file(dir, wal_number);
    let wal_writer = LogWriter::new(fs.create(&wal_path)?);
    edit.log_number = Some(wal_number);
    versions.apply_recovered(&edit);
    versions.write_snapshot(last_seq)?;
    let live: HashSet<u64> = versions
        .current()
        .levels
        .iter()
        .flatten()
        .map(|f| f.number)
        .collect();
    remove_obsolete_files(
        fs.as_ref(),
        dir,
        &live,
        wal_number,
        versions.manifest_number(),
    )?;

    let mem = Arc::new(MemTable::new(
        wal_number,
        opts.write_buffer_size,
        opts.memtable_bloom_ratio(),
    ));
    let version = versions.current();
    let view = SuperVersion {
        mem: mem.clone(),
        imm: Vec::new(),
        pressure: Pressure::of(&version, &opts),
        version,
    };
    let scheduler = Scheduler::new(opts.executor);
    let threads = opts.max_background_jobs;
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        fs,
        stats,
        tables,
        block_cache,
        versions: Mutex::new(versions),
        state: Mutex::new(State {
            mem,
            imm: VecDeque::new(),
            live_wals: vec![wal_number],
            bg_error: None,
            flush_running: false,
        }),
        state_cv: Condvar::new(),
        view: RwLock::new(Arc::new(view)),
        last_sequence: AtomicU64::new(last_seq),
        snapshots: Arc::new(SnapshotList::default()),
        queue: Mutex::new(WriteQueue::default()),
        queue_cv: Condvar::new(),
        wal: Mutex::new(WalState {
            writer: Some(wal_writer),
            number: wal_number,
            delayed_until: None,
        }),
        scheduler,
        compaction: Mutex::new(CompactionState::default()),
        compaction_cv: Condvar::new(),
        obsolete: Mutex::new(Vec::new()),
        level_stats: Default::default(),
        closed: AtomicBool::new(false),
        lock: Mutex::new(Some(lock)),
        opts,
    });
    inner.scheduler.start(threads, inner.clone())?;
    // A store reopened with too many L0 files (or oversized levels) starts compacting at once.
    inner.scheduler.request_compaction();
    Ok(inner)
}

/// Deletes WALs older than `wal_number`, superseded MANIFESTs, temp files, and tables no version
/// names (left by a flush that crashed before its MANIFEST edit).
fn remove_obsolete_files(
    fs: &dyn FileSystem,
    dir: &Path,
    live_tables: &HashSet<u64>,
    wal_number: u64,
    manifest_number: u64,
) -> Result<()> {
    for name in fs.list(dir)? {
        let obsolete = match filename::parse(&name) {
            FileKind::Wal(n) => n < wal_number,
            FileKind::Table(n) => !live_tables.contains(&n),
            FileKind::Manifest(n) => n != manifest_number,
            FileKind::Temp => true,
            FileKind::Other => false,
        };
        if obsolete {
            fs.remove(&dir.join(&name))?;
        }
    }
    Ok(())
}
