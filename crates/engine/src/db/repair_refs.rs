//! Blob accounting for `repair`: the old MANIFEST's garbage and borrowed bytes may be lost or
//! stale, and counting a shared record too few times would let housekeeping free it while an
//! entry still names it. So repair counts afresh what every kept table names.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use crate::filename::table_file;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{self, ValueKind};
use crate::sst::{BlockReadOptions, MetaBlocks, TableReader};
use crate::stats::Stats;

/// Bytes of blob records named by the entries of tables `numbers`, by blob file: each record
/// once per entry that names it (as flushes and compactions count garbage when they drop one).
pub(super) fn named_blob_bytes(
    fs: &dyn FileSystem,
    dir: &Path,
    numbers: impl IntoIterator<Item = u64>,
) -> Result<BTreeMap<u64, u64>> {
    let mut named = BTreeMap::new();
    for number in numbers {
        let path = table_file(dir, number);
        let table = Arc::new(TableReader::open(
            fs.open_random(&path)?,
            &path,
            number,
            None,
            MetaBlocks::Held,
            Arc::new(Stats::default()),
        )?);
        let mut it = table.iter(BlockReadOptions::ONE_PASS)?;
        it.seek_to_first();
        while it.valid() {
            if key::kind_byte(it.key()) == ValueKind::BlobIndex as u8 {
                crate::blob::note_garbage(&mut named, ValueKind::BlobIndex as u8, it.value());
            }
            it.next();
        }
        it.status()?;
    }
    Ok(named)
}

/// (garbage, borrowed) bytes for a blob file whose records total `record_bytes` and of which
/// entries name `named` bytes: what is counted then equals what is named.
pub(super) fn accounting(record_bytes: u64, named: u64) -> (u64, u64) {
    let borrowed = named.saturating_sub(record_bytes);
    (record_bytes + borrowed - named, borrowed)
}

#[cfg(test)]
mod tests {
    use super::accounting;

    #[test]
    fn live_bytes_come_out_as_the_bytes_entries_name() {
        // Named less than written: the rest is garbage; more: the excess is borrowed.
        assert_eq!(accounting(100, 60), (40, 0));
        assert_eq!(accounting(100, 250), (0, 150));
        assert_eq!(accounting(100, 0), (100, 0));
    }
}
