//! The background CPU budget (`Options::background_cpus`): how many
//! flushes and compactions run at once, so that background work leaves a
//! core to the writers and a flush is never stuck behind compactions for
//! the CPU. On two cores with 4 KiB values, one slot makes overwrites
//! faster than two (L0 gathers more per L0→L1 compaction, so fewer
//! compaction bytes are written); it does not clearly lower the worst put
//! of the small-value loads (why: docs/design/2026-11-29-code-comment-measurements.md
//! §cpu-budget).
//!
//! A flush comes first: it waits for a free slot, and a running
//! compaction gives its slot to a waiting flush at its next give-way point
//! (every few hundred merged entries) and takes it back after the flush,
//! ahead of any compaction not yet started. A flush thus never waits for
//! a whole compaction, and a paused compaction never for another one.
//!
//! Background threads take a compaction slot only with [`try_compaction`]
//! under the state mutex, and every slot is given back under the state
//! mutex (the caller's duty), before `bg_cv` is notified: a thread that
//! found no slot and waits on `bg_cv` is then always woken. A slot that a
//! waiting flush or paused compaction will take is not offered to a new
//! compaction, and no other slot is held back for them, so a free slot
//! never sits idle while a thread sleeps.
//!
//! What the budget does not stop: a flush also waits while the compaction
//! finishes an output table (its last block, index, filter and `fsync`)
//! or opens its inputs, since give-way points sit in the merge loop only;
//! a pipelined compaction's read and write threads run on until their
//! channels fill (a few 256 KiB chunks) while its merge thread is paused;
//! under a steady backlog of memtables a compaction gets a few hundred
//! entries per flush, until L0's stop trigger stops the writers and the
//! compactions catch up. A plan that waits on a compaction worker process
//! (`offload`) runs outside the budget.
//!
//! [`try_compaction`]: CpuBudget::try_compaction

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Slots for background jobs.
pub(crate) struct CpuBudget {
    slots: Mutex<Slots>,
    /// Signalled when a slot is given back.
    freed: Condvar,
    /// Flushes waiting for a slot (read without the lock at give-way points).
    flushes_waiting: AtomicUsize,
}

struct Slots {
    free: usize,
    /// Compactions that gave their slot to a flush and wait to take it back.
    paused: usize,
}

/// Which job holds a slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Job {
    Flush,
    Compaction,
}

/// A slot held by one job; given back on drop.
pub(crate) struct Slot<'a> {
    budget: &'a CpuBudget,
    job: Job,
    /// Serialises give-way among the threads of one job (sub-tasks): the
    /// first gives the slot up and waits; the others wait here meanwhile.
    gate: Mutex<()>,
}

impl CpuBudget {
    /// A budget of `slots` jobs at once (at least one).
    pub fn new(slots: usize) -> Self {
        CpuBudget {
            slots: Mutex::new(Slots {
                free: slots.max(1),
                paused: 0,
            }),
            freed: Condvar::new(),
            flushes_waiting: AtomicUsize::new(0),
        }
    }

    /// The slots of `background_cpus`: 0 means one less than the cores
    /// this process may use (at least one).
    pub fn slots_for(background_cpus: usize) -> usize {
        if background_cpus > 0 {
            return background_cpus;
        }
        std::thread::available_parallelism()
            .map_or(1, |n| n.get().saturating_sub(1))
            .max(1)
    }

    /// A slot for a flush, waiting for one if none is free. Never call
    /// with the state mutex held: the compaction that must give way may
    /// need it first.
    pub fn flush(&self) -> Slot<'_> {
        let mut s = self.slots.lock();
        if s.free == 0 {
            self.flushes_waiting.fetch_add(1, Ordering::AcqRel);
            while s.free == 0 {
                self.freed.wait(&mut s);
            }
            self.flushes_waiting.fetch_sub(1, Ordering::AcqRel);
        }
        s.free -= 1;
        self.slot(Job::Flush)
    }

    /// A slot for a compaction if one is free beyond those a waiting
    /// flush or paused compaction will take.
    pub fn try_compaction(&self) -> Option<Slot<'_>> {
        let mut s = self.slots.lock();
        let waiting = s.paused + self.flushes_waiting.load(Ordering::Acquire);
        if s.free <= waiting {
            return None;
        }
        s.free -= 1;
        Some(self.slot(Job::Compaction))
    }

    fn slot(&self, job: Job) -> Slot<'_> {
        Slot {
            budget: self,
            job,
            gate: Mutex::new(()),
        }
    }

    fn give_back(&self, s: &mut Slots) {
        s.free += 1;
        self.freed.notify_all();
    }

    /// Free slots (tests).
    #[cfg(test)]
    fn free(&self) -> usize {
        self.slots.lock().free
    }
}

impl Slot<'_> {
    /// In a running compaction: if a flush waits for a slot, gives this one
    /// to it and waits to take one back (ahead of compactions not yet
    /// started). Cheap when no flush waits. Returns true if it paused.
    pub fn give_way(&self) -> bool {
        let budget = self.budget;
        if self.job != Job::Compaction || budget.flushes_waiting.load(Ordering::Acquire) == 0 {
            return false;
        }
        let _gate = self.gate.lock();
        let mut s = budget.slots.lock();
        if budget.flushes_waiting.load(Ordering::Acquire) == 0 {
            return false;
        }
        budget.give_back(&mut s);
        s.paused += 1;
        // The flush takes the slot first: wait until it has (no flush
        // waiting any more) and a slot is free again.
        while s.free == 0 || budget.flushes_waiting.load(Ordering::Acquire) > 0 {
            budget.freed.wait(&mut s);
        }
        s.paused -= 1;
        s.free -= 1;
        true
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut s = self.budget.slots.lock();
        self.budget.give_back(&mut s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    fn wait_for_a_waiting_flush(budget: &CpuBudget) {
        while budget.flushes_waiting.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
    }

    /// With one slot: a compaction holds it; a second compaction gets
    /// none; a flush waits until the compaction gives way, runs while the
    /// compaction is paused, and the compaction takes the slot back
    /// before any new compaction may start.
    #[test]
    fn a_flush_takes_the_slot_from_a_running_compaction() {
        let budget = CpuBudget::new(1);
        let compaction = budget.try_compaction().expect("a free slot");
        assert!(budget.try_compaction().is_none(), "one slot only");
        assert!(!compaction.give_way(), "no flush waits");
        let flushed = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let slot = budget.flush();
                // The compaction is paused while the flush holds the slot.
                std::thread::sleep(Duration::from_millis(20));
                flushed.store(true, Ordering::Release);
                drop(slot);
            });
            wait_for_a_waiting_flush(&budget);
            assert!(
                budget.try_compaction().is_none(),
                "a waiting flush comes before a new compaction"
            );
            assert!(compaction.give_way(), "the compaction paused for the flush");
            assert!(
                flushed.load(Ordering::Acquire),
                "the compaction resumed only after the flush"
            );
        });
        assert_eq!(budget.free(), 0, "the compaction holds the slot again");
        assert!(budget.try_compaction().is_none());
        drop(compaction);
        assert_eq!(budget.free(), 1);
        assert!(budget.try_compaction().is_some());
    }

    /// A paused compaction takes the slot back before a compaction that
    /// had not started, and the threads of one job pause together.
    #[test]
    fn a_paused_compaction_comes_before_a_new_one() {
        let budget = CpuBudget::new(1);
        let compaction = budget.try_compaction().expect("a free slot");
        let paused = std::thread::scope(|s| {
            s.spawn(|| {
                let slot = budget.flush();
                std::thread::sleep(Duration::from_millis(20));
                drop(slot);
            });
            wait_for_a_waiting_flush(&budget);
            let pausers: Vec<_> = (0..2).map(|_| s.spawn(|| compaction.give_way())).collect();
            // While it is paused (or about to be), no new compaction starts.
            for _ in 0..20 {
                assert!(budget.try_compaction().is_none());
                std::thread::sleep(Duration::from_millis(1));
            }
            pausers
                .into_iter()
                .map(|p| p.join().expect("pauser"))
                .collect::<Vec<bool>>()
        });
        assert!(paused.contains(&true), "one thread gave the slot up");
        assert_eq!(budget.free(), 0, "back with the compaction");
        drop(compaction);
        assert_eq!(budget.free(), 1);
    }

    /// With two slots, a slot a paused compaction will take is held for
    /// it, and the other one is offered to a new compaction at once.
    #[test]
    fn only_the_slots_waiters_will_take_are_held_back() {
        let budget = CpuBudget::new(2);
        let first = budget.try_compaction().expect("slot");
        let second = budget.try_compaction().expect("slot");
        let release = AtomicBool::new(false);
        std::thread::scope(|s| {
            let flush = s.spawn(|| {
                let slot = budget.flush();
                while !release.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                drop(slot);
            });
            wait_for_a_waiting_flush(&budget);
            let paused = s.spawn(|| first.give_way());
            // The flush has the first compaction's slot once none waits.
            while budget.flushes_waiting.load(Ordering::Acquire) > 0 {
                std::thread::yield_now();
            }
            drop(second);
            assert!(
                budget.try_compaction().is_none(),
                "the one free slot is the paused compaction's"
            );
            // It takes that slot back (the flush still holds the other).
            assert!(paused.join().expect("paused"), "it paused");
            release.store(true, Ordering::Release);
            flush.join().expect("flush");
            let third = budget.try_compaction();
            assert!(third.is_some(), "the other slot is free for a new one");
            assert!(budget.try_compaction().is_none());
        });
        drop(first);
        assert_eq!(budget.free(), 2);
    }

    /// More slots than jobs: nothing waits and nothing gives way.
    #[test]
    fn spare_slots_let_a_flush_run_beside_a_compaction() {
        let budget = CpuBudget::new(2);
        let compaction = budget.try_compaction().expect("slot");
        let flush = budget.flush();
        assert!(!compaction.give_way());
        assert!(budget.try_compaction().is_none(), "both slots taken");
        drop(flush);
        drop(compaction);
        assert_eq!(budget.free(), 2);
        assert_eq!(CpuBudget::slots_for(3), 3);
        assert!(CpuBudget::slots_for(0) >= 1);
    }
}
