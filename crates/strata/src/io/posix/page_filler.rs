//! The page filler: one thread per process, while mapped logs exist, that
//! makes pages of those logs present and writable ahead of their appends
//! (`PosixLog::fill_ahead`, `log::FILL_STEP`). Started by the first log made
//! and joined when the last one is dropped; without it (no thread to be
//! had, or a kernel before 5.14 that refuses `MADV_POPULATE_WRITE`) the
//! pages fault as the appends reach them, as before.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

/// A piece of a log's window: (map, offset in it, bytes).
type Job = (Arc<memmap2::MmapRaw>, usize, usize);

/// Requests waiting at most; more are refused (the pages then fault).
const QUEUE: usize = 4;

/// The filler thread, shared by every mapped log of the process while
/// one exists: each log holds an `Arc` of it, and the last log dropped
/// stops and joins the thread (no thread outlives the databases, and
/// a program that closes them leaves none running at exit).
pub(super) struct Filler {
    tx: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<()>>,
}

/// The running filler, if any log holds it.
static CURRENT: Mutex<Weak<Filler>> = Mutex::new(Weak::new());

/// Set once the kernel refused the advice: no more requests.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// The filler for a new log: the running one, or a new thread; `None`
/// when the kernel refused the advice or no thread was to be had.
pub(super) fn filler() -> Option<Arc<Filler>> {
    if REFUSED.load(Ordering::Relaxed) {
        return None;
    }
    let mut current = CURRENT.lock();
    if let Some(f) = current.upgrade() {
        return Some(f);
    }
    let f = Arc::new(spawn()?);
    *current = Arc::downgrade(&f);
    Some(f)
}

/// Starts a filler thread.
fn spawn() -> Option<Filler> {
    // `std`'s channel, not crossbeam's: a send from a thread the
    // program did not start in Rust (a C caller's) must not make that
    // thread a `std::thread::Thread` handle, which nothing would free
    // (valgrind in the C examples' tests).
    let (tx, rx) = sync_channel::<Job>(QUEUE);
    // The lowest priority of the normal policy, nice 19 (why:
    // docs/design/2026-11-29-code-comment-measurements.md
    // §wal-page-filler):
    // - at nice 0 or 7 a woken filler is placed on the
    //   writer's CPU whenever the other runs a flush, and at
    //   the next tick takes it for a whole fill;
    // - `SCHED_IDLE` runs it only on an idle CPU, so when it
    //   is preempted inside a populate call, holding the
    //   `mmap_lock` for reading, it may wait long for a CPU;
    //   a thread that maps (the memtable chunk filler's
    //   `mprotect`) queues for the lock behind it, and the
    //   writer's next page fault behind that;
    // - nice 19 keeps a share of a CPU, so a preempted filler
    //   gets back to release the lock within the scheduler's
    //   latency.
    let thread = crate::sched::spawn_background("strata-walfill", 19, None, move || {
        for (map, at, n) in rx {
            fill(&map, at, n);
        }
    })
    .ok()?;
    Some(Filler {
        tx: Some(tx),
        thread: Some(thread),
    })
}

impl Filler {
    /// Queues `[at, at + n)` of `map` for filling; false when the
    /// filler is busy or refused by the kernel.
    pub(super) fn request(&self, map: &Arc<memmap2::MmapRaw>, at: usize, n: usize) -> bool {
        !REFUSED.load(Ordering::Relaxed)
            && self
                .tx
                .as_ref()
                .is_some_and(|tx| tx.try_send((Arc::clone(map), at, n)).is_ok())
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop once the pieces
        // queued (at most `QUEUE`, each under a millisecond) are done.
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bytes filled per call. The call holds the process's `mmap_lock`
/// for reading; a thread that maps or unmaps (a table, a memtable
/// chunk) waits for it, and page faults that need the lock then queue
/// behind that thread.
///
/// After each call the filler offers its core (`sched_yield(2)`,
/// which returns at once when no other thread waits for it). Woken
/// onto the core of a writer that never sleeps (the other core busy
/// with a flush, or with another process), the filler, at nice 19,
/// waits there until a scheduler tick (4 ms at HZ=250) gives it the
/// core; kept for a whole `log::FILL_STEP`, the core is then lost
/// to the writer for all of it. Yielding after each piece, a writer
/// waits for about one piece (why:
/// docs/design/2026-11-29-code-comment-measurements.md §wal-page-filler).
#[cfg(target_os = "linux")]
const PIECE: usize = 32 << 10;

#[cfg(target_os = "linux")]
fn fill(map: &memmap2::MmapRaw, at: usize, n: usize) {
    // Pages past the end of the file (a log cut back when dropped)
    // return an error, not a SIGBUS; only a refusal of the advice
    // itself stops the filler.
    let end = at + n;
    let mut from = at;
    while from < end {
        let piece = (end - from).min(PIECE);
        if let Err(e) = map.advise_range(memmap2::Advice::PopulateWrite, from, piece) {
            if e.raw_os_error() == Some(libc::EINVAL) {
                REFUSED.store(true, Ordering::Relaxed);
            }
            return;
        }
        from += piece;
        std::thread::yield_now();
    }
}

#[cfg(not(target_os = "linux"))]
fn fill(_map: &memmap2::MmapRaw, _at: usize, _n: usize) {
    REFUSED.store(true, Ordering::Relaxed);
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Pages of `[0, len)` of `map` in the page cache (`mincore(2)`).
    fn resident(map: &memmap2::MmapRaw, len: usize) -> usize {
        let mut vec = vec![0u8; len.div_ceil(4096)];
        // SAFETY: the map starts on a page boundary and covers `len`
        // bytes; `vec` has one byte per page of them for the call to
        // fill.
        let rc = unsafe { libc::mincore(map.as_mut_ptr().cast(), len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// A new log in `dir` with `len` bytes reserved (unwritten), its
    /// file, and a map of those bytes.
    fn reserved_log(
        dir: &std::path::Path,
        len: usize,
    ) -> (std::fs::File, super::super::PosixLog, Arc<memmap2::MmapRaw>) {
        let path = dir.join("log");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("create");
        let mut log = super::super::PosixLog::new(&path, file.try_clone().expect("dup"));
        log.reserve(len as u64).expect("reserve");
        let map = memmap2::MmapOptions::new()
            .len(len)
            .map_raw(&file)
            .expect("map");
        (file, log, Arc::new(map))
    }

    /// A filled range of a log's reserved, never written blocks is
    /// resident afterwards (what the appends then find without a
    /// fault). On a file cut back below the range meanwhile (a log
    /// dropped while its last pieces were queued) the fill stops
    /// without a SIGBUS, does not count as a refusal, and leaves the
    /// file's length as it was.
    #[test]
    fn filled_pages_are_resident_and_a_cut_file_stops_the_fill() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (file, log, map) = reserved_log(dir.path(), 2 << 20);
        assert_eq!(resident(&map, 1 << 20), 0);
        fill(&map, 0, 1 << 20);
        let supported = super::super::kernel_version().is_some_and(|v| v >= (5, 14));
        if supported {
            assert_eq!(resident(&map, 1 << 20), 256);
            assert!(!REFUSED.load(Ordering::Relaxed));
        } else {
            assert!(REFUSED.load(Ordering::Relaxed));
        }
        file.set_len(4096).expect("cut");
        fill(&map, 0, 2 << 20);
        assert_eq!(file.metadata().expect("meta").len(), 4096);
        assert_eq!(REFUSED.load(Ordering::Relaxed), !supported);
        drop(log);
    }

    /// A filler dropped with pieces queued fills them, then its thread
    /// ends and is joined: after the drop the pages are resident.
    #[test]
    fn a_dropped_filler_fills_its_queue_and_joins() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (_file, log, map) = reserved_log(dir.path(), 1 << 20);
        let supported = super::super::kernel_version().is_some_and(|v| v >= (5, 14));
        let f = spawn().expect("a thread");
        let queued = [
            f.request(&map, 0, 512 << 10),
            f.request(&map, 512 << 10, 512 << 10),
        ];
        drop(f);
        if supported {
            assert_eq!(queued, [true, true]);
            assert_eq!(resident(&map, 1 << 20), 256);
        }
        // The thread dropped its copies of the map: this is the last.
        assert_eq!(Arc::strong_count(&map), 1);
        drop(log);
    }
}
