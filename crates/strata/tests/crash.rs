//! Process-crash recovery: a child process (this same test binary, running
//! the ignored test `crash_child`) writes puts, deletes, merges (on the LSM
//! engine, with the tests' append operator) and batches with `sync`, printing `begin <n>` before and `ack <key> <value-id>` after each
//! write; the parent SIGKILLs it at a random moment after it said `opened`
//! (and once it acknowledged a write), reopens the database and checks it
//! holds exactly the state after every acknowledged operation, plus possibly
//! the one operation the child had begun when it died. Every round must
//! acknowledge writes and end in a kill.
//!
//! Every round continues on the same directory, so crashes also hit recovery,
//! flushes and compactions of earlier rounds' data.
//!
//! Both engines run through the one door (`strata::open`). KVell's batches
//! are not atomic (each key is): there, each key the in-flight operation
//! touched may hold its acknowledged value or the value after any prefix of
//! that operation's entries for it; every other key must be exact.
//!
//! Many rounds: `STRATA_CRASH_ROUNDS=200 cargo test --release --test crash -- --ignored crash_many`
//! (`STRATA_CRASH_SEED=n` fixes the master seed).

mod common;

use common::{tiny_with, STALE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use strata::{KvStore, ScanRange, WriteBatch, WriteOptions};

const ENV_DIR: &str = "STRATA_CRASH_CHILD_DIR";
const ENV_SEED: &str = "STRATA_CRASH_CHILD_SEED";
const ENV_ROUND: &str = "STRATA_CRASH_CHILD_ROUND";
/// Options applied on top of `tiny_options()` (a design under test).
const ENV_OPTS: &str = "STRATA_CRASH_CHILD_OPTS";
/// The child stops by itself after this many operations (a safety net).
const MAX_OPS: usize = 20_000;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One entry of an operation: a put (`Some(value)`), a merge of the
/// operand `Some(value)` (`merge`), or a delete.
struct Entry {
    key: String,
    value: Option<Vec<u8>>,
    merge: bool,
    /// `<round>.<op>.<entry>`, or the same with `-del` for a delete.
    vid: String,
}

struct Op {
    entries: Vec<Entry>,
    sync: bool,
}

/// The deterministic operation stream of one round.
struct OpGen {
    rng: StdRng,
    round: u64,
    i: usize,
    /// One entry in ten is a merge (the store takes merges).
    merges: bool,
}

/// Whether the store of options `spec` takes merges (the LSM engine, with
/// `tiny_options`' operator).
fn merges_for(spec: &str) -> bool {
    !spec.contains("engine=kvell")
}

impl OpGen {
    fn new(seed: u64, round: u64, merges: bool) -> Self {
        OpGen {
            rng: StdRng::seed_from_u64(seed),
            round,
            i: 0,
            merges,
        }
    }

    fn next_op(&mut self) -> Op {
        let i = self.i;
        self.i += 1;
        let rng = &mut self.rng;
        let n = match rng.gen_range(0..10) {
            0..=1 => rng.gen_range(2..12), // a batch
            _ => 1,
        };
        let mut entries = Vec::with_capacity(n);
        for j in 0..n {
            let key = format!("k{:04}", rng.gen_range(0..300u32));
            let vid = format!("{}.{i}.{j}", self.round);
            if self.merges && rng.gen_bool(0.1) {
                entries.push(Entry {
                    key,
                    value: Some(format!("m{vid}").into_bytes()),
                    merge: true,
                    vid: format!("{vid}-merge"),
                });
            } else if rng.gen_bool(0.2) {
                entries.push(Entry {
                    key,
                    value: None,
                    merge: false,
                    vid: format!("{vid}-del"),
                });
            } else {
                let len = if rng.gen_bool(0.05) {
                    rng.gen_range(1000..4000)
                } else {
                    rng.gen_range(0..150)
                };
                let mut v = format!("{key}={vid};").into_bytes();
                v.extend((0..len).map(|x| b'a' + ((x + i) % 26) as u8));
                entries.push(Entry {
                    key,
                    value: Some(v),
                    merge: false,
                    vid,
                });
            }
        }
        Op {
            entries,
            sync: rng.gen_bool(0.85),
        }
    }
}

fn apply(model: &mut Model, op: &Op) {
    for e in &op.entries {
        match &e.value {
            Some(v) if e.merge => common::model_merge(model, e.key.as_bytes(), v),
            Some(v) => {
                model.insert(e.key.clone().into_bytes(), v.clone());
            }
            None => {
                model.remove(e.key.as_bytes());
            }
        }
    }
}

/// The child: opens the database and writes until killed.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn crash_child() {
    let (Ok(dir), Ok(seed), Ok(round)) = (
        std::env::var(ENV_DIR),
        std::env::var(ENV_SEED),
        std::env::var(ENV_ROUND),
    ) else {
        return;
    };
    let seed: u64 = seed.parse().expect("seed");
    let round: u64 = round.parse().expect("round");
    let mut out = std::io::stdout().lock();
    // libtest may have printed "test crash_child ... " without a newline.
    writeln!(out).expect("stdout");
    let spec = std::env::var(ENV_OPTS).unwrap_or_default();
    let db = open_store(Path::new(&dir), &spec);
    writeln!(out, "opened").expect("stdout");
    out.flush().expect("stdout");
    let mut ops = OpGen::new(seed, round, merges_for(&spec));
    for n in 0..MAX_OPS {
        let op = ops.next_op();
        writeln!(out, "begin {n}").expect("stdout");
        out.flush().expect("stdout");
        let mut b = WriteBatch::new();
        for e in &op.entries {
            match &e.value {
                Some(v) if e.merge => b.merge(&e.key, v),
                Some(v) => b.put(&e.key, v),
                None => b.delete(&e.key),
            }
        }
        db.write(b, &WriteOptions { sync: op.sync })
            .expect("child write");
        for e in &op.entries {
            writeln!(out, "ack {} {}", e.key, e.vid).expect("stdout");
        }
        out.flush().expect("stdout");
    }
}

/// One round: run the child on `dir`, kill it, check the recovered state.
/// `model` is the state before the round and becomes the state after it.
/// Returns whether an operation was in flight at the kill and whether it
/// was recovered.
fn round(
    dir: &Path,
    spec: &str,
    model: &mut Model,
    seed: u64,
    round: u64,
    rng: &mut StdRng,
) -> (bool, bool) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .args(["--exact", "crash_child", "--ignored", "--nocapture"])
        .env(ENV_DIR, dir)
        .env(ENV_SEED, seed.to_string())
        .env(ENV_ROUND, round.to_string())
        .env(ENV_OPTS, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout pipe");
    let mut stderr = child.stderr.take().expect("stderr pipe");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        // Only complete lines count: the kill may cut the last one short.
        while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
            if let Some(l) = line.strip_suffix('\n') {
                if tx.send(l.to_string()).is_err() {
                    break;
                }
            }
            line.clear();
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    // The kill timer starts when the child has opened the database (its
    // open may replay and compact earlier rounds' data), and the kill waits
    // for a first acknowledged write: a round that acknowledged nothing
    // would test nothing. `LIVENESS` only bounds a hung child.
    const LIVENESS: Duration = Duration::from_secs(120);
    let mut lines = Vec::new();
    let started = Instant::now();
    let mut stuck = None;
    while !lines.iter().any(|l| l == "opened") {
        match rx.recv_timeout(LIVENESS.saturating_sub(started.elapsed())) {
            Ok(l) => lines.push(l),
            Err(e) => {
                stuck = Some(format!("the child never said it opened ({e:?})"));
                break;
            }
        }
    }
    let deadline = Instant::now() + Duration::from_millis(rng.gen_range(50..=400));
    while stuck.is_none() {
        let acked = lines.iter().any(|l| l.starts_with("ack "));
        let wait = match deadline.checked_duration_since(Instant::now()) {
            Some(left) => left,
            None if acked => break,
            None => LIVENESS.saturating_sub(started.elapsed()),
        };
        match rx.recv_timeout(wait) {
            Ok(l) => lines.push(l),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if started.elapsed() >= LIVENESS {
                    stuck = Some(format!("the child acknowledged no write in {LIVENESS:?}"));
                }
            }
            Err(e) => stuck = Some(format!("the child's output ended ({e:?})")),
        }
    }
    let _ = child.kill();
    let status = child.wait().expect("wait child");
    reader.join().expect("stdout reader");
    // Lines the child printed before dying but we had not read yet.
    lines.extend(rx.try_iter());
    let err = err_reader.join().unwrap_or_default();
    if let Some(why) = stuck {
        panic!("round {round}: {why} ({status}):\n{err}");
    }
    assert!(
        status.signal().is_some(),
        "round {round}: the child was not killed but exited ({status}):\n{err}"
    );

    // Replay the child's operations; every `ack` line must match them.
    let mut ops = OpGen::new(seed, round, merges_for(spec));
    let mut acked = model.clone();
    let mut pending: Option<Op> = None;
    let mut op_acks = 0usize; // ack lines seen for `pending`
    let mut n_ops = 0usize;
    for l in lines.iter().filter_map(|l| l.strip_prefix("ack ")) {
        let (key, vid) = l.split_once(' ').expect("ack line");
        if pending.is_none() {
            pending = Some(ops.next_op());
            op_acks = 0;
        }
        let op = pending.as_ref().expect("pending op");
        let e = op.entries.get(op_acks).expect("ack beyond op");
        assert_eq!((key, vid), (e.key.as_str(), e.vid.as_str()), "ack mismatch");
        op_acks += 1;
        if op_acks == 1 {
            // The first ack of an operation acknowledges all of it.
            apply(&mut acked, op);
            n_ops += 1;
        }
        if op_acks == op.entries.len() {
            pending = None;
        }
    }
    // `begin` lines: the child began every acknowledged operation, and at
    // most one more (the one in flight when it died).
    let begun = lines.iter().filter(|l| l.starts_with("begin ")).count();
    let in_flight = begun.checked_sub(n_ops).unwrap_or_else(|| {
        panic!("round {round}: {n_ops} operations acknowledged but only {begun} begun")
    });
    assert!(
        in_flight <= 1,
        "round {round}: {begun} operations begun, {n_ops} acknowledged"
    );
    assert!(n_ops >= 1, "round {round}: no write acknowledged");
    // The operation after the last acknowledged one may or may not have
    // reached the log before the kill, if it had begun.
    let next = if pending.is_none() {
        Some(ops.next_op())
    } else {
        None
    };
    let mut with_next = acked.clone();
    if let Some(op) = &next {
        apply(&mut with_next, op);
    }

    eprintln!("round {round}: {n_ops} ops acknowledged, {in_flight} in flight at the kill");
    let in_flight = in_flight == 1;
    let db = open_store(dir, spec);
    let atomic = db.semantics().atomic_batches;
    let got: Model = db
        .scan(ScanRange::all())
        .unwrap_or_else(|e| panic!("round {round}: scan after the crash: {e}"))
        .into_iter()
        .collect();
    // What key `k` may hold: its acknowledged value, or its value with the
    // in-flight operation; without atomic batches, its value after any
    // prefix of that operation's entries (a batch may write a key twice).
    let op = next.as_ref().filter(|_| in_flight);
    let may = |k: &[u8]| -> Vec<Option<Vec<u8>>> {
        let mut may = vec![acked.get(k).cloned()];
        if op.is_some() {
            may.push(with_next.get(k).cloned());
        }
        if !atomic {
            for e in op.iter().flat_map(|o| &o.entries) {
                if e.key.as_bytes() == k {
                    may.push(e.value.clone());
                }
            }
        }
        may
    };
    let show = |x: Option<&Vec<u8>>| {
        x.map(|v| String::from_utf8_lossy(&v[..v.len().min(30)]).into_owned())
    };
    for k in acked.keys().chain(with_next.keys()) {
        // Point reads take another path (memtable/L0 vs levels, bloom).
        let g = db.get(k).expect("get");
        assert!(
            may(k).contains(&g),
            "round {round} (seed {seed}, in flight {in_flight}): get({}) wrong after crash: \
             got {:?}, acked {:?}, with next {:?}\nchild stderr:\n{err}",
            String::from_utf8_lossy(k),
            show(g.as_ref()),
            show(acked.get(k)),
            show(with_next.get(k)),
        );
    }
    drop(db);
    if !atomic {
        // Key by key: exact, or (a key of the in-flight operation) its
        // acknowledged value or that after some prefix of its entries.
        let mut bad = Vec::new();
        for k in acked.keys().chain(got.keys()) {
            let g = got.get(k).cloned();
            if !may(k).contains(&g) {
                bad.push(format!(
                    "{}: got {:?}, acked {:?}",
                    String::from_utf8_lossy(k),
                    show(g.as_ref()),
                    show(acked.get(k)),
                ));
            }
        }
        bad.dedup();
        assert!(
            bad.is_empty(),
            "round {round} (seed {seed}, {n_ops} ops acked): recovered state is not the \
             acknowledged one:\n{}\nchild stderr:\n{err}",
            bad.join("\n")
        );
        let landed = got != acked;
        *model = got;
        return (in_flight, landed);
    }
    if got == acked {
        *model = acked;
        (in_flight, false)
    } else if got == with_next {
        assert!(
            in_flight,
            "round {round} (seed {seed}): recovered an operation the child never began"
        );
        *model = with_next;
        (true, true)
    } else {
        let mut diffs = Vec::new();
        for k in acked.keys().chain(got.keys()).chain(with_next.keys()) {
            let (a, g, w) = (acked.get(k), got.get(k), with_next.get(k));
            if g != a && g != w {
                let show = |x: Option<&Vec<u8>>| {
                    x.map(|v| String::from_utf8_lossy(&v[..v.len().min(30)]).into_owned())
                };
                diffs.push(format!(
                    "{}: got {:?}, acked {:?}, with next {:?}",
                    String::from_utf8_lossy(k),
                    show(g),
                    show(a),
                    show(w)
                ));
            }
        }
        diffs.dedup();
        panic!(
            "round {round} (seed {seed}, {n_ops} ops acked): recovered state is not the \
             acknowledged one:\n{}\nchild stderr:\n{err}",
            diffs.join("\n")
        );
    }
}

/// Opens the store of `dir` with options `spec` on top of `tiny_options()`.
fn open_store(dir: &Path, spec: &str) -> Box<dyn KvStore> {
    strata::open(dir, tiny_with(spec))
        .unwrap_or_else(|e| panic!("open {} [{spec}]: {e}", dir.display()))
}

/// `rounds` kill-and-recover rounds with options `spec` on top of
/// `tiny_options()`.
fn run(rounds: u64, spec: &str) {
    let master: u64 = std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("crash test [{spec}] master seed {master} (STRATA_CRASH_SEED={master} to rerun)");
    let mut rng = StdRng::seed_from_u64(master);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model = Model::new();
    let mut flights = [0usize; 3];
    for r in 0..rounds {
        let seed = rng.gen();
        let (in_flight, landed) = round(dir.path(), spec, &mut model, seed, r, &mut rng);
        flights[usize::from(in_flight) + usize::from(landed)] += 1;
    }
    eprintln!(
        "{rounds} rounds: killed between two writes {}, during one: recovered {}, lost {}",
        flights[0], flights[2], flights[1]
    );
    // The database holds something after all those rounds.
    assert!(!model.is_empty());
}

#[test]
fn crash_recovery_keeps_acknowledged_writes() {
    run(8, "");
}

/// The same with the stale picker: early compactions, stale dropping and
/// the read shortcut (its update table starts empty after each kill).
#[test]
fn crash_recovery_with_the_stale_picker() {
    run(8, STALE);
}

/// The same under every compaction executor (kills land inside
/// sub-tasks and pipeline stages too).
#[test]
fn crash_recovery_with_the_matrix_container() {
    run(6, common::MATRIX);
}

#[test]
fn crash_recovery_with_every_executor() {
    for spec in common::EXECUTORS {
        run(3, spec);
    }
}

/// The KVell engine under each durability mode and I/O path: as many
/// rounds (34) as this file runs on the LSM over all its designs.
#[test]
fn crash_recovery_on_kvell() {
    run(14, "engine=kvell,kvell_workers=2");
    run(10, "engine=kvell,kvell_durability=synced,kvell_workers=3");
    run(10, "engine=kvell,kvell_io=pread,kvell_batch=4");
}

#[test]
#[ignore = "long; set STRATA_CRASH_ROUNDS"]
fn crash_many() {
    let rounds = std::env::var("STRATA_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let spec = std::env::var("STRATA_CRASH_OPTS").unwrap_or_default();
    run(rounds, &spec);
}
