//! The table cache under a descriptor limit: thousands of small tables,
//! `max_open_files = 64`, in a child process whose `RLIMIT_NOFILE` is 256.
//!
//! Before the table cache every live table kept its file open (with
//! `mmap_reads = false`) or mapped (with it) from the moment it joined a
//! version: past ~250 tables a flush or compaction failed with `EMFILE`
//! ("Too many open files"), the database was poisoned, and reopening it
//! failed the same way; mapped, the maps grew with the database.
//!
//! Each scenario runs in a child (this test binary re-run with one ignored
//! test selected and `STRATA_TC_*` set) so the lowered limit never reaches
//! the other tests.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use strata::io::fault::{Op, Rule, Trigger};
use strata::io::{FaultError, FaultFs, MemFs};
use strata::{Db, Error, Options, ReadOptions};

const ENV_MODE: &str = "STRATA_TC_MODE";
const ENV_MAX_OPEN: &str = "STRATA_TC_MAX_OPEN_FILES";
/// The descriptor limit of the child.
const NOFILE: u64 = 256;
/// The child's `max_open_files`.
const MAX_OPEN: i32 = 64;
/// Tables the child's database must reach.
const MIN_TABLES: usize = 2000;

/// Runs the child scenario `mode` ("pread", "mmap" or "mmap-random") with `max_open_files`;
/// returns (success, stdout, stderr).
fn run_child(mode: &str, max_open_files: i32) -> (bool, String, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args(["--exact", "table_cache_child", "--ignored", "--nocapture"])
        .env(ENV_MODE, mode)
        .env(ENV_MAX_OPEN, max_open_files.to_string())
        .output()
        .expect("run child");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn expect_child_ok(mode: &str) {
    let (ok, stdout, stderr) = run_child(mode, MAX_OPEN);
    assert!(
        ok && stdout.contains("table cache child ok"),
        "child ({mode}) failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    print!("{stdout}");
}

#[test]
fn thousands_of_tables_under_256_descriptors_pread() {
    expect_child_ok("pread");
}

#[test]
fn thousands_of_tables_under_256_descriptors_mmap() {
    expect_child_ok("mmap");
}

/// Maps advised `MADV_RANDOM`, scans prefetching ahead themselves.
#[test]
fn thousands_of_tables_under_256_descriptors_mmap_random() {
    expect_child_ok("mmap-random");
}

/// The same scenario with no limit (`max_open_files = -1`, the old
/// behaviour of keeping every table open) runs out of descriptors.
#[test]
fn without_a_limit_the_same_load_runs_out_of_descriptors() {
    let (ok, stdout, stderr) = run_child("pread", -1);
    assert!(!ok, "expected a failure\n{stdout}\n{stderr}");
    assert!(
        stderr.contains("Too many open files"),
        "expected EMFILE\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

/// Lowers this process's descriptor limit (soft and hard).
fn limit_descriptors(n: u64) {
    let lim = libc::rlimit {
        rlim_cur: n as libc::rlim_t,
        rlim_max: n as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we pass and changes only limits.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// Table files of `dir` this process has open, by descriptor and by map.
fn table_handles(dir: &Path) -> (usize, usize) {
    let dir = dir.to_string_lossy().into_owned();
    let is_table = |s: &str| s.starts_with(&dir) && s.contains(".table");
    let fds = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| is_table(&p.to_string_lossy()))
        .count();
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let mut mapped: Vec<&str> = maps
        .lines()
        .filter_map(|l| l.find(&dir).and_then(|i| l.get(i..)))
        .filter(|p| is_table(p))
        .collect();
    mapped.sort_unstable();
    mapped.dedup();
    (fds, mapped.len())
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-{round}-").into_bytes();
    v.resize(100, b'a' + (i % 26) as u8);
    v
}

fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        match db.get(k) {
            Ok(Some(got)) => assert_eq!(&got, v, "value of {k:?}"),
            other => panic!("get {k:?}: {other:?}"),
        }
    }
    let forward: Vec<_> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .collect::<Result<_, Error>>()
        .expect("scan entries");
    assert!(forward.iter().map(|(k, v)| (k, v)).eq(model.iter()));
    let backward: Vec<_> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .rev()
        .collect::<Result<_, Error>>()
        .expect("reverse scan entries");
    assert!(backward.iter().map(|(k, v)| (k, v)).eq(model.iter().rev()));
}

/// The scenario: load 65,536 keys into thousands of 4 KiB tables, read
/// everything (with lookups churning the cache under an open iterator),
/// reopen, read again. Exits non-zero on any error.
#[test]
#[ignore = "run by the tests above in a child process"]
fn table_cache_child() {
    let Ok(mode) = std::env::var(ENV_MODE) else {
        return;
    };
    let max_open: i32 = std::env::var(ENV_MAX_OPEN)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_OPEN);
    limit_descriptors(NOFILE);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let opts = Options::default()
        .write_buffer_size(64 << 10)
        .target_file_size(4 << 10)
        .max_bytes_for_level_base(256 << 10)
        .block_size(1024)
        .mmap_reads(mode != "pread")
        .mmap_random(mode == "mmap-random")
        .max_open_files(max_open);
    let capacity = opts.table_cache_capacity();
    let db = common::open(&dir, opts.clone());
    let mut model = BTreeMap::new();
    // A fixed permutation of the keys (multiplying by a unit mod 2^k), so
    // every flush overlaps the tables below it.
    let n: u64 = 1 << 16;
    for j in 0..n {
        let i = (j * 40_503) % n;
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    for j in 0..n / 8 {
        let i = (j * 7 + 3) % n;
        db.put(key(i), value(i, 1)).expect("overwrite");
        model.insert(key(i), value(i, 1));
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait for compactions");
    let stats = db.stats();
    let tables: usize = stats.levels.iter().map(|l| l.files).sum();
    println!(
        "{mode}: {tables} tables, {} open, {} misses, {} evictions",
        stats.open_tables, stats.table_cache_misses, stats.table_cache_evictions
    );
    assert!(tables >= MIN_TABLES, "only {tables} tables");
    if let Some(cap) = capacity {
        assert!(stats.open_tables <= cap && cap < MAX_OPEN as usize);
        assert!(stats.table_cache_evictions > 0);
    }

    check_all(&db, &model);

    // Point lookups that churn the cache while an iterator holds its
    // current table: the iterator keeps reading its (evicted) table.
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    for (seen, (k, v)) in (0u64..).zip(&model) {
        assert!(it.valid(), "iterator ended early: {:?}", it.status());
        assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
        if seen.is_multiple_of(64) {
            let i = (seen * 977) % n;
            assert_eq!(db.get(key(i)).expect("get"), model.get(&key(i)).cloned());
        }
        it.next();
    }
    assert!(!it.valid());
    it.status().expect("iterator status");
    drop(it);

    let stats = db.stats();
    let (fds, maps) = table_handles(&dir);
    println!(
        "{mode}: {} open tables, {fds} table descriptors, {maps} table maps, {:.2} MiB mapped, {:.2} MiB pinned",
        stats.open_tables,
        stats.mapped_table_bytes as f64 / 1048576.0,
        stats.pinned_index_filter_bytes as f64 / 1048576.0
    );
    if let Some(cap) = capacity {
        assert!(stats.open_tables <= cap);
        assert!(fds <= cap && maps <= cap, "{fds} fds, {maps} maps");
        if mode != "pread" {
            assert_eq!(maps, stats.open_tables);
            assert!(stats.mapped_table_bytes > 0);
        } else {
            assert_eq!(fds, stats.open_tables);
            assert_eq!(stats.mapped_table_bytes, 0);
        }
    }

    db.close().expect("close");
    drop(db);
    let db = common::open(&dir, opts);
    let stats = db.stats();
    if let Some(cap) = capacity {
        assert!(stats.open_tables <= cap, "after reopen");
    }
    check_all(&db, &model);
    db.close().expect("close after reopen");
    println!("table cache child ok");
}

/// Tables the cache evicted are opened again on the next read; when that
/// fails, `get` returns the error and iterators stop on it (invalid,
/// `status()` = `Err`): never an older version, a deleted key, or a gap.
/// Once opening works again, so do reads (failures are not cached).
#[test]
fn a_table_that_cannot_be_reopened_is_an_error_never_a_gap() {
    const KEYS: u64 = 3000;
    for all_in_l0 in [true, false] {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()), 1);
        let handle = fault.handle();
        let mut opts = Options::default()
            .fs(Arc::new(fault))
            .write_buffer_size(4 << 10)
            .target_file_size(4 << 10)
            .block_size(256)
            .block_cache_size(0)
            .max_open_files(20);
        if all_in_l0 {
            opts = opts
                .level0_file_num_compaction_trigger(1000)
                .level0_slowdown_writes_trigger(1000)
                .level0_stop_writes_trigger(1000);
        }
        let cap = opts.table_cache_capacity().expect("a limit");
        let db = Db::open("/db", opts.clone()).expect("open");
        let mut model = BTreeMap::new();
        for i in 0..KEYS {
            db.put(key(i), value(i, 0)).expect("put");
            model.insert(key(i), value(i, 0));
        }
        for i in 0..KEYS {
            match i % 3 {
                0 => {
                    db.put(key(i), value(i, 1)).expect("put");
                    model.insert(key(i), value(i, 1));
                }
                1 => {
                    db.delete(key(i)).expect("delete");
                    model.remove(&key(i));
                }
                _ => {}
            }
        }
        db.flush().expect("flush");
        if !all_in_l0 {
            db.compact_range::<&[u8], _>(..).expect("compact");
        }
        db.close().expect("close");
        drop(db);

        let db = Db::open("/db", opts).expect("reopen");
        let stats = db.stats();
        let tables: usize = stats.levels.iter().map(|l| l.files).sum();
        let l0 = stats.levels.first().map_or(0, |l| l.files);
        assert!(tables > 2 * cap, "{tables} tables");
        assert_eq!(l0 == tables, all_in_l0, "{l0} of {tables} tables in L0");
        assert!(stats.open_tables <= cap);
        handle.add(Rule::new(Op::Open, Trigger::From(1), FaultError::Eio).on_paths(".table"));
        let ctx = if all_in_l0 { "L0" } else { "L1+" };

        // Scans: a correct prefix, then the error, then the end.
        for reverse in [false, true] {
            let scan = db.scan::<&[u8], _>(..).expect("scan");
            let items: Vec<_> = if reverse {
                scan.rev().collect()
            } else {
                scan.collect()
            };
            let (ok, err): (Vec<_>, Vec<_>) = items.into_iter().partition(Result::is_ok);
            assert_eq!(err.len(), 1, "{ctx}: one error ends the scan");
            let ok: Vec<_> = ok.into_iter().filter_map(Result::ok).collect();
            let want: Vec<_> = if reverse {
                model.iter().rev().take(ok.len()).collect()
            } else {
                model.iter().take(ok.len()).collect()
            };
            assert!(
                ok.iter().map(|(k, v)| (k, v)).eq(want),
                "{ctx}: entries before the error are exactly the model's first ones"
            );
        }

        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek_to_first();
        while it.valid() {
            it.next();
        }
        assert!(it.status().is_err(), "{ctx}: the iterator holds the error");

        // Point lookups: the right answer or the error, never a wrong one.
        let mut errors = 0;
        for i in 0..KEYS {
            match db.get(key(i)) {
                Ok(v) => assert_eq!(v.as_ref(), model.get(&key(i)), "{ctx}: key {i}"),
                Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::EIO) => {
                    errors += 1
                }
                Err(e) => panic!("{ctx}: key {i}: {e}"),
            }
        }
        assert!(errors > 0, "{ctx}: some lookups needed a closed table");

        handle.clear();
        check_all(&db, &model);
        assert!(db.stats().open_tables <= cap);
        db.close().expect("close");
    }
}
