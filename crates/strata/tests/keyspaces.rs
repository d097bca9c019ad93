//! Keyspaces (RocksDB's column families): each a tree of its own with its
//! own options, all sharing one WAL and one sequence counter.
//!
//! - a model test: random puts, deletes, range deletions, merges and
//!   batches spanning keyspaces, flushes, compactions, reopens, drops and
//!   snapshots, in every design, each keyspace checked against a
//!   `BTreeMap` of its own;
//! - power loss with batches spanning keyspaces: the reopened database
//!   holds, in every keyspace at once, the state after one prefix of the
//!   history, with every synced write (a batch is all or nothing);
//! - a drop whose files survive a crash: the next open deletes them;
//! - a stall in one keyspace leaves the others writable;
//! - the memtables of every keyspace keep within one memory budget;
//! - the API's errors.

mod common;

use common::{tiny_with, EXECUTORS, MATRIX, STALE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use strata::io::{CrashKind, FileSystem, MemFs};
use strata::{Db, Error, Keyspace, Options, ReadOptions, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const DIR: &str = "/db";

fn designs() -> Vec<String> {
    let mut d = vec![String::new(), STALE.to_string(), MATRIX.to_string()];
    d.extend(EXECUTORS.iter().map(|s| s.to_string()));
    d
}

fn merge_into(m: &mut Model, k: &[u8], operand: &[u8]) {
    let v = match m.get(k) {
        Some(old) => [old.as_slice(), b"|", operand].concat(),
        None => operand.to_vec(),
    };
    m.insert(k.to_vec(), v);
}

/// The keyspaces of the model test: options of their own (another
/// compression, picker, memtable and filter size, merge operator).
const SPACES: [(&str, &str); 2] = [
    (
        "users",
        "compression=lz4,bloom_bits_per_key=4,write_buffer_size=16K",
    ),
    (
        "counts",
        "merge_operator=u64add,compaction_picker=stale,stale_threshold=0.2,update_table_size=16K",
    ),
];

fn key(k: u32) -> Vec<u8> {
    format!("k{k:04}").into_bytes()
}

/// Every entry of `ks`, in order, read forward and backward (both must
/// agree).
fn contents(ks: &Keyspace, snap: Option<&strata::Snapshot>) -> Model {
    let opts = ReadOptions { snapshot: snap };
    let fwd: Model = ks
        .scan_opt::<&[u8], _>(.., &opts)
        .expect("scan")
        .map(|r| r.expect("entry"))
        .collect();
    let back: Vec<(Vec<u8>, Vec<u8>)> = ks
        .scan_opt::<&[u8], _>(.., &opts)
        .expect("scan")
        .rev()
        .map(|r| r.expect("entry"))
        .collect();
    assert_eq!(
        back.into_iter().rev().collect::<Vec<_>>(),
        fwd.clone().into_iter().collect::<Vec<_>>(),
        "{}: backward scan",
        ks.name()
    );
    fwd
}

/// The handles of `default` and the [`SPACES`], made if missing.
fn handles(db: &Db) -> Vec<Keyspace> {
    let mut v = vec![db.keyspace("default").expect("default").expect("there")];
    for (name, opts) in SPACES {
        let ks = match db.keyspace(name).expect("lookup") {
            Some(ks) => ks,
            None => db.create_keyspace(name, opts).expect("create"),
        };
        v.push(ks);
    }
    v
}

/// The value `counts` takes for a u64 add operand.
fn add(old: Option<&Vec<u8>>, n: u64) -> Vec<u8> {
    let base = old
        .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
        .map_or(0, u64::from_le_bytes);
    base.wrapping_add(n).to_le_bytes().to_vec()
}

fn run_model(design: &str, seed: u64) {
    let fs = Arc::new(MemFs::new());
    let opts = || tiny_with(design).fs(fs.clone());
    let mut db = Db::open(DIR, opts()).expect("open");
    let mut ks = handles(&db);
    let mut models: Vec<Model> = vec![Model::new(); ks.len()];
    let mut snaps: Vec<(strata::Snapshot, Vec<Model>)> = Vec::new();
    let mut rng = StdRng::seed_from_u64(seed);
    for step in 0..1500u32 {
        let i = rng.gen_range(0..ks.len());
        let k = key(rng.gen_range(0..120));
        match rng.gen_range(0..100) {
            0..=49 => {
                let v = format!("v{step}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes();
                if i == 2 {
                    // `counts` holds u64 counters only.
                    let n = rng.gen_range(1..1000u64);
                    ks[i].put(&k, n.to_le_bytes()).expect("put");
                    models[i].insert(k, n.to_le_bytes().to_vec());
                } else {
                    ks[i].put(&k, &v).expect("put");
                    models[i].insert(k, v);
                }
            }
            50..=59 => {
                ks[i].delete(&k).expect("delete");
                models[i].remove(&k);
            }
            60..=64 => {
                let end = key(rng.gen_range(0..130));
                if k <= end {
                    ks[i].delete_range(&k, &end).expect("delete_range");
                    let gone: Vec<Vec<u8>> = models[i]
                        .range(k.clone()..end)
                        .map(|(k, _)| k.clone())
                        .collect();
                    for g in gone {
                        models[i].remove(&g);
                    }
                }
            }
            65..=74 => {
                // Merges: `default` and `users` append, `counts` adds.
                match i {
                    0 => {
                        let op = format!("m{step}");
                        ks[0].merge(&k, &op).expect("merge");
                        merge_into(&mut models[0], &k, op.as_bytes());
                    }
                    2 => {
                        let n = rng.gen_range(1..50u64);
                        ks[2].merge(&k, n.to_le_bytes()).expect("merge");
                        let v = add(models[2].get(&k), n);
                        models[2].insert(k, v);
                    }
                    // `users` takes the database's operator (append).
                    _ => {
                        let op = format!("u{step}");
                        ks[1].merge(&k, &op).expect("merge");
                        merge_into(&mut models[1], &k, op.as_bytes());
                    }
                }
            }
            75..=89 => {
                // One batch across every keyspace.
                let mut b = WriteBatch::new();
                for (j, h) in ks.iter().enumerate() {
                    let k = key(rng.gen_range(0..120));
                    if rng.gen_bool(0.8) {
                        let v = if j == 2 {
                            7u64.to_le_bytes().to_vec()
                        } else {
                            format!("b{step}").into_bytes()
                        };
                        b.put_in(h, &k, &v);
                        models[j].insert(k, v);
                    } else {
                        b.delete_in(h, &k);
                        models[j].remove(&k);
                    }
                }
                db.write(b, &WriteOptions::default()).expect("batch");
            }
            90..=93 => ks[i].flush().expect("flush"),
            94 => ks[i].compact_range::<&[u8], _>(..).expect("compact"),
            95..=96 => {
                if snaps.len() == 3 {
                    snaps.remove(0);
                }
                snaps.push((db.snapshot(), models.clone()));
            }
            97 => {
                snaps.clear();
                drop(ks);
                db.close().expect("close");
                db = Db::open(DIR, opts()).expect("reopen");
                ks = handles(&db);
                assert_eq!(db.keyspace_names(), ["default", "users", "counts"]);
            }
            _ => {
                for h in &ks {
                    let k = key(rng.gen_range(0..120));
                    let got = h.get(&k).expect("get");
                    let want = models[h.id() as usize].get(&k);
                    assert_eq!(got.as_ref(), want, "{design} step {step} {} get", h.name());
                }
            }
        }
        if step % 250 == 249 {
            for (j, h) in ks.iter().enumerate() {
                assert_eq!(
                    contents(h, None),
                    models[j],
                    "{design} step {step} {}",
                    h.name()
                );
            }
            for (snap, m) in &snaps {
                for (j, h) in ks.iter().enumerate() {
                    assert_eq!(
                        contents(h, Some(snap)),
                        m[j],
                        "{design} step {step} {} at snapshot {}",
                        h.name(),
                        snap.sequence()
                    );
                }
            }
        }
    }
    db.wait_for_compactions().expect("settle");
    for (j, h) in ks.iter().enumerate() {
        assert_eq!(
            contents(h, None),
            models[j],
            "{design} settled {}",
            h.name()
        );
    }
    // A dropped keyspace is gone now and at the next open; its name can be
    // taken again, empty.
    db.drop_keyspace("users").expect("drop");
    assert_eq!(
        contents(&ks[2], None),
        models[2],
        "{design}: counts right after the drop"
    );
    assert!(matches!(
        ks[1].get(b"k0001"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        ks[1].put(b"k", b"v"),
        Err(Error::InvalidArgument(_))
    ));
    drop(ks);
    snaps.clear();
    db.close().expect("close");
    let db = Db::open(DIR, opts()).expect("reopen");
    assert_eq!(db.keyspace_names(), ["default", "counts"]);
    let counts = db.keyspace("counts").expect("lookup").expect("there");
    assert_eq!(
        contents(&counts, None),
        models[2],
        "{design}: counts reopened after the drop"
    );
    drop(counts);
    let users = db.create_keyspace("users", "").expect("again");
    assert!(
        contents(&users, None).is_empty(),
        "{design}: a new keyspace is empty"
    );
    let counts = db.keyspace("counts").expect("lookup").expect("there");
    assert_eq!(
        contents(&counts, None),
        models[2],
        "{design}: counts after the drop"
    );
    db.close().expect("close");
}

#[test]
fn keyspaces_match_a_model_in_every_design() {
    for (i, design) in designs().iter().enumerate() {
        run_model(design, 11 + i as u64);
    }
}

/// A joint model: keyspace index, then key.
type Joint = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

/// One step of a power-loss history: a batch over several keyspaces.
#[derive(Clone)]
struct Step {
    puts: Vec<(usize, Vec<u8>, Option<Vec<u8>>)>,
    sync: bool,
}

fn steps(seed: u64, n: usize) -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let puts = (0..rng.gen_range(1..4))
                .map(|_| {
                    let ks = rng.gen_range(0..3);
                    let k = key(rng.gen_range(0..200));
                    let v = rng
                        .gen_bool(0.85)
                        .then(|| format!("s{i}-{}", "y".repeat(rng.gen_range(0..90))).into_bytes());
                    (ks, k, v)
                })
                .collect();
            Step {
                puts,
                sync: rng.gen_bool(0.1),
            }
        })
        .collect()
}

fn apply(m: &mut Joint, s: &Step) {
    for (ks, k, v) in &s.puts {
        match v {
            Some(v) => m.insert((*ks, k.clone()), v.clone()),
            None => m.remove(&(*ks, k.clone())),
        };
    }
}

/// Opens the database on `fs` with the keyspaces of the power-loss test.
fn open_three(fs: &MemFs, design: &str) -> strata::Result<(Db, Vec<Keyspace>)> {
    let db = Db::open(DIR, tiny_with(design).fs(Arc::new(fs.clone())))?;
    let mut ks = vec![db.keyspace("default")?.expect("default")];
    for name in ["a", "b"] {
        let h = match db.keyspace(name)? {
            Some(h) => h,
            None => db.create_keyspace(name, "write_buffer_size=12K")?,
        };
        ks.push(h);
    }
    Ok((db, ks))
}

fn read_joint(ks: &[Keyspace]) -> Joint {
    let mut m = Joint::new();
    for (i, h) in ks.iter().enumerate() {
        for (k, v) in contents(h, None) {
            m.insert((i, k), v);
        }
    }
    m
}

/// Runs `hist` until the crash point; returns how many steps must survive.
fn run_until_crash(fs: &MemFs, design: &str, hist: &[Step]) -> usize {
    let Ok((db, ks)) = open_three(fs, design) else {
        return 0;
    };
    let mut required = 0;
    for (i, s) in hist.iter().enumerate() {
        if fs.crashed() {
            break;
        }
        let mut b = WriteBatch::new();
        for (j, k, v) in &s.puts {
            match v {
                Some(v) => b.put_in(&ks[*j], k, v),
                None => b.delete_in(&ks[*j], k),
            }
        }
        let wrote = db.write(b, &WriteOptions { sync: s.sync });
        if wrote.is_err() {
            break;
        }
        if s.sync && !fs.crashed() {
            required = i + 1;
        }
        if i % 60 == 30 {
            let _ = ks[i % 3].flush();
        }
    }
    required
}

#[test]
fn power_loss_keeps_batches_across_keyspaces_whole() {
    let cases = std::env::var("STRATA_KEYSPACE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12u64);
    let designs = designs();
    let mut crashed_cases = 0;
    for case in 0..cases {
        let design = &designs[case as usize % designs.len()];
        let hist = steps(100 + case, 400);
        // How many file operations a whole run takes, to place the crash.
        let probe = MemFs::new();
        run_until_crash(&probe, design, &hist);
        let total = probe.ops();
        let mut rng = StdRng::seed_from_u64(case);
        let fs = MemFs::new();
        fs.crash_at(rng.gen_range(total / 10..total), CrashKind::PowerLoss);
        let required = run_until_crash(&fs, design, &hist);
        let Some(after) = fs.captured() else {
            continue;
        };
        crashed_cases += 1;
        let (db, ks) = open_three(&after, design).expect("reopen after the power loss");
        let got = read_joint(&ks);
        let mut m = Joint::new();
        let mut prefix = None;
        if m == got {
            prefix = Some(0);
        }
        for (i, s) in hist.iter().enumerate() {
            apply(&mut m, s);
            if m == got {
                prefix = Some(i + 1);
            }
        }
        let prefix = prefix.unwrap_or_else(|| {
            // The nearest prefix and how the state differs from it.
            let mut m = Joint::new();
            let mut best = (usize::MAX, 0, String::new());
            for (i, s) in hist.iter().enumerate() {
                apply(&mut m, s);
                let diff: Vec<String> = m
                    .iter()
                    .filter(|(k, v)| got.get(*k) != Some(*v))
                    .map(|(k, _)| format!("missing/changed {k:?}"))
                    .chain(
                        got.keys()
                            .filter(|k| !m.contains_key(*k))
                            .map(|k| format!("extra {k:?}")),
                    )
                    .collect();
                if diff.len() < best.0 {
                    best = (diff.len(), i + 1, diff.join(", "));
                }
            }
            panic!(
                "case {case} ({design:?}): the keyspaces hold no prefix of the history \
                 (required {required}); nearest prefix {} differs in {}: {}",
                best.1, best.0, best.2
            )
        });
        assert!(
            prefix >= required,
            "case {case} ({design:?}): prefix {prefix} lost synced step {required}"
        );
        db.close().expect("close");
    }
    assert!(crashed_cases > 0, "no case reached its crash point");
}

/// A drop recorded in the manifest whose files a crash left behind: the
/// next open deletes them, and the keyspace stays gone.
#[test]
fn files_of_a_dropped_keyspace_left_by_a_crash_are_deleted_at_open() {
    let fs = MemFs::new();
    let (db, ks) = open_three(&fs, "").expect("open");
    for i in 0..400u32 {
        ks[1].put(key(i), vec![b'z'; 100]).expect("put");
    }
    ks[1].flush().expect("flush");
    let tables = |fs: &MemFs| {
        fs.list_dir(Path::new(DIR))
            .expect("list")
            .into_iter()
            .filter(|n| n.ends_with(".table"))
            .collect::<Vec<_>>()
    };
    let before = tables(&fs);
    assert!(!before.is_empty());
    // Hold a reader on the keyspace's tables: the drop leaves their files
    // until it ends; a process crash now keeps them on disk.
    let it = ks[1].iter(&ReadOptions::default()).expect("iter");
    db.drop_keyspace("a").expect("drop");
    let crashed = fs.crash_clone(CrashKind::Process);
    assert!(
        before.iter().all(|t| tables(&crashed).contains(t)),
        "the held tables are still on disk"
    );
    drop(it);
    drop(ks);
    db.close().expect("close");
    let db = Db::open(DIR, tiny_with("").fs(Arc::new(crashed.clone()))).expect("reopen");
    assert_eq!(db.keyspace_names(), ["default", "b"]);
    let left: Vec<String> = tables(&crashed)
        .into_iter()
        .filter(|t| before.contains(t))
        .collect();
    assert!(
        left.is_empty(),
        "the dropped keyspace's tables {left:?} are left"
    );
    db.close().expect("close");
}

/// Writes to a keyspace whose level 0 is at its stop limit wait; writes to
/// another keyspace go on meanwhile.
#[test]
fn a_stall_in_one_keyspace_leaves_the_others_writable() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One background thread, held inside the first flush's event: the
    // stalled keyspace's level 0 cannot drain.
    let gate = common::HoldFlush::new(1);
    let opts = Options::default()
        .background_threads(1)
        .listener(gate.clone());
    let db = Arc::new(Db::open(dir.path(), opts).expect("open"));
    let _release = common::ReleaseOnDrop(gate.clone());
    let slow = db
        .create_keyspace("slow", "write_buffer_size=4K,max_write_buffer_number=2")
        .expect("create");
    let fast = db.create_keyspace("fast", "").expect("create");
    // Fill `slow` until its flush is held and both memtable slots are full.
    let writer = {
        let slow = slow.clone();
        std::thread::spawn(move || {
            for i in 0..200u32 {
                slow.put(key(i), vec![b's'; 200]).expect("put");
            }
        })
    };
    gate.wait_entered();
    common::wait_until("the slow keyspace to stall", || db.stats().stall_count > 0);
    // `fast` takes writes while `slow` waits.
    for i in 0..500u32 {
        fast.put(key(i), b"f").expect("put to the other keyspace");
    }
    assert_eq!(fast.get(key(499)).expect("get"), Some(b"f".to_vec()));
    assert!(!writer.is_finished(), "the stalled writer still waits");
    gate.release();
    writer.join().expect("writer");
    assert_eq!(slow.get(key(199)).expect("get"), Some(vec![b's'; 200]));
}

#[test]
fn keyspace_errors_are_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let bad = |r: strata::Result<Keyspace>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(bad(db.create_keyspace("", "")));
    assert!(bad(db.create_keyspace(&"n".repeat(256), "")));
    assert!(bad(db.create_keyspace("default", "")));
    assert!(
        bad(db.create_keyspace("x", "engine=kvell")),
        "a database option"
    );
    assert!(
        bad(db.create_keyspace("x", "write_buffer_size=1")),
        "out of range"
    );
    assert!(bad(db.create_keyspace("x", "no_such_option=1")));
    assert!(
        db.keyspace("x").expect("lookup").is_none(),
        "no failed create left one"
    );
    let x = db
        .create_keyspace("x", "write_buffer_size=1M")
        .expect("create");
    assert!(bad(db.create_keyspace("x", "")), "taken");
    assert_eq!(x.options().write_buffer_size, 1 << 20);
    assert!(matches!(
        db.drop_keyspace("default"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.drop_keyspace("nope"),
        Err(Error::InvalidArgument(_))
    ));
    // A batch naming a dropped keyspace is refused whole.
    let mut b = WriteBatch::new();
    b.put("k", "v");
    b.put_in(&x, "k", "v");
    db.drop_keyspace("x").expect("drop");
    assert!(matches!(
        db.write(b, &WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        db.get("k").expect("get"),
        None,
        "nothing of the batch was written"
    );
    assert!(matches!(x.flush(), Err(Error::InvalidArgument(_))));
    // A closed database's handles say so.
    let y = db.create_keyspace("y", "").expect("create");
    db.close().expect("close");
    assert!(matches!(y.put("k", "v"), Err(Error::Closed)));
    assert!(matches!(y.get("k"), Err(Error::Closed)));
}

/// A database written before keyspaces (the committed fixtures) opens with
/// only `default`, takes a keyspace, and opens again with it.
#[test]
fn an_old_database_takes_keyspaces() {
    let old =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/before-range-deletes/tables");
    let dir = tempfile::tempdir().expect("tempdir");
    for e in std::fs::read_dir(&old).expect("list").flatten() {
        std::fs::copy(e.path(), dir.path().join(e.file_name())).expect("copy");
    }
    let db = Db::open(dir.path(), Options::default()).expect("open the old database");
    assert_eq!(db.keyspace_names(), ["default"]);
    let before: Vec<_> = db.scan::<&[u8], _>(..).expect("scan").collect();
    let ks = db.create_keyspace("new", "").expect("create");
    ks.put("k", "v").expect("put");
    drop(ks);
    db.close().expect("close");
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    assert_eq!(db.keyspace_names(), ["default", "new"]);
    let ks = db.keyspace("new").expect("lookup").expect("there");
    assert_eq!(ks.get("k").expect("get"), Some(b"v".to_vec()));
    let after: Vec<_> = db.scan::<&[u8], _>(..).expect("scan").collect();
    assert_eq!(before.len(), after.len());
    // The offline check reads a manifest with keyspaces.
    ks.flush().expect("flush");
    drop(ks);
    db.close().expect("close");
    let report = strata::verify::verify_dir(dir.path(), &Options::default()).expect("verify");
    assert!(report.is_ok(), "{report:?}");
}

fn wal_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".wal"))
        .count()
}

/// A keyspace nobody writes, and one written once, keep no logs: the
/// first moves its log number with other keyspaces' flushes, the second's
/// memtable is switched once the kept logs pass their bound.
#[test]
fn quiet_keyspaces_keep_no_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), tiny_with("")).expect("open");
    let _idle = db.create_keyspace("idle", "").expect("create");
    let once = db.create_keyspace("once", "").expect("create");
    once.put("k", "v").expect("put");
    for i in 0..6000u32 {
        db.put(key(i), vec![b'd'; 100]).expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    let wals = wal_count(dir.path());
    assert!(wals <= 16, "{wals} logs kept");
    assert!(db.stats().wal_forced_switches > 0);
    drop(once);
    db.close().expect("close");
    let db = Db::open(dir.path(), tiny_with("")).expect("reopen");
    let once = db.keyspace("once").expect("lookup").expect("there");
    assert_eq!(once.get("k").expect("get"), Some(b"v".to_vec()));
}

/// Checkpoints taken while batches across keyspaces are written hold each
/// batch whole or not at all.
#[test]
fn checkpoints_hold_batches_across_keyspaces_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(dir.path().join("db"), tiny_with("")).expect("open"));
    let a = db.create_keyspace("a", "").expect("create");
    let b = db
        .create_keyspace("b", "write_buffer_size=16K")
        .expect("create");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, a, b, stop) = (db.clone(), a.clone(), b.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut batch = WriteBatch::new();
                batch.put_in(&a, key(i % 3000), format!("{i}"));
                batch.put_in(&b, key(i % 3000), format!("{i}"));
                db.write(batch, &WriteOptions::default()).expect("write");
                i += 1;
            }
            i
        })
    };
    for c in 0..6 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let target = dir.path().join(format!("ck{c}"));
        db.checkpoint(&target).expect("checkpoint");
        let copy = Db::open(&target, tiny_with("")).expect("open the copy");
        let (ca, cb) = (
            copy.keyspace("a").expect("a").expect("a"),
            copy.keyspace("b").expect("b").expect("b"),
        );
        assert_eq!(contents(&ca, None), contents(&cb, None), "checkpoint {c}");
        drop((ca, cb));
        copy.close().expect("close");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(writer.join().expect("writer") > 0);
}

/// A drop while other threads write: writes to other keyspaces never fail,
/// writes to the dropped one fail with `InvalidArgument` once it is gone,
/// and a manual compaction of it ends without poisoning the database.
#[test]
fn a_drop_under_writers_fails_only_its_own_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(dir.path(), tiny_with("")).expect("open"));
    for round in 0..4 {
        let name = format!("x{round}");
        let x = db.create_keyspace(&name, "").expect("create");
        for i in 0..2000u32 {
            x.put(key(i), vec![b'x'; 60]).expect("put");
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let on_x = {
            let (x, stop) = (x.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match x.put(key(i % 500), b"y") {
                        Ok(()) => {}
                        Err(Error::InvalidArgument(_)) => return,
                        Err(e) => panic!("a write to the dropped keyspace gave {e}"),
                    }
                    i += 1;
                }
            })
        };
        let compacting = {
            let x = x.clone();
            std::thread::spawn(move || loop {
                match x.compact_range::<&[u8], _>(..) {
                    Ok(()) => {}
                    Err(Error::InvalidArgument(_)) => return,
                    Err(e) => panic!("a compaction of the dropped keyspace gave {e}"),
                }
            })
        };
        let on_default = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    db.put(key(i % 500), b"d").expect("a write to default");
                    i += 1;
                }
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(30));
        db.drop_keyspace(&name).expect("drop");
        compacting.join().expect("compacting");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        on_x.join().expect("writer of x");
        on_default.join().expect("writer of default");
        db.put("after", "ok").expect("the database takes writes");
    }
    assert_eq!(db.keyspace_names(), ["default"]);
}

/// A dropped keyspace's records are in no table: the logs that hold them
/// must not read as a hole in the history when they go (or when a crash
/// leaves them), or the other keyspaces' later writes would not be
/// replayed. (The model test's reopen after its drop is a history where the
/// hole appears without `Logs::sealed_below`; this one checks both orders
/// of drop and flush after a process crash.)
#[test]
fn a_drop_leaves_no_hole_in_the_history() {
    for flush_after_drop in [false, true] {
        let fs = MemFs::new();
        let (db, ks) = open_three(&fs, "").expect("open");
        for i in 0..300u32 {
            ks[1].put(key(i), vec![b'a'; 50]).expect("put a");
            ks[0].put(key(i), vec![b'd'; 50]).expect("put default");
        }
        ks[0].flush().expect("flush default");
        ks[2].flush().expect("flush b");
        for i in 300..400u32 {
            ks[0].put(key(i), b"late").expect("put default");
        }
        db.drop_keyspace("a").expect("drop");
        if flush_after_drop {
            ks[2].put("b", "b").expect("put b");
            ks[2].flush().expect("flush b");
        }
        let crashed = fs.crash_clone(CrashKind::Process);
        drop(ks);
        db.close().expect("close");
        let (db, ks) = open_three(&crashed, "").expect("reopen");
        for i in 0..400u32 {
            assert!(
                ks[0].get(key(i)).expect("get").is_some(),
                "default lost key {i} (flush after the drop: {flush_after_drop})"
            );
        }
        drop(ks);
        db.close().expect("close");
    }
}

/// A keyspace's own time to live: its versions expire, the database's
/// (no ttl) stay, across flushes, compactions and a reopen; its write
/// times are recorded in its own part of the manifest.
#[test]
fn a_keyspace_has_its_own_time_to_live() {
    let clock = Arc::new(strata::clock::ManualClock::new(1_700_000_000_000));
    let fs = Arc::new(MemFs::new());
    let opts = || {
        let mut o = tiny_with("").fs(fs.clone());
        o.clock = clock.clone();
        o
    };
    let db = Db::open(DIR, opts()).expect("open");
    let session = db
        .create_keyspace("session", "ttl_secs=60")
        .expect("create");
    for i in 0..300u32 {
        session.put(key(i), b"s").expect("put");
        db.put(key(i), b"d").expect("put");
    }
    session.flush().expect("flush");
    clock.advance(30_000);
    session.put("late", "s").expect("put");
    clock.advance(31_000);
    // The first writes are 61 s old, the late one 31 s.
    assert_eq!(session.get(key(7)).expect("get"), None);
    assert_eq!(session.get("late").expect("get"), Some(b"s".to_vec()));
    assert_eq!(db.get(key(7)).expect("get"), Some(b"d".to_vec()));
    session.compact_range::<&[u8], _>(..).expect("compact");
    assert_eq!(contents(&session, None).len(), 1);
    drop(session);
    db.close().expect("close");
    let db = Db::open(DIR, opts()).expect("reopen");
    let session = db.keyspace("session").expect("lookup").expect("there");
    assert_eq!(session.options().ttl_secs, 60);
    assert_eq!(session.get(key(7)).expect("get"), None);
    assert_eq!(session.get("late").expect("get"), Some(b"s".to_vec()));
    clock.advance(30_000);
    assert_eq!(
        session.get("late").expect("get"),
        None,
        "expired after the reopen"
    );
    assert_eq!(db.get(key(299)).expect("get"), Some(b"d".to_vec()));
    drop(session);
    db.close().expect("close");
}

/// The memtables of every keyspace stay within the memtables' share of
/// the memory budget: twelve keyspaces whose memtables each fit the share
/// but together would pass it, written in turn, never hold more than the
/// share (the largest memtable is switched, and writers wait for its
/// flush), a drop on the way holds nothing back, and every write is read
/// back.
#[test]
fn keyspaces_share_one_memory_budget() {
    const MIB: u64 = 1 << 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = tiny_with(
        "write_buffer_size=2M,memtable_shard_size=2M,max_write_buffer_number=2,memory_budget=64M",
    );
    let db = Db::open(dir.path(), opts).expect("open");
    let share = db.stats().memory.memtables_share;
    assert_eq!(share, 32 * MIB);
    let mut spaces = vec![db.keyspace("default").expect("lookup").expect("default")];
    for i in 0..11 {
        let ks = db.create_keyspace(&format!("ks{i}"), "").expect("create");
        spaces.push(ks);
    }
    let value = vec![b'v'; 1000];
    let mut peak = 0u64;
    let n = 3 * 12 * 2048u32;
    let mut dropped = None;
    for i in 0..n {
        if i == n / 2 {
            // A drop while the memtables press on the share.
            db.drop_keyspace("ks3").expect("drop");
            dropped = Some(4usize);
        }
        let at = i as usize % spaces.len();
        if dropped == Some(at) {
            continue;
        }
        spaces[at].put(key(i), &value).expect("put");
        if i % 64 == 0 {
            peak = peak.max(db.stats().memory.memtables);
        }
    }
    let s = db.stats();
    eprintln!(
        "peak {peak}, budget switches {}, stalls {}",
        s.memtable_budget_switches, s.memtable_budget_stalls
    );
    assert!(s.memtable_budget_switches > 0, "no switch for the budget");
    // A put's bytes past the share at most: the leader checks before it
    // inserts.
    assert!(
        peak <= share + 64 * 1024,
        "memtables held {peak} bytes, share {share}"
    );
    for i in (0..n).step_by(97) {
        let at = i as usize % spaces.len();
        if dropped != Some(at) {
            assert_eq!(
                spaces[at].get(key(i)).expect("get").as_deref(),
                Some(&value[..])
            );
        }
    }
}
