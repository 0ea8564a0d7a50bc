//! What of a file's unsynced bytes a simulated power loss keeps.

use super::XorShift;

/// Which of a file's unsynced bytes survive a power loss.
pub(super) enum Survivors {
    /// The first this many.
    Prefix(u64),
    /// Each 4 KiB page of the file's unsynced part as it was at a random moment (from this
    /// seed): all of it, none of it, or the bytes appended up to then; pages need not agree.
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

    /// The ranges of `from..to` (the unsynced bytes) that read back as zeros.
    pub(super) fn lost(self, from: u64, to: u64) -> Vec<(u64, u64)> {
        match self {
            Survivors::Prefix(n) => vec![(from + n.min(to - from), to)],
            Survivors::Pages(seed) => {
                let mut rng = XorShift(seed | 1);
                let mut lost = Vec::new();
                let mut start = from;
                while start < to {
                    let end = ((start / Self::PAGE + 1) * Self::PAGE).min(to);
                    match rng.next() % 3 {
                        0 => lost.push((start, end)),
                        1 => {}
                        _ => lost.push((start + rng.next() % (end - start), end)),
                    }
                    start = end;
                }
                lost
            }
        }
    }
}
