//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use strata::{Db, Options};

/// How long a test waits for something another thread must do before it
/// fails instead of hanging (generous: a loaded 2-core machine).
pub const LIVENESS: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits until `done` returns true, polling; panics naming `what` after
/// [`LIVENESS`], so a regression that stops the awaited event fails the
/// test instead of hanging the suite.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    let mut spins = 0u32;
    while !done() {
        assert!(
            start.elapsed() < LIVENESS,
            "gave up after {LIVENESS:?} waiting for {what}"
        );
        // Spin briefly (the event is usually close), then sleep.
        spins += 1;
        if spins < 1000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Options that make every mechanism run on small data: tiny memtables
/// (of two or three shards), tables and levels, so flushes and multi-level
/// compactions happen often.
pub fn tiny_options() -> Options {
    Options::default()
        .write_buffer_size(8 * 1024)
        .memtable_shard_size(4 * 1024)
        .target_file_size(8 * 1024)
        .max_bytes_for_level_base(32 * 1024)
        .max_bytes_for_level_multiplier(4)
        .level0_file_num_compaction_trigger(2)
        .block_size(256)
        .block_cache_size(64 * 1024)
        .merge_operator(strata::MergeOp::new(strata::merge::Append::new("|")))
}

/// The model's merge of `operand` into `k`: the tests' operator
/// ([`tiny_options`]) appends, joined by `|`.
pub fn model_merge(m: &mut Model, k: &[u8], operand: &[u8]) {
    let v = match m.get(k) {
        Some(old) => [old.as_slice(), b"|", operand].concat(),
        None => operand.to_vec(),
    };
    m.insert(k.to_vec(), v);
}

/// Inside `impl FileSystem for T`: every method but `create`, passed on
/// to the field `$inner` (test file systems that change only `create`).
/// Use with `#[macro_use] mod common;`.
#[allow(unused_macros)]
macro_rules! delegate_fs_except_create {
    ($inner:ident) => {
        fn create_dir_all(&self, path: &std::path::Path) -> strata::Result<()> {
            self.$inner.create_dir_all(path)
        }
        fn open_random(
            &self,
            path: &std::path::Path,
        ) -> strata::Result<std::sync::Arc<dyn strata::io::RandomAccessFile>> {
            self.$inner.open_random(path)
        }
        fn open_sequential(
            &self,
            path: &std::path::Path,
        ) -> strata::Result<Box<dyn strata::io::SequentialFile>> {
            self.$inner.open_sequential(path)
        }
        fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> strata::Result<()> {
            self.$inner.rename(from, to)
        }
        fn remove_file(&self, path: &std::path::Path) -> strata::Result<()> {
            self.$inner.remove_file(path)
        }
        fn list_dir(&self, path: &std::path::Path) -> strata::Result<Vec<String>> {
            self.$inner.list_dir(path)
        }
        fn exists(&self, path: &std::path::Path) -> bool {
            self.$inner.exists(path)
        }
        fn file_size(&self, path: &std::path::Path) -> strata::Result<u64> {
            self.$inner.file_size(path)
        }
        fn sync_dir(&self, path: &std::path::Path) -> strata::Result<()> {
            self.$inner.sync_dir(path)
        }
        fn lock(&self, path: &std::path::Path) -> strata::Result<Box<dyn strata::io::FileLock>> {
            self.$inner.lock(path)
        }
    };
}

/// The stale picker (active compaction) set to act on tiny tables: a low
/// threshold so early compactions run, a small update table so entries are
/// evicted too.
pub const STALE: &str = "compaction_picker=stale,stale_threshold=0.2,update_table_size=16K";

/// Every in-process compaction executor (CoPro, seed 001), set to act on
/// tiny tables: sub-tasks, the pipeline, both, and the decision component
/// with a "large value" threshold the histories' values straddle, so it
/// picks both modes. (`offload` needs a worker process: `tests/offload.rs`
/// and the CLI's worker tests.)
#[allow(dead_code)]
pub const EXECUTORS: [&str; 4] = [
    "executor=subtasks:3",
    "executor=pipelined",
    "executor=copro:2",
    "executor=copro+:3,copro_large_value=200,copro_threshold=0.5",
];

/// The matrix container (MatrixKV, seed 000) set to act on tiny data: a
/// 64 KiB container (column compaction from ~43 KiB, about five 8 KiB
/// rows), 12 KiB columns, three rows per segment filter.
pub const MATRIX: &str =
    "l0=matrix,matrix_capacity=64K,matrix_column_bytes=12K,matrix_segment_rows=3";

/// Drains `db`'s matrix container by hand, then flushes one small row far
/// below its 2/3 trigger, which stays. After `wait_for_compactions` alone
/// the container may hold rows or none: the last rows drain with the
/// compacting group when they joined it, which depends on when it formed.
pub fn drain_then_one_row(db: &Db) {
    db.compact_range::<&[u8], _>(..).expect("compact_range");
    db.put(b"tail", b"row").expect("put");
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
}

/// `tiny_options()` with the option list `spec` (`name=value,...`) applied.
pub fn tiny_with(spec: &str) -> Options {
    let mut o = tiny_options();
    if let Err(e) = o.apply(spec) {
        panic!("options {spec:?}: {e}");
    }
    o
}

pub fn open(dir: &std::path::Path, opts: Options) -> Db {
    match Db::open(dir, opts) {
        Ok(db) => db,
        Err(e) => panic!("open {}: {e}", dir.display()),
    }
}

/// Starts a compaction worker with `cfg` on a thread of this process,
/// listening on a socket in `dir`; returns its address once it listens.
pub fn start_worker(
    dir: &std::path::Path,
    cfg: strata::compaction::executor::offload::WorkerConfig,
) -> String {
    let addr = format!("unix:{}", dir.join("worker.sock").display());
    let (tx, rx) = std::sync::mpsc::channel();
    let serve_addr = addr.clone();
    std::thread::spawn(move || {
        let _ = strata::compaction::executor::offload::serve(&serve_addr, &cfg, || {
            let _ = tx.send(());
        });
    });
    rx.recv_timeout(LIVENESS).expect("worker listening");
    addr
}

/// All entries via a forward scan.
pub fn all(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan::<&[u8], _>(..)
        .expect("scan")
        .collect::<Result<Vec<_>, _>>()
        .expect("scan entries")
}

/// The model of a database: what a full scan should return.
pub type Model = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// One write of a generated history: a batch of puts (`Some`) and deletes
/// (`None`), then perhaps merges (key, operand), then perhaps a range
/// deletion `[lo, hi)`, with its `sync` flag. Values and operands name the
/// op, so states after different prefixes of a history differ.
#[derive(Debug, Clone)]
pub struct HistOp {
    pub entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub merges: Vec<(Vec<u8>, Vec<u8>)>,
    pub range: Option<(Vec<u8>, Vec<u8>)>,
    pub sync: bool,
}

impl HistOp {
    pub fn apply(&self, m: &mut Model) {
        for (k, v) in &self.entries {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        for (k, o) in &self.merges {
            model_merge(m, k, o);
        }
        if let Some((lo, hi)) = &self.range {
            m.retain(|k, _| !(lo <= k && k < hi));
        }
    }

    pub fn batch(&self) -> strata::WriteBatch {
        let mut b = strata::WriteBatch::new();
        for (k, v) in &self.entries {
            match v {
                Some(v) => b.put(k, v),
                None => b.delete(k),
            }
        }
        for (k, o) in &self.merges {
            b.merge(k, o);
        }
        if let Some((lo, hi)) = &self.range {
            b.delete_range(lo, hi);
        }
        b
    }

    /// Writes the op to `db`.
    pub fn write(&self, db: &Db) -> strata::Result<()> {
        db.write(self.batch(), &strata::WriteOptions { sync: self.sync })
    }
}

/// A seeded history of `n` ops over `keys` keys: single puts and deletes and
/// batches of 2–8 entries; a fraction `sync` of them synced; values of 0–200
/// bytes and now and then 1–3 KiB. One op in 40 ends with a range
/// deletion of 1–8 keys (drawn from a second generator, so the puts and
/// deletes are those the seed always made), one in 16 with one to three
/// merges (from a third).
pub fn history(seed: u64, n: usize, keys: u32, sync: f64) -> Vec<HistOp> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut ranges = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5a5a_5a5a);
    let mut merge_rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x3c3c_3c3c);
    (0..n)
        .map(|i| {
            let len = if rng.gen_bool(0.15) {
                rng.gen_range(2..9)
            } else {
                1
            };
            let entries = (0..len)
                .map(|j| {
                    let k = format!("key{:05}", rng.gen_range(0..keys)).into_bytes();
                    if rng.gen_bool(0.15) {
                        (k, None)
                    } else {
                        let n = if rng.gen_bool(0.03) {
                            rng.gen_range(1000..3000)
                        } else {
                            rng.gen_range(0..200)
                        };
                        let mut v = format!("op{i}.{j};").into_bytes();
                        v.extend((0..n).map(|x| b'a' + ((x + i) % 26) as u8));
                        (k, Some(v))
                    }
                })
                .collect();
            let range = ranges.gen_bool(0.025).then(|| {
                let lo = ranges.gen_range(0..keys);
                let hi = lo + ranges.gen_range(1..9);
                (
                    format!("key{lo:05}").into_bytes(),
                    format!("key{hi:05}").into_bytes(),
                )
            });
            let n_merges = if merge_rng.gen_bool(1.0 / 16.0) {
                merge_rng.gen_range(1..4)
            } else {
                0
            };
            let merges = (0..n_merges)
                .map(|j| {
                    let k = format!("key{:05}", merge_rng.gen_range(0..keys)).into_bytes();
                    (k, format!("m{i}.{j}").into_bytes())
                })
                .collect();
            HistOp {
                entries,
                merges,
                range,
                sync: rng.gen_bool(sync),
            }
        })
        .collect()
}

/// The length `k >= min` of the prefix of `ops` whose state equals `got`, if any.
pub fn matching_prefix(ops: &[HistOp], min: usize, got: &Model) -> Option<usize> {
    let mut m = Model::new();
    for k in 0..=ops.len() {
        if k >= min && &m == got {
            return Some(k);
        }
        if let Some(op) = ops.get(k) {
            op.apply(&mut m);
        }
    }
    None
}

/// For a failure message: the prefix closest to `got` and how it differs.
pub fn prefix_diff(ops: &[HistOp], got: &Model) -> String {
    let mut m = Model::new();
    let mut best = (usize::MAX, 0, String::new());
    for k in 0..=ops.len() {
        let mut diff = Vec::new();
        for (key, v) in &m {
            if got.get(key) != Some(v) {
                diff.push(format!(
                    "{}: want {:?} got {:?}",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(v.get(..12).unwrap_or(v)),
                    got.get(key)
                        .map(|g| String::from_utf8_lossy(g.get(..12).unwrap_or(g)).into_owned())
                ));
            }
        }
        for key in got.keys() {
            if !m.contains_key(key) {
                let touched: Vec<String> = ops
                    .iter()
                    .enumerate()
                    .flat_map(|(i, op)| {
                        op.entries.iter().filter(|e| &e.0 == key).map(move |e| {
                            format!(
                                "{i}{}{}",
                                if e.1.is_some() { "put" } else { "del" },
                                if op.sync { "S" } else { "" }
                            )
                        })
                    })
                    .collect();
                diff.push(format!(
                    "{}: unexpected {:?}, ops {touched:?}",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(
                        got.get(key).map_or(&[][..], |v| v.get(..12).unwrap_or(v))
                    )
                ));
            }
        }
        if diff.len() < best.0 {
            best = (diff.len(), k, diff.join("; "));
        }
        if let Some(op) = ops.get(k) {
            op.apply(&mut m);
        }
    }
    format!(
        "closest prefix {} differs in {} keys: {}",
        best.1, best.0, best.2
    )
}

/// True when every external tool a test uses must be there
/// (`STRATA_REQUIRE_TOOLS=1`, which `.ci/run` exports): a missing tool then
/// fails the test instead of skipping it.
pub fn tools_required() -> bool {
    std::env::var("STRATA_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

/// A test cannot run because `what` is missing: panics when tools are
/// required (see [`tools_required`]), otherwise says so on stderr (the
/// caller then skips).
pub fn missing_tool(what: &str) {
    assert!(
        !tools_required(),
        "STRATA_REQUIRE_TOOLS=1 and {what}: install it (see .ci/run) or unset STRATA_REQUIRE_TOOLS"
    );
    eprintln!("skipped: {what} (STRATA_REQUIRE_TOOLS=1 makes this a failure)");
}

/// Holds the background thread in the event of the `hold_at`-th flush.
pub struct HoldFlush {
    hold_at: usize,
    flushes: AtomicUsize,
    released: Mutex<bool>,
    cv: Condvar,
    entered: AtomicBool,
}

impl HoldFlush {
    pub fn new(hold_at: usize) -> Arc<HoldFlush> {
        Arc::new(HoldFlush {
            hold_at,
            flushes: AtomicUsize::new(0),
            released: Mutex::new(false),
            cv: Condvar::new(),
            entered: AtomicBool::new(false),
        })
    }

    /// Waits until the background thread is held.
    pub fn wait_entered(&self) {
        wait_until("the flush to reach the gate", || {
            self.entered.load(Ordering::Acquire)
        });
    }

    pub fn release(&self) {
        *self.released.lock().expect("gate") = true;
        self.cv.notify_all();
    }
}

/// Releases a [`HoldFlush`] when dropped: declared after the `Db`, it is
/// dropped first, so a failing assertion unwinds into a close that can join
/// the background thread instead of hanging.
pub struct ReleaseOnDrop(pub Arc<HoldFlush>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl strata::EventListener for HoldFlush {
    fn on_table_created(&self, e: &strata::TableCreated<'_>) {
        if e.reason != strata::TableReason::Flush
            || self.flushes.fetch_add(1, Ordering::AcqRel) + 1 != self.hold_at
        {
            return;
        }
        self.entered.store(true, Ordering::Release);
        let mut released = self.released.lock().expect("gate");
        while !*released {
            released = self.cv.wait(released).expect("gate");
        }
    }
}
