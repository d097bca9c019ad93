//! Tables whose every entry has expired (`ttl_secs`) are deleted unread: a
//! table of a sorted level whose newest sequence is at or below the expiry
//! horizon ([`PickEnv::expired_to`]), when no deeper level overlaps it.
//! Every version at or below the horizon reads as deleted to every reader
//! (snapshots too), so what the table held is gone for good, as a
//! compaction would have made it. A table that deeper levels overlap is
//! left to compactions: its expired deletions still hide older versions
//! below from a reader whose horizon is lower (a reopen with a longer ttl
//! or none). Level 0 is left to its own compactions, which write expired
//! versions as deletions.

use super::leveled::rewrite_plan;
use super::PickEnv;
use crate::compaction::{Plan, PlanKind, Trigger};
use crate::version::FileMeta;
use std::sync::Arc;

/// A plan dropping a run of neighbouring wholly expired tables of a
/// sorted level, the shallowest level first, that may run beside the
/// running compactions; `None` without a ttl or when there is none.
pub fn pick(env: &PickEnv<'_>) -> Option<Plan> {
    let horizon = env.expired_to;
    if horizon == 0 {
        return None;
    }
    let v = env.version;
    // No deeper (sorted) level holds a key of `f`'s range: one binary
    // search per level.
    let alone = |level: usize, f: &FileMeta| {
        let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
        v.levels.iter().skip(level + 1).all(|files| {
            let i = files.partition_point(|g| g.largest_user_key() < lo);
            files.get(i).is_none_or(|g| g.smallest_user_key() > hi)
        })
    };
    let droppable = |level: usize, f: &Arc<FileMeta>| {
        f.desc.max_seq <= horizon && !env.in_flight.contains(f.id()) && alone(level, f)
    };
    for (level, files) in v.levels.iter().enumerate().skip(1) {
        let mut i = 0;
        while i < files.len() {
            if !droppable(level, &files[i]) {
                i += 1;
                continue;
            }
            let mut plan = Plan {
                kind: PlanKind::Drop,
                ..rewrite_plan(v, env.opts, level, &files[i], Trigger::Expired)
            };
            i += 1;
            while i < files.len() && droppable(level, &files[i]) {
                plan.inputs.push(files[i].id());
                i += 1;
            }
            if let Some(plan) = env.admit(plan) {
                return Some(plan);
            }
        }
    }
    None
}
