//! `WriteBatch`: an atomic group of updates, and the exact byte form the WAL stores.
//!
//! Layout (doc/format.md): `sequence: u64 LE | count: u32 LE | record*`, each record
//! `kind: u8 | column family: varint32 | key: length-prefixed | value: length-prefixed`; the value
//! is absent for point deletes, and for a range deletion (kind 2) the key is the range's start and
//! the value its end. A kind with `IN_DEFAULT_CF` set omits the column family: it is 0.

use super::ColumnFamily;
use crate::coding::{
    fixed32, fixed64, get_length_prefixed, get_varint32, put_length_prefixed, put_varint32,
    put_varint64,
};
use crate::key::{SequenceNumber, ValueKind};
use crate::options::{MAX_WRITE_SIZE, oversized_key};
use crate::range_del::RANGE_DELETION_KIND;

mod latest;
mod partial;

pub(crate) use latest::{LastWrite, Latest};

pub(crate) use partial::{PARTIAL_KIND, PartialOp};

pub(crate) const HEADER_SIZE: usize = 12;

/// Set in a record's kind byte when the record is of the default column family, whose id (0) is
/// then left out: most records are, and small ones are mostly overhead in the WAL.
const IN_DEFAULT_CF: u8 = 0x80;

/// Updates applied atomically by [`crate::Db::write`]: all of them survive a crash or none does.
#[derive(Clone)]
pub struct WriteBatch {
    rep: Vec<u8>,
    invalid: Option<String>,
    /// The column families the records touch, each once.
    cfs: Vec<u32>,
    /// How many records are partial writes (`partial::PARTIAL_KIND`).
    partial_ops: usize,
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("count", &self.len())
            .field("bytes", &self.rep.len())
            .finish()
    }
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// What one record of a batch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// A point entry: a put or a delete of `key`.
    Point(ValueKind),
    /// Deletes `[key, value)`: the record's key is the range's start, its value the end.
    DeleteRange,
    /// A partial write of `key` (`PartialOp`), resolved before the batch is logged.
    Partial,
}

/// One decoded record of a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchRecord<'a> {
    pub op: Op,
    pub cf: u32,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Adds column family `cf` to `cfs` unless it is there. Batches touch a handful of column
/// families: a scan beats a set.
fn add_once(cfs: &mut Vec<u32>, cf: u32) {
    if !cfs.contains(&cf) {
        cfs.push(cf);
    }
}

/// Why a value of `len` bytes cannot be written, if it cannot.
fn oversized_value(len: usize) -> Option<String> {
    (len as u64 > MAX_WRITE_SIZE)
        .then(|| format!("value of {len} bytes exceeds the limit of {MAX_WRITE_SIZE}"))
}

/// Capacity from which a new batch's memory is faulted in up front.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const PREFAULT_FROM: usize = 16 << 20;

/// Faults in `v`'s spare capacity with one `madvise(MADV_POPULATE_WRITE)` (Linux 5.14 on; a
/// best effort: older kernels refuse it and the pages fault in as they are written).
fn prefault(v: &mut Vec<u8>) {
    #[cfg(target_os = "linux")]
    if v.capacity() >= PREFAULT_FROM {
        let spare = v.spare_capacity_mut();
        let start = spare.as_mut_ptr() as usize;
        let page = 4096;
        let first = start.div_ceil(page) * page;
        let end = (start + spare.len()) / page * page;
        if end > first {
            // SAFETY: [first, end) lies inside the vector's allocation, which this function
            // borrows mutably; populating its pages changes no byte of it and no other code can
            // see it. Exercised by `a_batch_with_room_for_a_large_value_holds_it`.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    end - first,
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty batch with room for about `bytes` of records. For a large value (a whole file)
    /// this saves the copies of a growing buffer, and the memory is faulted in up front, in one
    /// call rather than one fault per page.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER_SIZE + bytes);
        prefault(&mut rep);
        rep.resize(HEADER_SIZE, 0);
        WriteBatch {
            rep,
            invalid: None,
            cfs: Vec::new(),
            partial_ops: 0,
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.add(ValueKind::Put, 0, key.as_ref(), Some(value.as_ref()));
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.add(ValueKind::Delete, 0, key.as_ref(), None);
    }

    /// Sets `key` to `value` in column family `cf`.
    pub fn put_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.add(ValueKind::Put, cf.id(), key.as_ref(), Some(value.as_ref()));
    }

    /// Sets `key` to `value` until `expiration` (seconds since the Unix epoch, as the store's
    /// [`crate::Clock`] reads it): from then on the key reads as absent, and compaction removes it.
    pub fn put_until(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, expiration: u64) {
        self.add_expiring(0, key.as_ref(), value.as_ref(), expiration);
    }

    /// [`WriteBatch::put_until`] in column family `cf`.
    pub fn put_until_cf(
        &mut self,
        cf: &ColumnFamily,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiration: u64,
    ) {
        self.add_expiring(cf.id(), key.as_ref(), value.as_ref(), expiration);
    }

    fn add_expiring(&mut self, cf: u32, key: &[u8], value: &[u8], expiration: u64) {
        if expiration == 0 {
            // 0 means "never" in a blob index; the earliest real expiration is 1.
            self.add(ValueKind::Put, cf, key, Some(value));
            if self.invalid.is_none() {
                self.invalid = Some("put_until: expiration 0 is in the past".into());
            }
            return;
        }
        if value.len() as u64 > MAX_WRITE_SIZE {
            return self.add(ValueKind::Put, cf, key, Some(value));
        }
        let index = crate::blob::encode_inline(expiration, value);
        self.add(ValueKind::BlobIndex, cf, key, Some(&index));
    }

    /// Adds a record whose value is already a blob index (the write path's value separation).
    pub(crate) fn put_blob_index(&mut self, cf: u32, key: &[u8], index: &[u8]) {
        self.add(ValueKind::BlobIndex, cf, key, Some(index));
    }

    /// Sets `key` to `value` in column family `cf` (by id: the write path's own records).
    pub(crate) fn put_cf_id(&mut self, cf: u32, key: &[u8], value: &[u8]) {
        self.add(ValueKind::Put, cf, key, Some(value));
    }

    /// Deletes `key` from column family `cf` (by id).
    pub(crate) fn delete_cf_id(&mut self, cf: u32, key: &[u8]) {
        self.add(ValueKind::Delete, cf, key, None);
    }

    /// Adds a decoded record as it is.
    pub(crate) fn add_decoded(&mut self, r: &BatchRecord<'_>) {
        match r.op {
            Op::Point(ValueKind::Delete) => self.add(ValueKind::Delete, r.cf, r.key, None),
            Op::Point(kind) => self.add(kind, r.cf, r.key, Some(r.value)),
            Op::DeleteRange => self.add_range(r.cf, r.key, r.value),
            Op::Partial => {
                self.partial_ops += 1;
                self.add_record(PARTIAL_KIND, r.cf, r.key, Some(r.value));
            }
        }
    }

    /// Deletes `key` from column family `cf`.
    pub fn delete_cf(&mut self, cf: &ColumnFamily, key: impl AsRef<[u8]>) {
        self.add(ValueKind::Delete, cf.id(), key.as_ref(), None);
    }

    /// Deletes every key in `[start, end)`: one range tombstone, however many keys it covers.
    /// An empty or inverted range makes the batch fail with `InvalidArgument` when written.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        self.add_range(0, start.as_ref(), end.as_ref());
    }

    /// Deletes every key in `[start, end)` from column family `cf`.
    pub fn delete_range_cf(
        &mut self,
        cf: &ColumnFamily,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) {
        self.add_range(cf.id(), start.as_ref(), end.as_ref());
    }

    fn add_range(&mut self, cf: u32, start: &[u8], end: &[u8]) {
        if self.invalid.is_none() {
            self.invalid = oversized_key(end.len()).or_else(|| {
                (start >= end).then(|| {
                    format!(
                        "delete_range: start {} is not below end {} (empty or inverted range)",
                        crate::error::show_key(start),
                        crate::error::show_key(end)
                    )
                })
            });
        }
        self.add_record(RANGE_DELETION_KIND, cf, start, Some(end));
    }

    /// Number of updates.
    pub fn len(&self) -> usize {
        fixed32(&self.rep, 8) as usize
    }

    /// True when every update the batch holds (perhaps none) is a deletion, a range deletion or
    /// a rename: one that adds no data (a rename moves a value, by reference once it is in a
    /// blob file). A filesystem's unlink of a file still open is a rename to a private key:
    /// on a full disk it must go through like any deletion, so that `rm` frees room.
    pub(crate) fn holds_only_removals(&self) -> bool {
        let mut only = true;
        let decoded = self.for_each(|r| {
            only &= match r.op {
                Op::DeleteRange | Op::Point(ValueKind::Delete) => true,
                Op::Partial => matches!(
                    partial::PartialOp::decode(r.value),
                    Some(partial::PartialOp::Rename { .. })
                ),
                _ => false,
            };
        });
        only && decoded.is_ok()
    }

    /// True when the batch holds no update.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size of the encoded batch in bytes (what the WAL will store).
    pub fn size_in_bytes(&self) -> usize {
        self.rep.len()
    }

    /// Removes every update.
    pub fn clear(&mut self) {
        self.rep.truncate(HEADER_SIZE);
        self.rep[..HEADER_SIZE].fill(0);
        self.invalid = None;
        self.cfs.clear();
        self.partial_ops = 0;
    }

    /// The column families this batch writes to.
    pub(crate) fn column_families(&self) -> &[u32] {
        &self.cfs
    }

    fn note_cf(&mut self, cf: u32) {
        add_once(&mut self.cfs, cf);
    }

    fn add(&mut self, kind: ValueKind, cf: u32, key: &[u8], value: Option<&[u8]>) {
        self.add_record(kind as u8, cf, key, value);
    }

    fn add_record(&mut self, kind: u8, cf: u32, key: &[u8], value: Option<&[u8]>) {
        self.add_record_in_parts(kind, cf, key, value.map(|v| (&[][..], v)));
    }

    /// [`WriteBatch::add_record`] of a value given as a head and the rest, copied once into the
    /// batch rather than joined first.
    fn add_record_in_parts(
        &mut self,
        kind: u8,
        cf: u32,
        key: &[u8],
        value: Option<(&[u8], &[u8])>,
    ) {
        let value_len = value.map(|(head, rest)| head.len() + rest.len());
        if self.invalid.is_none() {
            self.invalid = oversized_key(key.len());
        }
        if self.invalid.is_none() {
            self.invalid = value_len.and_then(oversized_value);
        }
        self.note_cf(cf);
        // One reservation per record: growing by doubling would copy a large value's bytes
        // several times over.
        let varints = 1 + 5 + 10 + if value.is_some() { 10 } else { 0 };
        self.rep
            .reserve(varints + key.len() + value_len.unwrap_or(0));
        if cf == 0 {
            self.rep.push(kind | IN_DEFAULT_CF);
        } else {
            self.rep.push(kind);
            put_varint32(&mut self.rep, cf);
        }
        put_length_prefixed(&mut self.rep, key);
        if let (Some((head, rest)), Some(len)) = (value, value_len) {
            put_varint64(&mut self.rep, len as u64);
            self.rep.extend_from_slice(head);
            self.rep.extend_from_slice(rest);
        }
        let count = fixed32(&self.rep, 8) + 1;
        self.rep[8..12].copy_from_slice(&count.to_le_bytes());
    }

    /// Why the batch cannot be written, if it cannot.
    pub(crate) fn validation_error(&self) -> Option<&str> {
        self.invalid.as_deref()
    }

    pub(crate) fn sequence(&self) -> SequenceNumber {
        fixed64(&self.rep, 0)
    }

    pub(crate) fn set_sequence(&mut self, seq: SequenceNumber) {
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The batch's encoded form (doc/format.md, "WAL record"): what the WAL stores, and what
    /// [`WriteBatch::from_data`] takes back, so a batch can cross a process or sandbox boundary
    /// as one buffer.
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// A batch from its encoded form ([`WriteBatch::data`]), checked record by record as the
    /// builder methods check their arguments. Its sequence number is ignored. Refused with
    /// `InvalidArgument`: a malformed encoding, and a record naming a place in a blob file (only
    /// the write path makes those); a value with an expiration, as `put_until` encodes it, is
    /// taken.
    pub fn from_data(data: Vec<u8>) -> crate::Result<WriteBatch> {
        let bad =
            |why: String| crate::Error::InvalidArgument(format!("encoded write batch: {why}"));
        let mut batch =
            WriteBatch::from_bytes(data).ok_or_else(|| bad("shorter than its header".into()))?;
        let (mut cfs, mut invalid, mut partial_ops) = (Vec::new(), None, 0);
        batch
            .for_each(|r| {
                add_once(&mut cfs, r.cf);
                if invalid.is_some() {
                    return;
                }
                invalid = oversized_key(r.key.len()).or_else(|| match r.op {
                    Op::DeleteRange => oversized_key(r.value.len()),
                    Op::Point(ValueKind::BlobIndex) => (!matches!(
                        crate::blob::BlobIndex::decode(r.value),
                        Some(crate::blob::BlobIndex::Inline { .. })
                    ))
                    .then(|| "a record names a place in a blob file".to_string()),
                    Op::Point(_) => oversized_value(r.value.len()),
                    Op::Partial => {
                        partial_ops += 1;
                        match PartialOp::decode(r.value) {
                            Some(op) => op.invalid(r.key),
                            None => Some("a malformed partial write".to_string()),
                        }
                    }
                });
            })
            .map_err(bad)?;
        if let Some(why) = invalid {
            return Err(bad(why));
        }
        batch.cfs = cfs;
        batch.partial_ops = partial_ops;
        batch.set_sequence(0);
        Ok(batch)
    }

    /// Appends another batch's records (group commit merges the group into one WAL record).
    pub(crate) fn append_batch(&mut self, other: &WriteBatch) {
        self.partial_ops += other.partial_ops;
        self.rep.extend_from_slice(&other.rep[HEADER_SIZE..]);
        let count = fixed32(&self.rep, 8) + fixed32(&other.rep, 8);
        self.rep[8..12].copy_from_slice(&count.to_le_bytes());
        for &cf in &other.cfs {
            self.note_cf(cf);
        }
    }

    /// Rebuilds a batch from WAL bytes; `None` when it is too short to hold a header.
    pub(crate) fn from_bytes(data: Vec<u8>) -> Option<Self> {
        (data.len() >= HEADER_SIZE).then_some(WriteBatch {
            rep: data,
            invalid: None,
            cfs: Vec::new(),
            partial_ops: 0,
        })
    }

    /// Decodes the records; a structural error is returned as a message for the caller to attach a
    /// file name to.
    pub(crate) fn for_each(&self, mut f: impl FnMut(BatchRecord<'_>)) -> Result<(), String> {
        let mut seen = 0usize;
        let end = self.for_each_from(HEADER_SIZE, |_, r| {
            f(r);
            seen += 1;
        })?;
        debug_assert_eq!(end, self.rep.len());
        if seen != self.len() {
            return Err(format!(
                "write batch header says {} records but holds {seen}",
                self.len()
            ));
        }
        Ok(())
    }

    /// Calls `f(cf, index)` for each write of a value kept in blob files (an index that does not
    /// decode is left to the read that meets it).
    pub(crate) fn for_each_blob_index(
        &self,
        mut f: impl FnMut(u32, &crate::blob::BlobIndex<'_>),
    ) -> Result<(), String> {
        self.for_each(|r| {
            if r.op == Op::Point(ValueKind::BlobIndex)
                && let Some(index) = crate::blob::BlobIndex::decode(r.value)
            {
                f(r.cf, &index);
            }
        })
    }

    /// Decodes the records from byte `pos` (a record's start) on, each with its start; returns
    /// where the records end.
    pub(crate) fn for_each_from(
        &self,
        mut pos: usize,
        mut f: impl FnMut(usize, BatchRecord<'_>),
    ) -> Result<usize, String> {
        while pos < self.rep.len() {
            let (r, next) = self.record_at(pos)?;
            f(pos, r);
            pos = next;
        }
        Ok(pos)
    }

    /// The record starting at byte `pos`, and where the next one starts.
    pub(crate) fn record_at(&self, mut pos: usize) -> Result<(BatchRecord<'_>, usize), String> {
        let tag = *self.rep.get(pos).ok_or("truncated record")?;
        let op = match tag & !IN_DEFAULT_CF {
            RANGE_DELETION_KIND => Op::DeleteRange,
            PARTIAL_KIND => Op::Partial,
            b => Op::Point(
                ValueKind::from_u8(b)
                    .ok_or_else(|| format!("unknown record kind {tag} in write batch"))?,
            ),
        };
        pos += 1;
        let cf = if tag & IN_DEFAULT_CF != 0 {
            0
        } else {
            get_varint32(&self.rep, &mut pos).ok_or("truncated column family id")?
        };
        let key = get_length_prefixed(&self.rep, &mut pos).ok_or("truncated key")?;
        let value = match op {
            Op::Point(ValueKind::Put | ValueKind::BlobIndex) | Op::DeleteRange | Op::Partial => {
                get_length_prefixed(&self.rep, &mut pos).ok_or("truncated value")?
            }
            Op::Point(ValueKind::Delete) => &[],
        };
        if op == Op::DeleteRange && key >= value {
            return Err("range deletion with an empty or inverted range".into());
        }
        Ok((BatchRecord { op, cf, key, value }, pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_batch_decodes_to_the_same_records_and_bad_ones_are_refused() {
        let mut b = WriteBatch::new();
        b.put("a", "1");
        b.put_until("t", "v", 99);
        b.delete("b");
        b.delete_range("k", "m");
        b.set_sequence(7);
        let copy = WriteBatch::from_data(b.data().to_vec()).unwrap();
        assert_eq!(copy.len(), 4);
        assert_eq!(copy.sequence(), 0);
        assert_eq!(copy.data()[HEADER_SIZE..], b.data()[HEADER_SIZE..]);

        let refused = |data: Vec<u8>| WriteBatch::from_data(data).unwrap_err().to_string();
        assert!(refused(vec![0; 5]).contains("header"));
        let mut truncated = b.data().to_vec();
        truncated.pop();
        assert!(refused(truncated).contains("truncated"));
        let mut miscounted = b.data().to_vec();
        miscounted[8] = 9;
        assert!(refused(miscounted).contains("records"));
        let mut inverted = WriteBatch::new();
        inverted.add_record(RANGE_DELETION_KIND, 0, b"z", Some(b"a"));
        assert!(refused(inverted.data().to_vec()).contains("range"));
        let mut blob = WriteBatch::new();
        let index = crate::blob::encode_blob(
            0,
            crate::blob::BlobRef {
                file: 9,
                offset: 0,
                size: 10,
                stored: crate::blob::Stored::Raw,
            },
        );
        blob.put_blob_index(0, b"k", &index);
        assert!(refused(blob.data().to_vec()).contains("blob file"));
        let mut long_key = WriteBatch::new();
        long_key.add_record(1, 0, &vec![0; 9 << 20], Some(b"v"));
        long_key.invalid = None;
        assert!(WriteBatch::from_data(long_key.data().to_vec()).is_err());
    }

    /// A default-column-family record leaves its id out; one written with the id (as WALs before
    /// this form were) still reads; other column families keep theirs.
    #[test]
    fn default_column_family_records_omit_the_id_and_old_ones_still_read() {
        let mut b = WriteBatch::new();
        b.put("k", "v");
        assert_eq!(b.data().len(), HEADER_SIZE + 1 + 2 + 2, "kind, key, value");
        assert_eq!(b.data()[HEADER_SIZE], ValueKind::Put as u8 | IN_DEFAULT_CF);
        let mut old = b.data()[..HEADER_SIZE].to_vec();
        old.extend_from_slice(&[ValueKind::Put as u8, 0, 1, b'k', 1, b'v']);
        let mut other = WriteBatch::new();
        other.add_record(ValueKind::Delete as u8, 3, b"d", None);
        old.extend_from_slice(&other.data()[HEADER_SIZE..]);
        old[8] = 2;
        let mut seen = Vec::new();
        WriteBatch::from_bytes(old)
            .unwrap()
            .for_each(|r| seen.push((r.op, r.cf, r.key.to_vec(), r.value.to_vec())))
            .unwrap();
        assert_eq!(
            seen,
            vec![
                (Op::Point(ValueKind::Put), 0, b"k".to_vec(), b"v".to_vec()),
                (Op::Point(ValueKind::Delete), 3, b"d".to_vec(), vec![]),
            ]
        );
        let mut unknown = b.data().to_vec();
        unknown[HEADER_SIZE] = 0x7f | IN_DEFAULT_CF;
        assert!(WriteBatch::from_data(unknown).is_err());
    }

    #[test]
    fn round_trip_and_append() {
        let mut b = WriteBatch::new();
        b.put("a", "1");
        b.delete("b");
        b.delete_range("k", "m");
        let mut c = WriteBatch::new();
        c.put("c", "3");
        b.append_batch(&c);
        b.set_sequence(42);
        let copy = WriteBatch::from_bytes(b.data().to_vec()).unwrap();
        assert_eq!(copy.sequence(), 42);
        let mut seen = Vec::new();
        copy.for_each(|r| seen.push((r.op, r.key.to_vec(), r.value.to_vec())))
            .unwrap();
        assert_eq!(
            seen,
            vec![
                (Op::Point(ValueKind::Put), b"a".to_vec(), b"1".to_vec()),
                (Op::Point(ValueKind::Delete), b"b".to_vec(), vec![]),
                (Op::DeleteRange, b"k".to_vec(), b"m".to_vec()),
                (Op::Point(ValueKind::Put), b"c".to_vec(), b"3".to_vec()),
            ]
        );
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn a_batch_with_room_for_a_large_value_holds_it() {
        let value: Vec<u8> = (0..(PREFAULT_FROM + 12345)).map(|i| i as u8).collect();
        let mut b = WriteBatch::with_capacity(value.len() + 64);
        b.put("file", &value);
        let mut seen = Vec::new();
        b.for_each(|r| seen.push(r.value.to_vec())).unwrap();
        assert!(seen == [value], "the value reads back whole");
    }

    #[test]
    fn damaged_batch_is_an_error() {
        let mut b = WriteBatch::new();
        b.put("key", "value");
        let mut bytes = b.data().to_vec();
        bytes.truncate(bytes.len() - 2);
        assert!(
            WriteBatch::from_bytes(bytes)
                .unwrap()
                .for_each(|_| {})
                .is_err()
        );
        let mut bytes = b.data().to_vec();
        bytes[8] = 2; // count says 2
        assert!(
            WriteBatch::from_bytes(bytes)
                .unwrap()
                .for_each(|_| {})
                .is_err()
        );
    }

    #[test]
    fn empty_and_inverted_ranges_are_flagged() {
        for (start, end) in [("b", "b"), ("c", "a")] {
            let mut b = WriteBatch::new();
            b.delete_range(start, end);
            assert!(
                b.validation_error().unwrap().contains("empty or inverted"),
                "{start}..{end}"
            );
        }
        let mut b = WriteBatch::new();
        b.delete_range("a", "a\0");
        assert!(b.validation_error().is_none());
        // A damaged record with an inverted range is refused on decode too.
        let mut b = WriteBatch::new();
        b.delete_range("a", "b");
        let mut bytes = b.data().to_vec();
        let n = bytes.len();
        bytes.swap(n - 3, n - 1); // the record ends `1 'a' 1 'b'`: now start "b", end "a"
        let damaged = WriteBatch::from_bytes(bytes).unwrap();
        assert!(damaged.for_each(|_| {}).unwrap_err().contains("inverted"));
    }

    #[test]
    fn oversized_key_is_flagged() {
        let mut b = WriteBatch::new();
        b.put(vec![0u8; crate::options::MAX_KEY_SIZE + 1], "v");
        assert!(b.validation_error().unwrap().contains("key"));
    }
}
