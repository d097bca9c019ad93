//! Writer admission without the state mutex: the flags a write leader and
//! the background threads read to learn whether anything holds writes
//! back, the pacer, and the CPU budget of flushes and compactions. The
//! flags are set together from the state each super-version publishes
//! ([`Admission::publish`]) and closed together on a background error or
//! at close ([`Admission::end_fast_paths`]); the slow paths (slow down,
//! stop) take the state mutex (`write.rs`, `make_room`).

use crate::l0::Pressure;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sched::{CpuBudget, Pacer, Slowdown};
use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What holds writers back, derived once per super-version from its state
/// ([`Hold::of`]): the fast path's flags and `make_room` read the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Hold {
    /// Every memtable slot is taken: writers pace against the oldest
    /// flush, and a full memtable waits for a slot.
    pub behind: bool,
    /// Level 0 asks writers to slow down, or the compaction debt reached
    /// `soft_pending_compaction_bytes_limit`: write groups are admitted at
    /// the slowdown's rate (`sched::Slowdown`).
    pub slow: bool,
    /// Level 0 asks writers to stop, or the debt reached
    /// `hard_pending_compaction_bytes_limit`: a full memtable waits.
    pub stop: bool,
}

impl Hold {
    /// The hold for level 0's `l0` pressure, compaction `debt` and
    /// `behind` (every memtable slot taken) under `opts`' limits.
    pub fn of(l0: Pressure, debt: u64, behind: bool, opts: &Options) -> Hold {
        Hold {
            behind,
            slow: l0.slow || debt >= opts.soft_pending_compaction_bytes_limit,
            stop: l0.stop || debt >= opts.hard_pending_compaction_bytes_limit,
        }
    }
}

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
    /// Holds writers to the rate compactions drain level 0 while `Hold::slow`
    /// (`sched::slowdown`); taken last, for a few microseconds, by a slowed
    /// write leader and a compaction out of level 0 as it ends.
    pub slowdown: Mutex<Slowdown>,
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
            slowdown: Mutex::new(Slowdown::new()),
            cpu: CpuBudget::new(CpuBudget::slots_for(background_cpus)),
        }
    }

    /// Sets the flags for a new super-version's state: its `hold`,
    /// whether the database is `usable` (no background error, not
    /// closing), and `oldest`, the oldest immutable memtable. Called
    /// under the state mutex.
    pub fn publish(&self, hold: Hold, usable: bool, oldest: Option<&Arc<MemTable>>) {
        let (behind, unhindered) = (hold.behind, usable && !hold.slow && !hold.stop);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_slows_at_the_soft_limit_and_stops_at_the_hard_one() {
        let opts = Options::default()
            .soft_pending_compaction_bytes_limit(100)
            .hard_pending_compaction_bytes_limit(200);
        let calm = Pressure::default();
        assert_eq!(Hold::of(calm, 99, false, &opts), Hold::default());
        let soft = Hold::of(calm, 100, false, &opts);
        assert!(soft.slow && !soft.stop);
        let hard = Hold::of(calm, 200, true, &opts);
        assert!(hard.slow && hard.stop && hard.behind);
        let l0 = Hold::of(
            Pressure {
                slow: false,
                stop: true,
            },
            0,
            false,
            &opts,
        );
        assert!(l0.stop && !l0.slow);
    }

    #[test]
    fn only_an_unhindered_usable_state_opens_the_fast_paths() {
        let a = Admission::new(0);
        let mem = Arc::new(MemTable::new(1, 4 << 10, 1));
        a.publish(Hold::default(), true, None);
        assert!(a.calm.load(Ordering::Acquire) && a.yielding.load(Ordering::Relaxed));
        assert!(a.paced.load().is_none());
        let behind = Hold {
            behind: true,
            ..Hold::default()
        };
        a.publish(behind, true, Some(&mem));
        assert!(!a.calm.load(Ordering::Acquire) && a.paced.load().is_some());
        let slow = Hold {
            behind: true,
            slow: true,
            stop: false,
        };
        a.publish(slow, true, Some(&mem));
        assert!(!a.calm.load(Ordering::Acquire) && !a.yielding.load(Ordering::Relaxed));
        assert!(a.paced.load().is_none());
        a.publish(Hold::default(), false, None);
        assert!(!a.calm.load(Ordering::Acquire));
        a.publish(Hold::default(), true, None);
        a.end_fast_paths();
        assert!(!a.calm.load(Ordering::Acquire) && !a.yielding.load(Ordering::Relaxed));
    }
}
