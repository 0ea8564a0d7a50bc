//! Resolving partial writes (`WriteBatch::write_at`, `append`, `truncate`, `copy`, `rename`;
//! doc/architecture.md, "Partial writes, copies and moves"). The write leader calls this under
//! the WAL lock, so the store it reads is exactly what the previous group left, and the batch it
//! returns holds only plain records (puts, blob indexes, deletes): the WAL, memtables, flushes and
//! compactions never see a partial write.

use std::sync::Arc;

use super::DbInner;
use super::batch::{BatchRecord, LastWrite, Latest, Op, PartialOp, WriteBatch};
use super::blob::{PendingBlobs, ttl_bucket};
use super::column_family::ColumnFamilyData;
use crate::blob::extents::{
    EXTENTS, Extent, Extents, FOLDED_EXTENTS, INLINE_EXTENT_MAX, LARGE_PIECE, MAX_EXTENTS, Piece,
};
use crate::blob::{BlobIndex, BlobRef, encode_inline};
use crate::error::{Error, Result, show_key};
use crate::key::Lookup;
use crate::options::{MAX_VALUE_SIZE, ReadOptions};

/// Bytes reserved up front for a batch's resolved records (it grows past them as needed).
const RESOLVED_CAPACITY: usize = 64 << 10;

/// A result at most this long (and without a TTL) is stored as a plain value: small files stay
/// plain puts, readable without a blob file.
const PLAIN_MAX: u64 = 4 << 10;

/// The batches before a partial write, each indexed once however many partial writes ask:
/// the group's earlier batches, and the records already resolved for this batch.
struct Before<'a> {
    earlier: Vec<(&'a WriteBatch, Latest)>,
    out: Latest,
}

impl<'a> Before<'a> {
    fn new(earlier: &[&'a WriteBatch]) -> Before<'a> {
        Before {
            earlier: earlier.iter().map(|&b| (b, Latest::default())).collect(),
            out: Latest::default(),
        }
    }

    /// What the newest of these batches (`out` last) to write `key` of column family `cf` left
    /// it holding; `None` when none wrote it.
    fn last_write(&mut self, out: &WriteBatch, cf: u32, key: &[u8]) -> Result<Option<Current>> {
        let newest_first = std::iter::once((out, &mut self.out))
            .chain(self.earlier.iter_mut().rev().map(|(b, l)| (*b, l)));
        for (batch, index) in newest_first {
            if let Some(last) = index.find(batch, cf, key).map_err(Error::InvalidArgument)? {
                return Ok(Some(match last {
                    LastWrite::Put(v) => Current::Plain(v.to_vec()),
                    LastWrite::BlobIndex(v) => Current::Index(v.to_vec()),
                    LastWrite::Deleted => Current::Missing,
                }));
            }
        }
        Ok(None)
    }
}

/// What a key holds as a partial write finds it.
enum Current {
    Missing,
    /// A plain value.
    Plain(Vec<u8>),
    /// A blob index found under the key named (whose records, for the whole-blob forms, are
    /// that key's).
    Index(Vec<u8>),
}

impl DbInner {
    /// `batch` with its partial writes resolved against the store and `earlier` (the batches
    /// committing before it in this group). New blob records stay held by `pending` until the
    /// batch commits. Fails, writing nothing the store will ever name, when an operation cannot
    /// be done.
    pub(super) fn resolve_partial_writes(
        &self,
        batch: &WriteBatch,
        earlier: &[&WriteBatch],
        pending: &mut PendingBlobs,
    ) -> Result<WriteBatch> {
        // A partial write's data goes to a blob file, not into `out`: sized to the whole batch,
        // `out` would take a write-back's worth of memory to hold a few hundred bytes.
        let mut out = WriteBatch::with_capacity(batch.size_in_bytes().min(RESOLVED_CAPACITY));
        let mut before = Before::new(earlier);
        let mut failure = None;
        batch
            .for_each(|r| {
                if failure.is_some() {
                    return;
                }
                if r.op != Op::Partial {
                    return out.add_decoded(&r);
                }
                if let Err(e) = self.resolve_one(&r, &mut out, &mut before, pending) {
                    failure = Some(e);
                }
            })
            .map_err(Error::InvalidArgument)?;
        match failure {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn resolve_one(
        &self,
        r: &BatchRecord<'_>,
        out: &mut WriteBatch,
        before: &mut Before<'_>,
        pending: &mut PendingBlobs,
    ) -> Result<()> {
        let op = PartialOp::decode(r.value)
            .ok_or_else(|| Error::InvalidArgument("a malformed partial write".into()))?;
        if let Some(why) = op.invalid(r.key) {
            return Err(Error::InvalidArgument(why));
        }
        let cf = self.registry.read().get(r.cf).cloned().ok_or_else(|| {
            Error::InvalidArgument(format!("column family {} does not exist", r.cf))
        })?;
        let missing = |key: &[u8]| {
            Error::NotFound(format!(
                "key {} has no value to {}",
                show_key(key),
                match op {
                    PartialOp::WriteAt { .. } => "write into",
                    PartialOp::Append(_) => "append to",
                    PartialOp::Truncate(_) => "truncate",
                    PartialOp::Copy { .. } => "copy",
                    PartialOp::Rename { .. } => "rename",
                }
            ))
        };
        let source = match op {
            PartialOp::Copy { from } | PartialOp::Rename { from } => from,
            _ => r.key,
        };
        // A record read here may be in a file garbage collection is retiring meanwhile: then the
        // value is read again (it has moved on).
        for _ in 0..3 {
            let current = self.current_value(&cf, source, out, before)?;
            let mut x = match self.as_extents(current, source)? {
                Some(x) => x,
                None if matches!(op, PartialOp::Append(_)) => Extents::default(),
                None => return Err(missing(source)),
            };
            x.borrow_all();
            let attempt = pending.unnamed.mark();
            let Some(value) = self.apply_op(&cf, r.key, op, x, pending)? else {
                // Read again: what this attempt wrote is named by nothing.
                let undone = pending.unnamed.since(attempt);
                self.forget_unnamed(undone);
                continue;
            };
            match value {
                Settled::Plain(v) => out.put_cf_id(r.cf, r.key, &v),
                Settled::Index(index, _) => out.put_blob_index(r.cf, r.key, &index),
            }
            if let PartialOp::Rename { from } = op {
                out.delete_cf_id(r.cf, from);
            }
            return Ok(());
        }
        Err(Error::Busy(format!(
            "the blob files of key {} are being collected; try again",
            show_key(source)
        )))
    }

    /// The value `op` makes of `x`, settled, its borrowed records counted; `None` when one of
    /// them is in a file no longer live.
    fn apply_op(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        op: PartialOp<'_>,
        mut x: Extents,
        pending: &mut PendingBlobs,
    ) -> Result<Option<Settled>> {
        let new = match op {
            PartialOp::WriteAt { offset, data } => Some((offset, data)),
            PartialOp::Append(data) => Some((x.len(), data)),
            _ => None,
        };
        match (op, new) {
            // Nothing to write: the value stays (POSIX `pwrite` of nothing).
            (_, Some((_, []))) => {}
            (_, Some((offset, data))) => {
                if offset.saturating_add(data.len() as u64) > MAX_VALUE_SIZE {
                    return Err(Error::InvalidArgument(format!(
                        "writing {} bytes at {offset} of key {} would pass the largest value \
                         ({} bytes)",
                        data.len(),
                        show_key(key),
                        MAX_VALUE_SIZE
                    )));
                }
                x.splice(offset, vec![Extent::inline(data.to_vec())]);
            }
            (PartialOp::Truncate(len), _) => x.truncate(len),
            _ => {}
        }
        let value = self.settle(cf, key, x, pending)?;
        if let Settled::Index(_, borrowed) = &value {
            let _one = self.blob_admin.lock();
            if !self.blobs.borrow_if_live(borrowed) {
                return Ok(None);
            }
            pending.unnamed.borrowed(borrowed);
        }
        Ok(Some(value))
    }

    /// What `key` of `cf` holds after the store's last commit, the group's earlier batches and
    /// `out` (the records resolved so far for this batch), the newest winning.
    fn current_value(
        &self,
        cf: &Arc<ColumnFamilyData>,
        key: &[u8],
        out: &WriteBatch,
        before: &mut Before<'_>,
    ) -> Result<Current> {
        if let Some(found) = before.last_write(out, cf.id, key)? {
            return Ok(found);
        }
        let (found, _view) = self.get_entry(&ReadOptions::default(), cf, key)?;
        Ok(match found {
            Lookup::Found(v) => Current::Plain(v.into_vec()),
            Lookup::Indexed(v) => Current::Index(v.into_vec()),
            Lookup::Deleted | Lookup::NotFound => Current::Missing,
        })
    }

    /// The value `current` (of `key`) as an extent list; `None` when there is none (missing,
    /// expired, or its blob file was evicted).
    fn as_extents(&self, current: Current, key: &[u8]) -> Result<Option<Extents>> {
        let index = match current {
            Current::Missing => return Ok(None),
            Current::Plain(v) => {
                return Ok(Some(Extents {
                    expiration: 0,
                    list: vec![Extent::inline(v)],
                }));
            }
            Current::Index(index) => index,
        };
        if index.first() == Some(&EXTENTS) {
            // Decoded once (`decode_index` would decode the whole list to check it, then again).
            let x = self.blobs.decode_extents(&index, key)?;
            let live =
                (x.expiration == 0 || self.now() < x.expiration) && self.blobs.files_present_of(&x);
            return Ok(live.then_some(x));
        }
        let decoded = self.blobs.decode_index(&index, key)?;
        if !self.blobs.is_live(&decoded, self.now()) {
            return Ok(None);
        }
        let expiration = decoded.expiration();
        Ok(Some(match decoded {
            BlobIndex::Inline { value, .. } => Extents {
                expiration,
                list: vec![Extent::inline(value.to_vec())],
            },
            BlobIndex::Blob { blob, .. } => {
                let Some(value_len) = self.blobs.value_len(&index, key, self.now())? else {
                    return Ok(None);
                };
                Extents {
                    expiration,
                    list: vec![Extent::record(blob, key_len(key)?, value_len, false)],
                }
            }
            BlobIndex::Extents { .. } => self.blobs.decode_extents(&index, key)?,
        }))
    }

    /// How `x` is stored under `key`: plain when small, else as an extent list whose long inline
    /// pieces went to blob records and which was folded when it had too many pieces.
    fn settle(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        mut x: Extents,
        pending: &mut PendingBlobs,
    ) -> Result<Settled> {
        x.normalize();
        if x.len() <= PLAIN_MAX {
            let bytes = self.blobs.read_extents(&x, key, (0, u64::MAX))?;
            return Ok(match x.expiration {
                0 => Settled::Plain(bytes),
                e => Settled::Index(encode_inline(e, &bytes), Vec::new()),
            });
        }
        // Folded first, so that no piece is written to a record only to be copied again.
        if x.list.len() > MAX_EXTENTS {
            self.fold(cf, key, &mut x, pending)?;
        }
        for i in 0..x.list.len() {
            if let Piece::Inline(bytes) = &x.list[i].piece
                && bytes.len() as u64 > INLINE_EXTENT_MAX
            {
                let blob = self.store_piece(cf, key, bytes, x.expiration, pending)?;
                x.list[i] = Extent::record(blob, key_len(key)?, bytes.len() as u64, true);
            }
        }
        let borrowed = x.borrowed();
        Ok(Settled::Index(x.encode(), borrowed))
    }

    /// Folds `x` down to `FOLDED_EXTENTS` pieces: repeatedly joins the neighbouring pair with
    /// the fewest bytes, then copies each joined run into one new record. Zero runs are never
    /// joined (a hole costs nothing as it is and could be gigabytes written out), nor runs of
    /// `LARGE_PIECE` bytes or more (a fold copies at most two pieces smaller than that per
    /// join), so a list of many holes or large pieces may stay longer.
    fn fold(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        x: &mut Extents,
        pending: &mut PendingBlobs,
    ) -> Result<()> {
        // Runs of the list as (first, last, bytes).
        let mut runs: Vec<(usize, usize, u64)> = x
            .list
            .iter()
            .enumerate()
            .map(|(i, e)| (i, i, e.len))
            .collect();
        let joinable = |run: &(usize, usize, u64)| {
            run.2 < LARGE_PIECE && !(run.0 == run.1 && matches!(x.list[run.0].piece, Piece::Zeros))
        };
        while runs.len() > FOLDED_EXTENTS {
            let Some(i) = (0..runs.len() - 1)
                .filter(|&i| joinable(&runs[i]) && joinable(&runs[i + 1]))
                .min_by_key(|&i| runs[i].2 + runs[i + 1].2)
            else {
                break;
            };
            let next = runs.remove(i + 1);
            runs[i] = (runs[i].0, next.1, runs[i].2 + next.2);
        }
        let mut list = Vec::with_capacity(runs.len());
        for (first, last, bytes) in runs {
            if first == last {
                list.push(x.list[first].clone());
                continue;
            }
            let mut joined = Vec::with_capacity(bytes as usize);
            for e in &x.list[first..=last] {
                self.blobs
                    .read_extent_into(e, (0, e.len), key, &mut joined)?;
            }
            let blob = self.store_piece(cf, key, &joined, x.expiration, pending)?;
            list.push(Extent::record(blob, key_len(key)?, bytes, true));
        }
        x.list = list;
        x.normalize();
        Ok(())
    }

    /// Writes `bytes` as a record of `key` in `cf`'s blob file (of the TTL bucket of
    /// `expiration`), held by `pending` until the write commits.
    fn store_piece(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        bytes: &[u8],
        expiration: u64,
        pending: &mut PendingBlobs,
    ) -> Result<BlobRef> {
        let bucket = (expiration != 0).then(|| ttl_bucket(expiration, cf.opts.ttl_range_secs));
        let mut writers = self.blob_writers.lock();
        let (index, file, full) =
            self.append_blob(&mut writers, cf, bucket, key, bytes, expiration)?;
        pending.hold(file);
        let flushed = writers.flush_dirty();
        let to_seal: Vec<_> = match full {
            true => writers.open.remove(&(cf.id, bucket)).into_iter().collect(),
            false => Vec::new(),
        };
        drop(writers);
        self.queue_full_blob_writers(to_seal);
        let blob = BlobIndex::decode(&index)
            .and_then(|i| i.blob())
            .ok_or_else(|| Error::InvalidArgument("blob index of a new record".into()))?;
        // Appended even if the flush failed: undone with the rest if the write does not land.
        pending.unnamed.made(cf.id, blob);
        flushed?;
        Ok(blob)
    }
}

/// How a resolved value is written.
enum Settled {
    Plain(Vec<u8>),
    /// A blob index, with the records it borrows.
    Index(Vec<u8>, Vec<BlobRef>),
}

/// `key`'s length as a record header holds it.
fn key_len(key: &[u8]) -> Result<u32> {
    u32::try_from(key.len())
        .map_err(|_| Error::InvalidArgument(format!("key of {} bytes", key.len())))
}
