//! Running one compaction: merge the inputs, keep what some reader can still see, write outputs.
//!
//! Snapshots split each key's history into stripes: all versions newer than the newest snapshot,
//! then those between consecutive snapshots. A reader at any snapshot sees only the newest version
//! in its stripe, so every older version in the same stripe is dropped. A deletion in the oldest
//! stripe is dropped too when no level below the output holds the key: nothing is left for it to
//! hide.
//!
//! Range tombstones of all the inputs are fragmented together. An entry a tombstone in its own
//! stripe covers is dropped; the tombstones themselves are written to each output clipped to the
//! key range that output stands for (from where the previous one was cut to where the next one
//! starts), keeping one sequence number per stripe, and are dropped in the oldest stripe when no
//! level below the output holds a key in their range.

use std::path::Path;
use std::sync::Arc;

use std::borrow::Cow;

use super::filter::{CompactionFilter, FilterDecision};
use super::picker::CompactionSpec;
use crate::blob::{BlobFileWriter, BlobFooter, BlobGarbage, BlobIndex, BlobStore};
use crate::error::Result;
use crate::filename::table_file;
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, ValueKind};
use crate::range_del::{FragmentedTombstones, TombstoneCursor, VersionPlace, VersionWalk, stripe};
use crate::sst::{BlockReadOptions, TableBuilder, TableCache, TableOptions};
use crate::version::{FileMetaData, NUM_LEVELS, Version};

/// What a compaction needs from the database.
pub(crate) struct JobContext<'a> {
    pub fs: &'a dyn FileSystem,
    pub dir: &'a Path,
    pub tables: &'a TableCache,
    pub table_opts: TableOptions,
    pub target_file_size: u64,
    /// Live snapshots' sequence numbers, ascending.
    pub snapshots: Vec<u64>,
    pub filter: Option<&'a dyn CompactionFilter>,
    /// The version the inputs were picked from (for what lies below the output level).
    pub version: &'a Version,
    pub new_file_number: &'a dyn Fn() -> u64,
    pub blobs: BlobContext<'a>,
}

/// What a compaction needs for blob indexes: the clock reading that decides expiry, the files
/// evicted or due for garbage collection, and where relocated values go.
pub(crate) struct BlobContext<'a> {
    pub store: &'a BlobStore,
    pub now: u64,
    /// Blob files whose live values are relocated (ascending).
    pub gc_files: Vec<u64>,
    /// Creates the blob file relocated values are written to.
    pub new_blob_file: &'a dyn Fn() -> Result<BlobFileWriter>,
}

/// What a compaction produced.
#[derive(Debug, Default)]
pub(crate) struct JobOutput {
    pub files: Vec<FileMetaData>,
    pub bytes_written: u64,
    pub entries_in: u64,
    pub entries_dropped: u64,
    /// Of `entries_dropped`, those a range tombstone covered.
    pub entries_range_deleted: u64,
    /// Range tombstones (fragment and sequence number pairs) read and not written.
    pub range_tombstones_dropped: u64,
    /// Bytes of blob records whose indexes the job dropped or moved, per blob file.
    pub blob_garbage: BlobGarbage,
    /// Blob files written by garbage collection: (number, footer, size).
    pub blob_files: Vec<(u64, BlobFooter, u64)>,
    pub blob_relocated_keys: u64,
    pub blob_relocated_bytes: u64,
    /// Blob files values were relocated out of.
    pub blob_relocated_from: std::collections::BTreeSet<u64>,
    /// Records the extent lists relocated keep from files not collected: borrowed anew by the
    /// entries written (`compaction/relocate.rs`).
    pub blob_borrowed: Vec<crate::blob::BlobRef>,
    /// Entries removed because they expired.
    pub entries_expired: u64,
    /// Indexes removed because their blob file was evicted.
    pub entries_evicted: u64,
}

/// Tracks, as keys increase, whether any level below the output holds a key.
struct BelowOutput<'a> {
    version: &'a Version,
    first_level: usize,
    cursor: [usize; NUM_LEVELS],
}

impl BelowOutput<'_> {
    /// Whether a level below the output holds any key in `[start, end)`.
    fn holds_range(&self, start: &[u8], end: &[u8]) -> bool {
        (self.first_level..NUM_LEVELS).any(|level| {
            let files = &self.version.levels[level];
            let i = files.partition_point(|f| key::user_key(&f.largest) < start);
            files
                .get(i)
                .is_some_and(|f| key::user_key(&f.smallest) < end)
        })
    }

    fn holds(&mut self, user_key: &[u8]) -> bool {
        for level in self.first_level..NUM_LEVELS {
            let files = &self.version.levels[level];
            let c = &mut self.cursor[level];
            while *c < files.len() && key::user_key(&files[*c].largest) < user_key {
                *c += 1;
            }
            if *c < files.len() && key::user_key(&files[*c].smallest) <= user_key {
                return true;
            }
        }
        false
    }
}

pub(super) struct Outputs<'a, 'b> {
    pub(super) ctx: &'a JobContext<'b>,
    current: Option<(u64, TableBuilder)>,
    pub(super) done: JobOutput,
    /// The range tombstones the outputs keep.
    tombstones: FragmentedTombstones,
    /// Where the current output's share of the tombstones begins: where the previous output was
    /// cut (`None` for the first).
    tombstones_from: Option<Vec<u8>>,
    /// The blob file garbage collection is writing.
    pub(super) blob_writer: Option<BlobFileWriter>,
}

impl Outputs<'_, '_> {
    /// The current output, opening one if there is none.
    fn open(&mut self) -> Result<&mut TableBuilder> {
        let current = match self.current.take() {
            Some(c) => c,
            None => {
                let number = (self.ctx.new_file_number)();
                let path = table_file(self.ctx.dir, number);
                let file = self.ctx.fs.create(&path)?;
                (
                    number,
                    TableBuilder::new(file, &path, self.ctx.table_opts.clone()),
                )
            }
        };
        Ok(&mut self.current.insert(current).1)
    }

    fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.open()?.add(ikey, value)
    }

    fn current_size(&self) -> u64 {
        self.current.as_ref().map_or(0, |(_, b)| b.file_size())
    }

    /// Finishes the current output, the next one starting at user key `next` (`None`: this is
    /// the last). The output takes the tombstones between where it began and `next`; the last
    /// output is written for them even if no entry opened it.
    fn finish_current(&mut self, next: Option<&[u8]>) -> Result<()> {
        let share = self
            .tombstones
            .truncated(self.tombstones_from.as_deref(), next);
        self.tombstones_from = next.map(<[u8]>::to_vec);
        if !share.is_empty() && (self.current.is_some() || next.is_none()) {
            let builder = self.open()?;
            for t in share {
                builder.add_range_tombstone(t);
            }
        }
        if let Some((number, builder)) = self.current.take() {
            let (props, file_size) = builder.finish()?;
            self.done.bytes_written += file_size;
            self.done
                .files
                .push(FileMetaData::from_table(number, file_size, props));
        }
        Ok(())
    }

    /// Counts an entry dropped; the blob record it points at (if any) becomes garbage.
    fn drop_entry(&mut self, ikey: &[u8], value: &[u8]) {
        self.done.entries_dropped += 1;
        crate::blob::note_garbage(&mut self.done.blob_garbage, key::kind_byte(ikey), value);
    }

    /// Removes every file this job created (it failed).
    fn abandon(&mut self) {
        let blobs = self
            .done
            .blob_files
            .iter()
            .map(|(n, _, _)| *n)
            .chain(self.blob_writer.take().map(|w| w.number))
            .collect::<Vec<_>>();
        for n in blobs {
            let _ = self.ctx.fs.remove(&self.ctx.blobs.store.path(n));
        }
        let numbers = self
            .done
            .files
            .iter()
            .map(|f| f.number)
            .chain(self.current.take().map(|(n, _)| n));
        for n in numbers.collect::<Vec<_>>() {
            let _ = self.ctx.fs.remove(&table_file(self.ctx.dir, n));
        }
    }
}

/// Cuts outputs where they would overlap too many grandparent bytes.
struct GrandparentLimit<'a> {
    files: &'a [Arc<FileMetaData>],
    index: usize,
    overlapped: u64,
    seen_key: bool,
    limit: u64,
}

impl GrandparentLimit<'_> {
    /// Whether the output should end before `user_key`, which an output of `size` bytes would
    /// take next: when it already overlaps more than the limit of the level below the output,
    /// or when `user_key` is past a file of that level and the output is at least half its
    /// target size. Outputs then end where the files below end, so each later compaction of
    /// one reads the fewest files below it (RocksDB cuts at those boundaries too).
    fn should_cut_before(&mut self, user_key: &[u8], size: u64, target: u64) -> bool {
        let mut crossed = false;
        while self.index < self.files.len()
            && key::user_key(&self.files[self.index].largest) < user_key
        {
            if self.seen_key {
                self.overlapped += self.files[self.index].file_size;
                crossed = true;
            }
            self.index += 1;
        }
        self.seen_key = true;
        if self.overlapped > self.limit || (crossed && size >= target / 2) {
            self.overlapped = 0;
            return true;
        }
        false
    }
}

pub(crate) fn run(spec: &CompactionSpec, ctx: &JobContext<'_>) -> Result<JobOutput> {
    let mut outputs = Outputs {
        ctx,
        current: None,
        done: JobOutput::default(),
        tombstones: FragmentedTombstones::default(),
        tombstones_from: None,
        blob_writer: None,
    };
    match merge(spec, ctx, &mut outputs) {
        Ok(()) => Ok(outputs.done),
        Err(e) => {
            outputs.abandon();
            Err(e)
        }
    }
}

fn merge(spec: &CompactionSpec, ctx: &JobContext<'_>, out: &mut Outputs<'_, '_>) -> Result<()> {
    let read = BlockReadOptions::ONE_PASS;
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    let mut tombstones = Vec::new();
    for (i, files) in spec.inputs.iter().enumerate() {
        for f in files {
            let table = ctx.tables.get(f.number, spec.level + i)?;
            tombstones.extend(table.range_tombstones().truncated(None, None));
            children.push(Box::new(table.iter(read)?));
        }
    }
    let mut it = MergingIterator::new(children);
    let mut below = BelowOutput {
        version: ctx.version,
        first_level: spec.output_level + 1,
        cursor: [0; NUM_LEVELS],
    };
    let tombstones = std::sync::Arc::new(FragmentedTombstones::new(tombstones));
    out.tombstones = tombstones
        .for_snapshots(&ctx.snapshots)
        .retain_seqs(|start, end, seq, _| {
            stripe(&ctx.snapshots, seq) > 0 || below.holds_range(start, end)
        });
    out.done.range_tombstones_dropped =
        (tombstones.num_tombstones() - out.tombstones.num_tombstones()) as u64;
    let mut covering = TombstoneCursor::over_list(tombstones);
    let mut grandparents = GrandparentLimit {
        files: &spec.grandparents,
        index: 0,
        overlapped: 0,
        seen_key: false,
        limit: 10 * ctx.target_file_size,
    };
    let top_stripe = ctx.snapshots.len();
    let mut versions = VersionWalk::default();
    let mut rewritten_key: Vec<u8> = Vec::new();

    it.seek_to_first();
    while it.valid() {
        out.done.entries_in += 1;
        let ikey = it.key();
        let user_key = key::user_key(ikey);
        let seq = key::sequence(ikey);
        let VersionPlace {
            first_of_key,
            newest_in_stripe,
            stripe,
        } = versions.step(user_key, seq, &ctx.snapshots);
        // Outputs are cut only between user keys, so no key spans two files of one level.
        if first_of_key
            && out.current.is_some()
            && (out.current_size() >= ctx.target_file_size
                || grandparents.should_cut_before(
                    user_key,
                    out.current_size(),
                    ctx.target_file_size,
                ))
        {
            out.finish_current(Some(user_key))?;
        }
        if !newest_in_stripe {
            out.drop_entry(ikey, it.value());
            it.next();
            continue;
        }
        if let Some(c) = covering.as_mut()
            && c.hides(user_key, seq, &ctx.snapshots)?
        {
            out.drop_entry(ikey, it.value());
            out.done.entries_range_deleted += 1;
            it.next();
            continue;
        }
        let mut kind = ValueKind::from_u8(key::kind_byte(ikey));
        let mut value = Cow::Borrowed(it.value());
        if kind == Some(ValueKind::BlobIndex) {
            let index = ctx.blobs.store.decode_index(it.value(), user_key)?;
            if index.is_expired(ctx.blobs.now) {
                // Gone for every reader from now on: a deletion at the same sequence number.
                out.done.entries_expired += 1;
                crate::blob::note_garbage(
                    &mut out.done.blob_garbage,
                    key::kind_byte(ikey),
                    it.value(),
                );
                kind = Some(ValueKind::Delete);
            } else if !ctx.blobs.store.files_present(&index) {
                // The eviction record names the file: this index (never a newer value, which
                // points elsewhere) reads as absent, so it becomes a deletion. An extent list
                // may also name records in files still present: those are garbage now (garbage
                // counted for the evicted file itself is moot).
                out.done.entries_evicted += 1;
                crate::blob::note_garbage(
                    &mut out.done.blob_garbage,
                    key::kind_byte(ikey),
                    it.value(),
                );
                kind = Some(ValueKind::Delete);
            } else if let Some(moved) = out.relocate_index(user_key, &index, it.value())? {
                value = Cow::Owned(moved);
            }
        }
        let droppable_tombstone =
            |below: &mut BelowOutput<'_>| stripe == 0 && !below.holds(user_key);
        let as_deletion = |rewritten: &mut Vec<u8>| {
            rewritten.clear();
            key::append_internal_key(rewritten, user_key, seq, ValueKind::Delete as u8);
        };
        match kind {
            Some(ValueKind::Delete) if droppable_tombstone(&mut below) => {
                out.done.entries_dropped += 1;
            }
            Some(ValueKind::Delete) if key::kind_byte(ikey) != ValueKind::Delete as u8 => {
                // An expired or evicted index: older versions below must stay hidden.
                as_deletion(&mut rewritten_key);
                out.add(&rewritten_key, &[])?;
            }
            Some(k @ (ValueKind::Put | ValueKind::BlobIndex))
                if first_of_key && stripe == top_stripe && ctx.filter.is_some() =>
            {
                let resolved = match k {
                    // From where the value was read: a relocated one's new file is not readable
                    // until the compaction installs it.
                    ValueKind::BlobIndex => filter_value(ctx, user_key, it.value())?,
                    _ => Some(Cow::Borrowed(&*value)),
                };
                let decision = match (ctx.filter, &resolved) {
                    (Some(f), Some(v)) => f.filter(spec.output_level, user_key, v),
                    _ => FilterDecision::Keep,
                };
                match decision {
                    FilterDecision::Keep => out.add(ikey, &value)?,
                    FilterDecision::ChangeValue(v) => {
                        // The new value is stored inline: its old blob record is garbage.
                        crate::blob::note_garbage(&mut out.done.blob_garbage, k as u8, &value);
                        rewritten_key.clear();
                        key::append_internal_key(
                            &mut rewritten_key,
                            user_key,
                            seq,
                            ValueKind::Put as u8,
                        );
                        out.add(&rewritten_key, &v)?;
                    }
                    FilterDecision::Remove => {
                        crate::blob::note_garbage(&mut out.done.blob_garbage, k as u8, &value);
                        if droppable_tombstone(&mut below) {
                            out.done.entries_dropped += 1;
                        } else {
                            // Older versions below must stay hidden: leave a deletion in its place.
                            as_deletion(&mut rewritten_key);
                            out.add(&rewritten_key, &[])?;
                        }
                    }
                }
            }
            _ => out.add(ikey, &value)?,
        }
        it.next();
    }
    it.status()?;
    out.finish_current(None)?;
    out.finish_blob_file()?;
    if !out.done.files.is_empty() {
        ctx.fs.sync_dir(ctx.dir)?;
    }
    Ok(())
}

/// The value a compaction filter sees for a blob index: the inline value, or the blob read.
/// `None` for a value longer than one write carries (built by partial writes, up to
/// `MAX_VALUE_SIZE`): it is kept unfiltered rather than read whole into memory.
fn filter_value<'v>(
    ctx: &JobContext<'_>,
    user_key: &[u8],
    index: &'v [u8],
) -> Result<Option<Cow<'v, [u8]>>> {
    Ok(Some(match BlobIndex::decode(index) {
        Some(BlobIndex::Inline { value, .. }) => Cow::Borrowed(value),
        Some(BlobIndex::Blob { blob, .. }) => {
            Cow::Owned(ctx.blobs.store.fetch(blob, user_key, false)?.to_vec())
        }
        Some(BlobIndex::Extents { data, .. }) => {
            let store = &ctx.blobs.store;
            let x = store.decode_extents(data, user_key)?;
            if x.len() > crate::options::MAX_WRITE_SIZE {
                return Ok(None);
            }
            Cow::Owned(store.read_extents(&x, user_key, (0, u64::MAX))?)
        }
        None => Cow::Borrowed(index),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_end_where_files_below_end_once_half_full() {
        let files: Vec<Arc<FileMetaData>> = [(1, "a", "c"), (2, "d", "f"), (3, "g", "i")]
            .into_iter()
            .map(|(n, lo, hi)| Arc::new(FileMetaData::for_test(n, lo, hi, 100)))
            .collect();
        let mut g = GrandparentLimit {
            files: &files,
            index: 0,
            overlapped: 0,
            seen_key: false,
            limit: 1000,
        };
        let target = 100;
        assert!(!g.should_cut_before(b"a", 0, target));
        assert!(!g.should_cut_before(b"b", 80, target), "no boundary passed");
        assert!(
            g.should_cut_before(b"e", 80, target),
            "past a-c, more than half full"
        );
        assert!(!g.should_cut_before(b"e2", 10, target));
        assert!(
            !g.should_cut_before(b"h", 40, target),
            "past d-f, but under half full"
        );
        assert!(g.should_cut_before(b"z", 60, target), "past g-i");
        // The overlap limit still cuts a small output that spans too much below it.
        let mut tight = GrandparentLimit {
            files: &files,
            index: 0,
            overlapped: 0,
            seen_key: false,
            limit: 150,
        };
        assert!(!tight.should_cut_before(b"a", 0, target));
        assert!(!tight.should_cut_before(b"e", 10, target));
        assert!(
            tight.should_cut_before(b"h", 20, target),
            "200 bytes overlapped"
        );
    }
}
