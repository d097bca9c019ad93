//! Yield points: a background thread (a flush, a compaction, a purge)
//! offers its core to waiting threads every [`YIELD_EVERY`] of computing,
//! while its database's gate allows it.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a background thread computes between two offers of its core
/// ([`yield_point`]).
pub(crate) const YIELD_EVERY: Duration = Duration::from_micros(200);

/// A background thread's offers of its core: when it last made one, and
/// the database's flag saying whether it may (`Inner::admission.yielding`).
struct Yielding {
    last: Instant,
    gate: Arc<AtomicBool>,
}

thread_local! {
    /// Set in flush and compaction threads ([`enter_background`]).
    static YIELDING: RefCell<Option<Yielding>> = const { RefCell::new(None) };
}

/// Makes this thread a background thread whose [`yield_point`]s offer its
/// core to other threads while `gate` is true.
pub(crate) fn enter_background(gate: Arc<AtomicBool>) {
    let _ = YIELDING.try_with(|y| {
        *y.borrow_mut() = Some(Yielding {
            last: Instant::now(),
            gate,
        })
    });
}

/// This thread's gate, for the threads it starts (executors' workers).
pub(crate) fn background_gate() -> Option<Arc<AtomicBool>> {
    YIELDING
        .try_with(|y| y.borrow().as_ref().map(|y| y.gate.clone()))
        .ok()
        .flatten()
}

/// Called by flushes and compactions as they compute (every data block
/// written, every few hundred entries merged): in a background thread,
/// once [`YIELD_EVERY`] has passed since the last offer and while its
/// database allows it, gives the core to any thread waiting for it
/// (`sched_yield(2)`; it returns at once when none is). Elsewhere
/// (`compact_range` in the caller's thread, tests) it does nothing.
///
/// Why: a writer that a timer tick or a short sleep (a page fault that
/// met the address-space lock) left queued behind a background thread on
/// its core waits for the next tick (4 ms at HZ=250), even at the
/// background threads' lower priority: the scheduler lets a task that has
/// just been given the core keep it for a minimum slice, checked at ticks
/// (traced: docs/design/2026-11-29-code-comment-measurements.md §yield-point). A background
/// thread that offers its core every 200 µs bounds that wait; with
/// nobody waiting an offer costs one system call. The database closes the
/// gate while the background work holds writers back (L0's slowdown or
/// stop, compaction debt over the soft limit): then the work is what the
/// writers wait for and keeps its core.
///
/// `try_with`: a map dropped by another thread-local's destructor at
/// thread exit (a `Db` kept in a user's `thread_local!`) may get here
/// after this one is gone; it then does nothing.
#[inline]
pub(crate) fn yield_point() {
    let _ = YIELDING.try_with(|y| {
        let mut y = y.borrow_mut();
        let Some(y) = y.as_mut() else { return };
        let now = Instant::now();
        if now.duration_since(y.last) < YIELD_EVERY {
            return;
        }
        if y.gate.load(Ordering::Relaxed) {
            std::thread::yield_now();
            y.last = Instant::now();
        } else {
            y.last = now;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A background thread's gate reaches the threads it hands it to; a
    /// thread that never entered the background has none, and its yield
    /// points do nothing.
    #[test]
    fn the_background_gate_is_per_thread() {
        assert!(background_gate().is_none());
        yield_point();
        let gate = Arc::new(AtomicBool::new(true));
        let g = gate.clone();
        std::thread::spawn(move || {
            enter_background(g);
            let mine = background_gate().expect("a gate");
            std::thread::sleep(YIELD_EVERY);
            yield_point();
            mine.store(false, Ordering::Relaxed);
            std::thread::spawn(|| assert!(background_gate().is_none()))
                .join()
                .expect("join");
        })
        .join()
        .expect("join");
        assert!(!gate.load(Ordering::Relaxed));
    }
}
