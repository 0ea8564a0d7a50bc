//! A skiplist over internal keys whose nodes live in an arena: inserts are serialised by a mutex
//! (the write group's leader is the only inserter in practice), reads walk the towers lock-free.
//! Nodes are never removed or freed before the whole list drops, which is what makes lock-free reads
//! sound: a pointer published with `Release` stays valid for the list's lifetime.

use std::alloc::{Layout, alloc, dealloc};
use std::cmp::Ordering as CmpOrdering;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::key::compare_internal;

mod finger;
pub(crate) use finger::Finger;

/// Enough levels for a full 64 MiB memtable of small entries (2^20 at branching 2).
pub(crate) const MAX_HEIGHT: usize = 20;
/// 2, not 4: fewer forward steps, each a dependent cache miss; the extra steps down are
/// prefetched (`find_ge`, and doc/format.md).
const BRANCHING: u32 = 2;
/// Arena chunks are this size at most; smaller memtables use write_buffer_size / 8.
pub(crate) const MAX_CHUNK_SIZE: usize = 1 << 20;
const MIN_CHUNK_SIZE: usize = 4 << 10;

/// A node of the list. In memory it is
/// `links for levels height-1 .. 1 | Node | varint key length | key | varint value length |
/// value`: the links above level 0 lie just before the node, highest first (so a node needs no
/// height or key pointer of its own), and the entry right after it. The level-0 link, one link
/// per level above it, and a byte per length (for keys and values under 128 bytes) of overhead
/// per entry: the denser the memtable, the more entries each flush takes (duplicates folded
/// before they reach a table, so less written) and the fewer L0 tables compaction has to merge.
#[repr(C)]
pub(crate) struct Node {
    /// The level-0 link.
    next: AtomicPtr<Node>,
}

/// The bytes `v` takes as a varint.
fn varint_len(v: usize) -> usize {
    (usize::BITS as usize - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Writes `v` as a varint at `p`, returning the byte after it.
///
/// # Safety
/// `p` must be valid for `varint_len(v)` bytes of writes.
unsafe fn write_varint(mut p: *mut u8, mut v: usize) -> *mut u8 {
    while v >= 0x80 {
        // SAFETY: within the varint_len(v) bytes the caller provides.
        unsafe {
            *p = v as u8 | 0x80;
            p = p.add(1);
        }
        v >>= 7;
    }
    // SAFETY: the last of those bytes.
    unsafe {
        *p = v as u8;
        p.add(1)
    }
}

/// Reads the varint `write_varint` wrote at `p`: the value and the byte after it.
///
/// # Safety
/// `p` must point to a whole varint written by `write_varint`.
#[inline(always)]
unsafe fn read_varint(p: *const u8) -> (usize, *const u8) {
    // SAFETY: the caller's varint is at least one byte.
    let first = unsafe { *p };
    if first < 0x80 {
        // SAFETY: the byte after the varint is at most one past its end.
        return (first as usize, unsafe { p.add(1) });
    }
    let mut value = (first & 0x7f) as usize;
    let mut shift = 7;
    let mut at = 1;
    loop {
        // SAFETY: a byte with the high bit set is followed by another of the same varint.
        let b = unsafe { *p.add(at) };
        at += 1;
        value |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            // SAFETY: one past the varint's last byte.
            return (value, unsafe { p.add(at) });
        }
        shift += 7;
    }
}

impl Node {
    const LINK: usize = std::mem::size_of::<AtomicPtr<Node>>();

    /// Bytes a node of `height` takes before its entry: the upper links and the node itself.
    fn size(height: usize) -> usize {
        (height - 1) * Self::LINK + std::mem::size_of::<Node>()
    }

    /// Raw address of the link at `level`.
    ///
    /// # Safety
    /// `this` must point to a node allocated with at least `level + 1` links, with the
    /// provenance of its whole allocation (a pointer from the arena, never from a reference).
    #[inline]
    unsafe fn link_ptr(this: *const Node, level: usize) -> *mut AtomicPtr<Node> {
        // SAFETY: level 0 is the node's first field; the links above it were allocated right
        // before it, level `level` at `level` links below it, all in the node's allocation.
        unsafe {
            (&raw const (*this).next)
                .cast::<AtomicPtr<Node>>()
                .sub(level)
                .cast_mut()
        }
    }

    /// The link at `level` of an initialised node.
    ///
    /// # Safety
    /// As `link_ptr`, and the link must have been initialised; the node outlives `'a`.
    #[inline]
    unsafe fn link<'a>(this: *const Node, level: usize) -> &'a AtomicPtr<Node> {
        // SAFETY: guaranteed by the caller.
        unsafe { &*Self::link_ptr(this, level) }
    }

    /// The node's entry, from its first byte.
    ///
    /// # Safety
    /// As `link_ptr`; the node's lengths are written.
    #[inline]
    unsafe fn entry(this: *const Node) -> *const u8 {
        // SAFETY: the entry follows the node in its allocation.
        unsafe { this.cast::<u8>().add(std::mem::size_of::<Node>()) }
    }

    /// The internal key of a published node.
    ///
    /// # Safety
    /// As `entry`; the node outlives `'a`.
    #[inline]
    unsafe fn key<'a>(this: *const Node) -> &'a [u8] {
        // SAFETY: the arena outlives every node, and the entry starts with the key's length
        // and the key, written before the node was published.
        unsafe {
            let (len, key) = read_varint(Self::entry(this));
            std::slice::from_raw_parts(key, len)
        }
    }

    /// The value of a published node.
    ///
    /// # Safety
    /// As `key`.
    #[inline]
    unsafe fn value<'a>(this: *const Node) -> &'a [u8] {
        // SAFETY: as in `key`; the value's length and the value follow the key.
        unsafe {
            let key = Self::key(this);
            let (len, value) = read_varint(key.as_ptr().add(key.len()));
            std::slice::from_raw_parts(value, len)
        }
    }
}

/// Asks the CPU to bring the cache line holding `p` in. A hint: it never faults, so any
/// address, null or dangling, is fine; a no-op where Rust has no stable prefetch.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints at a cache line; it reads nothing and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Bump allocator; chunks are freed only when the list drops.
struct Arena {
    chunks: Vec<(*mut u8, Layout)>,
    chunk_size: usize,
    /// The next shared chunk's size: chunks start small and double up to `chunk_size`, so that
    /// an idle memtable (one per column family) costs a few KiB, not a full chunk.
    next_chunk: usize,
    ptr: *mut u8,
    left: usize,
    rng: u32,
}

impl Arena {
    fn alloc(&mut self, size: usize, align: usize, used: &AtomicUsize) -> *mut u8 {
        let pad = self.ptr.align_offset(align);
        if pad.saturating_add(size) <= self.left {
            // SAFETY: pad + size fit in what is left of the current chunk.
            let p = unsafe { self.ptr.add(pad) };
            // SAFETY: as above; the new position is at most one past the chunk's end.
            self.ptr = unsafe { p.add(size) };
            self.left -= pad + size;
            return p;
        }
        // Big entries get a chunk of their own so the current chunk's tail is not wasted.
        let dedicated = size > self.next_chunk / 4;
        let chunk = if dedicated { size } else { self.next_chunk };
        let layout = match Layout::from_size_align(chunk.max(1), 16) {
            Ok(l) => l,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
        };
        // SAFETY: the layout has non-zero size.
        let p = unsafe { alloc(layout) };
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        self.chunks.push((p, layout));
        used.fetch_add(chunk, Ordering::Relaxed);
        if !dedicated {
            // SAFETY: size <= chunk / 4, inside the new chunk.
            self.ptr = unsafe { p.add(size) };
            self.left = chunk - size;
            self.next_chunk = (self.next_chunk * 2).min(self.chunk_size);
        }
        p
    }

    fn random_height(&mut self) -> usize {
        let mut h = 1;
        loop {
            // xorshift32: cheap, and the height distribution only needs to be roughly geometric.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 17;
            self.rng ^= self.rng << 5;
            if h < MAX_HEIGHT && self.rng.is_multiple_of(BRANCHING) {
                h += 1;
            } else {
                return h;
            }
        }
    }
}

pub(crate) struct SkipList {
    head: *const Node,
    max_height: AtomicUsize,
    arena: Mutex<Arena>,
    memory: AtomicUsize,
}

// SAFETY: nodes are immutable once published except for their atomic links; the arena is only
// touched under its mutex; all memory is owned by the list and freed in Drop.
unsafe impl Send for SkipList {}
// SAFETY: see Send; concurrent readers only perform atomic loads and read immutable bytes.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// A list whose arena grows in chunks of about `budget / 8` bytes, so that memory accounting
    /// (which counts whole chunks) stays close to what is used.
    pub(crate) fn new(budget: usize) -> Self {
        let memory = AtomicUsize::new(0);
        let mut arena = Arena {
            chunks: Vec::new(),
            chunk_size: (budget / 8).clamp(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE),
            next_chunk: MIN_CHUNK_SIZE,
            ptr: ptr::null_mut(),
            left: 0,
            rng: 0x2545_f491,
        };
        let head = Self::new_node(&mut arena, &memory, MAX_HEIGHT, &[], None, &[]);
        SkipList {
            head,
            max_height: AtomicUsize::new(1),
            arena: Mutex::new(arena),
            memory,
        }
    }

    fn new_node(
        arena: &mut Arena,
        used: &AtomicUsize,
        height: usize,
        user_key: &[u8],
        trailer: Option<u64>,
        value: &[u8],
    ) -> *const Node {
        let node_size = Node::size(height);
        let key_len = user_key.len() + if trailer.is_some() { 8 } else { 0 };
        let base = arena.alloc(
            node_size + varint_len(key_len) + key_len + varint_len(value.len()) + value.len(),
            std::mem::align_of::<Node>(),
            used,
        );
        // SAFETY: `base` is a fresh, aligned allocation of node_size + entry bytes: the upper
        // links, then the node (aligned, as node_size less the node is whole links), then the
        // entry. Every pointer here derives from `base`, so it covers the whole allocation.
        unsafe {
            let node = base
                .add(node_size - std::mem::size_of::<Node>())
                .cast::<Node>();
            ptr::write(
                node,
                Node {
                    next: AtomicPtr::new(ptr::null_mut()),
                },
            );
            for level in 1..height {
                ptr::write(Node::link_ptr(node, level), AtomicPtr::new(ptr::null_mut()));
            }
            let key = write_varint(Node::entry(node).cast_mut(), key_len);
            ptr::copy_nonoverlapping(user_key.as_ptr(), key, user_key.len());
            if let Some(t) = trailer {
                ptr::copy_nonoverlapping(t.to_le_bytes().as_ptr(), key.add(user_key.len()), 8);
            }
            let value_at = write_varint(key.add(key_len), value.len());
            ptr::copy_nonoverlapping(value.as_ptr(), value_at, value.len());
            node
        }
    }

    #[inline]
    fn next(&self, node: *const Node, level: usize) -> *const Node {
        // SAFETY: every node reachable from head is live for the list's lifetime and was allocated
        // with more links than any level it is linked at.
        unsafe { Node::link(node, level).load(Ordering::Acquire) }
    }

    /// Bytes allocated for entries and nodes.
    pub(crate) fn memory_usage(&self) -> usize {
        self.memory.load(Ordering::Relaxed)
    }

    /// Inserts the internal key `user_key | trailer`, which must not be present yet.
    pub(crate) fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) {
        let mut arena = self.arena.lock();
        let height = arena.random_height();
        let node = Self::new_node(
            &mut arena,
            &self.memory,
            height,
            user_key,
            Some(trailer),
            value,
        );
        // SAFETY: the node is live; its key was written above and is not mutated again.
        let key = unsafe { Node::key(node) };
        let mut prev = [self.head; MAX_HEIGHT];
        self.find_ge(key, Some(&mut prev));
        let cur = self.max_height.load(Ordering::Relaxed);
        if height > cur {
            // Readers that see the new height before the links find null (end) at those levels and
            // simply drop down a level: harmless.
            self.max_height.store(height, Ordering::Relaxed);
        }
        // SAFETY: node and every prev[i] are live; the node's links are set before it is published
        // with Release at each level, so readers that reach it see initialised links.
        unsafe {
            for (i, p) in prev.iter().enumerate().take(height) {
                let prev_link = Node::link(*p, i);
                Node::link(node, i).store(prev_link.load(Ordering::Relaxed), Ordering::Relaxed);
                prev_link.store(node as *mut Node, Ordering::Release);
            }
        }
    }

    /// The first node with key >= `target`, or null.
    pub(crate) fn seek_ge(&self, target: &[u8]) -> *const Node {
        self.find_ge(target, None)
    }

    /// The first node with key >= `target`, or null; with `prev`, also the last node before it at
    /// every level (where an insert links in).
    fn find_ge(&self, target: &[u8], prev: Option<&mut [*const Node; MAX_HEIGHT]>) -> *const Node {
        let top = self.max_height.load(Ordering::Relaxed) - 1;
        self.find_ge_from(self.head, top, target, prev)
    }

    /// [`SkipList::find_ge`] from `x` (the head, or a node before `target` at every level up
    /// to `level`) down from `level`; `prev` is set at `level` and below.
    fn find_ge_from(
        &self,
        mut x: *const Node,
        mut level: usize,
        target: &[u8],
        mut prev: Option<&mut [*const Node; MAX_HEIGHT]>,
    ) -> *const Node {
        // The node that stopped the level above: met again one level down, it is known to be
        // past `target` without another comparison (a cache miss and a memcmp saved per level).
        let mut known_ge: *const Node = ptr::null();
        loop {
            let n = self.next(x, level);
            // A search is a chain of cache misses, one per node met. Two of the next ones are known
            // now and fetched alongside `n`'s key: `n`'s link at this level (where a step to `n`
            // reads next, a line of its own above level 0) and the node one level down from `x`
            // (where a step down goes when `n` is past the target).
            if !n.is_null() {
                prefetch(n.cast::<u8>().wrapping_sub(level * Node::LINK));
            }
            if level > 0 {
                prefetch(self.next(x, level - 1).cast());
            }
            if !n.is_null()
                && n != known_ge
                // SAFETY: n is a live node when non-null.
                && compare_internal(unsafe { Node::key(n) }, target) == CmpOrdering::Less
            {
                x = n;
                continue;
            }
            if let Some(prev) = prev.as_deref_mut() {
                prev[level] = x;
            }
            if level == 0 {
                return n;
            }
            known_ge = n;
            level -= 1;
        }
    }

    /// The last node with key < `target` (or the last node when `target` is None), or null.
    pub(crate) fn seek_lt(&self, target: Option<&[u8]>) -> *const Node {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            let n = self.next(x, level);
            let advance = !n.is_null()
                && match target {
                    // SAFETY: n is a live node.
                    Some(t) => compare_internal(unsafe { Node::key(n) }, t) == CmpOrdering::Less,
                    None => true,
                };
            if advance {
                x = n;
            } else if level == 0 {
                return if x == self.head { ptr::null() } else { x };
            } else {
                level -= 1;
            }
        }
    }

    pub(crate) fn first(&self) -> *const Node {
        self.next(self.head, 0)
    }

    pub(crate) fn next_node(&self, node: *const Node) -> *const Node {
        self.next(node, 0)
    }

    /// Key of a node returned by this list.
    #[inline]
    pub(crate) fn node_key(&self, node: *const Node) -> &[u8] {
        // SAFETY: nodes returned by this list are live for its lifetime.
        unsafe { Node::key(node) }
    }

    #[inline]
    pub(crate) fn node_value(&self, node: *const Node) -> &[u8] {
        // SAFETY: nodes returned by this list are live for its lifetime.
        unsafe { Node::value(node) }
    }
}

impl Drop for SkipList {
    fn drop(&mut self) {
        for (p, layout) in self.arena.get_mut().chunks.drain(..) {
            // SAFETY: each chunk was allocated with exactly this layout and is freed once.
            unsafe { dealloc(p, layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, lookup_key};
    use std::sync::Arc;

    fn ik(k: u32, seq: u64) -> Vec<u8> {
        internal_key(&k.to_be_bytes(), seq, 1)
    }

    fn put(list: &SkipList, k: u32, seq: u64, value: &[u8]) {
        list.insert(&k.to_be_bytes(), crate::key::pack_trailer(seq, 1), value);
    }

    #[test]
    fn ordered_iteration_and_seeks() {
        let list = SkipList::new(8 * MAX_CHUNK_SIZE);
        let mut keys: Vec<u32> = (0..2000).map(|i| (i * 7919) % 2000).collect();
        for (seq, k) in keys.iter().enumerate() {
            put(&list, *k, seq as u64, &k.to_le_bytes());
        }
        keys.sort();
        let mut n = list.first();
        for k in &keys {
            assert_eq!(crate::key::user_key(list.node_key(n)), k.to_be_bytes());
            assert_eq!(list.node_value(n), k.to_le_bytes());
            n = list.next_node(n);
        }
        assert!(n.is_null());
        let n = list.seek_ge(&lookup_key(&500u32.to_be_bytes(), u64::MAX >> 8));
        assert_eq!(crate::key::user_key(list.node_key(n)), 500u32.to_be_bytes());
        let n = list.seek_lt(Some(&lookup_key(&500u32.to_be_bytes(), u64::MAX >> 8)));
        assert_eq!(crate::key::user_key(list.node_key(n)), 499u32.to_be_bytes());
        let last = list.seek_lt(None);
        assert_eq!(
            crate::key::user_key(list.node_key(last)),
            1999u32.to_be_bytes()
        );
        assert!(list.seek_lt(Some(&ik(0, u64::MAX >> 8))).is_null());
        // At least the keys and values themselves are accounted for.
        assert!(list.memory_usage() >= 2000 * 20);
    }

    #[test]
    fn chunks_start_small_and_grow_to_the_budget() {
        // An idle memtable (one per column family) costs one small chunk.
        let list = SkipList::new(64 << 20);
        assert_eq!(list.memory_usage(), MIN_CHUNK_SIZE);
        put(&list, 1, 1, b"v");
        assert_eq!(list.memory_usage(), MIN_CHUNK_SIZE);
        // A 64 KiB budget caps chunks at 8 KiB: 4 + 8 + 8 + ... KiB.
        let list = SkipList::new(64 << 10);
        for i in 0..1000 {
            put(&list, i, i as u64, &[0u8; 20]);
        }
        let usage = list.memory_usage();
        assert_eq!((usage - MIN_CHUNK_SIZE) % (8 << 10), 0, "{usage}");
        assert!(usage < 1000 * 100, "{usage}");
    }

    /// Keys and values whose lengths take one to three varint bytes read back whole, and a small
    /// entry costs its bytes, a node and two length bytes, aligned: nothing more.
    #[test]
    fn entries_of_every_length_read_back_and_small_ones_cost_little() {
        for len in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let list = SkipList::new(8 * MAX_CHUNK_SIZE);
            let key = vec![7u8; len];
            let value: Vec<u8> = (0..len + 5).map(|i| i as u8).collect();
            list.insert(&key, 42, &value);
            let n = list.first();
            assert_eq!(list.node_key(n).len(), len + 8, "{len}");
            assert_eq!(&list.node_key(n)[..len], &key[..], "{len}");
            assert_eq!(list.node_value(n), &value[..], "{len}");
        }
        assert_eq!(
            (
                varint_len(0),
                varint_len(127),
                varint_len(128),
                varint_len(u32::MAX as usize)
            ),
            (1, 1, 2, 5)
        );
        #[cfg(target_pointer_width = "64")]
        for v in [u32::MAX as usize + 1, usize::MAX] {
            let mut buf = [0u8; 10];
            // SAFETY: ten bytes hold any 64-bit varint.
            let (read, end) = unsafe {
                let end = write_varint(buf.as_mut_ptr(), v);
                assert_eq!(end as usize - buf.as_ptr() as usize, varint_len(v));
                read_varint(buf.as_ptr())
            };
            assert_eq!(read, v);
            assert_eq!(end as usize - buf.as_ptr() as usize, varint_len(v));
        }
        // A node of height 1 in the head's chunk: 8 bytes of link, 1 + 24 of key, 1 + 100 of value.
        let list = SkipList::new(8 * MAX_CHUNK_SIZE);
        let mut arena = list.arena.lock();
        let before = arena.ptr as usize;
        SkipList::new_node(
            &mut arena,
            &list.memory,
            1,
            &[1u8; 16],
            Some(9),
            &[2u8; 100],
        );
        let used = arena.ptr as usize - before;
        assert!(
            used <= 8 + 1 + 24 + 1 + 100 + 7,
            "{used} bytes for a 16-byte key and 100 bytes"
        );
    }

    #[test]
    fn big_entries_get_their_own_chunk() {
        let list = SkipList::new(8 * MAX_CHUNK_SIZE);
        let big = vec![3u8; MAX_CHUNK_SIZE * 2];
        put(&list, 1, 1, &big);
        put(&list, 2, 2, b"small");
        assert_eq!(list.node_value(list.first()), &big[..]);
        // The small entry still went to the first, small chunk.
        let node_overhead = list.memory_usage() - MIN_CHUNK_SIZE - big.len();
        assert!(node_overhead < 256, "{node_overhead}");
    }

    #[cfg_attr(target_os = "wasi", ignore = "needs threads")]
    #[test]
    fn concurrent_readers_see_a_consistent_prefix() {
        let list = Arc::new(SkipList::new(8 * MAX_CHUNK_SIZE));
        let writer = {
            let list = list.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u32 {
                    put(&list, i, i as u64, &i.to_le_bytes());
                }
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let list = list.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mut n = list.first();
                        let mut prev: Option<Vec<u8>> = None;
                        while !n.is_null() {
                            let k = list.node_key(n).to_vec();
                            if let Some(p) = &prev {
                                assert_eq!(compare_internal(p, &k), CmpOrdering::Less);
                            }
                            assert_eq!(
                                list.node_value(n),
                                &k[..4].iter().rev().copied().collect::<Vec<_>>()[..]
                            );
                            prev = Some(k);
                            n = list.next_node(n);
                        }
                    }
                })
            })
            .collect();
        writer.join().unwrap();
        for r in readers {
            r.join().unwrap();
        }
    }
}
