//! The leveled picker: a pure function from (version, options, running
//! compactions, round-robin pointers) to an optional [`Plan`]. No I/O, no locks. The
//! stale picker reuses its size triggers and [`plan_for`].
//!
//! Scores: L0 = files / `level0_file_num_compaction_trigger`; Ln = bytes /
//! target(n), target(1) = `max_bytes_for_level_base`, each deeper level
//! `max_bytes_for_level_multiplier` times larger. The highest score >= 1
//! with a plan the running compactions admit is compacted. L0 compacts all its tables (they
//! overlap) with the overlapping L1 tables; Ln compacts one table, the one
//! with the least overlap below it per byte ([`choose_file`]), with the
//! overlapping Ln+1 tables.
//! Tables with nothing below them to merge with, and no user key shared
//! between them, are moved, not rewritten (a run of up to
//! [`MAX_TABLES_PER_MOVE`] neighbouring tables of Ln, [`choose_files`]; any
//! number of L0 tables a sequential load wrote side by side).

use super::{PickEnv, Picker};
use crate::compaction::{Plan, PlanKind, Trigger};
use crate::options::Options;
use crate::types;
use crate::version::{FileMeta, Version, BYTES_PER_MISS};
use std::sync::Arc;

/// Target size of `level` (>= 1).
pub fn level_target(opts: &Options, level: usize) -> u64 {
    let mut t = opts.max_bytes_for_level_base;
    for _ in 1..level {
        t = t.saturating_mul(opts.max_bytes_for_level_multiplier);
    }
    t
}

/// Compaction score of every level but the last.
pub fn scores(v: &Version, opts: &Options) -> Vec<f64> {
    let n = v.levels.len();
    (0..n.saturating_sub(1))
        .map(|level| {
            if level == 0 {
                v.level_files(0) as f64 / opts.level0_file_num_compaction_trigger as f64
            } else {
                v.level_bytes(level) as f64 / level_target(opts, level) as f64
            }
        })
        .collect()
}

/// Bytes by which levels exceed their targets: the compaction debt that
/// paces writes.
pub fn compaction_debt(v: &Version, opts: &Options) -> u64 {
    let mut debt = 0;
    if v.level_files(0) >= opts.level0_file_num_compaction_trigger {
        debt += v.level_bytes(0);
    }
    for level in 1..v.levels.len().saturating_sub(1) {
        debt += v
            .level_bytes(level)
            .saturating_sub(level_target(opts, level));
    }
    debt
}

/// Size triggers only (LevelDB's and RocksDB's leveled compaction).
pub struct Leveled;

impl Picker for Leveled {
    fn pick(&self, env: &PickEnv<'_>) -> Option<Plan> {
        pick_by_size(env).or_else(|| pick_by_reads(env))
    }
}

/// A read-triggered compaction (LevelDB's seek compaction): when no level
/// is over its target, a table whose allowance of vain reads ran out
/// ([`FileMeta::read_exhausted`]; `Options::read_compaction`) is merged into
/// the next level, so that later lookups search one table fewer, once the
/// misses charged to the plan's inputs pay for every byte the plan reads
/// at [`BYTES_PER_MISS`] each, the next level's overlap included (a table
/// of L1 over ten times its size of L2 must miss ten times its allowance).
/// From level 0 every L0 table goes (they overlap); a plan that would only
/// move tables is not made, since it would leave the lookups' path as it
/// is. Off with `Options::read_compaction = false`.
pub(super) fn pick_by_reads(env: &PickEnv<'_>) -> Option<Plan> {
    if !env.opts.read_compaction {
        return None;
    }
    let v = env.version;
    for (level, files) in v.levels.iter().enumerate() {
        for f in files {
            if !f.read_exhausted() || env.in_flight.contains(f.id()) {
                continue;
            }
            let inputs = if level == 0 {
                if env.in_flight.l0_busy() {
                    break;
                }
                files.clone()
            } else {
                vec![f.clone()]
            };
            let misses: u64 = inputs.iter().map(|f| f.read_misses()).sum();
            let plan = plan_for(v, env.opts, level, inputs, Trigger::Read)
                .filter(|p| p.kind != PlanKind::Move)
                .filter(|p| misses.saturating_mul(BYTES_PER_MISS) >= plan_bytes(v, p))
                .and_then(|mut p| {
                    // An early plan: the level's round robin stays put.
                    p.compact_pointer.clear();
                    env.admit(p)
                });
            if plan.is_some() {
                return plan;
            }
            if level == 0 {
                // Every L0 table gives the same plan.
                break;
            }
        }
    }
    None
}

/// Bytes of the tables `p` reads (its inputs and the next level's).
fn plan_bytes(v: &Version, p: &Plan) -> u64 {
    let of = |level: usize, ids: &[u64]| -> u64 {
        v.levels
            .get(level)
            .into_iter()
            .flatten()
            .filter(|f| ids.contains(&f.id()))
            .map(|f| f.desc.size)
            .sum()
    };
    of(p.level, &p.inputs) + of(p.output_level, &p.next_inputs)
}

/// The most urgent size-triggered compaction that may run beside the
/// running ones ([`crate::compaction::scheduler::InFlight::admits`]).
pub(super) fn pick_by_size(env: &PickEnv<'_>) -> Option<Plan> {
    let (v, opts) = (env.version, env.opts);
    let mut ranked: Vec<(usize, f64)> = scores(v, opts).into_iter().enumerate().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (level, score) in ranked {
        if score < 1.0 {
            break;
        }
        let inputs: Vec<Arc<FileMeta>> = if level == 0 {
            if env.in_flight.l0_busy() {
                continue;
            }
            v.levels.first().cloned().unwrap_or_default()
        } else {
            let Some(files) = v.levels.get(level) else {
                continue;
            };
            // Only tables a compaction could take now: not in flight, and
            // meeting no table in flight and no running output below.
            let free: Vec<Arc<FileMeta>> = files
                .iter()
                .filter(|f| is_free(env, level, f))
                .cloned()
                .collect();
            let next = v.levels.get(level + 1).map_or(&[][..], Vec::as_slice);
            let ptr = env.pointers.get(level).map_or(&[][..], Vec::as_slice);
            choose_files(&free, next, ptr)
        };
        if let Some(plan) =
            plan_for(v, opts, level, inputs, Trigger::Size).and_then(|p| env.admit(p))
        {
            return Some(plan);
        }
    }
    None
}

/// True if table `f` of `level` (≥ 1) could be compacted into the next
/// level beside the running compactions.
fn is_free(env: &PickEnv<'_>, level: usize, f: &FileMeta) -> bool {
    let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
    !env.in_flight.contains(f.id())
        && !env.in_flight.writes_into(level + 1, lo, hi)
        && env
            .version
            .overlapping(level + 1, Some(lo), Some(hi))
            .iter()
            .all(|n| !env.in_flight.contains(n.id()))
}

/// The table of a level (sorted, disjoint `files`) to compact into the next
/// level (`next`): the one whose overlapping next-level bytes are smallest
/// relative to its own size, so each compaction rewrites as little as
/// possible per byte it moves down (RocksDB's `kMinOverlappingRatio`).
/// Ties go to the first table after the round-robin pointer `ptr`, so equal
/// candidates (an empty next level) are still taken in key order.
pub fn choose_file<'a>(
    files: &'a [Arc<FileMeta>],
    next: &[Arc<FileMeta>],
    ptr: &[u8],
) -> Option<&'a Arc<FileMeta>> {
    let start = files
        .iter()
        .position(|f| ptr.is_empty() || types::compare_internal(&f.desc.largest, ptr).is_gt())
        .unwrap_or(0);
    let spans: Vec<Span<'_>> = files.iter().map(|f| Span::of(f)).collect();
    let below: Vec<Span<'_>> = next.iter().map(|f| Span::of(f)).collect();
    files.get(least_overlap(&spans, &below, start)?)
}

/// Most tables one trivial move takes down (RocksDB moves up to 4 too): a
/// run of neighbours that together overlap nothing below moves in one plan
/// instead of one per pick, so the level drains before the next merge into
/// it has to rewrite them; the bound keeps one move from emptying a level.
const MAX_TABLES_PER_MOVE: usize = 4;

/// The input tables of an Ln→Ln+1 compaction: [`choose_file`]'s table, and
/// when it overlaps nothing in `next` (a move), its neighbours that extend
/// the moved range without meeting a `next` table.
pub fn choose_files(
    files: &[Arc<FileMeta>],
    next: &[Arc<FileMeta>],
    ptr: &[u8],
) -> Vec<Arc<FileMeta>> {
    let Some(chosen) = choose_file(files, next, ptr) else {
        return Vec::new();
    };
    let Some(at) = files.iter().position(|f| Arc::ptr_eq(f, chosen)) else {
        return vec![chosen.clone()];
    };
    let spans: Vec<Span<'_>> = files.iter().map(|f| Span::of(f)).collect();
    let below: Vec<Span<'_>> = next.iter().map(|f| Span::of(f)).collect();
    files[move_run(&spans, &below, at)].to_vec()
}

/// The index range of `files` (sorted, disjoint) to take with `files[at]`:
/// only `at` unless it overlaps nothing in `next`; then also the neighbours,
/// right first, while the whole run still overlaps nothing in `next`, up
/// to [`MAX_TABLES_PER_MOVE`].
fn move_run(files: &[Span<'_>], next: &[Span<'_>], at: usize) -> std::ops::Range<usize> {
    let clear = |lo: usize, hi: usize| {
        let (Some(first), Some(last)) = (files.get(lo), files.get(hi)) else {
            return false;
        };
        let from = next.partition_point(|n| n.hi < first.lo);
        next.get(from).is_none_or(|n| n.lo > last.hi)
    };
    let (mut lo, mut hi) = (at, at);
    if !clear(lo, hi) {
        return at..at + 1;
    }
    while hi - lo + 1 < MAX_TABLES_PER_MOVE && hi + 1 < files.len() && clear(lo, hi + 1) {
        hi += 1;
    }
    while hi - lo + 1 < MAX_TABLES_PER_MOVE && lo > 0 && clear(lo - 1, hi) {
        lo -= 1;
    }
    lo..hi + 1
}

/// True when no two of `tables` share a user key, so they can sit side by
/// side in one sorted level.
fn disjoint(tables: &[Arc<FileMeta>]) -> bool {
    let mut spans: Vec<Span<'_>> = tables.iter().map(|f| Span::of(f)).collect();
    spans_disjoint(&mut spans)
}

fn spans_disjoint(spans: &mut [Span<'_>]) -> bool {
    spans.sort_by(|a, b| a.lo.cmp(b.lo));
    spans.windows(2).all(|w| w[0].hi < w[1].lo)
}

/// A table's user-key range and size, as the picker sees it.
#[derive(Debug, Clone, Copy)]
struct Span<'a> {
    lo: &'a [u8],
    hi: &'a [u8],
    size: u64,
}

impl<'a> Span<'a> {
    fn of(f: &'a FileMeta) -> Self {
        Span {
            lo: f.smallest_user_key(),
            hi: f.largest_user_key(),
            size: f.desc.size,
        }
    }
}

/// Index of the span of `files` with the least `next` bytes overlapping it
/// per byte of its own; among equals, the first from `start` on (wrapping).
fn least_overlap(files: &[Span<'_>], next: &[Span<'_>], start: usize) -> Option<usize> {
    let ratio = |f: &Span<'_>| {
        let first = next.partition_point(|n| n.hi < f.lo);
        let overlap: u64 = next[first..]
            .iter()
            .take_while(|n| n.lo <= f.hi)
            .map(|n| n.size)
            .sum();
        overlap as f64 / f.size.max(1) as f64
    };
    let n = files.len();
    let mut best: Option<(usize, f64)> = None;
    for i in (0..n).map(|k| (start + k) % n) {
        let r = ratio(&files[i]);
        if best.is_none_or(|(_, b)| r < b) {
            best = Some((i, r));
        }
    }
    best.map(|(i, _)| i)
}

/// A plan compacting every table of `level` overlapping `[lo, hi]` into the
/// next level (manual `compact_range`).
pub fn pick_range(
    v: &Version,
    opts: &Options,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Option<Plan> {
    let inputs = if level == 0 {
        // L0 tables overlap each other: take them all to keep newer data above older.
        v.levels.first().cloned().unwrap_or_default()
    } else {
        v.overlapping(level, lo, hi)
    };
    plan_for(v, opts, level, inputs, Trigger::Manual)
}

/// Plans rewriting in place each table of the last level overlapping
/// `[lo, hi]`, one plan per table (manual `compact_range` with a
/// compaction filter: the filter sees what the last level holds).
pub fn pick_last_level(
    v: &Version,
    opts: &Options,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Vec<Plan> {
    let Some(level) = v.levels.len().checked_sub(1).filter(|l| *l > 0) else {
        return Vec::new();
    };
    v.overlapping(level, lo, hi)
        .iter()
        .map(|f| rewrite_plan(v, opts, level, f, Trigger::Manual))
        .collect()
}

/// The rewrite of table `f` alone in its own `level` (≥ 1), for `trigger`;
/// bottommost when no deeper level overlaps it.
pub(super) fn rewrite_plan(
    v: &Version,
    opts: &Options,
    level: usize,
    f: &Arc<FileMeta>,
    trigger: Trigger,
) -> Plan {
    let (lo, hi) = (f.smallest_user_key(), f.largest_user_key());
    let bottommost =
        ((level + 1)..v.levels.len()).all(|l| v.overlapping(l, Some(lo), Some(hi)).is_empty());
    Plan {
        kind: PlanKind::Rewrite,
        level,
        output_level: level,
        inputs: vec![f.id()],
        next_inputs: Vec::new(),
        target_file_size: opts.target_file_size,
        bottommost,
        compact_pointer: Vec::new(),
        trigger,
        rows: Vec::new(),
        assigned: Default::default(),
    }
}

/// A plan taking `inputs` of `level` and the tables of the next level they
/// overlap down one level (a move when nothing below overlaps and no two
/// inputs share a user key).
pub(super) fn plan_for(
    v: &Version,
    opts: &Options,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
    trigger: Trigger,
) -> Option<Plan> {
    if inputs.is_empty() || level + 1 >= v.levels.len() {
        return None;
    }
    let lo = inputs.iter().map(|f| f.smallest_user_key()).min()?.to_vec();
    let hi = inputs.iter().map(|f| f.largest_user_key()).max()?.to_vec();
    let next = v.overlapping(level + 1, Some(&lo), Some(&hi));
    // The output covers the next-level tables too, which may reach beyond
    // the inputs' range: a tombstone from them may go only if no deeper
    // level holds its key, so "bottommost" is judged on the whole range.
    let all = || inputs.iter().chain(next.iter());
    let all_lo = all().map(|f| f.smallest_user_key()).min()?.to_vec();
    let all_hi = all().map(|f| f.largest_user_key()).max()?.to_vec();
    let bottommost = ((level + 2)..v.levels.len())
        .all(|l| v.overlapping(l, Some(&all_lo), Some(&all_hi)).is_empty());
    let compact_pointer = inputs
        .iter()
        .map(|f| f.desc.largest.clone())
        .max_by(|a, b| types::compare_internal(a, b))
        .unwrap_or_default();
    // Nothing below to merge with and no two inputs sharing a user key (L0
    // tables of a sequential load): the tables move down unchanged. A
    // manual compaction with a compaction filter rewrites them, so the
    // filter sees every entry.
    let filtering = trigger == Trigger::Manual && opts.compaction_filter.get().is_some();
    let kind = if next.is_empty() && disjoint(&inputs) && !filtering {
        PlanKind::Move
    } else {
        PlanKind::Merge
    };
    Some(Plan {
        kind,
        level,
        output_level: level + 1,
        inputs: inputs.iter().map(|f| f.id()).collect(),
        next_inputs: next.iter().map(|f| f.id()).collect(),
        target_file_size: opts.target_file_size,
        bottommost,
        compact_pointer,
        trigger,
        rows: Vec::new(),
        assigned: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(lo: &'static str, hi: &'static str, size: u64) -> Span<'static> {
        Span {
            lo: lo.as_bytes(),
            hi: hi.as_bytes(),
            size,
        }
    }

    #[test]
    fn the_table_with_least_overlap_per_byte_is_chosen() {
        let files = [span("a", "c", 10), span("d", "f", 10), span("g", "i", 20)];
        let next = [
            span("a", "b", 50),
            span("c", "d", 50),
            span("e", "e", 5),
            span("h", "z", 30),
        ];
        // Ratios: a-c 100/10, d-f 55/10, g-i 30/20.
        assert_eq!(least_overlap(&files, &next, 0), Some(2));
        // No overlap at all for the middle one.
        let next = [span("a", "c", 50), span("g", "z", 50)];
        assert_eq!(least_overlap(&files, &next, 0), Some(1));
    }

    #[test]
    fn only_tables_without_a_shared_user_key_are_disjoint() {
        let mut v = [span("m", "p", 1), span("a", "c", 1), span("d", "f", 1)];
        assert!(spans_disjoint(&mut v));
        // Two tables ending and starting on the same user key overlap.
        let mut v = [span("a", "c", 1), span("c", "f", 1)];
        assert!(!spans_disjoint(&mut v));
        let mut v = [span("a", "z", 1), span("d", "f", 1)];
        assert!(!spans_disjoint(&mut v));
        assert!(spans_disjoint(&mut [span("a", "a", 1)]));
    }

    #[test]
    fn a_move_takes_neighbours_that_overlap_nothing_below() {
        let files = [
            span("a", "b", 1),
            span("c", "d", 1),
            span("e", "f", 1),
            span("g", "h", 1),
            span("i", "j", 1),
            span("k", "l", 1),
        ];
        // Nothing below: the chosen table and three to its right.
        assert_eq!(move_run(&files, &[], 1), 1..5);
        // At the end of the level it grows to the left.
        assert_eq!(move_run(&files, &[], 5), 2..6);
        // A table below between "e-f" and "g-h" ("fz") stops the run there;
        // one inside "i-j" too.
        let next = [span("fz", "fz", 1), span("j", "j", 1)];
        assert_eq!(move_run(&files, &next, 1), 0..3);
        assert_eq!(move_run(&files, &next, 3), 3..4);
        // A table that overlaps something below is merged alone.
        assert_eq!(move_run(&files, &next, 4), 4..5);
    }

    #[test]
    fn ties_go_to_the_first_after_the_pointer() {
        let files = [span("a", "b", 10), span("c", "d", 10), span("e", "f", 10)];
        assert_eq!(least_overlap(&files, &[], 0), Some(0));
        assert_eq!(least_overlap(&files, &[], 2), Some(2));
        assert_eq!(least_overlap(&[], &[], 0), None);
    }
}
