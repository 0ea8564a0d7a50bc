//! Version edits: the records of the MANIFEST. Each is a sequence of tagged fields, so new fields can
//! be added without breaking old stores.

use std::path::Path;

use crate::coding::{
    get_length_prefixed, get_varint32, get_varint64, put_length_prefixed, put_varint32,
    put_varint64,
};
use crate::error::{Error, Result};

const TAG_LOG_NUMBER: u32 = 2;
const TAG_NEXT_FILE: u32 = 3;
const TAG_LAST_SEQUENCE: u32 = 4;
const TAG_NEW_FILE: u32 = 5;
const TAG_DELETED_FILE: u32 = 6;
const TAG_COLUMN_FAMILY: u32 = 7;

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
}

impl FileMetaData {
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
        }
    }
}

/// A change to the set of live files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VersionEdit {
    /// The column family the file changes apply to (0 is the default one).
    pub column_family: u32,
    /// WAL files below this number hold nothing unflushed.
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_sequence: Option<u64>,
    pub new_files: Vec<(usize, FileMetaData)>,
    pub deleted_files: Vec<(usize, u64)>,
}

impl VersionEdit {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.column_family != 0 {
            put_varint32(&mut out, TAG_COLUMN_FAMILY);
            put_varint32(&mut out, self.column_family);
        }
        for (tag, v) in [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
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
        for (level, f) in &self.new_files {
            put_varint32(&mut out, TAG_NEW_FILE);
            put_varint32(&mut out, *level as u32);
            put_varint64(&mut out, f.number);
            put_varint64(&mut out, f.file_size);
            put_length_prefixed(&mut out, &f.smallest);
            put_length_prefixed(&mut out, &f.largest);
            put_varint64(&mut out, f.smallest_seq);
            put_varint64(&mut out, f.largest_seq);
            put_varint64(&mut out, f.num_entries);
            put_varint64(&mut out, f.num_deletions);
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
                TAG_LOG_NUMBER => e.log_number = Some(v64(&mut pos)?),
                TAG_NEXT_FILE => e.next_file_number = Some(v64(&mut pos)?),
                TAG_LAST_SEQUENCE => e.last_sequence = Some(v64(&mut pos)?),
                TAG_DELETED_FILE => {
                    let level = decode_level(data, &mut pos).ok_or_else(|| bad("bad level"))?;
                    e.deleted_files.push((level, v64(&mut pos)?));
                }
                TAG_NEW_FILE => {
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
                    e.new_files.push((
                        level,
                        FileMetaData {
                            number,
                            file_size,
                            smallest,
                            largest,
                            smallest_seq: v64(&mut pos)?,
                            largest_seq: v64(&mut pos)?,
                            num_entries: v64(&mut pos)?,
                            num_deletions: v64(&mut pos)?,
                        },
                    ));
                }
                other => return Err(bad(&format!("unknown tag {other}"))),
            }
        }
        Ok(e)
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
            log_number: Some(9),
            next_file_number: Some(12),
            last_sequence: Some(1000),
            new_files: vec![(
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
                },
            )],
            deleted_files: vec![(1, 4)],
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
}
