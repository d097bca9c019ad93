//! `strata demo`: the end-to-end run on a fresh database. Loads random keys,
//! reads every one back, deletes 10 %, scans both ways, flushes, compacts,
//! reopens and verifies the files, checking every answer and timing each
//! phase. Exit code 1 on any mismatch.

use crate::workload::{self, key_for, key_number, value_for, LoadSpec, Order, PROGRESS_STEP};
use crate::{Cli, CliError};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use strata::{filename, KvStore, Options};

const KEY_SIZE: usize = 16;
const VALUE_SIZE: usize = 100;
/// Directory used when `--dir` is not given.
pub const DEFAULT_DIR: &str = "./strata-demo-db";
/// Mismatches printed in full before the rest are only counted.
const SHOW_MISMATCHES: u64 = 10;

/// Options that make a demo-sized data set flush and compact through a few
/// levels; `--opt` applies on top.
fn demo_options() -> Options {
    Options::default()
        .write_buffer_size(4 << 20)
        .target_file_size(4 << 20)
        .max_bytes_for_level_base(16 << 20)
}

/// Counts and prints mismatches.
#[derive(Default)]
struct Checker {
    mismatches: u64,
}

impl Checker {
    fn fail(&mut self, what: String) {
        self.mismatches += 1;
        if self.mismatches <= SHOW_MISMATCHES {
            eprintln!("MISMATCH: {what}");
        }
    }

    fn expect_eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.fail(format!("{what}: got {got:?}, expected {want:?}"));
        }
    }
}

fn phase(name: &str, ops: u64, elapsed: Duration) {
    println!("{name:<8} {}", workload::rate(ops, elapsed));
}

fn is_deleted(i: u64) -> bool {
    i.is_multiple_of(10)
}

pub fn run(cli: &Cli, count: u64, seed: u64) -> Result<ExitCode, CliError> {
    let dir = cli.dir.as_deref().unwrap_or(Path::new(DEFAULT_DIR));
    let opts = cli.options(demo_options())?.create_if_missing(true);
    let spec = LoadSpec {
        count,
        key_size: KEY_SIZE,
        value_size: VALUE_SIZE,
        order: Order::Random,
        seed,
        sync: false,
    };
    spec.validate()?;
    reset_dir(dir)?;
    println!(
        "strata demo: {count} keys ({KEY_SIZE} B keys, {VALUE_SIZE} B values) in {}",
        dir.display()
    );
    let mut check = Checker::default();
    let db = strata::open(dir, opts.clone())?;

    // Load.
    let elapsed = workload::load(db.as_ref(), &spec)?;
    phase("load", count, elapsed);

    // Read every key back, in another random order.
    let order = workload::key_order(count, Order::Random, seed.wrapping_add(1));
    let pb = workload::progress(count, "read");
    let start = Instant::now();
    for (n, &i) in order.iter().enumerate() {
        let got = db.get(&key_for(i, KEY_SIZE))?;
        if got.as_deref() != Some(value_for(seed, i, VALUE_SIZE).as_slice()) {
            check.fail(format!("get key {i}: got {}", describe(got.as_deref())));
        }
        if (n as u64 + 1).is_multiple_of(PROGRESS_STEP) {
            pb.inc(PROGRESS_STEP);
        }
    }
    pb.finish_and_clear();
    phase("read", count, start.elapsed());

    // Delete every tenth key.
    let start = Instant::now();
    let mut deleted = 0u64;
    for &i in order.iter().filter(|&&i| is_deleted(i)) {
        db.delete(&key_for(i, KEY_SIZE))?;
        deleted += 1;
    }
    phase("delete", deleted, start.elapsed());
    let live = count - deleted;

    // Scan forwards, checking every entry, then backwards.
    let start = Instant::now();
    let seen = scan_check(db.as_ref(), false, seed, &mut check)?;
    check.expect_eq("forward scan entries", seen, live);
    phase("scan", seen, start.elapsed());
    let start = Instant::now();
    let seen = scan_check(db.as_ref(), true, seed, &mut check)?;
    check.expect_eq("reverse scan entries", seen, live);
    phase("rscan", seen, start.elapsed());

    // Flush and compact.
    let start = Instant::now();
    db.flush()?;
    println!("flush    {:.3} s", start.elapsed().as_secs_f64());
    let start = Instant::now();
    db.compact()?;
    println!("compact  {:.3} s", start.elapsed().as_secs_f64());
    let stats = db.stats();
    db.close()?;
    drop(db);

    // Reopen and check again.
    let start = Instant::now();
    let db = strata::open(dir, opts.clone().create_if_missing(false))?;
    println!("reopen   {:.3} s", start.elapsed().as_secs_f64());
    let start = Instant::now();
    let seen = scan_check(db.as_ref(), false, seed, &mut check)?;
    check.expect_eq("scan entries after reopen", seen, live);
    phase("scan", seen, start.elapsed());
    for i in (0..count).step_by((count / 1000).max(1) as usize) {
        let want = (!is_deleted(i)).then(|| value_for(seed, i, VALUE_SIZE));
        check.expect_eq(
            &format!("get key {i} after reopen"),
            db.get(&key_for(i, KEY_SIZE))?,
            want,
        );
    }
    db.close()?;
    drop(db);

    // Verify every file.
    let start = Instant::now();
    let report = strata::verify::verify_dir(dir, &opts)?;
    println!("verify   {:.3} s", start.elapsed().as_secs_f64());
    println!("\n{report}");
    if !report.is_ok() {
        check.fail("verify found damaged files".to_string());
    }

    println!("\n{stats}\n");
    if check.mismatches == 0 {
        println!(
            "demo passed: {count} keys written, {deleted} deleted, {live} checked after reopen"
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("demo FAILED: {} mismatches", check.mismatches);
        Ok(ExitCode::from(1))
    }
}

/// Scans the whole database, checking that each entry is a live key with
/// its value and that keys strictly increase (decrease when `reverse`).
/// Returns the number of entries.
fn scan_check(
    db: &dyn KvStore,
    reverse: bool,
    seed: u64,
    check: &mut Checker,
) -> Result<u64, CliError> {
    let mut cursor = db.cursor(None)?;
    if reverse {
        cursor.seek_to_last();
    } else {
        cursor.seek_to_first();
    }
    let mut n = 0u64;
    let mut prev: Option<u64> = None;
    while cursor.valid() {
        let (k, v) = (cursor.key().to_vec(), cursor.value().to_vec());
        if reverse {
            cursor.prev();
        } else {
            cursor.next();
        }
        n += 1;
        let Some(i) = key_number(&k) else {
            check.fail(format!(
                "scan returned a foreign key {}",
                describe(Some(&k))
            ));
            continue;
        };
        if is_deleted(i) {
            check.fail(format!("scan returned deleted key {i}"));
        } else if v != value_for(seed, i, VALUE_SIZE) {
            check.fail(format!("scan: key {i} has value {}", describe(Some(&v))));
        }
        if let Some(p) = prev {
            if (reverse && i >= p) || (!reverse && i <= p) {
                check.fail(format!("scan order: key {i} after key {p}"));
            }
        }
        prev = Some(i);
    }
    cursor.status()?;
    Ok(n)
}

fn describe(v: Option<&[u8]>) -> String {
    match v {
        None => "nothing".to_string(),
        Some(v) if v.len() > 40 => {
            format!("{:?}...", String::from_utf8_lossy(v.get(..40).unwrap_or(v)))
        }
        Some(v) => format!("{:?}", String::from_utf8_lossy(v)),
    }
}

/// Removes `dir` if it holds a strata database (or nothing); refuses to
/// remove a directory with other files in it.
fn reset_dir(dir: &Path) -> Result<(), CliError> {
    let io = |e: std::io::Error| CliError::Db(strata::Error::io(dir, e));
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "{} exists and is not a directory",
            dir.display()
        )));
    }
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let name = entry.map_err(io)?.file_name();
        let ours = name.to_str().and_then(filename::parse).is_some();
        if !ours {
            return Err(CliError::Usage(format!(
                "refusing to remove {}: it holds {:?}, which is not a strata file",
                dir.display(),
                name
            )));
        }
    }
    std::fs::remove_dir_all(dir).map_err(io)?;
    Ok(())
}
