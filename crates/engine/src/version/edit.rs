//! Version edits: the records of the MANIFEST. Each is a sequence of tagged fields, so new fields can
//! be added without breaking old stores.

use std::path::Path;

use crate::coding::{
    get_length_prefixed, get_varint32, get_varint64, put_length_prefixed, put_varint32,
    put_varint64,
};
use crate::error::{Error, Result};
use crate::options::{ColumnFamilyOptions, Compression};
use crate::sst::{BlobReference, decode_blob_references, encode_blob_references};

const TAG_LOG_NUMBER: u32 = 2;
const TAG_NEXT_FILE: u32 = 3;
const TAG_LAST_SEQUENCE: u32 = 4;
const TAG_NEW_FILE: u32 = 5;
const TAG_DELETED_FILE: u32 = 6;
const TAG_COLUMN_FAMILY: u32 = 7;
const TAG_ADD_COLUMN_FAMILY: u32 = 8;
const TAG_DROP_COLUMN_FAMILY: u32 = 9;
const TAG_MAX_COLUMN_FAMILY: u32 = 10;
const TAG_COLUMN_FAMILY_OPTIONS: u32 = 11;
/// A new file holding range tombstones: `TAG_NEW_FILE`'s fields plus their count.
const TAG_NEW_FILE_WITH_RANGE_DELETIONS: u32 = 12;
/// A blob file of the edit's column family: its number.
const TAG_BLOB_FILE_ADDED: u32 = 13;
/// Garbage found in a blob file: number, bytes (added to what is recorded).
const TAG_BLOB_GARBAGE: u32 = 14;
/// Blob references added: (number, bytes) of records extent lists borrow.
const TAG_BLOB_REFS: u32 = 20;
/// A blob file evicted by FIFO: number, the last sequence number when it was evicted.
const TAG_BLOB_FILE_EVICTED: u32 = 15;
/// A blob file deleted (wholly garbage, or expired): number.
const TAG_BLOB_FILE_DELETED: u32 = 16;
/// In the first record of a MANIFEST: how many records the snapshot it opens with holds (this one
/// included). The snapshot is synced before CURRENT names the file, so a recovery that finds fewer
/// knows the file is damaged, not torn by a crash.
const TAG_SNAPSHOT_RECORDS: u32 = 17;
const TAG_SEALED_WALS_FROM: u32 = 18;
/// The blob files a table added by the same edit points into: table number, then references.
const TAG_TABLE_BLOB_REFERENCES: u32 = 19;

/// A table as the MANIFEST records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileMetaData {
    pub number: u64,
    pub file_size: u64,
    /// Smallest and largest internal keys.
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub smallest_seq: u64,
    pub largest_seq: u64,
    pub num_entries: u64,
    pub num_deletions: u64,
    /// Range tombstones in the table's range-deletion block.
    pub num_range_deletions: u64,
    /// Blob files its entries point into.
    pub blob_references: Vec<BlobReference>,
}

impl FileMetaData {
    /// Whether `user_key` lies in the table's key range.
    pub(crate) fn covers(&self, user_key: &[u8]) -> bool {
        use crate::key::{self, compare_bytes};
        compare_bytes(user_key, key::user_key(&self.smallest)).is_ge()
            && compare_bytes(user_key, key::user_key(&self.largest)).is_le()
    }

    /// A one-entry table over `[lo, hi]` at sequence 1, for tests of levels and picking.
    #[cfg(test)]
    pub(crate) fn for_test(number: u64, lo: &str, hi: &str, file_size: u64) -> Self {
        FileMetaData {
            number,
            file_size,
            smallest: crate::key::internal_key(lo.as_bytes(), 1, 1),
            largest: crate::key::internal_key(hi.as_bytes(), 1, 1),
            smallest_seq: 1,
            largest_seq: 1,
            num_entries: 1,
            num_deletions: 0,
            num_range_deletions: 0,
            blob_references: Vec::new(),
        }
    }

    /// The MANIFEST's record of a table just written.
    pub(crate) fn from_table(
        number: u64,
        file_size: u64,
        props: crate::sst::TableProperties,
    ) -> Self {
        FileMetaData {
            number,
            file_size,
            smallest: props.smallest_key,
            largest: props.largest_key,
            smallest_seq: props.smallest_seq,
            largest_seq: props.largest_seq,
            num_entries: props.num_entries,
            num_deletions: props.num_deletions,
            num_range_deletions: props.num_range_deletions,
            blob_references: props.blob_references,
        }
    }
}

/// A change to the set of live files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VersionEdit {
    /// The column family the edit applies to (0 is the default one).
    pub column_family: u32,
    /// Creates `column_family` with this name.
    pub add_column_family: Option<String>,
    /// Drops `column_family`.
    pub drop_column_family: bool,
    /// `column_family`'s options, encoded by [`encode_cf_options`].
    pub cf_options: Option<Vec<u8>>,
    /// The largest column family id ever handed out (ids are never reused).
    pub max_column_family: Option<u32>,
    /// WAL files below this number hold nothing of `column_family` that is not in its tables.
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_sequence: Option<u64>,
    pub new_files: Vec<(usize, FileMetaData)>,
    pub deleted_files: Vec<(usize, u64)>,
    /// Blob files created for `column_family`.
    pub blob_files_added: Vec<u64>,
    /// (blob file, bytes) of records no index points at any more.
    pub blob_garbage: Vec<(u64, u64)>,
    /// (blob file, bytes) of records that entries borrow besides their own index: counted as
    /// references, so the file stays until garbage covers them too.
    pub blob_refs_added: Vec<(u64, u64)>,
    /// (blob file, last sequence number at eviction) evicted by FIFO.
    pub blob_files_evicted: Vec<(u64, u64)>,
    /// Blob files deleted.
    pub blob_files_deleted: Vec<u64>,
    /// Records of the snapshot a MANIFEST starts with (set in its first record only).
    pub snapshot_records: Option<u64>,
    /// WALs numbered from this one on end in a seal when a newer WAL replaces them (set in a
    /// MANIFEST's first record; absent in stores written before seals).
    pub sealed_wals_from: Option<u64>,
}

impl VersionEdit {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.column_family != 0 {
            put_varint32(&mut out, TAG_COLUMN_FAMILY);
            put_varint32(&mut out, self.column_family);
        }
        if let Some(name) = &self.add_column_family {
            put_varint32(&mut out, TAG_ADD_COLUMN_FAMILY);
            put_length_prefixed(&mut out, name.as_bytes());
        }
        if self.drop_column_family {
            put_varint32(&mut out, TAG_DROP_COLUMN_FAMILY);
        }
        if let Some(o) = &self.cf_options {
            put_varint32(&mut out, TAG_COLUMN_FAMILY_OPTIONS);
            put_length_prefixed(&mut out, o);
        }
        if let Some(m) = self.max_column_family {
            put_varint32(&mut out, TAG_MAX_COLUMN_FAMILY);
            put_varint32(&mut out, m);
        }
        for (tag, v) in [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
            (TAG_SNAPSHOT_RECORDS, self.snapshot_records),
            (TAG_SEALED_WALS_FROM, self.sealed_wals_from),
        ] {
            if let Some(v) = v {
                put_varint32(&mut out, tag);
                put_varint64(&mut out, v);
            }
        }
        for (level, number) in &self.deleted_files {
            put_varint32(&mut out, TAG_DELETED_FILE);
            put_varint32(&mut out, *level as u32);
            put_varint64(&mut out, *number);
        }
        for n in &self.blob_files_added {
            put_varint32(&mut out, TAG_BLOB_FILE_ADDED);
            put_varint64(&mut out, *n);
        }
        for (tag, list) in [
            (TAG_BLOB_GARBAGE, &self.blob_garbage),
            (TAG_BLOB_REFS, &self.blob_refs_added),
            (TAG_BLOB_FILE_EVICTED, &self.blob_files_evicted),
        ] {
            for (n, v) in list {
                put_varint32(&mut out, tag);
                put_varint64(&mut out, *n);
                put_varint64(&mut out, *v);
            }
        }
        for n in &self.blob_files_deleted {
            put_varint32(&mut out, TAG_BLOB_FILE_DELETED);
            put_varint64(&mut out, *n);
        }
        for (level, f) in &self.new_files {
            // Files without range tombstones keep the older record, which older code reads.
            let tag = if f.num_range_deletions > 0 {
                TAG_NEW_FILE_WITH_RANGE_DELETIONS
            } else {
                TAG_NEW_FILE
            };
            put_varint32(&mut out, tag);
            put_varint32(&mut out, *level as u32);
            put_varint64(&mut out, f.number);
            put_varint64(&mut out, f.file_size);
            put_length_prefixed(&mut out, &f.smallest);
            put_length_prefixed(&mut out, &f.largest);
            put_varint64(&mut out, f.smallest_seq);
            put_varint64(&mut out, f.largest_seq);
            put_varint64(&mut out, f.num_entries);
            put_varint64(&mut out, f.num_deletions);
            if tag == TAG_NEW_FILE_WITH_RANGE_DELETIONS {
                put_varint64(&mut out, f.num_range_deletions);
            }
            if !f.blob_references.is_empty() {
                put_varint32(&mut out, TAG_TABLE_BLOB_REFERENCES);
                put_varint64(&mut out, f.number);
                encode_blob_references(&f.blob_references, &mut out);
            }
        }
        out
    }

    pub(crate) fn decode(data: &[u8], file: &Path) -> Result<Self> {
        let bad = |what: &str| Error::corruption(file, format!("version edit: {what}"));
        let mut e = VersionEdit::default();
        let mut pos = 0;
        while pos < data.len() {
            let tag = get_varint32(data, &mut pos).ok_or_else(|| bad("truncated tag"))?;
            let v64 =
                |pos: &mut usize| get_varint64(data, pos).ok_or_else(|| bad("truncated field"));
            match tag {
                TAG_COLUMN_FAMILY => {
                    e.column_family = get_varint32(data, &mut pos)
                        .ok_or_else(|| bad("truncated column family"))?
                }
                TAG_ADD_COLUMN_FAMILY => {
                    let name = get_length_prefixed(data, &mut pos)
                        .ok_or_else(|| bad("truncated column family name"))?;
                    let name = std::str::from_utf8(name)
                        .map_err(|_| bad("column family name is not UTF-8"))?;
                    e.add_column_family = Some(name.to_string());
                }
                TAG_DROP_COLUMN_FAMILY => e.drop_column_family = true,
                TAG_COLUMN_FAMILY_OPTIONS => {
                    let o = get_length_prefixed(data, &mut pos)
                        .ok_or_else(|| bad("truncated column family options"))?;
                    e.cf_options = Some(o.to_vec());
                }
                TAG_MAX_COLUMN_FAMILY => {
                    e.max_column_family = Some(
                        get_varint32(data, &mut pos)
                            .ok_or_else(|| bad("truncated max column family"))?,
                    )
                }
                TAG_LOG_NUMBER => e.log_number = Some(v64(&mut pos)?),
                TAG_NEXT_FILE => e.next_file_number = Some(v64(&mut pos)?),
                TAG_LAST_SEQUENCE => e.last_sequence = Some(v64(&mut pos)?),
                TAG_SNAPSHOT_RECORDS => e.snapshot_records = Some(v64(&mut pos)?),
                TAG_SEALED_WALS_FROM => e.sealed_wals_from = Some(v64(&mut pos)?),
                TAG_DELETED_FILE => {
                    let level = decode_level(data, &mut pos).ok_or_else(|| bad("bad level"))?;
                    e.deleted_files.push((level, v64(&mut pos)?));
                }
                TAG_NEW_FILE | TAG_NEW_FILE_WITH_RANGE_DELETIONS => {
                    let level = decode_level(data, &mut pos).ok_or_else(|| bad("bad level"))?;
                    let number = v64(&mut pos)?;
                    let file_size = v64(&mut pos)?;
                    let smallest = get_length_prefixed(data, &mut pos)
                        .ok_or_else(|| bad("truncated key"))?
                        .to_vec();
                    let largest = get_length_prefixed(data, &mut pos)
                        .ok_or_else(|| bad("truncated key"))?
                        .to_vec();
                    if smallest.len() < 8 || largest.len() < 8 {
                        return Err(bad("file key shorter than an internal key"));
                    }
                    let mut f = FileMetaData {
                        number,
                        file_size,
                        smallest,
                        largest,
                        smallest_seq: v64(&mut pos)?,
                        largest_seq: v64(&mut pos)?,
                        num_entries: v64(&mut pos)?,
                        num_deletions: v64(&mut pos)?,
                        num_range_deletions: 0,
                        blob_references: Vec::new(),
                    };
                    if tag == TAG_NEW_FILE_WITH_RANGE_DELETIONS {
                        f.num_range_deletions = v64(&mut pos)?;
                    }
                    e.new_files.push((level, f));
                }
                TAG_TABLE_BLOB_REFERENCES => {
                    let number = v64(&mut pos)?;
                    let refs = decode_blob_references(data, &mut pos)
                        .ok_or_else(|| bad("truncated blob references"))?;
                    let (_, f) = e
                        .new_files
                        .iter_mut()
                        .find(|(_, f)| f.number == number)
                        .ok_or_else(|| bad("blob references of a table the edit does not add"))?;
                    f.blob_references = refs;
                }
                TAG_BLOB_FILE_ADDED => e.blob_files_added.push(v64(&mut pos)?),
                TAG_BLOB_GARBAGE => {
                    let n = v64(&mut pos)?;
                    e.blob_garbage.push((n, v64(&mut pos)?));
                }
                TAG_BLOB_REFS => {
                    let n = v64(&mut pos)?;
                    e.blob_refs_added.push((n, v64(&mut pos)?));
                }
                TAG_BLOB_FILE_EVICTED => {
                    let n = v64(&mut pos)?;
                    e.blob_files_evicted.push((n, v64(&mut pos)?));
                }
                TAG_BLOB_FILE_DELETED => e.blob_files_deleted.push(v64(&mut pos)?),
                other => return Err(bad(&format!("unknown tag {other}"))),
            }
        }
        Ok(e)
    }
}

// Column family options as (field id, value) pairs, so that fields can be added (and unknown ones
// skipped) without breaking old stores. Floats are stored as their IEEE bits.
const OPT_WRITE_BUFFER_SIZE: u32 = 1;
const OPT_MAX_WRITE_BUFFER_NUMBER: u32 = 2;
const OPT_BLOCK_SIZE: u32 = 3;
const OPT_BLOCK_RESTART_INTERVAL: u32 = 4;
const OPT_COMPRESSION: u32 = 5;
const OPT_ZSTD_LEVEL: u32 = 6;
const OPT_BLOOM_BITS_PER_KEY: u32 = 7;
const OPT_MEMTABLE_BLOOM_SIZE_RATIO: u32 = 8;
const OPT_MEMTABLE_WHOLE_KEY_FILTERING: u32 = 9;
const OPT_L0_COMPACTION_TRIGGER: u32 = 10;
const OPT_L0_SLOWDOWN_TRIGGER: u32 = 11;
const OPT_L0_STOP_TRIGGER: u32 = 12;
const OPT_MAX_BYTES_FOR_LEVEL_BASE: u32 = 13;
const OPT_LEVEL_MULTIPLIER: u32 = 14;
const OPT_DYNAMIC_LEVEL_BYTES: u32 = 15;
const OPT_TARGET_FILE_SIZE_BASE: u32 = 16;
const OPT_SOFT_PENDING_LIMIT: u32 = 17;
const OPT_HARD_PENDING_LIMIT: u32 = 18;
const OPT_DISABLE_AUTO_COMPACTIONS: u32 = 19;
const OPT_ENABLE_BLOB_FILES: u32 = 20;
const OPT_MIN_BLOB_SIZE: u32 = 21;
const OPT_BLOB_FILE_SIZE: u32 = 22;
const OPT_BLOB_COMPRESSION: u32 = 23;
const OPT_TTL_RANGE_SECS: u32 = 24;
const OPT_MAX_DB_SIZE: u32 = 25;
const OPT_BLOB_GC: u32 = 26;
const OPT_BLOB_GC_AGE_CUTOFF: u32 = 27;

/// Encodes every recorded field of `o` (all but the compaction filter).
pub(crate) fn encode_cf_options(o: &ColumnFamilyOptions) -> Vec<u8> {
    let fields = [
        (OPT_WRITE_BUFFER_SIZE, o.write_buffer_size as u64),
        (
            OPT_MAX_WRITE_BUFFER_NUMBER,
            o.max_write_buffer_number as u64,
        ),
        (OPT_BLOCK_SIZE, o.block_size as u64),
        (OPT_BLOCK_RESTART_INTERVAL, o.block_restart_interval as u64),
        (OPT_COMPRESSION, compression_code(o.compression)),
        (OPT_ZSTD_LEVEL, o.zstd_level as u64),
        (OPT_BLOOM_BITS_PER_KEY, o.bloom_bits_per_key as u64),
        (
            OPT_MEMTABLE_BLOOM_SIZE_RATIO,
            o.memtable_bloom_size_ratio.to_bits(),
        ),
        (
            OPT_MEMTABLE_WHOLE_KEY_FILTERING,
            o.memtable_whole_key_filtering as u64,
        ),
        (
            OPT_L0_COMPACTION_TRIGGER,
            o.level0_file_num_compaction_trigger as u64,
        ),
        (
            OPT_L0_SLOWDOWN_TRIGGER,
            o.level0_slowdown_writes_trigger as u64,
        ),
        (OPT_L0_STOP_TRIGGER, o.level0_stop_writes_trigger as u64),
        (OPT_MAX_BYTES_FOR_LEVEL_BASE, o.max_bytes_for_level_base),
        (OPT_LEVEL_MULTIPLIER, o.max_bytes_for_level_multiplier),
        (
            OPT_DYNAMIC_LEVEL_BYTES,
            o.level_compaction_dynamic_level_bytes as u64,
        ),
        (OPT_TARGET_FILE_SIZE_BASE, o.target_file_size_base),
        (
            OPT_SOFT_PENDING_LIMIT,
            o.soft_pending_compaction_bytes_limit,
        ),
        (
            OPT_HARD_PENDING_LIMIT,
            o.hard_pending_compaction_bytes_limit,
        ),
        (
            OPT_DISABLE_AUTO_COMPACTIONS,
            o.disable_auto_compactions as u64,
        ),
        (OPT_ENABLE_BLOB_FILES, o.enable_blob_files as u64),
        (OPT_MIN_BLOB_SIZE, o.min_blob_size as u64),
        (OPT_BLOB_FILE_SIZE, o.blob_file_size),
        (OPT_BLOB_COMPRESSION, compression_code(o.blob_compression)),
        (OPT_TTL_RANGE_SECS, o.ttl_range_secs),
        (OPT_MAX_DB_SIZE, o.max_db_size),
        (OPT_BLOB_GC, o.enable_blob_garbage_collection as u64),
        (
            OPT_BLOB_GC_AGE_CUTOFF,
            o.blob_garbage_collection_age_cutoff.to_bits(),
        ),
    ];
    let mut out = Vec::new();
    for (id, v) in fields {
        put_varint32(&mut out, id);
        put_varint64(&mut out, v);
    }
    out
}

/// Decodes options written by [`encode_cf_options`]; fields it does not name keep their defaults
/// and unknown fields are skipped. The result is validated like options passed to `create_cf`.
pub(crate) fn decode_cf_options(data: &[u8], file: &Path) -> Result<ColumnFamilyOptions> {
    let bad = |what: &str| Error::corruption(file, format!("column family options: {what}"));
    let mut o = ColumnFamilyOptions::default();
    let mut pos = 0;
    while pos < data.len() {
        let id = get_varint32(data, &mut pos).ok_or_else(|| bad("truncated field id"))?;
        let v = get_varint64(data, &mut pos).ok_or_else(|| bad("truncated value"))?;
        let size = || usize::try_from(v).map_err(|_| bad("value out of range"));
        match id {
            OPT_WRITE_BUFFER_SIZE => o.write_buffer_size = size()?,
            OPT_MAX_WRITE_BUFFER_NUMBER => o.max_write_buffer_number = size()?,
            OPT_BLOCK_SIZE => o.block_size = size()?,
            OPT_BLOCK_RESTART_INTERVAL => o.block_restart_interval = size()?,
            OPT_COMPRESSION => {
                o.compression = compression_from(v).ok_or_else(|| bad("unknown compression"))?
            }
            OPT_BLOB_COMPRESSION => {
                o.blob_compression =
                    compression_from(v).ok_or_else(|| bad("unknown blob compression"))?
            }
            OPT_ENABLE_BLOB_FILES => o.enable_blob_files = v != 0,
            OPT_MIN_BLOB_SIZE => o.min_blob_size = size()?,
            OPT_BLOB_FILE_SIZE => o.blob_file_size = v,
            OPT_TTL_RANGE_SECS => o.ttl_range_secs = v,
            OPT_MAX_DB_SIZE => o.max_db_size = v,
            OPT_BLOB_GC => o.enable_blob_garbage_collection = v != 0,
            OPT_BLOB_GC_AGE_CUTOFF => o.blob_garbage_collection_age_cutoff = f64::from_bits(v),
            OPT_ZSTD_LEVEL => {
                o.zstd_level = i32::try_from(v).map_err(|_| bad("zstd level out of range"))?
            }
            OPT_BLOOM_BITS_PER_KEY => {
                o.bloom_bits_per_key =
                    u32::try_from(v).map_err(|_| bad("bloom bits out of range"))?
            }
            OPT_MEMTABLE_BLOOM_SIZE_RATIO => o.memtable_bloom_size_ratio = f64::from_bits(v),
            OPT_MEMTABLE_WHOLE_KEY_FILTERING => o.memtable_whole_key_filtering = v != 0,
            OPT_L0_COMPACTION_TRIGGER => o.level0_file_num_compaction_trigger = size()?,
            OPT_L0_SLOWDOWN_TRIGGER => o.level0_slowdown_writes_trigger = size()?,
            OPT_L0_STOP_TRIGGER => o.level0_stop_writes_trigger = size()?,
            OPT_MAX_BYTES_FOR_LEVEL_BASE => o.max_bytes_for_level_base = v,
            OPT_LEVEL_MULTIPLIER => o.max_bytes_for_level_multiplier = v,
            OPT_DYNAMIC_LEVEL_BYTES => o.level_compaction_dynamic_level_bytes = v != 0,
            OPT_TARGET_FILE_SIZE_BASE => o.target_file_size_base = v,
            OPT_SOFT_PENDING_LIMIT => o.soft_pending_compaction_bytes_limit = v,
            OPT_HARD_PENDING_LIMIT => o.hard_pending_compaction_bytes_limit = v,
            OPT_DISABLE_AUTO_COMPACTIONS => o.disable_auto_compactions = v != 0,
            _ => {}
        }
    }
    o.validate()
        .map_err(|e| bad(&format!("recorded options are invalid: {e}")))?;
    Ok(o)
}

fn compression_code(c: Compression) -> u64 {
    match c {
        Compression::None => 0,
        Compression::Zstd => 1,
    }
}

fn compression_from(v: u64) -> Option<Compression> {
    match v {
        0 => Some(Compression::None),
        1 => Some(Compression::Zstd),
        _ => None,
    }
}

fn decode_level(data: &[u8], pos: &mut usize) -> Option<usize> {
    let level = get_varint32(data, pos)? as usize;
    (level < super::NUM_LEVELS).then_some(level)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;

    #[test]
    fn round_trip() {
        let e = VersionEdit {
            column_family: 3,
            add_column_family: Some("users".into()),
            drop_column_family: true,
            cf_options: Some(vec![1, 2, 3]),
            max_column_family: Some(7),
            log_number: Some(9),
            next_file_number: Some(12),
            last_sequence: Some(1000),
            new_files: vec![
                (
                    0,
                    FileMetaData {
                        number: 11,
                        file_size: 4096,
                        smallest: internal_key(b"a", 5, 1),
                        largest: internal_key(b"z", 7, 0),
                        smallest_seq: 5,
                        largest_seq: 7,
                        num_entries: 3,
                        num_deletions: 1,
                        num_range_deletions: 0,
                        blob_references: vec![BlobReference {
                            blob_file: 20,
                            indexes: 2,
                        }],
                    },
                ),
                (
                    2,
                    FileMetaData {
                        number: 13,
                        file_size: 100,
                        smallest: internal_key(b"b", 8, 2),
                        largest: internal_key(b"c", crate::key::MAX_SEQUENCE, 2),
                        smallest_seq: 8,
                        largest_seq: 8,
                        num_entries: 0,
                        num_deletions: 0,
                        num_range_deletions: 1,
                        blob_references: Vec::new(),
                    },
                ),
            ],
            deleted_files: vec![(1, 4)],
            blob_files_added: vec![20, 21],
            blob_garbage: vec![(20, 4117), (5, 1)],
            blob_refs_added: vec![(20, 9000)],
            blob_files_evicted: vec![(3, 999)],
            blob_files_deleted: vec![4],
            snapshot_records: Some(3),
            sealed_wals_from: Some(4450),
        };
        let p = Path::new("MANIFEST-000001");
        assert_eq!(VersionEdit::decode(&e.encode(), p).unwrap(), e);
        let enc = e.encode();
        for cut in 1..enc.len() {
            // Every truncation either decodes to a prefix of the fields or is reported; never panics.
            let _ = VersionEdit::decode(&enc[..cut], p);
        }
        assert!(VersionEdit::decode(&[99], p).unwrap_err().is_corruption());
    }

    #[test]
    fn cf_options_round_trip() {
        let o = ColumnFamilyOptions {
            write_buffer_size: 1 << 20,
            compression: Compression::None,
            memtable_bloom_size_ratio: 0.1,
            level_compaction_dynamic_level_bytes: false,
            target_file_size_base: 12345,
            enable_blob_files: true,
            min_blob_size: 999,
            ttl_range_secs: 60,
            max_db_size: 1 << 30,
            blob_garbage_collection_age_cutoff: 0.5,
            ..Default::default()
        };
        let p = Path::new("MANIFEST-000001");
        let back = decode_cf_options(&encode_cf_options(&o), p).unwrap();
        assert_eq!(encode_cf_options(&back), encode_cf_options(&o));
        assert_eq!(back.write_buffer_size, 1 << 20);
        assert_eq!(back.memtable_bloom_size_ratio, 0.1);
        assert!(back.enable_blob_files);
        assert_eq!((back.min_blob_size, back.ttl_range_secs), (999, 60));
        assert_eq!(back.blob_garbage_collection_age_cutoff, 0.5);
        // An unknown field is skipped; invalid recorded values are corruption, not a panic.
        let mut unknown = encode_cf_options(&o);
        unknown.extend_from_slice(&[99, 5]);
        assert!(decode_cf_options(&unknown, p).is_ok());
        assert!(decode_cf_options(&[1, 0], p).unwrap_err().is_corruption());
        assert!(decode_cf_options(&[1], p).unwrap_err().is_corruption());
    }
}
