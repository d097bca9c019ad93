//! What a scan asks the OS to read ahead of it, and the buffer of a
//! sequential pass.

use super::format::BlockHandle;
use std::sync::atomic::AtomicU64;

/// Bytes read at once by a sequential iterator.
pub(super) const READAHEAD_BYTES: usize = 1 << 20;

/// The largest piece a user scan over a table read with `pread` reads at
/// once ([`Readahead::scan`]): one system call per 64 blocks of 4 KiB
/// instead of one per block, and a quarter of a compaction input's
/// buffer, since a scan holds one per level.
pub(super) const SCAN_PIECE: usize = 256 << 10;
/// A user scan's first piece; each next one doubles up to [`SCAN_PIECE`],
/// so that a short scan (YCSB-E's, up to 100 entries) reads little past
/// its end.
pub(super) const SCAN_FIRST_PIECE: usize = 32 << 10;

/// The buffer of a sequential iterator: file bytes from `offset`, read
/// `piece` bytes at a time, the piece doubling after each read up to
/// `max_piece`; no read reaches past `end`, except one that takes in a
/// whole block starting before it or at it.
pub(super) struct Readahead {
    pub(super) offset: u64,
    pub(super) buf: Vec<u8>,
    pub(super) piece: usize,
    pub(super) max_piece: usize,
    pub(super) end: u64,
}

impl Default for Readahead {
    /// A compaction input's buffer: [`READAHEAD_BYTES`] at a time.
    fn default() -> Self {
        Readahead {
            offset: 0,
            buf: Vec::new(),
            piece: READAHEAD_BYTES,
            max_piece: READAHEAD_BYTES,
            end: u64::MAX,
        }
    }
}

impl Readahead {
    /// A user scan's buffer: [`SCAN_FIRST_PIECE`] first, doubling up to
    /// [`SCAN_PIECE`], reading nothing past `end` (see [`Readahead`]).
    pub(super) fn scan(end: u64) -> Self {
        Readahead {
            piece: SCAN_FIRST_PIECE,
            max_piece: SCAN_PIECE,
            end,
            ..Readahead::default()
        }
    }

    /// The piece to read now; the next one doubles, up to `max_piece`.
    pub(super) fn next_piece(&mut self) -> usize {
        let now = self.piece;
        self.piece = (self.piece * 2).min(self.max_piece);
        now
    }
}

/// The first prefetch window of a forward scan, once it has moved on to
/// the next block [`PREFETCH_AFTER`] times; it doubles up to
/// [`PREFETCH_MAX`] (a sequential iterator starts at the maximum).
const PREFETCH_MIN: u64 = 16 << 10;
const PREFETCH_MAX: u64 = 2 << 20;
/// Moves to the adjacent block before a scan asks for a window: a seek
/// that reads a few entries and stops (db_bench's seekrandom reads ten,
/// three 4 KiB blocks of 1 KiB values) asks for nothing it would leave
/// unread (why: docs/design/2026-11-29-code-comment-measurements.md
/// §prefetch-after).
pub(super) const PREFETCH_AFTER: u32 = 3;

/// What a scan asks for before it first touches a block of a mapped
/// table in a piece no scan has asked for: without it the touch faults
/// and the kernel reads up to `read_ahead_kb` around the page while the
/// scan waits, far longer than one 128 KiB read. The reads are queued in
/// 128 KiB pieces, the touched one first, so the touch waits for one piece
/// while the rest streams; the scan then reads on from the window. 1 MiB
/// rather than 256 KiB or nothing: the fastest cold scan of the three,
/// with its slowest call well under the read-around's (why:
/// docs/design/2026-11-29-code-comment-measurements.md §first-ask).
pub(crate) const FIRST_ASK: u64 = 1 << 20;

/// The unit in which a table remembers what scans asked for.
pub(super) const ASK_PIECE: u64 = 256 << 10;

/// What a forward scan has asked the OS to read ahead of it: with
/// `MADV_RANDOM` on a table's map (see `Options::mmap_random`) a page
/// fault reads one page, without it the fault's read-around is read while
/// the scan waits, and a table read with pread is advised random (the
/// table cache does, once the tables outgrow the page cache); a scan tells
/// the OS what comes next.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Prefetch {
    /// End of the last data block loaded.
    last_end: u64,
    /// Adjacent blocks loaded in a row.
    pub(super) run: u32,
    window: u64,
    /// Offset up to which reads were requested.
    until: u64,
}

impl Prefetch {
    /// True when the block at `h` is the next one after the last loaded,
    /// or that one again.
    pub(super) fn continues(&self, h: BlockHandle) -> bool {
        // `last_end` 0: nothing loaded yet.
        self.last_end != 0 && (follows(self.last_end, h) || block_end(h) == self.last_end)
    }

    /// A run that asked for `[h.offset, until)` before loading the block
    /// at `h`: the block counts as the run's first, and the window grows
    /// from there.
    pub(super) fn start(h: BlockHandle, until: u64) -> Self {
        Prefetch {
            last_end: h.offset,
            run: 0,
            window: until.saturating_sub(h.offset),
            until,
        }
    }

    /// Notes the load of the block at `h` (`sequential`: a compaction
    /// input, which asks for the largest window at once); the range to ask
    /// the OS for now, if any, within `limit`.
    pub(super) fn advance(
        &mut self,
        h: BlockHandle,
        sequential: bool,
        limit: u64,
    ) -> Option<(u64, u64)> {
        let end = block_end(h);
        if follows(self.last_end, h) {
            self.run += 1;
        } else if end != self.last_end {
            // Not the next block, nor the last one again (a scan resuming
            // where another stopped): a new run.
            self.run = 0;
            self.window = 0;
            self.until = 0;
        }
        self.last_end = end;
        if !sequential && self.run < PREFETCH_AFTER {
            return None;
        }
        if end.saturating_add(self.window / 2) < self.until {
            return None;
        }
        let window = if sequential {
            PREFETCH_MAX
        } else {
            (self.window * 2).clamp(PREFETCH_MIN, PREFETCH_MAX)
        };
        let from = self.until.max(end);
        let to = end.saturating_add(window).min(limit);
        if to <= from {
            // Nothing left below `limit`: the window grows only with asks.
            return None;
        }
        self.window = window.min(to - end);
        self.until = to;
        Some((from, to - from))
    }
}

/// The word of `bits` holding bit `i`, and the bit's mask (`None` past
/// the end).
pub(super) fn bit_of(bits: &[AtomicU64], i: u64) -> Option<(&AtomicU64, u64)> {
    let word = bits.get(usize::try_from(i / 64).ok()?)?;
    Some((word, 1 << (i % 64)))
}

/// The end of the block at `h` with its trailer (handles reaching here
/// were checked against the file).
pub(super) fn block_end(h: BlockHandle) -> u64 {
    h.end_with_trailer().unwrap_or(u64::MAX)
}

/// True when the block at `h` is the one after a block that ended at
/// `end`: it starts there, or after the padding of an aligned table
/// (less than a page, `builder::ALIGN_PAGE`).
pub(super) fn follows(end: u64, h: BlockHandle) -> bool {
    h.offset >= end && h.offset - end < super::builder::ALIGN_PAGE as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::format::BLOCK_TRAILER_LEN;

    fn block(i: u64) -> BlockHandle {
        // 4 KiB blocks, each followed by its trailer.
        BlockHandle {
            offset: i * (4096 + BLOCK_TRAILER_LEN as u64),
            size: 4096,
        }
    }

    /// A window held back by the limit does not grow meanwhile: once the
    /// limit lifts, the next ask is at most twice the last one.
    #[test]
    fn a_window_grows_only_with_what_was_asked() {
        let mut p = Prefetch::default();
        let last = u64::from(PREFETCH_AFTER) - 1;
        for i in 0..last {
            assert_eq!(p.advance(block(i), false, 1 << 30), None);
        }
        // The limit lets the first ask reach two blocks ahead only.
        let limit = block(last + 3).offset;
        let (_, first) = p.advance(block(last), false, limit).expect("an ask");
        assert!(first < PREFETCH_MIN, "{first}");
        for i in last + 1..last + 40 {
            assert_eq!(p.advance(block(i), false, limit), None, "block {i}");
        }
        let (_, next) = p
            .advance(block(last + 40), false, 1 << 30)
            .expect("the limit lifted");
        assert!(next <= 2 * PREFETCH_MIN, "{next} after {first}");
    }

    #[test]
    fn a_scan_resuming_where_one_stopped_keeps_growing_its_window() {
        let limit = 1 << 30;
        let mut p = Prefetch::default();
        // Block 0 starts where the (empty) state ends: the run is counted
        // from it, and the first window is asked for at its
        // `PREFETCH_AFTER`-th block.
        let last = u64::from(PREFETCH_AFTER) - 1;
        for i in 0..last {
            assert_eq!(p.advance(block(i), false, limit), None, "block {i}");
        }
        let (from, first) = p
            .advance(block(last), false, limit)
            .expect("adjacent blocks");
        assert_eq!(from, block(last + 1).offset);
        assert_eq!(first, PREFETCH_MIN);
        // A new cursor re-reads the block the last one stopped in, then
        // goes on: the run continues and the window doubles.
        let mut asked = vec![first];
        for i in last..=12 {
            if let Some((_, n)) = p.advance(block(i), false, limit) {
                asked.push(n);
            }
        }
        assert!(asked.len() >= 2 && asked[1] > first, "{asked:?}");
        assert!(p.continues(block(12)) && p.continues(block(13)));
        assert!(!p.continues(block(14)) && !p.continues(block(11)));
        // A jump elsewhere starts over.
        assert_eq!(p.advance(block(500), false, limit), None);
        assert_eq!((p.run, p.window, p.until), (0, 0, 0));
        // A compaction input asks for the largest window at once, within
        // the table.
        let mut q = Prefetch::default();
        let (from, n) = q.advance(block(0), true, limit).expect("sequential");
        assert_eq!((from, n), (block(1).offset, PREFETCH_MAX));
        let mut r = Prefetch::default();
        let (_, n) = r.advance(block(0), true, 10_000).expect("sequential");
        assert_eq!(n, 10_000 - block(1).offset);
    }
}
