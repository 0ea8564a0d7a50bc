//! Tombstone cursors: how an iterator asks one source (a memtable, an L0 table, or a level below
//! L0) whether a key is range-deleted. A cursor remembers where its last answer was, so a scan
//! moving through the keys in order pays a comparison or two per key, not a binary search; a seek
//! elsewhere falls back to one.

use std::sync::Arc;

use super::{FragmentedTombstones, hides_from_every_reader};
use crate::error::Result;
use crate::key::SequenceNumber;
/// A table's smallest and largest user keys.
pub(crate) type KeyBounds<'a> = (&'a [u8], &'a [u8]);

/// A fragment's start, end and sequence numbers (newest first).
pub(crate) type Fragment<'a> = (&'a [u8], &'a [u8], &'a [SequenceNumber]);

/// A tombstone fragment covering a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Covering<'a> {
    /// The newest of the fragment's tombstones visible to the read.
    pub seq: SequenceNumber,
    pub start: &'a [u8],
    pub end: &'a [u8],
}

/// A level below L0 as a source of range tombstones: tables that do not overlap, each read when
/// first needed. Implemented where the tables are known (`version::LevelTombstones`).
pub(crate) trait LevelSource: Send {
    /// Makes the table whose range holds `user_key` current, reading its tombstones if they are
    /// not yet; false when no table holds the key.
    fn find_table(&mut self, user_key: &[u8]) -> Result<bool>;
    /// Which table is current: a change resets the cursor's hint.
    fn current_index(&self) -> usize;
    /// The current table's tombstones and user-key bounds, once read.
    fn current(&self) -> Option<(&FragmentedTombstones, KeyBounds<'_>)>;
    /// After `find_table` found no table holding a key: the stretch between the tables around
    /// it.
    fn gap_around(&self) -> (Option<&[u8]>, Option<&[u8]>);
}

enum Source {
    /// A memtable's or an L0 table's tombstones.
    List(Arc<FragmentedTombstones>),
    Level(Box<dyn LevelSource>),
}

/// One source's range tombstones, as an iterator consults them.
pub(crate) struct TombstoneCursor {
    source: Source,
    /// The fragment of the last answer: the first whose end is above the key last asked about.
    hint: usize,
    /// A stretch of keys an earlier answer showed no tombstone covers: most keys a scan asks
    /// about fall in one, and are answered by two comparisons.
    gap: Gap,
}

/// `[lo, hi)`, either end open when `None`; empty until set.
#[derive(Default)]
struct Gap {
    set: bool,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
}

impl Gap {
    fn contains(&self, key: &[u8]) -> bool {
        self.set
            && self.lo.as_deref().is_none_or(|lo| lo <= key)
            && self.hi.as_deref().is_none_or(|hi| key < hi)
    }

    fn assign(&mut self, lo: Option<&[u8]>, hi: Option<&[u8]>) {
        fn copy(slot: &mut Option<Vec<u8>>, from: Option<&[u8]>) {
            match (slot.as_mut(), from) {
                (Some(v), Some(f)) => {
                    v.clear();
                    v.extend_from_slice(f);
                }
                (_, f) => *slot = f.map(<[u8]>::to_vec),
            }
        }
        copy(&mut self.lo, lo);
        copy(&mut self.hi, hi);
        self.set = true;
    }
}

impl TombstoneCursor {
    /// A cursor over one fragmented list; `None` when it is empty.
    pub(crate) fn over_list(list: Arc<FragmentedTombstones>) -> Option<Self> {
        (!list.is_empty()).then_some(TombstoneCursor {
            source: Source::List(list),
            hint: 0,
            gap: Gap::default(),
        })
    }

    /// A cursor over a level's tables.
    pub(crate) fn over_level(level: Box<dyn LevelSource>) -> Self {
        TombstoneCursor {
            source: Source::Level(level),
            hint: 0,
            gap: Gap::default(),
        }
    }

    /// The fragment covering `user_key` with a tombstone a read at `read_seq` sees, if any.
    pub(crate) fn covering(
        &mut self,
        user_key: &[u8],
        read_seq: SequenceNumber,
    ) -> Result<Option<Covering<'_>>> {
        let Some((start, end, seqs)) = self.fragment_at(user_key)? else {
            return Ok(None);
        };
        let visible = seqs.partition_point(|&s| s > read_seq);
        Ok(seqs.get(visible).map(|&seq| Covering { seq, start, end }))
    }

    /// The fragment holding `user_key`, if one does: its range and sequence numbers, newest first.
    pub(crate) fn fragment_at(&mut self, user_key: &[u8]) -> Result<Option<Fragment<'_>>> {
        if self.gap.contains(user_key) {
            return Ok(None);
        }
        // The stretch the list covers: a level's file bounds it; one list is unbounded.
        let (list, bounds) = match &mut self.source {
            Source::List(list) => (&**list, None),
            Source::Level(level) => {
                let previous = level.current_index();
                if !level.find_table(user_key)? {
                    let (lo, hi) = level.gap_around();
                    self.gap.assign(lo, hi);
                    return Ok(None);
                }
                if level.current_index() != previous {
                    self.hint = 0;
                }
                match level.current() {
                    Some((list, bounds)) => (list, Some(bounds)),
                    None => return Ok(None),
                }
            }
        };
        let i = position(list, self.hint, user_key);
        self.hint = i;
        let covered = i < list.len() && user_key >= list.fragment(i).0;
        if !covered {
            let lo = match i.checked_sub(1) {
                Some(p) => Some(list.fragment(p).1),
                None => bounds.map(|(lo, _)| lo),
            };
            let hi = match i < list.len() {
                true => Some(list.fragment(i).0),
                false => bounds.map(|(_, hi)| hi),
            };
            self.gap.assign(lo, hi);
            return Ok(None);
        }
        Ok(Some(list.fragment(i)))
    }
}

impl TombstoneCursor {
    /// Whether a tombstone covers `user_key` at `seq` with no snapshot in between (`snapshots`
    /// ascending): no reader can then see the entry, and flush or compaction may drop it.
    pub(crate) fn hides(
        &mut self,
        user_key: &[u8],
        seq: SequenceNumber,
        snapshots: &[SequenceNumber],
    ) -> Result<bool> {
        let Some((_, _, seqs)) = self.fragment_at(user_key)? else {
            return Ok(false);
        };
        Ok(hides_from_every_reader(seqs, seq, seq, snapshots))
    }
}

/// How many adjacent fragments an iterator's skip may span at once: enough to cross runs of
/// abutting or overlapping tombstones in one seek, bounded so one skip stays cheap.
const MAX_RUN: usize = 8;

impl TombstoneCursor {
    /// The list the last answer came from.
    fn current_list(&self) -> Option<&FragmentedTombstones> {
        match &self.source {
            Source::List(list) => Some(list),
            Source::Level(level) => level.current().map(|(list, _)| list),
        }
    }

    /// The far edge, in the direction of travel, of the run of abutting fragments from the one
    /// `covering` last found, each holding a tombstone visible at `read_seq`: older sources' keys
    /// up to there are all deleted, so a skip may go that far at once.
    pub(crate) fn run_edge(&self, read_seq: SequenceNumber, forward: bool) -> Option<&[u8]> {
        let list = self.current_list()?;
        let visible = |i: usize| list.fragment(i).2.iter().any(|&s| s <= read_seq);
        let mut i = self.hint;
        if i >= list.len() || !visible(i) {
            return None;
        }
        for _ in 0..MAX_RUN {
            let next = if forward {
                (i + 1 < list.len() && list.fragment(i).1 == list.fragment(i + 1).0).then(|| i + 1)
            } else {
                (i > 0 && list.fragment(i - 1).1 == list.fragment(i).0).then(|| i - 1)
            };
            match next {
                Some(n) if visible(n) => i = n,
                _ => break,
            }
        }
        let (start, end, _) = list.fragment(i);
        Some(if forward { end } else { start })
    }
}

/// The first fragment of `list` ending above `user_key`, trying `hint` and its neighbours (where
/// a scan's next key usually lands) before a binary search.
fn position(list: &FragmentedTombstones, hint: usize, user_key: &[u8]) -> usize {
    let ends_above = |i: usize| i >= list.len() || list.fragment(i).1 > user_key;
    let is_first_above = |i: usize| ends_above(i) && (i == 0 || !ends_above(i - 1));
    for candidate in [hint, hint + 1, hint.wrapping_sub(1)] {
        if candidate <= list.len() && is_first_above(candidate) {
            return candidate;
        }
    }
    list.seek(user_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range_del::RangeTombstone;

    fn list(ts: &[(&str, &str, u64)]) -> Arc<FragmentedTombstones> {
        Arc::new(FragmentedTombstones::new(
            ts.iter()
                .map(|(s, e, q)| RangeTombstone::new(s.as_bytes(), e.as_bytes(), *q))
                .collect(),
        ))
    }

    #[test]
    fn answers_match_a_fresh_search_whatever_the_order_of_questions() {
        let l = list(&[("b", "d", 5), ("c", "f", 9), ("h", "k", 3), ("m", "n", 7)]);
        let keys: Vec<String> = [
            "a", "b", "c", "d", "e", "f", "g", "h", "j", "k", "m", "n", "z",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut orders = vec![keys.clone()];
        orders.push(keys.iter().rev().cloned().collect());
        orders.push(keys.iter().step_by(3).chain(keys.iter()).cloned().collect());
        for order in orders {
            let mut c = TombstoneCursor::over_list(l.clone()).unwrap();
            for k in &order {
                for read_seq in [4, 6, 100] {
                    let got = c.covering(k.as_bytes(), read_seq).unwrap().map(|cv| cv.seq);
                    assert_eq!(
                        got,
                        l.max_covering_seq(k.as_bytes(), read_seq),
                        "{k}@{read_seq}"
                    );
                }
            }
        }
        assert!(TombstoneCursor::over_list(list(&[])).is_none());
    }

    #[test]
    fn runs_of_abutting_visible_fragments_are_skipped_whole() {
        // Fragments [a,c) [c,e) [e,g) abut; [h,k) stands apart; [k,m) is newer than the read.
        let l = list(&[("a", "e", 5), ("c", "g", 6), ("h", "k", 3), ("k", "m", 50)]);
        let mut c = TombstoneCursor::over_list(l).unwrap();
        assert!(c.covering(b"b", 10).unwrap().is_some());
        assert_eq!(c.run_edge(10, true), Some(&b"g"[..]));
        assert!(c.covering(b"f", 10).unwrap().is_some());
        assert_eq!(c.run_edge(10, false), Some(&b"a"[..]));
        assert!(c.covering(b"j", 10).unwrap().is_some());
        assert_eq!(
            c.run_edge(10, true),
            Some(&b"k"[..]),
            "the next one is invisible"
        );
        assert_eq!(c.run_edge(100, true), Some(&b"m"[..]));
    }

    #[test]
    fn reports_the_fragment_bounds() {
        let l = list(&[("b", "d", 5), ("c", "f", 9)]);
        let mut c = TombstoneCursor::over_list(l).unwrap();
        let cv = c.covering(b"c", 100).unwrap().unwrap();
        assert_eq!((cv.seq, cv.start, cv.end), (9, &b"c"[..], &b"d"[..]));
        let cv = c.covering(b"c", 6).unwrap().unwrap();
        assert_eq!(cv.seq, 5);
        assert!(c.covering(b"c", 4).unwrap().is_none());
    }
}
