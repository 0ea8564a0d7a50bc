//! Undoing what a refused partial write did to the blob files.
//!
//! Resolving a partial write (`db/partial.rs`) may append records (a folded run, a piece too
//! large to keep inline) and count records its new value borrows, before the write is known to
//! land. When it does not (its batch is refused, an attempt is retried, the group's log write
//! fails), no entry will ever name those records or hold those borrows, so:
//! - each record it appended is garbage of its file at once: its file is synced (so the record
//!   is there after any crash, as the count says) and the garbage logged to the MANIFEST as a
//!   flush's is, so the file is deleted once its other records are, and a restart does not
//!   forget it (a failed sync or log, on a full disk, leaves the space to `repair`);
//! - each borrow it counted is given back in memory (borrows live in memory until a flush logs
//!   them with the entries that hold them, so there is nothing on disk to undo).

use std::collections::BTreeMap;

use super::DbInner;
use crate::blob::{BlobGarbage, BlobRef};
use crate::version::VersionEdit;

/// Records made and borrowed by partial writes not yet committed, in the order made.
#[derive(Debug, Default)]
pub(crate) struct Unnamed {
    /// Records appended, with their column family.
    made: Vec<(u32, BlobRef)>,
    /// Records borrowed (counted as references of their files).
    borrowed: Vec<BlobRef>,
}

/// A point in an [`Unnamed`] to undo back to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark(usize, usize);

impl Unnamed {
    pub(super) fn made(&mut self, cf: u32, blob: BlobRef) {
        self.made.push((cf, blob));
    }

    pub(super) fn borrowed(&mut self, records: &[BlobRef]) {
        self.borrowed.extend_from_slice(records);
    }

    pub(super) fn mark(&self) -> Mark {
        Mark(self.made.len(), self.borrowed.len())
    }

    /// What was made and borrowed since `mark`, taken out.
    pub(super) fn since(&mut self, mark: Mark) -> Unnamed {
        Unnamed {
            made: self.made.split_off(mark.0.min(self.made.len())),
            borrowed: self.borrowed.split_off(mark.1.min(self.borrowed.len())),
        }
    }

    /// The borrows only, taken out; the records made are kept (forgotten).
    pub(super) fn borrows(&mut self) -> Unnamed {
        Unnamed {
            made: Vec::new(),
            borrowed: std::mem::take(&mut self.borrowed),
        }
    }
}

impl DbInner {
    /// Undoes `unnamed`, the records and borrows of a partial write that will not land.
    pub(super) fn forget_unnamed(&self, unnamed: Unnamed) {
        self.blobs.remove_borrowed(&unnamed.borrowed);
        // Durable before the MANIFEST counts them: garbage for records a crash then drops would
        // make a file look wholly garbage while other records in it are live.
        if unnamed.made.is_empty() || self.sync_blob_writers().is_err() {
            return;
        }
        let mut garbage: BTreeMap<u32, BlobGarbage> = BTreeMap::new();
        for (cf, blob) in &unnamed.made {
            *garbage
                .entry(*cf)
                .or_default()
                .entry(blob.file)
                .or_default() += blob.size;
        }
        for (cf, files) in garbage {
            let edit = VersionEdit {
                column_family: cf,
                blob_garbage: files.iter().map(|(n, b)| (*n, *b)).collect(),
                ..Default::default()
            };
            // Not logged (a full disk): the records stay counted as live, space `repair` finds.
            if self.log_cf_edit(edit).is_ok() {
                self.apply_blob_garbage(&files);
            }
        }
    }
}
