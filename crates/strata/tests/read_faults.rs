//! The model test under read errors: a `FaultFs` fails random reads while
//! the test reads. Every `get` returns the model's answer or an error, and
//! every scan returns a prefix of the model's range, in order, then either
//! ends or yields an error — never a wrong, stale or deleted value, never a
//! skipped key. A background flush or compaction that meets an injected
//! read error poisons the database; the test then reopens it (faults off)
//! and every acknowledged write must still be there.

mod common;

use common::{tiny_options, Model};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::ops::Bound;
use std::sync::Arc;
use strata::io::fault::Op;
use strata::io::{FaultError, FaultFs, FaultHandle, FileSystem, MemFs};
use strata::{Db, Error, WriteBatch};

const DIR: &str = "/db";

type Entry = (Vec<u8>, Vec<u8>);

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:04}", rng.gen_range(0..300u32)).into_bytes()
}

fn open(fs: &Arc<dyn FileSystem>, h: &FaultHandle) -> Db {
    h.set_enabled(false);
    // No block cache: reads go to the file system.
    Db::open(DIR, tiny_options().fs(fs.clone()).block_cache_size(0)).expect("open")
}

#[derive(Default)]
struct Counts {
    good_gets: u64,
    failed_gets: u64,
    scans_cut: u64,
    scans_whole: u64,
    reopens: u64,
}

fn check_reads(db: &Db, model: &Model, rng: &mut StdRng, c: &mut Counts, ctx: &str) {
    for _ in 0..30 {
        let k = key(rng);
        match db.get(&k) {
            Ok(v) => {
                assert_eq!(v.as_ref(), model.get(&k), "{ctx}: get {k:?}");
                c.good_gets += 1;
            }
            Err(e) => {
                assert!(
                    matches!(e, Error::Io { .. } | Error::Corruption { .. }),
                    "{ctx}: {e}"
                );
                c.failed_gets += 1;
            }
        }
    }
    for _ in 0..4 {
        let (a, b) = (key(rng), key(rng));
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let rev = rng.gen_bool(0.5);
        let want: Vec<(Vec<u8>, Vec<u8>)> = {
            let r = model.range((Bound::Included(lo.clone()), Bound::Excluded(hi.clone())));
            let mut v: Vec<_> = r.map(|(k, v)| (k.clone(), v.clone())).collect();
            if rev {
                v.reverse();
            }
            v
        };
        let scan = match db.scan(lo.clone()..hi.clone()) {
            Ok(s) => s,
            Err(e) => panic!("{ctx}: scan: {e}"),
        };
        let items: Box<dyn Iterator<Item = strata::Result<Entry>>> = if rev {
            Box::new(scan.rev())
        } else {
            Box::new(scan)
        };
        let mut got = Vec::new();
        let mut failed = false;
        for item in items {
            assert!(!failed, "{ctx}: an item after the scan's error");
            match item {
                Ok(kv) => got.push(kv),
                Err(_) => failed = true,
            }
        }
        assert!(
            got.len() <= want.len() && got[..] == want[..got.len()],
            "{ctx}: scan {lo:?}..{hi:?} rev={rev}: not a prefix of the model's range"
        );
        if failed {
            c.scans_cut += 1;
        } else {
            assert_eq!(
                got.len(),
                want.len(),
                "{ctx}: a scan ended early without an error"
            );
            c.scans_whole += 1;
        }
    }
}

fn run_case(seed: u64, ops: usize, c: &mut Counts) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mem = MemFs::new();
    let faulty = FaultFs::new(Arc::new(mem), seed);
    let h = faulty.handle();
    h.fail_randomly(Op::Read, 0.03, FaultError::Eio);
    let fs: Arc<dyn FileSystem> = Arc::new(faulty);
    let mut db = open(&fs, &h);
    let mut model = Model::new();
    for i in 0..ops {
        let ctx = format!("seed {seed} op {i}");
        let mut b = WriteBatch::new();
        let mut staged = Vec::new();
        for _ in 0..rng.gen_range(1..4) {
            let k = key(&mut rng);
            if rng.gen_bool(0.2) {
                b.delete(&k);
                staged.push((k, None));
            } else {
                let v: Vec<u8> = (0..rng.gen_range(1..80)).map(|_| rng.gen()).collect();
                b.put(&k, &v);
                staged.push((k, Some(v)));
            }
        }
        match db.write(b, &Default::default()) {
            Ok(()) => {
                for (k, v) in staged {
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
            // A background job met an injected read error: nothing of this
            // batch was written. Reopen with faults off.
            Err(Error::Poisoned(_)) => {
                drop(db);
                db = open(&fs, &h);
                c.reopens += 1;
                let all: Model = common::all(&db).into_iter().collect();
                assert!(
                    all == model,
                    "{ctx}: state after reopen differs from the model"
                );
            }
            Err(e) => panic!("{ctx}: write: {e}"),
        }
        if i % 25 == 24 {
            h.set_enabled(true);
            check_reads(&db, &model, &mut rng, c, &ctx);
            h.set_enabled(false);
        }
    }
}

#[test]
fn reads_under_injected_read_errors_match_the_model_or_fail() {
    let cases: u64 = std::env::var("STRATA_READ_FAULT_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let mut c = Counts::default();
    for seed in 0..cases {
        run_case(1000 + seed, 2500, &mut c);
    }
    println!(
        "gets ok {} / failed {}; scans whole {} / cut by an error {}; reopens {}",
        c.good_gets, c.failed_gets, c.scans_whole, c.scans_cut, c.reopens
    );
    // The faults fired, and reads still got through: both sides were tested.
    assert!(
        c.failed_gets > 0 && c.scans_cut > 0,
        "no read error was met"
    );
    assert!(c.good_gets > c.failed_gets && c.scans_whole > 0);
}
