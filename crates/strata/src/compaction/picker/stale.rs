//! The stale-aware picker (active compaction): the leveled size
//! triggers first; when none fires, the table with the highest share of
//! stale versions at or above `stale_threshold` is compacted early.
//!
//! Shape of an early compaction (the digest's decision 4): an L0 table
//! takes all of L0 down (L0 tables overlap); a deeper table merges with
//! the tables of the next level it overlaps, or, when it overlaps nothing
//! there (the bottom of its key range, where stale data gathers), is
//! rewritten alone in its own level ([`PlanKind::Rewrite`]). Early
//! compactions leave the round-robin pointers alone.

use super::leveled::{pick_by_reads, pick_by_size, plan_for, rewrite_plan};
use super::{PickEnv, Picker};
use crate::compaction::{Plan, PlanKind, Trigger};
use crate::version::FileMeta;
use std::sync::Arc;

/// See the module doc.
pub struct Stale;

impl Picker for Stale {
    fn pick(&self, env: &PickEnv<'_>) -> Option<Plan> {
        pick_by_size(env)
            .or_else(|| pick_stale(env))
            .or_else(|| pick_by_reads(env))
    }
}

/// Share of `f`'s entries that are stale.
fn stale_ratio(env: &PickEnv<'_>, f: &FileMeta) -> f64 {
    let n = env.stale.get(&f.id()).copied().unwrap_or(0);
    n as f64 / f.desc.entries.max(1) as f64
}

fn pick_stale(env: &PickEnv<'_>) -> Option<Plan> {
    if env.stale.is_empty() {
        return None;
    }
    let mut candidates: Vec<(f64, usize, &Arc<FileMeta>)> = Vec::new();
    for (level, files) in env.version.levels.iter().enumerate() {
        for f in files {
            let r = stale_ratio(env, f);
            if r >= env.opts.stale.threshold && !env.in_flight.contains(f.id()) {
                candidates.push((r, level, f));
            }
        }
    }
    // Most stale first; among equals the shallower level, then the lower id.
    candidates.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.id().cmp(&b.2.id()))
    });
    candidates
        .into_iter()
        .find_map(|(_, level, f)| plan_early(env, level, f))
}

/// The early compaction of table `f` of `level`, if it may run beside the
/// running compactions.
fn plan_early(env: &PickEnv<'_>, level: usize, f: &Arc<FileMeta>) -> Option<Plan> {
    let v = env.version;
    let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
    let below = v.overlapping(level + 1, Some(lo), Some(hi));
    if level == 0 || !below.is_empty() {
        if (level == 0 && env.in_flight.l0_busy()) || level + 1 >= v.levels.len() {
            return None;
        }
        let inputs = if level == 0 {
            v.levels.first().cloned().unwrap_or_default()
        } else {
            vec![f.clone()]
        };
        let mut plan = plan_for(v, env.opts, level, inputs, Trigger::Stale)?;
        if plan.kind == PlanKind::Move {
            // Re-linking drops nothing (disjoint L0 tables, nothing below).
            return None;
        }
        plan.compact_pointer.clear();
        return env.admit(plan);
    }
    env.admit(rewrite_plan(v, env.opts, level, f, Trigger::Stale))
}
