//! The properties block: what a table holds, recorded when it is built.
//!
//! Encoding: a sequence of `name: length-prefixed | value: varint64` pairs, plus the smallest and
//! largest internal keys, and the blob references, as length-prefixed byte strings under their
//! names. Unknown names are skipped, so later versions can add properties.

use serde::Serialize;

use crate::coding::{get_length_prefixed, get_varint64, put_length_prefixed, put_varint64};

/// Blob indexes of a table that point into one blob file.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BlobReference {
    /// The blob file's number (`<number>.blob`).
    pub blob_file: u64,
    /// Entries of the table whose value lives in that file.
    pub indexes: u64,
}

/// `count: varint64 | (blob file, indexes: varint64)*`.
pub(crate) fn encode_blob_references(refs: &[BlobReference], out: &mut Vec<u8>) {
    put_varint64(out, refs.len() as u64);
    for r in refs {
        put_varint64(out, r.blob_file);
        put_varint64(out, r.indexes);
    }
}

pub(crate) fn decode_blob_references(data: &[u8], pos: &mut usize) -> Option<Vec<BlobReference>> {
    let n = get_varint64(data, pos)?;
    // Each reference takes at least two bytes: a count past that is damage, not a size to trust.
    if n > (data.len() - *pos) as u64 / 2 {
        return None;
    }
    (0..n)
        .map(|_| {
            Some(BlobReference {
                blob_file: get_varint64(data, pos)?,
                indexes: get_varint64(data, pos)?,
            })
        })
        .collect()
}

/// What a table holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableProperties {
    /// Entries, deletions included.
    pub num_entries: u64,
    /// Point deletions.
    pub num_deletions: u64,
    /// Range deletions, kept in the range-deletion block (not counted in `num_entries`).
    pub num_range_deletions: u64,
    /// Data blocks.
    pub num_data_blocks: u64,
    /// Bytes of user keys (before prefix compression).
    pub raw_key_size: u64,
    /// Bytes of values.
    pub raw_value_size: u64,
    /// Bytes of data blocks on disk.
    pub data_size: u64,
    /// Bytes of the index block on disk.
    pub index_size: u64,
    /// Bytes of the filter block on disk.
    pub filter_size: u64,
    /// Smallest sequence number in the table.
    pub smallest_seq: u64,
    /// Largest sequence number in the table.
    pub largest_seq: u64,
    /// 1 when blocks may be zstd-compressed.
    pub compression: u64,
    /// The id of the column family the table was written for (0 in tables from before it was
    /// recorded).
    pub column_family: u64,
    /// Blob files its entries point into, by number.
    pub blob_references: Vec<BlobReference>,
    /// Smallest internal key.
    #[serde(skip)]
    pub smallest_key: Vec<u8>,
    /// Largest internal key.
    #[serde(skip)]
    pub largest_key: Vec<u8>,
}

impl TableProperties {
    fn numbers(&self) -> [(&'static str, u64); 13] {
        [
            ("strata.num.entries", self.num_entries),
            ("strata.num.deletions", self.num_deletions),
            ("strata.num.range-deletions", self.num_range_deletions),
            ("strata.num.data.blocks", self.num_data_blocks),
            ("strata.raw.key.size", self.raw_key_size),
            ("strata.raw.value.size", self.raw_value_size),
            ("strata.data.size", self.data_size),
            ("strata.index.size", self.index_size),
            ("strata.filter.size", self.filter_size),
            ("strata.smallest.seq", self.smallest_seq),
            ("strata.largest.seq", self.largest_seq),
            ("strata.compression", self.compression),
            ("strata.column.family", self.column_family),
        ]
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, v) in self.numbers() {
            put_length_prefixed(&mut out, name.as_bytes());
            put_varint64(&mut out, v);
        }
        for (name, k) in [
            ("strata.smallest.key", &self.smallest_key),
            ("strata.largest.key", &self.largest_key),
        ] {
            put_length_prefixed(&mut out, name.as_bytes());
            put_length_prefixed(&mut out, k);
        }
        if !self.blob_references.is_empty() {
            let mut refs = Vec::new();
            encode_blob_references(&self.blob_references, &mut refs);
            put_length_prefixed(&mut out, b"strata.blob.references");
            put_length_prefixed(&mut out, &refs);
        }
        out
    }

    pub(crate) fn decode(data: &[u8]) -> Option<Self> {
        let mut p = TableProperties::default();
        let mut pos = 0;
        while pos < data.len() {
            let name = get_length_prefixed(data, &mut pos)?;
            match name {
                b"strata.smallest.key" => {
                    p.smallest_key = get_length_prefixed(data, &mut pos)?.to_vec()
                }
                b"strata.largest.key" => {
                    p.largest_key = get_length_prefixed(data, &mut pos)?.to_vec()
                }
                b"strata.blob.references" => {
                    let refs = get_length_prefixed(data, &mut pos)?;
                    let mut at = 0;
                    p.blob_references = decode_blob_references(refs, &mut at)?;
                }
                _ => {
                    let v = get_varint64(data, &mut pos)?;
                    match name {
                        b"strata.num.entries" => p.num_entries = v,
                        b"strata.num.deletions" => p.num_deletions = v,
                        b"strata.num.range-deletions" => p.num_range_deletions = v,
                        b"strata.num.data.blocks" => p.num_data_blocks = v,
                        b"strata.raw.key.size" => p.raw_key_size = v,
                        b"strata.raw.value.size" => p.raw_value_size = v,
                        b"strata.data.size" => p.data_size = v,
                        b"strata.index.size" => p.index_size = v,
                        b"strata.filter.size" => p.filter_size = v,
                        b"strata.smallest.seq" => p.smallest_seq = v,
                        b"strata.largest.seq" => p.largest_seq = v,
                        b"strata.compression" => p.compression = v,
                        b"strata.column.family" => p.column_family = v,
                        _ => {}
                    }
                }
            }
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let p = TableProperties {
            num_entries: 10,
            num_deletions: 2,
            num_range_deletions: 3,
            largest_seq: 99,
            column_family: 7,
            blob_references: vec![
                BlobReference {
                    blob_file: 12,
                    indexes: 400,
                },
                BlobReference {
                    blob_file: 15,
                    indexes: 1,
                },
            ],
            smallest_key: b"a\0\0\0\0\0\0\0\0".to_vec(),
            largest_key: b"z\0\0\0\0\0\0\0\0".to_vec(),
            ..Default::default()
        };
        assert_eq!(TableProperties::decode(&p.encode()), Some(p));
        assert_eq!(TableProperties::decode(&[5, b'a']), None);
    }
}
