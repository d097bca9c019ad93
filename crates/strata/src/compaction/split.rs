//! Cutting a compaction into key-range sub-tasks (CoPro).
//!
//! Levels ≥ 1 hold disjoint tables, so a compaction can be cut at the
//! boundaries of its next-level input tables: each next-level table falls
//! wholly into one sub-task, each sub-task reads the upper-level inputs
//! clipped to its range, and the sub-tasks share no data. The cuts are
//! chosen so that the next-level input bytes divide as evenly as table
//! boundaries allow (the upper level's keys are taken to spread like the
//! next level's). With fewer than two next-level tables the upper-level
//! inputs' boundaries are used when they are disjoint (level ≥ 1);
//! otherwise the plan stays one sub-task.

use super::{Plan, PlanKind};
use crate::version::{FileMeta, Version};
use std::sync::Arc;

/// Sub-task boundaries for `plan` in `v`: at most `n - 1` ascending user
/// keys (see [`super::Assignment::splits`]).
pub fn split(plan: &Plan, v: &Version, n: usize) -> Vec<Vec<u8>> {
    if n < 2 || plan.kind != PlanKind::Merge {
        return Vec::new();
    }
    let find = |level: usize, ids: &[u64]| -> Vec<Arc<FileMeta>> {
        let files = v.levels.get(level).map_or(&[][..], Vec::as_slice);
        ids.iter()
            .filter_map(|id| files.iter().find(|f| f.id() == *id).cloned())
            .collect()
    };
    let next = find(plan.output_level, &plan.next_inputs);
    let upper = find(plan.level, &plan.inputs);
    let by = if next.len() >= 2 {
        &next
    } else if plan.level >= 1 && next.is_empty() {
        &upper
    } else {
        return Vec::new();
    };
    let spans: Vec<(&[u8], u64)> = by
        .iter()
        .map(|f| (f.smallest_user_key(), f.size()))
        .collect();
    split_points(&spans, n)
}

/// Up to `n - 1` cut keys among `tables[1..]`'s first keys (`tables`:
/// (smallest user key, bytes), in key order) dividing the bytes about
/// evenly: cut `i` is the table boundary nearest to `i/n` of the total.
pub fn split_points(tables: &[(&[u8], u64)], n: usize) -> Vec<Vec<u8>> {
    if n < 2 || tables.len() < 2 {
        return Vec::new();
    }
    let total: u64 = tables.iter().map(|t| t.1).sum();
    // before[j]: bytes of tables[..j].
    let mut before = Vec::with_capacity(tables.len());
    let mut acc = 0u64;
    for t in tables {
        before.push(acc);
        acc += t.1;
    }
    let mut cuts: Vec<usize> = Vec::new();
    for i in 1..n {
        let target = (total as u128 * i as u128 / n as u128) as u64;
        let lowest = cuts.last().map_or(1, |c| c + 1);
        let best = (lowest..tables.len()).min_by_key(|j| before[*j].abs_diff(target));
        match best {
            Some(j) => cuts.push(j),
            None => break,
        }
    }
    cuts.iter().map(|j| tables[*j].0.to_vec()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(tables: &[(&'static str, u64)], n: usize) -> Vec<String> {
        let t: Vec<(&[u8], u64)> = tables.iter().map(|(k, s)| (k.as_bytes(), *s)).collect();
        split_points(&t, n)
            .into_iter()
            .map(|k| String::from_utf8(k).unwrap())
            .collect()
    }

    #[test]
    fn cuts_divide_bytes_evenly_at_table_boundaries() {
        let t = [("a", 10), ("c", 10), ("e", 10), ("g", 10)];
        assert_eq!(cut(&t, 2), vec!["e"]);
        assert_eq!(cut(&t, 4), vec!["c", "e", "g"]);
        // More sub-tasks than boundaries: one per table.
        assert_eq!(cut(&t, 9), vec!["c", "e", "g"]);
        // Uneven sizes: the half-way point lies after the big first table.
        let t = [("a", 30), ("c", 5), ("e", 5), ("g", 20)];
        assert_eq!(cut(&t, 2), vec!["c"]);
        assert!(cut(&[("a", 1)], 4).is_empty());
        assert!(cut(&t, 1).is_empty());
    }
}
