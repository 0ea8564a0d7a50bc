//! What of a file's unsynced bytes a simulated power loss keeps.

use super::XorShift;

/// Which of a file's unsynced bytes survive a power loss.
pub(super) enum Survivors {
    /// The first this many.
    Prefix(u64),
    /// Each 4 KiB page of the file's unsynced part as it was at a random moment (from this
    /// seed): all of it, none of it, or the appends that had ended by then; pages need not
    /// agree.
    Pages(u64),
}

impl Survivors {
    const PAGE: u64 = 4096;

    /// How many unsynced bytes survive where the file is cut at the first byte lost.
    pub(super) fn prefix(self, unsynced: u64) -> u64 {
        match self {
            Survivors::Prefix(n) => n.min(unsynced),
            Survivors::Pages(seed) => XorShift(seed | 1).next() % (unsynced + 1),
        }
    }

    /// The ranges of `from..to` (the unsynced bytes) that read back as zeros; `append_ends` are
    /// where the appends to them ended, so that a page's older version holds whole appends.
    pub(super) fn lost(self, from: u64, to: u64, append_ends: &[u64]) -> Vec<(u64, u64)> {
        match self {
            Survivors::Prefix(n) => vec![(from + n.min(to - from), to)],
            Survivors::Pages(seed) => {
                let mut rng = XorShift(seed | 1);
                let mut lost = Vec::new();
                let mut start = from;
                while start < to {
                    let end = ((start / Self::PAGE + 1) * Self::PAGE).min(to);
                    // As of some moment: nothing appended in it yet, all of it, or the
                    // appends that had ended by then.
                    match rng.next() % 3 {
                        0 => lost.push((start, end)),
                        1 => {}
                        _ => {
                            // Appends end in order: the page's are one run of them.
                            let first = append_ends.partition_point(|&e| e < start);
                            let past = append_ends.partition_point(|&e| e < end);
                            let ends = &append_ends[first..past];
                            let cut = match ends.len() {
                                0 => start,
                                n => ends[(rng.next() % n as u64) as usize],
                            };
                            lost.push((cut, end));
                        }
                    }
                    start = end;
                }
                lost
            }
        }
    }
}
