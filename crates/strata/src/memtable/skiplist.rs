//! An arena-backed concurrent skiplist: one writer at a time, any number of
//! lock-free readers (the LevelDB design).
//!
//! Why not `crossbeam-skiplist`: its epoch pinning and per-node allocations
//! take a large share of the CPU time of puts and gets (why:
//! docs/design/2026-11-29-code-comment-measurements.md §skiplist); this list allocates
//! nodes from a bump arena and never frees or moves them until the whole
//! list is dropped, so readers need no epochs.
//!
//! Invariants:
//! - Nodes are written completely before they are linked; links are
//!   published with `Release` stores and read with `Acquire` loads, so a
//!   reader that reaches a node sees its bytes.
//! - Nodes are never unlinked, moved or freed while the list lives.
//! - Inserts are serialised by the `writer` mutex.
//!
//! Node layout in the arena (8-byte aligned):
//! `NodeHeader { key_len u32, value_len u32, height u32, pad u32 }`,
//! `height × AtomicPtr<NodeHeader>` (the tower), key bytes, value bytes.

use parking_lot::{Condvar, Mutex};
use std::cmp::Ordering;
use std::mem::{size_of, MaybeUninit};
use std::ptr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering as AO};
use std::sync::Arc;

pub const MAX_HEIGHT: usize = 12;
const CHUNK_WORDS: usize = (1 << 20) / 8;

#[repr(C)]
pub struct NodeHeader {
    key_len: u32,
    value_len: u32,
    height: u32,
    _pad: u32,
}

/// A node pointer; null means "end".
pub type NodePtr = *const NodeHeader;

/// One arena chunk: words owned here, reached only through its base
/// pointer (no `&mut` to a chunk is made once nodes live in it). Every
/// byte a reader reaches is written before its node is published (see
/// `insert`).
///
/// A chunk is its own anonymous memory map, so that a freed chunk goes
/// back to the OS at once; from the allocator, freed chunks stayed
/// resident as its free lists (glibc raises its map threshold past a freed
/// map's size; measured in docs/design/2026-11-29-read-path-by-fit.md).
pub struct Chunk {
    base: NonNull<u64>,
    len: usize,
    backing: Backing,
}

/// Where a chunk's words live.
enum Backing {
    Map(#[allow(dead_code)] memmap2::MmapMut),
    /// From the allocator, where the OS refused a map (the allocator then
    /// gets the same answer or aborts, as for any allocation).
    Heap,
}

impl Chunk {
    fn new(len: usize) -> Self {
        let bytes = len.max(1).saturating_mul(8);
        match memmap2::MmapMut::map_anon(bytes) {
            Ok(mut map) => Chunk {
                // The only `&mut` to the map, before any node lives in it.
                base: NonNull::new(map.as_mut_ptr().cast::<u64>()).unwrap_or(NonNull::dangling()),
                len,
                backing: Backing::Map(map),
            },
            Err(_) => {
                let words = Box::leak(Box::<[u64]>::new_uninit_slice(len.max(1)));
                Chunk {
                    base: NonNull::from(words).cast::<u64>(),
                    len,
                    backing: Backing::Heap,
                }
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn base(&self) -> *mut u64 {
        self.base.as_ptr()
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Backing::Heap = self.backing {
            let words = std::ptr::slice_from_raw_parts_mut(
                self.base.as_ptr().cast::<MaybeUninit<u64>>(),
                self.len.max(1),
            );
            // SAFETY: `words` is the slice `new` leaked from a `Box` of
            // `len.max(1)` words, freed only here, once; nothing points
            // into it any more (its skiplist is dropped, or it never held a
            // node).
            drop(unsafe { Box::from_raw(words) });
        }
        // A map is unmapped by its own drop.
    }
}

// SAFETY: a `Chunk` owns its allocation like a `Box` does; the raw pointer
// is only an owning handle.
unsafe impl Send for Chunk {}

/// Arena chunks for a database's memtables (one pool per database, shared
/// by its memtables): chunks of flushed memtables, kept for the next ones,
/// and chunks a filler thread ([`ChunkPool::fill_until_stopped`]) made
/// ahead. Taking a chunk is then a pop, with no call to the allocator and
/// no page faults, since its pages were written before. A fresh 1 MiB chunk
/// made by the writer itself is a `mmap(2)`, which waits for the
/// address-space lock while a background thread unmaps a table (why:
/// docs/design/2026-11-29-code-comment-measurements.md §skiplist), and its 256
/// pages then fault one by one as inserts reach them.
pub struct ChunkPool {
    free: Mutex<Vec<Chunk>>,
    /// Chunks kept at most; the rest are freed.
    cap: usize,
    /// Chunks the filler keeps ready (it makes more below this).
    ready: usize,
    /// Wakes the filler (with `free` locked).
    wake: Condvar,
    stopped: AtomicBool,
    /// Chunks the filler made.
    made: AtomicU64,
    /// Takes that found no chunk (the writer made its own).
    misses: AtomicU64,
}

/// Words of a chunk the filler writes between two offers of its core
/// (`sched_yield(2)`, which returns at once when no other thread waits for
/// the core): 64 KiB, 16 page faults. The WAL's page filler does the same
/// (`io/posix/page_filler.rs`): a filler woken onto a busy writer's core waits there
/// (it runs at a lower priority) until the scheduler's next tick hands it
/// the core, and then keeps it for its whole piece of work, which the
/// writer waits out. A filler that has fallen behind (under half its ready
/// chunks left) makes no offers: with offers throughout, puts find the
/// pool empty far more often, and each such put maps a chunk itself (why:
/// docs/design/2026-11-29-code-comment-measurements.md §skiplist).
const FILL_PIECE_WORDS: usize = (64 << 10) / 8;

/// Bytes of chunks a filler keeps ready at most (how long that lasts a
/// writer at full speed: docs/design/2026-11-29-code-comment-measurements.md
/// §skiplist).
const READY_BYTES: usize = 8 << 20;

impl ChunkPool {
    /// A pool keeping up to `bytes` of chunks, none made ahead.
    pub fn new(bytes: usize) -> Self {
        ChunkPool {
            free: Mutex::new(Vec::new()),
            cap: bytes.div_ceil(CHUNK_WORDS * 8),
            ready: 0,
            wake: Condvar::new(),
            stopped: AtomicBool::new(false),
            made: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// A pool for the memtables of one database: room for a whole write
    /// buffer of chunks, plus the partly filled last chunk of each shard;
    /// a filler keeps an eighth of the write buffer (1 to 8 chunks) ready.
    pub fn for_write_buffer(write_buffer_size: usize, shards: usize) -> Self {
        let mut pool = Self::new(write_buffer_size + shards * CHUNK_WORDS * 8);
        pool.ready = (write_buffer_size / 8)
            .min(READY_BYTES)
            .div_ceil(CHUNK_WORDS * 8)
            .clamp(1, pool.cap);
        pool
    }

    /// The pool keeping at most `bytes` of chunks (at least one), and
    /// making at most that many ahead.
    #[must_use]
    pub fn limited_to(mut self, bytes: usize) -> Self {
        self.cap = bytes.div_ceil(CHUNK_WORDS * 8).max(1);
        self.ready = self.ready.min(self.cap);
        self
    }

    /// Chunks held (tests).
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.free.lock().len()
    }

    /// Bytes of chunks the pool may hold at most.
    pub fn cap_bytes(&self) -> u64 {
        (self.cap * CHUNK_WORDS * 8) as u64
    }

    /// Bytes of the chunks held for the next memtables.
    pub fn held_bytes(&self) -> u64 {
        (self.free.lock().len() * CHUNK_WORDS * 8) as u64
    }

    /// (chunks the filler made, takes that found the pool empty).
    pub fn counts(&self) -> (u64, u64) {
        (self.made.load(AO::Relaxed), self.misses.load(AO::Relaxed))
    }

    fn take(&self) -> Option<Chunk> {
        let mut free = self.free.lock();
        let chunk = free.pop();
        if chunk.is_none() {
            self.misses.fetch_add(1, AO::Relaxed);
        }
        if free.len() < self.ready {
            self.wake.notify_one();
        }
        chunk
    }

    fn give(&self, chunks: impl Iterator<Item = Chunk>) {
        let mut free = self.free.lock();
        for c in chunks {
            if free.len() >= self.cap {
                break;
            }
            free.push(c);
        }
    }

    /// Keeps `ready` chunks in the pool, each with its pages written (and
    /// so faulted in), until [`stop`](Self::stop): the loop of a database's
    /// filler thread. Chunks are made without the pool's lock held.
    pub fn fill_until_stopped(&self) {
        let mut free = self.free.lock();
        while !self.stopped.load(AO::Acquire) {
            if free.len() >= self.ready {
                self.wake.wait(&mut free);
                continue;
            }
            // Behind (under half the ready chunks left): no offers, so the
            // writers do not run out and map chunks themselves.
            let yielding = free.len() * 2 >= self.ready;
            let chunk = parking_lot::MutexGuard::unlocked(&mut free, || {
                let chunk = Chunk::new(CHUNK_WORDS);
                // Written in pieces, offering the core after each: a whole
                // chunk's 256 page faults take a few hundred microseconds,
                // and this thread may share a core with a writer (see
                // `FILL_PIECE_WORDS`).
                let mut at = 0;
                while at < chunk.len() {
                    let n = FILL_PIECE_WORDS.min(chunk.len() - at);
                    // SAFETY: `at < len()` and `at + n <= len()` (in words:
                    // `base` is a `*mut u64` and `write_bytes` counts
                    // `u64`s), so the words written are the chunk's own,
                    // owned by `chunk` and not yet reached by anything else.
                    unsafe { ptr::write_bytes(chunk.base().add(at), 0, n) };
                    at += n;
                    if yielding {
                        std::thread::yield_now();
                    }
                }
                chunk
            });
            free.push(chunk);
            self.made.fetch_add(1, AO::Relaxed);
        }
    }

    /// Ends [`fill_until_stopped`](Self::fill_until_stopped).
    pub fn stop(&self) {
        self.stopped.store(true, AO::Release);
        // Under the lock: a filler between its check and its wait is
        // woken all the same.
        let _free = self.free.lock();
        self.wake.notify_all();
    }
}

struct Writer {
    /// Arena chunks; the last one is being filled.
    chunks: Vec<Chunk>,
    /// Free words at the end of the last chunk start here.
    used: usize,
    /// Bytes of `chunks`.
    held: usize,
    rng: u64,
}

/// The skiplist; see the module doc.
pub struct SkipList {
    head: Box<[AtomicPtr<NodeHeader>; MAX_HEIGHT]>,
    height: AtomicUsize,
    writer: Mutex<Writer>,
    len: AtomicUsize,
    memory: AtomicUsize,
    /// Bytes of the arena's chunks (`Writer::held`), for readers.
    held: AtomicUsize,
    /// Free bytes at the end of the chunk being filled, for readers.
    tail_free: AtomicUsize,
    /// Where full-size chunks come from and go back to, if anywhere.
    pool: Option<Arc<ChunkPool>>,
}

impl Drop for SkipList {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            let chunks = std::mem::take(&mut self.writer.get_mut().chunks);
            pool.give(chunks.into_iter().filter(|c| c.len() == CHUNK_WORDS));
        }
    }
}

// SAFETY: all shared mutable state is either atomic (links, counters) or
// behind the `writer` mutex (arena bookkeeping). Node bytes are immutable
// after publication, and the arena chunks they live in are owned by the
// list and outlive every `&SkipList` borrow.
unsafe impl Send for SkipList {}
// SAFETY: see `Send` above.
unsafe impl Sync for SkipList {}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn tower<'a>(n: NodePtr) -> &'a [AtomicPtr<NodeHeader>] {
    // SAFETY: `n` is a non-null node allocated by `SkipList::insert` with
    // `height` tower slots directly after the header; the arena keeps it
    // alive and in place for the list's lifetime, which bounds 'a in callers.
    unsafe {
        let h = (*n).height as usize;
        let first = n.add(1) as *const AtomicPtr<NodeHeader>;
        std::slice::from_raw_parts(first, h)
    }
}

/// The key bytes of a node.
#[inline]
pub fn node_key<'a>(n: NodePtr) -> &'a [u8] {
    // SAFETY: as in `tower`; the key follows the tower and is `key_len`
    // bytes, written before the node was published.
    unsafe {
        let h = (*n).height as usize;
        let start = (n.add(1) as *const AtomicPtr<NodeHeader>).add(h) as *const u8;
        std::slice::from_raw_parts(start, (*n).key_len as usize)
    }
}

/// The value bytes of a node.
#[inline]
pub fn node_value<'a>(n: NodePtr) -> &'a [u8] {
    // SAFETY: as in `node_key`; the value follows the key.
    unsafe {
        let h = (*n).height as usize;
        let start = (n.add(1) as *const AtomicPtr<NodeHeader>).add(h) as *const u8;
        std::slice::from_raw_parts(start.add((*n).key_len as usize), (*n).value_len as usize)
    }
}

impl SkipList {
    pub fn new() -> Self {
        Self::in_pool(None)
    }

    /// A skiplist whose arena takes chunks from, and returns them to, `pool`.
    pub fn in_pool(pool: Option<Arc<ChunkPool>>) -> Self {
        SkipList {
            pool,
            head: Box::new(std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut()))),
            height: AtomicUsize::new(1),
            writer: Mutex::new(Writer {
                chunks: Vec::new(),
                used: CHUNK_WORDS,
                held: 0,
                rng: 0x2545_f491_4f6c_dd1d,
            }),
            len: AtomicUsize::new(0),
            memory: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            tail_free: AtomicUsize::new(0),
        }
    }

    /// Entries inserted.
    pub fn len(&self) -> usize {
        self.len.load(AO::Relaxed)
    }

    /// `bytes` of zeros in the arena, aligned to 64 bytes, for as long as
    /// the list lives (a shard's filter: made in a chunk from the pool, it
    /// costs no allocation and no page faults). Not counted in
    /// [`memory`](Self::memory).
    pub fn alloc_zeroed_lines(&self, bytes: usize) -> NonNull<u8> {
        let mut w = self.writer.lock();
        // Up to 56 bytes of an 8-byte-aligned start go to the alignment.
        let words = (bytes + 56).div_ceil(8);
        let start = alloc(&mut w, self.pool.as_deref(), words).cast::<u8>();
        self.held.store(w.held, AO::Relaxed);
        self.tail_free
            .store((CHUNK_WORDS - w.used) * 8, AO::Relaxed);
        let pad = start.align_offset(64);
        // SAFETY: `alloc` returned `words * 8 >= bytes + 56` bytes owned
        // by this list alone; `pad < 64` and, `start` being 8-byte
        // aligned, `pad <= 56`, so `[start + pad, start + pad + bytes)`
        // lies inside them. Zeroing them initialises them.
        unsafe {
            let p = start.add(pad);
            ptr::write_bytes(p, 0, bytes);
            NonNull::new_unchecked(p)
        }
    }

    /// Arena bytes in use.
    pub fn memory(&self) -> usize {
        self.memory.load(AO::Relaxed)
    }

    /// Bytes of the arena's chunks: what the list holds of memory, its
    /// chunks' unused tails included.
    pub fn held(&self) -> usize {
        self.held.load(AO::Relaxed)
    }

    /// Free bytes left at the end of the chunk being filled (0 before the
    /// first allocation).
    pub fn tail_free(&self) -> usize {
        self.tail_free.load(AO::Relaxed)
    }

    /// Link `level` of `prev` (null = head).
    #[inline]
    fn next(&self, prev: NodePtr, level: usize) -> NodePtr {
        let slot = if prev.is_null() {
            &self.head[level]
        } else {
            &tower(prev)[level]
        };
        slot.load(AO::Acquire)
    }

    /// Walks down to the boundary of the probe: returns the last node for
    /// which `cmp(node_key)` is `Less` (null if none) and the first node
    /// that is not (null if none), filling `prevs` with the predecessors.
    #[inline]
    fn find(
        &self,
        cmp: &mut dyn FnMut(&[u8]) -> Ordering,
        mut prevs: Option<&mut [NodePtr; MAX_HEIGHT]>,
    ) -> (NodePtr, NodePtr) {
        let mut x: NodePtr = ptr::null();
        let mut level = self.height.load(AO::Acquire) - 1;
        loop {
            let next = self.next(x, level);
            if !next.is_null() && cmp(node_key(next)) == Ordering::Less {
                x = next;
            } else {
                if let Some(p) = prevs.as_deref_mut() {
                    p[level] = x;
                }
                if level == 0 {
                    return (x, next);
                }
                level -= 1;
            }
        }
    }

    /// First node >= probe.
    pub fn seek(&self, cmp: &mut dyn FnMut(&[u8]) -> Ordering) -> NodePtr {
        self.find(cmp, None).1
    }

    /// Last node < probe (null if none).
    pub fn seek_lt(&self, cmp: &mut dyn FnMut(&[u8]) -> Ordering) -> NodePtr {
        self.find(cmp, None).0
    }

    /// First node.
    pub fn first(&self) -> NodePtr {
        self.next(ptr::null(), 0)
    }

    /// Last node (null if empty).
    pub fn last(&self) -> NodePtr {
        self.seek_lt(&mut |_| Ordering::Less)
    }

    /// The node after `n` (non-null).
    pub fn successor(&self, n: NodePtr) -> NodePtr {
        self.next(n, 0)
    }

    /// Inserts the key `key_head ++ key_tail` with `value`. `cmp(node_key)`
    /// orders an existing key against the new one; keys must be unique.
    pub fn insert(
        &self,
        key_head: &[u8],
        key_tail: &[u8],
        value: &[u8],
        cmp: &mut dyn FnMut(&[u8]) -> Ordering,
    ) {
        let mut w = self.writer.lock();
        let height = random_height(&mut w.rng);
        let key_len = key_head.len() + key_tail.len();
        let bytes = size_of::<NodeHeader>()
            + height * size_of::<AtomicPtr<NodeHeader>>()
            + key_len
            + value.len();
        let words = bytes.div_ceil(8);
        let node = alloc(&mut w, self.pool.as_deref(), words) as *mut NodeHeader;
        self.held.store(w.held, AO::Relaxed);
        self.tail_free
            .store((CHUNK_WORDS - w.used) * 8, AO::Relaxed);
        // SAFETY: `node` points to `words * 8 >= bytes` fresh, 8-byte-aligned,
        // exclusively owned bytes in the arena; we initialise the header,
        // every tower slot, the key and the value before publishing the node.
        unsafe {
            node.write(NodeHeader {
                key_len: key_len as u32,
                value_len: value.len() as u32,
                height: height as u32,
                _pad: 0,
            });
            let tower_start = node.add(1) as *mut AtomicPtr<NodeHeader>;
            for i in 0..height {
                tower_start.add(i).write(AtomicPtr::new(ptr::null_mut()));
            }
            let data = tower_start.add(height) as *mut u8;
            ptr::copy_nonoverlapping(key_head.as_ptr(), data, key_head.len());
            ptr::copy_nonoverlapping(key_tail.as_ptr(), data.add(key_head.len()), key_tail.len());
            ptr::copy_nonoverlapping(value.as_ptr(), data.add(key_len), value.len());
        }
        let mut prevs: [NodePtr; MAX_HEIGHT] = [ptr::null(); MAX_HEIGHT];
        let cur_height = self.height.load(AO::Relaxed);
        self.find(cmp, Some(&mut prevs));
        if height > cur_height {
            // Levels above the old height start at the head (null prev).
            self.height.store(height, AO::Release);
        }
        let node_tower = tower(node);
        for (level, slot) in node_tower.iter().enumerate() {
            let prev = if level < cur_height {
                prevs[level]
            } else {
                ptr::null()
            };
            let prev_slot = if prev.is_null() {
                &self.head[level]
            } else {
                &tower(prev)[level]
            };
            slot.store(prev_slot.load(AO::Relaxed), AO::Relaxed);
            prev_slot.store(node, AO::Release);
        }
        self.len.fetch_add(1, AO::Relaxed);
        self.memory.fetch_add(words * 8, AO::Relaxed);
    }
}

fn random_height(rng: &mut u64) -> usize {
    let mut h = 1;
    loop {
        // xorshift64
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        if h < MAX_HEIGHT && (*rng).is_multiple_of(4) {
            h += 1;
        } else {
            return h;
        }
    }
}

/// Bump-allocates `words` 8-byte words, uninitialised.
///
/// Chunks are not zeroed: zeroing a fresh 1 MiB chunk would fault in all
/// 256 of its pages at once inside one put, among the largest put
/// latencies of a random load (why:
/// docs/design/2026-11-29-code-comment-measurements.md §skiplist); left uninitialised,
/// each page is faulted by the insert that first writes it, or was
/// already, for a chunk from the pool.
fn alloc(w: &mut Writer, pool: Option<&ChunkPool>, words: usize) -> *mut u64 {
    if words > CHUNK_WORDS / 4 {
        // Large entries get a chunk of their own; the current chunk stays last.
        let chunk = Chunk::new(words);
        let p = chunk.base();
        w.held += chunk.len().max(1) * 8;
        w.chunks.push(chunk);
        let n = w.chunks.len();
        if n >= 2 {
            w.chunks.swap(n - 2, n - 1);
        }
        return p;
    }
    if w.used + words > CHUNK_WORDS || w.chunks.is_empty() {
        let chunk = pool.and_then(ChunkPool::take);
        w.chunks
            .push(chunk.unwrap_or_else(|| Chunk::new(CHUNK_WORDS)));
        w.held += CHUNK_WORDS * 8;
        w.used = 0;
    }
    let used = w.used;
    w.used += words;
    let base = w.chunks.last().map_or(ptr::null_mut(), Chunk::base);
    // SAFETY: the last chunk is `CHUNK_WORDS` long (large entries are
    // swapped in before it) and `used + words <= CHUNK_WORDS`; `base` is
    // its base pointer, so the result stays inside it.
    unsafe { base.add(used) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(l: &SkipList, k: &[u8], v: &[u8]) {
        l.insert(k, &[], v, &mut |n| n.cmp(k));
    }

    #[test]
    fn insert_and_walk_in_order() {
        let l = SkipList::new();
        let mut keys: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| {
                (i.wrapping_mul(2654435761) % 100_000)
                    .to_be_bytes()
                    .to_vec()
            })
            .collect();
        keys.sort();
        keys.dedup();
        let mut shuffled = keys.clone();
        shuffled.reverse();
        shuffled.rotate_left(1234);
        for k in &shuffled {
            put(&l, k, &[k[3]; 3]);
        }
        // A large value takes a chunk of its own.
        put(&l, b"\xff\xff\xff\xff\xff", &vec![9u8; 400_000]);
        assert_eq!(l.len(), keys.len() + 1);
        let mut n = l.first();
        for k in &keys {
            assert_eq!(node_key(n), k.as_slice());
            assert_eq!(node_value(n), &[k[3]; 3]);
            n = l.successor(n);
        }
        assert_eq!(node_value(n).len(), 400_000);
        assert!(l.successor(n).is_null());
        assert_eq!(l.last(), n);
        let mid = &keys[keys.len() / 2];
        assert_eq!(node_key(l.seek(&mut |k| k.cmp(mid))), mid.as_slice());
        assert_eq!(
            node_key(l.seek_lt(&mut |k| k.cmp(mid))),
            keys[keys.len() / 2 - 1].as_slice()
        );
        assert!(l.seek_lt(&mut |k| k.cmp(&keys[0])).is_null());
    }

    /// A dropped list's full-size chunks go back to its pool (up to the
    /// cap; a large entry's own chunk is freed), and the next list fills
    /// them again: what it reads back is what it wrote, not the old bytes.
    #[test]
    fn chunks_are_reused_through_the_pool() {
        let pool = Arc::new(ChunkPool::new(3 * CHUNK_WORDS * 8));
        let fill = |tag: u8| {
            let l = SkipList::in_pool(Some(pool.clone()));
            // About 4 MiB of entries: four or five chunks.
            for i in 0..16_000u32 {
                put(&l, &i.to_be_bytes(), &[tag; 240]);
            }
            put(&l, b"\xff\xff\xff\xff\xff", &vec![tag; 400_000]);
            l
        };
        let first = fill(1);
        assert_eq!(pool.held(), 0);
        drop(first);
        assert_eq!(pool.held(), 3, "kept up to the cap");
        let second = fill(2);
        assert_eq!(pool.held(), 0, "the next list took them");
        let mut n = second.first();
        for i in 0..16_000u32 {
            assert_eq!(node_key(n), i.to_be_bytes());
            assert_eq!(node_value(n), &[2u8; 240]);
            n = second.successor(n);
        }
        assert_eq!(node_value(n), vec![2u8; 400_000].as_slice());
    }

    /// The filler keeps `ready` chunks in the pool; a list takes them
    /// without a miss, the pool is topped up again as they go, a take from
    /// an empty pool counts a miss, and `stop` ends the filler.
    #[test]
    fn a_filler_keeps_chunks_ready() {
        let pool = Arc::new(ChunkPool::for_write_buffer(16 << 20, 1));
        assert_eq!(pool.ready, 2, "an eighth of the write buffer");
        let filler = {
            let pool = pool.clone();
            std::thread::spawn(move || pool.fill_until_stopped())
        };
        let wait_for = |n: usize| {
            for _ in 0..1000 {
                if pool.held() >= n {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            panic!("the filler never made {n} chunks");
        };
        wait_for(2);
        let l = SkipList::in_pool(Some(pool.clone()));
        // About 3 MiB: three chunks or more, later ones made after the
        // first were taken. Written in rounds of about 1 MiB (at most two
        // new chunks), each once the filler has two ready again, so that a
        // filler slowed by a busy machine cannot make a miss.
        for round in 0..3u32 {
            for i in round * 4_000..(round + 1) * 4_000 {
                put(&l, &i.to_be_bytes(), &[7; 240]);
            }
            wait_for(2);
        }
        assert_eq!(pool.held(), 2, "no more than `ready`");
        let (made, misses) = pool.counts();
        assert!(made >= 4, "made {made}");
        assert_eq!(misses, 0, "every chunk was ready");
        pool.stop();
        filler.join().expect("filler");
        // Without a filler: the pool runs dry and the writer makes its own.
        for i in 12_000..24_000u32 {
            put(&l, &i.to_be_bytes(), &[7; 240]);
        }
        assert!(pool.counts().1 > 0, "a take from an empty pool is a miss");
        assert_eq!(l.len(), 24_000);
        let mut n = l.first();
        for i in 0..24_000u32 {
            assert_eq!(node_key(n), i.to_be_bytes());
            n = l.successor(n);
        }
    }

    /// Zeroed lines carved from the arena are 64-byte aligned, zero, and
    /// stay apart from the nodes around them.
    #[test]
    fn lines_in_the_arena_are_aligned_and_zeroed() {
        let l = SkipList::new();
        put(&l, b"a", b"x");
        for bytes in [64, 4096, 128 << 10, 300 << 10] {
            let p = l.alloc_zeroed_lines(bytes);
            assert_eq!(p.as_ptr() as usize % 64, 0);
            // SAFETY: `bytes` zeroed bytes from the list's arena.
            let s = unsafe { std::slice::from_raw_parts(p.as_ptr(), bytes) };
            assert!(s.iter().all(|&b| b == 0));
            put(&l, &bytes.to_be_bytes(), &[0xee; 100]);
        }
        assert_eq!(node_value(l.first()), &[0xee; 100]);
        assert_eq!(l.len(), 5);
    }

    #[test]
    fn readers_run_during_inserts() {
        let l = std::sync::Arc::new(SkipList::new());
        let w = {
            let l = l.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u32 {
                    put(&l, &i.to_be_bytes(), b"v");
                }
            })
        };
        for _ in 0..50 {
            // Every walk sees a sorted prefix-closed set.
            let mut prev: Option<Vec<u8>> = None;
            let mut n = l.first();
            while !n.is_null() {
                let k = node_key(n).to_vec();
                assert!(prev.as_ref().is_none_or(|p| *p < k));
                prev = Some(k);
                n = l.successor(n);
            }
        }
        w.join().expect("writer");
        assert_eq!(l.len(), 20_000);
    }
}
