//! Files a value reader keeps on disk: the few it reads, not every file retired while it lives.
//!
//! A read view holds its blob epoch, and an epoch holds every later one, so a reader that kept
//! its view's epoch would keep every file retired after it opened (collected, expired, evicted)
//! until it was dropped: a reader left open by a stalled client would stop FIFO eviction and
//! garbage collection from freeing any space. A reader pins the files its value lies in instead,
//! taking the pins while its view (and so its epoch) still holds them.
//!
//! Invariants:
//! - a pinned file is not deleted: when its epoch ends it is marked and kept, and deleted when
//!   its last pin is dropped;
//! - an unpinned file is deleted as before, when its epoch ends;
//! - pins are counted per file, so several readers of one file keep it until the last one goes.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::BlobStore;

/// Pins by file number.
#[derive(Debug, Default)]
pub(super) struct Pins {
    by_file: Mutex<HashMap<u64, Pin>>,
}

#[derive(Debug, Default)]
struct Pin {
    readers: usize,
    /// Its epoch ended: delete it when the last reader lets go.
    doomed: bool,
}

impl Pins {
    /// The files some reader pins now.
    pub(super) fn pinned(&self) -> Vec<u64> {
        self.by_file.lock().keys().copied().collect()
    }

    /// Of `numbers`, the files no reader pins (to delete now); the others are marked, to be
    /// deleted when unpinned.
    pub(super) fn unpinned(&self, numbers: Vec<u64>) -> Vec<u64> {
        let mut by_file = self.by_file.lock();
        numbers
            .into_iter()
            .filter(|n| match by_file.get_mut(n) {
                Some(pin) => {
                    pin.doomed = true;
                    false
                }
                None => true,
            })
            .collect()
    }
}

/// A reader's pins on the files its value lies in; dropping them deletes any of the files whose
/// epoch ended meanwhile and that no other reader pins.
#[derive(Debug)]
pub(crate) struct FilePins {
    store: Arc<BlobStore>,
    numbers: Vec<u64>,
}

impl BlobStore {
    /// Pins `numbers` (a file named twice is pinned once). The caller must hold a read view
    /// that reaches them, so that none is deleted before it is pinned.
    pub(crate) fn pin_files(self: &Arc<Self>, mut numbers: Vec<u64>) -> FilePins {
        numbers.sort_unstable();
        numbers.dedup();
        let mut by_file = self.pins.by_file.lock();
        for n in &numbers {
            by_file.entry(*n).or_default().readers += 1;
        }
        drop(by_file);
        FilePins {
            store: self.clone(),
            numbers,
        }
    }
}

impl Drop for FilePins {
    fn drop(&mut self) {
        let mut by_file = self.store.pins.by_file.lock();
        let mut doomed = Vec::new();
        for n in &self.numbers {
            if let Some(pin) = by_file.get_mut(n) {
                pin.readers -= 1;
                if pin.readers == 0 {
                    if pin.doomed {
                        doomed.push(*n);
                    }
                    by_file.remove(n);
                }
            }
        }
        drop(by_file);
        self.store.delete_files(doomed);
    }
}
