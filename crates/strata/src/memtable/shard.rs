//! One shard of a memtable: a skiplist and a cache-local bloom filter over
//! the user keys it holds.
//!
//! The filter is written by the memtable's one inserter before the entry
//! is linked (relaxed `fetch_or`s, published by the write path's release
//! of the last sequence number, or by the shard count for a sealed shard),
//! so a reader whose snapshot includes an entry sees its bits. Same probe
//! scheme as the tables' version 2 filter (`table::filter`): the low 32
//! bits of the key's xxh3 pick one 64-byte line, [`PROBES`] bits of that
//! line come from the high 32 bits.

use super::skiplist::{ChunkPool, SkipList};
use crate::table::filter::{line_of, local_bits};
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Arena bytes per filter line (512 bits): about 19 bits per key with
/// 16-byte keys and 100-byte values, 6 with empty values.
const BYTES_PER_LINE: usize = 4096;
/// Bits set per key.
const PROBES: u8 = 6;

#[repr(align(64))]
struct Line([AtomicU64; 8]);

/// A skiplist and its filter.
pub(super) struct Shard {
    pub(super) list: SkipList,
    /// The filter's lines: `count` of them, zeroed, in `list`'s arena.
    lines: NonNull<Line>,
    count: usize,
}

// SAFETY: the lines are atomics in memory owned by `list` (itself `Send`
// and `Sync`), which lives as long as the shard and never moves or frees
// its arena before it is dropped.
unsafe impl Send for Shard {}
// SAFETY: see `Send` above; the lines are only reached through `&[Line]`
// of atomics.
unsafe impl Sync for Shard {}

impl Shard {
    /// A shard expected to hold about `bytes` of arena.
    #[cfg(test)]
    pub(super) fn new(bytes: usize) -> Self {
        Self::in_pool(bytes, None)
    }

    /// A shard whose arena chunks come from (and go back to) `pool`.
    pub(super) fn in_pool(bytes: usize, pool: Option<Arc<ChunkPool>>) -> Self {
        let count = (bytes / BYTES_PER_LINE).clamp(1, 1 << 20);
        let list = SkipList::in_pool(pool);
        // In the arena rather than on the heap: a new shard then takes a
        // chunk made ahead instead of a fresh 128 KiB allocation (a
        // `mmap(2)` that waited for the address-space lock in one put).
        let lines = list
            .alloc_zeroed_lines(count * size_of::<Line>())
            .cast::<Line>();
        Shard { list, lines, count }
    }

    fn lines(&self) -> &[Line] {
        // SAFETY: `alloc_zeroed_lines` gave `count` lines' worth of zeroed
        // bytes aligned to 64 (`Line`'s alignment) in `list`'s arena, which
        // outlives `&self`; all-zero atomics are valid `Line`s, and they
        // are only reached as atomics.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr(), self.count) }
    }

    /// Records the user key hashed to `h` (the inserter only).
    #[inline]
    pub(super) fn note(&self, h: u64) {
        let lines = self.lines();
        let line = &lines[line_of(h, lines.len())];
        for b in local_bits(h, PROBES) {
            line.0[b / 64].fetch_or(1 << (b % 64), Ordering::Relaxed);
        }
    }

    /// False only if no key hashed to `h` was noted.
    #[inline]
    pub(super) fn may_contain(&self, h: u64) -> bool {
        let lines = self.lines();
        let line = &lines[line_of(h, lines.len())];
        local_bits(h, PROBES).all(|b| line.0[b / 64].load(Ordering::Relaxed) & (1 << (b % 64)) != 0)
    }

    /// Bytes held by the filter.
    pub(super) fn filter_bytes(&self) -> usize {
        self.count * size_of::<Line>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xxhash_rust::xxh3::xxh3_64;

    #[test]
    fn noted_keys_are_found_and_others_mostly_not() {
        let s = Shard::new(8 << 20);
        for i in 0..50_000u32 {
            s.note(xxh3_64(format!("k{i}").as_bytes()));
        }
        for i in 0..50_000u32 {
            assert!(s.may_contain(xxh3_64(format!("k{i}").as_bytes())));
        }
        let fp = (0..50_000u32)
            .filter(|i| s.may_contain(xxh3_64(format!("x{i}").as_bytes())))
            .count();
        assert!(fp < 500, "{fp} false positives in 50 000");
        // The smallest shard has one line and still answers.
        let tiny = Shard::new(1);
        tiny.note(7);
        assert!(tiny.may_contain(7));
    }
}
