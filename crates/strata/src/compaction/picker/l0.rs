//! Plans for the compactions level 0 asks for ([`L0Pick`]): the container
//! says which of its pieces go down, this module adds the L1 tables they
//! meet and whether nothing lies below.

use super::{pick_range, PickEnv, Picker};
use crate::compaction::{Plan, PlanKind, Trigger};
use crate::l0::{L0Container, L0Pick, RowSlice};
use crate::options::Options;
use crate::version::Version;

/// The next compaction: wholly expired tables dropped, else the first of level 0's own picks the running
/// compactions admit, or else `levels`' choice.
pub fn pick(env: &PickEnv<'_>, l0: &dyn L0Container, levels: &dyn Picker) -> Option<Plan> {
    let v = env.version;
    if let Some(plan) = super::expired::pick(env) {
        return Some(plan);
    }
    l0.picks(v, env.opts, env.in_flight.l0_busy())
        .into_iter()
        .find_map(|p| plan_of(v, env.opts, p, Trigger::Size).and_then(|p| env.admit(p)))
        .or_else(|| levels.pick(env))
        .or_else(|| super::range_dels::pick(env, None))
}

/// A manual compaction of all of level 0 into L1, if it holds anything.
pub fn pick_all(v: &Version, opts: &Options, l0: &dyn L0Container) -> Option<Plan> {
    plan_of(v, opts, l0.pick_all(v, opts)?, Trigger::Manual)
}

/// The plan for `pick` with `trigger`.
fn plan_of(v: &Version, opts: &Options, pick: L0Pick, trigger: Trigger) -> Option<Plan> {
    let mut plan = match pick {
        L0Pick::Tables => pick_range(v, opts, 0, None, None)?,
        L0Pick::Rows(rows) => rows_plan(v, opts, rows, trigger)?,
    };
    plan.trigger = trigger;
    Some(plan)
}

/// A merge of the cells `rows` with the L1 tables they overlap, into L1,
/// for `trigger`; `None` when the slices hold no cell.
fn rows_plan(v: &Version, opts: &Options, rows: Vec<RowSlice>, trigger: Trigger) -> Option<Plan> {
    let (lo, hi) = v.rows.slices_range(&rows)?;
    let next = v.overlapping(1, Some(&lo), Some(&hi));
    let all_lo = next
        .iter()
        .map(|f| f.smallest_user_key())
        .chain(std::iter::once(lo.as_slice()))
        .min()?
        .to_vec();
    let all_hi = next
        .iter()
        .map(|f| f.largest_user_key())
        .chain(std::iter::once(hi.as_slice()))
        .max()?
        .to_vec();
    let bottommost =
        (2..v.levels.len()).all(|l| v.overlapping(l, Some(&all_lo), Some(&all_hi)).is_empty());
    Some(Plan {
        kind: PlanKind::Merge,
        level: 0,
        output_level: 1,
        inputs: Vec::new(),
        next_inputs: next.iter().map(|f| f.id()).collect(),
        target_file_size: opts.target_file_size,
        bottommost,
        compact_pointer: Vec::new(),
        trigger,
        rows,
        assigned: Default::default(),
    })
}
