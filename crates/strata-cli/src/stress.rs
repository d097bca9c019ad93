//! `strata stress`: a randomized multi-threaded workload that checks every
//! read against an *expected state* kept on disk beside the database, and
//! `--crash` mode, which runs it as a child process that is SIGKILLed at
//! random moments and verifies the database after every reopen.
//!
//! The expected state (`<dir>.expected`) holds, for each key of a fixed key
//! space, two `u32`s: the *committed* state (the last acknowledged write)
//! and a *pending* state (a write in flight, 0 when none). A state is
//! `version << 1 | is_put`; the value of a put is derived from the key and
//! version, so a read can be checked exactly. A writer locks its keys, marks
//! them pending, writes, and on the acknowledgement commits them. The
//! markers are written with `pwrite`, so they survive a SIGKILL of the
//! process. After a crash a key must read as its committed state or, if a
//! write was pending, as the pending state; the check then adopts what it
//! found. Anything else is a failure.
//!
//! In `--crash` mode the kill timer starts when the child says `opened` (its
//! open replays and verifies the previous rounds' data first), and the kill
//! comes once the expected state shows an acknowledged write of this round
//! and, if it can, a write in flight. A round that acknowledged no write
//! fails; the counts of acknowledged and in-flight writes are printed per
//! round.

use crate::{Cli, CliError};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use strata::{KvStore, Options, StoreSnapshot, WriteBatch, WriteOptions};

const MAGIC: &[u8; 8] = b"STRSTRS1";
const HEADER: u64 = 16;
const STRIPES: usize = 1024;

/// Arguments of `strata stress`.
#[derive(clap::Args, Debug, Clone)]
pub struct StressArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Size of the key space.
    #[arg(long, default_value_t = 5000)]
    pub keys: u32,
    /// Seconds to run (per round with --crash: the child is killed sooner).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Seed (0: random).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run as a child that is SIGKILLed at random moments, `--rounds` times.
    #[arg(long)]
    pub crash: bool,
    /// Crash rounds.
    #[arg(long, default_value_t = 10)]
    pub rounds: u64,
    /// Longest time a child runs before the kill (ms); each kill comes at a
    /// random moment in 50..=max.
    #[arg(long, default_value_t = 1500)]
    pub max_kill_ms: u64,
    /// Internal: this process is a crash-mode child.
    #[arg(long, hide = true)]
    pub child: bool,
}

/// Small sizes so flushes and compactions run all the time (`--opt` overrides).
fn stress_options() -> Options {
    Options::default()
        .write_buffer_size(64 * 1024)
        .target_file_size(64 * 1024)
        .max_bytes_for_level_base(256 * 1024)
        .max_bytes_for_level_multiplier(4)
        .level0_file_num_compaction_trigger(2)
        .block_size(1024)
        .block_cache_size(256 * 1024)
}

fn fail(msg: impl Into<String>) -> CliError {
    CliError::Usage(format!("stress: {}", msg.into()))
}

fn io_err(path: &Path, e: std::io::Error) -> CliError {
    CliError::Db(strata::Error::io(path, e))
}

/// The expected state file and its in-memory copy.
struct Expected {
    file: File,
    path: PathBuf,
    committed: Vec<AtomicU32>,
    pending: Vec<AtomicU32>,
    stripes: Vec<Mutex<()>>,
}

impl Expected {
    fn open(path: &Path, keys: u32, fresh: bool) -> Result<Expected, CliError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(fresh)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let n = keys as usize;
        let mut committed = Vec::with_capacity(n);
        let mut pending = Vec::with_capacity(n);
        if fresh {
            let mut h = MAGIC.to_vec();
            h.extend_from_slice(&keys.to_le_bytes());
            h.extend_from_slice(&[0u8; 4]);
            h.resize(HEADER as usize + n * 8, 0);
            file.write_all_at(&h, 0).map_err(|e| io_err(path, e))?;
            committed.resize_with(n, || AtomicU32::new(0));
            pending.resize_with(n, || AtomicU32::new(0));
        } else {
            let mut buf = vec![0u8; HEADER as usize + n * 8];
            file.read_exact_at(&mut buf, 0)
                .map_err(|e| io_err(path, e))?;
            if buf.get(..8) != Some(&MAGIC[..]) || buf.get(8..12) != Some(&keys.to_le_bytes()[..]) {
                return Err(fail(format!(
                    "{} is not an expected-state file for {keys} keys",
                    path.display()
                )));
            }
            for (c, p) in decode_states(buf.get(HEADER as usize..).unwrap_or(&[])) {
                committed.push(AtomicU32::new(c));
                pending.push(AtomicU32::new(p));
            }
        }
        Ok(Expected {
            file,
            path: path.to_path_buf(),
            committed,
            pending,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        })
    }

    fn committed(&self, k: u32) -> u32 {
        self.committed[k as usize].load(Ordering::Acquire)
    }

    fn pending(&self, k: u32) -> u32 {
        self.pending[k as usize].load(Ordering::Acquire)
    }

    fn store(&self, k: u32, committed: u32, pending: u32) -> Result<(), CliError> {
        self.committed[k as usize].store(committed, Ordering::Release);
        self.pending[k as usize].store(pending, Ordering::Release);
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&committed.to_le_bytes());
        b[4..].copy_from_slice(&pending.to_le_bytes());
        self.file
            .write_all_at(&b, HEADER + u64::from(k) * 8)
            .map_err(|e| io_err(&self.path, e))
    }

    /// Locks the stripes of `keys` (in stripe order: no deadlock).
    fn lock(&self, keys: impl IntoIterator<Item = u32>) -> Vec<MutexGuard<'_, ()>> {
        let mut s: Vec<usize> = keys.into_iter().map(|k| k as usize % STRIPES).collect();
        s.sort_unstable();
        s.dedup();
        s.into_iter()
            .map(|i| self.stripes[i].lock().unwrap_or_else(|p| p.into_inner()))
            .collect()
    }
}

fn key(k: u32) -> Vec<u8> {
    format!("k{k:08}").into_bytes()
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The value a state stands for (`None`: absent).
fn value(k: u32, state: u32) -> Option<Vec<u8>> {
    if state & 1 == 0 {
        return None;
    }
    let h = mix(u64::from(k) << 32 | u64::from(state));
    let len = if h.is_multiple_of(50) {
        500 + h % 1500
    } else {
        h % 100
    } as usize;
    let mut v = format!("{k}:{}:", state >> 1).into_bytes();
    v.extend((0..len).map(|i| b'a' + ((h as usize + i) % 26) as u8));
    Some(v)
}

fn next_state(cur: u32, put: bool) -> u32 {
    let ver = (cur >> 1).wrapping_add(1).max(1);
    ver << 1 | u32::from(put)
}

fn show(v: &Option<Vec<u8>>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => {
            let s = String::from_utf8_lossy(v);
            s.chars().take(24).collect()
        }
    }
}

#[derive(Default)]
struct Counters {
    puts: AtomicU64,
    deletes: AtomicU64,
    batches: AtomicU64,
    gets: AtomicU64,
    scans: AtomicU64,
    snapshots: AtomicU64,
    flushes: AtomicU64,
}

fn add(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// One worker: random operations until `deadline` or `stop`.
fn worker(
    db: &dyn KvStore,
    exp: &Expected,
    seed: u64,
    deadline: Instant,
    stop: &AtomicBool,
    c: &Counters,
) -> Result<(), CliError> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let n = exp.committed.len() as u32;
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        let r = rng.gen_range(0..100);
        match r {
            0..=64 => {
                // put / delete / batch
                let count = if r >= 55 { rng.gen_range(2..7) } else { 1 };
                let mut ks: Vec<u32> = (0..count).map(|_| rng.gen_range(0..n)).collect();
                ks.sort_unstable();
                ks.dedup();
                let _g = exp.lock(ks.iter().copied());
                let mut batch = WriteBatch::new();
                let mut new = Vec::with_capacity(ks.len());
                for &k in &ks {
                    let put = rng.gen_bool(0.8);
                    let s = next_state(exp.committed(k), put);
                    exp.store(k, exp.committed(k), s)?;
                    match value(k, s) {
                        Some(v) => batch.put(key(k), v),
                        None => batch.delete(key(k)),
                    }
                    new.push((k, s));
                }
                let sync = rng.gen_bool(0.1);
                db.write(batch, &WriteOptions { sync })?;
                for (k, s) in new {
                    exp.store(k, s, 0)?;
                }
                add(match (count, r) {
                    (1, 0..=45) => &c.puts,
                    (1, _) => &c.deletes,
                    _ => &c.batches,
                });
            }
            65..=84 => {
                let k = rng.gen_range(0..n);
                let _g = exp.lock([k]);
                let got = db.get(&key(k))?;
                let want = value(k, exp.committed(k));
                if got != want {
                    return Err(fail(format!(
                        "get k{k:08}: got {}, expected {}",
                        show(&got),
                        show(&want)
                    )));
                }
                add(&c.gets);
            }
            85..=93 => {
                let start = rng.gen_range(0..n);
                let end = (start + rng.gen_range(1..40)).min(n);
                let _g = exp.lock(start..end);
                let want: Vec<(u32, u32)> = (start..end).map(|k| (k, exp.committed(k))).collect();
                check_range(db, None, start, end, &want, "scan")?;
                add(&c.scans);
            }
            // Engines without snapshots (KVell) skip this.
            94..=98 if db.semantics().snapshots => {
                let start = rng.gen_range(0..n);
                let end = (start + rng.gen_range(1..40)).min(n);
                let (snap, want) = {
                    let _g = exp.lock(start..end);
                    let want: Vec<(u32, u32)> =
                        (start..end).map(|k| (k, exp.committed(k))).collect();
                    (db.snapshot()?, want)
                };
                // Let other writers move on before reading the snapshot.
                std::thread::sleep(Duration::from_micros(rng.gen_range(0..2000)));
                check_range(db, Some(&snap), start, end, &want, "snapshot scan")?;
                let k = rng.gen_range(start..end);
                let got = db.get_at(&key(k), Some(&snap))?;
                let (_, s) = want[(k - start) as usize];
                if got != value(k, s) {
                    return Err(fail(format!("snapshot get k{k:08}: got {}", show(&got))));
                }
                add(&c.snapshots);
            }
            _ => {
                if rng.gen_bool(0.05) {
                    db.flush()?;
                    add(&c.flushes);
                }
            }
        }
    }
    Ok(())
}

/// Checks a scan of `[start, end)` against the expected states `want`.
fn check_range(
    db: &dyn KvStore,
    snap: Option<&StoreSnapshot>,
    start: u32,
    end: u32,
    want: &[(u32, u32)],
    what: &str,
) -> Result<(), CliError> {
    let mut expected = want
        .iter()
        .filter_map(|&(k, s)| value(k, s).map(|v| (key(k), v)));
    let mut cursor = db.cursor(snap)?;
    let end_key = key(end);
    cursor.seek(&key(start));
    while cursor.valid() && cursor.key() < end_key.as_slice() {
        let (k, v) = (cursor.key().to_vec(), cursor.value().to_vec());
        cursor.next();
        match expected.next() {
            Some((ek, ev)) if ek == k && ev == v => {}
            other => {
                return Err(fail(format!(
                    "{what} [{start}, {end}): got {} = {}, expected {:?}",
                    String::from_utf8_lossy(&k),
                    show(&Some(v)),
                    other.map(|(k, _)| String::from_utf8_lossy(&k).into_owned())
                )))
            }
        }
    }
    cursor.status()?;
    if let Some((k, _)) = expected.next() {
        return Err(fail(format!(
            "{what} [{start}, {end}): missing {}",
            String::from_utf8_lossy(&k)
        )));
    }
    Ok(())
}

/// What a verification after reopen found.
#[derive(Default, Debug)]
struct Reconciled {
    keys: u64,
    pending_present: u64,
    pending_absent: u64,
}

/// Checks every key after a reopen: its committed state, or its pending
/// state if a write was in flight; adopts what it found.
fn verify_all(db: &dyn KvStore, exp: &Expected) -> Result<Reconciled, CliError> {
    let mut r = Reconciled::default();
    let n = exp.committed.len() as u32;
    for k in 0..n {
        let got = db.get(&key(k))?;
        let (c, p) = (exp.committed(k), exp.pending(k));
        if got == value(k, c) {
            if p != 0 {
                // A pending put of the same value as committed cannot
                // happen (versions grow), so this write was lost.
                exp.store(k, c, 0)?;
                r.pending_absent += 1;
            }
        } else if p != 0 && got == value(k, p) {
            exp.store(k, p, 0)?;
            r.pending_present += 1;
        } else {
            return Err(fail(format!(
                "after reopen k{k:08} is {}, expected {}{}",
                show(&got),
                show(&value(k, c)),
                if p != 0 {
                    format!(" or (pending) {}", show(&value(k, p)))
                } else {
                    String::new()
                }
            )));
        }
        r.keys += 1;
    }
    // Nothing outside the key space, and the scan agrees with the gets.
    let want: Vec<(u32, u32)> = (0..n).map(|k| (k, exp.committed(k))).collect();
    check_range(db, None, 0, n, &want, "full scan")?;
    let mut cursor = db.cursor(None)?;
    cursor.seek(&key(n));
    cursor.status()?;
    if cursor.valid() {
        let k = cursor.key();
        return Err(fail(format!(
            "unexpected key {}",
            String::from_utf8_lossy(k)
        )));
    }
    Ok(r)
}

fn expected_path(dir: &Path) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(".expected");
    PathBuf::from(s)
}

/// Opens the database and the expected state, verifying after a reopen.
fn open(
    cli: &Cli,
    dir: &Path,
    args: &StressArgs,
) -> Result<(Box<dyn KvStore>, Expected, Reconciled), CliError> {
    let fresh = !dir.join("CURRENT").exists() && !dir.join("KVELL").exists();
    let exp = Expected::open(&expected_path(dir), args.keys, fresh)?;
    let db = strata::open(dir, cli.options(stress_options())?)?;
    let r = verify_all(db.as_ref(), &exp)?;
    Ok((db, exp, r))
}

/// Runs the workload for `seconds` (one process).
fn run_workload(cli: &Cli, dir: &Path, args: &StressArgs, seed: u64) -> Result<(), CliError> {
    let (db, exp, r) = open(cli, dir, args)?;
    if args.child {
        // The parent starts its kill timer now.
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "opened")
            .and_then(|()| out.flush())
            .map_err(|e| io_err(dir, e))?;
    } else {
        println!("opened and verified {} keys", r.keys);
    }
    let c = Counters::default();
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let started = Instant::now();
    let result: Result<(), CliError> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.threads.max(1))
            .map(|t| {
                let (db, exp, c, stop) = (db.as_ref(), &exp, &c, &stop);
                s.spawn(move || {
                    let r = worker(db, exp, mix(seed ^ t as u64), deadline, stop, c);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let mut first = Ok(());
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(fail("a worker thread panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    });
    result?;
    let r = verify_all(db.as_ref(), &exp)?;
    db.close()?;
    if !args.child {
        let secs = started.elapsed().as_secs_f64();
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        println!(
            "stress: {:.1}s, {} threads: {} puts, {} deletes, {} batches, {} gets, {} scans, \
             {} snapshot checks, {} flushes; final check of {} keys passed",
            secs,
            args.threads,
            l(&c.puts),
            l(&c.deletes),
            l(&c.batches),
            l(&c.gets),
            l(&c.scans),
            l(&c.snapshots),
            l(&c.flushes),
            r.keys
        );
    }
    Ok(())
}

/// The (committed, pending) state of every key in the expected-state file,
/// or `None` while the file is missing or short (a child creating it).
fn read_states(path: &Path, keys: u32) -> Option<Vec<(u32, u32)>> {
    let buf = std::fs::read(path).ok()?;
    let body = buf.get(HEADER as usize..HEADER as usize + keys as usize * 8)?;
    Some(decode_states(body).collect())
}

/// The (committed, pending) pairs of an expected-state file's body: two
/// little-endian u32 per key.
fn decode_states(body: &[u8]) -> impl Iterator<Item = (u32, u32)> + '_ {
    body.chunks_exact(8).map(|c| {
        let word = |i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
        (word(0), word(4))
    })
}

/// What a round's child did before the kill, from the expected state:
/// keys whose committed state changed since `before` (acknowledged writes)
/// and keys with a write in flight.
fn round_counts(before: &[u32], now: &[(u32, u32)]) -> (u64, u64) {
    let acked = now.iter().zip(before).filter(|((c, _), b)| c != *b).count() as u64;
    let in_flight = now.iter().filter(|(_, p)| *p != 0).count() as u64;
    (acked, in_flight)
}

/// Crash mode: children killed at random moments, verification after each.
fn run_crash(cli: &Cli, dir: &Path, args: &StressArgs, seed: u64) -> Result<(), CliError> {
    use std::io::BufRead;
    // Bounds a hung child only; never reached by a working one.
    const LIVENESS: Duration = Duration::from_secs(120);
    let exe = std::env::current_exe().map_err(|e| io_err(Path::new("strata"), e))?;
    let exp_path = expected_path(dir);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut total = Reconciled::default();
    let (mut total_acked, mut total_in_flight) = (0u64, 0u64);
    let started = Instant::now();
    for round in 0..args.rounds {
        // Committed states before the round (all absent before the first).
        let before: Vec<u32> = read_states(&exp_path, args.keys)
            .map(|v| v.into_iter().map(|(c, _)| c).collect())
            .unwrap_or_else(|| vec![0; args.keys as usize]);
        let mut cmd = Command::new(&exe);
        cmd.arg("--dir").arg(dir);
        for o in &cli.opts {
            cmd.arg("--opt").arg(o);
        }
        cmd.args(["stress", "--child"])
            .args(["--threads", &args.threads.to_string()])
            .args(["--keys", &args.keys.to_string()])
            .args(["--seconds", "3600"])
            .args(["--seed", &mix(seed ^ round).to_string()])
            .stdout(std::process::Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| io_err(&exe, e))?;
        let stdout = child.stdout.take();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            let Some(out) = stdout else { return };
            for line in std::io::BufReader::new(out).lines() {
                let Ok(l) = line else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        // The timer starts when the child has opened (and verified).
        let t0 = Instant::now();
        let mut problem = None;
        loop {
            match rx.recv_timeout(LIVENESS.saturating_sub(t0.elapsed())) {
                Ok(l) if l == "opened" => break,
                Ok(_) => {}
                Err(e) => {
                    problem = Some(format!("the child never said it opened ({e:?})"));
                    break;
                }
            }
        }
        let wait = Duration::from_millis(rng.gen_range(50..=args.max_kill_ms.max(50)));
        let t = Instant::now();
        while problem.is_none() {
            if let Some(st) = child.try_wait().map_err(|e| io_err(&exe, e))? {
                problem = Some(format!("the child exited by itself: {st}"));
                break;
            }
            if t.elapsed() >= wait {
                // Kill once a write of this round is acknowledged, and
                // preferably while one is in flight.
                let (acked, in_flight) = read_states(&exp_path, args.keys)
                    .map_or((0, 0), |now| round_counts(&before, &now));
                let patience = t.elapsed() >= wait + Duration::from_secs(2);
                if acked > 0 && (in_flight > 0 || patience) {
                    break;
                }
                if t0.elapsed() >= LIVENESS {
                    problem = Some(format!(
                        "no write acknowledged ({acked}) by {:?}",
                        t0.elapsed()
                    ));
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let _ = reader.join();
        if let Some(p) = problem {
            return Err(fail(format!("round {round}: {p}")));
        }
        let (acked, in_flight) =
            read_states(&exp_path, args.keys).map_or((0, 0), |now| round_counts(&before, &now));
        if acked == 0 {
            return Err(fail(format!("round {round}: no write was acknowledged")));
        }
        let (db, _exp, r) = open(cli, dir, args)
            .map_err(|e| fail(format!("round {round}: verification after the kill: {e}")))?;
        db.close()?;
        if r.pending_present + r.pending_absent != in_flight {
            return Err(fail(format!(
                "round {round}: {in_flight} writes in flight, {} resolved",
                r.pending_present + r.pending_absent
            )));
        }
        println!(
            "round {round}: {acked} keys written and acknowledged, {in_flight} in flight \
             at the kill ({} found, {} lost)",
            r.pending_present, r.pending_absent
        );
        total_acked += acked;
        total_in_flight += in_flight;
        total.keys += r.keys;
        total.pending_present += r.pending_present;
        total.pending_absent += r.pending_absent;
    }
    println!(
        "stress --crash: {} rounds in {:.1}s passed: {} key checks after reopen; \
         {} acknowledged key writes; {} in-flight writes found present {} times, absent {} times",
        args.rounds,
        started.elapsed().as_secs_f64(),
        total.keys,
        total_acked,
        total_in_flight,
        total.pending_present,
        total.pending_absent
    );
    Ok(())
}

/// `strata stress`.
pub fn run(cli: &Cli, args: &StressArgs) -> Result<ExitCode, CliError> {
    let dir = cli.dir("stress")?.to_path_buf();
    if args.keys == 0 {
        return Err(fail("--keys must be at least 1"));
    }
    let seed = if args.seed == 0 {
        rand::random::<u64>() | 1
    } else {
        args.seed
    };
    if !args.child {
        println!("stress: seed {seed} (rerun with --seed {seed})");
        // The expected state lives beside the database: its parent must
        // exist before the first child opens (the engine creates only the
        // database directory itself).
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
        }
    }
    if args.crash {
        run_crash(cli, &dir, args, seed)?;
    } else {
        run_workload(cli, &dir, args, seed)?;
    }
    Ok(ExitCode::SUCCESS)
}
