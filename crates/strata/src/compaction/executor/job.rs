//! A plan resolved against the tables it names: everything a sub-task
//! reads besides the table files. Built from a version on the host, or
//! from a request in a compaction worker ([`super::offload`]).

use super::Outcome;
use crate::compaction::{Plan, PlanKind};
use crate::error::{Error, Result};
use crate::filename::table_path;
use crate::io::FileSystem;
use crate::l0::Run;
use crate::rangedel::Cover;
use crate::stale::CompactionChange;
use crate::version::{Edit, FileDesc, FileMeta, Version};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A plan and the tables it reads.
pub struct Job<'p> {
    pub plan: &'p Plan,
    /// The plan's `inputs`, in plan order.
    pub inputs: Vec<Arc<FileMeta>>,
    /// The plan's `next_inputs`, in key order.
    pub next: Vec<Arc<FileMeta>>,
    /// The plan's level-0 runs (a column compaction's cells of rows).
    pub rows: Vec<Run>,
    /// User-key ranges of the tables below the output level that meet the
    /// plan's range, one list per level (sorted, disjoint): a tombstone
    /// whose key one of them covers must stay.
    pub deeper: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    /// (smallest user key, largest user key, bytes) of the tables of the
    /// level below the output level that meet the plan's range, in key
    /// order: outputs are cut to line up with them.
    pub grandparents: Vec<(Vec<u8>, Vec<u8>, u64)>,
    /// The version's range tombstones: versions they hide are dropped
    /// where no snapshot needs them.
    pub cover: Cover,
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

/// True if `[lo, hi]` meets the sub-task range `[from, to)`.
pub fn meets(lo: &[u8], hi: &[u8], from: Option<&[u8]>, to: Option<&[u8]>) -> bool {
    !(from.is_some_and(|f| hi < f) || to.is_some_and(|t| lo >= t))
}

impl<'p> Job<'p> {
    /// Resolves `plan` against the version it was picked from.
    pub fn resolve(plan: &'p Plan, v: &Version) -> Result<Job<'p>> {
        if !plan.is_well_formed() {
            return Err(Error::InvalidArgument(format!("malformed plan {plan:?}")));
        }
        let inputs: Vec<Arc<FileMeta>> = plan
            .inputs
            .iter()
            .map(|id| find(v, plan.level, *id))
            .collect::<Result<_>>()?;
        let next: Vec<Arc<FileMeta>> = plan
            .next_inputs
            .iter()
            .map(|id| find(v, plan.output_level, *id))
            .collect::<Result<_>>()?;
        let rows = v.rows.runs(&plan.rows)?;
        let rows_range = v.rows.slices_range(&plan.rows);
        let all = || inputs.iter().chain(&next);
        let lo = all()
            .map(|f| f.smallest_user_key())
            .chain(rows_range.as_ref().map(|r| r.0.as_slice()))
            .min()
            .map(<[u8]>::to_vec);
        let hi = all()
            .map(|f| f.largest_user_key())
            .chain(rows_range.as_ref().map(|r| r.1.as_slice()))
            .max()
            .map(<[u8]>::to_vec);
        let span = |f: &Arc<FileMeta>| {
            (
                f.smallest_user_key().to_vec(),
                f.largest_user_key().to_vec(),
            )
        };
        let mut deeper = Vec::new();
        if !plan.bottommost {
            for level in plan.output_level + 1..v.levels.len() {
                let tables = v.overlapping(level, lo.as_deref(), hi.as_deref());
                deeper.push(tables.iter().map(span).collect());
            }
        }
        let grandparents = v
            .overlapping(plan.output_level + 1, lo.as_deref(), hi.as_deref())
            .iter()
            .map(|f| {
                let (a, b) = span(f);
                (a, b, f.size())
            })
            .collect();
        let mut cover = Cover::none();
        cover.push(Arc::clone(v.range_dels.fragments()));
        Ok(Job {
            plan,
            inputs,
            next,
            rows,
            deeper,
            grandparents,
            cover,
        })
    }

    /// True if no table below the output level can hold `user_key`, so a
    /// tombstone of it hides nothing.
    pub fn is_bottom_for(&self, user_key: &[u8]) -> bool {
        self.plan.bottommost
            || !self.deeper.iter().any(|spans| {
                let i = spans.partition_point(|(_, hi)| hi.as_slice() < user_key);
                spans
                    .get(i)
                    .is_some_and(|(lo, _)| lo.as_slice() <= user_key)
            })
    }

    /// Input bytes of the plan.
    pub fn bytes_read(&self) -> u64 {
        self.inputs
            .iter()
            .chain(&self.next)
            .map(|f| f.size())
            .sum::<u64>()
            + self.rows.iter().map(Run::bytes).sum::<u64>()
    }

    /// The edit of a move (inputs re-linked one level down) or a drop
    /// (inputs deleted).
    pub fn move_edit(&self) -> Edit {
        let mut edit = self.base_edit();
        for f in self.inputs.iter() {
            edit.deleted.push((self.plan.level, f.id()));
            if self.plan.kind == PlanKind::Move {
                edit.added.push((self.plan.output_level, f.desc.clone()));
            }
        }
        edit
    }

    fn base_edit(&self) -> Edit {
        let mut edit = Edit::default();
        if !self.plan.compact_pointer.is_empty() {
            edit.compact_pointers
                .push((self.plan.level, self.plan.compact_pointer.clone()));
        }
        edit
    }

    /// The edit and outcome of a merge or rewrite whose sub-tasks returned
    /// `pieces` (in sub-task order).
    pub fn finish(&self, pieces: Vec<Piece>) -> (Edit, Outcome) {
        let mut edit = self.base_edit();
        let mut outcome = Outcome {
            bytes_read: self.bytes_read(),
            row_bytes_read: self.rows.iter().map(Run::bytes).sum(),
            ..Outcome::default()
        };
        for (level, id) in self.plan.all_inputs() {
            edit.deleted.push((level, id));
        }
        for r in &self.rows {
            r.retire(&mut edit);
        }
        for p in pieces {
            edit.added
                .extend(p.descs.into_iter().map(|d| (self.plan.output_level, d)));
            outcome.keys.extend(p.keys);
            outcome.bytes_written += p.bytes_written;
            outcome.entries_dropped += p.dropped;
            outcome.tally.add(&p.tally);
            outcome.stale_dropped += p.stale_dropped;
            outcome.change.repointed.extend(p.change.repointed);
            outcome.change.erased.extend(p.change.erased);
            for (sum, b) in outcome.busy.iter_mut().zip(p.busy) {
                *sum += b;
            }
            outcome.cpu += p.cpu;
            outcome.subtasks += 1;
            outcome.pipelined += u64::from(p.pipelined);
            outcome.offloaded += u64::from(p.offloaded);
            outcome.fallbacks += u64::from(p.fell_back);
        }
        (edit, outcome)
    }

    /// A plan that reads and writes no table (a move re-links its inputs,
    /// a drop deletes them): its edit is [`move_edit`](Self::move_edit).
    pub fn is_move(&self) -> bool {
        matches!(self.plan.kind, PlanKind::Move | PlanKind::Drop)
    }
}

/// What one sub-task produced.
#[derive(Debug, Default)]
pub struct Piece {
    pub descs: Vec<FileDesc>,
    /// With `collect_keys`, the user keys of each output.
    pub keys: Vec<Vec<Vec<u8>>>,
    pub bytes_written: u64,
    pub dropped: u64,
    /// What the rules did ([`crate::runs::rules`]).
    pub tally: crate::runs::rules::Tally,
    pub stale_dropped: u64,
    pub change: CompactionChange,
    /// Busy time of the read, merge and write stages (linear: all merge).
    pub busy: [Duration; 3],
    /// CPU time of the threads that ran it.
    pub cpu: Duration,
    pub pipelined: bool,
    /// Run by a compaction worker.
    pub offloaded: bool,
    /// Offered to a worker that failed; re-run here.
    pub fell_back: bool,
}

impl Piece {
    /// Records on every output that the range tombstones up to `swept`
    /// were applied to it (`FileDesc::swept_seq`).
    pub fn sweep(&mut self, swept: crate::types::SeqNo) {
        for d in &mut self.descs {
            d.swept_seq = swept;
        }
    }
}

/// Deletes the outputs of sub-tasks whose compaction failed as a whole.
pub fn remove_outputs(dir: &Path, fs: &dyn FileSystem, pieces: &[Piece]) {
    for p in pieces {
        for d in &p.descs {
            let _ = fs.remove_file(&table_path(dir, d.id));
        }
    }
}

/// CPU time the calling thread has used.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call; CLOCK_THREAD_CPUTIME_ID needs no other argument.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}
