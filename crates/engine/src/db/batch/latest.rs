//! The latest record of each key in a batch (one being built, or one already resolved), found
//! without scanning the batch. Partial writes resolve against the records before them, in
//! their own batch and in the group's earlier ones; a batch of thousands of them (a directory
//! renamed by the mount: one move per key) would otherwise cost the square of its length while
//! the write leader holds the WAL lock.

use std::collections::HashMap;

use super::{BatchRecord, HEADER_SIZE, Op, WriteBatch};
use crate::key::ValueKind;

/// What the batch last did to a key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LastWrite<'a> {
    Put(&'a [u8]),
    BlobIndex(&'a [u8]),
    /// A point delete, or a range deletion covering the key.
    Deleted,
}

/// An index of one growing batch, brought up to date at each lookup (so each record is indexed
/// once, whatever the number of lookups).
#[derive(Debug)]
pub(crate) struct Latest {
    /// Byte position up to which the batch is indexed.
    upto: usize,
    /// Records indexed: each one's ordinal orders points against ranges.
    records: usize,
    /// Per (column family, key): the ordinal and start of its last point record.
    points: HashMap<(u32, Vec<u8>), (usize, usize)>,
    /// Range deletions, with their ordinals: few in a batch, so scanned.
    ranges: Vec<(u32, Vec<u8>, Vec<u8>, usize)>,
}

impl Default for Latest {
    fn default() -> Self {
        Latest {
            upto: HEADER_SIZE,
            records: 0,
            points: HashMap::new(),
            ranges: Vec::new(),
        }
    }
}

impl Latest {
    /// What `batch` (the one this index follows, only ever appended to) last did to `key` of
    /// column family `cf`; `None` if nothing.
    pub(crate) fn find<'b>(
        &mut self,
        batch: &'b WriteBatch,
        cf: u32,
        key: &[u8],
    ) -> Result<Option<LastWrite<'b>>, String> {
        self.catch_up(batch)?;
        let point = self.points.get(&(cf, key.to_vec())).copied();
        let after = point.map_or(0, |(ordinal, _)| ordinal + 1);
        let deleted_later = self.ranges.iter().any(|(rcf, start, end, ordinal)| {
            *rcf == cf && *ordinal >= after && start.as_slice() <= key && key < end.as_slice()
        });
        if deleted_later {
            return Ok(Some(LastWrite::Deleted));
        }
        let Some((_, at)) = point else {
            return Ok(None);
        };
        let (r, _) = batch.record_at(at)?;
        Ok(Some(match r.op {
            Op::Point(ValueKind::Put) => LastWrite::Put(r.value),
            Op::Point(ValueKind::BlobIndex) => LastWrite::BlobIndex(r.value),
            _ => LastWrite::Deleted,
        }))
    }

    fn catch_up(&mut self, batch: &WriteBatch) -> Result<(), String> {
        let Latest {
            upto,
            records,
            points,
            ranges,
        } = self;
        *upto = batch.for_each_from(*upto, |at, r: BatchRecord<'_>| {
            match r.op {
                Op::Point(ValueKind::Put | ValueKind::BlobIndex | ValueKind::Delete) => {
                    points.insert((r.cf, r.key.to_vec()), (*records, at));
                }
                Op::DeleteRange => ranges.push((r.cf, r.key.to_vec(), r.value.to_vec(), *records)),
                // Nothing else changes what a key holds for a partial write.
                _ => {}
            }
            *records += 1;
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_record_of_a_key_wins_and_a_later_range_deletes_it() {
        let mut b = WriteBatch::new();
        let mut latest = Latest::default();
        assert_eq!(latest.find(&b, 0, b"a").unwrap(), None);
        b.put_cf_id(0, b"a", b"1");
        b.put_cf_id(1, b"a", b"other family");
        assert_eq!(
            latest.find(&b, 0, b"a").unwrap(),
            Some(LastWrite::Put(b"1"))
        );
        b.put_blob_index(0, b"a", b"index");
        assert_eq!(
            latest.find(&b, 0, b"a").unwrap(),
            Some(LastWrite::BlobIndex(b"index"))
        );
        b.delete_range(b"a", b"b");
        assert_eq!(latest.find(&b, 0, b"a").unwrap(), Some(LastWrite::Deleted));
        assert_eq!(
            latest.find(&b, 1, b"a").unwrap(),
            Some(LastWrite::Put(b"other family"))
        );
        b.put_cf_id(0, b"a", b"2");
        assert_eq!(
            latest.find(&b, 0, b"a").unwrap(),
            Some(LastWrite::Put(b"2"))
        );
        b.delete_cf_id(0, b"a");
        assert_eq!(latest.find(&b, 0, b"a").unwrap(), Some(LastWrite::Deleted));
        assert_eq!(latest.find(&b, 0, b"c").unwrap(), None);
    }
}
