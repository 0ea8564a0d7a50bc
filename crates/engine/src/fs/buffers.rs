//! Read buffers recycled from what the block cache evicts. A read that misses the cache needs a
//! buffer of about a block's size, and inserting the block evicts one of about that size. glibc's
//! per-thread cache stops at 1 KiB, so each of those was a malloc and a free that consolidates
//! chunks: 12-17% of a MultiGet whose blocks miss the cache. The evicting thread (the reader
//! that inserted) keeps the buffers for its next reads instead.
//!
//! Invariants:
//! - a thread keeps at most `KEEP` buffers, each of `SMALLEST..=LARGEST` bytes of capacity
//!   (at most 4 MiB per reading thread); past that the oldest is freed;
//! - a buffer handed out is empty; a recycled one is at most half again as large as asked
//!   for (the cache charges a block by its length), a fresh one rounded up to 512 bytes;
//! - only Linux reads take buffers, so only there are they kept.

use std::cell::RefCell;

const KEEP: usize = 64;
const SMALLEST: usize = 1 << 10;
const LARGEST: usize = 64 << 10;
/// Fresh buffers are rounded up to this, so that one recycled buffer fits the next block read
/// (blocks of one table differ by a few entries).
const ROUND: usize = 512;

thread_local! {
    static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Whether a buffer of `capacity` serves a read of `len`: large enough, and not so large that
/// a cached block holds much more memory than the cache charges it for.
fn fits(capacity: usize, len: usize) -> bool {
    capacity >= len && capacity - len <= len / 2
}

/// An empty buffer with room for `len` bytes: a recycled one if this thread has one large
/// enough.
pub(crate) fn take(len: usize) -> Vec<u8> {
    let recycled = FREE
        .try_with(|free| {
            let mut free = free.borrow_mut();
            let i = free.iter().rposition(|b| fits(b.capacity(), len))?;
            Some(free.swap_remove(i))
        })
        .ok()
        .flatten();
    recycled.unwrap_or_else(|| Vec::with_capacity(len.next_multiple_of(ROUND)))
}

/// Keeps `buf` for this thread's next `take`, if it is a block's size.
pub(crate) fn give(mut buf: Vec<u8>) {
    // Elsewhere reads allocate their own buffers (wasi:filesystem hands out its own list).
    if cfg!(not(target_os = "linux")) || !(SMALLEST..=LARGEST).contains(&buf.capacity()) {
        return;
    }
    buf.clear();
    // During thread exit the pool may be gone: the buffer is then freed.
    let _ = FREE.try_with(|free| {
        let mut free = free.borrow_mut();
        // The oldest goes first, so buffers of sizes the reads no longer ask for do not stay.
        if free.len() == KEEP {
            free.remove(0);
        }
        free.push(buf);
    });
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn kept() -> usize {
        FREE.with(|f| f.borrow().len())
    }

    #[test]
    fn buffers_come_back_empty_and_only_of_block_size() {
        let mut b = take(4100);
        assert!(b.capacity() >= 4100 && b.is_empty());
        b.extend_from_slice(&[7; 4100]);
        let at = b.as_ptr();
        give(b);
        assert_eq!(kept(), 1);
        let again = take(4000);
        assert_eq!(again.as_ptr(), at, "the given buffer is the one taken");
        assert!(again.is_empty());
        // Too large a request gets a fresh buffer, and so does one far smaller than what is
        // kept; the kept buffer stays.
        give(again);
        let big = take(8000);
        assert!(big.capacity() >= 8000);
        let small = take(1500);
        assert!(small.capacity() >= 1500 && small.capacity() < 4000);
        assert_eq!(kept(), 1);
        // Tiny and huge buffers are not kept; the pool is bounded.
        give(Vec::with_capacity(16));
        give(Vec::with_capacity(1 << 20));
        assert_eq!(kept(), 1);
        for _ in 0..2 * KEEP {
            give(Vec::with_capacity(8192));
        }
        assert_eq!(kept(), KEEP);
        // The newest stay: the first buffer kept, which fit 4000 bytes, is gone.
        drop(take(4000));
        assert_eq!(kept(), KEEP);
        assert_eq!(take(6000).capacity(), 8192);
        assert_eq!(kept(), KEEP - 1);
    }
}
