//! Merges sorted children into one sorted stream with a binary heap of child indices: a min-heap on
//! the way forward, a max-heap on the way back. Internal keys are unique across children (a write
//! lives in exactly one memtable or table of a consistent view), which keeps direction switches
//! simple.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key::compare_internal;

pub(crate) struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Valid children; `heap[0]` is the current one.
    heap: Vec<usize>,
    forward: bool,
}

impl MergingIterator {
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            heap: Vec::new(),
            forward: true,
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
    }

    fn seek_to_last(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_last());
        self.rebuild(false);
    }

    fn seek(&mut self, target: &[u8]) {
        self.children.iter_mut().for_each(|c| c.seek(target));
        self.rebuild(true);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.children
            .iter_mut()
            .for_each(|c| c.seek_for_prev(target));
        self.rebuild(false);
    }

    fn next(&mut self) {
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

    fn prev(&mut self) {
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

    fn key(&self) -> &[u8] {
        self.children[self.heap[0]].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.heap[0]].value()
    }

    fn status(&self) -> Result<()> {
        self.children.iter().try_for_each(|c| c.status())
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
