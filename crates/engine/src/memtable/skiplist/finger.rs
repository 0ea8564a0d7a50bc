//! Finger search: a run of ascending seeks (a MultiGet's sorted keys in one memtable) where each
//! starts from where the one before ended, not from the head.

use std::cmp::Ordering as CmpOrdering;
use std::ptr;
use std::sync::atomic::Ordering;

use super::{MAX_HEIGHT, Node, SkipList};
use crate::key::compare_internal;

/// Where the last of a run of ascending seeks ended ([`SkipList::seek_ge_after`]): the last
/// node before its target at every level. Its nodes live as long as the list it borrows.
pub(crate) struct Finger<'a> {
    prev: [*const Node; MAX_HEIGHT],
    started: bool,
    list: &'a SkipList,
}

impl SkipList {
    /// [`SkipList::seek_ge`] for the next of a run of ascending targets (each at or after the
    /// one before): it starts where the last seek of `finger` ended rather than at the head,
    /// climbing only as high as the distance needs, so that a run of nearby keys (a MultiGet's
    /// sorted keys) costs a few steps each instead of a descent from the top, whose nodes are
    /// cache misses in a large memtable.
    pub(crate) fn seek_ge_after<'a>(
        &'a self,
        finger: &mut Finger<'a>,
        target: &[u8],
    ) -> *const Node {
        // A finger of another list would walk that list's nodes: answers that mean nothing here.
        assert!(
            ptr::eq(finger.list, self),
            "a finger is used on the list it came from"
        );
        if !finger.started {
            finger.started = true;
            return self.find_ge(target, Some(&mut finger.prev));
        }
        let height = self.max_height.load(Ordering::Relaxed);
        let mut level = 0;
        while level + 1 < height {
            let n = self.next(finger.prev[level + 1], level + 1);
            // SAFETY: n is a live node when non-null.
            if n.is_null() || compare_internal(unsafe { Node::key(n) }, target) != CmpOrdering::Less
            {
                break;
            }
            level += 1;
        }
        self.find_ge_from(finger.prev[level], level, target, Some(&mut finger.prev))
    }

    /// A finger for [`SkipList::seek_ge_after`], before its first seek.
    pub(crate) fn finger(&self) -> Finger<'_> {
        Finger {
            // The head is before every key at every level, as a height the list grows to later.
            prev: [self.head; MAX_HEIGHT],
            started: false,
            list: self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_CHUNK_SIZE;
    use super::*;
    use crate::key::lookup_key;

    fn put(list: &SkipList, k: u32, seq: u64, value: &[u8]) {
        list.insert(&k.to_be_bytes(), crate::key::pack_trailer(seq, 1), value);
    }

    /// A run of ascending seeks from a finger finds what seeks from the head find: targets
    /// between keys, on them, repeated and past the end, with keys inserted between two seeks
    /// of the run, and a list that grows taller during it.
    #[test]
    fn seeks_from_a_finger_find_what_seeks_from_the_head_find() {
        let target = |k: u32| lookup_key(&k.to_be_bytes(), u64::MAX >> 8);
        let list = SkipList::new(8 * MAX_CHUNK_SIZE);
        for k in (0..3000u32).map(|i| i * 2) {
            put(&list, k, 1, b"v");
        }
        let mut finger = list.finger();
        let mut x = 0x9e37_79b9u32;
        let (mut at, mut seq) = (0u32, 1u64);
        while at < 6100 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // Steps of 0 (the same target again) to 40.
            at += x % 41;
            if x.is_multiple_of(7) {
                // A sequence number of its own: an internal key is never inserted twice.
                seq += 1;
                put(&list, at | 1, seq, b"w");
            }
            let t = target(at);
            assert_eq!(
                list.seek_ge_after(&mut finger, &t),
                list.seek_ge(&t),
                "{at}"
            );
        }
        // Short when the run starts; a thousand times longer (and taller) halfway through.
        let list = SkipList::new(8 * MAX_CHUNK_SIZE);
        for k in [10u32, 20, 30] {
            put(&list, k, 1, b"v");
        }
        let mut finger = list.finger();
        assert_eq!(
            list.seek_ge_after(&mut finger, &target(15)),
            list.seek_ge(&target(15))
        );
        for k in 31..4000u32 {
            put(&list, k, 1, b"v");
        }
        for at in [15u32, 16, 29, 30, 31, 500, 2047, 3999, 4000] {
            let t = target(at);
            assert_eq!(
                list.seek_ge_after(&mut finger, &t),
                list.seek_ge(&t),
                "{at}"
            );
        }
    }

    /// A finger searches only the list it came from.
    #[test]
    #[should_panic(expected = "a finger is used on the list it came from")]
    fn a_finger_of_another_list_is_refused() {
        let (one, other) = (SkipList::new(MAX_CHUNK_SIZE), SkipList::new(MAX_CHUNK_SIZE));
        put(&one, 1, 1, b"v");
        let mut finger = one.finger();
        let _ = other.seek_ge_after(&mut finger, &lookup_key(&1u32.to_be_bytes(), 1));
    }
}
