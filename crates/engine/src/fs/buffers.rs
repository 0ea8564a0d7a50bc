//! Read buffers recycled from what the block cache evicts. A read that misses the cache needs a
//! buffer of about a block's size, and inserting the block evicts one of about that size. glibc's
//! per-thread cache stops at 1 KiB, so each of those was a malloc and a free that consolidates
//! chunks: 12-17% of a MultiGet whose blocks miss the cache. The evicting thread (the reader
//! that inserted) keeps the buffers for its next reads instead.
//!
//! Invariants:
//! - a thread keeps buffers of `SMALLEST..=LARGEST` bytes of capacity, at most `KEEP_BYTES`
//!   of them in all; past that the oldest are freed;
//! - a buffer handed out is empty; a recycled one is at most half again as large as asked
//!   for (the cache charges a block by its length), a fresh one rounded up to 512 bytes;
//! - only Linux reads take buffers, so only there are they kept.

use std::cell::RefCell;

/// Bytes of buffers a thread keeps: about 56 blocks of the default size. A bound in bytes
/// rather than buffers, as a server may run hundreds of reading threads.
const KEEP_BYTES: usize = 256 << 10;
const SMALLEST: usize = 1 << 10;
const LARGEST: usize = 64 << 10;
/// Fresh buffers are rounded up to this, so that one recycled buffer fits the next block read
/// (blocks of one table differ by a few entries).
const ROUND: usize = 512;

struct Pool {
    /// Oldest first.
    buffers: Vec<Vec<u8>>,
    /// Their capacities, summed.
    bytes: usize,
}

thread_local! {
    static FREE: RefCell<Pool> = const {
        RefCell::new(Pool {
            buffers: Vec::new(),
            bytes: 0,
        })
    };
}

/// Whether a buffer of `capacity` serves a read of `len`: large enough, and not so large that
/// a cached block holds much more memory than the cache charges it for.
fn fits(capacity: usize, len: usize) -> bool {
    capacity >= len && capacity - len <= len / 2
}

/// An empty buffer with room for `len` bytes: a recycled one if this thread has one that
/// fits.
#[cfg_attr(
    not(target_os = "linux"),
    allow(
        dead_code,
        reason = "only Linux reads take buffers; the tests run everywhere"
    )
)]
pub(crate) fn take(len: usize) -> Vec<u8> {
    let recycled = FREE
        .try_with(|pool| {
            let mut pool = pool.borrow_mut();
            let i = pool.buffers.iter().rposition(|b| fits(b.capacity(), len))?;
            let buf = pool.buffers.swap_remove(i);
            pool.bytes -= buf.capacity();
            Some(buf)
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
    let _ = FREE.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        pool.bytes += buf.capacity();
        pool.buffers.push(buf);
        // The oldest go first, so buffers of sizes the reads no longer ask for do not stay.
        while pool.bytes > KEEP_BYTES {
            let old = pool.buffers.remove(0);
            pool.bytes -= old.capacity();
        }
    });
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn kept() -> usize {
        FREE.with(|p| p.borrow().buffers.len())
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
        let most = KEEP_BYTES / 8192;
        for _ in 0..2 * most {
            give(Vec::with_capacity(8192));
        }
        assert_eq!(kept(), most);
        assert_eq!(FREE.with(|p| p.borrow().bytes), KEEP_BYTES);
        // The newest stay: the first buffer kept, which fit 4000 bytes, is gone.
        drop(take(4000));
        assert_eq!(kept(), most);
        assert_eq!(take(6000).capacity(), 8192);
        assert_eq!(kept(), most - 1);
        assert_eq!(FREE.with(|p| p.borrow().bytes), KEEP_BYTES - 8192);
    }
}
