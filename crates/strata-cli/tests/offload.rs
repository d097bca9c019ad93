//! `executor=offload` with a real `strata compaction-worker` process (CoPro's
//! emulated device): sub-tasks run there, and when the worker is killed
//! with SIGKILL while it holds finished but unreported outputs, nothing
//! acknowledged is lost and no orphan table is left. Also `strata stress
//! --crash` under the in-process executors and the offload one.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use strata::compaction::executor::offload::{worker_metrics, METRIC_SUBTASKS};
use strata::{Db, Options};

/// A running worker, killed on drop.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_worker(addr: &str, extra: &[&str]) -> Worker {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["compaction-worker", "--listen", addr])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn worker");
    let mut line = String::new();
    let out = child.stdout.take().expect("stdout");
    BufReader::new(out).read_line(&mut line).expect("read");
    assert!(line.contains("listening"), "worker said {line:?}");
    Worker(child)
}

fn options(addr: &str) -> Options {
    let mut o = Options::default()
        .write_buffer_size(16 * 1024)
        .target_file_size(8 * 1024)
        .max_bytes_for_level_base(64 * 1024)
        .max_bytes_for_level_multiplier(4)
        .level0_file_num_compaction_trigger(2)
        .block_size(512);
    o.apply(&format!("executor=offload:{addr},offload_timeout_ms=20000"))
        .expect("options");
    o
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", (i * 7919) % 5000).into_bytes()
}

/// Writes `n` puts (and a delete every 9th) from `from` on, into the db and
/// the model.
fn write(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, from: u64, n: u64) {
    for i in from..from + n {
        let k = key(i);
        if i % 9 == 0 {
            db.delete(&k).expect("delete");
            model.remove(&k);
        } else {
            let v = format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes();
            db.put(&k, &v).expect("put");
            model.insert(k, v);
        }
    }
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("scan");
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(
        all == want,
        "scan differs from the model ({} vs {} entries)",
        all.len(),
        want.len()
    );
    for (k, v) in model {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v));
    }
}

/// Table files on disk that the open database's version does not name.
fn orphans(db: &Db, dir: &Path) -> usize {
    let live: usize = db.stats().levels.iter().map(|l| l.files).sum();
    let on_disk = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".table"))
        .count();
    on_disk.saturating_sub(live)
}

#[test]
fn offloaded_subtasks_run_on_the_worker() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let addr = format!("unix:{}", tmp.path().join("w.sock").display());
    let _worker = start_worker(&addr, &[]);
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options(&addr)).expect("open");
    let mut model = BTreeMap::new();
    write(&db, &mut model, 0, 20_000);
    db.wait_for_compactions().expect("wait");
    check(&db, &model);
    let s = db.stats();
    assert!(s.compaction_offloaded_subtasks > 0, "{s}");
    assert_eq!(s.compaction_offload_fallbacks, 0, "{s}");
    let m = worker_metrics(&addr, Duration::from_secs(5)).expect("metrics");
    let served = m
        .iter()
        .find(|(k, _)| *k == METRIC_SUBTASKS)
        .map(|(_, v)| *v);
    assert_eq!(served, Some(s.compaction_offloaded_subtasks), "{m:?}");
    assert_eq!(orphans(&db, &dir), 0);
    drop(db);
    let db = Db::open(&dir, options(&addr)).expect("reopen");
    check(&db, &model);
}

#[test]
fn killing_the_worker_mid_compaction_loses_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let addr = format!("unix:{}", tmp.path().join("w.sock").display());
    // The worker holds each answer for a minute after its outputs are
    // written: it is killed in that window.
    let mut worker = start_worker(&addr, &["--reply-delay-ms", "60000"]);
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options(&addr)).expect("open");
    let mut model = BTreeMap::new();
    let mut written = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    // Write until the worker has finished a sub-task it has not reported.
    loop {
        write(&db, &mut model, written, 500);
        written += 500;
        let m = worker_metrics(&addr, Duration::from_secs(5)).expect("metrics");
        if m.iter().any(|(k, v)| *k == METRIC_SUBTASKS && *v > 0) {
            break;
        }
        assert!(Instant::now() < deadline, "no sub-task was offloaded");
    }
    let _ = worker.0.kill();
    let _ = worker.0.wait();
    // The host re-runs the sub-task; later compactions fall back at once.
    write(&db, &mut model, written, 5_000);
    db.wait_for_compactions().expect("wait");
    check(&db, &model);
    let s = db.stats();
    assert!(s.compaction_offload_fallbacks > 0, "{s}");
    assert_eq!(
        s.compaction_offloaded_subtasks, 0,
        "no answer came back: {s}"
    );
    assert_eq!(
        orphans(&db, &dir),
        0,
        "the dead worker's outputs were removed"
    );
    drop(db);
    let db = Db::open(&dir, options(&addr)).expect("reopen");
    check(&db, &model);
    // A compaction started by the reopen writes tables that are not yet
    // in the version: count orphans once it is done.
    db.wait_for_compactions().expect("wait after reopen");
    assert_eq!(orphans(&db, &dir), 0);
}

fn stress(dir: &str, opt: &str, seed: &str) {
    let o = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "--dir", dir, "--opt", opt, "stress", "--crash", "--rounds", "4",
        ])
        .args([
            "--max-kill-ms",
            "600",
            "--threads",
            "3",
            "--keys",
            "2000",
            "--seed",
            seed,
        ])
        .output()
        .expect("run strata");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "[{opt}] {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("4 rounds"), "[{opt}] {out}");
}

/// A few `strata stress --crash` rounds under each executor (the long run
/// is `docs/DURABILITY.md`'s command with `--opt executor=...`).
#[test]
fn stress_crash_rounds_under_every_executor() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (i, exec) in ["subtasks:2", "pipelined", "copro:2", "copro+:2"]
        .iter()
        .enumerate()
    {
        let db = tmp.path().join(format!("db{i}"));
        stress(
            db.to_str().expect("utf-8"),
            &format!("executor={exec}"),
            "11",
        );
    }
    let addr = format!("unix:{}", tmp.path().join("w.sock").display());
    let _worker = start_worker(&addr, &[]);
    let db = tmp.path().join("db-offload");
    stress(
        db.to_str().expect("utf-8"),
        &format!("executor=offload:{addr}"),
        "12",
    );
    // The rounds reached the worker (a host that cannot reach it falls
    // back to compacting alone, and the rounds would pass as well).
    let m = worker_metrics(&addr, Duration::from_secs(5)).expect("metrics");
    let served = m
        .iter()
        .find(|(k, _)| *k == METRIC_SUBTASKS)
        .map_or(0, |(_, v)| *v);
    assert!(served > 0, "no sub-task was offloaded: {m:?}");
}
