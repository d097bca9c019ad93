//! Running compaction plans: mark their levels and tables busy, execute
//! outside the state mutex, log the edit, tell the stale tracker, install
//! the new super-version, and account. Also `compact_range` and
//! `wait_for_compactions`.

use super::{Db, Inner, State};
use crate::compaction::events::TableReason;
use crate::compaction::executor::{Context, Outcome};
use crate::compaction::picker::{self, PickEnv};
use crate::compaction::{Plan, PlanKind, Trigger};
use crate::error::Result;
use crate::stats::Stats;
use crate::types::SeqNo;
use crate::version::{Edit, Version};
use parking_lot::MutexGuard;
use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Asks the picker for a plan, as if `busy` levels and `in_flight` tables
/// were being compacted.
pub(super) fn pick(
    inner: &Inner,
    st: &State,
    busy: &[bool],
    in_flight: &HashSet<u64>,
) -> Option<Plan> {
    let pointers = st.compact_pointers(inner.opts.num_levels);
    let version = st.versions.current();
    let stale = inner.tracker.scores();
    inner.picker.pick(&PickEnv {
        version: &version,
        opts: &inner.opts,
        busy,
        in_flight,
        pointers: &pointers,
        stale: &stale,
    })
}

/// Runs one compaction plan. Called and returns with the state locked.
pub(super) fn compact<'a>(
    inner: &'a Inner,
    mut st: MutexGuard<'a, State>,
    plan: Plan,
    version: Arc<Version>,
) -> MutexGuard<'a, State> {
    set_busy(&mut st, &plan, true);
    st.running_compactions += 1;
    // The last published sequence first, then the snapshots: a snapshot
    // taken after this read holds a sequence at least this high.
    let published = inner.last_seq.load(Ordering::Acquire);
    let snapshots = inner.snapshot_list();
    let horizon = snapshots.iter().copied().fold(published, SeqNo::min);
    let started = Instant::now();
    let result = MutexGuard::unlocked(&mut st, || {
        execute(inner, &plan, &version, snapshots, horizon)
    });
    let result = match result {
        Ok((mut edit, mut outcome)) => {
            let (relocked, applied) = inner.log_and_apply(st, &mut edit);
            st = relocked;
            if applied.is_ok() && inner.tracker.tracks() {
                // The edit is durable; the plan's tables stay busy until
                // the tracker has moved its entries to the outputs, so no
                // other compaction takes those outputs meanwhile.
                outcome.change.removed = plan.all_inputs().map(|(_, id)| id).collect();
                MutexGuard::unlocked(&mut st, || inner.tracker.on_compaction(&outcome.change));
                // Under the state mutex: no table is installed meanwhile.
                let current = st.versions.current();
                inner
                    .tracker
                    .retain_scores(&|id| current.table_by_id(id).is_some());
            }
            applied.map(|()| (edit, outcome))
        }
        Err(e) => Err(e),
    };
    set_busy(&mut st, &plan, false);
    st.running_compactions -= 1;
    match result {
        Ok((edit, outcome)) => {
            inner.install_super_version(&mut st);
            let emitted = MutexGuard::unlocked(&mut st, || {
                inner.emit_events(TableReason::Compaction, &edit, &outcome.keys)
            });
            if let Err(e) = emitted {
                inner.set_bg_error(&mut st, e);
            }
            account(inner, &plan, &outcome, started);
        }
        Err(e) => inner.set_bg_error(&mut st, e),
    }
    inner.done_cv.notify_all();
    inner.bg_cv.notify_all();
    st
}

fn account(inner: &Inner, plan: &Plan, outcome: &Outcome, started: Instant) {
    let s = &inner.stats;
    if plan.trigger == Trigger::Stale {
        Stats::add(&s.stale_compactions, 1);
    }
    Stats::add(&s.stale_dropped, outcome.stale_dropped);
    if plan.kind == PlanKind::Move {
        Stats::add(&s.trivial_moves, 1);
        return;
    }
    Stats::add(&s.compaction_count, 1);
    Stats::add(&s.compaction_bytes_read, outcome.bytes_read);
    Stats::add(&s.compaction_bytes_written, outcome.bytes_written);
    if let Some(c) = s.compaction_written_by_level.get(plan.output_level) {
        Stats::add(c, outcome.bytes_written);
    }
    if let Some(c) = s.compaction_read_by_level.get(plan.level) {
        Stats::add(c, outcome.bytes_read);
    }
    Stats::add(&s.compaction_micros, started.elapsed().as_micros() as u64);
}

/// Marks (or clears) the plan's levels and input tables as being compacted.
fn set_busy(st: &mut State, plan: &Plan, busy: bool) {
    for l in [plan.level, plan.output_level] {
        if let Some(b) = st.busy.get_mut(l) {
            *b = busy;
        }
    }
    for (_, id) in plan.all_inputs() {
        if busy {
            st.in_flight.insert(id);
        } else {
            st.in_flight.remove(&id);
        }
    }
}

fn execute(
    inner: &Inner,
    plan: &Plan,
    version: &Version,
    snapshots: Vec<u64>,
    stale_horizon: SeqNo,
) -> Result<(Edit, Outcome)> {
    let mut next_number = || inner.state.lock().versions.new_file_number();
    let mut ctx = Context {
        dir: &inner.dir,
        fs: inner.opts.fs.clone(),
        table_opts: inner.table_opts,
        snapshots,
        new_file_number: &mut next_number,
        collect_keys: inner.opts.listeners.iter().any(|l| l.wants_keys()),
        tracker: inner.tracker.as_ref(),
        stale_horizon,
    };
    inner.executor.run(plan, version, &mut ctx)
}

impl Db {
    /// Waits until background work is done: no immutable memtable waits for
    /// its flush, no compaction runs and the picker finds nothing to do
    /// (RocksDB's `WaitForCompact`). The active memtable is not flushed.
    /// Writers may go on meanwhile; then it returns once they pause long
    /// enough for compaction to catch up.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.check_open()?;
        let inner = &self.inner;
        let idle_busy = vec![false; inner.opts.num_levels];
        let none = HashSet::new();
        let mut st = inner.state.lock();
        loop {
            st.check_usable()?;
            if st.imm.is_empty()
                && !st.flushing
                && st.running_compactions == 0
                && pick(inner, &st, &idle_busy, &none).is_none()
            {
                return Ok(());
            }
            inner.bg_cv.notify_all();
            inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    /// Compacts every table holding keys in `range` down the levels, dropping
    /// overwritten versions and tombstones no snapshot needs.
    pub fn compact_range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<()> {
        self.flush()?;
        let inner = &self.inner;
        let bound = |b: Bound<&K>| match b {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.as_ref().to_vec()),
            Bound::Unbounded => None,
        };
        let lo = bound(range.start_bound());
        let hi = bound(range.end_bound());
        for level in 0..inner.opts.num_levels.saturating_sub(1) {
            let mut st = inner.state.lock();
            // Wait for background compactions touching these levels.
            while st.busy.get(level).copied().unwrap_or(false)
                || st.busy.get(level + 1).copied().unwrap_or(false)
            {
                st.check_usable()?;
                inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
            }
            st.check_usable()?;
            let version = st.versions.current();
            // One plan takes every overlapping table of the level.
            if let Some(plan) =
                picker::pick_range(&version, &inner.opts, level, lo.as_deref(), hi.as_deref())
            {
                compact(inner, st, plan, version).check_usable()?;
            }
        }
        Ok(())
    }
}
