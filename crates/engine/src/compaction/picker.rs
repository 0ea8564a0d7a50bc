//! Choosing what to compact: level size targets, a score per level, and the inputs of the most
//! urgent compaction.

use std::collections::HashSet;
use std::sync::Arc;

use crate::events::CompactionReason;
use crate::key;
use crate::options::ColumnFamilyOptions;
use crate::version::{FileMetaData, NUM_LEVELS, Version};

/// A compaction's inputs and where it writes.
#[derive(Debug, Clone)]
pub(crate) struct CompactionSpec {
    pub reason: CompactionReason,
    pub level: usize,
    pub output_level: usize,
    /// Files at `level`, then the overlapping files at `output_level`.
    pub inputs: [Vec<Arc<FileMetaData>>; 2],
    /// Files at `output_level + 1` overlapping the inputs: outputs are cut so no output overlaps
    /// too many of them (which would make its own later compaction expensive).
    pub grandparents: Vec<Arc<FileMetaData>>,
}

impl CompactionSpec {
    pub(crate) fn input_files(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.inputs.iter().flatten()
    }

    pub(crate) fn input_bytes(&self) -> u64 {
        self.input_files().map(|f| f.file_size).sum()
    }

    /// Files that overlap nothing below them, nor each other, and not too much two levels down:
    /// they move to the output level by a MANIFEST edit alone. Several L0 files qualify when
    /// their key ranges are disjoint, as a sequential load's flushes are (and as they pile up
    /// when flushes outpace compactions, or under WASI, where background work runs in turns).
    pub(crate) fn is_trivial_move(&self, target_file_size: u64) -> bool {
        self.reason != CompactionReason::Manual
            && !self.inputs[0].is_empty()
            && self.inputs[1].is_empty()
            && disjoint(&self.inputs[0])
            && self.grandparents.iter().map(|f| f.file_size).sum::<u64>() <= 10 * target_file_size
    }
}

/// Whether no two of `files` share a user key in their ranges.
fn disjoint(files: &[Arc<FileMetaData>]) -> bool {
    let mut ranges: Vec<(&[u8], &[u8])> = files
        .iter()
        .map(|f| (key::user_key(&f.smallest), key::user_key(&f.largest)))
        .collect();
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

/// Size targets per level, and the level L0 compacts into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LevelTargets {
    pub base_level: usize,
    /// Bytes; 0 for levels above the base level (they should hold nothing).
    pub bytes: [u64; NUM_LEVELS],
}

pub(crate) fn level_bytes(files: &[Arc<FileMetaData>]) -> u64 {
    files.iter().map(|f| f.file_size).sum()
}

pub(crate) fn level_targets(v: &Version, o: &ColumnFamilyOptions) -> LevelTargets {
    let bottom = NUM_LEVELS - 1;
    let mut bytes = [0u64; NUM_LEVELS];
    let mult = o.max_bytes_for_level_multiplier;
    if !o.level_compaction_dynamic_level_bytes {
        bytes[1] = o.max_bytes_for_level_base;
        for l in 2..NUM_LEVELS {
            bytes[l] = bytes[l - 1].saturating_mul(mult);
        }
        return LevelTargets {
            base_level: 1,
            bytes,
        };
    }
    // From the bottom up: the last level's target is its size, each level above a multiplier
    // smaller, until a target would drop to the base size: that level is where L0 goes.
    let max_size = (1..NUM_LEVELS)
        .map(|l| level_bytes(&v.levels[l]))
        .max()
        .unwrap_or(0);
    bytes[bottom] = max_size.max(o.max_bytes_for_level_base);
    let mut base_level = bottom;
    while base_level > 1 && bytes[base_level] > o.max_bytes_for_level_base {
        bytes[base_level - 1] = bytes[base_level] / mult;
        base_level -= 1;
    }
    // No level's target below the base size: a base level of a tenth of it would be pushed down
    // after every L0 compaction, rewriting the level below for a few megabytes each time.
    for target in &mut bytes[base_level..] {
        *target = (*target).max(o.max_bytes_for_level_base);
    }
    LevelTargets { base_level, bytes }
}

/// A table's size as the picker weighs it: with range tombstones, its bytes plus those of the
/// tables below that its key range overlaps, an estimate of what its tombstones will delete.
/// Levels holding such tables fill up sooner and those tables go first, so deleted data leaves
/// the tree early (RocksDB's compensated file size).
pub(crate) fn compensated_size(v: &Version, level: usize, f: &FileMetaData) -> u64 {
    if f.num_range_deletions == 0 {
        return f.file_size;
    }
    let (lo, hi) = (key::user_key(&f.smallest), key::user_key(&f.largest));
    let below: u64 = (level + 1..NUM_LEVELS)
        .map(|l| overlap_bytes(&v.levels[l], lo, hi))
        .sum();
    f.file_size.saturating_add(below)
}

/// How urgently each level needs compaction; >= 1 means it should run. The last level scores 0.
pub(crate) fn scores(
    v: &Version,
    o: &ColumnFamilyOptions,
    busy: &HashSet<u64>,
    targets: &LevelTargets,
) -> [f64; NUM_LEVELS] {
    let mut s = [0.0; NUM_LEVELS];
    if !v.levels[0].iter().any(|f| busy.contains(&f.number)) {
        s[0] = v.levels[0].len() as f64 / o.level0_file_num_compaction_trigger as f64;
    }
    for (l, score) in s.iter_mut().enumerate().take(NUM_LEVELS - 1).skip(1) {
        let idle: u64 = v.levels[l]
            .iter()
            .filter(|f| !busy.contains(&f.number))
            .map(|f| compensated_size(v, l, f))
            .sum();
        *score = if idle == 0 {
            0.0
        } else if l < targets.base_level {
            // Data above the base level is left from when the store was smaller: push it down.
            f64::MAX / 2.0
        } else {
            idle as f64 / targets.bytes[l].max(1) as f64
        };
    }
    s
}

/// Bytes compaction must rewrite before every level is within its target (an estimate, as
/// RocksDB's: each level's excess, times the fan-out it is merged into).
pub(crate) fn pending_compaction_bytes(v: &Version, o: &ColumnFamilyOptions) -> u64 {
    let targets = level_targets(v, o);
    let mut pending = 0u64;
    if v.levels[0].len() >= o.level0_file_num_compaction_trigger {
        pending += level_bytes(&v.levels[0]);
    }
    for l in targets.base_level..NUM_LEVELS - 1 {
        let size = level_bytes(&v.levels[l]);
        if size > targets.bytes[l] {
            let excess = size - targets.bytes[l];
            pending =
                pending.saturating_add(excess.saturating_mul(o.max_bytes_for_level_multiplier + 1));
        }
    }
    pending
}

/// Smallest and largest user keys of some files.
pub(crate) fn user_range(files: &[Arc<FileMetaData>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let smallest = files.iter().map(|f| key::user_key(&f.smallest)).min()?;
    let largest = files.iter().map(|f| key::user_key(&f.largest)).max()?;
    Some((smallest.to_vec(), largest.to_vec()))
}

/// Files of `level` whose user-key range meets `[lo, hi]`.
pub(crate) fn overlapping(
    v: &Version,
    level: usize,
    lo: &[u8],
    hi: &[u8],
) -> Vec<Arc<FileMetaData>> {
    v.levels[level]
        .iter()
        .filter(|f| key::user_key(&f.largest) >= lo && key::user_key(&f.smallest) <= hi)
        .cloned()
        .collect()
}

/// Builds a compaction of `inputs` (from `level`) into `output_level`; `None` if a file it needs is
/// already being compacted.
pub(crate) fn build(
    v: &Version,
    reason: CompactionReason,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<FileMetaData>>,
    busy: &HashSet<u64>,
) -> Option<CompactionSpec> {
    let (lo, hi) = user_range(&inputs)?;
    let below = if output_level == level {
        Vec::new()
    } else {
        overlapping(v, output_level, &lo, &hi)
    };
    if inputs
        .iter()
        .chain(&below)
        .any(|f| busy.contains(&f.number))
    {
        return None;
    }
    let all: Vec<_> = inputs.iter().chain(&below).cloned().collect();
    let (lo, hi) = user_range(&all)?;
    let grandparents = if output_level + 1 < NUM_LEVELS {
        overlapping(v, output_level + 1, &lo, &hi)
    } else {
        Vec::new()
    };
    Some(CompactionSpec {
        reason,
        level,
        output_level,
        inputs: [inputs, below],
        grandparents,
    })
}

/// The level L0 (or a level above the base) should write to: the base level, unless a level in
/// between holds overlapping data, which must stay below the newer data being moved.
fn output_level_for(
    v: &Version,
    level: usize,
    targets: &LevelTargets,
    lo: &[u8],
    hi: &[u8],
) -> usize {
    let wanted = if level == 0 {
        targets.base_level.max(1)
    } else {
        level + 1
    };
    (level + 1..wanted)
        .find(|&l| !overlapping(v, l, lo, hi).is_empty())
        .unwrap_or(wanted)
}

/// Bytes of the files in `next` (sorted, non-overlapping) that overlap `[lo, hi]`.
fn overlap_bytes(next: &[Arc<FileMetaData>], lo: &[u8], hi: &[u8]) -> u64 {
    let start = next.partition_point(|g| key::user_key(&g.largest) < lo);
    let end = next.partition_point(|g| key::user_key(&g.smallest) <= hi);
    next[start..end.max(start)]
        .iter()
        .map(|g| g.file_size)
        .sum()
}

/// The most urgent compaction, if any level scores >= 1. Within a level below L0 it takes the file
/// that overlaps the fewest bytes below it for its size (RocksDB's min-overlapping-ratio priority):
/// the cheapest file to push down, which keeps write amplification low.
pub(crate) fn pick(
    v: &Version,
    o: &ColumnFamilyOptions,
    busy: &HashSet<u64>,
) -> Option<CompactionSpec> {
    let targets = level_targets(v, o);
    let s = scores(v, o, busy, &targets);
    let mut order: Vec<usize> = (0..NUM_LEVELS - 1).filter(|&l| s[l] >= 1.0).collect();
    order.sort_by(|a, b| s[*b].total_cmp(&s[*a]));
    for level in order {
        if level == 0 {
            let inputs = v.levels[0].clone();
            let (lo, hi) = user_range(&inputs)?;
            let out = output_level_for(v, 0, &targets, &lo, &hi);
            if let Some(c) = build(v, CompactionReason::Level0FileCount, 0, out, inputs, busy) {
                return Some(c);
            }
            continue;
        }
        let next = &v.levels[level + 1];
        // Tables with range tombstones first (they shrink what lies below them), then the
        // lowest overlap ratio.
        let mut candidates: Vec<((bool, u128), &Arc<FileMetaData>)> = v.levels[level]
            .iter()
            .filter(|f| !busy.contains(&f.number))
            .map(|f| {
                let overlap =
                    overlap_bytes(next, key::user_key(&f.smallest), key::user_key(&f.largest));
                let ratio = (overlap as u128) * 1024 / f.file_size.max(1) as u128;
                ((f.num_range_deletions == 0, ratio), f)
            })
            .collect();
        candidates.sort_by_key(|(order, _)| *order);
        for (_, f) in candidates {
            let (lo, hi) = (key::user_key(&f.smallest), key::user_key(&f.largest));
            let out = output_level_for(v, level, &targets, lo, hi);
            if let Some(c) = build(
                v,
                CompactionReason::LevelSize,
                level,
                out,
                vec![f.clone()],
                busy,
            ) {
                return Some(expand_inputs(v, c, 25 * o.target_file_size_base, busy));
            }
        }
    }
    pick_dense_in_tombstones(v, &targets, busy)
}

/// `c` with more files of its input level, when the files it rewrites below already span them:
/// every file of the input level inside the range its output-level files cover joins, if that
/// adds no file below and the whole stays within `limit` bytes (RocksDB's default
/// `max_compaction_bytes`, 25 target files). The output level's files are rewritten once for
/// all of them, not once per file (LevelDB's and RocksDB's input expansion).
fn expand_inputs(
    v: &Version,
    c: CompactionSpec,
    limit: u64,
    busy: &HashSet<u64>,
) -> CompactionSpec {
    if c.level == c.output_level || c.inputs[1].is_empty() {
        return c;
    }
    let Some((lo, hi)) = user_range(&c.input_files().cloned().collect::<Vec<_>>()) else {
        return c;
    };
    let wider = overlapping(v, c.level, &lo, &hi);
    if wider.len() <= c.inputs[0].len() || wider.iter().any(|f| busy.contains(&f.number)) {
        return c;
    }
    let Some((wlo, whi)) = user_range(&wider) else {
        return c;
    };
    let below = overlapping(v, c.output_level, &wlo, &whi);
    if below.len() != c.inputs[1].len() || level_bytes(&wider) + level_bytes(&below) > limit {
        return c;
    }
    build(v, c.reason, c.level, c.output_level, wider, busy).unwrap_or(c)
}

/// The tombstone-density trigger: the first table above the last level that is dense in range
/// tombstones (at least one per 64 point entries) and spans at least as many bytes below it as it
/// holds. Each such compaction moves the tombstones a level down, and at the last level they are
/// dropped with what they cover, so this ends.
fn pick_dense_in_tombstones(
    v: &Version,
    targets: &LevelTargets,
    busy: &HashSet<u64>,
) -> Option<CompactionSpec> {
    for level in 0..NUM_LEVELS - 1 {
        let dense = v.levels[level].iter().find(|f| {
            !busy.contains(&f.number)
                && f.num_range_deletions > 0
                && f.num_range_deletions.saturating_mul(64) >= f.num_entries
                && compensated_size(v, level, f) >= f.file_size.saturating_mul(2)
        });
        let Some(f) = dense else { continue };
        // L0 goes down whole (see `pick`).
        let inputs = if level == 0 {
            v.levels[0].clone()
        } else {
            vec![f.clone()]
        };
        let (lo, hi) = user_range(&inputs)?;
        let out = output_level_for(v, level, targets, &lo, &hi);
        if let Some(c) = build(
            v,
            CompactionReason::RangeDeletions,
            level,
            out,
            inputs,
            busy,
        ) {
            return Some(c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(number: u64, lo: &str, hi: &str, size: u64) -> Arc<FileMetaData> {
        Arc::new(FileMetaData::for_test(number, lo, hi, size))
    }

    fn opts() -> ColumnFamilyOptions {
        ColumnFamilyOptions {
            max_bytes_for_level_base: 1000,
            max_bytes_for_level_multiplier: 10,
            level0_file_num_compaction_trigger: 2,
            ..ColumnFamilyOptions::default()
        }
    }

    #[test]
    fn disjoint_l0_files_move_together_and_overlapping_ones_are_merged() {
        let mut v = Version::default();
        v.levels[0] = vec![
            file(3, "e", "f", 10),
            file(2, "a", "b", 10),
            file(1, "c", "d", 10),
        ];
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!(c.inputs[0].len(), 3);
        assert!(c.is_trivial_move(64 << 20), "a sequential load's flushes");
        v.levels[0] = vec![file(3, "c", "f", 10), file(2, "a", "d", 10)];
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert!(!c.is_trivial_move(64 << 20), "\"c\"..\"d\" is in both");
        v.levels[0] = vec![file(3, "d", "f", 10), file(2, "a", "d", 10)];
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert!(!c.is_trivial_move(64 << 20), "a shared boundary key");
    }

    #[test]
    fn a_level_compaction_takes_the_neighbours_its_files_below_already_span() {
        let mut v = Version::default();
        v.levels[1] = vec![
            file(1, "a", "b", 100),
            file(2, "c", "d", 100),
            file(3, "x", "y", 100),
        ];
        v.levels[2] = vec![file(4, "a", "e", 1000), file(5, "w", "z", 1000)];
        let busy = HashSet::new();
        let one = |v: &Version| {
            let first = vec![v.levels[1][0].clone()];
            build(v, CompactionReason::LevelSize, 1, 2, first, &HashSet::new()).unwrap()
        };
        // a-b overlaps file 4, which spans c-d too: c-d joins at no extra cost below.
        let c = expand_inputs(&v, one(&v), 10_000, &busy);
        let numbers = |fs: &[Arc<FileMetaData>]| fs.iter().map(|f| f.number).collect::<Vec<_>>();
        assert_eq!(numbers(&c.inputs[0]), vec![1, 2]);
        assert_eq!(numbers(&c.inputs[1]), vec![4]);
        // Not past the size limit, and never by adding files below.
        let c = expand_inputs(&v, one(&v), 1_100, &busy);
        assert_eq!(numbers(&c.inputs[0]), vec![1]);
        v.levels[2] = vec![file(4, "a", "b", 1000), file(6, "c", "e", 1000)];
        let c = expand_inputs(&v, one(&v), 10_000, &busy);
        assert_eq!(numbers(&c.inputs[0]), vec![1]);
        // A busy neighbour stays where it is.
        v.levels[2] = vec![file(4, "a", "e", 1000)];
        let c = expand_inputs(&v, one(&v), 10_000, &HashSet::from([2]));
        assert_eq!(numbers(&c.inputs[0]), vec![1]);
    }

    #[test]
    fn dynamic_targets_grow_from_the_bottom() {
        let mut v = Version::default();
        let t = level_targets(&v, &opts());
        assert_eq!(
            t.base_level, 6,
            "an empty store compacts L0 straight to the last level"
        );
        v.levels[6] = vec![file(1, "a", "z", 200_000)];
        let t = level_targets(&v, &opts());
        assert_eq!(t.bytes[6], 200_000);
        assert_eq!(t.bytes[5], 20_000);
        assert_eq!(t.bytes[4], 2_000);
        assert_eq!(
            t.bytes[3], 1_000,
            "the base level's target is never below the base size (200 by the ratio)"
        );
        assert_eq!(t.base_level, 3);
        let fixed = ColumnFamilyOptions {
            level_compaction_dynamic_level_bytes: false,
            ..opts()
        };
        let t = level_targets(&v, &fixed);
        assert_eq!((t.base_level, t.bytes[1], t.bytes[3]), (1, 1000, 100_000));
    }

    #[test]
    fn l0_goes_to_the_base_level_unless_data_sits_in_between() {
        let mut v = Version::default();
        v.levels[0] = vec![file(3, "c", "f", 10), file(2, "a", "d", 10)];
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!((c.level, c.output_level), (0, 6));
        assert_eq!(c.inputs[0].len(), 2);
        v.levels[2] = vec![file(1, "e", "g", 10)];
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!(
            (c.level, c.output_level),
            (2, 3),
            "data above the base level is pushed down first"
        );
        let targets = level_targets(&v, &opts());
        assert_eq!(
            output_level_for(&v, 0, &targets, b"a", b"f"),
            2,
            "older data at L2 must stay below the newer L0 data"
        );
        assert_eq!(
            output_level_for(&v, 0, &targets, b"a", b"b"),
            6,
            "no overlap in between: straight to the base"
        );
        let busy: HashSet<u64> = [1].into();
        assert!(
            pick(&v, &opts(), &busy).is_none(),
            "every candidate needs the busy file"
        );
    }

    #[test]
    fn oversized_levels_push_down_the_file_that_overlaps_least() {
        let mut v = Version::default();
        v.levels[6] = vec![
            file(7, "a", "b", 50_000),
            file(8, "c", "d", 40_000),
            file(9, "e", "z", 10_000),
        ];
        v.levels[5] = vec![
            file(1, "a", "b", 6000),
            file(2, "c", "d", 6000),
            file(3, "e", "f", 6000),
        ];
        let o = opts();
        assert!(scores(&v, &o, &HashSet::new(), &level_targets(&v, &o))[5] > 1.0);
        let c = pick(&v, &o, &HashSet::new()).unwrap();
        assert_eq!(
            c.inputs[0][0].number, 3,
            "file 3 overlaps 10k below, the others 40k and 50k"
        );
        assert_eq!((c.output_level, c.inputs[1][0].number), (6, 9));
        let busy: HashSet<u64> = [3].into();
        assert_eq!(
            pick(&v, &o, &busy).unwrap().inputs[0][0].number,
            2,
            "next cheapest while 3 is busy"
        );
        assert!(pending_compaction_bytes(&v, &o) > 0);
    }

    #[test]
    fn range_tombstones_make_a_level_due_and_their_table_go_first() {
        let mut v = Version::default();
        v.levels[6] = vec![file(7, "a", "m", 50_000), file(8, "n", "z", 50_000)];
        // L5 is within its 10,000-byte target by raw size...
        v.levels[5] = vec![file(1, "a", "b", 3000), file(2, "c", "m", 3000)];
        let o = opts();
        let targets = level_targets(&v, &o);
        assert!(scores(&v, &o, &HashSet::new(), &targets)[5] < 1.0);
        assert_eq!(pick(&v, &o, &HashSet::new()).map(|c| c.level), None);
        // ...until one of its tables holds range tombstones over 50,000 bytes below.
        let mut dense = (*file(2, "c", "m", 3000)).clone();
        dense.num_range_deletions = 10;
        v.levels[5][1] = Arc::new(dense);
        assert_eq!(compensated_size(&v, 5, &v.levels[5][1]), 53_000);
        assert!(scores(&v, &o, &HashSet::new(), &targets)[5] > 1.0);
        let c = pick(&v, &o, &HashSet::new()).unwrap();
        assert_eq!(c.level, 5);
        assert!(
            c.inputs[0].iter().any(|f| f.number == 2),
            "the table with tombstones goes first despite its larger overlap"
        );
    }

    #[test]
    fn tables_dense_in_tombstones_go_down_though_their_level_is_within_target() {
        // Fixed targets: L2 may hold 10,000 bytes.
        let o = ColumnFamilyOptions {
            level_compaction_dynamic_level_bytes: false,
            ..opts()
        };
        let mut v = Version::default();
        v.levels[3] = vec![file(7, "a", "m", 700), file(8, "n", "z", 700)];
        v.levels[2] = vec![file(1, "a", "b", 300), file(2, "c", "m", 300)];
        assert!(pick(&v, &o, &HashSet::new()).is_none(), "nothing due");
        // One tombstone among 1000 entries is not dense; the level stays within its target.
        let mut sparse = (*file(2, "c", "m", 300)).clone();
        sparse.num_entries = 1000;
        sparse.num_range_deletions = 1;
        v.levels[2][1] = Arc::new(sparse.clone());
        assert!(scores(&v, &o, &HashSet::new(), &level_targets(&v, &o))[2] < 1.0);
        assert!(
            pick(&v, &o, &HashSet::new()).is_none(),
            "sparse tombstones wait"
        );
        let mut dense = sparse;
        dense.num_range_deletions = 20;
        v.levels[2][1] = Arc::new(dense);
        let c = pick(&v, &o, &HashSet::new()).unwrap();
        assert_eq!(c.reason, CompactionReason::RangeDeletions);
        assert_eq!((c.level, c.inputs[0][0].number, c.output_level), (2, 2, 3));
        let busy: HashSet<u64> = [2].into();
        assert!(pick(&v, &o, &busy).is_none());
    }
}
