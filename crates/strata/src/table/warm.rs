//! Warming cold tables: when point lookups and seeks on a memory-mapped
//! table keep waiting for the device (their block was not in the page
//! cache), the whole table is read into memory by a background thread
//! (`MADV_WILLNEED` queues the reads, `MADV_POPULATE_READ` waits for them
//! and maps the pages) instead of one synchronous fault per block. Maps in
//! huge pages (`Options::mmap_huge`) are not warmed: their faults read
//! 2 MiB pieces already. This is what a database that fits in memory
//! wants after a restart or after its pages were evicted: a device streams
//! a whole table far faster than it serves the same bytes as 4 KiB random
//! reads (why: docs/design/2026-11-29-code-comment-measurements.md §warming).
//!
//! A budget bounds the bytes warmed (`Options::warm_budget`; by default a
//! quarter of the memory the process may use), so a database much larger
//! than memory never has whole tables read for a few lookups. A table
//! holds its share of the budget until it is closed.

use crate::io::RandomAccessFile;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Slow block reads of one table before it is warmed: one is not enough
/// (a preempted thread looks slow too).
pub const SLOW_READS_TO_WARM: u32 = 4;

/// Shared by the tables of one database.
#[derive(Debug)]
pub struct Warmer {
    /// Bytes that may still be warmed.
    left: AtomicU64,
    /// Warm-ups requested, and the bytes of the tables warmed the first
    /// time, since open.
    tables: AtomicU64,
    bytes: AtomicU64,
    /// No table is warmed (or warmed again) while set: the live tables do
    /// not fit in the page cache (see `crate::budget`).
    paused: AtomicBool,
}

impl Warmer {
    /// A warmer that may read up to `budget` bytes of tables (0: never).
    pub fn new(budget: u64) -> Arc<Warmer> {
        Arc::new(Warmer {
            left: AtomicU64::new(budget),
            tables: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            paused: AtomicBool::new(false),
        })
    }

    /// Stops (`true`) or resumes warming: a table read whole into a page
    /// cache too small for the live tables only evicts what other reads
    /// need.
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// True while warming is paused.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// Takes `bytes` from the budget; false (and nothing taken) when less
    /// is left.
    pub fn reserve(&self, bytes: u64) -> bool {
        let taken = self
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(bytes)
            })
            .is_ok();
        if taken {
            self.tables.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        taken
    }

    /// Counts a warmed table warmed again (its reservation stands).
    pub fn rewarmed(&self) {
        self.tables.fetch_add(1, Ordering::Relaxed);
    }

    /// Gives back what a closed table had reserved.
    pub fn release(&self, bytes: u64) {
        self.left.fetch_add(bytes, Ordering::AcqRel);
    }

    /// Bytes of the budget not reserved.
    pub fn left(&self) -> u64 {
        self.left.load(Ordering::Acquire)
    }

    /// Warm-ups requested so far, and the bytes first reserved.
    pub fn warmed(&self) -> (u64, u64) {
        (
            self.tables.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// Bytes asked for per request. Linux serves a `WILLNEED` of at most
/// the device's read-ahead window (`read_ahead_kb`, 128 KiB by default)
/// or its largest request, whichever is larger, and drops the rest: a
/// table is asked for in pieces no larger than the default window.
const WARM_CHUNK: u64 = 128 << 10;

/// Calls `f(offset, len)` for `[from, from + len)` in [`WARM_CHUNK`] pieces.
fn in_pieces(from: u64, len: u64, mut f: impl FnMut(u64, u64)) {
    let end = from.saturating_add(len);
    let mut at = from;
    while at < end {
        let n = WARM_CHUNK.min(end - at);
        f(at, n);
        at += n;
    }
}

/// Asks the OS to read `len` bytes of `file` from `from` into the page
/// cache, in [`WARM_CHUNK`] pieces; returns once every read is queued.
pub fn read_ahead(file: &dyn RandomAccessFile, from: u64, len: u64) {
    in_pieces(from, len, |at, n| file.prefetch(at, n));
}

/// Reads queued ahead of the piece a warming thread waits for. Queuing a
/// whole table at once (tens of MiB) puts every foreground read behind it
/// at the device (why: docs/design/2026-11-29-code-comment-measurements.md
/// §warming). With 2 MiB queued, a foreground read waits behind at most
/// that, and the queue stays deep enough to stream.
const WARM_AHEAD: u64 = 2 << 20;

/// Reads `len` bytes of `file` from `from` into memory and maps them (a
/// warming thread): reads are queued [`WARM_AHEAD`] ahead of the
/// [`WARM_CHUNK`] piece being waited for and mapped.
pub fn populate(file: &dyn RandomAccessFile, from: u64, len: u64) {
    let end = from.saturating_add(len);
    let mut queued = from;
    in_pieces(from, len, |at, n| {
        let want = at.saturating_add(n).saturating_add(WARM_AHEAD).min(end);
        if queued < want {
            read_ahead(file, queued, want - queued);
            queued = want;
        }
        file.populate(at, n);
    });
}

/// The warming state of one mapped table: its slow reads, and whether it
/// holds a share of the [`Warmer`]'s budget (given back when it closes).
#[derive(Debug)]
pub struct TableWarmth {
    warmer: Arc<Warmer>,
    /// The table file's size: its share of the budget.
    len: u64,
    /// Block reads from the map that waited for the device.
    slow_reads: AtomicU32,
    /// The table's size is reserved from the budget.
    warmed: AtomicBool,
    /// [`ticks`] when the table was last handed to the OS.
    last_warm: AtomicU64,
}

impl TableWarmth {
    /// A table of `len` bytes that `warmer` may warm.
    pub fn new(warmer: Arc<Warmer>, len: u64) -> Self {
        TableWarmth {
            warmer,
            len,
            slow_reads: AtomicU32::new(0),
            warmed: AtomicBool::new(false),
            last_warm: AtomicU64::new(0),
        }
    }

    /// True once the table was handed to the OS (and holds its share).
    pub fn warmed(&self) -> bool {
        self.warmed.load(Ordering::Relaxed)
    }

    /// Counts a block read of `file` that waited for the device; every
    /// [`SLOW_READS_TO_WARM`]th asks the OS, from a short-lived thread, to
    /// read the whole file in the background, if the budget has room for
    /// it (the first time) and the last request is at least
    /// [`WARM_INTERVAL_TICKS`] old (the pages may have been evicted since).
    pub fn note_slow_read(&self, file: &Arc<dyn RandomAccessFile>) {
        let n = self.slow_reads.fetch_add(1, Ordering::Relaxed) + 1;
        if !n.is_multiple_of(SLOW_READS_TO_WARM) || self.warmer.paused() {
            return;
        }
        let now = ticks();
        if self.warmed.load(Ordering::Acquire) {
            let last = self.last_warm.load(Ordering::Relaxed);
            if now.wrapping_sub(last) < WARM_INTERVAL_TICKS
                || self
                    .last_warm
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                return;
            }
            self.warmer.rewarmed();
        } else {
            // Claim the first warm-up before reserving, so that two readers
            // crossing the threshold together reserve the table once.
            if self
                .warmed
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return;
            }
            if !self.warmer.reserve(self.len) {
                self.warmed.store(false, Ordering::Release);
                return;
            }
            self.last_warm.store(now, Ordering::Relaxed);
        }
        let file = Arc::clone(file);
        let len = self.len;
        // Reading a large cold table takes tens of milliseconds: not on a
        // reader's path.
        // A failed spawn only leaves the table cold.
        let _ = crate::sched::spawn("strata-warm", move || populate(file.as_ref(), 0, len));
    }
}

impl Drop for TableWarmth {
    fn drop(&mut self) {
        if *self.warmed.get_mut() {
            self.warmer.release(self.len);
        }
    }
}

/// The default budget: a quarter of the memory this process may use (the
/// machine's, or its cgroup's limit when lower).
pub fn default_budget() -> u64 {
    crate::io::memory_limit().map_or(0, |m| m / 4)
}

/// A cycle-counter tick, for telling a device read from a cached page on
/// the lookup path at a few nanoseconds per reading.
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions; it only reads the counter.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        let start = START.get_or_init(std::time::Instant::now);
        u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Ticks before a table already warmed may be warmed again (about a
/// second): its pages may have been evicted, but a request still being
/// served must not be repeated.
#[cfg(target_arch = "x86_64")]
pub const WARM_INTERVAL_TICKS: u64 = 3_000_000_000;
#[cfg(not(target_arch = "x86_64"))]
pub const WARM_INTERVAL_TICKS: u64 = 1_000_000_000;

/// Ticks of a block access that waited for the device: about 20 µs at
/// 3 GHz, well above a cached page (even with a minor fault) and below a
/// read from the device (why: docs/design/2026-11-29-code-comment-measurements.md
/// §warming).
#[cfg(target_arch = "x86_64")]
pub const SLOW_TICKS: u64 = 60_000;
/// Elsewhere [`ticks`] counts nanoseconds.
#[cfg(not(target_arch = "x86_64"))]
pub const SLOW_TICKS: u64 = 20_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_reserved_and_given_back() {
        let w = Warmer::new(100);
        assert!(w.reserve(60));
        assert!(!w.reserve(60), "only 40 left");
        assert_eq!(w.left(), 40);
        assert!(w.reserve(40));
        assert_eq!(w.warmed(), (2, 100));
        w.release(60);
        assert_eq!(w.left(), 60);
        assert!(!Warmer::new(0).reserve(1), "a zero budget warms nothing");
    }

    #[test]
    fn the_default_budget_is_a_quarter_of_the_memory_limit() {
        let m = crate::io::memory_limit().unwrap_or(0);
        assert_eq!(default_budget(), m / 4);
    }

    #[test]
    fn ticks_advance() {
        let a = ticks();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(ticks() > a);
    }
}
