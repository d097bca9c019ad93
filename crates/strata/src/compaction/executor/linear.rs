//! The linear executor: read, merge and write in the calling thread.
//!
//! Given a plan and the version it was picked from, it merges the input
//! tables, drops what [`Dropper`] allows and the versions the stale
//! tracker knows to be stale, and writes the outputs. It returns the
//! version edit (inputs removed, outputs added) without installing it: only
//! the version set installs edits.
//!
//! Stale dropping (seed 004): a version of a key is dropped when the
//! update table names a newer version of the key (higher sequence) that is
//! at or below `stale_horizon`, the oldest sequence any reader can hold:
//! every snapshot and every later read then sees that newer version, which
//! lives in a higher table (or in this compaction), so no reader can reach
//! the dropped one. The newer version itself is never dropped this way, so
//! a tombstone that still hides older versions stays.

use super::{Context, Executor, Outcome};
use crate::compaction::filter::Dropper;
use crate::compaction::output::Outputs;
use crate::compaction::{Plan, PlanKind};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, LevelIter, MergeIter};
use crate::stale::{Entry, Tracker};
use crate::table::TableIter;
use crate::types::SeqNo;
use crate::version::{Edit, FileMeta, Version};
use std::sync::Arc;

/// Reads, merges and writes in the calling thread (`ExecutorKind::Linear`).
pub struct Linear;

impl Executor for Linear {
    fn run(
        &self,
        plan: &Plan,
        version: &Version,
        ctx: &mut Context<'_>,
    ) -> Result<(Edit, Outcome)> {
        run_linear(plan, version, ctx)
    }
}

fn find(v: &Version, level: usize, id: u64) -> Result<Arc<FileMeta>> {
    v.levels
        .get(level)
        .and_then(|l| l.iter().find(|f| f.id() == id))
        .cloned()
        .ok_or_else(|| {
            Error::InvalidArgument(format!("plan names table {id} not in level {level}"))
        })
}

/// Executes `plan` against `version` and returns the edit to install.
pub fn run_linear(
    plan: &Plan,
    version: &Version,
    ctx: &mut Context<'_>,
) -> Result<(Edit, Outcome)> {
    if !plan.is_well_formed() {
        return Err(Error::InvalidArgument(format!("malformed plan {plan:?}")));
    }
    let mut edit = Edit::default();
    let mut outcome = Outcome::default();
    if !plan.compact_pointer.is_empty() {
        edit.compact_pointers
            .push((plan.level, plan.compact_pointer.clone()));
    }
    if plan.kind == PlanKind::Move {
        for (level, id) in plan.all_inputs() {
            let f = find(version, level, id)?;
            edit.deleted.push((level, id));
            edit.added.push((plan.output_level, f.desc.clone()));
        }
        return Ok((edit, outcome));
    }

    let inputs: Vec<Arc<FileMeta>> = plan
        .inputs
        .iter()
        .map(|id| find(version, plan.level, *id))
        .collect::<Result<_>>()?;
    let next: Vec<Arc<FileMeta>> = plan
        .next_inputs
        .iter()
        .map(|id| find(version, plan.output_level, *id))
        .collect::<Result<_>>()?;
    outcome.bytes_read = inputs.iter().chain(&next).map(|f| f.size()).sum();

    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if plan.level == 0 {
        for f in &inputs {
            children.push(Box::new(TableIter::sequential(f.table()?)));
        }
    } else {
        children.push(Box::new(LevelIter::sequential(inputs.clone())));
    }
    children.push(Box::new(LevelIter::sequential(next.clone())));
    let mut merged = MergeIter::new(children);

    // A tombstone may go only if no deeper level can hold its key.
    let bottommost = plan.bottommost;
    let below = plan.output_level + 1;
    let is_bottom_for = |uk: &[u8]| bottommost || !version.covers_at_or_below(below, uk);
    let mut dropper = Dropper::new(ctx.snapshots.clone(), is_bottom_for);
    // Only the grandparents the outputs can reach (the whole key range of
    // the inputs); the level below may hold thousands of tables.
    let lo = inputs
        .iter()
        .chain(&next)
        .map(|f| f.smallest_user_key())
        .min();
    let hi = inputs
        .iter()
        .chain(&next)
        .map(|f| f.largest_user_key())
        .max();
    let grandparents = version
        .overlapping(plan.output_level + 1, lo, hi)
        .iter()
        .map(|f| (f.largest_user_key().to_vec(), f.size()))
        .collect();
    let mut outputs = Outputs::new(
        ctx.dir,
        ctx.fs.clone(),
        ctx.table_opts,
        plan.target_file_size,
        ctx.new_file_number,
    )
    .collect_keys(ctx.collect_keys)
    .align_to(grandparents);
    let result = if ctx.tracker.tracks() {
        let stale = Stale {
            tracker: ctx.tracker,
            horizon: ctx.stale_horizon,
        };
        copy_dropping_stale(
            &mut merged,
            &mut dropper,
            &mut outputs,
            &stale,
            &mut outcome,
        )
    } else {
        copy(&mut merged, &mut dropper, &mut outputs)
    };
    let descs = match result {
        Ok(d) => d,
        Err(e) => {
            outputs.abandon();
            return Err(e);
        }
    };
    outcome.bytes_written = outputs.bytes_written;
    outcome.entries_dropped = dropper.dropped;
    outcome.keys = std::mem::take(&mut outputs.keys);
    for (level, id) in plan.all_inputs() {
        edit.deleted.push((level, id));
    }
    for d in descs {
        edit.added.push((plan.output_level, d));
    }
    Ok((edit, outcome))
}

/// Writes what `dropper` keeps of `merged` to `outputs`.
fn copy<F: FnMut(&[u8]) -> bool>(
    merged: &mut MergeIter,
    dropper: &mut Dropper<F>,
    outputs: &mut Outputs<'_>,
) -> Result<Vec<crate::version::FileDesc>> {
    merged.seek_to_first();
    while merged.valid() {
        if dropper.keep(merged.key())? {
            outputs.add(merged.key(), merged.value())?;
        }
        merged.next();
    }
    merged.status()?;
    outputs.finish()
}

/// The stale tracker and the horizon of one compaction.
struct Stale<'a> {
    tracker: &'a dyn Tracker,
    horizon: SeqNo,
}

/// [`copy`], also dropping stale versions (see the module doc) and noting
/// in `outcome.change` where the versions the tracker names went.
fn copy_dropping_stale<F: FnMut(&[u8]) -> bool>(
    merged: &mut MergeIter,
    dropper: &mut Dropper<F>,
    outputs: &mut Outputs<'_>,
    stale: &Stale<'_>,
    outcome: &mut Outcome,
) -> Result<Vec<crate::version::FileDesc>> {
    let mut user_key: Option<Vec<u8>> = None;
    let mut newest: Option<Entry> = None;
    merged.seek_to_first();
    while merged.valid() {
        let (ikey, value) = (merged.key(), merged.value());
        let p = crate::types::parse_internal_key(ikey).ok_or_else(|| {
            crate::error::corrupt(0, "malformed internal key in compaction input")
        })?;
        if user_key.as_deref() != Some(p.user_key) {
            user_key = Some(p.user_key.to_vec());
            newest = stale.tracker.newest(p.user_key);
        }
        if newest.is_some_and(|e| e.seq > p.seq && e.seq <= stale.horizon) {
            outcome.stale_dropped += 1;
            merged.next();
            continue;
        }
        let keep = dropper.keep(ikey)?;
        if keep {
            outputs.add(ikey, value)?;
        }
        if newest.is_some_and(|e| e.seq == p.seq) {
            let key = p.user_key.to_vec();
            match outputs.current_id() {
                Some(table) if keep => outcome.change.repointed.push((key, p.seq, table)),
                _ => outcome.change.erased.push((key, p.seq)),
            }
        }
        merged.next();
    }
    merged.status()?;
    outputs.finish()
}
