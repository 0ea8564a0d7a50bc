//! Range deletions (DeleteRange): tombstones that delete every key in `[start, end)` written
//! before them. Memtables and tables keep them apart from point entries; readers consult them
//! through a fragmented form ([`FragmentedTombstones`]) built once per memtable or table, point
//! lookups directly and iterators through a [`TombstoneCursor`] per source.

mod cursor;
mod fragmenter;

pub(crate) use cursor::{KeyBounds, LevelSource, TombstoneCursor};
pub(crate) use fragmenter::{
    FragmentedTombstones, VersionPlace, VersionWalk, hides_from_every_reader, stripe,
};

use crate::key::SequenceNumber;

/// The kind byte of a range tombstone's internal key (after point deletes 0 and puts 1).
pub(crate) const RANGE_DELETION_KIND: u8 = 2;

/// Deletes the user keys in `[start, end)` with sequence numbers below `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeTombstone {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub seq: SequenceNumber,
}

impl RangeTombstone {
    pub(crate) fn new(start: &[u8], end: &[u8], seq: SequenceNumber) -> Self {
        RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        }
    }
}
