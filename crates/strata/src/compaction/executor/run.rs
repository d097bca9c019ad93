//! One sub-task: the entries of a key range `[lo, hi)` of a plan's inputs,
//! merged, filtered and cut into output tables. [`run_linear`] does it in
//! the calling thread (LevelDB's loop); `pipeline.rs` spreads the same
//! steps over three threads. Both share [`open_runs`] and [`Sieve`].
//!
//! Stale dropping (active compaction): a version of a key is dropped when the
//! update table names a newer version of the key (higher sequence) that is
//! at or below `stale_horizon`, the oldest sequence any reader can hold:
//! every snapshot and every later read then sees that newer version, which
//! lives in a higher table (or in this compaction), so no reader can reach
//! the dropped one. The newer version itself is never dropped this way, so
//! a tombstone that still hides older versions stays.

use super::job::{meets, thread_cpu, Job, Piece};
use crate::compaction::filter::Dropper;
use crate::compaction::output::{NumberSource, Outputs};
use crate::error::{corrupt, Result};
use crate::io::FileSystem;
use crate::iter::{InternalIterator, MergeIter};
use crate::rangedel::Cover;
use crate::runs::fold::Fold;
use crate::runs::rules::Rules;
use crate::stale::{Entry, Tracker};
use crate::table::{TableIter, TableOptions};
use crate::types::{self, SeqNo, MAX_SEQ};
use crate::version::FileMeta;
use crate::version::LevelIter;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// What a sub-task needs besides its job.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    pub dir: &'a Path,
    pub fs: &'a Arc<dyn FileSystem>,
    pub table_opts: TableOptions,
    pub collect_keys: bool,
    /// See [`super::Context::give_way`]; a worker process passes a no-op.
    pub give_way: &'a (dyn Fn() + Sync),
    /// `None`: no stale dropping (no tracker, or a worker process).
    pub stale: Option<Stale<'a>>,
    /// What the compaction does to entries besides dropping them (plain
    /// rules in a worker process: operands and filtered values are kept).
    pub rules: &'a Rules,
}

/// The stale tracker and the horizon of one compaction.
#[derive(Clone, Copy)]
pub struct Stale<'a> {
    pub tracker: &'a dyn Tracker,
    pub horizon: SeqNo,
}

/// The key range of one sub-task: `[lo, hi)`, `None` unbounded.
#[derive(Clone, Copy, Debug)]
pub struct Range<'a> {
    pub lo: Option<&'a [u8]>,
    pub hi: Option<&'a [u8]>,
}

impl Range<'_> {
    /// True once `ikey` lies at or past the end of the range.
    #[inline]
    pub fn past_end(&self, ikey: &[u8]) -> bool {
        self.hi.is_some_and(|hi| types::user_key(ikey) >= hi)
    }

    fn meets(&self, f: &FileMeta) -> bool {
        meets(
            f.smallest_user_key(),
            f.largest_user_key(),
            self.lo,
            self.hi,
        )
    }
}

/// The sorted inputs of a sub-task (unpositioned: see [`position`]): one
/// per L0 input table (they overlap), one for the other inputs of the
/// upper level, one for the next level.
pub fn open_runs(job: &Job<'_>, range: Range<'_>) -> Result<Vec<Box<dyn InternalIterator>>> {
    let clip = |files: &[Arc<FileMeta>]| -> Vec<Arc<FileMeta>> {
        files.iter().filter(|f| range.meets(f)).cloned().collect()
    };
    let mut runs: Vec<Box<dyn InternalIterator>> = Vec::new();
    runs.extend(job.rows.iter().map(|r| r.iter()));
    if job.plan.level == 0 {
        for f in clip(&job.inputs) {
            runs.push(Box::new(TableIter::sequential(f.table()?)));
        }
    } else {
        runs.push(Box::new(LevelIter::sequential(clip(&job.inputs))));
    }
    if !job.next.is_empty() {
        runs.push(Box::new(LevelIter::sequential(clip(&job.next))));
    }
    Ok(runs)
}

/// Moves `it` to the first entry of `range`.
pub fn position(it: &mut dyn InternalIterator, range: Range<'_>) {
    match range.lo {
        Some(lo) => it.seek(&types::seek_key(lo, MAX_SEQ)),
        None => it.seek_to_first(),
    }
}

/// What becomes of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Drop,
    Keep,
    /// Kept, and the update table names this version (sequence): it must
    /// learn the output table.
    KeepTracked(SeqNo),
}

/// The keep/drop decision of a sub-task: [`Dropper`] plus stale dropping.
pub struct Sieve<'a, F: FnMut(&[u8]) -> bool> {
    dropper: Dropper<F>,
    stale: Option<Stale<'a>>,
    user_key: Vec<u8>,
    has_key: bool,
    newest: Option<Entry>,
    pub stale_dropped: u64,
    /// Versions the update table names that were dropped.
    pub erased: Vec<(Vec<u8>, SeqNo)>,
}

impl<'a, F: FnMut(&[u8]) -> bool> Sieve<'a, F> {
    pub fn new(
        snapshots: Vec<SeqNo>,
        is_bottom_for: F,
        cover: Cover,
        stale: Option<Stale<'a>>,
    ) -> Self {
        Sieve {
            dropper: Dropper::new(snapshots, is_bottom_for, cover),
            stale,
            user_key: Vec::new(),
            has_key: false,
            newest: None,
            stale_dropped: 0,
            erased: Vec::new(),
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropper.dropped
    }

    /// The outputs' `swept_seq` ([`Dropper::swept`]).
    pub fn swept(&self) -> SeqNo {
        self.dropper.swept()
    }

    /// Decides the entry with internal key `ikey` (entries arrive in
    /// internal-key order).
    #[inline]
    pub fn judge(&mut self, ikey: &[u8]) -> Result<Verdict> {
        let Some(stale) = self.stale else {
            return Ok(if self.dropper.keep(ikey)? {
                Verdict::Keep
            } else {
                Verdict::Drop
            });
        };
        let p = types::parse_internal_key(ikey)
            .ok_or_else(|| corrupt(0, "malformed internal key in compaction input"))?;
        if !self.has_key || self.user_key.as_slice() != p.user_key {
            self.user_key.clear();
            self.user_key.extend_from_slice(p.user_key);
            self.has_key = true;
            self.newest = stale.tracker.newest(p.user_key);
        }
        if self
            .newest
            .is_some_and(|e| e.seq > p.seq && e.seq <= stale.horizon)
        {
            self.stale_dropped += 1;
            return Ok(Verdict::Drop);
        }
        let keep = self.dropper.keep(ikey)?;
        let tracked = self.newest.is_some_and(|e| e.seq == p.seq);
        Ok(match (keep, tracked) {
            (true, true) => Verdict::KeepTracked(p.seq),
            (true, false) => Verdict::Keep,
            (false, true) => {
                self.erased.push((p.user_key.to_vec(), p.seq));
                Verdict::Drop
            }
            (false, false) => Verdict::Drop,
        })
    }
}

/// The operand fold of one sub-task ([`Fold`]; a pass-through without a
/// merge operator).
pub fn fold_of<'j>(job: &'j Job<'_>, env: &Env<'_>) -> Fold<impl FnMut(&[u8]) -> bool + 'j> {
    Fold::new(
        env.rules,
        job.plan.assigned.snapshots.clone(),
        |uk: &[u8]| job.is_bottom_for(uk),
        job.cover.clone(),
    )
}

/// Output tables of one sub-task.
pub fn outputs<'o>(
    job: &Job<'_>,
    env: &Env<'_>,
    range: Range<'_>,
    numbers: &'o mut NumberSource<'o>,
) -> Outputs<'o> {
    let grandparents = job
        .grandparents
        .iter()
        .filter(|(lo, hi, _)| meets(lo, hi, range.lo, range.hi))
        .map(|(_, hi, size)| (hi.clone(), *size))
        .collect();
    Outputs::new(
        env.dir,
        env.fs.clone(),
        env.table_opts,
        job.plan.target_file_size,
        numbers,
    )
    .collect_keys(env.collect_keys)
    .align_to(grandparents)
}

/// The piece of a sub-task whose outputs `out` finished with `result`
/// (tables, their keys, bytes written); on an error every output of `out`
/// is removed first.
pub fn settle<E>(
    mut out: Outputs<'_>,
    result: std::result::Result<Vec<crate::version::FileDesc>, E>,
) -> std::result::Result<Piece, E> {
    match result {
        Ok(descs) => Ok(Piece {
            descs,
            keys: std::mem::take(&mut out.keys),
            bytes_written: out.bytes_written,
            ..Piece::default()
        }),
        Err(e) => {
            out.abandon();
            Err(e)
        }
    }
}

/// Runs one sub-task in the calling thread.
pub fn run_linear(
    job: &Job<'_>,
    env: &Env<'_>,
    range: Range<'_>,
    numbers: &mut NumberSource<'_>,
) -> Result<Piece> {
    let started = Instant::now();
    let cpu = thread_cpu();
    let mut merged = MergeIter::new(open_runs(job, range)?);
    position(&mut merged, range);
    merged.status()?;
    let mut sieve = Sieve::new(
        job.plan.assigned.snapshots.clone(),
        |uk: &[u8]| job.is_bottom_for(uk),
        job.cover.clone(),
        env.stale,
    );
    let mut fold = fold_of(job, env);
    let mut out = outputs(job, env, range, numbers);
    let mut repointed = Vec::new();
    let result = (|| {
        let mut give_way = super::GiveWay::new(env.give_way);
        let mut sink = |ikey: &[u8], value: &[u8]| -> Result<()> {
            match sieve.judge(ikey)? {
                Verdict::Drop => {}
                Verdict::Keep => out.add(ikey, value)?,
                Verdict::KeepTracked(seq) => {
                    out.add(ikey, value)?;
                    if let Some(table) = out.current_id() {
                        repointed.push((types::user_key(ikey).to_vec(), seq, table));
                    }
                }
            }
            Ok(())
        };
        while merged.valid() {
            let ikey = merged.key();
            if range.past_end(ikey) {
                break;
            }
            give_way.tick();
            fold.push(ikey, merged.value(), &mut sink)?;
            merged.next();
        }
        merged.status()?;
        fold.finish(&mut sink)?;
        out.finish()
    })();
    let mut piece = settle(out, result)?;
    piece.dropped = sieve.dropped();
    piece.tally = fold.tally;
    piece.sweep(sieve.swept());
    piece.stale_dropped = sieve.stale_dropped;
    piece.change.repointed = repointed;
    piece.change.erased = std::mem::take(&mut sieve.erased);
    piece.busy[1] = started.elapsed();
    piece.cpu = thread_cpu().saturating_sub(cpu);
    Ok(piece)
}
