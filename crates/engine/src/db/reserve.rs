//! The disk reserve: a file of zeros (`RESERVE`) the store writes at open and gives back when the
//! disk fills, so that deletions can still be logged and compactions can run to free space.
//!
//! Without it a store that filled its disk could never shrink: a delete needs a log record and
//! the flush after the resume needs room for a table. With it (`Options::reserved_disk_bytes`):
//! - at open, and whenever writes resume because space came back, the reserve is written (real
//!   blocks, synced) unless it is there; a disk too full for it is no error, only no reserve;
//! - while a full disk stops writes, a group holding only deletions and range deletions removes
//!   the reserve and resumes in the room it leaves: the damaged log is cut and replaced, the
//!   memtables flush and compactions are queued, so the deleted keys' space is reclaimed;
//! - a group holding any data gets the `NoSpace` error as before: only deletions release the
//!   reserve. Once they have resumed the store, every write is accepted in the room left, as
//!   after any resume (data writes racing the deletions' flush may take some of it);
//! - the reserve is written again when a later resume succeeds without it, after compactions
//!   (which free room: once they have deleted tables of the reserve's size since it last did
//!   not fit, so a disk that stays full is not churned), and at open;
//! - its bytes are pseudo-random, not zeros: a filesystem that compresses, or keeps zero blocks
//!   as holes, would otherwise hold back almost nothing.

use std::path::PathBuf;

use parking_lot::Mutex;

use super::DbInner;
use crate::error::{ErrorKind, Result};
use crate::fs::FileSystem;

/// The reserve file's name in the store's directory.
pub(crate) const RESERVE: &str = "RESERVE";

/// Written a piece at a time, so memory is bounded whatever the reserve's size.
const PIECE: usize = 1 << 20;

/// Whether the reserve is on disk, whole, and what compactions deleted since it last did not
/// fit (each try writes until the disk is full).
#[derive(Debug, Default)]
struct State {
    present: bool,
    freed_since_miss: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct DiskReserve {
    path: PathBuf,
    dir: PathBuf,
    bytes: u64,
    /// Held while the reserve is written or removed.
    state: Mutex<State>,
}

impl DiskReserve {
    pub(crate) fn new(dir: PathBuf, bytes: u64) -> Self {
        DiskReserve {
            path: dir.join(RESERVE),
            dir,
            bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// Writes the reserve unless it is there. `Ok(false)` when the disk has no room for it (what
    /// was written of it is removed again); other I/O errors are returned.
    pub(crate) fn ensure(&self, fs: &dyn FileSystem) -> Result<bool> {
        let mut state = self.state.lock();
        if self.bytes == 0 && fs.exists(&self.path) {
            // Left by an open that kept a reserve: this one keeps none, so the room goes back.
            fs.remove(&self.path)?;
        }
        if state.present || self.bytes == 0 {
            return Ok(state.present);
        }
        match self.write(fs) {
            Ok(()) => {
                *state = State {
                    present: true,
                    freed_since_miss: None,
                };
                Ok(true)
            }
            Err(e) => {
                let _ = fs.remove(&self.path);
                state.freed_since_miss = Some(0);
                match e.kind() {
                    ErrorKind::NoSpace => Ok(false),
                    _ => Err(e),
                }
            }
        }
    }

    /// Counts `freed` bytes of tables a compaction deleted; whether a missing reserve may be
    /// tried again now.
    fn may_refill(&self, freed: u64) -> bool {
        let mut state = self.state.lock();
        if let Some(f) = &mut state.freed_since_miss {
            *f += freed;
        }
        !state.present && self.bytes > 0 && state.freed_since_miss.is_none_or(|f| f >= self.bytes)
    }

    fn write(&self, fs: &dyn FileSystem) -> Result<()> {
        if fs.exists(&self.path) {
            // Left by an earlier run: its length is checked, not trusted.
            let file = fs.open_random(&self.path)?;
            if file.len()? == self.bytes {
                return Ok(());
            }
        }
        let mut file = fs.create(&self.path)?;
        let mut piece = vec![0u8; PIECE.min(self.bytes as usize)];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for b in piece.chunks_mut(8) {
            // xorshift64: bytes no filesystem compresses away.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
        }
        let mut left = self.bytes;
        while left > 0 {
            let n = left.min(piece.len() as u64) as usize;
            file.append(&piece[..n])?;
            left -= n as u64;
        }
        file.finish()?;
        fs.sync_dir(&self.dir)
    }

    /// Removes the reserve to give its room to the store; true when there was one to remove.
    pub(crate) fn release(&self, fs: &dyn FileSystem) -> bool {
        let mut state = self.state.lock();
        if !state.present {
            return false;
        }
        state.present = false;
        // A reserve that cannot be removed frees nothing; the caller's resume says so.
        fs.remove(&self.path).is_ok()
    }

    /// Whether the store has the room a reserve stands for: it keeps none, or it is on disk.
    pub(crate) fn is_held_or_unused(&self) -> bool {
        self.bytes == 0 || self.state.lock().present
    }

    /// Whether the reserve is on disk.
    pub(crate) fn is_present(&self) -> bool {
        self.state.lock().present
    }
}

impl DbInner {
    /// After a compaction that deleted `freed` bytes of tables: writes the reserve again if it
    /// was given up. A failure leaves the store without one, which writes do not need.
    pub(super) fn refill_reserve(&self, freed: u64) {
        if !self.read_only && self.reserve.may_refill(freed) {
            let _ = self.reserve.ensure(self.fs.as_ref());
            self.note_room_is_back();
        }
    }

    /// New WALs reserve room ahead again (`DbInner::wal_room_ahead`) once the store has the
    /// room its reserve stands for.
    pub(super) fn note_room_is_back(&self) {
        if self.reserve.is_held_or_unused() {
            self.wal_room_ahead
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
