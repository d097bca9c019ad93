//! Offloaded compaction (CoPro's "device" side, emulated near-data
//! processing): a plan's sub-tasks are shared between this process and a
//! compaction worker process (`strata compaction-worker --listen ADDR`)
//! reached over a Unix socket or loopback TCP. Both open the same table
//! directory ("shared files"): the worker reads the input tables and
//! writes its outputs under the file numbers the plan reserved for its
//! sub-task, and answers with their descriptors; the host installs every
//! output in one edit. Both sides name the rules they compact by
//! ([`RULES`]: the build and the version of what a compaction keeps and
//! drops) and refuse a peer that names others. The host checks what it
//! can without redoing the work (`check_outputs`): each output's number,
//! key range, order, size and properties, read from the table itself, and,
//! once every piece is in, that the entries written and dropped over the
//! whole plan add up to the inputs' (else the worker's pieces run here
//! again); it does not compare the entries themselves, so a worker that
//! follows other rules under the same name is caught only when it loses
//! entries without counting them.
//!
//! If the worker cannot be reached, times out, dies or answers garbage,
//! the host removes whatever the worker wrote under the reserved numbers
//! and runs the sub-task itself with fresh numbers. Anything the worker
//! still writes later is an orphan no version names, removed at the next
//! open.
//!
//! The wire format (`docs/FORMAT.md` §10) is framed:
//!
//! ```text
//! frame := magic "SCWK" | u8 version(2) | u8 op | u8 origin | u8 flags
//!        | u64 request_id | u32 payload_len | payload | u32 crc32c
//! ```
//! little-endian; the crc32c covers every byte before it. Ops: 1 compact
//! (host → worker), 2 result, 3 error (UTF-8 message), 4 metrics request,
//! 5 metrics. Origin: 0 host, 1 device (the paper's "type").

mod wire;
mod worker;

pub use wire::{
    decode_metrics, encode_metrics, Frame, Op, Origin, Reply, Request, MAGIC, MAX_PAYLOAD,
    METRIC_BYTES_WRITTEN, METRIC_CPU_MICROS, METRIC_FAILURES, METRIC_SUBTASKS, RULES, VERSION,
};
pub use worker::{serve, WorkerConfig, WorkerFs, DEVICE_LARGE_VALUE};

use super::job::{Job, Piece};
use super::{run_all, run_here, Context, Env, Executor, Mode, Outcome};
use crate::compaction::Plan;
use crate::error::{corrupt, Error, Result};
use crate::filename::table_path;
use crate::io::FileSystem;
use crate::table::BlockCache;
use crate::version::{FileDesc, Version};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How the worker runs its sub-task (a byte of the request).
fn mode_code(m: &Mode) -> u8 {
    match m {
        Mode::Linear => 0,
        Mode::Pipelined => 1,
        Mode::Decide(_) => 2,
    }
}

/// A connection to a worker.
enum Stream {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

impl Stream {
    fn connect(addr: &str, timeout: Duration) -> Result<Stream> {
        let io = |e| Error::io("compaction worker", e);
        let s = match addr.strip_prefix("unix:") {
            Some(path) => {
                let s = std::os::unix::net::UnixStream::connect(path).map_err(io)?;
                s.set_read_timeout(Some(timeout)).map_err(io)?;
                s.set_write_timeout(Some(timeout)).map_err(io)?;
                Stream::Unix(s)
            }
            None => {
                let s = std::net::TcpStream::connect(addr).map_err(io)?;
                s.set_read_timeout(Some(timeout)).map_err(io)?;
                s.set_write_timeout(Some(timeout)).map_err(io)?;
                s.set_nodelay(true).map_err(io)?;
                Stream::Tcp(s)
            }
        };
        Ok(s)
    }

    /// Sends `frame` and reads the answer to it.
    fn call(&mut self, frame: &Frame) -> Result<Frame> {
        let bytes = frame.encode();
        let io = |e| Error::io("compaction worker", e);
        match self {
            Stream::Unix(s) => s.write_all(&bytes).map_err(io)?,
            Stream::Tcp(s) => s.write_all(&bytes).map_err(io)?,
        }
        let answer = match self {
            Stream::Unix(s) => Frame::read_from(s)?,
            Stream::Tcp(s) => Frame::read_from(s)?,
        };
        if answer.request_id != frame.request_id || answer.origin != Origin::Device {
            return Err(corrupt(0, "worker frame: answer to another request"));
        }
        Ok(answer)
    }
}

/// Asks the worker at `addr` for its metrics.
pub fn worker_metrics(addr: &str, timeout: Duration) -> Result<Vec<(u8, u64)>> {
    let mut s = Stream::connect(addr, timeout)?;
    let f = s.call(&Frame {
        op: Op::MetricsRequest,
        origin: Origin::Host,
        flags: 0,
        request_id: 1,
        payload: Vec::new(),
    })?;
    match f.op {
        Op::Metrics => decode_metrics(&f.payload),
        _ => Err(corrupt(0, "worker frame: expected metrics")),
    }
}

/// The `offload` executor: two sub-tasks, the first run here, the second
/// by the worker (the paper's static 50/50 split), both with the decision
/// component.
pub struct Offload {
    addr: String,
    timeout: Duration,
    mode: Mode,
    next_request: AtomicU64,
}

impl Offload {
    pub fn new(addr: &str, timeout: Duration, mode: Mode) -> Self {
        Offload {
            addr: addr.to_string(),
            timeout,
            mode,
            next_request: AtomicU64::new(1),
        }
    }

    /// Sends sub-task `i` of `job` to the worker and checks its answer.
    fn offload(&self, job: &Job<'_>, env: &Env<'_>, i: usize) -> Result<Piece> {
        // The worker's working directory is not ours: send an absolute path.
        let dir = std::fs::canonicalize(env.dir).unwrap_or_else(|_| env.dir.to_path_buf());
        let req = Request {
            rules: RULES.to_string(),
            dir,
            table_opts: env.table_opts,
            plan: job.plan.clone(),
            subtask: i,
            inputs: job.inputs.iter().map(|f| f.desc.clone()).collect(),
            next: job.next.iter().map(|f| f.desc.clone()).collect(),
            deeper: job.deeper.clone(),
            grandparents: job.grandparents.clone(),
            mode: mode_code(&self.mode),
            threshold: match &self.mode {
                Mode::Decide(d) => d.threshold,
                _ => 0.7,
            },
        };
        let frame = Frame {
            op: Op::Compact,
            origin: Origin::Host,
            flags: 0,
            request_id: self.next_request.fetch_add(1, Ordering::Relaxed),
            payload: req.encode(),
        };
        let answer = Stream::connect(&self.addr, self.timeout)?.call(&frame)?;
        match answer.op {
            Op::Result => {}
            Op::Error => {
                return Err(Error::io(
                    "compaction",
                    std::io::Error::other(format!(
                        "compaction worker: {}",
                        String::from_utf8_lossy(&answer.payload)
                    )),
                ))
            }
            _ => return Err(corrupt(0, "worker frame: unexpected op")),
        }
        let mut reply = Reply::decode(&answer.payload)?;
        if reply.rules != RULES {
            return Err(corrupt(
                0,
                format!(
                    "compaction worker: it compacts by {:?}, this host by {RULES:?}",
                    reply.rules
                ),
            ));
        }
        check_outputs(job, env, i, &mut reply)?;
        let us = |m: u64| Duration::from_micros(m);
        Ok(Piece {
            descs: reply.descs,
            bytes_written: reply.bytes_written,
            dropped: reply.dropped,
            busy: reply.busy_micros.map(us),
            cpu: us(reply.cpu_micros),
            pipelined: reply.pipelined,
            offloaded: true,
            ..Piece::default()
        })
    }
}

/// Checks what a worker reports about sub-task `i`'s outputs: each one
/// must carry a reserved number (once), lie inside the sub-task's range and
/// the plan's, follow the previous one in key order, and be a readable
/// table on disk whose size and properties (key bounds, entries,
/// deletions, newest sequence) are what the descriptor says; the bytes
/// written must add up. Each descriptor's `min_seq` (not on the wire) is
/// taken from its table's properties. Any mismatch fails the sub-task, which then runs
/// on the host, before anything reaches the version. The entries
/// themselves are not compared with the inputs' (`Offload::recount`
/// checks their number over the whole plan).
fn check_outputs(job: &Job<'_>, env: &Env<'_>, i: usize, reply: &mut Reply) -> Result<()> {
    let bad =
        |d: &FileDesc, why: &str| corrupt(0, format!("compaction worker: output {}: {why}", d.id));
    let reserved = job.plan.assigned.numbers(i);
    let (lo, hi) = job.plan.assigned.range(i);
    let all = || job.inputs.iter().chain(&job.next);
    let plan_lo = all()
        .map(|f| f.smallest_user_key())
        .min()
        .unwrap_or_default();
    let plan_hi = all()
        .map(|f| f.largest_user_key())
        .max()
        .unwrap_or_default();
    let mut prev: Option<&[u8]> = None;
    let mut total = 0u64;
    for d in &mut reply.descs {
        let (s, l) = (
            crate::types::user_key(&d.smallest),
            crate::types::user_key(&d.largest),
        );
        if !reserved.contains(&d.id) {
            return Err(bad(d, "number outside the reserved range"));
        }
        if s > l
            || s < plan_lo
            || l > plan_hi
            || lo.is_some_and(|lo| s < lo)
            || hi.is_some_and(|hi| l >= hi)
        {
            return Err(bad(d, "keys outside the sub-task"));
        }
        if prev.is_some_and(|p| p >= s) {
            return Err(bad(d, "out of key order"));
        }
        prev = Some(l);
        total = total.saturating_add(d.size);
        let path = table_path(env.dir, d.id);
        let file = env.fs.open_random(&path)?;
        if file.len() != d.size {
            return Err(bad(d, "size on disk differs"));
        }
        let t = crate::table::Table::open(file, path, d.id, Arc::new(BlockCache::new(0)), true)?;
        let p = t.properties();
        if p.smallest != d.smallest
            || p.largest != d.largest
            || p.entries != d.entries
            || p.deletions != d.deletions
            || p.max_seq != d.max_seq
        {
            return Err(bad(d, "properties differ from the descriptor"));
        }
        d.min_seq = p.min_seq;
    }
    if total != reply.bytes_written {
        return Err(corrupt(0, "compaction worker: output sizes do not add up"));
    }
    Ok(())
}

/// Removes the table files under `numbers` (what a failed worker may have
/// left).
fn remove_range(dir: &Path, fs: &dyn FileSystem, numbers: std::ops::Range<u64>) {
    for id in numbers {
        let _ = fs.remove_file(&table_path(dir, id));
    }
}

impl Executor for Offload {
    fn run(
        &self,
        plan: &Plan,
        version: &Version,
        ctx: &Context<'_>,
    ) -> Result<(crate::version::Edit, Outcome)> {
        let job = Job::resolve(plan, version)?;
        if job.is_move() {
            return Ok((job.move_edit(), Outcome::default()));
        }
        let env = ctx.env();
        let n = plan.assigned.subtasks();
        let pieces = run_all(n, &env, ctx.fs.as_ref(), |i| {
            let own = plan.assigned.numbers(i);
            // With stale tracking the host keeps every sub-task: the update
            // table lives here, and a worker could not drop stale versions
            // or tell where the tracked ones went.
            if i == 0 || !self.offloads(plan, env.stale.is_some()) {
                return run_here(&job, &env, i, own, &self.mode, ctx.more_numbers);
            }
            match self.offload(&job, &env, i) {
                Ok(p) => Ok(p),
                Err(_) => {
                    remove_range(env.dir, ctx.fs.as_ref(), own);
                    // The worker may still be writing under its numbers:
                    // fresh ones only.
                    let mut p = run_here(&job, &env, i, 0..0, &self.mode, ctx.more_numbers)?;
                    p.fell_back = true;
                    Ok(p)
                }
            }
        })?;
        let pieces = self.recount(&job, &env, ctx, pieces)?;
        Ok(job.finish(pieces))
    }

    fn subtasks(&self) -> usize {
        2
    }

    fn offloads(&self, plan: &Plan, tracking: bool) -> bool {
        // A worker reads tables, not level 0's rows; and it is not sent the
        // range tombstones, so a plan made to clear them stays here (a
        // worker's outputs would keep what they hide, and the plan would
        // be picked again).
        plan.assigned.subtasks() > 1
            && !tracking
            && plan.rows.is_empty()
            && plan.trigger != crate::compaction::Trigger::RangeDel
    }
}

impl Offload {
    /// Checks that the plan's pieces account for every input entry (each
    /// is written, dropped or folded into another, whichever side ran it:
    /// `check_outputs`
    /// cannot, since a sub-task reads only part of its tables). When they
    /// do not, the pieces a worker ran are removed and run here again,
    /// with fresh numbers; what this host runs is trusted as every other
    /// executor's is.
    fn recount(
        &self,
        job: &Job<'_>,
        env: &Env<'_>,
        ctx: &Context<'_>,
        mut pieces: Vec<Piece>,
    ) -> Result<Vec<Piece>> {
        if !pieces.iter().any(|p| p.offloaded) {
            return Ok(pieces);
        }
        let read: u64 = job
            .inputs
            .iter()
            .chain(&job.next)
            .map(|f| f.desc.entries)
            .sum();
        let accounted: u64 = pieces
            .iter()
            .map(|p| {
                let written: u64 = p.descs.iter().map(|d| d.entries).sum();
                written + p.dropped + p.stale_dropped + p.tally.folded
            })
            .sum();
        if accounted == read {
            return Ok(pieces);
        }
        for (i, p) in pieces.iter_mut().enumerate() {
            if !p.offloaded {
                continue;
            }
            remove_range(env.dir, ctx.fs.as_ref(), job.plan.assigned.numbers(i));
            let mut local = run_here(job, env, i, 0..0, &self.mode, ctx.more_numbers)?;
            local.fell_back = true;
            *p = local;
        }
        Ok(pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::{PlanKind, Trigger};

    /// A plan made to clear range tombstones never goes to a worker (which
    /// is not sent them); the same plan for another trigger does.
    #[test]
    fn range_tombstone_plans_stay_on_the_host() {
        let o = Offload::new("127.0.0.1:1", Duration::from_millis(10), Mode::Linear);
        let mut plan = Plan {
            kind: PlanKind::Rewrite,
            level: 6,
            output_level: 6,
            inputs: vec![4],
            next_inputs: Vec::new(),
            target_file_size: 1 << 20,
            bottommost: true,
            compact_pointer: Vec::new(),
            trigger: Trigger::Size,
            rows: Vec::new(),
            assigned: Default::default(),
        };
        plan.assigned.splits = vec![b"m".to_vec()];
        assert!(o.offloads(&plan, false));
        plan.trigger = Trigger::RangeDel;
        assert!(!o.offloads(&plan, false));
    }
}
