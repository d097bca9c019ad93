//! Writer admission without the state mutex: the flags a write leader and
//! the background threads read to learn whether anything holds writes
//! back, the pacer, and the CPU budget of flushes and compactions. The
//! flags are set together from the state each super-version publishes
//! ([`Admission::publish`]) and closed together on a background error or
//! at close ([`Admission::end_fast_paths`]); the slow paths (slow down,
//! stop) take the state mutex (`write.rs`, `make_room`).

use crate::memtable::MemTable;
use crate::sched::{CpuBudget, Pacer};
use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// See the module doc.
pub(crate) struct Admission {
    /// True while nothing may hold a write back: a free memtable slot, no
    /// L0 slowdown or stop, compaction debt under the soft limit, no
    /// background error, not closing. A write leader that reads it true
    /// and whose memtable has room goes ahead without the state mutex.
    pub calm: AtomicBool,
    /// True while the background threads may offer their core to other
    /// threads (`sched::yield_point`): no L0 slowdown or stop, compaction
    /// debt under the soft limit, no background error, not closing.
    pub yielding: Arc<AtomicBool>,
    /// The oldest immutable memtable while pacing is the only thing that
    /// holds writes back (every memtable slot taken, nothing else of
    /// `calm` missing); `None` otherwise. A write leader whose memtable
    /// has room paces against it without the state mutex. A leader that
    /// meets the state mutex held by a background thread (at a switch, or
    /// as a flush starts or ends) spins, yields its CPU to that thread, and
    /// may get it back only at the next scheduler tick (why:
    /// docs/design/2026-11-29-code-comment-measurements.md §paced).
    pub paced: ArcSwapOption<MemTable>,
    /// Slows writers while a flush must finish before the next switch
    /// (`sched::pacing`); taken last, for a few microseconds, by the write
    /// leader and the flush.
    pub pacer: Mutex<Pacer>,
    /// How many flushes and compactions run at once
    /// (`Options::background_cpus`, `sched::cpu`).
    pub cpu: CpuBudget,
}

impl Admission {
    /// Closed fast paths (the first super-version opens them) and a CPU
    /// budget for `background_cpus`.
    pub fn new(background_cpus: usize) -> Self {
        Admission {
            calm: AtomicBool::new(false),
            yielding: Arc::new(AtomicBool::new(false)),
            paced: ArcSwapOption::empty(),
            pacer: Mutex::new(Pacer::new()),
            cpu: CpuBudget::new(CpuBudget::slots_for(background_cpus)),
        }
    }

    /// Sets the flags for a new super-version's state: `behind`, every
    /// memtable slot is taken; `unhindered`, nothing else holds writes
    /// back; `oldest`, the oldest immutable memtable. Called under the
    /// state mutex.
    pub fn publish(&self, behind: bool, unhindered: bool, oldest: Option<&Arc<MemTable>>) {
        self.paced
            .store(oldest.filter(|_| behind && unhindered).cloned());
        self.calm.store(!behind && unhindered, Ordering::Release);
        self.yielding.store(unhindered, Ordering::Relaxed);
    }

    /// Closes the paths that skip the state mutex (a background error, or
    /// closing): writers see `calm` false and take the mutex, none paces
    /// against a memtable, and background threads keep their core.
    pub fn end_fast_paths(&self) {
        self.calm.store(false, Ordering::Release);
        self.yielding.store(false, Ordering::Relaxed);
        self.paced.store(None);
    }
}
