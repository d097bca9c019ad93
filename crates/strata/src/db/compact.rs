//! Running compaction plans: complete the plan (snapshots, sub-task cuts,
//! reserved output file numbers), record it in the scheduler's
//! [`InFlight`], execute outside the state mutex, log the edit, tell the
//! stale tracker, install the new super-version, and account. Several
//! background threads may each run one plan at a time. Also
//! `compact_range` and `wait_for_compactions`.

use super::{Db, Family, Inner, State};
use crate::compaction::executor::{Context, Outcome};
use crate::compaction::picker::{self, PickEnv};
use crate::compaction::scheduler::{self, InFlight};
use crate::compaction::{split, Plan, PlanKind, Trigger};
use crate::error::Result;
use crate::events::TableReason;
use crate::sched::Slot;
use crate::stats::Stats;
use crate::types::SeqNo;
use crate::version::{Edit, Version};
use parking_lot::MutexGuard;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Asks `fam`'s picker for a plan that may run beside `in_flight`.
pub(super) fn pick(inner: &Inner, fam: &Family, st: &State, in_flight: &InFlight) -> Option<Plan> {
    let pointers = st.compact_pointers(fam, fam.opts.num_levels);
    let version = st.versions.current(fam.id);
    let stale = fam.designs.tracker.scores();
    let env = PickEnv {
        version: &version,
        opts: &fam.opts,
        in_flight,
        pointers: &pointers,
        stale: &stale,
        horizon: inner.horizon(),
        expired_to: fam.expired_to(),
    };
    picker::l0::pick(&env, &*fam.designs.l0, &*fam.designs.picker)
}

/// Runs one compaction plan of `fam`. Called and returns with the state locked.
/// `slot`: its share of the CPU budget (background threads; a manual
/// compaction runs in its caller's thread without one), given back as
/// soon as the plan has run, under the state mutex.
/// A panic anywhere in the plan's run (not only in the executor) becomes
/// the background error, and the plan leaves `in_flight`: `close` waits for
/// an empty `in_flight`.
pub(super) fn compact<'a>(
    inner: &'a Inner,
    fam: &Family,
    mut st: MutexGuard<'a, State>,
    plan: Plan,
    version: Arc<Version>,
    slot: Option<Slot<'_>>,
) -> MutexGuard<'a, State> {
    let ticket = st.tree_mut(fam).in_flight.start(&plan, &version);
    let running: usize = st.live_trees().map(|t| t.in_flight.len()).sum();
    inner
        .stats
        .compactions_running_max
        .fetch_max(running as u64, Ordering::Relaxed);
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_plan(inner, fam, st, plan, version, slot, ticket)
    }));
    match ran {
        Ok(st) => st,
        Err(p) => inner.after_panic("a compaction", p, |st| {
            st.tree_mut(fam).in_flight.finish(ticket)
        }),
    }
}

/// [`compact`]'s work for the plan of `ticket`.
fn run_plan<'a>(
    inner: &'a Inner,
    fam: &Family,
    mut st: MutexGuard<'a, State>,
    mut plan: Plan,
    version: Arc<Version>,
    slot: Option<Slot<'_>>,
    ticket: u64,
) -> MutexGuard<'a, State> {
    // The last published sequence first, then the snapshots: a snapshot
    // taken after this read holds a sequence at least this high.
    let published = inner.last_seq.load(Ordering::Acquire);
    // Before the list: a snapshot taken in between is in the list and
    // counted (at worst a needless rerun, never a missed one).
    let snapshots_taken = inner.snapshots_taken.load(Ordering::Acquire);
    let snapshots = inner.snapshot_list();
    let horizon = snapshots.iter().copied().fold(published, SeqNo::min);
    assign(fam, &mut st, &mut plan, &version, snapshots);
    let offloads = fam
        .designs
        .executor
        .offloads(&plan, fam.designs.tracker.tracks());
    // A plan that waits on a worker process (for as long as
    // `offload_timeout_ms`) runs outside the CPU budget: it would hold
    // its slot, and so every flush, with nothing to give way from.
    let slot = if offloads { None } else { slot };
    if offloads {
        // Every edit records the file-number counter: an empty one makes
        // the reservation durable before a worker writes under it.
        let (relocked, logged) = inner.log_and_apply(fam, st, &mut Edit::default());
        st = relocked;
        if let Err(e) = logged {
            inner.set_bg_error(&mut st, e);
            // The picked version may hold replaced tables last (see below).
            MutexGuard::unlocked(&mut st, || drop(version));
            st.tree_mut(fam).in_flight.finish(ticket);
            inner.done_cv.notify_all();
            inner.bg_cv.notify_all();
            return st;
        }
    }
    // What a merge takes out of level 0's tables (its rows are counted as
    // it reads them): the slowdown's drain rate (`sched::slowdown`). A
    // move drains level 0 in no time and says nothing of the merges' pace.
    let l0_table_bytes = (plan.level == 0 && plan.kind == PlanKind::Merge).then(|| {
        plan.inputs
            .iter()
            .filter_map(|&id| version.table_by_id(id))
            .map(|f| f.desc.size)
            .sum::<u64>()
    });
    let started = Instant::now();
    let give_way = || {
        if slot.as_ref().is_some_and(Slot::give_way) {
            Stats::add(&inner.stats.compaction_give_ways, 1);
        }
    };
    let filter = inner.opts.compaction_filter.get().is_some();
    let mut result = MutexGuard::unlocked(&mut st, || {
        execute(inner, fam, &plan, &version, horizon, &give_way, filter)
    });
    // A filter's changes install only if no snapshot was taken since the
    // compaction began (one could see a key before and after them); else
    // the plan runs again without the filter. The gate stays held until
    // the outputs are installed.
    let mut gate = None;
    if let Ok((edit, outcome)) = &result {
        if outcome.tally.filter_removed + outcome.tally.filter_changed > 0 {
            // Taken with the state mutex released (lock order).
            let g = MutexGuard::unlocked(&mut st, || inner.snapshot_gate.lock());
            if inner.snapshots_taken.load(Ordering::Acquire) == snapshots_taken {
                gate = Some(g);
            } else {
                drop(g);
                Stats::add(&inner.stats.filter_reruns, 1);
                let outputs: Vec<u64> = edit.added.iter().map(|(_, d)| d.id).collect();
                result = MutexGuard::unlocked(&mut st, || {
                    for id in outputs {
                        let path = crate::filename::table_path(&inner.dir, id);
                        let _ = inner.opts.fs.remove_file(&path);
                    }
                    execute(inner, fam, &plan, &version, horizon, &give_way, false)
                });
            }
        }
    }
    // Under the state mutex (see `cpu.rs`).
    drop(slot);
    let result = match result {
        Ok((mut edit, mut outcome)) => {
            let (relocked, applied) = inner.log_and_apply(fam, st, &mut edit);
            st = relocked;
            if applied.is_ok() {
                // The edit is durable; the outputs stay in flight until
                // the tracker has moved its entries to them and the
                // listeners have heard of them, so no other compaction
                // moves or merges one first.
                st.tree_mut(fam)
                    .in_flight
                    .hold(ticket, edit.added.iter().map(|(_, d)| d.id));
            }
            if applied.is_ok() && fam.designs.tracker.tracks() {
                outcome.change.removed = plan.all_inputs().map(|(_, id)| id).collect();
                MutexGuard::unlocked(&mut st, || {
                    fam.designs.tracker.on_compaction(&outcome.change)
                });
                // Under the state mutex: no table is installed meanwhile.
                let current = st.versions.current(fam.id);
                fam.designs
                    .tracker
                    .retain_scores(&|id| current.table_by_id(id).is_some());
            }
            applied.map(|()| (edit, outcome))
        }
        Err(e) => Err(e),
    };
    match result {
        Ok((edit, outcome)) => {
            let old = inner.install_super_version(fam, &mut st);
            // The drain ends when its outputs are installed, before the
            // deletes and listeners below.
            let drained_at = Instant::now();
            drop(gate);
            // The replaced super-version and the picked version may hold
            // the last references to the inputs: unmapping, closing and
            // deleting them happens here, not under the state mutex, and
            // before the plan leaves `in_flight` (`close` waits for an
            // empty `in_flight`: nothing may delete a file after it
            // returns).
            MutexGuard::unlocked(&mut st, || drop((old, version)));
            // Listeners are told while the plan is still in flight: no
            // other compaction can take its outputs (or their key range)
            // before they hear of them, so events arrive in version order.
            let emitted = MutexGuard::unlocked(&mut st, || {
                inner.emit_events(TableReason::Compaction, &edit, &outcome.keys)
            });
            st.tree_mut(fam).in_flight.finish(ticket);
            if let Err(e) = emitted {
                inner.set_bg_error(&mut st, e);
            }
            if let Some(bytes) = l0_table_bytes {
                inner.admission.slowdown.lock().drained(
                    drained_at,
                    started,
                    bytes + outcome.row_bytes_read,
                );
            }
            account(
                inner,
                &st.versions.current(fam.id),
                &plan,
                &outcome,
                started,
            );
        }
        Err(e) => {
            // A keyspace dropped meanwhile leaves; its edit is refused.
            if !fam.is_dropped() {
                inner.set_bg_error(&mut st, e);
            }
            MutexGuard::unlocked(&mut st, || drop(version));
            st.tree_mut(fam).in_flight.finish(ticket);
        }
    }
    inner.done_cv.notify_all();
    inner.bg_cv.notify_all();
    st
}

fn account(inner: &Inner, v: &Version, plan: &Plan, outcome: &Outcome, started: Instant) {
    let s = &inner.stats;
    match plan.trigger {
        Trigger::Stale => Stats::add(&s.stale_compactions, 1),
        Trigger::Read => Stats::add(&s.read_compactions, 1),
        Trigger::RangeDel => Stats::add(&s.range_del_compactions, 1),
        Trigger::Size | Trigger::Manual | Trigger::Expired => {}
    }
    Stats::add(&s.stale_dropped, outcome.stale_dropped);
    inner.add_tally(&outcome.tally);
    if plan.kind == PlanKind::Move {
        Stats::add(&s.trivial_moves, 1);
        return;
    }
    if plan.kind == PlanKind::Drop {
        let dropped = match plan.trigger {
            Trigger::Expired => &s.expired_dropped_tables,
            _ => &s.range_dropped_tables,
        };
        Stats::add(dropped, plan.inputs.len() as u64);
        return;
    }
    Stats::add(&s.compaction_count, 1);
    if !plan.rows.is_empty() {
        v.rows.count_compaction(outcome.row_bytes_read);
    }
    Stats::add(&s.compaction_bytes_read, outcome.bytes_read);
    Stats::add(&s.compaction_bytes_written, outcome.bytes_written);
    if let Some(c) = s.compaction_written_by_level.get(plan.output_level) {
        Stats::add(c, outcome.bytes_written);
    }
    if let Some(c) = s.compaction_read_by_level.get(plan.level) {
        Stats::add(c, outcome.bytes_read);
    }
    Stats::add(&s.compaction_micros, started.elapsed().as_micros() as u64);
    Stats::add(&s.compaction_cpu_micros, outcome.cpu.as_micros() as u64);
    let [read, merge, write] = outcome.busy;
    Stats::add(&s.compaction_read_busy_micros, read.as_micros() as u64);
    Stats::add(&s.compaction_merge_busy_micros, merge.as_micros() as u64);
    Stats::add(&s.compaction_write_busy_micros, write.as_micros() as u64);
    Stats::add(&s.compaction_subtasks, outcome.subtasks);
    Stats::add(&s.compaction_pipelined_subtasks, outcome.pipelined);
    Stats::add(&s.compaction_offloaded_subtasks, outcome.offloaded);
    Stats::add(&s.compaction_offload_fallbacks, outcome.fallbacks);
}

/// Completes `plan` before it runs: the live snapshots, the sub-task cuts
/// the executor asks for, and a range of output file numbers per sub-task,
/// so that the plan alone tells an executor (in this process or a worker)
/// everything but the table files.
fn assign(fam: &Family, st: &mut State, plan: &mut Plan, v: &Version, snapshots: Vec<SeqNo>) {
    plan.assigned.snapshots = snapshots;
    if matches!(plan.kind, PlanKind::Move | PlanKind::Drop) {
        return;
    }
    plan.assigned.splits = split::split(plan, v, fam.designs.executor.subtasks());
    // Enough numbers for every sub-task to cut its outputs at half the
    // target size, twice over, plus one per grandparent boundary; more
    // come from the version set if a sub-task here runs out.
    let input: u64 = plan
        .all_inputs()
        .filter_map(|(l, id)| v.levels.get(l)?.iter().find(|f| f.id() == id))
        .map(|f| f.size())
        .sum::<u64>()
        + v.rows
            .runs(&plan.rows)
            .map_or(0, |runs| runs.iter().map(|r| r.bytes()).sum::<u64>());
    let (lo, hi) = scheduler::plan_range(plan, v).unwrap_or_default();
    let grandparents = v
        .overlapping(plan.output_level + 1, Some(&lo), Some(&hi))
        .len() as u64;
    let per = 4 * input / plan.target_file_size.max(1) + grandparents + 8;
    let a = &mut plan.assigned;
    a.file_numbers = per;
    a.first_file_number = st
        .versions
        .reserve_file_numbers(per.saturating_mul(a.subtasks() as u64));
}

fn execute(
    inner: &Inner,
    fam: &Family,
    plan: &Plan,
    version: &Version,
    stale_horizon: SeqNo,
    give_way: &(dyn Fn() + Sync),
    filter: bool,
) -> Result<(Edit, Outcome)> {
    let more = || inner.state.lock().versions.new_file_number();
    let rules = inner.rules(fam, filter);
    let ctx = Context {
        dir: &inner.dir,
        fs: inner.opts.fs.clone(),
        table_opts: fam.table_opts,
        more_numbers: &more,
        collect_keys: inner.opts.listeners.iter().any(|l| l.wants_keys()),
        tracker: fam.designs.tracker.as_ref(),
        stale_horizon,
        give_way,
        rules: &rules,
    };
    // A panic must not leave the plan in flight for ever: it becomes the
    // compaction's error (and so the background error).
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fam.designs.executor.run(plan, version, &ctx)
    }))
    .unwrap_or_else(|_| {
        Err(crate::error::Error::io(
            "compaction",
            std::io::Error::other("the compaction executor panicked"),
        ))
    })
}

impl Db {
    /// Waits until background work is done: no immutable memtable waits for
    /// its flush, no compaction runs and the picker finds nothing to do
    /// (RocksDB's `WaitForCompact`). The active memtable is not flushed.
    /// Writers may go on meanwhile; then it returns once they pause long
    /// enough for compaction to catch up.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.check_open()?;
        self.inner.wait_for_compactions()
    }
}

impl Inner {
    /// [`Db::wait_for_compactions`]: every keyspace's background work.
    pub(crate) fn wait_for_compactions(&self) -> Result<()> {
        let inner = self;
        let none = InFlight::default();
        let mut st = inner.state.lock();
        loop {
            st.check_usable()?;
            let fams = inner.live_families();
            let idle = |fam: &Family| st.tree(fam).idle() && pick(inner, fam, &st, &none).is_none();
            if fams.iter().all(|f| idle(f)) {
                drop(st);
                // Replaced tables are closed and their files removed.
                inner.tables.purged();
                return Ok(());
            }
            inner.bg_cv.notify_all();
            inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }
}

impl Db {
    /// Compacts every table holding keys in `range` down the levels, dropping
    /// overwritten versions and tombstones no snapshot needs.
    /// Compacts the `default` keyspace (a keyspace's own:
    /// `Keyspace::compact_range`).
    pub fn compact_range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<()> {
        self.check_open()?;
        self.inner.compact_range_in(&self.inner.default, range)
    }
}

impl Inner {
    /// [`Db::compact_range`] of keyspace `fam`.
    pub(crate) fn compact_range_in<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        fam: &Family,
        range: R,
    ) -> Result<()> {
        self.flush_family(fam)?;
        let inner = self;
        let bound = |b: Bound<&K>| match b {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.as_ref().to_vec()),
            Bound::Unbounded => None,
        };
        // With a filter, the pass below rewrites the last level's tables
        // made before this call (whatever moved them there): a table made
        // since was written by a compaction, which filtered it.
        let last = fam.opts.num_levels.saturating_sub(1);
        let made_before = inner
            .opts
            .compaction_filter
            .get()
            .map(|_| inner.state.lock().versions.peek_file_number());
        let lo = bound(range.start_bound());
        let hi = bound(range.end_bound());
        for level in 0..fam.opts.num_levels.saturating_sub(1) {
            let mut st = inner.state.lock();
            // Wait for background compactions touching these levels.
            while st.tree(fam).in_flight.touches_level(level)
                || st.tree(fam).in_flight.touches_level(level + 1)
            {
                st.check_usable()?;
                if fam.is_dropped() {
                    return Err(super::keyspace::dropped(fam));
                }
                inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
            }
            st.check_usable()?;
            if fam.is_dropped() {
                return Err(super::keyspace::dropped(fam));
            }
            if level == 0 {
                // All of level 0 (its pieces overlap), until it is empty.
                drop(st);
                // Tables first, then the compacting group, then the rest:
                // at most three plans (later flushes are not chased).
                for _ in 0..3 {
                    let mut st = inner.state.lock();
                    while st.tree(fam).in_flight.l0_busy()
                        || st.tree(fam).in_flight.touches_level(1)
                    {
                        st.check_usable()?;
                        if fam.is_dropped() {
                            return Err(super::keyspace::dropped(fam));
                        }
                        inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
                    }
                    st.check_usable()?;
                    if fam.is_dropped() {
                        return Err(super::keyspace::dropped(fam));
                    }
                    let version = st.versions.current(fam.id);
                    let Some(plan) = picker::l0::pick_all(&version, &fam.opts, &*fam.designs.l0)
                    else {
                        break;
                    };
                    compact(inner, fam, st, plan, version, None).check_usable()?;
                }
                continue;
            }
            let version = st.versions.current(fam.id);
            // One plan takes every overlapping table of the level.
            if let Some(plan) =
                picker::pick_range(&version, &fam.opts, level, lo.as_deref(), hi.as_deref())
            {
                compact(inner, fam, st, plan, version, None).check_usable()?;
            }
        }
        // With a compaction filter, the last level is rewritten too.
        if let Some(made_before) = made_before {
            let plans = {
                let st = inner.state.lock();
                picker::pick_last_level(
                    &st.versions.current(fam.id),
                    &fam.opts,
                    lo.as_deref(),
                    hi.as_deref(),
                )
            };
            for plan in plans {
                let mut st = inner.state.lock();
                while st.tree(fam).in_flight.touches_level(last) {
                    st.check_usable()?;
                    if fam.is_dropped() {
                        return Err(super::keyspace::dropped(fam));
                    }
                    inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
                }
                st.check_usable()?;
                if fam.is_dropped() {
                    return Err(super::keyspace::dropped(fam));
                }
                let version = st.versions.current(fam.id);
                // A compaction (this call's or a background one) may have
                // replaced the table.
                if plan.inputs[0] < made_before && version.table_by_id(plan.inputs[0]).is_some() {
                    compact(inner, fam, st, plan, version, None).check_usable()?;
                }
            }
        }
        // Then the tables in range that hold versions a range tombstone
        // hides: each plan clears its inputs for good (no plan picks them
        // again), so the loop ends once none is left. A plan the running
        // compactions do not admit waits for them.
        loop {
            let st = inner.state.lock();
            st.check_usable()?;
            if fam.is_dropped() {
                return Err(super::keyspace::dropped(fam));
            }
            let version = st.versions.current(fam.id);
            let pointers = st.compact_pointers(fam, fam.opts.num_levels);
            let stale = std::collections::HashMap::new();
            let env = PickEnv {
                version: &version,
                opts: &fam.opts,
                in_flight: &st.tree(fam).in_flight,
                pointers: &pointers,
                stale: &stale,
                horizon: inner.horizon(),
                expired_to: 0,
            };
            let range = Some((lo.as_deref(), hi.as_deref()));
            match picker::range_dels::pick(&env, range) {
                Some(plan) => {
                    compact(inner, fam, st, plan, version, None).check_usable()?;
                }
                None if !st.tree(fam).in_flight.is_empty()
                    && picker::range_dels::pending(&env, range) =>
                {
                    let mut st = st;
                    inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
                }
                None => break,
            }
        }
        Ok(())
    }
}
