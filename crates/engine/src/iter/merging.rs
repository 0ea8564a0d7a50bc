//! Merges sorted children into one sorted stream with a binary heap of child indices: a min-heap on
//! the way forward, a max-heap on the way back. Internal keys are unique across children (a write
//! lives in exactly one memtable or table of a consistent view), which keeps direction switches
//! simple.
//!
//! With range deletions attached, the stream leaves out entries a range tombstone hides. Children
//! are ordered newest source first, and every entry of a key in an older source is older than
//! anything a newer source holds for it, so an entry is hidden when a tombstone of its own source
//! newer than it, or any visible tombstone of a newer source, covers it. In the second case every
//! older child's entries up to the tombstone's end are hidden too: those children seek past it at
//! once instead of stepping through the run.

use std::cmp::Ordering;
use std::sync::Arc;

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::{self, KIND_FOR_SEEK, MAX_SEQUENCE, SequenceNumber, compare_internal};
use crate::range_del::TombstoneCursor;
use crate::stats::Stats;

pub(crate) struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Valid children; `heap[0]` is the current one.
    heap: Vec<usize>,
    forward: bool,
    range_dels: Option<Box<RangeDeletions>>,
}

/// The range tombstones a read's merged stream honours.
pub(crate) struct RangeDeletions {
    read_seq: SequenceNumber,
    /// (child index, that child's tombstones), ascending by child index.
    cursors: Vec<(usize, TombstoneCursor)>,
    stats: Arc<Stats>,
    error: Option<Error>,
    /// The sources covering the entry at hand and how far each hides older children (as seek
    /// targets); the first `hiding` are current, the rest kept to reuse their allocations.
    edges: Vec<(usize, Vec<u8>)>,
    hiding: usize,
}

impl RangeDeletions {
    /// Tombstones for a read at `read_seq`; `cursors` pairs child indices with their sources'
    /// tombstones, in ascending child order.
    pub(crate) fn new(
        read_seq: SequenceNumber,
        cursors: Vec<(usize, TombstoneCursor)>,
        stats: Arc<Stats>,
    ) -> Self {
        RangeDeletions {
            read_seq,
            cursors,
            stats,
            error: None,
            edges: Vec::new(),
            hiding: 0,
        }
    }

    /// Records that source `child` hides older children up to `edge` (a user key).
    fn note_edge(&mut self, child: usize, edge: &[u8]) {
        if self.hiding == self.edges.len() {
            self.edges.push((child, Vec::new()));
        }
        let slot = &mut self.edges[self.hiding];
        slot.0 = child;
        set_target(&mut slot.1, edge);
        self.hiding += 1;
    }
}

/// Makes `target` the seek key that sorts before every entry of `user_key`.
fn set_target(target: &mut Vec<u8>, user_key: &[u8]) {
    target.clear();
    key::append_internal_key(target, user_key, MAX_SEQUENCE, KIND_FOR_SEEK);
}

impl MergingIterator {
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            heap: Vec::new(),
            forward: true,
            range_dels: None,
        }
    }

    /// Leaves out the entries `range_dels` hide.
    pub(crate) fn with_range_deletions(mut self, range_dels: RangeDeletions) -> Self {
        if !range_dels.cursors.is_empty() {
            self.range_dels = Some(Box::new(range_dels));
        }
        self
    }

    /// Moves past every hidden entry at the top, in the current direction.
    fn hide_covered(&mut self) {
        if let Some(mut rd) = self.range_dels.take() {
            self.hide_covered_with(&mut rd);
            self.range_dels = Some(rd);
        }
    }

    fn hide_covered_with(&mut self, rd: &mut RangeDeletions) {
        let mut edge: Vec<u8> = Vec::new();
        while let Some(&top) = self.heap.first() {
            let ikey = self.children[top].key();
            let seq = key::sequence(ikey);
            if seq > rd.read_seq {
                return; // not visible to this read at all: the caller skips it
            }
            let user_key = key::user_key(ikey);
            // Every newer source covering the entry hides it, and each hides older children up
            // to the end of its run of abutting tombstones; its own source hides it only with a
            // newer tombstone.
            rd.hiding = 0;
            let mut hidden_by_own = false;
            for i in 0..rd.cursors.len() {
                let (child, cursor) = &mut rd.cursors[i];
                let child = *child;
                if child > top {
                    break;
                }
                match cursor.covering(user_key, rd.read_seq) {
                    Ok(Some(c)) if c.seq > seq => {
                        if child == top {
                            hidden_by_own = true;
                            continue;
                        }
                        edge.clear();
                        edge.extend_from_slice(if self.forward { c.end } else { c.start });
                        if let Some(run) = cursor.run_edge(rd.read_seq, self.forward) {
                            edge.clear();
                            edge.extend_from_slice(run);
                        }
                        rd.note_edge(child, &edge);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        rd.error = Some(e);
                        self.heap.clear();
                        return;
                    }
                }
            }
            if rd.hiding == 0 {
                if !hidden_by_own {
                    return;
                }
                // Newer entries of this source may lie inside the range: step, do not skip.
                rd.stats.range_del_hidden.inc();
                if self.forward {
                    self.children[top].next();
                } else {
                    self.children[top].prev();
                }
                self.fix_top();
                continue;
            }
            rd.stats.range_del_hidden.inc();
            rd.stats.range_del_reseeks.inc();
            // Each older child seeks past the farthest edge of the covering sources newer than it.
            let edges = &rd.edges[..rd.hiding];
            let mut farthest: Option<&[u8]> = None;
            let mut next_edge = 0;
            for (c, child) in self.children.iter_mut().enumerate().skip(edges[0].0 + 1) {
                while next_edge < edges.len() && edges[next_edge].0 < c {
                    let e = edges[next_edge].1.as_slice();
                    let farther = farthest.is_none_or(|f| {
                        let o = compare_internal(e, f);
                        if self.forward { o.is_gt() } else { o.is_lt() }
                    });
                    if farther {
                        farthest = Some(e);
                    }
                    next_edge += 1;
                }
                let Some(target) = farthest else { continue };
                if !child.valid() {
                    continue;
                }
                let before_edge = compare_internal(child.key(), target) == Ordering::Less;
                if self.forward && before_edge {
                    child.seek(target);
                } else if !self.forward && !before_edge {
                    child.seek_for_prev(target);
                }
            }
            self.rebuild(self.forward);
        }
    }

    /// True when child `a` should sit above child `b` in the heap.
    #[inline]
    fn above(&self, a: usize, b: usize) -> bool {
        let o = compare_internal(self.children[a].key(), self.children[b].key());
        if self.forward {
            o == Ordering::Less
        } else {
            o == Ordering::Greater
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut best = i;
            if l < n && self.above(self.heap[l], self.heap[best]) {
                best = l;
            }
            if r < n && self.above(self.heap[r], self.heap[best]) {
                best = r;
            }
            if best == i {
                return;
            }
            self.heap.swap(i, best);
            i = best;
        }
    }

    fn rebuild(&mut self, forward: bool) {
        self.forward = forward;
        self.heap.clear();
        if self
            .children
            .iter()
            .any(|c| !c.valid() && c.status().is_err())
        {
            return; // see `fix_top`
        }
        self.heap
            .extend((0..self.children.len()).filter(|&i| self.children[i].valid()));
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    /// After the top child moved: restore the heap.
    fn fix_top(&mut self) {
        let top = self.heap[0];
        if self.children[top].valid() {
            self.sift_down(0);
        } else if self.children[top].status().is_err() {
            // The stream ends at a child's error: merging on without it would show older
            // versions of the keys it holds newer ones of (or hides with its tombstones).
            self.heap.clear();
        } else {
            let last = self.heap.len() - 1;
            self.heap.swap(0, last);
            self.heap.pop();
            if !self.heap.is_empty() {
                self.sift_down(0);
            }
        }
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_first());
        self.rebuild(true);
        self.hide_covered();
    }

    fn seek_to_last(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_last());
        self.rebuild(false);
        self.hide_covered();
    }

    fn seek(&mut self, target: &[u8]) {
        self.children.iter_mut().for_each(|c| c.seek(target));
        self.rebuild(true);
        self.hide_covered();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.children
            .iter_mut()
            .for_each(|c| c.seek_for_prev(target));
        self.rebuild(false);
        self.hide_covered();
    }

    fn next(&mut self) {
        self.step_forward();
        self.hide_covered();
    }

    fn prev(&mut self) {
        self.step_backward();
        self.hide_covered();
    }

    fn key(&self) -> &[u8] {
        self.children[self.heap[0]].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.heap[0]].value()
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = self.range_dels.as_ref().and_then(|rd| rd.error.as_ref()) {
            return Err(e.duplicate());
        }
        self.children.iter().try_for_each(|c| c.status())
    }
}

impl MergingIterator {
    fn step_forward(&mut self) {
        let Some(&current) = self.heap.first() else {
            return;
        };
        if !self.forward {
            // Every other child is before the current key; move each to its first entry after it.
            let key = self.children[current].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != current {
                    c.seek(&key);
                    if c.valid() && compare_internal(c.key(), &key) == Ordering::Equal {
                        c.next();
                    }
                }
            }
            self.children[current].next();
            self.rebuild(true);
            return;
        }
        self.children[current].next();
        self.fix_top();
    }

    fn step_backward(&mut self) {
        let Some(&current) = self.heap.first() else {
            return;
        };
        if self.forward {
            let key = self.children[current].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != current {
                    c.seek(&key);
                    if c.valid() {
                        c.prev();
                    } else if c.status().is_ok() {
                        c.seek_to_last();
                    }
                }
            }
            self.children[current].prev();
            self.rebuild(false);
            return;
        }
        self.children[current].prev();
        self.fix_top();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::testutil::{collect_backward, collect_forward};
    use crate::key::{ValueKind, internal_key, user_key};
    use crate::memtable::MemTable;
    use std::sync::Arc;

    #[test]
    fn merges_and_switches_direction() {
        let tables: Vec<Arc<MemTable>> = (0..3)
            .map(|_| Arc::new(MemTable::new(0, 1 << 20, 0.0)))
            .collect();
        let mut expected = Vec::new();
        for i in 0..300u32 {
            let t = &tables[(i * 7 % 3) as usize];
            t.add(i as u64 + 1, ValueKind::Put, &i.to_be_bytes(), b"v");
            expected.push((
                internal_key(&i.to_be_bytes(), i as u64 + 1, 1),
                b"v".to_vec(),
            ));
        }
        let make = || {
            MergingIterator::new(
                tables
                    .iter()
                    .map(|t| Box::new(t.iter()) as Box<dyn InternalIterator>)
                    .collect(),
            )
        };
        assert_eq!(collect_forward(&mut make()), expected);
        assert_eq!(collect_backward(&mut make()), expected);
        let mut it = make();
        it.seek(&internal_key(&100u32.to_be_bytes(), u64::MAX >> 8, 0xff));
        for step in 0..50 {
            let before = user_key(it.key()).to_vec();
            it.next();
            it.prev();
            assert_eq!(user_key(it.key()), before, "step {step}");
            it.next();
        }
        assert_eq!(user_key(it.key()), 150u32.to_be_bytes());
        it.prev();
        it.prev();
        assert_eq!(user_key(it.key()), 148u32.to_be_bytes());
    }
}
