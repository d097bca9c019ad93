//! One engine × workload run, executed inside its own child process: load
//! what the workload needs, run it, measure, print one result line.

use crate::engine::{self, EngineKind, EngineSettings};
use crate::gen::{key_into, scatter, ValuePool};
use crate::sys;
use crate::workload::{MixGen, Op, Params, Preload, Workload};
use crate::BenchError;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use strata::{KvStore, StoreStats, WriteBatch, WriteOptions};

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
}

fn yes() -> bool {
    true
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    /// Mean and percentiles of a histogram of nanoseconds.
    fn of(h: &Histogram<u64>) -> Self {
        let us = |v: u64| v as f64 / 1000.0;
        Latency {
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.50)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// Per-level shape (files, bytes; bytes 0 where the engine does not say).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Level {
    pub files: usize,
    pub bytes: u64,
}

/// Everything measured in one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunResult {
    pub engine: String,
    pub workload: String,
    pub description: String,
    pub version: String,
    pub engine_settings: String,
    /// Set when the run failed; the figures are then zero.
    pub error: Option<String>,
    pub ops: u64,
    /// The run's budget (`max_run_secs`) ended it before all its operations.
    #[serde(default)]
    pub cut_short: bool,
    pub secs: f64,
    pub ops_per_sec: f64,
    pub mb_per_sec: f64,
    pub latency: Latency,
    /// Mix workloads (YCSB, U1…U9): latency of the reads alone.
    #[serde(default)]
    pub read_latency: Option<Latency>,
    /// Mix workloads: latency of the updates and inserts alone.
    #[serde(default)]
    pub write_latency: Option<Latency>,
    /// Operations completed in each full second of the run.
    pub timeline: Vec<u64>,
    /// Operations completed in each full tenth of a second (the chart of a
    /// run of a few seconds draws this).
    #[serde(default)]
    pub timeline_fine: Vec<u64>,
    pub timeline_min: f64,
    pub timeline_mean: f64,
    pub seconds_below_half_mean: usize,
    /// Counts per operation kind.
    pub op_counts: BTreeMap<String, u64>,
    pub gets: u64,
    pub gets_found: u64,
    pub user_bytes_written: u64,
    pub live_bytes: u64,
    pub dir_bytes: u64,
    pub device_write_bytes: u64,
    pub device_read_bytes: u64,
    pub cancelled_write_bytes: u64,
    /// Bytes the block device under the run's directory wrote from the
    /// start of the run until the engine was idle again and closed, its
    /// dirty pages written back ([`sys::disk_written`]); `None` without a
    /// block device.
    #[serde(default)]
    pub disk_write_bytes: Option<u64>,
    /// `disk_write_bytes` (else `device_write_bytes`, the process's count
    /// of pages it dirtied) ÷ user bytes written.
    pub wa_device: Option<f64>,
    /// `device_write_bytes` ÷ user bytes written: pages counted when
    /// dirtied, including those deleted before they reached the device.
    #[serde(default)]
    pub wa_proc: Option<f64>,
    /// Device bytes written during the measured operations only ÷ user bytes.
    #[serde(default)]
    pub wa_window: Option<f64>,
    /// Seconds the engine needed after the run to become idle.
    #[serde(default)]
    pub settle_secs: Option<f64>,
    /// When the slowest operation started, in seconds of `CLOCK_MONOTONIC`
    /// (the clock of `perf record -k CLOCK_MONOTONIC`), to find it in a
    /// trace of the run.
    #[serde(default)]
    pub slowest_op_at: Option<f64>,
    /// CPU seconds the host took from this machine's virtual CPUs during
    /// the measured operations (`steal` in `/proc/stat`, summed over the
    /// CPUs): time in which no thread here ran, which shows up in latency
    /// maxima of every engine alike.
    #[serde(default)]
    pub steal_secs: Option<f64>,
    /// The engine's own count of bytes written ÷ user bytes (strata only).
    pub wa_engine: Option<f64>,
    /// Directory size after close ÷ live user bytes.
    pub space_amp: Option<f64>,
    /// Device bytes read per get (page-cache misses only).
    pub device_read_bytes_per_get: Option<f64>,
    /// Table bytes the engine read per get (strata only).
    pub engine_read_bytes_per_get: Option<f64>,
    pub cpu_secs: f64,
    /// The part of `cpu_secs` spent in the kernel.
    #[serde(default)]
    pub sys_secs: f64,
    pub max_rss_mib: f64,
    /// Page faults of the measured operations and the close: served from
    /// the page cache (minor) and waiting for a read (major).
    #[serde(default)]
    pub minor_faults: u64,
    #[serde(default)]
    pub major_faults: u64,
    /// Time writers were stopped or slowed (strata only).
    pub stall_secs: Option<f64>,
    pub levels: Vec<Level>,
    /// Seconds spent loading before the run, settling included (not measured).
    pub load_secs: f64,
    /// strata's statistics at the end of the run (`StoreStats::to_json`;
    /// counters cover load and run).
    #[serde(default)]
    pub engine_stats: Option<serde_json::Value>,
}

/// Child's stdout protocol: progress lines, then one result line.
pub const PROGRESS_PREFIX: &str = "progress ";
pub const RESULT_PREFIX: &str = "result ";

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

/// Writes records `0..num` in batches (seeded random order for db_bench).
fn preload(ctx: &Ctx<'_>, kind: Preload) -> Result<(), BenchError> {
    let p = ctx.p;
    let mut order: Vec<u64> = (0..p.num).collect();
    if kind == Preload::DbBench {
        use rand::seq::SliceRandom;
        order.shuffle(&mut SmallRng::seed_from_u64(p.seed ^ 0x10AD));
    }
    let mut kb = Vec::new();
    for (i, chunk) in order.chunks(1000).enumerate() {
        let mut b = WriteBatch::new();
        for &n in chunk {
            ctx.key(n, &mut kb);
            b.put(&kb, ctx.values.value(n, p.value_size));
            ctx.live.set(n);
        }
        ctx.store.write(b, &WriteOptions::default())?;
        if i % 50 == 0 {
            progress("load", (i * 1000) as u64, p.num);
        }
    }
    ctx.records.store(p.num, Relaxed);
    ctx.next_insert.store(p.num, Relaxed);
    ctx.store.flush()?;
    Ok(())
}

/// The context of a run of `w` on `store` (`sync`: ask for a synced write
/// every time).
fn new_ctx<'a>(store: &'a dyn KvStore, p: &'a Params, w: Workload, sync: bool) -> Ctx<'a> {
    let inserts = w
        .mix(p)
        .map_or(0, |m| (m.insert * p.ops as f64 * 1.5) as u64 + 64);
    Ctx {
        store,
        p,
        values: ValuePool::with_ratio(p.seed, p.value_size, p.compression_ratio),
        live: Live::new(p.num + inserts),
        records: AtomicU64::new(0),
        next_insert: AtomicU64::new(0),
        hashed: matches!(w.preload(), Preload::Ycsb) || w == Workload::YcsbLoad,
        done: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        sync,
    }
}

/// Records that keys `0..num` are loaded (a database copied from an image).
fn mark_loaded(ctx: &Ctx<'_>) {
    for n in 0..ctx.p.num {
        ctx.live.set(n);
    }
    ctx.records.store(ctx.p.num, Relaxed);
    ctx.next_insert.store(ctx.p.num, Relaxed);
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
        _ => p.ops / threads + u64::from((t as u64) < p.ops % threads),
    };
    let first = (p.num / threads) * t as u64 + (t as u64).min(p.num % threads);
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
                let got =
                    ctx.store
                        .scan_visit(lo, Bound::Unbounded, want, false, &mut |k, v| {
                            bytes += (k.len() + v.len()) as u64;
                            seen.clear();
                            seen.extend_from_slice(k);
                        })?;
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
        Bound::Included(from),
        Bound::Unbounded,
        len,
        false,
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

fn level_shape(s: &StoreStats) -> Vec<Level> {
    s.lsm()
        .map_or(&[][..], |l| &l.levels)
        .iter()
        .map(|l| Level {
            files: l.files,
            bytes: l.bytes,
        })
        .collect()
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// Where runs keep their tmpfs directories: `<run dir name>-<child pid>`.
pub const SHM_ROOT: &str = "/dev/shm/strata-bench";

/// Removes the tmpfs directories of the run whose directory is `dir`
/// (those a child killed before its end left behind).
pub fn remove_shm_dirs(dir: &Path) {
    let Some(run) = dir.file_name().map(|n| format!("{}-", n.to_string_lossy())) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(SHM_ROOT) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&run) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The run's directory on tmpfs (`@shm` in an engine spec), removed when
/// the run ends: tmpfs holds its bytes in memory.
struct Shm(PathBuf);

impl Drop for Shm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where run `spec` keeps its files: the engine with `@shm` resolved to
/// the run's tmpfs directory, the database directory (`db_dir=` or the
/// run's directory) and the tmpfs directory.
fn placement(spec: &RunSpec) -> Result<(EngineKind, PathBuf, Shm, bool), BenchError> {
    let run = spec
        .dir
        .file_name()
        .map_or_else(|| "run".into(), |n| n.to_string_lossy().to_string());
    let shm = Path::new(SHM_ROOT).join(format!("{run}-{}", std::process::id()));
    let engine = spec.engine.replace(engine::SHM, &shm.display().to_string());
    let kind = EngineKind::parse(&engine)?;
    let db_dir = match &kind {
        EngineKind::Strata(opts) => engine::split_placement(opts).0.map(PathBuf::from),
        _ => None,
    };
    let own = engine::split_view(&spec.engine).1;
    Ok((
        kind,
        db_dir.unwrap_or_else(|| spec.dir.clone()),
        Shm(shm),
        own,
    ))
}

/// Runs `spec` in this process and returns its result.
pub fn run(spec: &RunSpec) -> Result<RunResult, BenchError> {
    let (kind, dir, shm, own_view) = placement(spec)?;
    // `engine@own` runs with its own defaults whatever the run's view.
    let settings = EngineSettings {
        own_defaults: spec.settings.own_defaults || own_view,
        ..spec.settings.clone()
    };
    let w = Workload::parse(&spec.workload)?;
    let cold = spec.cold || crate::workload::split_cold(&spec.workload).1;
    let p = &spec.params;
    p.validate()?;
    for d in [&spec.dir, &dir, &shm.0] {
        if spec.preloaded && d == &dir {
            continue;
        }
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| BenchError::Io(d.clone(), e))?;
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::Io(dir.clone(), e))?;
    let load_start = Instant::now();
    let mut opened = engine::open(&kind, &settings, &dir)?;
    let sync = spec.settings.sync && !kind.is_comparator();
    // A load kept as an image: loaded and settled, then closed, so that the
    // copy is of a database at rest; this run then reopens it, evicted, as
    // every run restored from the image does.
    let mut preloaded = spec.preloaded;
    if let (Some(image), false, Preload::DbBench | Preload::Ycsb) =
        (&spec.save_image, preloaded, w.preload())
    {
        preload(&new_ctx(opened.store.as_ref(), p, w, sync), w.preload())?;
        opened.store.wait_for_compactions()?;
        opened.store.close()?;
        drop(opened);
        sys::save_image(&dir, image)?;
        sys::drop_cache(&dir);
        opened = engine::open(&kind, &settings, &dir)?;
        preloaded = true;
    }
    let store: &dyn KvStore = opened.store.as_ref();
    let ctx = new_ctx(store, p, w, sync);
    match w.preload() {
        Preload::Nothing => {}
        _ if preloaded => {
            // A database copied from an image: the same records. Work the
            // engine starts at open (log replay, compactions it finds due)
            // is settled before the run, as after a load.
            mark_loaded(&ctx);
            if spec.settle {
                store.wait_for_compactions()?;
            }
        }
        kind => {
            preload(&ctx, kind)?;
            if spec.settle {
                store.wait_for_compactions()?;
            }
            if cold {
                sys::drop_cache(&dir);
            }
        }
    }
    let load_secs = load_start.elapsed().as_secs_f64();

    let stats0 = store.stats();
    let disk0 = sys::disk_written(&spec.dir);
    let io0 = sys::proc_io();
    let cpu0 = sys::usage();
    let steal0 = sys::steal_secs();
    let timed = w.timed();
    let total = if timed {
        (p.duration_secs * 1000.0) as u64
    } else if matches!(
        w,
        Workload::FillSeq | Workload::FillRandom | Workload::YcsbLoad
    ) {
        p.num
    } else if w == Workload::ReadSeq {
        p.ops.min(p.num) * p.threads as u64
    } else {
        p.ops
    };
    let start = Instant::now();
    let deadline = if timed {
        Some(start + Duration::from_secs_f64(p.duration_secs))
    } else {
        // Validated by the parent; a budget past the clock's range is none.
        p.max_run_secs
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .and_then(|d| start.checked_add(d))
    };
    let (meter, writer_ops, elapsed) = std::thread::scope(|s| -> Result<_, BenchError> {
        let ctx = &ctx;
        let reporter = s.spawn(move || {
            while !ctx.stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let done = if timed {
                    start.elapsed().as_millis() as u64
                } else {
                    ctx.done.load(Relaxed)
                };
                progress("run", done.min(total), total);
            }
        });
        let writer =
            (w == Workload::ReadWhileWriting).then(|| s.spawn(move || background_writer(ctx)));
        let workers: Vec<_> = (0..p.threads)
            .map(|t| s.spawn(move || worker(ctx, w, t, start, deadline)))
            .collect();
        let mut total_meter = Meter::new();
        let mut first_err = None;
        for h in workers {
            match h.join() {
                Ok(Ok(m)) => total_meter.merge(m),
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err =
                        first_err.or(Some(BenchError::Usage("a worker thread panicked".into())))
                }
            }
        }
        let elapsed = start.elapsed();
        ctx.stop.store(true, Relaxed);
        let writer_ops = match writer.map(|h| h.join()) {
            Some(Ok(Ok(n))) => Some(n),
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(_)) => return Err(BenchError::Usage("the writer thread panicked".into())),
            None => None,
        };
        let _ = reporter.join();
        match first_err {
            Some(e) => Err(e),
            None => Ok((total_meter, writer_ops, elapsed)),
        }
    })?;

    // The window's own writes; then the compaction they left due and the
    // close are charged to the run too.
    let io_window = sys::proc_io();
    let steal_secs = match (steal0, sys::steal_secs()) {
        (Some(a), Some(b)) => Some((b - a).max(0.0)),
        _ => None,
    };
    let wrote = meter.written > 0 || writer_ops.is_some_and(|n| n > 0);
    let settle_secs = if spec.settle && wrote {
        let t = Instant::now();
        sys::take_settle_overshoot();
        store.wait_for_compactions()?;
        // A polled engine's confirming looks are the harness's, not its own.
        let waited = t.elapsed().saturating_sub(sys::take_settle_overshoot());
        Some(waited.as_secs_f64())
    } else {
        None
    };
    let stats_before_close = store.stats();
    store.close()?;
    let stats1 = if kind.is_comparator() {
        stats_before_close.clone()
    } else {
        store.stats()
    };
    let version = opened.version.clone();
    let settings = opened.settings.clone();
    let live_count = ctx.live.count.load(Relaxed);
    drop(ctx);
    drop(opened);
    let io1 = sys::proc_io();
    let cpu1 = sys::usage();
    let disk_w = match (disk0, sys::disk_written(&spec.dir)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    // Every tier: the run's directory, and its tmpfs part.
    let dir_bytes = sys::dir_size(&spec.dir) + sys::dir_size(&shm.0);

    let secs = elapsed.as_secs_f64().max(1e-9);
    let latency = Latency::of(&meter.hist);
    let mixed = w.mix(p).is_some();
    let read_latency = (mixed && !meter.reads.is_empty()).then(|| Latency::of(&meter.reads));
    let write_latency = (mixed && !meter.writes.is_empty()).then(|| Latency::of(&meter.writes));
    let full = (elapsed.as_secs() as usize).min(meter.buckets.len());
    let timeline: Vec<u64> = meter.buckets[..full].to_vec();
    let tenths = ((elapsed.as_millis() / 100) as usize).min(meter.fine.len());
    let timeline_fine: Vec<u64> = meter.fine[..tenths].to_vec();
    let (tmin, tmean) = if timeline.is_empty() {
        let r = meter.ops as f64 / secs;
        (r, r)
    } else {
        let min = timeline.iter().copied().min().unwrap_or(0) as f64;
        (
            min,
            timeline.iter().sum::<u64>() as f64 / timeline.len() as f64,
        )
    };
    let below = timeline
        .iter()
        .filter(|&&v| (v as f64) < tmean / 2.0)
        .count();
    let mut op_counts: BTreeMap<String, u64> = meter
        .counts
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    if let Some(n) = writer_ops {
        op_counts.insert("background-write".into(), n);
    }
    let written = meter.written + writer_ops.map_or(0, |n| n * (p.key_size + p.value_size) as u64);
    let dev_w = io1.write_bytes.saturating_sub(io0.write_bytes);
    let wa_proc = (dev_w > 0).then(|| ratio(dev_w, written)).flatten();
    let dev_r = io1.read_bytes.saturating_sub(io0.read_bytes);
    let live_bytes = live_count * (p.key_size + p.value_size) as u64;
    let strata_engine = !kind.is_comparator();
    let eng_w = stats1
        .disk_bytes_written
        .saturating_sub(stats0.disk_bytes_written);
    let user_w = stats1
        .user_bytes_written
        .saturating_sub(stats0.user_bytes_written);
    let stalled = |s: &StoreStats| s.lsm().map_or(0, |l| l.stall_micros + l.slowdown_micros);
    let stall = stalled(&stats1).saturating_sub(stalled(&stats0));
    Ok(RunResult {
        engine: spec.engine.clone(),
        workload: spec.workload.trim().to_string(),
        description: w.describe(p),
        version,
        engine_settings: settings,
        error: None,
        ops: meter.ops,
        cut_short: meter.cut,
        secs,
        ops_per_sec: meter.ops as f64 / secs,
        mb_per_sec: meter.bytes as f64 / secs / 1e6,
        latency,
        read_latency,
        write_latency,
        timeline,
        timeline_fine,
        timeline_min: tmin,
        timeline_mean: tmean,
        seconds_below_half_mean: below,
        op_counts,
        gets: meter.gets,
        gets_found: meter.found,
        user_bytes_written: written,
        live_bytes,
        dir_bytes,
        device_write_bytes: dev_w,
        device_read_bytes: dev_r,
        cancelled_write_bytes: io1
            .cancelled_write_bytes
            .saturating_sub(io0.cancelled_write_bytes),
        disk_write_bytes: disk_w,
        wa_device: disk_w.and_then(|d| ratio(d, written)).or(wa_proc),
        wa_proc,
        wa_window: if written > 0 {
            ratio(
                io_window.write_bytes.saturating_sub(io0.write_bytes),
                written,
            )
        } else {
            None
        },
        settle_secs,
        slowest_op_at: meter.slowest.map(|(_, at)| crate::sys::monotonic_secs(at)),
        steal_secs,
        wa_engine: if strata_engine {
            ratio(eng_w, user_w)
        } else {
            None
        },
        space_amp: ratio(dir_bytes, live_bytes),
        device_read_bytes_per_get: ratio(dev_r, meter.gets),
        engine_read_bytes_per_get: if strata_engine {
            ratio(
                stats1
                    .disk_bytes_read
                    .saturating_sub(stats0.disk_bytes_read),
                meter.gets,
            )
        } else {
            None
        },
        cpu_secs: cpu1.cpu_secs - cpu0.cpu_secs,
        sys_secs: cpu1.sys_secs - cpu0.sys_secs,
        max_rss_mib: cpu1.max_rss_kib as f64 / 1024.0,
        minor_faults: cpu1.minor_faults.saturating_sub(cpu0.minor_faults),
        major_faults: cpu1.major_faults.saturating_sub(cpu0.major_faults),
        stall_secs: strata_engine.then_some(stall as f64 / 1e6),
        levels: level_shape(&stats_before_close),
        engine_stats: if strata_engine {
            serde_json::from_str(&stats_before_close.to_json()).ok()
        } else {
            None
        },
        load_secs,
    })
}

/// The environment variable naming the `cgroup.procs` file of the memory
/// cgroup a child runs in: the child writes its pid there before anything
/// else.
pub const CGROUP_PROCS_ENV: &str = "STRATA_BENCH_CGROUP_PROCS";

/// The child's entry point: enters its memory cgroup ([`CGROUP_PROCS_ENV`]),
/// runs the JSON `spec`, prints the result line. Returns the process exit
/// code.
pub fn child_main(spec_json: &str) -> i32 {
    if let Some(procs) = std::env::var_os(CGROUP_PROCS_ENV) {
        if let Err(e) = std::fs::write(&procs, std::process::id().to_string()) {
            eprintln!(
                "error: entering the memory cgroup ({}): {e}",
                std::path::Path::new(&procs).display()
            );
            return 2;
        }
    }
    let spec: RunSpec = match serde_json::from_str(spec_json) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: bad run spec: {e}");
            return 2;
        }
    };
    let result = match run(&spec) {
        Ok(r) => r,
        Err(e) => RunResult {
            engine: spec.engine.clone(),
            workload: spec.workload.clone(),
            error: Some(e.to_string()),
            ..RunResult::default()
        },
    };
    if !spec.keep_data {
        let _ = std::fs::remove_dir_all(&spec.dir);
    }
    match serde_json::to_string(&result) {
        Ok(j) => {
            emit(&format!("{RESULT_PREFIX}{j}"));
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
                let n = s.scan_visit(lo, hi, len, rev, &mut |k, v| {
                    seen.push((k.to_vec(), v.to_vec()));
                })?;
                assert_eq!(n, seen.len(), "{name}");
                assert_eq!(seen, s.scan(lo, hi, len, rev)?, "{name}");
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
        let tables =
            |s: &dyn KvStore| -> usize { level_shape(&s.stats()).iter().map(|l| l.files).sum() };
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
