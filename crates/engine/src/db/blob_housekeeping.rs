//! Blob file housekeeping: the garbage flushes and compactions find, which files garbage
//! collection relocates values out of, and the passes that expire TTL files, delete files with no
//! live value left, and evict whole files past a column family's size limit (FIFO), announcing
//! each deletion to listeners.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::DbInner;
use super::column_family::ColumnFamilyData;
use crate::blob::{BlobFile, BlobFileState, BlobGarbage};
use crate::error::Result;
use crate::events::{BlobDeletionReason, BlobFilesDeletedInfo};
use crate::version::VersionEdit;

impl DbInner {
    /// Accounts garbage a logged flush or compaction found.
    pub(super) fn apply_blob_garbage(&self, garbage: &BlobGarbage) {
        if !garbage.is_empty() {
            self.blobs.add_garbage(garbage);
        }
    }

    /// The blob files of column family `cf` that garbage collection relocates values out of: the
    /// oldest `blob_garbage_collection_age_cutoff` of its sealed files without TTL.
    pub(super) fn gc_candidates(&self, cf: &ColumnFamilyData) -> Vec<u64> {
        if !cf.opts.enable_blob_garbage_collection {
            return Vec::new();
        }
        // Files by number, oldest first; retired ones no longer count.
        let files: Vec<Arc<BlobFile>> = self
            .blobs
            .files_of(cf.id)
            .into_iter()
            .filter(|f| {
                f.ttl_range.is_none()
                    && matches!(f.state(), BlobFileState::Open | BlobFileState::Sealed)
            })
            .collect();
        let n = (files.len() as f64 * cf.opts.blob_garbage_collection_age_cutoff) as usize;
        files
            .iter()
            .take(n)
            .filter(|f| f.state() == BlobFileState::Sealed)
            .map(|f| f.number)
            .collect()
    }

    /// Housekeeping for every column family.
    pub(super) fn blob_housekeeping_all(&self) -> Result<()> {
        let cfs: Vec<Arc<ColumnFamilyData>> = self
            .registry
            .read()
            .by_id
            .iter()
            .flatten()
            .cloned()
            .collect();
        for cf in cfs {
            self.blob_housekeeping(&cf)?;
        }
        Ok(())
    }

    /// Drops column family `cf`'s blob files that are wholly expired or wholly garbage, then
    /// evicts its oldest ones while it is over `max_db_size`. Each change is logged to the
    /// MANIFEST before it takes effect.
    pub(super) fn blob_housekeeping(&self, cf: &Arc<ColumnFamilyData>) -> Result<()> {
        match self.housekeep_blob_files(cf) {
            // Dropped meanwhile: its blob files go with it, nothing is left to keep.
            Err(_) if cf.is_dropped() => Ok(()),
            done => done,
        }
    }

    fn housekeep_blob_files(&self, cf: &Arc<ColumnFamilyData>) -> Result<()> {
        if cf.is_dropped() {
            return Ok(());
        }
        let _one = self.blob_admin.lock();
        let now = self.now();
        self.seal_expired_writers(cf.id, now)?;
        let files = self.blobs.files_of(cf.id);
        let mut expired = Vec::new();
        let mut garbage = Vec::new();
        for f in &files {
            let m = *f.meta.lock();
            if m.state != BlobFileState::Sealed || f.pending_writes.load(Ordering::Acquire) > 0 {
                continue;
            }
            let max_exp = m.footer.expiration_range.1;
            if f.ttl_range.is_some() && max_exp != 0 && now >= max_exp && m.footer.records > 0 {
                expired.push(f.number);
            } else if m.garbage_bytes >= m.referenced_bytes() {
                garbage.push(f.number);
            }
        }
        let mut retired = false;
        if !expired.is_empty() || !garbage.is_empty() {
            let edit = VersionEdit {
                column_family: cf.id,
                blob_files_deleted: expired.iter().chain(&garbage).copied().collect(),
                ..Default::default()
            };
            self.log_cf_edit(edit)?;
            self.stats.blob_files_expired.add(expired.len() as u64);
            self.stats.blob_gc_files_obsolete.add(garbage.len() as u64);
            self.blobs.retire(&expired, BlobFileState::Obsolete);
            self.blobs.retire(&garbage, BlobFileState::Obsolete);
            retired = true;
            for (reason, numbers) in [
                (BlobDeletionReason::Expired, &expired),
                (BlobDeletionReason::Garbage, &garbage),
            ] {
                self.announce_blob_deletion(cf, reason, &files, numbers);
            }
        }
        if cf.opts.max_db_size > 0 {
            retired |= self.evict_while_over_limit(cf)?;
        }
        if retired {
            self.reinstall_all_views();
        }
        Ok(())
    }

    /// Seals the open TTL files of column family `cf` whose every record has expired, so that
    /// they can go whole; later writes of their bucket start a new file.
    fn seal_expired_writers(&self, cf: u32, now: u64) -> Result<()> {
        let done = self.take_blob_writers(|(id, bucket), ow| {
            let max_exp = ow.writer.footer().expiration_range.1;
            *id == cf && bucket.is_some() && max_exp != 0 && now >= max_exp
        });
        self.seal_blob_writers(done)
    }

    pub(super) fn log_cf_edit(&self, edit: VersionEdit) -> Result<()> {
        let last_seq = self.last_sequence.load(Ordering::Acquire);
        self.versions.lock().log_and_apply(edit, last_seq)
    }

    /// Live bytes of column family `cf`: its tables plus its blob files not yet retired.
    pub(super) fn cf_live_bytes(&self, cf: &ColumnFamilyData) -> u64 {
        let version = cf.current_view().version.clone();
        let tables: u64 = version.levels.iter().flatten().map(|f| f.file_size).sum();
        let blobs: u64 = self
            .blobs
            .files_of(cf.id)
            .iter()
            .map(|f| *f.meta.lock())
            .filter(|m| matches!(m.state, BlobFileState::Open | BlobFileState::Sealed))
            .map(|m| m.file_size)
            .sum();
        tables + blobs
    }

    /// FIFO eviction: the oldest blob files go, those with a TTL first (earliest expiration
    /// first), then the others oldest first, until the column family fits `max_db_size`. Only
    /// the first file in that order ever goes, so what is evicted is always the oldest data:
    /// - a first file still being written is sealed here, then evicted; so is a full one
    ///   waiting for its seal with no background threads. With them, the flush job seals it
    ///   and runs housekeeping after: its sync stays off the writes that filled it;
    /// - a first file with writes in flight stops the eviction until the next housekeeping (the
    ///   next file filled, flush or compaction): the store passes its limit by at most the files
    ///   those writes hold. Evicting a newer file meanwhile would leave older keys readable and
    ///   newer ones gone.
    fn evict_while_over_limit(&self, cf: &ColumnFamilyData) -> Result<bool> {
        let mut evicted_any = false;
        while self.cf_live_bytes(cf) > cf.opts.max_db_size {
            let first = self
                .blobs
                .files_of(cf.id)
                .into_iter()
                .filter(|f| matches!(f.state(), BlobFileState::Open | BlobFileState::Sealed))
                .min_by_key(|f| {
                    // An open file's last expiration is its records' so far, as a sealed one's.
                    let no_ttl = f.ttl_range.is_none();
                    let exp = if no_ttl {
                        0
                    } else {
                        f.meta.lock().footer.expiration_range.1
                    };
                    (no_ttl, exp, f.number)
                });
            let Some(victim) = first else {
                break;
            };
            // Checked before any seal: a seal would not make the file evictable sooner.
            if victim.pending_writes.load(Ordering::Acquire) != 0 {
                break;
            }
            if victim.state() == BlobFileState::Open {
                // A seal leaves the file sealed (even a failed one), so it is evicted next.
                if !self.seal_blob_file_now(victim.number)? {
                    break;
                }
                continue;
            }
            let edit = VersionEdit {
                column_family: cf.id,
                blob_files_evicted: vec![(
                    victim.number,
                    self.last_sequence.load(Ordering::Acquire),
                )],
                ..Default::default()
            };
            self.log_cf_edit(edit)?;
            let m = *victim.meta.lock();
            self.blobs.mark_evicted(victim.number);
            self.blobs.retire(&[victim.number], BlobFileState::Evicted);
            self.announce_blob_deletion(
                cf,
                BlobDeletionReason::Evicted,
                std::slice::from_ref(&victim),
                &[victim.number],
            );
            self.stats.blob_fifo_evicted_files.inc();
            self.stats.blob_fifo_evicted_keys.add(m.footer.records);
            self.stats.blob_fifo_evicted_bytes.add(m.file_size);
            evicted_any = true;
        }
        Ok(evicted_any)
    }

    /// Tells the listeners that `numbers` (among `files`) left the store for `reason`.
    fn announce_blob_deletion(
        &self,
        cf: &ColumnFamilyData,
        reason: BlobDeletionReason,
        files: &[Arc<BlobFile>],
        numbers: &[u64],
    ) {
        if numbers.is_empty() || self.opts.listeners.is_empty() {
            return;
        }
        let mut info = BlobFilesDeletedInfo {
            column_family: cf.name.clone(),
            reason,
            files: numbers.to_vec(),
            records: 0,
            bytes: 0,
        };
        for f in files.iter().filter(|f| numbers.contains(&f.number)) {
            let m = *f.meta.lock();
            info.records += m.footer.records;
            info.bytes += m.file_size;
        }
        for l in &self.opts.listeners {
            l.on_blob_files_deleted(&info);
        }
    }

    /// Installs a fresh read view for every column family, so that each joins the current blob
    /// epoch and older epochs can end.
    pub(super) fn reinstall_all_views(&self) {
        let mut st = self.state.lock();
        let ids: Vec<u32> = st.cfs.iter().flatten().map(|cs| cs.data.id).collect();
        for id in ids {
            self.install_view(&mut st, id);
        }
    }
}
