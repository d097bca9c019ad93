//! Injected I/O errors ([`FaultFs`] over [`MemFs`]): EIO or ENOSPC in any
//! kind of file operation, during writes, background flushes and
//! compactions, and opening.
//!
//! Promises checked:
//! - a failing write returns a typed error (`Io` or `Poisoned`), and so does
//!   every later write; reads keep working and show every acknowledged write;
//! - after a reopen on a healthy file system, every acknowledged write is
//!   there (at most the one failed write is there too), and after a power
//!   loss every write acknowledged with `sync` is;
//! - a failed open changes nothing that a later healthy open (or a power
//!   loss followed by one) would notice;
//! - a full disk (ENOSPC) stops writes with `StorageFull`; once space is
//!   back, a reopen works and writes succeed;
//! - read errors and damaged blocks give `Io`/`Corruption` on that read,
//!   never a wrong value or a panic.

mod common;

use common::{
    all, history, matching_prefix, tiny_options, tiny_with, HistOp, Model, EXECUTORS, MATRIX, STALE,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use strata::io::fault::Op;
use strata::io::{CrashKind, FaultError, FaultFs, FaultHandle, FileSystem, MemFs};
use strata::{Db, Error, Options, StatsSnapshot};

const DIR: &str = "/db";

fn opts_on(fs: Arc<dyn FileSystem>) -> Options {
    tiny_options().fs(fs)
}

/// `opts_on` with the design `design` (an option list; "" for the defaults).
fn design_on(design: &str, fs: Arc<dyn FileSystem>) -> Options {
    if design.is_empty() {
        opts_on(fs)
    } else {
        tiny_with(design).fs(fs)
    }
}

fn faulty(mem: &MemFs, seed: u64) -> (Arc<dyn FileSystem>, Arc<FaultHandle>) {
    let f = FaultFs::new(Arc::new(mem.clone()), seed);
    let h = f.handle();
    (Arc::new(f), h)
}

/// An error a failing write may return.
fn is_typed_write_error(e: &Error) -> bool {
    match e {
        Error::Io { .. } => true,
        Error::Poisoned(inner) => matches!(**inner, Error::Io { .. } | Error::Corruption { .. }),
        _ => false,
    }
}

fn model_after(ops: &[HistOp], n: usize) -> Model {
    let mut m = Model::new();
    for op in ops.iter().take(n) {
        op.apply(&mut m);
    }
    m
}

fn state(db: &Db) -> Model {
    all(db).into_iter().collect()
}

/// What a faulty run did.
struct Run {
    acked: usize,
    sync_acked: usize,
    failed_write: Option<usize>,
    /// `flush` or `compact_range` calls that returned an error.
    failed_other: usize,
}

/// Runs `ops` (with flushes and a compaction) until the first failed write.
/// After a failure, checks that later writes fail too and, when `reads_ok`,
/// that reads still show every acknowledged write.
fn run_until_error(db: &Db, ops: &[HistOp], reads_ok: bool, ctx: &str) -> Run {
    let mut run = Run {
        acked: 0,
        sync_acked: 0,
        failed_write: None,
        failed_other: 0,
    };
    for (i, op) in ops.iter().enumerate() {
        if i % 150 == 75 {
            if let Err(e) = db.flush() {
                assert!(is_typed_write_error(&e), "{ctx}: flush: {e:?}");
                run.failed_other += 1;
            }
        }
        if i % 400 == 300 {
            if let Err(e) = db.compact_range::<&[u8], _>(..) {
                assert!(is_typed_write_error(&e), "{ctx}: compact_range: {e:?}");
                run.failed_other += 1;
            }
        }
        match op.write(db) {
            Ok(()) => {
                run.acked = i + 1;
                if op.sync {
                    run.sync_acked = i + 1;
                }
            }
            Err(e) => {
                assert!(is_typed_write_error(&e), "{ctx}: write {i}: {e:?}");
                run.failed_write = Some(i);
                break;
            }
        }
    }
    if run.failed_write.is_some() {
        let Err(e) = db.put("after", "x") else {
            panic!("{ctx}: a write after a failed write succeeded");
        };
        assert!(matches!(e, Error::Poisoned(_)), "{ctx}: later write: {e:?}");
        // So do `flush` and `compact_range` (docs/DURABILITY.md).
        let e = db.flush().expect_err("flush after a failed write");
        assert!(matches!(e, Error::Poisoned(_)), "{ctx}: later flush: {e:?}");
        let e = db
            .compact_range::<&[u8], _>(..)
            .expect_err("compact_range after a failed write");
        assert!(
            matches!(e, Error::Poisoned(_)),
            "{ctx}: later compact_range: {e:?}"
        );
        if reads_ok {
            assert!(
                state(db) == model_after(ops, run.acked),
                "{ctx}: reads after the failure do not show the acknowledged writes"
            );
        }
    }
    run
}

/// Reopens on `fs` (healthy) and checks the state is the history's prefix of
/// length in `min..=max`.
fn check_reopen(
    design: &str,
    fs: Arc<dyn FileSystem>,
    ops: &[HistOp],
    (min, max): (usize, usize),
    ctx: &str,
) {
    let db = match Db::open(DIR, design_on(design, fs)) {
        Ok(db) => db,
        Err(e) => panic!("{ctx}: healthy reopen failed: {e}"),
    };
    let got = state(&db);
    match matching_prefix(ops, min, &got) {
        Some(k) if k <= max => {}
        _ => panic!(
            "{ctx}: reopened state is no prefix of length {min}..={max}: {}",
            common::prefix_diff(ops, &got)
        ),
    }
    db.put("after-reopen", "x").expect("write after reopen");
}

/// Runs `ops` with the `n`th call of `op` failing; returns whether the
/// fault surfaced as an error of a write, `flush`, `compact_range` or
/// `close`, or was counted as a log that could not be made ahead
/// (`wal_spare_failures`). Fails unless the fault was injected exactly once.
fn fault_case(design: &str, ops: &[HistOp], op: Op, n: u64, error: FaultError, seed: u64) -> bool {
    let ctx = format!("[{design}] {op:?} #{n} {error:?} seed {seed}");
    let mem = MemFs::new();
    let (fs, h) = faulty(&mem, seed);
    let db = Db::open(DIR, design_on(design, fs.clone())).expect("open");
    let before = h.calls(op);
    h.fail_nth(op, n, error);
    let reads_ok = !matches!(op, Op::Read | Op::Open);
    let run = run_until_error(&db, ops, reads_ok, &ctx);
    // A failure to make the next log ahead is counted, not raised (the
    // switch makes its own log and reports what fails there).
    let counted = db.stats().wal_spare_failures > 0;
    assert!(
        !counted || op == Op::Create || op == Op::Append,
        "{ctx}: a spare log failed without a Create or Append fault"
    );
    // Closing may hit the fault as well.
    let closed = db.close();
    if let Err(e) = &closed {
        assert!(is_typed_write_error(e), "{ctx}: close: {e:?}");
    }
    drop(db);
    h.set_enabled(false);
    assert_eq!(
        h.injected(),
        1,
        "{ctx}: the fault did not fire once ({} calls of {op:?} in this run)",
        h.calls(op) - before
    );
    let surfaced = run.failed_write.is_some() || run.failed_other > 0 || closed.is_err() || counted;
    let power_lost = mem.power_loss();
    let max = run.failed_write.map_or(run.acked, |i| i + 1);
    // The process went on: everything acknowledged is there.
    let after = |what: &str| {
        format!(
            "{ctx} ({what}; {} acknowledged, {} synced)",
            run.acked, run.sync_acked
        )
    };
    check_reopen(design, fs, ops, (run.acked, max), &after("closed"));
    // The machine lost power after the failure: every synced write is there.
    check_reopen(
        design,
        Arc::new(power_lost),
        ops,
        (run.sync_acked, max),
        &after("power lost"),
    );
    surfaced
}

/// Calls of each kind in a healthy run of `ops` under `design`, and the
/// database's statistics at its end.
fn calibrate(design: &str, ops: &[HistOp]) -> (Vec<(Op, u64)>, StatsSnapshot) {
    let mem = MemFs::new();
    let (fs, h) = faulty(&mem, 0);
    let db = Db::open(DIR, design_on(design, fs)).expect("open");
    let before: Vec<u64> = Op::ALL.iter().map(|o| h.calls(*o)).collect();
    let run = run_until_error(&db, ops, true, "calibrate");
    assert!(run.failed_write.is_none());
    let stats = db.stats();
    drop(db);
    let counts = Op::ALL
        .iter()
        .zip(before)
        .map(|(o, b)| (*o, h.calls(*o) - b))
        .collect();
    (counts, stats)
}

/// One fault per case, `picks` cases per kind of call, spread over a run
/// of `ops` under `design`: every fault fires once, and every one in a
/// call that writes surfaces as an error (module doc); returns the cases
/// and the statistics of the healthy run that counted the calls.
fn sweep(design: &str, ops: &[HistOp], picks: u64, seed: u64) -> (usize, StatsSnapshot) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cases = 0;
    // Per kind: cases, and cases whose fault surfaced as an error.
    let mut surfaced: Vec<(Op, usize, usize)> = Vec::new();
    let (counts, healthy) = calibrate(design, &ops[..600]);
    for (op, calls) in counts {
        if calls == 0 {
            continue;
        }
        surfaced.push((op, 0, 0));
        let picks = picks.min(calls);
        for j in 0..picks {
            // Spread over the run, plus a random jitter.
            let base = 1 + calls * j / picks;
            let n = (base + rng.gen_range(0..(calls / picks).max(1))).min(calls);
            let error = if rng.gen_bool(0.5) {
                FaultError::Eio
            } else {
                FaultError::NoSpace
            };
            let s = fault_case(design, ops, op, n, error, seed);
            if let Some(last) = surfaced.last_mut() {
                last.1 += 1;
                last.2 += usize::from(s);
            }
            cases += 1;
        }
    }
    eprintln!("[{design}] single-fault cases: {cases}; (kind, cases, surfaced): {surfaced:?}");
    for (op, n, s) in surfaced {
        if matches!(op, Op::Remove | Op::List) {
            // Removing obsolete files (and listing them) may fail: the file
            // stays, the next open removes it, and nothing else notices.
            assert_eq!(
                s, 0,
                "[{design}] {op:?}: a failed cleanup surfaced as an error"
            );
        } else {
            assert_eq!(
                s, n,
                "[{design}] {op:?}: only {s} of {n} injected faults surfaced as an error"
            );
        }
    }
    (cases, healthy)
}

#[test]
fn an_io_error_anywhere_poisons_writes_and_loses_nothing_acknowledged() {
    let seed = 11;
    // The calls are counted on the first 600 ops, and the faulty runs go on
    // for 200 more: background work makes the count vary by several percent
    // between runs, and a case whose call never came would test nothing (it
    // fails).
    let ops = history(seed, 800, 300, 0.3);
    let (cases, _) = sweep("", &ops, 12, seed);
    assert!(cases > 50, "only {cases} cases");
}

/// The same promises through each design's own paths: the stale picker,
/// every in-process executor and the matrix container, each with a smaller
/// sweep; the healthy run that counts the calls must show the design at
/// work (its own counters moved), so faults land in its code and not only
/// in the shared paths.
#[test]
fn an_io_error_in_every_design_poisons_writes_and_loses_nothing_acknowledged() {
    let seed = 17;
    let ops = history(seed, 800, 300, 0.3);
    let mut designs = vec![format!("{STALE},stale_threshold=0.05"), MATRIX.to_string()];
    designs.extend(EXECUTORS.iter().map(|s| s.to_string()));
    for design in &designs {
        let (cases, s) = sweep(design, &ops, 4, seed);
        let at_work = if design.starts_with("compaction_picker=stale") {
            s.stale_compactions
        } else if design.starts_with("l0=matrix") {
            s.l0_rows.column_compactions
        } else {
            s.compaction_subtasks + s.compaction_pipelined_subtasks
        };
        assert!(
            at_work > 0,
            "[{design}] a healthy run never used the design: {s:?}"
        );
        assert!(cases > 20, "[{design}] only {cases} cases");
    }
}

#[test]
fn random_faults_in_every_write_operation() {
    let ops = history(5, 500, 200, 0.3);
    let mut total_injected = 0;
    for seed in 0..20u64 {
        let ctx = format!("random faults seed {seed}");
        let mem = MemFs::new();
        let (fs, h) = faulty(&mem, seed);
        let db = Db::open(DIR, opts_on(fs.clone())).expect("open");
        for op in Op::WRITES {
            h.fail_randomly(op, 0.002, FaultError::Eio);
        }
        let run = run_until_error(&db, &ops, true, &ctx);
        let closed = db.close();
        drop(db);
        h.set_enabled(false);
        // Faults were injected, and they surfaced as errors.
        let injected = h.injected();
        assert!(injected >= 1, "{ctx}: no fault was injected");
        assert!(
            run.failed_write.is_some() || run.failed_other > 0 || closed.is_err(),
            "{ctx}: {injected} faults injected, none surfaced as an error"
        );
        total_injected += injected;
        let max = run.failed_write.map_or(run.acked, |i| i + 1);
        let power_lost = mem.power_loss();
        check_reopen("", fs, &ops, (run.acked, max), &ctx);
        check_reopen("", Arc::new(power_lost), &ops, (run.sync_acked, max), &ctx);
    }
    eprintln!("random faults: {total_injected} injected in 20 runs");
}

/// A database whose data sits in tables, in a manifest with several edits
/// and in unflushed WALs: the state a crashed process leaves.
fn crashed_base(ops: &[HistOp]) -> MemFs {
    let mem = MemFs::new();
    let db = Db::open(DIR, tiny_options().fs(Arc::new(mem.clone()))).expect("open");
    for (i, op) in ops.iter().enumerate() {
        op.write(&db).expect("write");
        if i == ops.len() / 2 {
            db.compact_range::<&[u8], _>(..).expect("compact");
        }
    }
    let base = mem.crash_clone(CrashKind::Process);
    drop(db);
    base
}

#[test]
fn a_failed_open_changes_nothing_a_later_open_would_notice() {
    let ops = history(9, 300, 120, 0.0);
    let base = crashed_base(&ops);
    let expect = model_after(&ops, ops.len());
    // Calls of each kind during a healthy open.
    let calls: Vec<(Op, u64)> = {
        let (fs, h) = faulty(&base.crash_clone(CrashKind::Process), 0);
        drop(Db::open(DIR, opts_on(fs)).expect("healthy open"));
        Op::ALL.iter().map(|o| (*o, h.calls(*o))).collect()
    };
    let mut failed_opens = 0;
    for (op, total) in calls {
        for n in 1..=total {
            let ctx = format!("open with {op:?} #{n} failing");
            let mem = base.crash_clone(CrashKind::Process);
            let (fs, h) = faulty(&mem, 0);
            h.fail_nth(op, n, FaultError::Eio);
            match Db::open(DIR, opts_on(fs.clone())) {
                Ok(db) => {
                    // A fault the open tolerates (removing an obsolete file),
                    // or one left for the background threads started by the
                    // open: reads are checked on a working device.
                    h.set_enabled(false);
                    assert!(
                        state(&db) == expect,
                        "{ctx}: open succeeded with wrong data"
                    );
                }
                Err(e) => {
                    assert!(matches!(e, Error::Io { .. }), "{ctx}: {e:?}");
                    failed_opens += 1;
                }
            }
            h.set_enabled(false);
            let power_lost = mem.power_loss();
            check_reopen("", fs, &ops, (ops.len(), ops.len()), &ctx);
            check_reopen("", Arc::new(power_lost), &ops, (ops.len(), ops.len()), &ctx);
        }
    }
    eprintln!("open fault cases: {failed_opens} failed opens");
    assert!(failed_opens > 10);
}

#[test]
fn a_full_disk_stops_writes_and_space_coming_back_heals_after_reopen() {
    let ops = history(21, 900, 300, 0.2);
    for (i, start) in [1u64, 40, 200, 700, 1500].into_iter().enumerate() {
        let ctx = format!("ENOSPC from append #{start}");
        let mem = MemFs::new();
        let (fs, h) = faulty(&mem, i as u64);
        let db = Db::open(DIR, opts_on(fs.clone())).expect("open");
        h.fail_from(Op::Append, start, FaultError::NoSpace);
        let run = run_until_error(&db, &ops, true, &ctx);
        let Some(_) = run.failed_write else {
            panic!("{ctx}: no write failed on a full disk");
        };
        let e = db.put("x", "y").expect_err("full");
        let kind = match &e {
            Error::Poisoned(inner) => inner.io_kind(),
            other => other.io_kind(),
        };
        assert_eq!(kind, Some(std::io::ErrorKind::StorageFull), "{ctx}: {e:?}");
        drop(db);
        // Still full: opening fails cleanly (it must write a new manifest).
        match Db::open(DIR, opts_on(fs.clone())) {
            Ok(_) => panic!("{ctx}: open on a full disk succeeded"),
            Err(e) => assert_eq!(e.io_kind(), Some(std::io::ErrorKind::StorageFull)),
        }
        // Space is back.
        h.set_enabled(false);
        let max = run.failed_write.map_or(run.acked, |i| i + 1);
        check_reopen("", fs.clone(), &ops, (run.acked, max), &ctx);
        let db = Db::open(DIR, opts_on(fs)).expect("reopen");
        for op in &ops[..100] {
            op.write(&db).expect("write once space is back");
        }
        db.flush().expect("flush once space is back");
        db.compact_range::<&[u8], _>(..)
            .expect("compact once space is back");
    }
}

/// Every key read with `get` and a scan: a value, when returned, is right.
fn check_reads(db: &Db, expect: &Model, universe: &[Vec<u8>]) -> (usize, usize) {
    let (mut ok, mut errs) = (0, 0);
    for k in universe {
        match db.get(k) {
            Ok(v) => {
                assert_eq!(v.as_ref(), expect.get(k), "wrong value for {k:?}");
                ok += 1;
            }
            Err(e) => {
                assert!(
                    matches!(e, Error::Io { .. } | Error::Corruption { .. }),
                    "{e:?}"
                );
                errs += 1;
            }
        }
    }
    let mut it = expect.iter();
    match db.scan::<&[u8], _>(..) {
        Ok(scan) => {
            for entry in scan {
                match entry {
                    Ok((k, v)) => {
                        let want = it.next();
                        assert_eq!(Some((&k, &v)), want, "scan returned a wrong entry");
                    }
                    Err(e) => {
                        assert!(matches!(e, Error::Io { .. } | Error::Corruption { .. }));
                        errs += 1;
                        break;
                    }
                }
            }
        }
        Err(e) => assert!(matches!(e, Error::Io { .. } | Error::Corruption { .. })),
    }
    (ok, errs)
}

#[test]
fn read_errors_surface_on_that_read_and_never_as_a_wrong_value() {
    let ops = history(13, 800, 250, 0.0);
    let expect = model_after(&ops, ops.len());
    let universe: Vec<Vec<u8>> = (0..260u32)
        .map(|i| format!("key{i:05}").into_bytes())
        .collect();
    let mem = MemFs::new();
    let (fs, h) = faulty(&mem, 3);
    let opts = opts_on(fs).block_cache_size(0);
    let db = Db::open(DIR, opts.clone()).expect("open");
    for op in &ops {
        op.write(&db).expect("write");
    }
    db.compact_range::<&[u8], _>(..).expect("compact");
    drop(db);
    let db = Db::open(DIR, opts).expect("reopen");
    h.fail_randomly(Op::Read, 0.05, FaultError::Eio);
    let (ok, errs) = check_reads(&db, &expect, &universe);
    assert!(ok > 0 && errs > 0, "ok {ok} errors {errs}");
    // Reads work again once the device does.
    h.set_enabled(false);
    let (_, errs) = check_reads(&db, &expect, &universe);
    assert_eq!(errs, 0);
}

#[test]
fn damaged_table_blocks_are_corruption_and_never_a_wrong_value() {
    let ops = history(17, 600, 200, 0.0);
    let expect = model_after(&ops, ops.len());
    let universe: Vec<Vec<u8>> = (0..210u32)
        .map(|i| format!("key{i:05}").into_bytes())
        .collect();
    let base = MemFs::new();
    let opts = tiny_options().block_cache_size(0);
    let db = Db::open(DIR, opts.clone().fs(Arc::new(base.clone()))).expect("open");
    for op in &ops {
        op.write(&db).expect("write");
    }
    db.compact_range::<&[u8], _>(..).expect("compact");
    drop(db);
    let tables: Vec<String> = base
        .list_dir(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".table"))
        .collect();
    let mut rng = StdRng::seed_from_u64(17);
    let mut corrupt_reads = 0;
    for trial in 0..40 {
        let fs = base.crash_clone(CrashKind::Process);
        let name = &tables[rng.gen_range(0..tables.len())];
        let path = Path::new(DIR).join(name);
        let len = fs.read_file(&path).expect("read").len();
        // Damage the data area (the footer/index are checked at open).
        let at = rng.gen_range(0..len * 2 / 3);
        fs.corrupt(&path, at, |b| b ^ (1 << (trial % 8)))
            .expect("corrupt");
        match Db::open(DIR, opts.clone().fs(Arc::new(fs))) {
            Ok(db) => corrupt_reads += check_reads(&db, &expect, &universe).1,
            Err(e) => assert!(e.is_corruption(), "open: {e:?}"),
        }
    }
    assert!(corrupt_reads > 0);
}

/// Logs that cannot be created: the background thread's attempt to make
/// the next log ahead fails (counted, if it came before the switch), and
/// the switch's own attempt fails too and poisons writes; everything
/// acknowledged before survives a healthy reopen.
#[test]
fn a_log_that_cannot_be_made_ahead_or_at_the_switch_poisons_writes() {
    let mem = MemFs::new();
    let (fs, h) = faulty(&mem, 3);
    let db = Db::open(DIR, opts_on(fs.clone())).expect("open");
    // From now on no WAL can be created (a spare may already be ready:
    // the switch that takes it succeeds, the next one fails).
    h.add(
        strata::io::fault::Rule::new(
            Op::Create,
            strata::io::fault::Trigger::From(h.calls(Op::Create) + 1),
            FaultError::NoSpace,
        )
        .on_paths(".wal"),
    );
    let mut acked = Model::new();
    let mut failed = None;
    for i in 0..20_000u32 {
        let (k, v) = (format!("k{:05}", i % 2000), format!("v{i}"));
        match db.put(&k, &v) {
            Ok(()) => {
                acked.insert(k.into_bytes(), v.into_bytes());
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let e = failed.expect("a write failed once no log could be made");
    assert!(is_typed_write_error(&e), "{e:?}");
    assert!(matches!(db.put("after", "x"), Err(Error::Poisoned(_))));
    drop(db);
    h.set_enabled(false);
    let db = Db::open(DIR, opts_on(fs)).expect("healthy reopen");
    assert_eq!(state(&db), acked, "every acknowledged write survives");
}
