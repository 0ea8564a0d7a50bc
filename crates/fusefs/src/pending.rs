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
#[derive(Debug, Default)]
pub(crate) struct Pending {
    ops: Vec<Op>,
    bytes: usize,
    /// The length the file has with these writes applied; `None` while there are none.
    len: Option<u64>,
    /// A write asked for the set-user-ID and set-group-ID bits to be cleared.
    pub(crate) kill_suidgid: bool,
}

impl Pending {
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

    /// Adds `op`. `stored_len` gives the file's length in the store, asked only for the first
    /// write after a flush. Contiguous writes join the one before, so a file written front to
    /// back reaches the store as one range per flush.
    pub(crate) fn push(&mut self, op: Op, stored_len: impl FnOnce() -> u64) {
        let len = self.len.unwrap_or_else(stored_len);
        self.len = Some(match &op {
            Op::At(offset, data) => len.max(offset + data.len() as u64),
            Op::Append(data) => len + data.len() as u64,
        });
        self.bytes += match &op {
            Op::At(_, data) | Op::Append(data) => data.len(),
        };
        match (self.ops.last_mut(), op) {
            (Some(Op::At(at, prev)), Op::At(offset, data)) if *at + prev.len() as u64 == offset => {
                prev.extend_from_slice(&data)
            }
            (Some(Op::Append(prev)), Op::Append(data)) => prev.extend_from_slice(&data),
            (_, op) => self.ops.push(op),
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
        p.push(Op::At(0, b"ab".to_vec()), || 10);
        p.push(Op::At(2, b"cd".to_vec()), || unreachable!());
        p.push(Op::At(1, b"X".to_vec()), || unreachable!());
        p.push(Op::Append(b"1".to_vec()), || unreachable!());
        p.push(Op::Append(b"2".to_vec()), || unreachable!());
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
    }

    #[test]
    fn the_length_follows_every_kind_of_write() {
        let mut p = Pending::default();
        assert_eq!(p.len(), None);
        p.push(Op::At(100, b"x".to_vec()), || 5);
        assert_eq!(p.len(), Some(101));
        p.push(Op::At(0, b"y".to_vec()), || unreachable!());
        assert_eq!(p.len(), Some(101));
        p.push(Op::Append(b"zz".to_vec()), || unreachable!());
        assert_eq!(p.len(), Some(103));
    }

    #[test]
    fn a_drained_set_is_empty_and_asks_the_store_again() {
        let mut p = Pending::default();
        p.push(Op::Append(b"a".to_vec()), || 1);
        p.kill_suidgid = true;
        let mut batch = WriteBatch::new();
        let dir = tempfile::tempdir().unwrap();
        let db = strata_engine::Db::open(dir.path(), strata_engine::Options::default()).unwrap();
        p.drain_into(&mut batch, &db.default_cf(), b"k");
        assert!(p.is_empty() && p.bytes() == 0 && p.len().is_none() && !p.kill_suidgid);
        assert_eq!(batch.len(), 1);
        let mut asked = false;
        p.push(Op::At(0, b"b".to_vec()), || {
            asked = true;
            7
        });
        assert!(asked);
        assert_eq!(p.len(), Some(7));
    }
}
