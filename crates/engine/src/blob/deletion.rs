//! When and where a blob file is deleted.
//!
//! Invariants:
//! - A file is deleted only once no reader can reach it: a file that becomes obsolete joins the
//!   current [`BlobEpoch`], which every read view holds; epochs end oldest first, and a file a
//!   value reader pins waits for its last pin too (`pins.rs`).
//! - The thread that ends an epoch or drops the last pin is any reader's: an async server's
//!   worker serving a GET, say. Once the database has a background pool it installs a
//!   [`Deleter`], and such a thread only queues the files and wakes the pool; the pool removes
//!   them. Without one (the inline executor, a store being built or closed) the thread removes
//!   them itself.
//! - `compact_range` and `maintenance` drain the queue before they return, waiting for a drain
//!   the pool has begun: the files a manual compaction left without readers are gone when it
//!   returns.
//! - Closing takes the deleter away and removes whatever is queued, under the lock a queuing
//!   thread holds, so no file is queued after the queue's last drain. A crash with files queued
//!   leaves them to the next open, which removes every blob file no version names.

use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};

use super::{BlobFileState, BlobStore};

/// Wakes the background pool to call [`BlobStore::delete_queued`].
pub(crate) type Deleter = Arc<dyn Fn() + Send + Sync>;

/// The store's epochs and its queue of files to delete.
#[derive(Default)]
pub(super) struct Deletion {
    /// The epoch new read views join; `None` once closing.
    epoch: Mutex<Option<Arc<BlobEpoch>>>,
    /// Files whose readers are gone, waiting for the pool.
    queued: Mutex<Vec<u64>>,
    /// Held while files taken from the queue are removed: a drain returns only once every file
    /// queued before it is gone, even one another thread's drain took.
    draining: Mutex<()>,
    deleter: RwLock<Option<Deleter>>,
}

impl Deletion {
    /// Starts the first epoch of `store`.
    pub(super) fn begin(&self, store: &Arc<BlobStore>) {
        *self.epoch.lock() = Some(Arc::new(BlobEpoch {
            doomed: Mutex::new(Vec::new()),
            next: OnceLock::new(),
            store: store.clone(),
        }));
    }
}

/// A view generation for blob file deletion. Every read view holds the epoch current when it was
/// installed; a blob file that becomes obsolete joins the current epoch's list, and a new epoch
/// begins. Each epoch holds its successor, so an epoch ends only after every older one: when it
/// ends, no view that could reach its files is left, and they are deleted.
pub(crate) struct BlobEpoch {
    doomed: Mutex<Vec<u64>>,
    next: OnceLock<Arc<BlobEpoch>>,
    store: Arc<BlobStore>,
}

impl std::fmt::Debug for BlobEpoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobEpoch")
            .field("doomed", &self.doomed.lock().len())
            .finish()
    }
}

impl Drop for BlobEpoch {
    fn drop(&mut self) {
        self.store
            .delete_files(std::mem::take(&mut *self.doomed.lock()));
        // Successors that only this epoch held end now, iteratively (a long chain must not
        // recurse).
        let mut next = self.next.take();
        while let Some(epoch) = next {
            match Arc::try_unwrap(epoch) {
                Ok(mut e) => {
                    e.store.delete_files(std::mem::take(&mut *e.doomed.lock()));
                    next = e.next.take();
                }
                Err(_) => break,
            }
        }
    }
}

impl BlobStore {
    /// The epoch a view installed now joins.
    pub(crate) fn current_epoch(&self) -> Option<Arc<BlobEpoch>> {
        self.deletion.epoch.lock().clone()
    }

    /// From now on, files whose readers are gone are queued and `deleter` is called, rather than
    /// removed by the thread that let them go.
    pub(crate) fn set_deleter(&self, deleter: Deleter) {
        *self.deletion.deleter.write() = Some(deleter);
    }

    /// Removes the files queued for deletion (the background pool's job; also `compact_range`'s
    /// and `maintenance`'s before they return).
    pub(crate) fn delete_queued(&self) {
        let _draining = self.deletion.draining.lock();
        let numbers = std::mem::take(&mut *self.deletion.queued.lock());
        self.remove_files(numbers);
    }

    /// Ends the store's epochs (at close): the chain holds the store, and the store the chain.
    /// Files queued or waiting for readers are removed now, on this thread.
    pub(crate) fn shutdown(&self) {
        // Taken under the write lock: a thread queuing files holds the read lock until it has.
        // Dropped after the lock is released, whatever dropping it may end.
        let deleter = self.deletion.deleter.write().take();
        drop(deleter);
        self.delete_queued();
        self.deletion.epoch.lock().take();
    }

    /// Makes `numbers` unreachable for new readers and has them deleted when the current epoch
    /// (and every older one) ends. The caller re-installs every read view afterwards, so that
    /// idle column families leave the old epoch too.
    pub(crate) fn retire(&self, numbers: &[u64], state: BlobFileState) {
        if numbers.is_empty() {
            return;
        }
        for n in numbers {
            if let Some(f) = self.get(*n) {
                f.meta.lock().state = state;
            }
        }
        let mut epoch = self.deletion.epoch.lock();
        let Some(current) = epoch.as_ref() else {
            // Closing: nothing reads any more.
            drop(epoch);
            return self.delete_files(numbers.to_vec());
        };
        current.doomed.lock().extend_from_slice(numbers);
        let next = Arc::new(BlobEpoch {
            doomed: Mutex::new(Vec::new()),
            next: OnceLock::new(),
            store: current.store.clone(),
        });
        let _ = current.next.set(next.clone());
        *epoch = Some(next);
    }

    /// Deletes `numbers`, whose epochs have ended, but for files a value reader pins, which go
    /// when it lets go: queued for the background pool when it has a deleter, else now.
    pub(super) fn delete_files(&self, numbers: Vec<u64>) {
        let numbers = self.pins.unpinned(numbers);
        if numbers.is_empty() {
            return;
        }
        let deleter = self.deletion.deleter.read();
        if let Some(wake) = deleter.as_ref() {
            self.deletion.queued.lock().extend(numbers);
            wake();
            return;
        }
        drop(deleter);
        self.remove_files(numbers);
    }

    fn remove_files(&self, numbers: Vec<u64>) {
        // Cached values of the files age out: no index points at them any more.
        self.forget(numbers.iter().copied());
        for n in numbers {
            if self.deletions.remove(&self.path(n)).is_ok() {
                self.stats.blob_files_deleted.inc();
            }
        }
    }
}
