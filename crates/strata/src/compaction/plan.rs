//! The compaction plan: what to compact, as plain data.
//!
//! ```text
//! plan := u8 version(4) u8 kind varint(level) varint(output_level)
//!         varint(n) varint(id)*n   varint(m) varint(id)*m
//!         varint(target_file_size) u8 bottommost bytes(compact_pointer)
//!         u8 trigger
//!         varint(s) varint(snapshot)*s  varint(k) bytes(split)*k
//!         varint(first_file_number) varint(file_numbers)
//!         varint(r) (varint(row) varint(from) varint(to))*r
//! ```
//!
//! Kinds: 0 move, 1 merge, 2 rewrite. Triggers: 0 size, 1 stale, 2 manual.
//! The row slices are a column compaction's part of the matrix container
//! (`l0=matrix`): cells `[from, to)` of each row.
//! The last three groups are the [`Assignment`] the scheduler adds before
//! the plan runs: with them a plan is everything an executor in another
//! process needs besides the table files.

use crate::coding::{put_bytes, put_varint, Reader};
use crate::error::{corrupt, Result};
pub use crate::l0::RowSlice;
use crate::types::SeqNo;

/// How a plan is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanKind {
    /// Re-link the input files to the next level without rewriting them.
    Move = 0,
    /// Merge inputs into new tables.
    Merge = 1,
    /// Rewrite one table in its own level (`level == output_level`, no
    /// `next_inputs`): drops its stale versions when nothing lies below it
    /// to merge with.
    Rewrite = 2,
    /// Delete the inputs without reading them (`level == output_level`
    /// ≥ 1, no `next_inputs`): a range tombstone every reader sees hides
    /// each of their entries.
    Drop = 3,
}

/// Why a plan was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A level over its size or table-count target.
    Size = 0,
    /// A table whose stale versions passed `stale_threshold`.
    Stale = 1,
    /// `compact_range`.
    Manual = 2,
    /// A table point lookups kept searching in vain
    /// ([`crate::version::FileMeta::read_exhausted`]).
    Read = 3,
    /// A table holding versions a range tombstone hides
    /// (`picker::range_dels`).
    RangeDel = 4,
    /// Tables whose every entry has expired (`ttl_secs`,
    /// `picker::expired`).
    Expired = 5,
}

/// One compaction job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub kind: PlanKind,
    /// Level of `inputs`.
    pub level: usize,
    /// Level of `next_inputs` and of the outputs.
    pub output_level: usize,
    /// File ids taken from `level`.
    pub inputs: Vec<u64>,
    /// File ids taken from `output_level`.
    pub next_inputs: Vec<u64>,
    /// Outputs are cut near this size.
    pub target_file_size: u64,
    /// No level below `output_level` overlaps the inputs' key range.
    pub bottommost: bool,
    /// Largest internal key of the inputs: the level's next round-robin start.
    pub compact_pointer: Vec<u8>,
    pub trigger: Trigger,
    /// A column compaction's cells of the matrix container's rows (level
    /// 0 only; empty otherwise).
    pub rows: Vec<RowSlice>,
    /// Filled in by the scheduler when the plan starts.
    pub assigned: Assignment,
}

/// What the scheduler adds to a picked plan before it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Live snapshot sequence numbers (a version visible to one of them,
    /// or to the oldest, must stay).
    pub snapshots: Vec<SeqNo>,
    /// Sub-task boundaries, ascending user keys: sub-task `i` covers
    /// `[splits[i-1], splits[i])` (unbounded at both ends). Empty: one
    /// sub-task.
    pub splits: Vec<Vec<u8>>,
    /// Sub-task `i` names its outputs from `first_file_number + i *
    /// file_numbers` on, `file_numbers` of them at most.
    pub first_file_number: u64,
    pub file_numbers: u64,
}

impl Assignment {
    /// Number of sub-tasks.
    pub fn subtasks(&self) -> usize {
        self.splits.len() + 1
    }

    /// Key range `[lo, hi)` of sub-task `i` (`None`: unbounded).
    pub fn range(&self, i: usize) -> (Option<&[u8]>, Option<&[u8]>) {
        let lo = i.checked_sub(1).and_then(|j| self.splits.get(j));
        (lo.map(Vec::as_slice), self.splits.get(i).map(Vec::as_slice))
    }

    /// The file numbers reserved for sub-task `i`.
    pub fn numbers(&self, i: usize) -> std::ops::Range<u64> {
        let first = self
            .first_file_number
            .saturating_add((i as u64).saturating_mul(self.file_numbers));
        first..first.saturating_add(self.file_numbers)
    }
}

const PLAN_VERSION: u8 = 4;

impl Plan {
    /// Checks the plan's shape: a rewrite takes one table of a sorted level
    /// (≥ 1) and stays there; other kinds go one level down.
    pub fn is_well_formed(&self) -> bool {
        let shape = match self.kind {
            PlanKind::Rewrite | PlanKind::Drop => {
                self.level >= 1
                    && (self.kind == PlanKind::Drop || self.inputs.len() == 1)
                    && self.level == self.output_level
                    && !self.inputs.is_empty()
                    && self.next_inputs.is_empty()
            }
            PlanKind::Move | PlanKind::Merge => {
                self.output_level == self.level + 1
                    && !(self.inputs.is_empty() && self.rows.is_empty())
                    && (self.rows.is_empty() || (self.level == 0 && self.kind == PlanKind::Merge))
                    && self.rows.iter().all(|r| r.from <= r.to)
            }
        };
        shape
            && (self.kind == PlanKind::Move || self.kind == PlanKind::Merge || self.rows.is_empty())
    }

    /// All input file ids with their levels.
    pub fn all_inputs(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.inputs
            .iter()
            .map(|id| (self.level, *id))
            .chain(self.next_inputs.iter().map(|id| (self.output_level, *id)))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![PLAN_VERSION, self.kind as u8];
        put_varint(&mut b, self.level as u64);
        put_varint(&mut b, self.output_level as u64);
        for ids in [&self.inputs, &self.next_inputs] {
            put_varint(&mut b, ids.len() as u64);
            for id in ids {
                put_varint(&mut b, *id);
            }
        }
        put_varint(&mut b, self.target_file_size);
        b.push(u8::from(self.bottommost));
        put_bytes(&mut b, &self.compact_pointer);
        b.push(self.trigger as u8);
        let a = &self.assigned;
        put_varint(&mut b, a.snapshots.len() as u64);
        for s in &a.snapshots {
            put_varint(&mut b, *s);
        }
        put_varint(&mut b, a.splits.len() as u64);
        for k in &a.splits {
            put_bytes(&mut b, k);
        }
        put_varint(&mut b, a.first_file_number);
        put_varint(&mut b, a.file_numbers);
        put_varint(&mut b, self.rows.len() as u64);
        for r in &self.rows {
            put_varint(&mut b, r.id);
            put_varint(&mut b, u64::from(r.from));
            put_varint(&mut b, u64::from(r.to));
        }
        b
    }

    pub fn decode(buf: &[u8]) -> Result<Plan> {
        let mut r = Reader::new(buf);
        let bad = |r: &Reader<'_>, what: &str| {
            corrupt(r.pos() as u64, format!("compaction plan: {what}"))
        };
        if r.u8() != Some(PLAN_VERSION) {
            return Err(bad(&r, "unknown version"));
        }
        let kind = match r.u8() {
            Some(0) => PlanKind::Move,
            Some(1) => PlanKind::Merge,
            Some(2) => PlanKind::Rewrite,
            Some(3) => PlanKind::Drop,
            _ => return Err(bad(&r, "unknown kind")),
        };
        let small = |r: &mut Reader<'_>| r.varint().filter(|v| *v < 64).map(|v| v as usize);
        let level = small(&mut r).ok_or_else(|| bad(&r, "bad level"))?;
        let output_level = small(&mut r).ok_or_else(|| bad(&r, "bad level"))?;
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let n = r
                .varint()
                .filter(|n| *n <= 1 << 20)
                .ok_or_else(|| bad(&r, "bad count"))?;
            for _ in 0..n {
                list.push(r.varint().ok_or_else(|| bad(&r, "truncated id"))?);
            }
        }
        let [inputs, next_inputs] = lists;
        let target_file_size = r.varint().ok_or_else(|| bad(&r, "truncated size"))?;
        let bottommost = match r.u8() {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(bad(&r, "bad flag")),
        };
        let compact_pointer = r
            .len_prefixed()
            .ok_or_else(|| bad(&r, "truncated key"))?
            .to_vec();
        let trigger = match r.u8() {
            Some(0) => Trigger::Size,
            Some(1) => Trigger::Stale,
            Some(2) => Trigger::Manual,
            Some(3) => Trigger::Read,
            Some(4) => Trigger::RangeDel,
            Some(5) => Trigger::Expired,
            _ => return Err(bad(&r, "unknown trigger")),
        };
        let mut assigned = Assignment::default();
        let n = r
            .varint()
            .filter(|n| *n <= 1 << 20)
            .ok_or_else(|| bad(&r, "bad snapshot count"))?;
        for _ in 0..n {
            let s = r.varint().ok_or_else(|| bad(&r, "truncated snapshot"))?;
            assigned.snapshots.push(s);
        }
        let n = r
            .varint()
            .filter(|n| *n <= 1 << 16)
            .ok_or_else(|| bad(&r, "bad split count"))?;
        for _ in 0..n {
            let k = r.len_prefixed().ok_or_else(|| bad(&r, "truncated split"))?;
            assigned.splits.push(k.to_vec());
        }
        assigned.first_file_number = r.varint().ok_or_else(|| bad(&r, "truncated number"))?;
        assigned.file_numbers = r.varint().ok_or_else(|| bad(&r, "truncated number"))?;
        if !assigned.splits.windows(2).all(|w| w[0] < w[1]) {
            return Err(bad(&r, "splits out of order"));
        }
        let n = r
            .varint()
            .filter(|n| *n <= 1 << 20)
            .ok_or_else(|| bad(&r, "bad row count"))?;
        let mut rows = Vec::new();
        for _ in 0..n {
            let id = r.varint().ok_or_else(|| bad(&r, "truncated row"))?;
            let cell = |r: &mut Reader<'_>| r.varint().and_then(|v| u32::try_from(v).ok());
            let from = cell(&mut r).ok_or_else(|| bad(&r, "bad row cell"))?;
            let to = cell(&mut r).ok_or_else(|| bad(&r, "bad row cell"))?;
            rows.push(RowSlice { id, from, to });
        }
        if !r.is_empty() {
            return Err(bad(&r, "trailing bytes"));
        }
        let plan = Plan {
            kind,
            level,
            output_level,
            inputs,
            next_inputs,
            target_file_size,
            bottommost,
            compact_pointer,
            trigger,
            rows,
            assigned,
        };
        if !plan.is_well_formed() {
            return Err(bad(&r, "inconsistent levels or inputs"));
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_round_trips_and_rejects_garbage() {
        let p = Plan {
            kind: PlanKind::Merge,
            level: 1,
            output_level: 2,
            inputs: vec![5],
            next_inputs: vec![7, 9],
            target_file_size: 1 << 20,
            bottommost: true,
            compact_pointer: b"abc".to_vec(),
            trigger: Trigger::Stale,
            rows: Vec::new(),
            assigned: Assignment {
                snapshots: vec![3, 9],
                splits: vec![b"k".to_vec(), b"p".to_vec()],
                first_file_number: 40,
                file_numbers: 12,
            },
        };
        assert_eq!(p.assigned.subtasks(), 3);
        assert_eq!(p.assigned.range(0), (None, Some(&b"k"[..])));
        assert_eq!(p.assigned.range(2), (Some(&b"p"[..]), None));
        assert_eq!(p.assigned.numbers(1), 52..64);
        let enc = p.encode();
        assert_eq!(Plan::decode(&enc).ok(), Some(p.clone()));
        for cut in 0..enc.len() {
            assert!(Plan::decode(&enc[..cut]).is_err());
        }
        let column = Plan {
            level: 0,
            output_level: 1,
            inputs: Vec::new(),
            rows: vec![
                RowSlice {
                    id: 30,
                    from: 4,
                    to: 90,
                },
                RowSlice {
                    id: 31,
                    from: 0,
                    to: 0,
                },
            ],
            ..p
        };
        let enc = column.encode();
        assert_eq!(Plan::decode(&enc).ok(), Some(column));
        for cut in 0..enc.len() {
            assert!(Plan::decode(&enc[..cut]).is_err());
        }
    }
}
