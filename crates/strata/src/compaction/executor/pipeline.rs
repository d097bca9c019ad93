//! One sub-task as a three-stage pipeline (CoPro §3.1): a read thread
//! pulls entries out of the input runs in chunks, the calling thread
//! merges them (k-way heap, [`Sieve`]) and a write thread builds the
//! output tables. Bounded channels join the stages, so a slow stage holds
//! the others back instead of piling up memory: at most
//! `RUN_DEPTH` chunks per run and `WRITE_DEPTH` merged chunks are in
//! flight, each about `CHUNK_BYTES`.
//!
//! Each stage records its busy time (wall time not spent waiting on a
//! channel) and its thread's CPU time. A run ends with an explicit `Done`;
//! a channel that closes without it (a panicked or failed stage) fails the
//! sub-task instead of passing for the end of the data.

use super::job::{thread_cpu, Job, Piece};
use super::run::{open_runs, outputs, position, settle, Env, Range, Sieve, Verdict};
use crate::compaction::output::SendNumberSource;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::types::{self, compare_internal};
use crossbeam_channel::{bounded, Receiver, Select, Sender};
use std::cmp::Ordering;
use std::time::{Duration, Instant};

/// Bytes of entries per chunk.
const CHUNK_BYTES: usize = 256 * 1024;
/// Chunks buffered per input run.
const RUN_DEPTH: usize = 2;
/// Merged chunks buffered before the write stage.
const WRITE_DEPTH: usize = 4;

/// Entries packed in one buffer.
#[derive(Default)]
struct Chunk {
    buf: Vec<u8>,
    /// (key end, value end) offsets into `buf`; an entry starts where the
    /// previous one's value ends.
    ends: Vec<(u32, u32)>,
    /// Indexes of entries the update table names, with their sequences.
    tracked: Vec<(u32, u64)>,
}

impl Chunk {
    fn push(&mut self, key: &[u8], value: &[u8]) {
        self.buf.extend_from_slice(key);
        let k = self.buf.len() as u32;
        self.buf.extend_from_slice(value);
        self.ends.push((k, self.buf.len() as u32));
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn entry(&self, i: usize) -> (&[u8], &[u8]) {
        let start = match i.checked_sub(1) {
            Some(j) => self.ends[j].1 as usize,
            None => 0,
        };
        let (k, v) = self.ends[i];
        (
            &self.buf[start..k as usize],
            &self.buf[k as usize..v as usize],
        )
    }

    fn is_full(&self) -> bool {
        self.buf.len() >= CHUNK_BYTES
    }
}

enum Msg {
    Chunk(Chunk),
    Done,
    Failed(Error),
}

fn aborted(stage: &str) -> Error {
    Error::io(
        "compaction",
        std::io::Error::other(format!("compaction pipeline: the {stage} stage stopped")),
    )
}

/// Runs one sub-task as a pipeline.
pub fn run_pipelined(
    job: &Job<'_>,
    env: &Env<'_>,
    range: Range<'_>,
    numbers: &mut SendNumberSource<'_>,
) -> Result<Piece> {
    let mut runs = open_runs(job, range)?;
    for r in &mut runs {
        position(r.as_mut(), range);
        r.status()?;
    }
    let n = runs.len();
    let (run_tx, run_rx): (Vec<Sender<Msg>>, Vec<Receiver<Msg>>) =
        (0..n).map(|_| bounded(RUN_DEPTH)).unzip();
    let (out_tx, out_rx) = bounded::<Msg>(WRITE_DEPTH);
    let no_thread = |e| Error::io("compaction", e);
    crate::sched::scope(|s| {
        let reader = crate::sched::spawn_scoped(s, move || read_stage(&mut runs, run_tx, range))
            .map_err(no_thread)?;
        let writer = match crate::sched::spawn_scoped(s, move || {
            write_stage(job, env, range, numbers, out_rx)
        }) {
            Ok(w) => w,
            Err(e) => {
                // The reader ends when its receivers are gone.
                drop(run_rx);
                let _ = reader.join();
                return Err(no_thread(e));
            }
        };
        let merged = merge_stage(job, env, run_rx, out_tx);
        let read = reader.join();
        let written = writer.join().unwrap_or(Err(Fail::Abort));
        let read = match read {
            Ok(r) => r,
            Err(_) => {
                if let Ok(p) = &written {
                    super::job::remove_outputs(env.dir, env.fs.as_ref(), std::slice::from_ref(p));
                }
                return Err(aborted("read"));
            }
        };
        let (mut piece, merge) = match (merged, written) {
            (Ok(m), Ok(piece)) => (piece, m),
            (m, w) => {
                if let Ok(p) = &w {
                    super::job::remove_outputs(env.dir, env.fs.as_ref(), std::slice::from_ref(p));
                }
                // The stage that failed first holds the real error; the
                // other one only saw its channel close.
                return Err(match (m, w) {
                    (Err(Fail::Err(e)), _) | (_, Err(Fail::Err(e))) => e,
                    _ => aborted("merge"),
                });
            }
        };
        piece.busy = [read.0, merge.busy, piece.busy[2]];
        piece.cpu += read.1 + merge.cpu;
        piece.dropped = merge.dropped;
        piece.tally = merge.tally;
        piece.stale_dropped = merge.stale_dropped;
        piece.change.erased = merge.erased;
        piece.sweep(merge.swept);
        piece.pipelined = true;
        Ok(piece)
    })
}

/// Why a stage stopped early.
enum Fail {
    /// Its channel closed: another stage failed.
    Abort,
    Err(Error),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Err(e)
    }
}

/// Reads chunks from every run, sending each to whichever run's channel
/// has room. Returns (busy, cpu).
fn read_stage(
    runs: &mut [Box<dyn InternalIterator>],
    tx: Vec<Sender<Msg>>,
    range: Range<'_>,
) -> (Duration, Duration) {
    let cpu = thread_cpu();
    let started = Instant::now();
    let mut waited = Duration::ZERO;
    let mut pending: Vec<Option<Msg>> = runs.iter_mut().map(|r| Some(fill(r, range))).collect();
    loop {
        let mut sel = Select::new();
        let mut which = Vec::new();
        for (i, p) in pending.iter().enumerate() {
            if p.is_some() {
                sel.send(&tx[i]);
                which.push(i);
            }
        }
        if which.is_empty() {
            break;
        }
        let t = Instant::now();
        let op = sel.select();
        waited += t.elapsed();
        let i = which[op.index()];
        let Some(msg) = pending[i].take() else {
            break;
        };
        let last = !matches!(msg, Msg::Chunk(_));
        if op.send(&tx[i], msg).is_err() {
            break; // the merge stage stopped
        }
        if !last {
            pending[i] = Some(fill(&mut runs[i], range));
        }
    }
    (
        started.elapsed().saturating_sub(waited),
        thread_cpu().saturating_sub(cpu),
    )
}

/// The next chunk of `run`: `Done` at the end of the range, `Failed` on a
/// read error.
fn fill(run: &mut Box<dyn InternalIterator>, range: Range<'_>) -> Msg {
    let mut c = Chunk::default();
    while run.valid() && !c.is_full() {
        if range.past_end(run.key()) {
            break;
        }
        c.push(run.key(), run.value());
        run.next();
    }
    if let Err(e) = run.status() {
        return Msg::Failed(e);
    }
    if c.len() == 0 {
        Msg::Done
    } else {
        Msg::Chunk(c)
    }
}

/// The merge stage's figures.
struct Merged {
    busy: Duration,
    cpu: Duration,
    dropped: u64,
    /// What the rules did.
    tally: crate::runs::rules::Tally,
    stale_dropped: u64,
    erased: Vec<(Vec<u8>, u64)>,
    /// The outputs' `swept_seq` (`Dropper::swept`).
    swept: u64,
}

/// One input run as the merge stage holds it.
struct Cursor {
    rx: Receiver<Msg>,
    chunk: Chunk,
    at: usize,
}

impl Cursor {
    fn key(&self) -> &[u8] {
        self.chunk.entry(self.at).0
    }

    /// Moves to the next entry; false at the end of the run.
    fn advance(&mut self, waited: &mut Duration) -> std::result::Result<bool, Fail> {
        self.at += 1;
        if self.at < self.chunk.len() {
            return Ok(true);
        }
        let t = Instant::now();
        let msg = self.rx.recv();
        *waited += t.elapsed();
        match msg {
            Ok(Msg::Chunk(c)) => {
                self.chunk = c;
                self.at = 0;
                Ok(true)
            }
            Ok(Msg::Done) => Ok(false),
            Ok(Msg::Failed(e)) => Err(Fail::Err(e)),
            Err(_) => Err(Fail::Abort),
        }
    }
}

fn merge_stage(
    job: &Job<'_>,
    env: &Env<'_>,
    rx: Vec<Receiver<Msg>>,
    tx: Sender<Msg>,
) -> std::result::Result<Merged, Fail> {
    let cpu = thread_cpu();
    let started = Instant::now();
    let mut waited = Duration::ZERO;
    let result = (|| {
        let mut heap: Vec<Cursor> = Vec::with_capacity(rx.len());
        for r in rx {
            let t = Instant::now();
            let msg = r.recv();
            waited += t.elapsed();
            match msg {
                // Runs send no empty chunk.
                Ok(Msg::Chunk(chunk)) => heap.push(Cursor {
                    rx: r,
                    chunk,
                    at: 0,
                }),
                Ok(Msg::Done) => {}
                Ok(Msg::Failed(e)) => return Err(Fail::Err(e)),
                Err(_) => return Err(Fail::Abort),
            }
        }
        let less = |a: &Cursor, b: &Cursor| compare_internal(a.key(), b.key()) == Ordering::Less;
        heapify(&mut heap, &less);
        let mut sieve = Sieve::new(
            job.plan.assigned.snapshots.clone(),
            |uk: &[u8]| job.is_bottom_for(uk),
            job.cover.clone(),
            env.stale,
        );
        let mut fold = super::run::fold_of(job, env);
        let mut out = Chunk::default();
        let mut give_way = super::GiveWay::new(env.give_way);
        while let Some(top) = heap.first() {
            give_way.tick();
            let (key, value) = top.chunk.entry(top.at);
            fold.push(key, value, &mut |k, v| {
                judge_into(&mut sieve, &mut out, k, v)
            })?;
            if out.is_full() {
                let t = Instant::now();
                let sent = tx.send(Msg::Chunk(std::mem::take(&mut out)));
                waited += t.elapsed();
                if sent.is_err() {
                    return Err(Fail::Abort);
                }
            }
            if heap[0].advance(&mut waited)? {
                sift_down(&mut heap, 0, &less);
            } else {
                let last = heap.len() - 1;
                heap.swap(0, last);
                heap.pop();
                sift_down(&mut heap, 0, &less);
            }
        }
        fold.finish(&mut |k, v| judge_into(&mut sieve, &mut out, k, v))?;
        let t = Instant::now();
        let mut sent = Ok(());
        if out.len() > 0 {
            sent = tx.send(Msg::Chunk(out));
        }
        if sent.is_ok() {
            sent = tx.send(Msg::Done);
        }
        waited += t.elapsed();
        if sent.is_err() {
            return Err(Fail::Abort);
        }
        Ok(Merged {
            busy: Duration::ZERO,
            cpu: Duration::ZERO,
            dropped: sieve.dropped(),
            tally: fold.tally,
            stale_dropped: sieve.stale_dropped,
            erased: std::mem::take(&mut sieve.erased),
            swept: sieve.swept(),
        })
    })();
    drop(tx);
    let mut m = result?;
    m.busy = started.elapsed().saturating_sub(waited);
    m.cpu = thread_cpu().saturating_sub(cpu);
    Ok(m)
}

/// Judges one entry the fold passed on and adds it to `out` if kept.
fn judge_into<F: FnMut(&[u8]) -> bool>(
    sieve: &mut Sieve<'_, F>,
    out: &mut Chunk,
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    match sieve.judge(key)? {
        Verdict::Drop => {}
        Verdict::Keep => out.push(key, value),
        Verdict::KeepTracked(seq) => {
            out.tracked.push((out.len() as u32, seq));
            out.push(key, value);
        }
    }
    Ok(())
}

fn heapify<T>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    for i in (0..v.len() / 2).rev() {
        sift_down(v, i, less);
    }
}

/// Restores the min-heap order below `i`.
fn sift_down<T>(v: &mut [T], mut i: usize, less: &impl Fn(&T, &T) -> bool) {
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut m = i;
        if l < v.len() && less(&v[l], &v[m]) {
            m = l;
        }
        if r < v.len() && less(&v[r], &v[m]) {
            m = r;
        }
        if m == i {
            return;
        }
        v.swap(i, m);
        i = m;
    }
}

fn write_stage(
    job: &Job<'_>,
    env: &Env<'_>,
    range: Range<'_>,
    numbers: &mut SendNumberSource<'_>,
    rx: Receiver<Msg>,
) -> std::result::Result<Piece, Fail> {
    let cpu = thread_cpu();
    let started = Instant::now();
    let mut waited = Duration::ZERO;
    let mut out = outputs(job, env, range, numbers);
    let mut repointed = Vec::new();
    let result = (|| loop {
        let t = Instant::now();
        let msg = rx.recv();
        waited += t.elapsed();
        match msg {
            Ok(Msg::Chunk(c)) => {
                let mut tracked = c.tracked.iter().peekable();
                for i in 0..c.len() {
                    let (k, v) = c.entry(i);
                    out.add(k, v).map_err(Fail::Err)?;
                    if let Some((_, seq)) = tracked.next_if(|(at, _)| *at as usize == i) {
                        if let Some(table) = out.current_id() {
                            repointed.push((types::user_key(k).to_vec(), *seq, table));
                        }
                    }
                }
            }
            Ok(Msg::Done) => return out.finish().map_err(Fail::Err),
            Ok(Msg::Failed(e)) => return Err(Fail::Err(e)),
            Err(_) => return Err(Fail::Abort),
        }
    })();
    let mut piece = settle(out, result)?;
    piece.change.repointed = repointed;
    piece.busy[2] = started.elapsed().saturating_sub(waited);
    piece.cpu = thread_cpu().saturating_sub(cpu);
    Ok(piece)
}
