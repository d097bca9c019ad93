//! Compactions that clear range tombstones: a table of a sorted level that
//! may still hold versions a tombstone hides ([`Version::may_hide`]) is
//! deleted unread when the tombstone hides all of it, else rewritten in
//! place (merged into the next level when that level overlaps it), so the
//! hidden versions go and the tombstone can retire. Only tombstones every
//! reader sees (at or below the environment's horizon) are acted on: with
//! an older snapshot the hidden versions must stay, and a compaction
//! would drop nothing.
//!
//! Level 0's tables that may hold such versions go down whole, into L1
//! (as any L0 compaction); its rows (`l0=matrix`) are left to the
//! container's column compactions.

use super::leveled::{plan_for, rewrite_plan};
use super::PickEnv;
use crate::compaction::{Plan, PlanKind, Trigger};
use crate::rangedel::RangeTombstone;
use crate::version::{FileMeta, Version};
use std::sync::Arc;

/// A user-key range `[lo, hi]` (`None`: unbounded on that side).
pub type KeyRange<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The first plan, oldest tombstone first, shallowest level first, that
/// may run beside the running compactions; `None` when no tombstone at or
/// below `env.horizon` leaves work in a sorted level that is not already
/// running. With `range`, only tables meeting the user-key range `[lo, hi]`
/// (`None`: unbounded) count.
pub fn pick(env: &PickEnv<'_>, range: Option<KeyRange<'_>>) -> Option<Plan> {
    candidates(env, range)
        .filter(|(_, f, _)| !env.in_flight.contains(f.id()))
        .find_map(|(level, f, t)| {
            if level == 0 {
                level0(env)
            } else {
                plan_of(env, env.version, level, f, t)
            }
        })
}

/// All of level 0's tables merged into L1, if no other L0 plan runs.
fn level0(env: &PickEnv<'_>) -> Option<Plan> {
    if env.in_flight.l0_busy() {
        return None;
    }
    let v = env.version;
    let mut plan = plan_for(v, env.opts, 0, v.levels.first()?.clone(), Trigger::RangeDel)?;
    plan.compact_pointer.clear();
    env.admit(plan)
}

/// True if some table may still hold a version a tombstone at or below the
/// horizon hides (a caller that wants the work done, and finds no plan
/// admitted beside the running compactions, waits for them).
pub fn pending(env: &PickEnv<'_>, range: Option<KeyRange<'_>>) -> bool {
    candidates(env, range).next().is_some()
}

/// Every (level, table, tombstone) where a table meeting
/// `range` may hold a version the tombstone (at or below the horizon) hides.
fn candidates<'v>(
    env: &'v PickEnv<'_>,
    range: Option<KeyRange<'v>>,
) -> impl Iterator<Item = (usize, &'v Arc<FileMeta>, &'v RangeTombstone)> + 'v {
    let v = env.version;
    let horizon = env.horizon;
    v.range_dels
        .list()
        .iter()
        .filter(move |t| t.seq <= horizon)
        .flat_map(move |t| {
            v.levels.iter().enumerate().flat_map(move |(level, files)| {
                // Level 0's tables overlap: all are looked at; deeper,
                // the run from the first that may meet the tombstone.
                let i = if level == 0 {
                    0
                } else {
                    files.partition_point(|f| f.largest_user_key() < t.start.as_slice())
                };
                files
                    .get(i..)
                    .unwrap_or_default()
                    .iter()
                    .take_while(move |f| level == 0 || f.smallest_user_key() < t.end.as_slice())
                    .filter(move |f| t.overlaps(f.smallest_user_key(), f.largest_user_key()))
                    .filter(move |f| hides_in(f, t))
                    .filter(move |f| range.is_none_or(|(lo, hi)| f.overlaps(lo, hi)))
                    .map(move |f| (level, f, t))
            })
        })
}

/// True if `f` may hold a version `t` hides (as `Version::may_hide`).
fn hides_in(f: &FileMeta, t: &RangeTombstone) -> bool {
    f.desc.min_seq < t.seq && f.desc.swept_seq < t.seq
}

/// The plan that clears `t` from `f` of `level`, if admitted.
fn plan_of(
    env: &PickEnv<'_>,
    v: &Version,
    level: usize,
    f: &Arc<FileMeta>,
    t: &RangeTombstone,
) -> Option<Plan> {
    let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
    let inside = t.start.as_slice() <= lo && hi < t.end.as_slice();
    let plan = if inside && f.desc.max_seq < t.seq {
        Plan {
            kind: PlanKind::Drop,
            ..rewrite_plan(v, env.opts, level, f, Trigger::RangeDel)
        }
    } else if !v.overlapping(level + 1, Some(lo), Some(hi)).is_empty() {
        let mut plan = plan_for(v, env.opts, level, vec![f.clone()], Trigger::RangeDel)?;
        plan.compact_pointer.clear();
        plan
    } else {
        rewrite_plan(v, env.opts, level, f, Trigger::RangeDel)
    };
    env.admit(plan)
}
