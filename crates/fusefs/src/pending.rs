//! A file's writes not yet in the store: byte ranges in the order they were made, shared by every
//! descriptor of the file, and the length they give it. They reach the store as one batch of
//! partial writes (`WriteBatch::write_at` and `append`), so what each write costs is the
//! bytes it wrote, never the file's size.

use strata_engine::{ColumnFamily, WriteBatch};

/// One write, as the store will apply it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Bytes at an offset; a gap before them reads as zeros.
    At(u64, Vec<u8>),
    /// Bytes at the file's end as the store has it when the batch lands (`O_APPEND`), which
    /// another door may have moved.
    Append(Vec<u8>),
}

/// Writes waiting for the store, and what they make of the file's length.
#[derive(Debug)]
pub(crate) struct Pending {
    ops: Vec<Op>,
    bytes: usize,
    /// The length the file has with these writes applied; `None` while there are none.
    len: Option<u64>,
    /// A write asked for the set-user-ID and set-group-ID bits to be cleared.
    pub(crate) kill_suidgid: bool,
    /// A write went past the kernel's page cache (a write-only or appending descriptor): the
    /// kernel's pages from `written_from` on are stale once these writes land.
    pub(crate) uncached: bool,
    /// Where the first byte written lies, at the latest.
    written_from: u64,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            ops: Vec::new(),
            bytes: 0,
            len: None,
            kill_suidgid: false,
            uncached: false,
            written_from: u64::MAX,
        }
    }
}

impl Pending {
    /// Where the first byte the pending writes change lies (at the latest); `None` when none.
    pub(crate) fn written_from(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.written_from)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The file's length with the pending writes applied, if there are any.
    pub(crate) fn len(&self) -> Option<u64> {
        self.len
    }

    /// Adds a write of `data`, at `offset` or (`None`) at the end. `stored_len` gives the
    /// file's length in the store, asked only for the first write after a flush. Contiguous
    /// writes join the one before, so a file written front to back reaches the store as one
    /// range per flush; the bytes are copied once.
    pub(crate) fn push(
        &mut self,
        offset: Option<u64>,
        data: &[u8],
        stored_len: impl FnOnce() -> u64,
    ) {
        let len = self.len.unwrap_or_else(stored_len);
        // An append lands at the end as the store has it then, which is never before `len`.
        self.written_from = self.written_from.min(offset.unwrap_or(len));
        self.len = Some(match offset {
            Some(at) => len.max(at + data.len() as u64),
            None => len + data.len() as u64,
        });
        self.bytes += data.len();
        match (self.ops.last_mut(), offset) {
            (Some(Op::At(at, prev)), Some(offset)) if *at + prev.len() as u64 == offset => {
                prev.extend_from_slice(data)
            }
            (Some(Op::Append(prev)), None) => prev.extend_from_slice(data),
            (_, Some(offset)) => self.ops.push(Op::At(offset, data.to_vec())),
            (_, None) => self.ops.push(Op::Append(data.to_vec())),
        }
    }

    /// Moves the writes into `batch` as partial writes of `key` in `cf`, in order, and forgets
    /// them: a batch that then fails loses them, as a failed write-back does, and says so to
    /// whoever flushed.
    pub(crate) fn drain_into(&mut self, batch: &mut WriteBatch, cf: &ColumnFamily, key: &[u8]) {
        for op in self.ops.drain(..) {
            match op {
                Op::At(offset, data) => batch.write_at_cf(cf, key, offset, data),
                Op::Append(data) => batch.append_cf(cf, key, data),
            }
        }
        self.bytes = 0;
        self.len = None;
        self.kill_suidgid = false;
        self.uncached = false;
        self.written_from = u64::MAX;
    }

    #[cfg(test)]
    fn ops(&self) -> &[Op] {
        &self.ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_writes_join_and_others_keep_their_order() {
        let mut p = Pending::default();
        p.push(Some(0), b"ab", || 10);
        p.push(Some(2), b"cd", || unreachable!());
        p.push(Some(1), b"X", || unreachable!());
        p.push(None, b"1", || unreachable!());
        p.push(None, b"2", || unreachable!());
        assert_eq!(
            p.ops(),
            [
                Op::At(0, b"abcd".to_vec()),
                Op::At(1, b"X".to_vec()),
                Op::Append(b"12".to_vec())
            ]
        );
        assert_eq!(p.bytes(), 7);
        assert_eq!(p.len(), Some(12));
        assert_eq!(p.written_from(), Some(0));
    }

    #[test]
    fn the_length_follows_every_kind_of_write() {
        let mut p = Pending::default();
        assert_eq!(p.len(), None);
        p.push(Some(100), b"x", || 5);
        assert_eq!(p.len(), Some(101));
        assert_eq!(p.written_from(), Some(100));
        p.push(Some(0), b"y", || unreachable!());
        assert_eq!(p.len(), Some(101));
        p.push(None, b"zz", || unreachable!());
        assert_eq!(p.len(), Some(103));
        assert_eq!(p.written_from(), Some(0));
        let mut appends = Pending::default();
        appends.push(None, b"a", || 40);
        assert_eq!(appends.written_from(), Some(40));
    }

    #[test]
    fn a_drained_set_is_empty_and_asks_the_store_again() {
        let mut p = Pending::default();
        p.push(None, b"a", || 1);
        p.kill_suidgid = true;
        let mut batch = WriteBatch::new();
        let dir = tempfile::tempdir().unwrap();
        let db = strata_engine::Db::open(dir.path(), strata_engine::Options::default()).unwrap();
        p.drain_into(&mut batch, &db.default_cf(), b"k");
        assert!(p.is_empty() && p.bytes() == 0 && p.len().is_none() && !p.kill_suidgid);
        assert_eq!(p.written_from(), None);
        assert_eq!(batch.len(), 1);
        let mut asked = false;
        p.push(Some(0), b"b", || {
            asked = true;
            7
        });
        assert!(asked);
        assert_eq!(p.len(), Some(7));
    }
}
