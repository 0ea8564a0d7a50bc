//! A file's writes not yet in the store, shared by every descriptor of it: the dirty byte
//! ranges (kept merged: a byte written twice is held once, the newer bytes winning) and then
//! the bytes appended at the end (`O_APPEND`), with the length they give the file. They reach
//! the store as one batch of partial writes (`WriteBatch::write_at`, then `append`), so what a
//! write costs is the bytes it changed, never the file's size.
//!
//! Invariants:
//! - `ranges` never overlap or touch: a write that meets a range joins it.
//! - Appended bytes come after every range in time: a positional write arriving while bytes
//!   wait to be appended is refused (`push` answers `false`) and the caller flushes first.
//! - `bytes` is the sum of what the ranges and the tail hold: memory follows it.

use std::collections::BTreeMap;

use strata_engine::{ColumnFamily, WriteBatch};

/// Writes waiting for the store, and what they make of the file's length.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Dirty ranges by offset.
    ranges: BTreeMap<u64, Vec<u8>>,
    /// Bytes to append at the file's end as the store has it when the batch lands.
    tail: Vec<u8>,
    bytes: usize,
    /// The length the file has with these writes applied; `None` while there are none.
    len: Option<u64>,
    /// A write asked for the set-user-ID and set-group-ID bits to be cleared.
    pub(crate) kill_suidgid: bool,
    /// A write went past the kernel's page cache (a write-only descriptor, or an append the
    /// store may place elsewhere than the kernel did): the kernel's pages from `written_from`
    /// on are stale once these writes land.
    pub(crate) uncached: bool,
    /// Where the first byte written lies, at the latest.
    written_from: u64,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            ranges: BTreeMap::new(),
            tail: Vec::new(),
            bytes: 0,
            len: None,
            kill_suidgid: false,
            uncached: false,
            written_from: u64::MAX,
        }
    }
}

impl Pending {
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty() && self.tail.is_empty()
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Separate ranges held (each one partial write in the batch).
    pub(crate) fn ranges(&self) -> usize {
        self.ranges.len()
    }

    /// The file's length with the pending writes applied, if there are any.
    pub(crate) fn len(&self) -> Option<u64> {
        self.len
    }

    /// Where the first byte the pending writes change lies (at the latest); `None` when none.
    pub(crate) fn written_from(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.written_from)
    }

    /// From where the kernel's cached pages are stale once these writes land: writes through
    /// its cache it has already; one that went past it (`uncached`) it has not.
    pub(crate) fn stale_from(&self) -> Option<u64> {
        self.written_from().filter(|_| self.uncached)
    }

    /// Adds a write of `data` at `offset`, or appended at the end (`append`; `offset` is then
    /// where the kernel believed the end was). `stored_len` gives the file's length in the
    /// store, asked only for the first write after a flush. Returns `false`, changing nothing,
    /// for a positional write while appended bytes wait: flush, then push again.
    #[must_use]
    pub(crate) fn push(
        &mut self,
        offset: u64,
        append: bool,
        data: &[u8],
        stored_len: impl FnOnce() -> u64,
    ) -> bool {
        if !append && !self.tail.is_empty() {
            return false;
        }
        let len = self.len.unwrap_or_else(stored_len);
        let n = data.len() as u64;
        if append {
            // The store puts them at its end, which is never before `len`; the kernel may have
            // cached them at `offset`.
            self.written_from = self.written_from.min(offset).min(len);
            self.len = Some(len + n);
            self.tail.extend_from_slice(data);
            self.bytes += data.len();
            return true;
        }
        self.written_from = self.written_from.min(offset);
        self.len = Some(len.max(offset + n));
        self.write_range(offset, data);
        true
    }

    /// Merges `data` at `at` into the ranges, the newer bytes winning.
    fn write_range(&mut self, at: u64, data: &[u8]) {
        let end = at + data.len() as u64;
        // The range that starts at or before `at` and reaches it is extended in place.
        let (start, mut buf) = match self.ranges.range(..=at).next_back() {
            Some((&s, v)) if s + v.len() as u64 >= at => {
                let v = self.ranges.remove(&s).unwrap_or_default();
                (s, v)
            }
            _ => (at, Vec::new()),
        };
        self.bytes -= buf.len();
        let from = (at - start) as usize;
        let need = from + data.len();
        if buf.len() < need {
            if need > buf.capacity() {
                // Doubling, but not past a write-back's worth: a range that outgrows it is
                // flushed right after this write, and doubling 4 MiB to 8 MiB for its last
                // write would hold twice the memory configured.
                let want =
                    (buf.capacity() * 2).clamp(need, need.max(crate::fs::WRITE_BACK as usize));
                buf.reserve_exact(want - buf.len());
            }
            buf.resize(need, 0);
        }
        buf[from..from + data.len()].copy_from_slice(data);
        // Ranges starting inside or right after it: their bytes past it join it.
        loop {
            let buf_end = start + buf.len() as u64;
            let Some(&s) = self.ranges.range(at..=buf_end).next().map(|(s, _)| s) else {
                break;
            };
            let v = self.ranges.remove(&s).unwrap_or_default();
            self.bytes -= v.len();
            let v_end = s + v.len() as u64;
            if v_end > buf_end {
                buf.extend_from_slice(&v[(buf_end - s) as usize..]);
            }
        }
        debug_assert!(start + buf.len() as u64 >= end);
        self.bytes += buf.len();
        self.ranges.insert(start, buf);
    }

    /// Moves the writes into `batch` as partial writes of `key` in `cf` (the ranges, then the
    /// appended bytes) and forgets them.
    pub(crate) fn drain_into(&mut self, batch: &mut WriteBatch, cf: &ColumnFamily, key: &[u8]) {
        for (offset, data) in std::mem::take(&mut self.ranges) {
            batch.write_at_cf(cf, key, offset, data);
        }
        if !self.tail.is_empty() {
            batch.append_cf(cf, key, std::mem::take(&mut self.tail));
        }
        *self = Pending::default();
    }

    #[cfg(test)]
    fn ranges_held(&self) -> Vec<(u64, Vec<u8>)> {
        self.ranges.iter().map(|(&s, v)| (s, v.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn at(p: &mut Pending, offset: u64, data: &[u8]) {
        assert!(p.push(offset, false, data, || 10));
    }

    #[test]
    fn writes_merge_into_ranges_and_the_newer_bytes_win() {
        let mut p = Pending::default();
        at(&mut p, 0, b"ab");
        at(&mut p, 2, b"cd");
        at(&mut p, 1, b"X");
        at(&mut p, 20, b"far");
        assert_eq!(
            p.ranges_held(),
            [(0, b"aXcd".to_vec()), (20, b"far".to_vec())]
        );
        // One write spanning both joins them, keeping the second's bytes past it.
        at(&mut p, 3, &[b'-'; 18]);
        assert_eq!(p.ranges_held(), [(0, b"aXc------------------ar".to_vec())]);
        assert_eq!(p.bytes(), 23);
        assert_eq!(p.len(), Some(23));
        assert_eq!(p.written_from(), Some(0));
    }

    #[test]
    fn rewriting_one_place_holds_it_once() {
        let mut p = Pending::default();
        for i in 0..10_000u32 {
            at(&mut p, 0, &i.to_le_bytes());
        }
        assert_eq!(p.ranges(), 1);
        assert_eq!(p.bytes(), 4);
        assert_eq!(p.ranges_held(), [(0, 9_999u32.to_le_bytes().to_vec())]);
    }

    #[test]
    fn a_write_before_a_range_and_touching_it_joins_it() {
        let mut p = Pending::default();
        at(&mut p, 5, b"world");
        at(&mut p, 0, b"hello");
        assert_eq!(p.ranges_held(), [(0, b"helloworld".to_vec())]);
        assert_eq!(p.bytes(), 10);
    }

    #[test]
    fn appends_follow_the_ranges_and_a_later_positional_write_waits() {
        let mut p = Pending::default();
        at(&mut p, 100, b"x");
        assert_eq!(p.len(), Some(101));
        assert!(p.push(101, true, b"zz", || unreachable!()));
        assert_eq!(p.len(), Some(103));
        assert!(!p.push(0, false, b"y", || unreachable!()));
        assert_eq!(p.len(), Some(103));
        let mut appends = Pending::default();
        assert!(appends.push(60, true, b"a", || 40));
        assert_eq!(appends.written_from(), Some(40));
    }

    #[test]
    fn a_drained_set_is_empty_and_asks_the_store_again() {
        let mut p = Pending::default();
        at(&mut p, 0, b"b");
        assert!(p.push(1, true, b"a", || unreachable!()));
        p.kill_suidgid = true;
        let mut batch = WriteBatch::new();
        let dir = tempfile::tempdir().unwrap();
        let db = strata_engine::Db::open(dir.path(), strata_engine::Options::default()).unwrap();
        p.drain_into(&mut batch, &db.default_cf(), b"k");
        assert!(p.is_empty() && p.bytes() == 0 && p.len().is_none() && !p.kill_suidgid);
        assert_eq!(p.written_from(), None);
        assert_eq!(batch.len(), 2);
        let mut asked = false;
        assert!(p.push(0, false, b"b", || {
            asked = true;
            7
        }));
        assert!(asked);
        assert_eq!(p.len(), Some(7));
    }
}
