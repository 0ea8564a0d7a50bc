//! Batched MultiGet: many keys at one snapshot, sorted once, looked up memtable by memtable and then
//! table by table, so that filters, index blocks and data blocks are visited once per batch rather
//! than once per key.

use std::ops::ControlFlow;
use std::sync::Arc;

use super::SuperVersion;
use super::column_family::{ColumnFamily, ColumnFamilyData};
use super::read::block_reads;
use super::{Db, DbInner};
use crate::blob::BlobIndex;
use crate::bloom::key_hash;
use crate::error::{Error, Result};
use crate::key::{Lookup, SequenceNumber, compare_bytes};
use crate::options::{ReadOptions, oversized_key};
use crate::sst::PendingKey;
use crate::value::PinnableValue;

/// A value a MultiGet found: borrowed from a memtable the batch holds, or read from a table or
/// blob file.
pub(super) enum Fetched<'m> {
    InMemtable(&'m [u8]),
    Read(PinnableValue),
}

impl Fetched<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Fetched::InMemtable(v) => v,
            Fetched::Read(v) => v,
        }
    }

    fn into_value(self) -> PinnableValue {
        match self {
            Fetched::InMemtable(v) => PinnableValue::owned(v.to_vec()),
            Fetched::Read(v) => v,
        }
    }
}

impl DbInner {
    /// Looks up `(column family, key)` pairs; results in input order.
    pub(super) fn multi_get(
        &self,
        opts: &ReadOptions,
        items: &[(&Arc<ColumnFamilyData>, &[u8])],
    ) -> Vec<Result<Option<PinnableValue>>> {
        let mut results = Vec::with_capacity(items.len());
        self.multi_get_each(opts, items, |_, r| {
            results.push(r.map(|v| v.map(Fetched::into_value)));
            ControlFlow::Continue(())
        });
        results
    }

    /// Looks up `(column family, key)` pairs and hands each result to `each`, in input order,
    /// until it breaks (every key is looked up, and counted, before the first is handed over).
    /// A value found in a memtable is lent, not copied: the memtables are held until the last
    /// result is handed over.
    pub(super) fn multi_get_each(
        &self,
        opts: &ReadOptions,
        items: &[(&Arc<ColumnFamilyData>, &[u8])],
        mut each: impl FnMut(usize, Result<Option<Fetched<'_>>>) -> ControlFlow<()>,
    ) {
        // One sequence number for the whole batch: a consistent view across column families.
        let point = self.read_point(opts);
        let seq = point.seq;
        // Sorted once: by column family, then by key.
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by(|&a, &b| {
            let ((cf_a, key_a), (cf_b, key_b)) = (&items[a], &items[b]);
            cf_a.id
                .cmp(&cf_b.id)
                .then_with(|| compare_bytes(key_a, key_b))
        });
        // Taken before any lookup and held to the end: memtable values are borrowed from them,
        // and they keep the blob files blob indexes point into alive.
        let views: Vec<_> = order
            .chunk_by(|&a, &b| items[a].0.id == items[b].0.id)
            .map(|group| (group, point.view(items[group[0]].0)))
            .collect();
        // The memtables first, by user key alone: a batch they answer whole (hot keys, the
        // common case of a small batch) makes no lookup keys and visits no table.
        let mut in_memtable: Vec<Option<Lookup<&[u8]>>> = items.iter().map(|_| None).collect();
        for (group, view) in &views {
            for mem in std::iter::once(&view.mem).chain(view.imm.iter()) {
                // The group's keys ascend: each search starts where the one before ended.
                let mut finger = mem.finger();
                let tombstones = mem.range_tombstones();
                for &i in *group {
                    let user_key = items[i].1;
                    if in_memtable[i].is_some() || oversized_key(user_key.len()).is_some() {
                        continue;
                    }
                    let hash = if mem.has_filter() {
                        key_hash(user_key)
                    } else {
                        0
                    };
                    let t = tombstones.as_deref();
                    match self.memtable_lookup(mem, t, Some(&mut finger), hash, user_key, seq) {
                        Lookup::NotFound => {}
                        // Keys only: the value lent is empty, whichever path hands it over.
                        Lookup::Found(_) if opts.keys_only => {
                            in_memtable[i] = Some(Lookup::Found(&[]))
                        }
                        found => in_memtable[i] = Some(found),
                    }
                }
            }
        }
        let answered = in_memtable
            .iter()
            .all(|m| matches!(m, Some(Lookup::Found(_) | Lookup::Deleted)));
        let (mut hits, mut bytes, mut incomplete) = (0, 0, false);
        let mut stopped = false;
        let mut hand_over = |i: usize, r: Result<Option<Fetched<'_>>>| {
            match &r {
                Ok(Some(v)) => {
                    hits += 1;
                    bytes += v.as_slice().len() as u64;
                }
                Ok(None) => {}
                Err(e) => incomplete |= matches!(e, Error::Incomplete(_)),
            }
            if !stopped {
                stopped = each(i, r).is_break();
            }
        };
        if answered {
            for (i, found) in in_memtable.into_iter().enumerate() {
                let v = match found {
                    Some(Lookup::Found(v)) => Some(Fetched::InMemtable(v)),
                    _ => None,
                };
                hand_over(i, Ok(v));
            }
        } else {
            let settled = self.multi_get_tables(opts, items, &views, seq, in_memtable);
            for (i, r) in settled.into_iter().enumerate() {
                hand_over(i, r);
            }
        }
        drop(views);
        // A cache-only batch that must be asked again is counted once, when asked again.
        if opts.cache_only && incomplete {
            return;
        }
        // Counted once per batch, not per key: the counters are shared by every thread.
        self.stats.multiget_calls.inc();
        self.stats.multiget_keys.add(items.len() as u64);
        self.stats.gets.add(items.len() as u64);
        self.stats.get_hits.add(hits);
        self.stats.bytes_read.add(bytes);
    }

    /// The rest of a MultiGet once the memtables answered what they could (`in_memtable`, by
    /// key): the keys they did not answer go down the tables, group by group, and blob indexes
    /// are resolved in file and offset order, so that reads of one blob file go forward
    /// through it. Results in input order.
    fn multi_get_tables<'m>(
        &self,
        opts: &ReadOptions,
        items: &[(&Arc<ColumnFamilyData>, &[u8])],
        views: &[(&[usize], Arc<SuperVersion>)],
        seq: SequenceNumber,
        in_memtable: Vec<Option<Lookup<&'m [u8]>>>,
    ) -> Vec<Result<Option<Fetched<'m>>>> {
        let mut keys: Vec<PendingKey<'m>> = items
            .iter()
            .zip(in_memtable)
            .map(|((_, k), found)| {
                let mut p = match oversized_key(k.len()) {
                    // Refused before its lookup key (a copy) is made.
                    Some(why) => return PendingKey::failed(Error::InvalidArgument(why)),
                    None => PendingKey::new(k, seq),
                };
                match found {
                    Some(Lookup::Found(v)) => p.in_memtable = Some(v),
                    Some(Lookup::Indexed(v)) => {
                        p.outcome = Some(Lookup::Indexed(PinnableValue::owned(v.to_vec())))
                    }
                    Some(Lookup::Deleted) => p.outcome = Some(Lookup::Deleted),
                    Some(Lookup::NotFound) | None => {}
                }
                p
            })
            .collect();
        let read = block_reads(opts);
        for (group, view) in views {
            view.version.multi_get(&self.tables, &mut keys, group, read);
        }
        let mut indexed: Vec<(usize, PinnableValue)> = Vec::new();
        for (i, p) in keys.iter_mut().enumerate() {
            if p.error.is_none()
                && matches!(p.outcome, Some(Lookup::Indexed(_)))
                && let Some(Lookup::Indexed(index)) = p.outcome.take()
            {
                indexed.push((i, index));
            }
        }
        indexed.sort_by_cached_key(|(_, index)| {
            BlobIndex::decode(index)
                .and_then(|d| d.blob())
                .map(|b| (b.file, b.offset))
        });
        let mut blob_values: Vec<Option<Result<Option<PinnableValue>>>> =
            keys.iter().map(|_| None).collect();
        for (i, index) in indexed {
            blob_values[i] = Some(self.settle_value(Lookup::Indexed(index), items[i].1, opts));
        }
        keys.into_iter()
            .zip(blob_values)
            .enumerate()
            .map(|(i, (p, blob))| {
                if let Some(r) = blob {
                    return r.map(|v| v.map(Fetched::Read));
                }
                match (p.error, p.in_memtable, p.outcome) {
                    (Some(e), _, _) => Err(e),
                    (None, Some(v), _) => Ok(Some(Fetched::InMemtable(v))),
                    (None, None, Some(found)) => self
                        .settle_value(found, items[i].1, opts)
                        .map(|v| v.map(Fetched::Read)),
                    (None, None, None) => Ok(None),
                }
            })
            .collect()
    }
}

impl Db {
    /// Looks up many keys of the default column family at one snapshot (`opts.snapshot`, or the
    /// latest); results in input order. Faster than a loop of `get`s: keys are sorted once and
    /// each table, index block and data block is visited once for all the keys it may hold, and
    /// values from one block share it.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions,
        keys: &[K],
    ) -> Vec<Result<Option<PinnableValue>>> {
        let cf = &self.inner.default_cf.data;
        let items: Vec<(&Arc<ColumnFamilyData>, &[u8])> =
            keys.iter().map(|k| (cf, k.as_ref())).collect();
        self.multi_get_items(opts, &items)
    }

    /// [`Db::multi_get`] over keys of several column families, all at one snapshot.
    pub fn multi_get_cf<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions,
        keys: &[(&ColumnFamily, K)],
    ) -> Vec<Result<Option<PinnableValue>>> {
        let mut resolved = Vec::with_capacity(keys.len());
        for (cf, k) in keys {
            match cf.resolve(self.inner.id) {
                Ok(data) => resolved.push((data, k.as_ref())),
                // One bad handle fails the call: which keys it meant is unknowable.
                Err(e) => return keys.iter().map(|_| Err(e.duplicate())).collect(),
            }
        }
        self.multi_get_items(opts, &resolved)
    }

    /// [`Db::multi_get_cf`] of keys of one column family, each result handed to `each` in key
    /// order until it breaks, its value lent rather than returned: a value found in a memtable
    /// is not copied out, so a caller that writes the values somewhere (an answer, a buffer)
    /// copies each once.
    pub fn multi_get_each<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions,
        cf: &ColumnFamily,
        keys: &[K],
        mut each: impl FnMut(usize, Result<Option<&[u8]>>) -> ControlFlow<()>,
    ) {
        let data = match self
            .inner
            .check_open()
            .and_then(|()| cf.resolve(self.inner.id))
        {
            Ok(data) => data,
            Err(e) => {
                for i in 0..keys.len() {
                    if each(i, Err(e.duplicate())).is_break() {
                        return;
                    }
                }
                return;
            }
        };
        let items: Vec<(&Arc<ColumnFamilyData>, &[u8])> =
            keys.iter().map(|k| (data, k.as_ref())).collect();
        self.inner.multi_get_each(opts, &items, |i, r| match r {
            Ok(v) => each(i, Ok(v.as_ref().map(Fetched::as_slice))),
            Err(e) => each(i, Err(e)),
        });
    }

    fn multi_get_items(
        &self,
        opts: &ReadOptions,
        items: &[(&Arc<ColumnFamilyData>, &[u8])],
    ) -> Vec<Result<Option<PinnableValue>>> {
        if let Err(e) = self.inner.check_open() {
            return items.iter().map(|_| Err(e.duplicate())).collect();
        }
        self.inner.multi_get(opts, items)
    }
}
