//! The database's side of the blob store: separating large values as they are written, and
//! opening, syncing and sealing the files they go to (see `blob_housekeeping.rs` for expiring,
//! collecting and evicting whole files, and `crate::blob` for the files themselves).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use super::DbInner;
use super::batch::{Op, WriteBatch};
use super::column_family::ColumnFamilyData;
use super::value_file::ValueFile;
use crate::blob::format::FOOTER_SIZE;
use crate::blob::{
    BlobFile, BlobFileMeta, BlobFileState, BlobFileWriter, BlobFooter, BlobHeader, BlobIndex,
    BlobRef, HEADER_SIZE, RECORD_HEADER_SIZE, chunked_record_header, encode_blob,
};
use crate::error::{Error, Result};
use crate::fs::PositionalFile;
use crate::key::ValueKind;
use crate::options::{Compression, Executor};
use crate::version::VersionEdit;

/// Which open blob file a value goes to: its column family and, for values with a TTL, the
/// expiration bucket.
type WriterKey = (u32, Option<(u64, u64)>);

/// A blob file being appended to by the write path.
#[derive(Debug)]
pub(crate) struct OpenBlobWriter {
    pub(super) writer: BlobFileWriter,
    file: Arc<BlobFile>,
    /// Appended to since the last sync.
    dirty: bool,
}

impl OpenBlobWriter {
    fn sync_if_dirty(&mut self) -> Result<()> {
        if self.dirty {
            self.writer.sync()?;
            self.dirty = false;
        }
        Ok(())
    }
}

/// Value files adopted by unsynced writes kept open for the sync that must come before their
/// indexes are durable. Past this many they are synced and closed, so a writer that never syncs
/// (a mount spilling many files) does not run out of descriptors.
const MAX_ADOPTED_OPEN: usize = 64;

/// The write path's open blob files.
#[derive(Debug, Default)]
pub(crate) struct BlobWriters {
    pub(super) open: HashMap<WriterKey, OpenBlobWriter>,
    /// Files given up after a failed append, whose earlier records may back acknowledged writes:
    /// kept until a sync makes those durable.
    abandoned: Vec<OpenBlobWriter>,
    /// Value files adopted by unsynced writes (`db::value_file`): synced, like the open files,
    /// before anything makes their indexes durable.
    adopted: Vec<Arc<dyn PositionalFile>>,
    /// Full files waiting for a background job to write their footer (a seal syncs the whole
    /// file, which must not stall the write that filled it). Until sealed, a sync covers them too.
    sealing: Vec<SealingWriter>,
}

impl BlobWriters {
    /// Hands the records appended to every open file to the OS (a process crash keeps them).
    pub(super) fn flush_dirty(&mut self) -> Result<()> {
        first_error(
            self.open
                .values_mut()
                .filter(|w| w.dirty)
                .map(|w| w.writer.flush()),
        )
    }

    /// Syncs the adopted value files, closing each once synced (a failure leaves it and the
    /// older ones for the next sync).
    fn sync_adopted(&mut self) -> Result<()> {
        while let Some(f) = self.adopted.last() {
            f.sync()?;
            self.adopted.pop();
        }
        Ok(())
    }
}

/// A full blob file on its way to being sealed; `None` once it is.
type SealingWriter = Arc<Mutex<Option<OpenBlobWriter>>>;

/// Blob files a write (or a compaction) added to, until it commits: such a file is neither
/// evicted nor retired meanwhile.
/// It also keeps what partial writes made and borrowed, so that a refused one can be undone
/// (`db/unnamed.rs`).
#[derive(Debug, Default)]
pub(crate) struct PendingBlobs {
    files: Vec<Arc<BlobFile>>,
    pub(super) unnamed: super::unnamed::Unnamed,
}

impl PendingBlobs {
    /// Holds `file` (once, however often it is named) until the guard drops.
    pub(super) fn hold(&mut self, file: Arc<BlobFile>) {
        if !self.files.iter().any(|f| Arc::ptr_eq(f, &file)) {
            file.pending_writes.fetch_add(1, Ordering::AcqRel);
            self.files.push(file);
        }
    }
}

impl Drop for PendingBlobs {
    fn drop(&mut self) {
        for f in &self.files {
            f.pending_writes.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Runs every step, then reports the first failure: one step failing must not leave the later
/// ones (flushes, seals) undone.
fn first_error(steps: impl IntoIterator<Item = Result<()>>) -> Result<()> {
    // Not try_fold: that would stop at the first failure.
    let mut first = Ok(());
    for step in steps {
        if first.is_ok() {
            first = step;
        }
    }
    first
}

/// The TTL bucket of a value expiring at `expiration`.
pub(super) fn ttl_bucket(expiration: u64, range: u64) -> (u64, u64) {
    let lo = expiration - expiration % range;
    (lo, lo.saturating_add(range))
}

impl DbInner {
    /// Seconds since the epoch, by the store's clock.
    pub(super) fn now(&self) -> u64 {
        self.opts.clock.now_secs()
    }

    /// Recomputes the smallest value any column family separates (`u64::MAX`: none does), which
    /// lets writes without large values skip separation at the cost of one load.
    pub(super) fn update_blob_threshold(&self) {
        let reg = self.registry.read();
        let t = reg
            .by_id
            .iter()
            .flatten()
            .filter(|d| d.opts.enable_blob_files)
            .map(|d| d.opts.min_blob_size as u64)
            .min()
            .unwrap_or(u64::MAX);
        self.blob_threshold.store(t, Ordering::Release);
    }

    /// Whether `batch` holds a value `separate_values` may move to a blob file (one at least the
    /// smallest threshold of any column family with blob files).
    pub(super) fn may_separate(&self, batch: &WriteBatch) -> Result<bool> {
        let threshold = self.blob_threshold.load(Ordering::Acquire);
        let mut large = false;
        if threshold != u64::MAX {
            batch
                .for_each(|r| large |= is_large(&r.op, r.value, threshold))
                .map_err(Error::InvalidArgument)?;
        }
        Ok(large)
    }

    /// Moves the large values of `batch` to blob files and returns the batch that goes to the WAL
    /// and memtables, holding blob indexes instead. The blob records are handed to the OS before
    /// this returns (a process crash keeps them); a synced write group syncs the blob files before
    /// its log, so the WAL never vouches for an index whose value could be lost.
    pub(super) fn separate_values(&self, batch: WriteBatch) -> Result<(WriteBatch, PendingBlobs)> {
        let threshold = self.blob_threshold.load(Ordering::Acquire);
        let mut pending = PendingBlobs::default();
        if threshold == u64::MAX {
            return Ok((batch, pending));
        }
        let mut large = false;
        // The rebuilt batch's size: a separated value leaves a blob index of at most this many
        // bytes, so the batch is allocated once.
        const INDEX_ROOM: usize = 64;
        let mut out_size = 0;
        batch
            .for_each(|r| {
                let separated = is_large(&r.op, r.value, threshold);
                large |= separated;
                out_size += r.key.len()
                    + if separated {
                        INDEX_ROOM
                    } else {
                        r.value.len() + 16
                    };
            })
            .map_err(Error::InvalidArgument)?;
        if !large {
            return Ok((batch, pending));
        }
        let reg = self.registry.read();
        let mut writers = self.blob_writers.lock();
        let mut out = WriteBatch::with_capacity(out_size);
        let mut failure = None;
        let mut sealed = Vec::new();
        batch
            .for_each(|r| {
                if failure.is_some() {
                    return;
                }
                let separate = match (r.op, reg.get(r.cf)) {
                    (Op::Point(ValueKind::Put), Some(cf)) => Some((cf, r.value, 0)),
                    (Op::Point(ValueKind::BlobIndex), Some(cf)) => match BlobIndex::decode(r.value)
                    {
                        Some(BlobIndex::Inline { expiration, value }) => {
                            Some((cf, value, expiration))
                        }
                        _ => None,
                    },
                    _ => None,
                }
                .filter(|(cf, value, _)| {
                    cf.opts.enable_blob_files && value.len() >= cf.opts.min_blob_size
                });
                let Some((cf, value, expiration)) = separate else {
                    return out.add_decoded(&r);
                };
                let bucket =
                    (expiration != 0).then(|| ttl_bucket(expiration, cf.opts.ttl_range_secs));
                match self.append_blob(&mut writers, cf, bucket, r.key, value, expiration) {
                    Ok((index, file, full)) => {
                        pending.hold(file);
                        // Counted as user bytes: the value, not the index standing for it.
                        self.stats
                            .bytes_written
                            .add((value.len() - index.len().min(value.len())) as u64);
                        out.put_blob_index(r.cf, r.key, &index);
                        if full {
                            sealed.push((cf.id, bucket));
                        }
                    }
                    Err(e) => failure = Some(e),
                }
            })
            .map_err(Error::InvalidArgument)?;
        let flushed = writers.flush_dirty();
        let result = failure.map_or(flushed, Err);
        let to_seal: Vec<OpenBlobWriter> = sealed
            .iter()
            .filter_map(|key| writers.open.remove(key))
            .collect();
        drop(writers);
        drop(reg);
        let sealing = self.seal_full_blob_writers(to_seal);
        result.and(sealing)?;
        Ok((out, pending))
    }

    /// Appends one value; returns its index, its file, and whether the file is now full.
    pub(super) fn append_blob(
        &self,
        writers: &mut BlobWriters,
        cf: &ColumnFamilyData,
        bucket: Option<(u64, u64)>,
        key: &[u8],
        value: &[u8],
        expiration: u64,
    ) -> Result<(Vec<u8>, Arc<BlobFile>, bool)> {
        let slot = match writers.open.entry((cf.id, bucket)) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(self.open_blob_writer(cf, bucket)?)
            }
        };
        let blob = match slot.writer.add(key, value, expiration) {
            Ok(b) => b,
            Err(e) => {
                // The file's tail is unknown: stop appending to it; reopen finds its intact prefix.
                if let Some(w) = writers.open.remove(&(cf.id, bucket)) {
                    w.file.meta.lock().state = BlobFileState::Sealed;
                    writers.abandoned.push(w);
                }
                return Err(e);
            }
        };
        slot.dirty = true;
        {
            let mut m = slot.file.meta.lock();
            m.footer = slot.writer.footer();
            m.file_size = slot.writer.file_size();
        }
        self.stats.blob_values_written.inc();
        self.stats.blob_bytes_written.add(blob.size);
        let full = slot.writer.file_size() >= cf.opts.blob_file_size;
        Ok((encode_blob(expiration, blob), slot.file.clone(), full))
    }

    /// Creates a blob file for `cf` and records it in the MANIFEST before anything points into it.
    fn open_blob_writer(
        &self,
        cf: &ColumnFamilyData,
        bucket: Option<(u64, u64)>,
    ) -> Result<OpenBlobWriter> {
        let mut writer = self.new_blob_file(cf, bucket)?;
        let number = writer.number;
        // The header is synced before the MANIFEST names the file: a crash must not leave a
        // named blob file too short to open.
        let logged = writer
            .sync()
            .and_then(|()| self.fs.sync_dir(&self.dir))
            .and_then(|()| {
                self.log_cf_edit(VersionEdit {
                    column_family: cf.id,
                    blob_files_added: vec![number],
                    ..Default::default()
                })
            });
        // On failure the file stays: the edit may have reached the disk before the error, and the
        // next open deletes the file if no MANIFEST names it.
        logged?;
        let file = Arc::new(BlobFile::new(
            number,
            cf.id,
            bucket,
            BlobFileMeta {
                footer: writer.footer(),
                file_size: writer.file_size(),
                garbage_bytes: 0,
                borrowed_bytes: 0,
                state: BlobFileState::Open,
            },
        ));
        self.blobs.insert(file.clone());
        Ok(OpenBlobWriter {
            writer,
            file,
            dirty: false,
        })
    }

    /// A new blob file of `cf` for the TTL bucket `bucket` (`None`: values without TTL), header
    /// written. Compactions write relocated values to one; the caller logs its addition.
    pub(super) fn new_blob_file(
        &self,
        cf: &ColumnFamilyData,
        bucket: Option<(u64, u64)>,
    ) -> Result<BlobFileWriter> {
        let number = self.versions.lock().new_file_number();
        let header = BlobHeader {
            column_family: cf.id,
            compression: cf.opts.blob_compression == Compression::Zstd,
            ttl_range: bucket,
        };
        let writer = BlobFileWriter::create(
            self.fs.as_ref(),
            &self.dir,
            number,
            header,
            cf.opts.zstd_level,
            cf.opts.blob_file_size,
        )?;
        self.stats.blob_files_created.inc();
        Ok(writer)
    }

    /// Writes the footer of a full (or, at close, any) open blob file.
    fn seal_blob_writer(&self, w: OpenBlobWriter) -> Result<()> {
        // Sealing syncs the file: a failure there is a failed sync like any other.
        let sealed = w.writer.finish();
        if let Err(e) = &sealed {
            self.remember_failed_sync(e);
        }
        let mut m = w.file.meta.lock();
        m.state = BlobFileState::Sealed;
        let (footer, size) = sealed?;
        m.footer = footer;
        m.file_size = size;
        Ok(())
    }

    /// Seals files the write path filled: queued for a background job when there are threads,
    /// here otherwise.
    pub(super) fn seal_full_blob_writers(&self, full: Vec<OpenBlobWriter>) -> Result<()> {
        if full.is_empty() {
            return Ok(());
        }
        if self.scheduler.mode() == Executor::Inline {
            self.seal_blob_writers(full)?;
        } else {
            self.queue_full_blob_writers(full);
        }
        // The full file counts as live until sealed: a store past `max_db_size` evicts its older
        // sealed files now, as the write that pushed it over returns.
        self.blob_housekeeping_all()
    }

    /// Queues files the write leader filled for the flush job to seal: under the WAL lock no
    /// seal, housekeeping or listener runs (a listener that writes would wait for itself).
    pub(super) fn queue_full_blob_writers(&self, full: Vec<OpenBlobWriter>) {
        if full.is_empty() {
            return;
        }
        self.blob_writers
            .lock()
            .sealing
            .extend(full.into_iter().map(|w| Arc::new(Mutex::new(Some(w)))));
        // The flush job seals them; the default column family always exists to carry it.
        if let Some(cf) = self.registry.read().get(0) {
            self.scheduler.schedule_flush(cf);
        }
    }

    /// Seals blob file `number` now if a writer holds it, or, with no background threads, if it
    /// waits for its seal (nothing else would seal it before `maintenance`); false otherwise
    /// (sealed already, being sealed, or left to the flush job). For FIFO eviction, which must
    /// take the oldest file first, full or not.
    pub(super) fn seal_blob_file_now(&self, number: u64) -> Result<bool> {
        let held = self.take_blob_writers(|_, ow| ow.writer.number == number);
        if !held.is_empty() {
            self.seal_blob_writers(held)?;
            return Ok(true);
        }
        if self.scheduler.mode() != Executor::Inline {
            return Ok(false);
        }
        self.seal_queued_where(|w| w.writer.number == number)
    }

    /// Seals the files queued by `seal_full_blob_writers`, then runs housekeeping on them
    /// (when another thread sealed them meanwhile, that thread does).
    pub(super) fn seal_queued_blob_writers(&self) -> Result<()> {
        if self.seal_queued_where(|_| true)? {
            // A sealed file may be evicted (or push the store over `max_db_size`).
            self.blob_housekeeping_all()?;
        }
        Ok(())
    }

    /// Seals the queued writers `pick` accepts and takes their slots off the queue, with the
    /// slots found empty (sealed by another thread meanwhile). Slots are locked one at a time
    /// and without the writers' lock, each held while its file is sealed: a sync that comes
    /// meanwhile waits, and then finds it sealed. Every accepted file is sealed even when one
    /// fails; the first failure is returned. Whether `pick` accepted any.
    fn seal_queued_where(&self, pick: impl Fn(&OpenBlobWriter) -> bool) -> Result<bool> {
        let queued = self.blob_writers.lock().sealing.clone();
        let (mut done, mut accepted) = (Vec::new(), false);
        let sealed = first_error(queued.iter().map(|slot| {
            let mut guard = slot.lock();
            match guard.as_ref() {
                Some(w) if !pick(w) => return Ok(()),
                Some(_) => accepted = true,
                None => {}
            }
            done.push(Arc::clone(slot));
            guard.take().map_or(Ok(()), |w| self.seal_blob_writer(w))
        }));
        self.blob_writers
            .lock()
            .sealing
            .retain(|s| !done.iter().any(|d| Arc::ptr_eq(d, s)));
        sealed?;
        Ok(accepted)
    }

    /// Syncs every open blob file with unsynced records. Called before anything that makes blob
    /// indexes durable: a WAL sync (a synced write must not sit behind an index whose value a crash
    /// can lose, or recovery stops before it) and a flush's MANIFEST edit (once the table stands in
    /// for the WAL, nothing else vouches for those records).
    pub(super) fn sync_blob_writers(&self) -> Result<()> {
        self.check_blob_syncs()?;
        let mut writers = self.blob_writers.lock();
        let synced = (|| {
            for w in writers.open.values_mut() {
                w.sync_if_dirty()?;
            }
            for slot in &writers.sealing {
                if let Some(w) = slot.lock().as_mut() {
                    w.sync_if_dirty()?;
                }
            }
            while let Some(w) = writers.abandoned.last_mut() {
                w.writer.sync()?;
                writers.abandoned.pop();
            }
            writers.sync_adopted()
        })();
        self.note_blob_sync(synced)
    }

    /// `Err` once a blob or value file's sync has failed (`blob_sync_failed`).
    pub(super) fn check_blob_syncs(&self) -> Result<()> {
        match self.blob_sync_failed.load(Ordering::Acquire) {
            false => Ok(()),
            true => Err(Error::Background(format!(
                "a sync of a blob file of {} failed, which may have lost bytes the system had \
                 accepted: no write is acknowledged as synced until the store is reopened",
                self.dir.display()
            ))),
        }
    }

    /// `synced`, remembering a failure for good (`remember_failed_sync`).
    fn note_blob_sync(&self, synced: Result<()>) -> Result<()> {
        if let Err(e) = &synced {
            self.remember_failed_sync(e);
        }
        synced
    }

    /// A blob or value file's sync failed with `e`: every later one fails too
    /// (`blob_sync_failed`). A full disk is not remembered: writes resume once it has room, as
    /// for the WAL.
    fn remember_failed_sync(&self, e: &Error) {
        if !e.kind().is_transient() {
            self.blob_sync_failed.store(true, Ordering::Release);
        }
    }

    /// Syncs and closes the value files adopted by unsynced writes once `MAX_ADOPTED_OPEN` are
    /// open, before an unsynced write adopts another. Syncing one early is always allowed: its
    /// bytes must be durable no later than its index, and may be sooner.
    fn sync_adopted_if_full(&self) -> Result<()> {
        let mut writers = self.blob_writers.lock();
        if writers.adopted.len() >= MAX_ADOPTED_OPEN {
            let synced = writers.sync_adopted();
            self.note_blob_sync(synced)?;
        }
        Ok(())
    }

    /// Seals every open blob file (at close).
    pub(super) fn close_blob_writers(&self) -> Result<()> {
        let queued = self.seal_queued_blob_writers();
        let open = self.take_blob_writers(|_, _| true);
        queued.and(self.seal_blob_writers(open))
    }

    /// Removes from the open set the writers `pick` chooses.
    pub(super) fn take_blob_writers(
        &self,
        pick: impl Fn(&WriterKey, &OpenBlobWriter) -> bool,
    ) -> Vec<OpenBlobWriter> {
        let mut w = self.blob_writers.lock();
        let keys: Vec<WriterKey> = w
            .open
            .iter()
            .filter(|(k, ow)| pick(k, ow))
            .map(|(k, _)| *k)
            .collect();
        keys.iter().filter_map(|k| w.open.remove(k)).collect()
    }

    /// Seals every writer of `writers`; the first failure is returned after all were tried.
    pub(super) fn seal_blob_writers(&self, writers: Vec<OpenBlobWriter>) -> Result<()> {
        first_error(writers.into_iter().map(|w| self.seal_blob_writer(w)))
    }

    /// Installs blob files a compaction wrote, before its edit is logged. They count as being
    /// written to (neither evicted nor retired) until the returned guard goes.
    pub(super) fn register_sealed_blob_files(
        &self,
        cf: u32,
        files: &[(u64, crate::blob::BlobFooter, u64)],
    ) -> PendingBlobs {
        let mut pending = PendingBlobs::default();
        for &(number, footer, file_size) in files {
            let file = Arc::new(BlobFile::new(
                number,
                cf,
                None,
                BlobFileMeta {
                    footer,
                    file_size,
                    garbage_bytes: 0,
                    borrowed_bytes: 0,
                    state: BlobFileState::Sealed,
                },
            ));
            // Held before the store lists it, so no eviction or retirement ever sees it unheld.
            pending.hold(file.clone());
            self.blobs.insert(file);
        }
        pending
    }

    /// Makes value file `value` a sealed blob file of `cf` (record header and footer written,
    /// renamed, named in the MANIFEST) and returns `batch` with its blob index added last, and
    /// the guard that keeps the file from eviction until the batch is written. With `sync` the
    /// file is synced first; otherwise the next sync of blob files covers it.
    pub(super) fn adopt_value_file(
        &self,
        mut batch: WriteBatch,
        cf: &ColumnFamilyData,
        mut value: ValueFile,
        sync: bool,
    ) -> Result<(WriteBatch, PendingBlobs)> {
        let value_len = u32::try_from(value.len).map_err(|_| {
            Error::InvalidArgument(format!("a value of {} bytes is too large", value.len))
        })?;
        if !sync {
            // Only an unsynced write keeps its file open for a later sync.
            self.sync_adopted_if_full()?;
        }
        let header = chunked_record_header(&value.key, value_len, 0);
        let trailer = value.chunk_trailer()?;
        let value_end = (RECORD_HEADER_SIZE + value.key.len()) as u64 + value.len;
        let record_size = value_end + trailer.len() as u64;
        let mut footer = BlobFooter::default();
        footer.note(record_size, 0);
        value
            .file
            .write_all_at(&[&header[..], &value.key].concat(), HEADER_SIZE as u64)?;
        value.file.write_all_at(
            &[&trailer[..], &footer.encode()].concat(),
            HEADER_SIZE as u64 + value_end,
        )?;
        if sync {
            value.file.sync()?;
        }
        let path = crate::filename::blob_file(&self.dir, value.number);
        self.fs.rename(&value.tmp_path, &path)?;
        // From here the file is the store's: one no MANIFEST names is deleted by the next open.
        value.adopted = true;
        self.fs.sync_dir(&self.dir)?;
        let file = Arc::new(BlobFile::new(
            value.number,
            cf.id,
            None,
            BlobFileMeta {
                footer,
                file_size: HEADER_SIZE as u64 + record_size + FOOTER_SIZE as u64,
                garbage_bytes: 0,
                borrowed_bytes: 0,
                state: BlobFileState::Sealed,
            },
        ));
        let mut pending = PendingBlobs::default();
        // Held before the store lists it, so no eviction or retirement ever sees it unheld.
        pending.hold(file.clone());
        self.blobs.insert(file);
        let logged = self.log_cf_edit(VersionEdit {
            column_family: cf.id,
            blob_files_added: vec![value.number],
            ..Default::default()
        });
        if let Err(e) = logged {
            self.blobs.forget([value.number]);
            return Err(e);
        }
        self.stats.blob_files_created.inc();
        self.stats.blob_values_written.inc();
        self.stats.blob_bytes_written.add(record_size);
        self.stats.bytes_written.add(value.len);
        if !sync {
            self.blob_writers.lock().adopted.push(value.file.clone());
        }
        let index = encode_blob(
            0,
            BlobRef {
                file: value.number,
                offset: HEADER_SIZE as u64,
                size: record_size,
                stored: crate::blob::Stored::Chunked,
            },
        );
        batch.put_blob_index(cf.id, &value.key, &index);
        Ok((batch, pending))
    }
}

/// Whether a record's value is one `separate_values` moves out at `threshold`: a put (or an
/// inline blob index, a TTL value) at least that long.
fn is_large(op: &Op, value: &[u8], threshold: u64) -> bool {
    matches!(op, Op::Point(ValueKind::Put | ValueKind::BlobIndex))
        && value.len() as u64 >= threshold
}
