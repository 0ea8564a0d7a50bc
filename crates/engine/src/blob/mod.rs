//! The blob store: key-value separation. Values at or above a column family's `min_blob_size` are
//! appended to blob files as they are written, and the LSM keeps a small blob index in their
//! place, so compactions move indexes instead of values. Values written with a TTL carry their
//! expiration (in the index, inline or with the blob); TTL values go to files bucketed by
//! expiration, so a whole file expires at once.
//!
//! This module holds the files and the read path. Which files exist is recorded in the MANIFEST
//! (additions, garbage, evictions, deletions; see `version::edit`); the database (`db::blob`)
//! decides when to write, seal, evict, expire and delete them.
//!
//! A blob file is deleted only once no reader can reach it: files that become obsolete are handed
//! to the current [`BlobEpoch`], which every read view holds, and epochs end oldest first
//! (`deletion.rs`).

mod chunk_read;
mod chunks;
mod deletion;
mod extent_read;
pub(crate) mod extents;
pub(crate) mod format;
mod index;
mod pins;
pub(crate) mod reader;
mod writer;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;

pub(crate) use chunk_read::PinnedRecord;
pub(crate) use deletion::{BlobEpoch, Deleter};
pub(crate) use format::{
    BlobFooter, BlobHeader, ChunkSums, HEADER_SIZE, Owner, RECORD_HEADER_SIZE, Stored,
    chunked_record_header,
};
pub(crate) use index::{BlobIndex, BlobRef, encode_blob, encode_inline};
pub(crate) use pins::FilePins;
pub(crate) use reader::BlobFileReader;
pub(crate) use writer::BlobFileWriter;

use crate::cache::{BlockCache, CachedBlock, Priority};
use crate::error::{Error, Result, show_key};
use crate::fs::{Deletions, FileSystem};
use crate::open_files::OpenFiles;
use crate::stats::Stats;
use crate::value::{PinnableValue, ValueRange};

/// Garbage bytes found per blob file (by a flush or a compaction), to be logged with its edit.
pub(crate) type BlobGarbage = BTreeMap<u64, u64>;

/// Adds the records an index points at (each once) to `garbage`, when it points into blob files.
pub(crate) fn note_garbage(garbage: &mut BlobGarbage, kind: u8, value: &[u8]) {
    if kind == crate::key::ValueKind::BlobIndex as u8
        && let Some(index) = BlobIndex::decode(value)
    {
        for blob in index.records() {
            *garbage.entry(blob.file).or_default() += blob.size;
        }
    }
}

/// Applies `change(borrowed bytes, record size)` to the file of each of `records` still known.
fn adjust_borrowed(
    files: &BTreeMap<u64, Arc<BlobFile>>,
    records: &[BlobRef],
    change: impl Fn(&mut u64, u64),
) {
    for b in records {
        if let Some(f) = files.get(&b.file) {
            change(&mut f.meta.lock().borrowed_bytes, b.size);
        }
    }
}

/// Bytes of `records` per blob file, as a MANIFEST edit counts borrowed references.
pub(crate) fn bytes_by_file(records: &[BlobRef]) -> Vec<(u64, u64)> {
    let mut by_file = BlobGarbage::new();
    for b in records {
        *by_file.entry(b.file).or_default() += b.size;
    }
    by_file.into_iter().collect()
}

/// The records an index borrows (each once): those of an extent list that its write did not
/// make. Each is counted as a reference of its blob file when the entry is written.
pub(crate) fn borrowed_records(kind: u8, value: &[u8]) -> Vec<BlobRef> {
    if kind != crate::key::ValueKind::BlobIndex as u8 || value.first() != Some(&extents::EXTENTS) {
        return Vec::new();
    }
    extents::Extents::decode(value)
        .map(|x| x.borrowed())
        .unwrap_or_default()
}

/// When a key expires, as [`crate::Db::get_expiration`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Expiration {
    /// The value was written without a TTL.
    Never,
    /// Seconds since the Unix epoch.
    At(u64),
}

impl Expiration {
    /// An expiration as blob indexes record it: seconds since the Unix epoch, 0 for never.
    pub(crate) fn from_secs(secs: u64) -> Expiration {
        match secs {
            0 => Expiration::Never,
            at => Expiration::At(at),
        }
    }
}

/// A value's length and expiry, as [`crate::Db::value_info_cf`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ValueInfo {
    /// Bytes.
    pub len: u64,
    pub expiration: Expiration,
}

/// Where the records of a file with `footer` end.
pub(crate) fn records_end(footer: &BlobFooter) -> u64 {
    format::HEADER_SIZE as u64 + footer.record_bytes
}

/// Where a blob file stands.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum BlobFileState {
    /// Being appended to.
    Open,
    /// Sealed (footer written) or recovered after a crash: read only.
    Sealed,
    /// Wholly garbage or expired: deleted once no reader can reach it.
    Obsolete,
    /// Evicted by FIFO (`max_db_size`): its keys read as absent; deleted once no reader holds it.
    Evicted,
}

/// One blob file the store knows of.
#[derive(Debug)]
pub(crate) struct BlobFile {
    pub number: u64,
    pub column_family: u32,
    /// The TTL bucket the file serves; `None` for values without TTL.
    pub ttl_range: Option<(u64, u64)>,
    pub(crate) meta: Mutex<BlobFileMeta>,
    /// Writes that appended to the file and are not committed yet: such a file is not evicted.
    pub(crate) pending_writes: AtomicUsize,
}

/// What changes about a blob file over its life.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlobFileMeta {
    pub footer: BlobFooter,
    pub file_size: u64,
    pub garbage_bytes: u64,
    /// Bytes of the file's records that entries borrow (extent lists, copies) besides each
    /// record's own index: the file is wholly garbage only once garbage covers these too.
    pub borrowed_bytes: u64,
    pub state: BlobFileState,
}

impl BlobFileMeta {
    /// Bytes of records times the indexes that name them: what garbage must reach before no
    /// index names any record of the file.
    pub(crate) fn referenced_bytes(&self) -> u64 {
        self.footer.record_bytes + self.borrowed_bytes
    }
}

impl BlobFile {
    pub(crate) fn new(
        number: u64,
        column_family: u32,
        ttl_range: Option<(u64, u64)>,
        meta: BlobFileMeta,
    ) -> Self {
        BlobFile {
            number,
            column_family,
            ttl_range,
            meta: Mutex::new(meta),
            pending_writes: AtomicUsize::new(0),
        }
    }

    pub(crate) fn state(&self) -> BlobFileState {
        self.meta.lock().state
    }
}

/// A blob file as the properties report it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlobFileProperties {
    pub number: u64,
    /// Bytes on disk.
    pub file_size: u64,
    pub records: u64,
    /// Bytes of records.
    pub record_bytes: u64,
    /// Bytes of records no live index points at any more.
    pub garbage_bytes: u64,
    /// Bytes still referenced: `record_bytes`, plus bytes of records that more than one entry
    /// names (copies, extent lists), minus `garbage_bytes`.
    pub live_bytes: u64,
    /// A file of values written with a TTL.
    pub has_ttl: bool,
    /// The records' smallest and largest expiration (seconds since the epoch), when they have one.
    pub expiration_range: Option<(u64, u64)>,
    pub state: BlobFileState,
}

/// What a blob index resolves to for a reader.
#[derive(Debug)]
pub(crate) enum Resolved {
    /// Expired, or its blob file was evicted: the key reads as absent.
    Gone,
    /// The value is the `len` bytes at `start` of the index itself (inline with a TTL).
    Inline { start: usize, len: usize },
    /// The value, read from its blob file (or the cache).
    Blob(Arc<Vec<u8>>),
    /// Present, value not read (`keys_only`).
    Unread,
}

/// Every blob file of the store, the read path, and the per-file accounting.
pub(crate) struct BlobStore {
    pub(crate) dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    /// Removes the files whose epochs ended, unless a backup holds deletions back.
    deletions: Arc<Deletions>,
    stats: Arc<Stats>,
    cache: Option<Arc<BlockCache>>,
    files: RwLock<BTreeMap<u64, Arc<BlobFile>>>,
    /// Readers of the files read lately, at most `max_open_files`.
    readers: OpenFiles<BlobFileReader>,
    /// Files evicted by FIFO, for as long as the MANIFEST remembers them.
    evicted: RwLock<HashSet<u64>>,
    /// The epoch new read views join, and who deletes the files of the epochs that end.
    deletion: deletion::Deletion,
    /// Files value readers keep on disk past their epoch.
    pins: pins::Pins,
}

impl std::fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobStore")
            .field("files", &self.files.read().len())
            .finish()
    }
}

impl BlobStore {
    pub(crate) fn new(
        dir: &Path,
        fs: Arc<dyn FileSystem>,
        deletions: Arc<Deletions>,
        stats: Arc<Stats>,
        cache: Option<Arc<BlockCache>>,
        max_open_files: usize,
    ) -> Arc<Self> {
        let store = Arc::new(BlobStore {
            dir: dir.to_path_buf(),
            fs,
            deletions,
            stats,
            cache,
            files: RwLock::new(BTreeMap::new()),
            readers: OpenFiles::new(max_open_files),
            evicted: RwLock::new(HashSet::new()),
            deletion: deletion::Deletion::default(),
            pins: pins::Pins::default(),
        });
        store.deletion.begin(&store);
        store
    }

    pub(crate) fn filesystem(&self) -> &dyn FileSystem {
        self.fs.as_ref()
    }

    pub(crate) fn path(&self, number: u64) -> PathBuf {
        crate::filename::blob_file(&self.dir, number)
    }

    pub(crate) fn insert(&self, file: Arc<BlobFile>) {
        self.files.write().insert(file.number, file);
    }

    /// Drops `numbers` from the store without touching the files (an edit adding them failed).
    pub(crate) fn forget(&self, numbers: impl IntoIterator<Item = u64>) {
        let mut files = self.files.write();
        for n in numbers {
            files.remove(&n);
            self.readers.remove(n);
        }
    }

    /// The numbers of every file the store knows.
    pub(crate) fn numbers(&self) -> Vec<u64> {
        self.files.read().keys().copied().collect()
    }

    /// The files a value reader pins now (`FilePins`): read past its view's life.
    pub(crate) fn pinned(&self) -> Vec<u64> {
        self.pins.pinned()
    }

    pub(crate) fn get(&self, number: u64) -> Option<Arc<BlobFile>> {
        self.files.read().get(&number).cloned()
    }

    /// The files of column family `cf` (every state), by number.
    pub(crate) fn files_of(&self, cf: u32) -> Vec<Arc<BlobFile>> {
        self.files
            .read()
            .values()
            .filter(|f| f.column_family == cf)
            .cloned()
            .collect()
    }

    pub(crate) fn mark_evicted(&self, number: u64) {
        self.evicted.write().insert(number);
    }

    pub(crate) fn is_evicted(&self, number: u64) -> bool {
        self.evicted.read().contains(&number)
    }

    /// Adds `bytes` of garbage to file `number` (unknown files are ignored: already deleted).
    /// Counts records borrowed by a new entry (each once per entry) as references of their files.
    pub(crate) fn add_borrowed(&self, records: &[BlobRef]) {
        if records.is_empty() {
            // Most entries borrow nothing: no lock for them (WAL replay calls this per entry).
            return;
        }
        adjust_borrowed(&self.files.read(), records, |bytes, size| *bytes += size);
    }

    /// Gives back the references `records` counted by `borrow_if_live` for an entry that was
    /// never written.
    pub(crate) fn remove_borrowed(&self, records: &[BlobRef]) {
        adjust_borrowed(&self.files.read(), records, |bytes, size| {
            *bytes = bytes.saturating_sub(size)
        });
    }

    /// Counts `records` (borrowed by an entry about to be written) as references of their files,
    /// unless one of those files is no longer live (retired by garbage collection or eviction,
    /// or unknown): then nothing is counted and the answer is false. The caller holds the
    /// database's blob admin lock, so no file is judged garbage in between.
    pub(crate) fn borrow_if_live(&self, records: &[BlobRef]) -> bool {
        let files = self.files.read();
        let live = records.iter().all(|b| {
            files
                .get(&b.file)
                .is_some_and(|f| matches!(f.state(), BlobFileState::Open | BlobFileState::Sealed))
        });
        if live {
            adjust_borrowed(&files, records, |bytes, size| *bytes += size);
        }
        live
    }

    pub(crate) fn add_garbage(&self, garbage: &BlobGarbage) {
        let files = self.files.read();
        for (n, bytes) in garbage {
            if let Some(f) = files.get(n) {
                f.meta.lock().garbage_bytes += bytes;
            }
        }
    }

    /// The reader of file `number`.
    pub(crate) fn reader(&self, number: u64, key: &[u8]) -> Result<Arc<BlobFileReader>> {
        if self.get(number).is_none() {
            return Err(Error::corruption(
                self.path(number),
                format!("blob file referenced by key {} is missing", show_key(key)),
            ));
        }
        if let Some(r) = self.readers.get(number) {
            return Ok(r);
        }
        Ok(self.readers.insert(number, self.open_reader(number)?))
    }

    /// A reader of blob file `number`, opened now.
    fn open_reader(&self, number: u64) -> Result<Arc<BlobFileReader>> {
        Ok(Arc::new(BlobFileReader::open(
            self.fs.as_ref(),
            &self.path(number),
        )?))
    }

    /// Holds the readers of blob files `numbers` open until `release_except`
    /// (`OpenFiles::hold`).
    pub(crate) fn hold(&self, numbers: impl IntoIterator<Item = u64>) -> Result<()> {
        self.readers
            .hold(numbers, |n| self.open_reader(n), |_, _| false)
    }

    /// How many readers `hold` keeps open.
    pub(crate) fn held_count(&self) -> usize {
        self.readers.held_count()
    }

    /// Lets go of every held reader but those of `numbers`.
    pub(crate) fn release_except(&self, numbers: &std::collections::BTreeSet<u64>) {
        self.readers.release_except(numbers);
    }

    /// The block cache as a ranged read of a chunked record uses it.
    pub(crate) fn piece_cache(&self, fill_cache: bool) -> chunk_read::PieceCache<'_> {
        self.cache.as_deref().map(|c| (c, fill_cache))
    }

    /// Reads the value of `blob`, which belongs to `key`, through the cache.
    pub(crate) fn fetch(
        &self,
        blob: BlobRef,
        key: &[u8],
        fill_cache: bool,
    ) -> Result<Arc<Vec<u8>>> {
        self.fetch_for(blob, key, Owner::Key(key), fill_cache)
    }

    /// Reads the value of `blob`, `owner`'s record, for `key`, through the cache.
    pub(crate) fn fetch_for(
        &self,
        blob: BlobRef,
        key: &[u8],
        owner: Owner<'_>,
        fill_cache: bool,
    ) -> Result<Arc<Vec<u8>>> {
        let cache_key = (blob.file, blob.offset);
        if let Some(cache) = &self.cache
            && let Some(CachedBlock::Blob(v)) = cache.lookup(cache_key)
        {
            self.stats.blob_cache_hit.inc();
            return Ok(v);
        }
        if self.cache.is_some() {
            self.stats.blob_cache_miss.inc();
        }
        let value = Arc::new(self.reader(blob.file, key)?.read(blob, owner)?);
        self.stats.blob_reads.inc();
        self.stats.blob_bytes_read.add(blob.size);
        if fill_cache && let Some(cache) = &self.cache {
            cache.insert(cache_key, CachedBlock::Blob(value.clone()), Priority::Low);
        }
        Ok(value)
    }

    /// Decodes the blob index `index`, the value of `key`; a malformed one is corruption.
    pub(crate) fn decode_index<'a>(&self, index: &'a [u8], key: &[u8]) -> Result<BlobIndex<'a>> {
        BlobIndex::decode(index).ok_or_else(|| {
            Error::corruption(
                &self.dir,
                format!("malformed blob index for key {}", show_key(key)),
            )
        })
    }

    /// Whether `index` still stands for a value at `now`: not expired, its blob file not
    /// evicted. Reads nothing.
    pub(crate) fn is_live(&self, index: &BlobIndex<'_>, now: u64) -> bool {
        !index.is_expired(now) && self.files_present(index)
    }

    /// Whether no blob file `index` points into was evicted.
    pub(crate) fn files_present(&self, index: &BlobIndex<'_>) -> bool {
        match index {
            BlobIndex::Inline { .. } => true,
            BlobIndex::Blob { blob, .. } => !self.is_evicted(blob.file),
            BlobIndex::Extents { .. } => index.records().iter().all(|b| !self.is_evicted(b.file)),
        }
    }

    /// Whether no blob file the extent list `x` points into was evicted.
    pub(crate) fn files_present_of(&self, x: &extents::Extents) -> bool {
        x.records().iter().all(|(b, _)| !self.is_evicted(b.file))
    }

    /// What the blob index `index` (the value of `key`) means for a reader at `now`.
    pub(crate) fn resolve(
        &self,
        index: &[u8],
        key: &[u8],
        now: u64,
        keys_only: bool,
        fill_cache: bool,
    ) -> Result<Resolved> {
        let decoded = self.decode_index(index, key)?;
        if !self.is_live(&decoded, now) {
            return Ok(Resolved::Gone);
        }
        match decoded {
            BlobIndex::Inline { value, .. } => Ok(Resolved::Inline {
                start: index.len() - value.len(),
                len: value.len(),
            }),
            BlobIndex::Blob { blob, .. } => {
                if keys_only {
                    return Ok(Resolved::Unread);
                }
                Ok(Resolved::Blob(self.fetch(blob, key, fill_cache)?))
            }
            BlobIndex::Extents { .. } if keys_only => Ok(Resolved::Unread),
            BlobIndex::Extents { .. } => Ok(Resolved::Blob(self.read_whole_extents(index, key)?)),
        }
    }

    /// The length of the value blob index `index` stands for, reading at most a record's
    /// header; `None` when it expired or its file was evicted.
    pub(crate) fn value_len(&self, index: &[u8], key: &[u8], now: u64) -> Result<Option<u64>> {
        Ok(self.value_info(index, key, now)?.map(|(len, _)| len))
    }

    /// The length of the value blob index `index` stands for and when it expires (0: never);
    /// `None` when it expired or its file was evicted.
    pub(crate) fn value_info(
        &self,
        index: &[u8],
        key: &[u8],
        now: u64,
    ) -> Result<Option<(u64, u64)>> {
        let decoded = self.decode_index(index, key)?;
        if !self.is_live(&decoded, now) {
            return Ok(None);
        }
        let expiration = decoded.expiration();
        let len = match decoded {
            BlobIndex::Inline { value, .. } => value.len() as u64,
            BlobIndex::Blob { blob, .. } => self.reader(blob.file, key)?.value_len(blob, key)?,
            BlobIndex::Extents { data, .. } => self.decode_extents(data, key)?.len(),
        };
        Ok(Some((len, expiration)))
    }

    /// `offset..offset + len` of the value the blob index `found` (the value of `key`) stands
    /// for; `None` when it expired or its file was evicted. A chunked record is read a chunk
    /// at a time, only where the range lies; any other is read (through the cache) and verified
    /// whole.
    pub(crate) fn read_range(
        &self,
        found: PinnableValue,
        key: &[u8],
        now: u64,
        (offset, len): (u64, u64),
        fill_cache: bool,
    ) -> Result<Option<ValueRange>> {
        let decoded = self.decode_index(&found, key)?;
        if !self.is_live(&decoded, now) {
            return Ok(None);
        }
        Ok(Some(match decoded {
            BlobIndex::Inline { value, .. } => {
                let start = found.len() - value.len();
                let len_inline = value.len();
                ValueRange::within(found.narrow(start, len_inline), offset, len)
            }
            BlobIndex::Blob { blob, .. } if blob.stored.is_chunked() => {
                let (value_len, bytes) = self.reader(blob.file, key)?.read_range(
                    blob,
                    Owner::Key(key),
                    (offset, len),
                    self.piece_cache(fill_cache),
                )?;
                self.stats.blob_reads.inc();
                self.stats.blob_bytes_read.add(bytes.len() as u64);
                ValueRange {
                    value_len,
                    bytes: PinnableValue::owned(bytes),
                }
            }
            BlobIndex::Blob { blob, .. } => ValueRange::within(
                PinnableValue::shared(self.fetch(blob, key, fill_cache)?),
                offset,
                len,
            ),
            BlobIndex::Extents { data, .. } => {
                let x = self.decode_extents(data, key)?;
                ValueRange {
                    value_len: x.len(),
                    bytes: PinnableValue::owned(self.read_extents(&x, key, (offset, len))?),
                }
            }
        }))
    }

    /// Resolves a blob index found by a point lookup into the value returned.
    pub(crate) fn resolve_value(
        &self,
        found: PinnableValue,
        key: &[u8],
        now: u64,
        keys_only: bool,
        fill_cache: bool,
    ) -> Result<Option<PinnableValue>> {
        Ok(
            match self.resolve(&found, key, now, keys_only, fill_cache)? {
                Resolved::Gone => None,
                Resolved::Inline { .. } if keys_only => Some(PinnableValue::owned(Vec::new())),
                Resolved::Inline { start, len } => Some(found.narrow(start, len)),
                Resolved::Blob(v) => Some(PinnableValue::shared(v)),
                Resolved::Unread => Some(PinnableValue::owned(Vec::new())),
            },
        )
    }

    /// The properties of column family `cf`'s files.
    pub(crate) fn properties(&self, cf: u32) -> Vec<BlobFileProperties> {
        self.files_of(cf)
            .iter()
            .map(|f| {
                let m = *f.meta.lock();
                let (lo, hi) = m.footer.expiration_range;
                BlobFileProperties {
                    number: f.number,
                    file_size: m.file_size,
                    records: m.footer.records,
                    record_bytes: m.footer.record_bytes,
                    garbage_bytes: m.garbage_bytes.min(m.referenced_bytes()),
                    live_bytes: m.referenced_bytes().saturating_sub(m.garbage_bytes),
                    has_ttl: f.ttl_range.is_some(),
                    expiration_range: (hi != 0).then_some((lo, hi)),
                    state: m.state,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
