//! Batched MultiGet: many keys at one snapshot, sorted once, looked up memtable by memtable and then
//! table by table, so that filters, index blocks and data blocks are visited once per batch rather
//! than once per key.

use std::sync::Arc;

use super::column_family::{ColumnFamily, ColumnFamilyData};
use super::read::block_reads;
use super::{Db, DbInner};
use crate::blob::BlobIndex;
use crate::error::{Error, Result};
use crate::key;
use crate::key::{Lookup, compare_bytes};
use crate::options::{ReadOptions, oversized_key};
use crate::sst::PendingKey;
use crate::value::PinnableValue;

impl DbInner {
    /// Looks up `(column family, key)` pairs; results in input order.
    pub(super) fn multi_get(
        &self,
        opts: &ReadOptions,
        items: &[(&Arc<ColumnFamilyData>, &[u8])],
    ) -> Vec<Result<Option<PinnableValue>>> {
        // One sequence number for the whole batch: a consistent view across column families.
        let point = self.read_point(opts);
        let seq = point.seq;
        let mut keys: Vec<PendingKey> = items
            .iter()
            .map(|(_, k)| match oversized_key(k.len()) {
                // Refused before its lookup key (a copy) is made.
                Some(why) => PendingKey::failed(Error::InvalidArgument(why)),
                None => PendingKey::new(k, seq),
            })
            .collect();
        // Sorted once: by column family, then by key.
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by(|&a, &b| {
            let ((cf_a, key_a), (cf_b, key_b)) = (&items[a], &items[b]);
            cf_a.id
                .cmp(&cf_b.id)
                .then_with(|| compare_bytes(key_a, key_b))
        });
        let read = block_reads(opts);
        // Held until blob indexes are resolved: they keep the blob files alive.
        let mut views = Vec::new();
        for group in order.chunk_by(|&a, &b| items[a].0.id == items[b].0.id) {
            let cf = items[group[0]].0;
            let view = point.view(cf);
            views.push(view.clone());
            for mem in std::iter::once(&view.mem).chain(view.imm.iter()) {
                for &i in group {
                    let p = &mut keys[i];
                    if p.is_resolved() {
                        continue;
                    }
                    match self.memtable_get(mem, p.hash, key::user_key(&p.lookup), seq) {
                        Lookup::NotFound => {}
                        found => p.outcome = Some(found),
                    }
                }
            }
            view.version.multi_get(&self.tables, &mut keys, group, read);
        }
        // Blob indexes are resolved last, in file and offset order, so reads of one blob file
        // go forward through it.
        let mut indexed: Vec<(usize, PinnableValue)> = Vec::new();
        let mut results: Vec<Result<Option<PinnableValue>>> = keys
            .into_iter()
            .enumerate()
            .map(|(i, p)| match (p.error, p.outcome) {
                (Some(e), _) => Err(e),
                (None, Some(Lookup::Indexed(index))) => {
                    indexed.push((i, index));
                    Ok(None)
                }
                (None, Some(found)) => self.settle_value(found, items[i].1, opts),
                (None, None) => Ok(None),
            })
            .collect();
        indexed.sort_by_cached_key(|(_, index)| {
            BlobIndex::decode(index)
                .and_then(|d| d.blob())
                .map(|b| (b.file, b.offset))
        });
        for (i, index) in indexed {
            results[i] = self.settle_value(Lookup::Indexed(index), items[i].1, opts);
        }
        drop(views);
        // A cache-only batch that must be asked again is counted once, when asked again.
        if opts.cache_only
            && results
                .iter()
                .any(|r| matches!(r, Err(Error::Incomplete(_))))
        {
            return results;
        }
        let (mut hits, mut bytes) = (0, 0);
        for v in results.iter().flatten().flatten() {
            hits += 1;
            bytes += v.len() as u64;
        }
        // Counted once per batch, not per key: the counters are shared by every thread.
        self.stats.multiget_calls.inc();
        self.stats.multiget_keys.add(items.len() as u64);
        self.stats.gets.add(items.len() as u64);
        self.stats.get_hits.add(hits);
        self.stats.bytes_read.add(bytes);
        results
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
