//! What is being compacted: the tables in flight and the key range each
//! running compaction writes. Several compactions run at once when they
//! share no input table and their outputs cannot overlap (Pebble's rule);
//! pickers ask [`InFlight::admits`] before returning a plan.
//!
//! Rules, given a version in which every running compaction's inputs are
//! still installed:
//! - no input of the plan is in flight;
//! - a plan out of L0 waits while another L0 compaction runs (L0 tables
//!   overlap, and must reach L1 oldest first);
//! - the plan's key range (over all inputs) must not meet the key range of
//!   a running compaction with the same output level, or two compactions
//!   would write overlapping tables into one sorted level.
//!
//! A plan from level n whose range meets a running compaction's inputs in
//! level n+1 names those tables as its own next-level inputs, so the first
//! rule covers reads of a level another compaction writes from.

use super::Plan;
use crate::version::{FileMeta, Version};
use std::collections::HashSet;
use std::sync::Arc;

/// One running compaction, as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub ticket: u64,
    pub level: usize,
    pub output_level: usize,
    /// Smallest and largest user key over all its inputs.
    pub lo: Vec<u8>,
    pub hi: Vec<u8>,
    pub tables: Vec<u64>,
}

/// The running compactions and their input tables.
#[derive(Debug, Default, Clone)]
pub struct InFlight {
    running: Vec<Running>,
    tables: HashSet<u64>,
    next_ticket: u64,
}

/// Smallest and largest user key of `plan`'s inputs in `v`; `None` if the
/// plan names no installed table.
pub fn plan_range(plan: &Plan, v: &Version) -> Option<(Vec<u8>, Vec<u8>)> {
    let files: Vec<&Arc<FileMeta>> = plan
        .all_inputs()
        .filter_map(|(level, id)| v.levels.get(level)?.iter().find(|f| f.id() == id))
        .collect();
    let rows = v.rows.slices_range(&plan.rows);
    let lo = files
        .iter()
        .map(|f| f.smallest_user_key())
        .chain(rows.as_ref().map(|r| r.0.as_slice()))
        .min()?;
    let hi = files
        .iter()
        .map(|f| f.largest_user_key())
        .chain(rows.as_ref().map(|r| r.1.as_slice()))
        .max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

impl InFlight {
    /// True if `id` is an input of a running compaction.
    pub fn contains(&self, id: u64) -> bool {
        self.tables.contains(&id)
    }

    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// True if a running compaction reads or writes `level`.
    pub fn touches_level(&self, level: usize) -> bool {
        self.running
            .iter()
            .any(|r| r.level == level || r.output_level == level)
    }

    /// True if a running compaction reads L0.
    pub fn l0_busy(&self) -> bool {
        self.running.iter().any(|r| r.level == 0)
    }

    /// True if a running compaction writes `level` somewhere in `[lo, hi]`.
    pub fn writes_into(&self, level: usize, lo: &[u8], hi: &[u8]) -> bool {
        self.running
            .iter()
            .any(|r| r.output_level == level && r.lo.as_slice() <= hi && lo <= r.hi.as_slice())
    }

    /// True if `plan` (picked from `v`) may start now; see the module doc.
    pub fn admits(&self, plan: &Plan, v: &Version) -> bool {
        if plan.all_inputs().any(|(_, id)| self.tables.contains(&id)) {
            return false;
        }
        if plan.level == 0 && self.l0_busy() {
            return false;
        }
        match plan_range(plan, v) {
            Some((lo, hi)) => !self.writes_into(plan.output_level, &lo, &hi),
            None => false,
        }
    }

    /// Records `plan` as running; returns the ticket to [`Self::finish`] it.
    pub fn start(&mut self, plan: &Plan, v: &Version) -> u64 {
        let (lo, hi) = plan_range(plan, v).unwrap_or_default();
        self.next_ticket += 1;
        let tables: Vec<u64> = plan.all_inputs().map(|(_, id)| id).collect();
        self.tables.extend(tables.iter().copied());
        self.running.push(Running {
            ticket: self.next_ticket,
            level: plan.level,
            output_level: plan.output_level,
            lo,
            hi,
            tables,
        });
        self.next_ticket
    }

    /// Adds `ids` to the tables of the compaction of `ticket` (its outputs,
    /// while the stale tracker learns where their keys went).
    pub fn hold(&mut self, ticket: u64, ids: impl IntoIterator<Item = u64>) {
        if let Some(r) = self.running.iter_mut().find(|r| r.ticket == ticket) {
            for id in ids {
                r.tables.push(id);
                self.tables.insert(id);
            }
        }
    }

    /// Marks a flush's new L0 tables busy while the listeners hear of them
    /// (outside the state mutex): L0 reads as busy, so no plan, picked or
    /// manual, moves or merges them before their creation is announced.
    /// Undone by [`Self::finish`] with the returned ticket.
    pub fn announce_flush(&mut self, ids: impl IntoIterator<Item = u64>) -> u64 {
        self.next_ticket += 1;
        let tables: Vec<u64> = ids.into_iter().collect();
        self.tables.extend(tables.iter().copied());
        self.running.push(Running {
            ticket: self.next_ticket,
            level: 0,
            output_level: 0,
            lo: Vec::new(),
            hi: Vec::new(),
            tables,
        });
        self.next_ticket
    }

    /// Forgets the compaction of `ticket`.
    pub fn finish(&mut self, ticket: u64) {
        if let Some(i) = self.running.iter().position(|r| r.ticket == ticket) {
            let r = self.running.swap_remove(i);
            for id in r.tables {
                self.tables.remove(&id);
            }
        }
    }

    /// Records a running compaction given by hand (picker fixtures).
    #[cfg(test)]
    pub fn push(&mut self, level: usize, output_level: usize, lo: &[u8], hi: &[u8], ids: &[u64]) {
        self.next_ticket += 1;
        self.tables.extend(ids.iter().copied());
        self.running.push(Running {
            ticket: self.next_ticket,
            level,
            output_level,
            lo: lo.to_vec(),
            hi: hi.to_vec(),
            tables: ids.to_vec(),
        });
    }
}
