//! The record that closes a WAL when a newer one replaces it.
//!
//! A WAL is synced whole before the next one takes writes, so only the newest can end in a cut.
//! A cut that lands exactly between two records leaves no torn fragment to see, though: the seal
//! makes the end of every replaced WAL explicit, and names the WAL that follows it, so a lost end
//! and a lost WAL are both visible to recovery.

use std::path::Path;

use crate::error::{Error, Result};
use crate::filename::wal_file;

/// A seal is the next WAL's number, 8 bytes: shorter than any batch header (12 bytes), so the two
/// records cannot be mistaken for each other.
pub(crate) const SEAL_LEN: usize = 8;

pub(crate) fn seal_record(next_wal: u64) -> [u8; SEAL_LEN] {
    next_wal.to_le_bytes()
}

/// The next WAL's number when `record` is a seal.
pub(crate) fn decode_seal(record: &[u8]) -> Option<u64> {
    let bytes: [u8; SEAL_LEN] = record.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Follows the seals across the WALs recovery reads, oldest first, empty ones left out: each WAL
/// numbered from `sealed_from` on that a newer one follows must end in a seal naming that newer
/// one.
#[derive(Debug)]
pub(crate) struct SealChain<'a> {
    dir: &'a Path,
    sealed_from: Option<u64>,
    /// Whether a break in the chain fails recovery (`false`: it is counted as a skipped region).
    strict: bool,
    reading: Option<u64>,
    sealed_to: Option<u64>,
}

impl<'a> SealChain<'a> {
    pub(crate) fn new(dir: &'a Path, sealed_from: Option<u64>, strict: bool) -> Self {
        SealChain {
            dir,
            sealed_from,
            strict,
            reading: None,
            sealed_to: None,
        }
    }

    /// Starts on WAL `number`: the WAL read before it must have ended in a seal naming it.
    /// Returns the breaks excused (0 or 1) when the chain is not strict.
    pub(crate) fn enter(&mut self, number: u64) -> Result<u64> {
        let sealed_to = self.sealed_to.take();
        let Some(previous) = self.reading.replace(number) else {
            return Ok(0);
        };
        if self.sealed_from.is_none_or(|first| previous < first) {
            return Ok(0);
        }
        let broken = match sealed_to {
            Some(next) if next == number => return Ok(0),
            None => Error::corruption(
                wal_file(self.dir, previous),
                format!(
                    "ends without a seal, but WAL {number} follows it: a WAL is sealed and synced \
                     before the next one takes writes, so its last records are lost (damage, not \
                     a crash; `strata repair` replays around it)"
                ),
            ),
            Some(next) => Error::corruption(
                wal_file(self.dir, next),
                format!(
                    "missing or empty, but WAL {previous} was sealed naming it as the next one, \
                     and WAL {number} follows: the writes it held are lost (`strata repair` \
                     replays the other WALs)"
                ),
            ),
        };
        if self.strict { Err(broken) } else { Ok(1) }
    }

    /// After the last WAL with data: if it was sealed, the WAL its seal names was created (and
    /// the directory synced) before the seal was written, so it must still be there. A power
    /// loss may have emptied it (its writes were never synced), but not once a column family's
    /// log number passed it (`max_log_number`): that flush came after the seal was synced, so
    /// the WAL held writes a table now holds too. `wals` are every WAL file recovery considered,
    /// with whether each is empty. An unsealed last WAL must not be older than
    /// `max_log_number` either. Returns the breaks excused (0 or 1) when the chain is not strict.
    pub(crate) fn finish(&self, wals: &[(u64, bool)], max_log_number: u64) -> Result<u64> {
        let Some(last) = self.reading else {
            return Ok(0);
        };
        if self.sealed_from.is_none_or(|first| last < first) {
            return Ok(0);
        }
        let Some(next) = self.sealed_to else {
            if last >= max_log_number {
                return Ok(0);
            }
            // A column family's log number passes a WAL only when a flush after the WAL was
            // replaced, and so sealed, recorded it: the seal was synced, and is gone.
            let broken = Error::corruption(
                wal_file(self.dir, last),
                format!(
                    "ends without a seal, but a column family's tables hold writes from WAL \
                     {max_log_number} on: a WAL is sealed and synced before the next one takes \
                     writes, so its last records are lost (damage, not a crash; `strata repair` \
                     replays around it)"
                ),
            );
            return if self.strict { Err(broken) } else { Ok(1) };
        };
        let why = match wals.iter().find(|w| w.0 == next) {
            None => "missing",
            Some(&(_, true)) if max_log_number > next => {
                "empty, though a column family's tables hold writes past it"
            }
            Some(_) => return Ok(0),
        };
        let broken = Error::corruption(
            wal_file(self.dir, next),
            format!(
                "{why}: WAL {last} was sealed naming it as the next one after the directory \
                 was synced, so the writes it held are lost (`strata repair` replays the other \
                 WALs)"
            ),
        );
        if self.strict { Err(broken) } else { Ok(1) }
    }

    /// The WAL being read ends here, naming `next` as the WAL that replaced it.
    pub(crate) fn seal(&mut self, path: &Path, next: u64) -> Result<()> {
        self.check_open(path)?;
        self.sealed_to = Some(next);
        Ok(())
    }

    /// A write may follow only if the WAL being read is not sealed yet.
    pub(crate) fn check_open(&self, path: &Path) -> Result<()> {
        match self.sealed_to {
            Some(next) => Err(record_after_seal(path, next)),
            None => Ok(()),
        }
    }
}

/// A WAL in `path` holds a record after its seal naming `next`: a seal is always its last record.
pub(crate) fn record_after_seal(path: &Path, next: u64) -> Error {
    Error::corruption(
        path,
        format!("a record follows the seal that names WAL {next} as the next one"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_names_the_next_wal_and_nothing_else_reads_as_one() {
        assert_eq!(decode_seal(&seal_record(4451)), Some(4451));
        assert_eq!(decode_seal(&[0u8; 7]), None);
        // A batch header alone (sequence and count) is longer than a seal.
        assert_eq!(decode_seal(&[0u8; 12]), None);
    }

    #[test]
    fn a_chain_breaks_at_a_missing_seal_or_a_missing_wal() {
        let dir = Path::new("/db");
        let whole = |chain: &mut SealChain<'_>| -> Result<u64> {
            chain.enter(10)?;
            chain.seal(&wal_file(dir, 10), 12)?;
            chain.enter(12)
        };
        assert_eq!(whole(&mut SealChain::new(dir, Some(10), true)).unwrap(), 0);

        let mut unsealed = SealChain::new(dir, Some(10), true);
        unsealed.enter(10).unwrap();
        let e = unsealed.enter(12).unwrap_err().to_string();
        assert!(
            e.contains("000010.log") && e.contains("ends without a seal"),
            "{e}"
        );

        let mut skipping = SealChain::new(dir, Some(10), true);
        skipping.enter(10).unwrap();
        skipping.seal(&wal_file(dir, 10), 11).unwrap();
        let e = skipping.enter(12).unwrap_err().to_string();
        assert!(
            e.contains("000011.log") && e.contains("missing or empty"),
            "{e}"
        );

        // Not strict: the break is counted; before `sealed_from`, WALs carry no seal.
        let mut lenient = SealChain::new(dir, Some(10), false);
        lenient.enter(10).unwrap();
        assert_eq!(lenient.enter(12).unwrap(), 1);
        let mut old = SealChain::new(dir, Some(12), true);
        old.enter(10).unwrap();
        assert_eq!(old.enter(12).unwrap(), 0);
        let mut none = SealChain::new(dir, None, true);
        none.enter(10).unwrap();
        assert_eq!(none.enter(12).unwrap(), 0);

        // The last WAL's seal names a WAL that must exist (a power loss may leave it empty).
        let mut sealed = SealChain::new(dir, Some(10), true);
        sealed.enter(10).unwrap();
        sealed.seal(&wal_file(dir, 10), 12).unwrap();
        let finish = |wals: &[(u64, bool)], max_log: u64| sealed.finish(wals, max_log);
        assert_eq!(finish(&[(10, false), (12, true)], 12).unwrap(), 0);
        assert_eq!(
            finish(&[(10, false), (12, true), (13, true)], 12).unwrap(),
            0
        );
        let e = finish(&[(10, false)], 12).unwrap_err().to_string();
        assert!(e.contains("000012.log") && e.contains("missing"), "{e}");
        // Emptied after a flush took its writes into a table: damage, not a power loss.
        let e = finish(&[(10, false), (12, true), (13, true)], 13).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("000012.log") && e.contains("empty"), "{e}");

        // The last WAL with data lost its seal, but a flush after it recorded a newer WAL.
        let mut cut = SealChain::new(dir, Some(10), true);
        cut.enter(10).unwrap();
        assert_eq!(cut.finish(&[(10, false), (12, true)], 10).unwrap(), 0);
        let e = cut.finish(&[(10, false), (12, true)], 12).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("000010.log") && e.contains("ends without a seal"),
            "{e}"
        );
        let mut lenient_cut = SealChain::new(dir, Some(10), false);
        lenient_cut.enter(10).unwrap();
        assert_eq!(lenient_cut.finish(&[(10, false)], 12).unwrap(), 1);
        let mut unsealed = SealChain::new(dir, Some(10), true);
        unsealed.enter(10).unwrap();
        assert_eq!(unsealed.finish(&[(10, false)], 10).unwrap(), 0);

        // Nothing is written after a seal.
        let mut after = SealChain::new(dir, Some(10), true);
        after.enter(10).unwrap();
        after.seal(&wal_file(dir, 10), 12).unwrap();
        assert!(after.check_open(&wal_file(dir, 10)).is_err());
    }
}
