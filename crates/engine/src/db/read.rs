//! The read path: a point lookup goes through the memtables, then the tables level by level, and
//! stops at the newest visible entry; an iterator merges every source under the user iterator.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::column_family::{ColumnFamily, ColumnFamilyData};
use super::iter::{BlobReads, DbIterator};
use super::{Db, DbInner, State, SuperVersion};
use crate::bloom::key_hash;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator, RangeDeletions};
use crate::key::{self, Lookup, SequenceNumber};
use crate::memtable::{Finger, MemTable};
use crate::options::{ReadOptions, oversized_key};
use crate::range_del::{FragmentedTombstones, TombstoneCursor};
use crate::sst::BlockReadOptions;
use crate::value::PinnableValue;
use crate::version::{LevelIter, LevelTombstones, Version};

/// Refuses a cache-only read of what a lookup found when resolving it would read a blob file:
/// a blob index that does not hold its value itself (a small value with an expiration does).
pub(super) fn refuse_blob_reads(opts: &ReadOptions, found: &Lookup<PinnableValue>) -> Result<()> {
    let Lookup::Indexed(index) = found else {
        return Ok(());
    };
    let inline = matches!(
        crate::blob::BlobIndex::decode(index),
        Some(crate::blob::BlobIndex::Inline { .. })
    );
    if opts.cache_only && !inline {
        return Err(Error::Incomplete(
            "the value is in a blob file, not in memory".into(),
        ));
    }
    Ok(())
}

/// How a point lookup under `opts` reads table blocks.
pub(super) fn block_reads(opts: &ReadOptions) -> BlockReadOptions {
    BlockReadOptions {
        fill_cache: opts.fill_cache,
        verify_checksums: opts.verify_checksums,
        cache_only: opts.cache_only,
    }
}

/// Every column family's view at one moment, with the sequence number that is their newest
/// write: what a replica's reads and snapshots are read against (a catch-up installs the next
/// set whole).
#[derive(Debug)]
pub(crate) struct PinnedViews {
    pub(crate) seq: SequenceNumber,
    /// By column family id.
    pub(crate) views: std::collections::BTreeMap<u32, Arc<SuperVersion>>,
}

/// What a read goes to: a sequence number, and on a read-only store the views it is read
/// against.
pub(super) struct ReadPoint {
    pub(super) seq: SequenceNumber,
    pub(super) views: Option<Arc<PinnedViews>>,
}

impl ReadPoint {
    /// The views, as a snapshot keeps them.
    pub(super) fn held(&self) -> Option<crate::snapshot::HeldViews> {
        self.views.clone().map(|v| v as crate::snapshot::HeldViews)
    }

    /// Column family `cf`'s view at this point (the current one for a family made since).
    pub(super) fn view(&self, cf: &ColumnFamilyData) -> Arc<SuperVersion> {
        self.views
            .as_ref()
            .and_then(|v| v.views.get(&cf.id).cloned())
            .unwrap_or_else(|| cf.current_view())
    }
}

impl DbInner {
    /// Where a read under `opts` goes. A writer's views only gain newer writes, so any view
    /// read at a sequence taken before it is consistent. A replica's next view comes from the
    /// writer's files, whose compactions dropped versions no snapshot of the writer needed: a
    /// replica reads each sequence against the views installed with it.
    pub(super) fn read_point(&self, opts: &ReadOptions) -> ReadPoint {
        if let Some(s) = &opts.snapshot {
            return ReadPoint {
                seq: s.sequence(),
                views: s
                    .views()
                    .and_then(|v| v.clone().downcast::<PinnedViews>().ok()),
            };
        }
        // A writer never pins views: its reads do not touch the lock, a line every reading
        // thread would otherwise bounce between cores.
        let pinned = match self.read_only {
            true => self.pinned_views.read().clone(),
            false => None,
        };
        match pinned {
            Some(views) => ReadPoint {
                seq: views.seq,
                views: Some(views),
            },
            None => ReadPoint {
                seq: self.last_sequence.load(Ordering::Acquire),
                views: None,
            },
        }
    }

    /// Read-only: makes every column family's current view, read at `seq`, what reads go to.
    /// The caller holds the state lock, so that no view changes meanwhile.
    pub(super) fn pin_views(&self, st: &State, seq: SequenceNumber) {
        let views = st
            .cfs
            .iter()
            .flatten()
            .map(|cs| (cs.data.id, cs.data.current_view()))
            .collect();
        *self.pinned_views.write() = Some(Arc::new(PinnedViews { seq, views }));
    }

    /// The newest entry of `user_key` visible to `opts`, with the view it was read from (which
    /// keeps the blob files it points into alive).
    pub(super) fn get_entry(
        &self,
        opts: &ReadOptions,
        cf: &ColumnFamilyData,
        user_key: &[u8],
    ) -> Result<(Lookup<PinnableValue>, Arc<SuperVersion>)> {
        if let Some(why) = oversized_key(user_key.len()) {
            return Err(Error::InvalidArgument(why));
        }
        // A cache-only read is counted by its caller once it completes: one that must be asked
        // again counts once, when asked again.
        if !opts.cache_only {
            self.stats.gets.inc();
        }
        let point = self.read_point(opts);
        let (seq, view) = (point.seq, point.view(cf));
        let hash = key_hash(user_key);
        let lookup = key::lookup_key(user_key, seq);
        let tables = view.version.point_candidates(&self.tables, &lookup, hash);
        for mem in std::iter::once(&view.mem).chain(view.imm.iter()) {
            match self.memtable_get(mem, hash, user_key, seq) {
                Lookup::NotFound => {}
                found => return Ok((found, view)),
            }
        }
        let found = Version::get_in(&self.tables, tables, &lookup, hash, block_reads(opts))?;
        Ok((found, view))
    }

    pub(super) fn get(
        &self,
        opts: &ReadOptions,
        cf: &ColumnFamilyData,
        user_key: &[u8],
    ) -> Result<Option<PinnableValue>> {
        let (found, _view) = self.get_entry(opts, cf, user_key)?;
        let found = self.settle_value(found, user_key, opts)?;
        if opts.cache_only {
            self.stats.gets.inc();
        }
        if let Some(v) = &found {
            self.stats.get_hits.inc();
            self.stats.bytes_read.add(v.len() as u64);
        }
        Ok(found)
    }

    /// The value a point lookup returns for what it found: blob indexes resolved, values left
    /// out under `keys_only`.
    pub(super) fn settle_value(
        &self,
        found: Lookup<PinnableValue>,
        user_key: &[u8],
        opts: &ReadOptions,
    ) -> Result<Option<PinnableValue>> {
        refuse_blob_reads(opts, &found)?;
        Ok(match found {
            Lookup::Found(_) if opts.keys_only => Some(PinnableValue::owned(Vec::new())),
            Lookup::Found(v) => Some(v),
            Lookup::Indexed(index) => self.blobs.resolve_value(
                index,
                user_key,
                self.now(),
                opts.keys_only,
                opts.fill_cache,
            )?,
            Lookup::Deleted | Lookup::NotFound => None,
        })
    }

    /// The length of `user_key`'s value, reading no more of a blob file than a record's header.
    pub(super) fn value_info(
        &self,
        cf: &ColumnFamilyData,
        user_key: &[u8],
    ) -> Result<Option<crate::ValueInfo>> {
        let (found, _view) = self.get_entry(&ReadOptions::default(), cf, user_key)?;
        let (len, expiration) = match found {
            Lookup::Found(v) => (v.len() as u64, 0),
            Lookup::Indexed(index) => match self.blobs.value_info(&index, user_key, self.now())? {
                Some(info) => info,
                None => return Ok(None),
            },
            Lookup::Deleted | Lookup::NotFound => return Ok(None),
        };
        Ok(Some(crate::ValueInfo {
            len,
            expiration: crate::Expiration::from_secs(expiration),
        }))
    }

    /// When the value of `user_key` expires: `None` when the key is absent (or expired).
    pub(super) fn get_expiration(
        &self,
        cf: &ColumnFamilyData,
        user_key: &[u8],
    ) -> Result<Option<crate::Expiration>> {
        let (found, _view) = self.get_entry(&ReadOptions::default(), cf, user_key)?;
        Ok(match found {
            Lookup::Found(_) => Some(crate::Expiration::Never),
            Lookup::Indexed(index) => {
                let decoded = self.blobs.decode_index(&index, user_key)?;
                self.blobs
                    .is_live(&decoded, self.now())
                    .then(|| crate::Expiration::from_secs(decoded.expiration()))
            }
            Lookup::Deleted | Lookup::NotFound => None,
        })
    }

    /// `user_key` in one memtable, after its Bloom filter (if any) says it may be there. A range
    /// tombstone of the memtable covering the key hides every older entry: the answer is then
    /// `Deleted`, for this memtable and every older source.
    pub(super) fn memtable_get(
        &self,
        mem: &MemTable,
        hash: u64,
        user_key: &[u8],
        seq: SequenceNumber,
    ) -> Lookup<PinnableValue> {
        let tombstones = mem.range_tombstones();
        match self.memtable_lookup(mem, tombstones.as_deref(), None, hash, user_key, seq) {
            Lookup::Found(v) => Lookup::Found(PinnableValue::owned(v.to_vec())),
            Lookup::Indexed(v) => Lookup::Indexed(PinnableValue::owned(v.to_vec())),
            Lookup::Deleted => Lookup::Deleted,
            Lookup::NotFound => Lookup::NotFound,
        }
    }

    /// [`DbInner::memtable_get`], the entry borrowed from `mem`: for a caller that holds the
    /// memtable until it is done with the value (a MultiGet), no copy. `tombstones` are the
    /// memtable's (taken once for a run of keys: each take is a lock and a count shared by every
    /// reading thread). With `finger`, the key is the next of a run of ascending keys, searched
    /// for from where the one before was.
    pub(super) fn memtable_lookup<'m>(
        &self,
        mem: &'m MemTable,
        tombstones: Option<&FragmentedTombstones>,
        finger: Option<&mut Finger<'m>>,
        hash: u64,
        user_key: &[u8],
        seq: SequenceNumber,
    ) -> Lookup<&'m [u8]> {
        let cover = tombstones
            .and_then(|t| t.max_covering_seq(user_key, seq))
            .unwrap_or(0);
        let may_hold = match mem.may_contain(hash) {
            Some(false) => {
                self.stats.memtable_bloom_checked.inc();
                self.stats.memtable_bloom_useful.inc();
                false
            }
            Some(true) => {
                self.stats.memtable_bloom_checked.inc();
                true
            }
            None => true,
        };
        let found = match finger {
            _ if !may_hold => Lookup::NotFound,
            Some(finger) => mem.get_after(finger, user_key, seq, cover),
            None => mem.get(user_key, seq, cover),
        };
        match found {
            Lookup::NotFound | Lookup::Deleted if cover > 0 => {
                self.stats.range_del_hidden.inc();
                Lookup::Deleted
            }
            found => found,
        }
    }

    pub(super) fn iter(&self, opts: &ReadOptions, cf: &ColumnFamilyData) -> Result<DbIterator> {
        if opts.cache_only {
            return Err(Error::InvalidArgument(
                "an iterator cannot be cache-only: its later steps may need the disk".into(),
            ));
        }
        let point = self.read_point(opts);
        let view = point.view(cf);
        let snapshot = match &opts.snapshot {
            Some(s) => s.clone(),
            None => self.snapshots.acquire(point.seq, point.held()),
        };
        let read = BlockReadOptions {
            fill_cache: opts.fill_cache,
            verify_checksums: opts.verify_checksums,
            cache_only: false,
        };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        // Each source's range tombstones, by the index of its child iterator.
        let mut tombstones: Vec<(usize, TombstoneCursor)> = Vec::new();
        for m in std::iter::once(&view.mem).chain(view.imm.iter()) {
            if let Some(c) = m.range_tombstones().and_then(TombstoneCursor::over_list) {
                tombstones.push((children.len(), c));
            }
            children.push(Box::new(m.iter()));
        }
        for f in &view.version.levels[0] {
            let table = self.tables.get(f.number, 0)?;
            if let Some(c) = TombstoneCursor::over_list(table.range_tombstones().clone()) {
                tombstones.push((children.len(), c));
            }
            children.push(Box::new(table.iter(read)?));
        }
        for (level, files) in view.version.levels.iter().enumerate().skip(1) {
            if files.is_empty() {
                continue;
            }
            if let Some(c) = LevelTombstones::cursor(self.tables.clone(), level, files) {
                tombstones.push((children.len(), c));
            }
            children.push(Box::new(LevelIter::new(
                self.tables.clone(),
                files.clone(),
                level,
                read,
            )));
        }
        self.stats.iterators_created.inc();
        let range_dels = RangeDeletions::new(snapshot.sequence(), tombstones, self.stats.clone());
        Ok(DbIterator::new(
            MergingIterator::new(children).with_range_deletions(range_dels),
            snapshot,
            view,
            opts.lower_bound.clone(),
            opts.upper_bound.clone(),
            BlobReads {
                store: self.blobs.clone(),
                now: self.now(),
                keys_only: opts.keys_only,
                fill_cache: opts.fill_cache,
            },
        ))
    }
}

impl Db {
    /// The latest value of `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<PinnableValue>> {
        self.get_with(&ReadOptions::default(), key)
    }

    /// The value of `key` as of `opts.snapshot` (or the latest).
    pub fn get_with(
        &self,
        opts: &ReadOptions,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<PinnableValue>> {
        self.inner.check_open()?;
        self.inner
            .get(opts, &self.inner.default_cf.data, key.as_ref())
    }

    /// The latest value of `key` in column family `cf`.
    pub fn get_cf(
        &self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<PinnableValue>> {
        self.get_cf_with(&ReadOptions::default(), cf, key)
    }

    /// The value of `key` in column family `cf` as of `opts.snapshot` (or the latest).
    pub fn get_cf_with(
        &self,
        opts: &ReadOptions,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<PinnableValue>> {
        self.inner.check_open()?;
        self.inner
            .get(opts, cf.resolve(self.inner.id)?, key.as_ref())
    }
}
