//! Batched reads through io_uring (Linux): one submission for a whole batch. A read of a page the
//! page cache holds completes inline, at the cost of a `pread`; one that must wait on the device
//! is handed to the kernel's workers, so a batch's device reads run together.
//!
//! Each thread keeps its own ring, made on first use. Where io_uring is missing or forbidden (old
//! kernels, `io_uring_disabled`, container seccomp profiles) the first failure turns it off for
//! the process, and reads fall back to one `pread` each.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use io_uring::{IoUring, opcode, types};

use super::batch::BatchRead;

/// Reads in flight at once; a larger batch goes in rounds.
const ENTRIES: usize = 64;

static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

thread_local! {
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// Completes the reads of `reads` whose files offer a descriptor, leaving any it could not
/// complete (an error, a short read, no ring) undone for the caller to retry alone.
pub(super) fn read_batch(reads: &mut [BatchRead<'_>]) {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return;
    }
    RING.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return;
        };
        if slot.is_none() {
            match IoUring::new(ENTRIES as u32) {
                Ok(ring) => *slot = Some(ring),
                Err(_) => {
                    UNAVAILABLE.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
        let Some(ring) = slot.as_mut() else {
            return;
        };
        let mut ready: Vec<(usize, i32)> = Vec::with_capacity(reads.len().min(ENTRIES));
        let mut i = 0;
        while i < reads.len() {
            ready.clear();
            while i < reads.len() && ready.len() < ENTRIES {
                if let Some(fd) = reads[i].file.raw_fd() {
                    ready.push((i, fd));
                }
                i += 1;
            }
            if !ready.is_empty() && !submit_round(ring, reads, &ready) {
                // The ring may still hold requests whose buffers were leaked: never reuse it.
                *slot = None;
                return;
            }
        }
    });
}

/// Reads `round` (indexes into `reads` with their descriptors) with one submission and waits for
/// all of them. False when the ring failed; the buffers it may still write to are then leaked.
fn submit_round(ring: &mut IoUring, reads: &mut [BatchRead<'_>], round: &[(usize, i32)]) -> bool {
    // (index into `reads`, its buffer) for each request submitted; the slot is the user data.
    let mut inflight: Vec<(usize, Vec<u8>)> = Vec::with_capacity(round.len());
    for &(i, fd) in round {
        let r = &reads[i];
        // A read too large for one request is left to the caller's plain read.
        let (Ok(len), Ok(offset)) = (u32::try_from(r.len), i64::try_from(r.offset)) else {
            continue;
        };
        let mut buf = super::buffers::take(r.len);
        let entry = opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), len)
            .offset(offset as u64)
            .build()
            .user_data(inflight.len() as u64);
        inflight.push((i, buf));
        // SAFETY: the entry points into `buf`'s heap allocation of at least `len` bytes, which
        // neither moves (the Vec may, its allocation does not) nor is freed until the entry's
        // completion is reaped below, or is leaked when the ring fails; the descriptor belongs
        // to a file that `reads` borrows for this whole call. The queue has room: a round holds
        // at most ENTRIES entries and every earlier round was reaped in full.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            std::mem::forget(inflight);
            return false;
        }
    }
    let mut reaped = 0;
    while reaped < inflight.len() {
        match ring.submit_and_wait(inflight.len() - reaped) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                ) => {}
            Err(_) => {
                std::mem::forget(inflight);
                return false;
            }
        }
        for cqe in ring.completion() {
            reaped += 1;
            let slot = usize::try_from(cqe.user_data()).ok();
            let Some((i, buf)) = slot.and_then(|s| inflight.get_mut(s)) else {
                continue;
            };
            let want = reads[*i].len;
            if usize::try_from(cqe.result()).is_ok_and(|n| n == want) {
                // SAFETY: the kernel wrote `want` bytes at the start of the buffer, whose
                // capacity is at least `want`.
                unsafe { buf.set_len(want) };
            }
        }
    }
    for (i, buf) in inflight {
        // An error or a short read (the file ends early) leaves the read undone.
        if buf.len() == reads[i].len {
            reads[i].done = Some(buf);
        }
    }
    true
}
