//! Iterators: the internal iterator contract every source implements (memtable, block, table,
//! level) and the merging iterator over all sources. The user-facing iterator is `db::iter`.

mod merging;

pub(crate) use merging::{MergingIterator, RangeDeletions};

use crate::error::Result;

/// A bidirectional cursor over internal keys in internal-key order.
pub(crate) trait InternalIterator: Send {
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    /// Positions at the first entry >= `target`.
    fn seek(&mut self, target: &[u8]);
    fn next(&mut self);
    fn prev(&mut self);
    /// Valid only while `valid()`.
    fn key(&self) -> &[u8];
    /// Valid only while `valid()`.
    fn value(&self) -> &[u8];
    /// An error met while moving (a damaged block); the iterator is then invalid.
    fn status(&self) -> Result<()>;

    /// Positions at the last entry <= `target`.
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if !self.valid() {
            if self.status().is_ok() {
                self.seek_to_last();
            }
        } else if crate::key::compare_internal(self.key(), target) == std::cmp::Ordering::Greater {
            self.prev();
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::InternalIterator;

    /// Drains an iterator forward into (key, value) pairs.
    pub(crate) fn collect_forward(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        out
    }

    /// Drains an iterator backward into (key, value) pairs, in forward order.
    pub(crate) fn collect_backward(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_last();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        out.reverse();
        out
    }
}
