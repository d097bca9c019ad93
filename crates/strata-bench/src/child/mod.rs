//! One engine × workload run, executed inside its own child process: load
//! what the workload needs, run it, measure, print one result line.

use crate::engine::EngineSettings;
use crate::gen::{key_into, scatter, ValuePool};
use crate::workload::{
    counters, MixGen, Op, Params, Preload, Workload, DELETED_PER_BLOCK, DELETE_BLOCK,
};
use crate::BenchError;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;
use strata::{KvStore, ScanRange, WriteBatch, WriteOptions};

mod result;
mod run;

pub use result::{
    BackupFigures, CheckpointFigures, Latency, Level, RunResult, PROGRESS_PREFIX, RESULT_PREFIX,
};
pub use run::{child_main, remove_shm_dirs, run, CGROUP_PROCS_ENV, SHM_ROOT};

/// What the parent asks a child to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSpec {
    /// The engine as named on the command line.
    pub engine: String,
    pub workload: String,
    pub params: Params,
    pub settings: EngineSettings,
    /// A fresh directory for the database.
    pub dir: PathBuf,
    /// Drop the page cache of the database files after the load.
    pub cold: bool,
    /// Wait for the engine's background work after the load (so the run
    /// starts on a settled tree) and after a writing run (so write
    /// amplification includes the compaction the run caused).
    #[serde(default = "yes")]
    pub settle: bool,
    /// Leave the database directory (engine logs, tables) after the run.
    #[serde(default)]
    pub keep_data: bool,
    /// `dir` already holds this engine's loaded and settled database (the
    /// parent copied it from an image): the run skips its load.
    #[serde(default)]
    pub preloaded: bool,
    /// Where to keep a copy of the database once loaded and settled (an
    /// image later runs of this engine start from); `None`: keep none.
    #[serde(default)]
    pub save_image: Option<PathBuf>,
    /// A chain's row (`runner::chain`): `dir` holds this many records under
    /// YCSB's scattered keys, whatever the row's own load would be; with
    /// `preloaded`, the run reads and writes those.
    #[serde(default)]
    pub chain_records: Option<u64>,
}

fn yes() -> bool {
    true
}

/// A bitset of record numbers that currently hold a value.
struct Live {
    bits: Vec<AtomicU64>,
    count: AtomicU64,
}

impl Live {
    fn new(capacity: u64) -> Self {
        Live {
            bits: (0..capacity.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            count: AtomicU64::new(0),
        }
    }
    fn set(&self, n: u64) {
        if let Some(w) = self.bits.get((n / 64) as usize) {
            let m = 1u64 << (n % 64);
            if w.fetch_or(m, Relaxed) & m == 0 {
                self.count.fetch_add(1, Relaxed);
            }
        }
    }
    fn clear(&self, n: u64) {
        if let Some(w) = self.bits.get((n / 64) as usize) {
            let m = 1u64 << (n % 64);
            if w.fetch_and(!m, Relaxed) & m != 0 {
                self.count.fetch_sub(1, Relaxed);
            }
        }
    }
}

/// Per-thread measurements.
struct Meter {
    hist: Histogram<u64>,
    /// Mix workloads: latency of reads, and of writes (updates, inserts,
    /// read-modify-writes), apart.
    reads: Histogram<u64>,
    writes: Histogram<u64>,
    buckets: Vec<u64>,
    /// Operations per tenth of a second (short runs' timelines).
    fine: Vec<u64>,
    counts: BTreeMap<&'static str, u64>,
    bytes: u64,
    written: u64,
    gets: u64,
    found: u64,
    ops: u64,
    /// The run's budget stopped this worker before its quota.
    cut: bool,
    /// The slowest operation: its nanoseconds and when it started.
    slowest: Option<(u64, Instant)>,
    /// What the engine said of the checkpoint it made (`checkpoint`).
    checkpoint: Option<strata::CheckpointStats>,
    /// What the engine said of the backup it made (`backup`).
    backup: Option<strata::BackupInfo>,
}

impl Meter {
    fn new() -> Self {
        Meter {
            // Three significant digits is within hdrhistogram's 0..=5.
            hist: Histogram::new(3).expect("constant precision is valid"),
            reads: Histogram::new(3).expect("constant precision is valid"),
            writes: Histogram::new(3).expect("constant precision is valid"),
            buckets: Vec::new(),
            fine: Vec::new(),
            counts: BTreeMap::new(),
            bytes: 0,
            written: 0,
            gets: 0,
            found: 0,
            ops: 0,
            cut: false,
            slowest: None,
            checkpoint: None,
            backup: None,
        }
    }
    fn record(&mut self, start: Instant, t0: Instant, t1: Instant, n: u64) {
        let ns = (t1 - t0).as_nanos().min(u128::from(u64::MAX)) as u64;
        let _ = self.hist.record(ns.max(1));
        if self.slowest.is_none_or(|(s, _)| ns > s) {
            self.slowest = Some((ns, t0));
        }
        let sec = (t1 - start).as_secs() as usize;
        if self.buckets.len() <= sec {
            self.buckets.resize(sec + 1, 0);
        }
        self.buckets[sec] += n;
        let tenth = ((t1 - start).as_millis() / 100) as usize;
        if self.fine.len() <= tenth {
            self.fine.resize(tenth + 1, 0);
        }
        self.fine[tenth] += n;
        self.ops += n;
    }
    fn count(&mut self, what: &'static str) {
        *self.counts.entry(what).or_insert(0) += 1;
    }
    fn merge(&mut self, o: Meter) {
        let _ = self.hist.add(&o.hist);
        let _ = self.reads.add(&o.reads);
        let _ = self.writes.add(&o.writes);
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        if self.fine.len() < o.fine.len() {
            self.fine.resize(o.fine.len(), 0);
        }
        for (a, b) in self.fine.iter_mut().zip(o.fine) {
            *a += b;
        }
        for (k, v) in o.counts {
            *self.counts.entry(k).or_insert(0) += v;
        }
        self.bytes += o.bytes;
        self.written += o.written;
        self.gets += o.gets;
        self.found += o.found;
        self.ops += o.ops;
        self.cut |= o.cut;
        self.checkpoint = self.checkpoint.or(o.checkpoint);
        self.backup = self.backup.or(o.backup);
        if let Some((ns, at)) = o.slowest {
            if self.slowest.is_none_or(|(s, _)| ns > s) {
                self.slowest = Some((ns, at));
            }
        }
    }
}

/// Shared state of a run.
struct Ctx<'a> {
    store: &'a dyn KvStore,
    p: &'a Params,
    values: ValuePool,
    live: Live,
    /// Records that exist (YCSB inserts append).
    records: AtomicU64,
    /// Next record number an insert takes.
    next_insert: AtomicU64,
    /// Store record `n` under a scattered key (YCSB) or under `n` (db_bench).
    hashed: bool,
    done: AtomicU64,
    stop: AtomicBool,
    /// Ask for `sync` on every write (`--sync` on a strata engine: the
    /// comparators sync through their own write options, set at open).
    sync: bool,
    /// The store takes merges (`Semantics::merges`).
    merges: bool,
    /// Where the `checkpoint` row writes its checkpoint (a directory that
    /// does not exist yet).
    checkpoint_target: Option<PathBuf>,
    /// The backup store the `backup` row adds its backup to (new and
    /// empty).
    backup_store: Option<&'a strata::BackupStore>,
}

impl Ctx<'_> {
    /// Writes `key` (a value, or a delete when `value` is `None`), synced
    /// when the run syncs.
    fn write_one(&self, key: &[u8], value: Option<&[u8]>) -> strata::Result<()> {
        match (self.sync, value) {
            (false, Some(v)) => self.store.put(key, v),
            (false, None) => self.store.delete(key),
            (true, value) => {
                let mut b = WriteBatch::new();
                match value {
                    Some(v) => b.put(key, v),
                    None => b.delete(key),
                }
                self.store.write(b, &WriteOptions { sync: true })
            }
        }
    }
    fn key(&self, n: u64, buf: &mut Vec<u8>) {
        key_into(
            if self.hashed { scatter(n) } else { n },
            self.p.key_size,
            buf,
        );
    }
    fn put(&self, n: u64, kb: &mut Vec<u8>, m: &mut Meter) -> strata::Result<()> {
        self.key(n, kb);
        let v = self.values.value(n ^ m.ops, self.p.value_size);
        self.write_one(kb, Some(v))?;
        self.live.set(n);
        let b = (kb.len() + v.len()) as u64;
        m.written += b;
        m.bytes += b;
        Ok(())
    }
    /// Deletes the first [`DELETED_PER_BLOCK`] keys of block `b` (of
    /// [`DELETE_BLOCK`]): one range deletion with `ranges` where the engine
    /// has them, else a batch of point deletes.
    fn delete_block(&self, b: u64, ranges: bool, kb: &mut Vec<u8>) -> strata::Result<u64> {
        let lo = b * DELETE_BLOCK;
        let hi = (lo + DELETED_PER_BLOCK).min(self.p.num);
        let mut batch = WriteBatch::new();
        if ranges && self.store.semantics().range_deletes {
            self.key(lo, kb);
            let start = kb.clone();
            self.key(hi, kb);
            batch.delete_range(&start, &*kb);
        } else {
            for n in lo..hi {
                self.key(n, kb);
                batch.delete(&*kb);
            }
        }
        self.store.write(batch, &WriteOptions { sync: self.sync })?;
        for n in lo..hi {
            self.live.clear(n);
        }
        Ok(hi.saturating_sub(lo))
    }

    /// Adds 1 to counter `n`: a merge with `merge` where the engine has
    /// one, else a get and a put.
    fn increment(
        &self,
        n: u64,
        merge: bool,
        kb: &mut Vec<u8>,
        m: &mut Meter,
    ) -> strata::Result<()> {
        self.key(n, kb);
        let one = 1u64.to_le_bytes();
        if merge && self.merges {
            if self.sync {
                let mut b = WriteBatch::new();
                b.merge(&*kb, one);
                self.store.write(b, &WriteOptions { sync: true })?;
            } else {
                self.store.merge(kb, &one)?;
            }
        } else {
            let old = self.store.get(kb)?;
            m.gets += 1;
            m.found += u64::from(old.is_some());
            let n = old
                .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
                .map_or(0, u64::from_le_bytes);
            self.write_one(kb, Some(&(n + 1).to_le_bytes()))?;
        }
        self.live.set(n);
        let b = (kb.len() + one.len()) as u64;
        m.written += b;
        m.bytes += b;
        Ok(())
    }

    fn get(&self, n: u64, kb: &mut Vec<u8>, m: &mut Meter) -> strata::Result<Option<Vec<u8>>> {
        self.key(n, kb);
        let v = self.store.get(kb)?;
        m.gets += 1;
        if let Some(v) = &v {
            m.found += 1;
            m.bytes += (kb.len() + v.len()) as u64;
        }
        Ok(v)
    }
}

fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn progress(phase: &str, done: u64, total: u64) {
    emit(&format!("{PROGRESS_PREFIX}{phase} {done} {total}"));
}

/// Writes records `0..num` in batches (seeded random order for db_bench),
/// or, for [`Preload::Counters`], `num` increments of the counters.
fn preload(ctx: &Ctx<'_>, kind: Preload) -> Result<(), BenchError> {
    let p = ctx.p;
    if kind == Preload::Counters {
        let mut rng = SmallRng::seed_from_u64(p.seed ^ 0xC0C0);
        let (mut kb, mut m) = (Vec::new(), Meter::new());
        for i in 0..p.num {
            ctx.increment(rng.gen_range(0..counters(p.num)), true, &mut kb, &mut m)?;
            if i % 50_000 == 0 {
                progress("load", i, p.num);
            }
        }
        // No flush: the operands stay where the writes left them.
        return Ok(());
    }
    // db_bench's loads go in a seeded random order; YCSB's and sequential
    // ones in key order, which needs no list of keys.
    let shuffled: Option<Vec<u64>> = match kind {
        Preload::Ycsb | Preload::Sequential => None,
        _ => {
            use rand::seq::SliceRandom;
            let mut order: Vec<u64> = (0..p.num).collect();
            order.shuffle(&mut SmallRng::seed_from_u64(p.seed ^ 0x10AD));
            Some(order)
        }
    };
    let mut keys = (0..p.num).map(|i| shuffled.as_ref().map_or(i, |o| o[i as usize]));
    let (mut kb, mut chunk) = (Vec::new(), Vec::with_capacity(1000));
    for i in 0u64.. {
        chunk.clear();
        chunk.extend(keys.by_ref().take(1000));
        if chunk.is_empty() {
            break;
        }
        let mut b = WriteBatch::new();
        for &n in &chunk {
            ctx.key(n, &mut kb);
            b.put(&kb, ctx.values.value(n, p.value_size));
            ctx.live.set(n);
        }
        ctx.store.write(b, &WriteOptions::default())?;
        if i % 50 == 0 {
            progress("load", i * 1000, p.num);
        }
    }
    ctx.records.store(p.num, Relaxed);
    ctx.next_insert.store(p.num, Relaxed);
    if matches!(kind, Preload::DeletedRanges | Preload::DeletedKeys) {
        for b in 0..p.num.div_ceil(DELETE_BLOCK) {
            ctx.delete_block(b, kind == Preload::DeletedRanges, &mut kb)?;
        }
    }
    ctx.store.flush()?;
    Ok(())
}

/// The context of a run of `w` on `store` (`sync`: ask for a synced write
/// every time; `chain`: the records of a chain's database, which the run
/// reads and writes under YCSB's keys whatever its own load would be).
fn new_ctx<'a>(
    store: &'a dyn KvStore,
    p: &'a Params,
    w: Workload,
    sync: bool,
    chain: Option<u64>,
) -> Ctx<'a> {
    let inserts = w
        .mix(p)
        .map_or(0, |m| (m.insert * p.ops as f64 * 1.5) as u64 + 64);
    let records = chain.unwrap_or(p.num).max(p.num);
    Ctx {
        store,
        p,
        values: ValuePool::with_ratio(p.seed, p.value_size, p.compression_ratio),
        live: Live::new(records + inserts),
        records: AtomicU64::new(0),
        next_insert: AtomicU64::new(0),
        hashed: chain.is_some() || matches!(w.preload(), Preload::Ycsb) || w == Workload::YcsbLoad,
        done: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        sync,
        merges: store.semantics().merges,
        checkpoint_target: None,
        backup_store: None,
    }
}

/// Records that keys `0..records` are loaded (a database copied from an
/// image of a `kind` preload, `records` = `num`: without its deleted
/// blocks; or a chain's database).
fn mark_loaded(ctx: &Ctx<'_>, kind: Preload, records: u64) {
    for n in 0..records {
        ctx.live.set(n);
    }
    if matches!(kind, Preload::DeletedRanges | Preload::DeletedKeys) {
        for b in 0..ctx.p.num.div_ceil(DELETE_BLOCK) {
            let lo = b * DELETE_BLOCK;
            for n in lo..(lo + DELETED_PER_BLOCK).min(ctx.p.num) {
                ctx.live.clear(n);
            }
        }
    }
    ctx.records.store(records, Relaxed);
    ctx.next_insert.store(records, Relaxed);
}

/// The run phase of thread `t`: returns its meter.
fn worker(
    ctx: &Ctx<'_>,
    w: Workload,
    t: usize,
    start: Instant,
    deadline: Option<Instant>,
) -> Result<Meter, BenchError> {
    // A timed workload runs until its deadline; the others run their quota,
    // or until the run's budget (`max_run_secs`) is spent.
    let w = w.run_as();
    let timed = w.timed();
    let p = ctx.p;
    let mut m = Meter::new();
    let mut rng =
        SmallRng::seed_from_u64(p.seed.wrapping_add(1 + t as u64).wrapping_mul(0x9E37_79B9));
    let threads = p.threads as u64;
    let quota = match w {
        Workload::FillSeq | Workload::FillRandom | Workload::YcsbLoad => {
            p.num / threads + u64::from((t as u64) < p.num % threads)
        }
        Workload::ReadSeq | Workload::ScanResume => p.ops.min(p.num),
        // One call, by the first thread.
        Workload::Checkpoint | Workload::Backup => u64::from(t == 0),
        Workload::DeleteBlocks { .. } => {
            let blocks = p.num.div_ceil(DELETE_BLOCK);
            (blocks / threads + u64::from((t as u64) < blocks % threads)) * DELETED_PER_BLOCK
        }
        _ => p.ops / threads + u64::from((t as u64) < p.ops % threads),
    };
    let first = (p.num / threads) * t as u64 + (t as u64).min(p.num % threads);
    let first_block = {
        let blocks = p.num.div_ceil(DELETE_BLOCK);
        (blocks / threads) * t as u64 + (t as u64).min(blocks % threads)
    };
    let mut kb = Vec::with_capacity(p.key_size);
    let mut mix = w.mix(p).map(|mx| MixGen::new(mx, p.num));
    let mut i = 0u64;
    let mut rounds = 0u64;
    let mut last_key: Option<Vec<u8>> = None;
    let mut seen: Vec<u8> = Vec::new();
    let mut cursor: Option<Box<dyn strata::Cursor>> = None;
    loop {
        if !timed && i >= quota {
            break;
        }
        if let Some(d) = deadline {
            if rounds.is_multiple_of(64) && (Instant::now() >= d || ctx.stop.load(Relaxed)) {
                m.cut = !timed;
                break;
            }
        }
        rounds += 1;
        let t0 = Instant::now();
        let mut n_ops = 1;
        match w {
            Workload::FillSeq | Workload::YcsbLoad => {
                ctx.put(first + i, &mut kb, &mut m)?;
                m.count("write");
            }
            Workload::FillRandom
            | Workload::Overwrite
            | Workload::OverwriteTimed
            | Workload::Fluctuation => {
                ctx.put(rng.gen_range(0..p.num), &mut kb, &mut m)?;
                m.count("write");
            }
            Workload::ReadRandom | Workload::ReadWhileWriting => {
                ctx.get(rng.gen_range(0..p.num), &mut kb, &mut m)?;
                m.count("read");
            }
            Workload::DeleteBlocks { ranges } => {
                let b = first_block + i / DELETED_PER_BLOCK;
                let keys = ctx.delete_block(b, ranges, &mut kb)?;
                m.written += keys * p.key_size as u64;
                // Every block counts its whole share (the last may be short).
                n_ops = DELETED_PER_BLOCK;
                m.count("delete-block");
            }
            Workload::DeleteRandom => {
                let n = rng.gen_range(0..p.num);
                ctx.key(n, &mut kb);
                ctx.write_one(&kb, None)?;
                ctx.live.clear(n);
                m.written += kb.len() as u64;
                m.count("delete");
            }
            Workload::SeekRandom => {
                ctx.key(rng.gen_range(0..p.num), &mut kb);
                m.bytes += scanned_bytes(ctx.store, &kb, p.scan_len)?;
                m.count("seek");
            }
            Workload::ReadSeq => {
                // One iterator for the whole run, as db_bench's readseq;
                // the entries are read where the engine keeps them.
                let c = match cursor.as_mut() {
                    Some(c) => c,
                    None => {
                        let mut c = ctx.store.cursor(None)?;
                        c.seek_to_first();
                        cursor.insert(c)
                    }
                };
                let want = (quota - i).min(100);
                let (mut got, mut bytes) = (0u64, 0u64);
                while got < want && c.valid() {
                    bytes += (c.key().len() + c.value().len()) as u64;
                    c.next();
                    got += 1;
                }
                c.status()?;
                if got == 0 {
                    break;
                }
                n_ops = got;
                m.bytes += bytes;
                m.count("next-100");
            }
            Workload::ScanResume => {
                let lo = match &last_key {
                    Some(k) => Bound::Excluded(k.as_slice()),
                    None => Bound::Unbounded,
                };
                let want = (quota - i).min(100) as usize;
                // The entries are read where the engine keeps them, not
                // copied (as `db_bench` reads): only the last key is kept,
                // in a buffer reused from call to call.
                let mut bytes = 0u64;
                let got = ctx.store.scan_visit(
                    ScanRange::new(lo, Bound::Unbounded).limit(want),
                    &mut |k, v| {
                        bytes += (k.len() + v.len()) as u64;
                        seen.clear();
                        seen.extend_from_slice(k);
                    },
                )?;
                if got == 0 {
                    break;
                }
                n_ops = got as u64;
                m.bytes += bytes;
                std::mem::swap(last_key.get_or_insert_with(Vec::new), &mut seen);
                m.count("scan-call");
            }
            Workload::Ycsb(_) | Workload::YcsbUniform(_) | Workload::Update(_) => {
                let Some(g) = mix.as_mut() else {
                    return Err(BenchError::Usage(format!("{} has no mix", w.name())));
                };
                let records = ctx.records.load(Relaxed);
                let since = |t0: Instant| (t0.elapsed().as_nanos() as u64).max(1);
                match g.next(&mut rng, records) {
                    Op::Read(n) => {
                        ctx.get(n, &mut kb, &mut m)?;
                        let _ = m.reads.record(since(t0));
                        m.count("read");
                    }
                    Op::Update(n) => {
                        ctx.put(n, &mut kb, &mut m)?;
                        let _ = m.writes.record(since(t0));
                        m.count("update");
                    }
                    Op::Insert => {
                        let n = ctx.next_insert.fetch_add(1, Relaxed);
                        ctx.put(n, &mut kb, &mut m)?;
                        ctx.records.fetch_max(n + 1, Relaxed);
                        let _ = m.writes.record(since(t0));
                        m.count("insert");
                    }
                    Op::Scan(n, len) => {
                        ctx.key(n, &mut kb);
                        m.bytes += scanned_bytes(ctx.store, &kb, len)?;
                        m.count("scan");
                    }
                    Op::ReadModifyWrite(n) => {
                        ctx.get(n, &mut kb, &mut m)?;
                        ctx.put(n, &mut kb, &mut m)?;
                        let _ = m.writes.record(since(t0));
                        m.count("read-modify-write");
                    }
                }
            }
            Workload::Counters { merge, loaded } => {
                let n = rng.gen_range(0..crate::workload::counter_range(p.num, loaded));
                ctx.increment(n, merge, &mut kb, &mut m)?;
                m.count(if merge { "merge" } else { "update" });
            }
            Workload::CountersRead => {
                ctx.get(rng.gen_range(0..counters(p.num)), &mut kb, &mut m)?;
                m.count("read");
            }
            Workload::Checkpoint => {
                let Some(target) = ctx.checkpoint_target.as_deref() else {
                    return Err(BenchError::Usage(
                        "checkpoint: the run named no target directory".into(),
                    ));
                };
                m.checkpoint = Some(ctx.store.checkpoint(target)?);
                m.count("checkpoint");
            }
            Workload::Backup => {
                let Some(store) = ctx.backup_store else {
                    return Err(BenchError::Usage(
                        "backup: the run opened no backup store".into(),
                    ));
                };
                m.backup = Some(ctx.store.backup(store)?);
                m.count("backup");
            }
            Workload::AfterDeletes(..) => {
                return Err(BenchError::Usage(format!(
                    "{} runs as {}",
                    w.name(),
                    w.run_as().name()
                )));
            }
        }
        let t1 = Instant::now();
        m.record(start, t0, t1, n_ops);
        i += n_ops;
        if i % 256 < n_ops {
            ctx.done.fetch_add(256, Relaxed);
        }
    }
    Ok(m)
}

/// The bytes of up to `len` entries from `from` on, read in place (a
/// seek and its scan).
fn scanned_bytes(store: &dyn KvStore, from: &[u8], len: usize) -> Result<u64, BenchError> {
    let mut bytes = 0u64;
    store.scan_visit(
        ScanRange::new(Bound::Included(from), Bound::Unbounded).limit(len),
        &mut |k, v| {
            bytes += (k.len() + v.len()) as u64;
        },
    )?;
    Ok(bytes)
}

/// The writer of readwhilewriting: overwrites until told to stop.
fn background_writer(ctx: &Ctx<'_>) -> Result<u64, BenchError> {
    let mut rng = SmallRng::seed_from_u64(ctx.p.seed ^ 0xBAD5EED);
    let mut kb = Vec::new();
    let mut m = Meter::new();
    let mut n = 0;
    while !ctx.stop.load(Relaxed) {
        ctx.put(rng.gen_range(0..ctx.p.num), &mut kb, &mut m)?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{self, EngineKind};
    use crate::gen::key_for;

    fn engines() -> Vec<&'static str> {
        if crate::engine::COMPARATORS {
            vec!["strata", "rocksdb", "leveldb", "fjall"]
        } else {
            vec!["strata"]
        }
    }

    #[test]
    fn scans_return_the_asked_lengths() -> Result<(), BenchError> {
        for name in engines() {
            let tmp = tempfile::tempdir().map_err(|e| BenchError::Io("tmp".into(), e))?;
            let kind = EngineKind::parse(name)?;
            let opened = engine::open(&kind, &EngineSettings::default(), tmp.path())?;
            let s = opened.store.as_ref();
            for n in 0..1000u64 {
                s.put(&key_for(n, 16), b"v")?;
            }
            s.delete(&key_for(500, 16))?;
            assert_eq!(s.get(&key_for(7, 16))?, Some(b"v".to_vec()), "{name}");
            assert_eq!(s.get(&key_for(500, 16))?, None, "{name}");
            s.flush()?;
            // `scan_visit` (what the reads use) sees what `scan` returns.
            let visit = |lo: Bound<&[u8]>, hi: Bound<&[u8]>, len: usize, rev: bool| {
                let mut seen = Vec::new();
                let range = ScanRange::new(lo, hi).limit(len).reverse(rev);
                let n = s.scan_visit(range, &mut |k, v| {
                    seen.push((k.to_vec(), v.to_vec()));
                })?;
                assert_eq!(n, seen.len(), "{name}");
                assert_eq!(seen, s.scan(range)?, "{name}");
                Ok::<_, BenchError>(seen)
            };
            for (start, len, want) in [
                (0u64, 10usize, 10usize),
                (995, 10, 5),
                (490, 20, 20),
                (995, 3, 3),
                (0, 100, 100),
            ] {
                let k = key_for(start, 16);
                let got = visit(Bound::Included(&k), Bound::Unbounded, len, false)?;
                assert_eq!(got.len(), want, "{name} forward from {start}");
                assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{name}");
            }
            let k = key_for(5, 16);
            let got = visit(Bound::Unbounded, Bound::Excluded(&k), 100, true)?;
            assert_eq!(
                got.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
                (0..5).rev().map(|n| key_for(n, 16)).collect::<Vec<_>>(),
                "{name}"
            );
            let got = visit(
                Bound::Excluded(&k),
                Bound::Included(&key_for(8, 16)),
                100,
                false,
            )?;
            assert_eq!(got.len(), 3, "{name}");
            let back = visit(
                Bound::Excluded(&k),
                Bound::Included(&key_for(8, 16)),
                2,
                true,
            )?;
            assert_eq!(
                back.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
                vec![key_for(8, 16), key_for(7, 16)],
                "{name}"
            );
            assert_eq!(
                visit(Bound::Unbounded, Bound::Unbounded, 0, false)?.len(),
                0
            );
            s.close()?;
            assert!(s.get(&k).is_err(), "{name}: closed");
            drop(opened);
        }
        Ok(())
    }

    /// `--own-defaults`: every engine opens with its library's defaults,
    /// whatever the shared settings say, and says which values it has.
    #[cfg(feature = "comparators")]
    #[test]
    fn own_defaults_reach_every_comparator() -> Result<(), BenchError> {
        // Tiny shared settings that would show if they leaked through.
        let settings = EngineSettings {
            own_defaults: true,
            write_buffer_size: 256 << 10,
            block_cache_size: 128 << 10,
            target_file_size: 256 << 10,
            bloom_bits_per_key: 3,
            ..EngineSettings::default()
        };
        let tmp = tempfile::tempdir().map_err(|e| BenchError::Io("tmp".into(), e))?;
        let open = |name: &str| -> Result<engine::OpenEngine, BenchError> {
            engine::open(&EngineKind::parse(name)?, &settings, &tmp.path().join(name))
        };

        // RocksDB: Options() as read back from its OPTIONS file.
        let rocks = open("rocksdb")?;
        for want in [
            "write_buffer_size=67108864",
            "max_write_buffer_number=2",
            "level0_file_num_compaction_trigger=4",
            "max_bytes_for_level_base=268435456",
            "target_file_size_base=67108864",
            "compression=kSnappyCompression",
            "max_background_jobs=2",
            "max_subcompactions=1",
            "block_size=4096",
            "filter_policy=nullptr",
            "internal lru(33554432)",
            "sync=false",
        ] {
            assert!(rocks.settings.contains(want), "{want}: {}", rocks.settings);
        }
        assert!(rocks.settings.starts_with(engine::OWN_DEFAULTS_PREFIX));
        rocks.store.close()?;

        // fjall: 32 MiB cache read back, its default policies.
        let fjall = open("fjall")?;
        assert!(
            fjall.settings.contains("cache=32 MiB"),
            "{}",
            fjall.settings
        );
        assert!(
            fjall.settings.contains("memtable=64 MiB"),
            "{}",
            fjall.settings
        );
        assert!(fjall.settings.contains("Lz4"), "{}", fjall.settings);
        fjall.store.close()?;

        // LevelDB has no options dump: check its behaviour. A 4 MiB
        // memtable holds ~3 MB of puts without a table (the shared 256 KiB
        // would have written a dozen); past 4 MiB a table appears, and
        // snappy shrinks compressible values (shared mode writes them raw).
        let level = open("leveldb")?;
        assert!(level.settings.contains("write_buffer_size=4194304"));
        let s = level.store.as_ref();
        let value = vec![b'a'; 1000];
        let tables = |s: &dyn KvStore| -> usize {
            super::result::level_shape(&s.stats())
                .iter()
                .map(|l| l.files)
                .sum()
        };
        for n in 0..2800u64 {
            s.put(&key_for(n, 16), &value)?;
        }
        s.wait_for_compactions()?;
        assert_eq!(tables(s), 0, "a 4 MiB memtable holds 2.9 MB");
        for n in 2800..6000u64 {
            s.put(&key_for(n, 16), &value)?;
        }
        s.wait_for_compactions()?;
        assert!(tables(s) >= 1, "past 4 MiB the memtable is written");
        let table_bytes: u64 = std::fs::read_dir(tmp.path().join("leveldb"))
            .map_err(|e| BenchError::Io(tmp.path().into(), e))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "ldb"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        assert!(
            table_bytes > 0 && table_bytes < 1 << 20,
            "{table_bytes} bytes of tables for >4 MB of snappy-compressible values"
        );
        s.close()?;
        Ok(())
    }

    #[test]
    fn a_run_in_process_measures() -> Result<(), BenchError> {
        let tmp = tempfile::tempdir().map_err(|e| BenchError::Io("tmp".into(), e))?;
        for w in ["fillrandom", "readrandom", "ycsb-e", "readseq"] {
            let spec = RunSpec {
                engine: "strata".into(),
                workload: w.into(),
                params: Params {
                    num: 2000,
                    ops: 1000,
                    ..Params::default()
                },
                settings: EngineSettings::default(),
                dir: tmp.path().join(w),
                cold: true,
                settle: true,
                keep_data: false,
                preloaded: false,
                save_image: None,
                chain_records: None,
            };
            let r = run(&spec)?;
            assert!(r.ops > 0 && r.ops_per_sec > 0.0, "{w}");
            assert!(
                r.latency.p50_us <= r.latency.p99_us && r.latency.p99_us <= r.latency.max_us,
                "{w}"
            );
            match w {
                "fillrandom" => {
                    assert_eq!(r.ops, 2000);
                    assert!(r.wa_engine.is_some_and(|x| x >= 1.0), "{:?}", r.wa_engine);
                }
                "readrandom" => assert_eq!(r.gets_found, 1000),
                "readseq" => assert_eq!(r.ops, 1000),
                _ => assert!(r.op_counts.get("scan").is_some_and(|&n| n > 900)),
            }
        }
        Ok(())
    }

    /// The checkpoint row times one call, reports what the checkpoint
    /// holds and removes it; engines without checkpoints fail the row with
    /// `NotSupported`.
    #[test]
    fn a_checkpoint_row_times_one_call() -> Result<(), BenchError> {
        let tmp = tempfile::tempdir().map_err(|e| BenchError::Io("tmp".into(), e))?;
        for name in engines() {
            let spec = RunSpec {
                engine: name.into(),
                workload: "checkpoint".into(),
                params: Params {
                    num: 2000,
                    ops: 1000,
                    ..Params::default()
                },
                settings: EngineSettings::default(),
                dir: tmp.path().join(name),
                cold: false,
                settle: true,
                keep_data: false,
                preloaded: false,
                save_image: None,
                chain_records: None,
            };
            let result = run(&spec);
            if matches!(name, "strata" | "rocksdb") {
                let r = result?;
                assert_eq!(r.ops, 1, "{name}");
                let c = r.checkpoint.clone().unwrap_or_default();
                // The tables are hard links; the manifest and the like are not.
                assert!(
                    c.files > 0 && c.unlinked_bytes > 0 && c.unlinked_bytes < c.bytes,
                    "{name}: {c:?}"
                );
                assert_eq!(
                    c.engine_copied_bytes,
                    (name == "strata").then_some(0),
                    "{name}"
                );
            } else {
                let e = result.err().map(|e| e.to_string()).unwrap_or_default();
                assert!(e.contains("not supported"), "{name}: {e}");
            }
            let target = tmp.path().join(format!("{name}-checkpoint"));
            assert!(!target.exists(), "{name}: the checkpoint was left");
        }
        Ok(())
    }

    /// The backup row times one call, reports what the backup directory
    /// holds and removes it; engines without backups fail the row with
    /// `NotSupported`.
    #[test]
    fn a_backup_row_times_one_call() -> Result<(), BenchError> {
        let tmp = tempfile::tempdir().map_err(|e| BenchError::Io("tmp".into(), e))?;
        for name in engines() {
            let spec = RunSpec {
                engine: name.into(),
                workload: "backup".into(),
                params: Params {
                    num: 2000,
                    ops: 1000,
                    ..Params::default()
                },
                settings: EngineSettings::default(),
                dir: tmp.path().join(name),
                cold: false,
                settle: true,
                keep_data: false,
                preloaded: false,
                save_image: None,
                chain_records: None,
            };
            let result = run(&spec);
            if matches!(name, "strata" | "rocksdb") {
                let r = result?;
                assert_eq!(r.ops, 1, "{name}");
                let b = r.backup.clone().unwrap_or_default();
                // The store's LOCK, and at least a table and a meta file.
                assert!(b.files > 2 && b.bytes > 0, "{name}: {b:?}");
                match b.engine_copied_bytes {
                    Some(c) => assert!(name == "strata" && c > 0 && c <= b.bytes, "{name}: {b:?}"),
                    None => assert_eq!(name, "rocksdb"),
                }
            } else {
                let e = result.err().map(|e| e.to_string()).unwrap_or_default();
                assert!(e.contains("not supported"), "{name}: {e}");
            }
            let target = tmp.path().join(format!("{name}-backup"));
            assert!(!target.exists(), "{name}: the backup was left");
        }
        Ok(())
    }

    #[test]
    fn a_budget_cuts_a_long_run_and_says_so() -> Result<(), BenchError> {
        let tmp = tempfile::tempdir().map_err(|e| BenchError::Io("tmp".into(), e))?;
        let spec = |name: &str, budget: f64| RunSpec {
            engine: "strata".into(),
            workload: "readrandom".into(),
            params: Params {
                num: 1000,
                ops: 1 << 40,
                max_run_secs: Some(budget),
                ..Params::default()
            },
            settings: EngineSettings::default(),
            dir: tmp.path().join(name),
            cold: false,
            settle: false,
            keep_data: false,
            preloaded: false,
            save_image: None,
            chain_records: None,
        };
        let r = run(&spec("cut", 0.2))?;
        assert!(r.cut_short);
        assert!(r.ops > 0 && r.ops < 1 << 40, "{}", r.ops);
        assert!(r.secs < 30.0, "{}", r.secs);
        // A budget the run does not reach leaves it whole.
        let whole = RunSpec {
            params: Params {
                ops: 500,
                ..spec("whole", 600.0).params
            },
            ..spec("whole", 600.0)
        };
        let r = run(&whole)?;
        assert!(!r.cut_short);
        assert_eq!(r.ops, 500);
        Ok(())
    }

    #[test]
    fn sync_reaches_a_strata_engine() -> Result<(), BenchError> {
        let tmp = tempfile::tempdir().map_err(|e| BenchError::Io("tmp".into(), e))?;
        let spec = RunSpec {
            engine: "strata".into(),
            workload: "fillrandom".into(),
            params: Params {
                num: 300,
                ops: 300,
                ..Params::default()
            },
            settings: EngineSettings {
                sync: true,
                ..EngineSettings::default()
            },
            dir: tmp.path().join("sync"),
            cold: false,
            settle: false,
            keep_data: false,
            preloaded: false,
            save_image: None,
            chain_records: None,
        };
        let r = run(&spec)?;
        let syncs = r
            .engine_stats
            .as_ref()
            .and_then(|s| s["lsm"]["wal_syncs"].as_u64())
            .unwrap_or(0);
        // One WAL sync per put (single thread: no group shares one).
        assert!(syncs >= 300, "{syncs} syncs for 300 synced puts");
        Ok(())
    }
}
