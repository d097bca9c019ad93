//! Tables whose every entry has expired (`ttl_secs`) are deleted unread: a
//! table of a sorted level whose newest sequence is at or below the expiry
//! horizon ([`PickEnv::expired_to`]). Every version at or below the horizon
//! reads as deleted to every reader (snapshots too), and every older
//! version of the same key has a lower sequence, so it has expired as well:
//! dropping the table uncovers nothing. Level 0 is left to its own
//! compactions, which write expired versions as deletions.

use super::leveled::rewrite_plan;
use super::PickEnv;
use crate::compaction::{Plan, PlanKind, Trigger};

/// One plan dropping every wholly expired table of the shallowest sorted
/// level that has any not already in a running compaction; `None` without
/// a ttl or when there is none.
pub fn pick(env: &PickEnv<'_>) -> Option<Plan> {
    let horizon = env.expired_to;
    if horizon == 0 {
        return None;
    }
    let v = env.version;
    v.levels
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(level, files)| {
            let mut expired = files
                .iter()
                .filter(|f| f.desc.max_seq <= horizon && !env.in_flight.contains(f.id()));
            let first = expired.next()?;
            let mut plan = Plan {
                kind: PlanKind::Drop,
                ..rewrite_plan(v, env.opts, level, first, Trigger::Expired)
            };
            plan.inputs.extend(expired.map(|f| f.id()));
            env.admit(plan)
        })
}
