//! Replaying WAL files at open: every record newer than its column family's last flush goes into
//! a memtable, which becomes an L0 table when it fills and at the end (or, for a read-only open,
//! stays in memory). Damaged regions are skipped as `WalRecovery` allows, and a write whose blob
//! file is gone is caught before it is applied.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::WriteBatch;
use super::column_family::new_memtable;
use super::flush::write_level0_table;
use super::write::apply_to_memtable;
use crate::blob::{BlobGarbage, BlobStore};
use crate::error::{Error, Result};
use crate::filename::{self, wal_file};
use crate::memtable::MemTable;
use crate::options::{ColumnFamilyOptions, Options, WalRecovery};
use crate::sst::TableOptions;
use crate::version::{VersionEdit, VersionSet};
use crate::wal::{LogReader, ReadOutcome, SealChain, decode_seal};

/// Where replayed WAL records go: L0 tables (their paths pushed as they are created), or, for a
/// read-only open, memtables kept in memory (one per column family, never flushed).
pub(super) enum Replay<'a> {
    ToTables(&'a mut Vec<PathBuf>),
    /// Into memtables, for a read-only store. The map's memtables, where it has them, already
    /// hold every record through sequence `after` (a catch-up that saw no flush): those records
    /// are read past, and the rest added to them.
    IntoMemory {
        mems: &'a mut BTreeMap<u32, Arc<MemTable>>,
        after: u64,
    },
}

/// Sequence-number ranges, each `(first, last)` inclusive.
pub(super) type SeqSpans = Vec<(u64, u64)>;

/// Replays the WAL files, newest data last, into one memtable per column family, flushing each to
/// L0 whenever it fills and at the end; also returns, per WAL, the sequence numbers its records
/// span. A record is skipped when its column family was dropped or
/// had already flushed that WAL. Returns the last sequence number seen and the damaged regions
/// skipped.
pub(super) fn replay_wals(
    dir: &Path,
    opts: &Options,
    versions: &mut VersionSet,
    cf_opts: &BTreeMap<u32, ColumnFamilyOptions>,
    wals: &mut [u64],
    blobs: &BlobStore,
    into: Replay<'_>,
) -> Result<(u64, u64, SeqSpans)> {
    let (mut created, memory) = match into {
        Replay::ToTables(created) => (Some(created), None),
        Replay::IntoMemory { mems, after } => (None, Some((mems, after))),
    };
    // Only a catch-up's memtables hold records already (`after` past 0).
    let applied_through = memory.as_ref().map(|(_, after)| *after).filter(|&a| a > 0);
    let fs = opts.filesystem.as_ref();
    // Per WAL, the sequence numbers its records span.
    let mut spans: Vec<(u64, u64)> = Vec::new();
    let mut span_of: Option<u64> = None;
    wals.sort_unstable();
    let mut last_seq = versions.last_sequence();
    let log_numbers: BTreeMap<u32, u64> = versions
        .column_families()
        .iter()
        .map(|(&id, cf)| (id, cf.log_number))
        .collect();
    let highest_id = versions.next_column_family_id() - 1;
    let mut mems: BTreeMap<u32, Arc<MemTable>> = cf_opts
        .iter()
        .map(|(&id, o)| {
            let held = memory.as_ref().and_then(|(m, _)| m.get(&id).cloned());
            (id, held.unwrap_or_else(|| new_memtable(o, 0)))
        })
        .collect();
    let mut edits: BTreeMap<u32, VersionEdit> = BTreeMap::new();
    let mut flush = |versions: &mut VersionSet,
                     edits: &mut BTreeMap<u32, VersionEdit>,
                     id: u32,
                     mem: &Arc<MemTable>|
     -> Result<()> {
        let o = &cf_opts[&id];
        let n = versions.new_file_number();
        if let Some(created) = created.as_mut() {
            created.push(filename::table_file(dir, n));
        }
        let table_opts = TableOptions::from_options(o, id);
        let mut garbage = BlobGarbage::new();
        let meta = write_level0_table(fs, dir, n, mem, &table_opts, &[], &mut garbage)?;
        let edit = edits.entry(id).or_insert_with(|| VersionEdit {
            column_family: id,
            ..Default::default()
        });
        if let Some(meta) = meta {
            edit.new_files.push((0, meta));
        }
        edit.blob_garbage.extend(garbage);
        edit.blob_refs_added.extend(mem.borrowed());
        Ok(())
    };
    let mode = match opts.wal_recovery {
        WalRecovery::TolerateTornTail => ReadOutcome::FailOnMidLogDamage,
        WalRecovery::SkipCorrupted => ReadOutcome::SkipDamage,
    };
    let mut skipped = 0u64;
    // An empty WAL holds nothing (a crash right after a rotation created it): the newest WAL that
    // counts is the newest with a record, and only it may end in a cut or without a seal.
    let mut files = Vec::with_capacity(wals.len());
    for &number in wals.iter() {
        files.push((
            number,
            crate::wal::holds_no_record(fs, &wal_file(dir, number))?,
        ));
    }
    let nonempty: Vec<u64> = files.iter().filter(|f| !f.1).map(|f| f.0).collect();
    let strict = mode == ReadOutcome::FailOnMidLogDamage;
    let mut chain = SealChain::new(dir, versions.sealed_wals_from(), strict);
    let max_log_number = log_numbers.values().copied().max().unwrap_or(0);
    'wals: for &number in &nonempty {
        let path = wal_file(dir, number);
        let newest = nonempty.last() == Some(&number);
        skipped += chain.enter(number)?;
        let data = crate::wal::read_log(fs, &path)?;
        let mut reader = LogReader::new(&data, &path, mode).reading_a_wal();
        while let Some(record) = reader.next_record()? {
            if let Some(next) = decode_seal(&record) {
                chain.seal(&path, next)?;
                continue;
            }
            chain.check_open(&path)?;
            let batch = WriteBatch::from_bytes(record).ok_or_else(|| {
                Error::corruption(&path, "WAL record shorter than a batch header")
            })?;
            // Only records replay applies matter: those of live column families not yet flushed.
            let applies = |cf: u32| log_numbers.get(&cf).is_some_and(|&log| number >= log);
            let now = opts.clock.now_secs();
            if let Some(file) = missing_blob(&batch, blobs, &path, applies, now)? {
                // Blob files are synced with the WAL when a newer WAL replaces it, which a seal
                // or a column family's log number past this WAL shows.
                let replaced = !newest || number < max_log_number || seal_follows(&mut reader)?;
                if replaced {
                    return Err(Error::corruption(
                        blobs.path(file),
                        format!(
                            "{} points past its end, and was synced when that WAL was closed: \
                             the blob file is damaged (`strata repair` keeps it aside)",
                            path.display()
                        ),
                    ));
                }
                // The write's blob record did not survive (a crash before its blob file was
                // synced): it was never synced itself, so neither was anything after it.
                skipped += 1;
                break 'wals;
            }
            let mut seq = batch.sequence();
            let through = seq.saturating_add(batch.len() as u64).saturating_sub(1);
            if !batch.is_empty() && applied_through.is_some_and(|a| through <= a) {
                // In the memtables already: a catch-up adds only what is new.
                last_seq = last_seq.max(through);
                continue;
            }
            let mut unknown_cf = None;
            let mut touched: Vec<u32> = Vec::new();
            batch
                .for_each(|r| {
                    if !touched.contains(&r.cf) {
                        touched.push(r.cf);
                    }
                    match (mems.get(&r.cf), log_numbers.get(&r.cf)) {
                        (Some(mem), Some(&log)) if number >= log => {
                            blobs.add_borrowed(&apply_to_memtable(mem, seq, &r))
                        }
                        // Flushed before the crash, or dropped.
                        (Some(_), Some(_)) => {}
                        _ if r.cf <= highest_id => {}
                        _ => unknown_cf = Some(r.cf),
                    }
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
            if seq > batch.sequence() {
                let (first, last) = (batch.sequence(), seq - 1);
                match spans.last_mut() {
                    Some(span) if span_of == Some(number) => {
                        *span = (span.0.min(first), span.1.max(last));
                    }
                    _ => spans.push((first, last)),
                }
                span_of = Some(number);
            }
            for cf in touched {
                let Some(mem) = mems.get(&cf) else { continue };
                if memory.is_none() && mem.memory_usage() >= cf_opts[&cf].write_buffer_size {
                    let full = mem.clone();
                    flush(versions, &mut edits, cf, &full)?;
                    mems.insert(cf, new_memtable(&cf_opts[&cf], 0));
                }
            }
        }
        skipped += reader.skipped_regions as u64;
        if reader.torn_tail_bytes > 0 && !newest && mode == ReadOutcome::FailOnMidLogDamage {
            // A log is synced when a newer one replaces it: only the newest can be torn.
            return Err(Error::corruption(
                &path,
                format!(
                    "the last {} bytes are cut short, but a newer WAL follows it, and a WAL is \
                     synced whole before the next one starts: damage, not a crash \
                     (`strata repair` replays around it)",
                    reader.torn_tail_bytes
                ),
            ));
        }
        if let (Some(why), ReadOutcome::FailOnMidLogDamage) = (reader.tail_damage, mode) {
            // A crash leaves the end of a log cut short or zeroed, never wrong: the records
            // there were written whole, and may have been acknowledged as synced.
            return Err(Error::corruption(
                &path,
                format!(
                    "{why} in the last {} bytes: damage, not a write cut short by a crash \
                     (WalRecovery::SkipCorrupted skips it; `strata repair` replays around it)",
                    reader.torn_tail_bytes
                ),
            ));
        }
    }
    skipped += chain.finish(&files, max_log_number)?;
    if let Some((memory, _)) = memory {
        *memory = mems;
        return Ok((last_seq, skipped, spans));
    }
    for (&id, mem) in &mems {
        flush(versions, &mut edits, id, mem)?;
    }
    for edit in edits.values() {
        versions.apply_recovered(edit)?;
    }
    Ok((last_seq, skipped, spans))
}

/// Whether a seal is among the records `reader` has left.
fn seal_follows(reader: &mut LogReader<'_>) -> Result<bool> {
    while let Some(record) = reader.next_record()? {
        if decode_seal(&record).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The first blob index of `batch` (among records `applies` says replay applies) pointing past what
/// its blob file holds, if any. An index into an evicted file, or an expired one whose file expired
/// whole, is fine (it reads as absent); one into a file the MANIFEST does not know otherwise is
/// corruption.
fn missing_blob(
    batch: &WriteBatch,
    blobs: &BlobStore,
    wal: &Path,
    applies: impl Fn(u32) -> bool,
    now: u64,
) -> Result<Option<u64>> {
    let mut missing = None;
    let mut unknown = None;
    batch
        .for_each_blob_index(|cf, index| {
            if missing.is_some() || !applies(cf) {
                return;
            }
            for blob in index.records() {
                match blobs.get(blob.file) {
                    Some(f) => {
                        let m = *f.meta.lock();
                        let end = crate::blob::records_end(&m.footer);
                        if blob.offset.saturating_add(blob.size) > end {
                            missing = Some(blob.file);
                        }
                    }
                    None if blobs.is_evicted(blob.file) || index.is_expired(now) => {}
                    None => unknown = Some(blob.file),
                }
            }
        })
        .map_err(|d| Error::corruption(wal, d))?;
    if let Some(n) = unknown {
        return Err(Error::corruption(
            wal,
            format!("a write points into blob file {n}, which the MANIFEST does not know"),
        ));
    }
    Ok(missing)
}
