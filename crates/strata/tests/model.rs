//! The spine: random operation sequences checked against a `BTreeMap`.
//!
//! Each case is seeded and reproducible (`STRATA_MODEL_SEED=n` reruns one;
//! `STRATA_MODEL_CASES=n` runs more). Tiny memtables and tables make flushes
//! and multi-level compactions happen constantly; snapshots are checked
//! against copies of the model taken when they were created.

mod common;

use common::{open, tiny_options, tiny_with, EXECUTORS, MATRIX, STALE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use strata::{Db, KvStore, Options, ReadOptions, ScanRange, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(rng: &mut StdRng) -> Vec<u8> {
    // A small key space so that overwrites and deletes hit existing keys.
    let n: u32 = rng.gen_range(0..400);
    let mut k = format!("k{n:05}").into_bytes();
    if rng.gen_bool(0.05) {
        k.truncate(rng.gen_range(0..k.len()));
    }
    k
}

/// A narrow range `[lo, hi)` of the key space (1 to 15 keys wide, now and
/// then empty or reaching a truncated key).
fn range(rng: &mut StdRng) -> (Vec<u8>, Vec<u8>) {
    let n: u32 = rng.gen_range(0..400);
    let w: u32 = rng.gen_range(0..16);
    let mut lo = format!("k{n:05}").into_bytes();
    if rng.gen_bool(0.1) {
        lo.truncate(rng.gen_range(1..lo.len()));
    }
    (lo, format!("k{:05}", n + w).into_bytes())
}

/// The model's `delete_range`.
fn model_delete_range(model: &mut Model, lo: &[u8], hi: &[u8]) {
    if lo < hi {
        let doomed: Vec<Vec<u8>> = model
            .range::<[u8], _>((Bound::Included(lo), Bound::Excluded(hi)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            model.remove(&k);
        }
    }
}

/// The merge operator of every model database: appends joined by `|`
/// (not commutative: an operand folded out of order shows).
const MERGE: &str = "merge_operator=append:|";

/// The model's merge of `operand` into `k`.
fn model_merge(model: &mut Model, k: &[u8], operand: &[u8]) {
    let v = match model.get(k) {
        Some(old) => [old.as_slice(), b"|", operand].concat(),
        None => operand.to_vec(),
    };
    model.insert(k.to_vec(), v);
}

/// A merge operand: mostly short, now and then empty or long.
fn operand(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..20) {
        0 => 0,
        1 => rng.gen_range(100..600),
        _ => rng.gen_range(1..12),
    };
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(500..3000),
        _ => rng.gen_range(1..60),
    };
    (0..len).map(|_| rng.gen()).collect()
}

fn check_scan(db: &Db, model: &Model, ro: &ReadOptions<'_>, rng: &mut StdRng, ctx: &str) {
    let a = key(rng);
    let b = key(rng);
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let lo_b = if rng.gen_bool(0.2) {
        Bound::Unbounded
    } else {
        Bound::Included(lo.clone())
    };
    let hi_b = if rng.gen_bool(0.2) {
        Bound::Unbounded
    } else if rng.gen_bool(0.5) {
        Bound::Excluded(hi.clone())
    } else {
        Bound::Included(hi.clone())
    };
    let expect: Vec<_> = model
        .range::<Vec<u8>, _>((lo_b.clone(), hi_b.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let scan = db.scan_opt((lo_b, hi_b), ro).expect("scan");
    let got: Vec<_> = if rng.gen_bool(0.5) {
        scan.collect::<Result<_, _>>().expect("scan entries")
    } else {
        let mut v: Vec<_> = scan.rev().collect::<Result<_, _>>().expect("scan entries");
        v.reverse();
        v
    };
    assert_eq!(got.len(), expect.len(), "{ctx}: scan length");
    assert!(got == expect, "{ctx}: scan contents differ");
}

/// Walks a DbIter with a random mix of next/prev/seek and compares each step.
fn check_iter(db: &Db, model: &Model, ro: &ReadOptions<'_>, rng: &mut StdRng, ctx: &str) {
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let mut it = db.iter(ro).expect("iter");
    // Position in `keys`; None = invalid.
    let mut pos: Option<usize>;
    match rng.gen_range(0..4) {
        0 => {
            it.seek_to_first();
            pos = if keys.is_empty() { None } else { Some(0) };
        }
        1 => {
            it.seek_to_last();
            pos = keys.len().checked_sub(1);
        }
        2 => {
            let t = key(rng);
            it.seek(&t);
            let i = keys.partition_point(|k| k.as_slice() < t.as_slice());
            pos = (i < keys.len()).then_some(i);
        }
        _ => {
            let t = key(rng);
            it.seek_for_prev(&t);
            let i = keys.partition_point(|k| k.as_slice() <= t.as_slice());
            pos = i.checked_sub(1);
        }
    }
    for step in 0..rng.gen_range(1..60) {
        match pos {
            None => {
                assert!(
                    !it.valid(),
                    "{ctx}: step {step}: iterator valid, model exhausted"
                );
                break;
            }
            Some(i) => {
                assert!(
                    it.valid(),
                    "{ctx}: step {step}: iterator invalid at model key {i}"
                );
                assert_eq!(it.key(), keys[i].as_slice(), "{ctx}: step {step}: key");
                assert_eq!(
                    it.value(),
                    model[keys[i]].as_slice(),
                    "{ctx}: step {step}: value"
                );
                if rng.gen_bool(0.6) {
                    it.next();
                    pos = (i + 1 < keys.len()).then_some(i + 1);
                } else {
                    it.prev();
                    pos = i.checked_sub(1);
                }
            }
        }
    }
    it.status().expect("iterator status");
}

/// Snapshot reads of a case: all of them, and those on a snapshot whose
/// state differs from the current one (so reading the latest data instead
/// would have been noticed).
#[derive(Default, Debug)]
struct SnapReads {
    all: usize,
    stale: usize,
    /// Stale-picker work over the case (summed over reopens): early
    /// compactions, stale versions dropped, shortcut hits.
    early: u64,
    dropped: u64,
    shortcuts: u64,
    /// Executor work: merge compactions, their sub-tasks, and the
    /// sub-tasks that ran as a pipeline.
    merges: u64,
    subtasks: u64,
    pipelined: u64,
    /// Matrix container work: column compactions, lookups that reached
    /// the rows, segments their filters skipped.
    columns: u64,
    row_lookups: u64,
    segments_skipped: u64,
    /// Merge work: gets that folded, operands compactions folded away.
    folds: u64,
    folded: u64,
}

impl SnapReads {
    fn add_stats(&mut self, db: &strata::Db) {
        let s = db.stats();
        self.early += s.stale_compactions;
        self.dropped += s.stale_dropped;
        self.shortcuts += s.shortcut_hits;
        self.merges += s.compaction_count;
        self.subtasks += s.compaction_subtasks;
        self.pipelined += s.compaction_pipelined_subtasks;
        self.columns += s.l0_rows.column_compactions;
        self.row_lookups += s.l0_rows.lookups;
        self.segments_skipped += s.l0_rows.segments_skipped;
        self.folds += s.merge_folds;
        self.folded += s.merge_operands_folded;
    }
}

/// One seeded history (the same for every `design`: the database's
/// answers never steer the generator), every read checked against the
/// model. `design` is an option list applied on top (a selectable design);
/// `snapshot_heavy` turns a tenth of the gets into snapshot operations.
fn run_case(seed: u64, ops: usize, design: &str, snapshot_heavy: bool) -> SnapReads {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = StdRng::seed_from_u64(seed);
    // `@DIR` in a design: this case's directory (a fast tier beside it).
    let design = &design.replace("@DIR", &dir.path().display().to_string());
    let opts = || -> Options {
        let mut o = tiny_with(design);
        o.apply(MERGE).expect("merge operator");
        match seed % 3 {
            0 => o,
            1 => o
                .compression(strata::Compression::Lz4)
                .bloom_bits_per_key(0),
            _ => o
                .compression(strata::Compression::Zstd)
                .background_threads(1),
        }
    };
    let mut db = open(dir.path(), opts());
    let mut model = Model::new();
    let mut snaps: Vec<(strata::Snapshot, Model)> = Vec::new();
    let mut reads = SnapReads::default();
    for op in 0..ops {
        let ctx = format!("seed {seed} op {op} [{design}]");
        let pick = rng.gen_range(0..100);
        let pick = if snapshot_heavy && (57..=66).contains(&pick) {
            85 + (pick - 57) % 7
        } else {
            pick
        };
        match pick {
            0..=33 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            34..=39 => {
                let (k, o) = (key(&mut rng), operand(&mut rng));
                db.merge(&k, &o).expect("merge");
                model_merge(&mut model, &k, &o);
            }
            40..=46 => {
                let k = key(&mut rng);
                db.delete(&k).expect("delete");
                model.remove(&k);
            }
            47..=49 => {
                let (lo, hi) = range(&mut rng);
                if lo <= hi {
                    db.delete_range(&lo, &hi).expect("delete_range");
                    model_delete_range(&mut model, &lo, &hi);
                } else {
                    assert!(db.delete_range(&lo, &hi).is_err(), "{ctx}: inverted range");
                }
            }
            50..=56 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = key(&mut rng);
                    if rng.gen_bool(0.05) {
                        let (lo, hi) = range(&mut rng);
                        if lo <= hi {
                            b.delete_range(&lo, &hi);
                            model_delete_range(&mut model, &lo, &hi);
                        }
                    } else if rng.gen_bool(0.15) {
                        let o = operand(&mut rng);
                        b.merge(&k, &o);
                        model_merge(&mut model, &k, &o);
                    } else if rng.gen_bool(0.7) {
                        let v = value(&mut rng);
                        b.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        b.delete(&k);
                        model.remove(&k);
                    }
                }
                let sync = rng.gen_bool(0.1);
                db.write(b, &WriteOptions { sync }).expect("batch");
            }
            57..=74 => {
                let k = key(&mut rng);
                assert_eq!(
                    db.get(&k).expect("get"),
                    model.get(&k).cloned(),
                    "{ctx}: get"
                );
            }
            75..=79 => check_scan(&db, &model, &ReadOptions::default(), &mut rng, &ctx),
            80..=84 => check_iter(&db, &model, &ReadOptions::default(), &mut rng, &ctx),
            85..=87 => {
                if snaps.len() < 4 {
                    snaps.push((db.snapshot(), model.clone()));
                } else {
                    snaps.remove(rng.gen_range(0..snaps.len()));
                }
            }
            88..=91 => {
                if snaps.is_empty() {
                    // Never skip the read: take a snapshot (later reads of
                    // it see it age).
                    snaps.push((db.snapshot(), model.clone()));
                }
                let (s, m) = &snaps[rng.gen_range(0..snaps.len())];
                let ro = ReadOptions { snapshot: Some(s) };
                let k = key(&mut rng);
                assert_eq!(
                    db.get_opt(&k, &ro).expect("get"),
                    m.get(&k).cloned(),
                    "{ctx}: snapshot get"
                );
                check_scan(&db, m, &ro, &mut rng, &format!("{ctx} (snapshot)"));
                check_iter(&db, m, &ro, &mut rng, &format!("{ctx} (snapshot)"));
                reads.all += 1;
                reads.stale += usize::from(*m != model);
            }
            92..=93 => db.flush().expect("flush"),
            94..=95 => {
                let a = key(&mut rng);
                let b = key(&mut rng);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                db.compact_range(lo.as_slice()..=hi.as_slice())
                    .expect("compact_range");
            }
            _ => {
                // Reopen: snapshots do not survive it.
                snaps.clear();
                reads.add_stats(&db);
                db.close().expect("close");
                drop(db);
                db = open(dir.path(), opts());
            }
        }
    }
    // Final full comparison, both directions, then after a reopen.
    let ro = ReadOptions::default();
    let fwd: Vec<_> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("scan");
    let expect: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(fwd == expect, "seed {seed}: final scan differs");
    check_iter(&db, &model, &ro, &mut rng, &format!("seed {seed} final"));
    snaps.clear();
    reads.add_stats(&db);
    drop(db);
    let db = open(dir.path(), opts());
    let again: Vec<_> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("scan");
    assert!(again == expect, "seed {seed}: scan after reopen differs");
    reads
}

/// Runs one case and checks it read snapshots often (4 % of the ops pick
/// a snapshot read), most of them older than the data they were read with.
fn run_counted(seed: u64, ops: usize, design: &str) -> SnapReads {
    let r = run_case(seed, ops, design, false);
    assert!(
        r.all >= ops / 50 && r.stale >= ops / 100,
        "seed {seed}: too few snapshot reads in {ops} ops: {r:?}"
    );
    r
}

#[test]
fn model_random_operations() {
    if let Ok(seed) = std::env::var("STRATA_MODEL_SEED") {
        let design = std::env::var("STRATA_MODEL_OPTS").unwrap_or_default();
        run_counted(seed.parse().expect("numeric seed"), 3000, &design);
        return;
    }
    let cases: u64 = std::env::var("STRATA_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let mut total = SnapReads::default();
    for seed in 0..cases {
        let r = run_counted(seed, 1500, "");
        assert_eq!(r.early + r.dropped + r.shortcuts, 0, "leveled: {r:?}");
        total.folds += r.folds;
        total.folded += r.folded;
    }
    // Merges were read by folding, and flushes and compactions folded
    // operands away.
    assert!(total.folds > 0 && total.folded > 0, "{total:?}");
}

/// The same histories with the stale picker (early compactions, stale
/// dropping, read shortcut).
#[test]
fn model_random_operations_stale_picker() {
    // A low threshold: at STALE's 0.2 early compactions are rare enough
    // that some runs of 12 cases had none.
    let design = format!("{STALE},stale_threshold=0.05");
    let mut total = SnapReads::default();
    for seed in 0..12 {
        let r = run_counted(seed, 1500, &design);
        total.early += r.early;
        total.dropped += r.dropped;
        total.shortcuts += r.shortcuts;
    }
    assert!(
        total.early > 0 && total.dropped > 0 && total.shortcuts > 0,
        "the stale picker's paths ran: {total:?}"
    );
}

/// The same histories under every compaction executor: sub-tasks on
/// several threads, the three-stage pipeline, both, and CoPro+'s decision.
/// Each must really have done its kind of work.
#[test]
fn model_random_operations_every_executor() {
    for design in EXECUTORS {
        let mut total = SnapReads::default();
        for seed in 0..6 {
            let r = run_counted(seed, 1500, design);
            total.merges += r.merges;
            total.subtasks += r.subtasks;
            total.pipelined += r.pipelined;
        }
        eprintln!("[{design}] {total:?}");
        assert!(total.merges > 20, "[{design}] compactions ran: {total:?}");
        if design.contains("subtasks") || design.contains("copro") {
            assert!(
                total.subtasks > total.merges,
                "[{design}] plans were cut into sub-tasks: {total:?}"
            );
        }
        match design {
            d if d.contains("copro+") => assert!(
                total.pipelined > 0 && total.pipelined < total.subtasks,
                "[{design}] the decision chose both modes: {total:?}"
            ),
            d if d.contains("pipelined") || d.contains("copro") => assert_eq!(
                total.pipelined, total.subtasks,
                "[{design}] every sub-task pipelined"
            ),
            _ => assert_eq!(total.pipelined, 0, "[{design}] {total:?}"),
        }
    }
}

/// The same histories with level 0 as MatrixKV's matrix container: rows
/// with cross-row hints (and without, and on a separate fast directory),
/// segment filters, column compactions; and with the other designs on top.
#[test]
fn model_random_operations_matrix() {
    let designs = [
        MATRIX.to_string(),
        format!("{MATRIX},fast_dir=@DIR/fast,matrix_hints=false,executor=copro:2"),
        format!("{MATRIX},{STALE},stale_threshold=0.05"),
    ];
    for (i, design) in designs.iter().enumerate() {
        let mut total = SnapReads::default();
        let seeds = if i == 0 { 0..6 } else { 30..33 };
        for seed in seeds {
            let r = run_counted(seed, 1500, design);
            total.columns += r.columns;
            total.row_lookups += r.row_lookups;
            total.segments_skipped += r.segments_skipped;
            total.merges += r.merges;
        }
        eprintln!("[{design}] {total:?}");
        assert!(
            total.columns > 10 && total.row_lookups > 100 && total.segments_skipped > 0,
            "[{design}] the container's paths ran: {total:?}"
        );
    }
}

/// The same with the stale picker and sub-tasks together: stale dropping
/// and the tracker's repointing run in every sub-task and stage.
#[test]
fn model_stale_picker_with_copro() {
    let design = format!("{STALE},stale_threshold=0.05,executor=copro:2");
    let mut total = SnapReads::default();
    for seed in 20..26 {
        let r = run_counted(seed, 1500, &design);
        total.dropped += r.dropped;
        total.pipelined += r.pipelined;
        total.shortcuts += r.shortcuts;
    }
    assert!(
        total.dropped > 0 && total.pipelined > 0 && total.shortcuts > 0,
        "{total:?}"
    );
}

/// Metamorphic: one random history applied to a database per design
/// (leveled and stale pickers, every executor, the matrix, offload) and to
/// the KVell engine, and after every batch of operations every design must
/// answer every read the same: gets of the whole key space, a full scan,
/// and (the LSM designs) a snapshot taken mid-way.
#[test]
fn metamorphic_every_design_answers_alike() {
    // The first design is the base: memtables of two or three shards
    // (`tiny_options`); the second fills one skiplist per memtable.
    let mut designs: Vec<String> = vec![
        String::new(),
        "memtable_shard_size=1M".to_string(),
        // Scans over the shards one skiplist each, never through an index.
        "memtable_index=false".to_string(),
        format!("{STALE},stale_threshold=0.05"),
        // The CPU budget: three background threads sharing one slot (a
        // flush takes it from a running compaction, which pauses), and
        // no budget at all beside two threads.
        "background_threads=3,background_cpus=1".to_string(),
        "background_cpus=4".to_string(),
    ];
    designs.extend(EXECUTORS.iter().map(|d| d.to_string()));
    designs.push(MATRIX.to_string());
    designs.push(format!("{MATRIX},{STALE},executor=copro:2"));
    designs.push(format!(
        "{STALE},stale_threshold=0.05,executor=copro+:2,copro_large_value=200"
    ));
    // The offload executor, with a compaction worker served from a thread
    // of this process over a real socket (the worker as a separate process
    // is in strata-cli's tests).
    let worker_dir = tempfile::tempdir().expect("tempdir");
    let addr = common::start_worker(worker_dir.path(), Default::default());
    designs.push(format!("executor=offload:{addr}"));
    let dirs: Vec<tempfile::TempDir> = designs
        .iter()
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let dbs: Vec<Db> = designs
        .iter()
        .zip(&dirs)
        .map(|(d, dir)| open(dir.path(), tiny_with(&format!("{d},{MERGE}"))))
        .collect();
    // The second engine joins for what it offers (gets and scans, no
    // snapshots), through the one door: its batches are not atomic, but
    // applied whole they leave the same state. Both I/O paths, one store
    // with a page cache of four pages reopened every round.
    let kvell_designs = [
        "engine=kvell,kvell_workers=2",
        "engine=kvell,kvell_io=pread,kvell_workers=3,kvell_page_cache=16K",
    ];
    let kvell_dirs: Vec<tempfile::TempDir> = kvell_designs
        .iter()
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let open_kvell = |i: usize| -> Box<dyn KvStore> {
        let mut o = Options::default();
        o.apply(kvell_designs[i]).expect("options");
        strata::open(kvell_dirs[i].path(), o).expect("open kvell")
    };
    let mut stores: Vec<Box<dyn KvStore>> = (0..kvell_designs.len()).map(open_kvell).collect();
    let mut rng = StdRng::seed_from_u64(4242);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for round in 0..8 {
        for _ in 0..400 {
            let k = key(&mut rng);
            match rng.gen_range(0..10) {
                0..=6 => {
                    let v = value(&mut rng);
                    for db in &dbs {
                        db.put(&k, &v).expect("put");
                    }
                    for s in &stores {
                        s.put(&k, &v).expect("kvell put");
                    }
                }
                7..=8 => {
                    for db in &dbs {
                        db.delete(&k).expect("delete");
                    }
                    for s in &stores {
                        s.delete(&k).expect("kvell delete");
                    }
                }
                9 if rng.gen_bool(0.3) => {
                    // A merge; KVell has none, so its stores read, fold
                    // and put.
                    let o = operand(&mut rng);
                    for db in &dbs {
                        db.merge(&k, &o).expect("merge");
                    }
                    for s in &stores {
                        let mut m = Model::new();
                        if let Some(old) = s.get(&k).expect("kvell get") {
                            m.insert(k.clone(), old);
                        }
                        model_merge(&mut m, &k, &o);
                        s.put(&k, &m[&k]).expect("kvell put");
                    }
                }
                9 if rng.gen_bool(0.4) => {
                    // A range deletion; KVell has none, so its stores
                    // delete the range's keys one by one.
                    let (lo, hi) = range(&mut rng);
                    if lo <= hi {
                        for db in &dbs {
                            db.delete_range(&lo, &hi).expect("delete_range");
                        }
                        for s in &stores {
                            let r = ScanRange::new(Bound::Included(&lo), Bound::Excluded(&hi));
                            for (doomed, _) in s.scan(r).expect("kvell scan") {
                                s.delete(&doomed).expect("kvell delete");
                            }
                        }
                    }
                }
                _ => {
                    let mut b = WriteBatch::new();
                    b.put(&k, b"batch");
                    b.delete(key(&mut rng));
                    for db in &dbs {
                        db.write(b.clone(), &WriteOptions::default())
                            .expect("write");
                    }
                    for s in &stores {
                        s.write(b.clone(), &WriteOptions::default())
                            .expect("kvell write");
                    }
                }
            }
            keys.push(k);
        }
        let snaps: Vec<_> = dbs.iter().map(|db| db.snapshot()).collect();
        // More writes over the snapshots, then let compactions settle.
        for _ in 0..200 {
            let (k, v) = (key(&mut rng), value(&mut rng));
            for db in &dbs {
                db.put(&k, &v).expect("put");
            }
            for s in &stores {
                s.put(&k, &v).expect("kvell put");
            }
        }
        for db in &dbs {
            db.wait_for_compactions().expect("wait");
        }
        // A reopen of the second store every round (its recovery rebuilds
        // the index from the slabs alone).
        let last = stores.len() - 1;
        stores[last].close().expect("close kvell");
        stores[last] = open_kvell(last);
        let scans: Vec<Vec<(Vec<u8>, Vec<u8>)>> = dbs.iter().map(common::all).collect();
        for (i, scan) in scans.iter().enumerate().skip(1) {
            assert!(
                scan == &scans[0],
                "round {round}: scan of [{}] differs from [{}]",
                designs[i],
                designs[0]
            );
        }
        for (s, d) in stores.iter().zip(&kvell_designs) {
            let scan = s.scan(ScanRange::all()).expect("kvell scan");
            assert!(
                scan == scans[0],
                "round {round}: scan of [{d}] ({} entries) differs from [{}] ({})",
                scan.len(),
                designs[0],
                scans[0].len()
            );
            let mut back = s
                .scan(ScanRange::all().reverse(true))
                .expect("kvell reverse scan");
            back.reverse();
            assert!(back == scans[0], "round {round}: reverse scan of [{d}]");
        }
        for k in &keys {
            let want = dbs[0].get(k).expect("get");
            let want_snap = dbs[0]
                .get_opt(
                    k,
                    &ReadOptions {
                        snapshot: Some(&snaps[0]),
                    },
                )
                .expect("get");
            for (i, db) in dbs.iter().enumerate().skip(1) {
                assert_eq!(
                    db.get(k).expect("get"),
                    want,
                    "round {round}: [{}] key {k:?}",
                    designs[i]
                );
                let got = db
                    .get_opt(
                        k,
                        &ReadOptions {
                            snapshot: Some(&snaps[i]),
                        },
                    )
                    .expect("get");
                assert_eq!(
                    got, want_snap,
                    "round {round}: [{}] snapshot key {k:?}",
                    designs[i]
                );
            }
            for (s, d) in stores.iter().zip(&kvell_designs) {
                assert_eq!(
                    s.get(k).expect("kvell get"),
                    want,
                    "round {round}: [{d}] key {k:?}"
                );
            }
        }
        // KVell's batched read path, over every key at once.
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let want: Vec<Option<Vec<u8>>> = refs.iter().map(|k| dbs[0].get(k).expect("get")).collect();
        for (s, d) in stores.iter().zip(&kvell_designs) {
            let got = s.multi_get(&refs).expect("kvell multi_get");
            assert!(got == want, "round {round}: multi_get of [{d}]");
        }
    }
    for (db, d) in dbs.iter().zip(&designs) {
        assert!(db.stats().compaction_count > 0, "[{d}] compacted");
    }
    let offload = dbs.last().expect("dbs").stats();
    assert!(
        offload.compaction_offloaded_subtasks > 0 && offload.compaction_offload_fallbacks == 0,
        "the worker ran sub-tasks: {} offloaded, {} fell back",
        offload.compaction_offloaded_subtasks,
        offload.compaction_offload_fallbacks
    );
}

/// Many snapshots taken, read and released while the stale picker drops
/// stale versions: a version a snapshot can see must survive.
#[test]
fn model_snapshot_heavy_stale_picker() {
    // A low threshold, so early compactions run under the snapshots too.
    let design = format!("{STALE},stale_threshold=0.05");
    let mut early = 0;
    for seed in 100..108 {
        let r = run_case(seed, 2000, &design, true);
        assert!(r.all >= 60 && r.stale >= 30, "seed {seed}: {r:?}");
        assert!(r.dropped > 0, "seed {seed}: stale versions dropped: {r:?}");
        early += r.early;
    }
    assert!(early > 0, "early compactions ran");
}

/// Many compactions across levels: every level must stay sorted and
/// disjoint, and the data must survive rewriting.
#[test]
fn model_heavy_overwrite_reaches_deep_levels() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_options());
    let mut rng = StdRng::seed_from_u64(99);
    let mut model = Model::new();
    for _ in 0..20_000 {
        let k = format!("{:06}", rng.gen_range(0..3000u32)).into_bytes();
        let v: Vec<u8> = (0..rng.gen_range(10..100)).map(|_| rng.gen()).collect();
        db.put(&k, &v).expect("put");
        model.insert(k, v);
    }
    db.flush().expect("flush");
    let s = db.stats();
    assert!(s.compaction_count > 0, "compactions ran");
    assert!(
        s.levels.iter().skip(2).any(|l| l.files > 0),
        "data reached L2 or deeper: {s}"
    );
    for (k, v) in &model {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v));
    }
    let got: Vec<_> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(got.len(), model.len());
}
