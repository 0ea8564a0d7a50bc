//! The user-facing iterator: turns the merged stream of internal entries into the newest visible
//! version of each user key at the iterator's snapshot, hiding deletions, within the bounds.

use std::sync::Arc;

use super::SuperVersion;
use crate::blob::{BlobIndex, BlobStore, Resolved};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, KIND_FOR_SEEK, MAX_SEQUENCE, SequenceNumber, ValueKind};
use crate::snapshot::Snapshot;

/// How an iterator reads values that live behind blob indexes.
#[derive(Debug)]
pub(crate) struct BlobReads {
    pub store: Arc<BlobStore>,
    /// Expirations are judged against the clock when the iterator was created.
    pub now: u64,
    pub keys_only: bool,
    pub fill_cache: bool,
}

/// Where the current entry's value is.
#[derive(Debug)]
enum CurrentValue {
    /// The entry's own value (the inner iterator's, or the saved one going backward).
    Entry,
    /// Part of the entry's value: an inline value behind its expiration.
    Inline { start: usize, len: usize },
    /// Read from a blob file.
    Blob(Arc<Vec<u8>>),
    /// Not read (`keys_only`).
    Empty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// The inner iterator is at the current entry.
    Forward,
    /// The inner iterator is before every entry of the current key, which is held in `saved_*`.
    Reverse,
}

/// Iterates the store as of one moment: the snapshot taken (or given) when it was created. It pins
/// the memtables and tables it reads, so flushes and compactions never pull data out from under it.
pub struct DbIterator {
    inner: MergingIterator,
    seq: SequenceNumber,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    blobs: BlobReads,
    current: CurrentValue,
    /// A blob read that failed; the iterator is invalid after one.
    error: Option<Error>,
    /// A seek has placed it (the `Entries` adapters start from there).
    positioned: bool,
    _snapshot: Snapshot,
    _view: Arc<SuperVersion>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("sequence", &self.seq)
            .field("valid", &self.valid)
            .finish()
    }
}

impl DbIterator {
    pub(crate) fn new(
        inner: MergingIterator,
        snapshot: Snapshot,
        view: Arc<SuperVersion>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        blobs: BlobReads,
    ) -> Self {
        DbIterator {
            inner,
            seq: snapshot.sequence(),
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            lower,
            upper,
            blobs,
            current: CurrentValue::Entry,
            error: None,
            positioned: false,
            _snapshot: snapshot,
            _view: view,
        }
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key. Empty when not valid.
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward => key::user_key(self.inner.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value. Empty when not valid.
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        let entry = match self.direction {
            Direction::Forward => self.inner.value(),
            Direction::Reverse => &self.saved_value,
        };
        match &self.current {
            CurrentValue::Entry => entry,
            CurrentValue::Inline { start, len } => &entry[*start..*start + *len],
            CurrentValue::Blob(v) => v,
            CurrentValue::Empty => &[],
        }
    }

    /// An error met while iterating (a damaged block or blob record). The iterator is invalid
    /// after one.
    pub fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        self.inner.status()
    }

    /// Whether the blob index `index` still stands for a value: not expired, its blob file not
    /// evicted. Reads nothing.
    fn index_is_live(&self, index: &[u8]) -> bool {
        BlobIndex::decode(index).is_none_or(|d| self.blobs.store.is_live(&d, self.blobs.now))
    }

    /// Records an error met while iterating; the iterator is invalid from then on.
    fn fail(&mut self, e: Error) {
        self.error = Some(e);
        self.valid = false;
    }

    fn below_upper(&self, user_key: &[u8]) -> bool {
        self.upper.as_deref().is_none_or(|u| user_key < u)
    }

    fn at_or_above_lower(&self, user_key: &[u8]) -> bool {
        self.lower.as_deref().is_none_or(|l| user_key >= l)
    }

    /// Moves forward to the newest visible put, skipping keys <= `skip` when `skipping`.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        while self.inner.valid() {
            let ikey = self.inner.key();
            let uk = key::user_key(ikey);
            if !self.below_upper(uk) {
                break;
            }
            if key::sequence(ikey) <= self.seq {
                match ValueKind::from_u8(key::kind_byte(ikey)) {
                    Some(ValueKind::Delete) => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(uk);
                        skipping = true;
                    }
                    Some(kind @ (ValueKind::Put | ValueKind::BlobIndex))
                        if !(skipping && uk <= self.saved_key.as_slice()) =>
                    {
                        match current_value(&self.blobs, kind, uk, self.inner.value()) {
                            Ok(Some(current)) => {
                                self.current = current;
                                self.valid = true;
                                self.saved_key.clear();
                                return;
                            }
                            // Expired or evicted: absent, and it hides older versions.
                            Ok(None) => {
                                self.saved_key.clear();
                                self.saved_key.extend_from_slice(uk);
                                skipping = true;
                            }
                            Err(e) => return self.fail(e),
                        }
                    }
                    _ => {}
                }
            }
            self.inner.next();
        }
        self.valid = false;
        self.saved_key.clear();
    }

    /// Moves back to the newest visible put of the previous user key, saving it.
    fn find_prev_user_entry(&mut self) {
        let mut last_kind = ValueKind::Delete;
        if self.error.is_some() {
            self.valid = false;
            return;
        }
        while self.inner.valid() {
            let ikey = self.inner.key();
            if key::sequence(ikey) <= self.seq {
                let uk = key::user_key(ikey);
                if last_kind != ValueKind::Delete && uk < self.saved_key.as_slice() {
                    break; // the saved key's newest visible version is complete
                }
                if !self.at_or_above_lower(uk) && last_kind == ValueKind::Delete {
                    break;
                }
                let kind = ValueKind::from_u8(key::kind_byte(ikey));
                let live_index =
                    kind == Some(ValueKind::BlobIndex) && self.index_is_live(self.inner.value());
                match kind {
                    Some(ValueKind::Put) | Some(ValueKind::BlobIndex)
                        if kind == Some(ValueKind::Put) || live_index =>
                    {
                        last_kind = kind.unwrap_or(ValueKind::Put);
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(uk);
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(self.inner.value());
                    }
                    _ => {
                        last_kind = ValueKind::Delete;
                        self.saved_key.clear();
                        self.saved_value.clear();
                    }
                }
            }
            self.inner.prev();
        }
        if !self.inner.valid()
            && let Err(e) = self.inner.status()
        {
            // The saved version may be an older one of a key whose newer version lies in the
            // source that failed: yielding it would show an outdated value.
            self.saved_key.clear();
            self.saved_value.clear();
            return self.fail(e);
        }
        if last_kind == ValueKind::Delete || !self.at_or_above_lower(&self.saved_key) {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
            return;
        }
        match current_value(&self.blobs, last_kind, &self.saved_key, &self.saved_value) {
            Ok(Some(current)) => {
                self.current = current;
                self.valid = true;
            }
            // Checked live above; the only way here is a file evicted meanwhile.
            Ok(None) => {
                self.valid = false;
                self.direction = Direction::Forward;
            }
            Err(e) => self.fail(e),
        }
    }

    /// Positions at the first key >= `target` (and >= the lower bound).
    pub fn seek(&mut self, target: &[u8]) {
        self.positioned = true;
        let target = match &self.lower {
            Some(l) if target < l.as_slice() => l.clone(),
            _ => target.to_vec(),
        };
        self.direction = Direction::Forward;
        self.saved_key.clear();
        self.inner.seek(&key::lookup_key(&target, self.seq));
        self.find_next_user_entry(false);
    }

    /// Positions at the last key <= `target` (and below the upper bound).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.positioned = true;
        self.direction = Direction::Reverse;
        self.saved_key.clear();
        self.saved_value.clear();
        match &self.upper {
            Some(u) if target >= u.as_slice() => {
                let before_upper = key::internal_key(u, MAX_SEQUENCE, KIND_FOR_SEEK);
                self.inner.seek_for_prev(&before_upper);
                // An entry equal to the upper bound's seek key cannot exist; anything found is < upper.
            }
            _ => self.inner.seek_for_prev(&key::internal_key(target, 0, 0)),
        }
        self.find_prev_user_entry();
    }

    /// Positions at the first key.
    pub fn seek_to_first(&mut self) {
        self.positioned = true;
        match self.lower.clone() {
            Some(l) => self.seek(&l),
            None => {
                self.direction = Direction::Forward;
                self.saved_key.clear();
                self.inner.seek_to_first();
                self.find_next_user_entry(false);
            }
        }
    }

    /// Positions at the last key.
    pub fn seek_to_last(&mut self) {
        self.positioned = true;
        match self.upper.clone() {
            Some(u) => self.seek_for_prev(&u),
            None => {
                self.direction = Direction::Reverse;
                self.saved_key.clear();
                self.saved_value.clear();
                self.inner.seek_to_last();
                self.find_prev_user_entry();
            }
        }
    }

    /// Moves to the next key. Does nothing when not valid.
    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The inner iterator is before the current key's entries; step onto them, then past.
            if self.inner.valid() {
                self.inner.next();
            } else {
                self.inner.seek_to_first();
            }
            if !self.inner.valid() {
                self.valid = false;
                self.saved_key.clear();
                return;
            }
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.inner.key()));
            self.inner.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous key. Does nothing when not valid.
    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.inner.key()));
            loop {
                self.inner.prev();
                if !self.inner.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    return;
                }
                if key::user_key(self.inner.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }
}

/// Where the value of a found entry of `kind` is; `None` when the key turns out absent (an
/// expired index, or one into an evicted blob file).
fn current_value(
    blobs: &BlobReads,
    kind: ValueKind,
    user_key: &[u8],
    value: &[u8],
) -> Result<Option<CurrentValue>> {
    if kind != ValueKind::BlobIndex {
        return Ok(Some(if blobs.keys_only {
            CurrentValue::Empty
        } else {
            CurrentValue::Entry
        }));
    }
    let resolved = blobs.store.resolve(
        value,
        user_key,
        blobs.now,
        blobs.keys_only,
        blobs.fill_cache,
    )?;
    Ok(match resolved {
        Resolved::Gone => None,
        Resolved::Inline { .. } | Resolved::Unread if blobs.keys_only => Some(CurrentValue::Empty),
        Resolved::Inline { start, len } => Some(CurrentValue::Inline { start, len }),
        Resolved::Blob(v) => Some(CurrentValue::Blob(v)),
        Resolved::Unread => Some(CurrentValue::Empty),
    })
}

impl DbIterator {
    /// The entries in ascending key order as Rust's `Iterator`, from where a seek placed the
    /// cursor, else from the first key in the bounds:
    /// `for entry in db.iter(&opts)?.forward() { let (key, value) = entry?; }`.
    /// An error is the last item.
    pub fn forward(self) -> Entries {
        Entries {
            it: self,
            reverse: false,
            done: false,
        }
    }

    /// The entries in descending key order, from where a seek placed the cursor, else from the
    /// last key in the bounds. An error is the last item.
    pub fn backward(self) -> Entries {
        Entries {
            it: self,
            reverse: true,
            done: false,
        }
    }
}

/// A [`DbIterator`] as Rust's `Iterator` over owned `(key, value)` pairs; see
/// [`DbIterator::forward`] and [`DbIterator::backward`].
#[derive(Debug)]
pub struct Entries {
    it: DbIterator,
    reverse: bool,
    done: bool,
}

impl Iterator for Entries {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let it = &mut self.it;
        match (it.positioned, self.reverse) {
            (false, false) => it.seek_to_first(),
            (false, true) => it.seek_to_last(),
            (true, _) => {}
        }
        if !it.valid() {
            self.done = true;
            return it.status().err().map(Err);
        }
        let entry = (it.key().to_vec(), it.value().to_vec());
        if self.reverse {
            it.prev();
        } else {
            it.next();
        }
        Some(Ok(entry))
    }
}

impl std::iter::FusedIterator for Entries {}
