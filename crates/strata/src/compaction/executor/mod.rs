//! Executors: a plan plus the version it was picked from become output
//! tables and one version edit, which the caller installs. The executor is
//! chosen once at open from `Options::executor` (`db::Designs::resolve`).
//!
//! A plan arrives cut into key-range sub-tasks by the scheduler
//! ([`crate::compaction::split`], `Plan::assigned`); the sub-tasks share no
//! data, so they run side by side, and all their outputs go into one edit
//! once every sub-task has returned. How each sub-task runs:
//! - [`Local`] with [`Mode::Linear`]: read, merge and write in one thread
//!   (`linear`: one sub-task; `subtasks:N`: N of them on N threads);
//! - [`Mode::Pipelined`]: read → merge → write on three threads joined by
//!   bounded channels (`pipelined`: one sub-task; `copro:N`: N of them);
//! - [`Mode::Decide`]: CoPro+'s decision component picks one of the two
//!   per sub-task (`copro+:N`);
//! - [`offload::Offload`]: the sub-tasks are shared between this process
//!   and a `strata compaction-worker` process (`offload`).

mod decide;
pub mod job;
pub mod offload;
mod pipeline;
mod run;

pub use decide::{value_share, Decision};
pub use job::{Job, Piece};
pub use run::{Env, Range, Stale};

use super::Plan;
use crate::error::{Error, Result};
use crate::io::FileSystem;
use crate::stale::{CompactionChange, Tracker};
use crate::table::TableOptions;
use crate::types::SeqNo;
use crate::version::{Edit, Version};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Carries out compaction plans.
pub trait Executor: Send + Sync {
    /// Executes `plan` against `version` and returns the edit to install
    /// (never installs it) and the figures of the run.
    fn run(&self, plan: &Plan, version: &Version, ctx: &Context<'_>) -> Result<(Edit, Outcome)>;

    /// How many sub-tasks the scheduler should cut a plan into.
    fn subtasks(&self) -> usize {
        1
    }

    /// True if another process will write outputs of `plan` under its
    /// reserved file numbers (`tracking`: the stale tracker is on): the
    /// reservation must then be durable before the plan runs, so that a
    /// host that crashes and reopens while the worker still runs never
    /// hands those numbers out again.
    fn offloads(&self, _plan: &Plan, _tracking: bool) -> bool {
        false
    }
}

/// What a compaction needs from its database.
pub struct Context<'a> {
    pub dir: &'a Path,
    pub fs: Arc<dyn FileSystem>,
    pub table_opts: TableOptions,
    /// A file number beyond a sub-task's reserved range.
    pub more_numbers: &'a (dyn Fn() -> u64 + Sync),
    /// Record the user keys of each output (for event listeners).
    pub collect_keys: bool,
    /// Where each key's newest version lives ([`crate::stale`]).
    pub tracker: &'a dyn Tracker,
    /// No reader can see a sequence below this: the last published
    /// sequence at the start (read before the snapshot list), or the
    /// oldest live snapshot if lower.
    pub stale_horizon: SeqNo,
    /// Called by merge loops every [`GIVE_WAY_EVERY`] entries: pauses the
    /// compaction while a flush takes its CPU slot (`sched/cpu.rs`).
    pub give_way: &'a (dyn Fn() + Sync),
    /// What the compaction does to entries besides dropping them.
    pub rules: &'a crate::runs::rules::Rules,
}

/// Entries merged between two calls of `give_way` (a short stretch of
/// merging small values, longer with large ones; why:
/// docs/design/2026-11-29-code-comment-measurements.md §give-way): about how long a
/// flush waits for a running compaction's CPU slot, besides an output
/// table being finished (see `sched/cpu.rs`).
pub const GIVE_WAY_EVERY: u32 = 256;

/// Counts merged entries and calls `give_way` every [`GIVE_WAY_EVERY`]
/// of them (the merge loops' give-way points).
pub(super) struct GiveWay<'a> {
    give_way: &'a (dyn Fn() + Sync),
    left: u32,
}

impl<'a> GiveWay<'a> {
    pub(super) fn new(give_way: &'a (dyn Fn() + Sync)) -> Self {
        GiveWay {
            give_way,
            left: GIVE_WAY_EVERY,
        }
    }

    /// One more entry merged.
    #[inline]
    pub(super) fn tick(&mut self) {
        self.left -= 1;
        if self.left == 0 {
            self.left = GIVE_WAY_EVERY;
            (self.give_way)();
            crate::sched::yield_point();
        }
    }
}

impl Context<'_> {
    /// The sub-task environment of this context.
    pub fn env(&self) -> Env<'_> {
        Env {
            dir: self.dir,
            fs: &self.fs,
            table_opts: self.table_opts,
            collect_keys: self.collect_keys,
            give_way: self.give_way,
            stale: self.tracker.tracks().then_some(Stale {
                tracker: self.tracker,
                horizon: self.stale_horizon,
            }),
            rules: self.rules,
        }
    }
}

/// Figures of one executed plan.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub bytes_read: u64,
    /// Of `bytes_read`, the level-0 rows' cells the plan took.
    pub row_bytes_read: u64,
    pub bytes_written: u64,
    pub entries_dropped: u64,
    /// What the rules did ([`crate::runs::rules`]).
    pub tally: crate::runs::rules::Tally,
    /// Versions dropped because the tracker names a newer one.
    pub stale_dropped: u64,
    /// With `collect_keys`, the user keys of each added table, in edit order.
    pub keys: Vec<Vec<Vec<u8>>>,
    /// What the tracker must learn once the edit is durable (`removed` is
    /// left to the caller).
    pub change: CompactionChange,
    /// Busy time of the read, merge and write stages over all sub-tasks
    /// (a linear sub-task counts as merge).
    pub busy: [Duration; 3],
    /// CPU time of every thread that worked on the plan.
    pub cpu: Duration,
    pub subtasks: u64,
    /// Sub-tasks run as a pipeline.
    pub pipelined: u64,
    /// Sub-tasks a compaction worker ran.
    pub offloaded: u64,
    /// Sub-tasks offered to a worker that failed and re-run here.
    pub fallbacks: u64,
}

/// How a sub-task runs.
pub enum Mode {
    Linear,
    Pipelined,
    /// CoPro+: the decision component chooses per sub-task.
    Decide(Decision),
}

impl Mode {
    fn pipelined(&self, job: &Job<'_>, range: Range<'_>) -> bool {
        match self {
            Mode::Linear => false,
            Mode::Pipelined => true,
            Mode::Decide(d) => d.pipelined(job, range.lo, range.hi),
        }
    }
}

/// Runs every sub-task in this process, each on its own thread, in `mode`.
pub struct Local {
    pub subtasks: usize,
    pub mode: Mode,
}

impl Local {
    /// Today's executor: one sub-task, one thread.
    pub fn linear() -> Self {
        Local {
            subtasks: 1,
            mode: Mode::Linear,
        }
    }
}

impl Executor for Local {
    fn run(&self, plan: &Plan, version: &Version, ctx: &Context<'_>) -> Result<(Edit, Outcome)> {
        let job = Job::resolve(plan, version)?;
        if job.is_move() {
            return Ok((job.move_edit(), Outcome::default()));
        }
        let env = ctx.env();
        let pieces = run_all(plan.assigned.subtasks(), &env, ctx.fs.as_ref(), |i| {
            let reserved = plan.assigned.numbers(i);
            run_here(&job, &env, i, reserved, &self.mode, ctx.more_numbers)
        })?;
        Ok(job.finish(pieces))
    }

    fn subtasks(&self) -> usize {
        self.subtasks
    }
}

/// Runs sub-task `i` of `job` in this process, naming outputs from
/// `reserved`, then from `more`.
pub fn run_here(
    job: &Job<'_>,
    env: &Env<'_>,
    i: usize,
    mut reserved: std::ops::Range<u64>,
    mode: &Mode,
    more: &(dyn Fn() -> u64 + Sync),
) -> Result<Piece> {
    let mut numbers = move || Ok(reserved.next().unwrap_or_else(more));
    run_with(job, env, i, mode, &mut numbers)
}

/// Runs sub-task `i` of `job` with only the file numbers the plan reserved
/// for it (a worker process: it cannot ask the host for more).
/// With `fresh_only`, a number whose table file exists already is refused
/// instead of overwritten.
pub fn run_bounded(
    job: &Job<'_>,
    env: &Env<'_>,
    i: usize,
    mode: &Mode,
    fresh_only: bool,
) -> Result<Piece> {
    let mut reserved = job.plan.assigned.numbers(i);
    let (dir, fs) = (env.dir, env.fs.clone());
    let mut numbers = move || {
        let n = reserved.next().ok_or_else(|| {
            Error::InvalidArgument("the sub-task used up its reserved file numbers".into())
        })?;
        if fresh_only && fs.file_size(&crate::filename::table_path(dir, n)).is_ok() {
            return Err(Error::InvalidArgument(format!(
                "table {n} exists already: not overwritten"
            )));
        }
        Ok(n)
    };
    run_with(job, env, i, mode, &mut numbers)
}

fn run_with(
    job: &Job<'_>,
    env: &Env<'_>,
    i: usize,
    mode: &Mode,
    numbers: &mut crate::compaction::output::SendNumberSource<'_>,
) -> Result<Piece> {
    let (lo, hi) = job.plan.assigned.range(i);
    let range = Range { lo, hi };
    if mode.pipelined(job, range) {
        pipeline::run_pipelined(job, env, range, numbers)
    } else {
        run::run_linear(job, env, range, numbers)
    }
}

/// Runs `one(0..n)` on `n` threads (the first on the calling one) and
/// returns the pieces in order; if any fails, the others' outputs are
/// removed and the first error returned.
pub fn run_all(
    n: usize,
    env: &Env<'_>,
    fs: &dyn FileSystem,
    one: impl Fn(usize) -> Result<Piece> + Sync,
) -> Result<Vec<Piece>> {
    let panicked = || {
        Err(Error::io(
            "compaction",
            std::io::Error::other("a compaction sub-task panicked"),
        ))
    };
    let here = |i: usize| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| one(i)))
            .unwrap_or_else(|_| panicked())
    };
    // One sub-task needs no scope (which would make the calling thread's
    // `Thread` handle, a lasting allocation on a C caller's main thread).
    let results: Vec<Result<Piece>> = if n <= 1 {
        vec![here(0)]
    } else {
        crate::sched::scope(|s| {
            let one = &one;
            let handles: Vec<_> = (1..n)
                .map(|i| (i, crate::sched::spawn_scoped(s, move || one(i))))
                .collect();
            let mut results = vec![here(0)];
            for (i, h) in handles {
                results.push(match h {
                    Ok(h) => h.join().unwrap_or_else(|_| panicked()),
                    // No thread to be had: the sub-task runs here.
                    Err(_) => here(i),
                });
            }
            results
        })
    };
    let mut pieces = Vec::with_capacity(n);
    let mut first_err = None;
    for r in results {
        match r {
            Ok(p) => pieces.push(p),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => {
            job::remove_outputs(env.dir, fs, &pieces);
            Err(e)
        }
        None => Ok(pieces),
    }
}
