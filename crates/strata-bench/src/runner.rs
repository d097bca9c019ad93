//! The parent: presets, one child process per engine × workload × repeat,
//! live progress, and the report.

use crate::child::{RunResult, RunSpec, PROGRESS_PREFIX, RESULT_PREFIX};
use crate::engine::{EngineKind, EngineSettings, COMPARATORS};
use crate::report::Report;
use crate::workload::{Params, Preload, Workload};
use crate::{report, BenchError};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Everything a benchmark run needs.
#[derive(Debug, Clone)]
pub struct Config {
    pub preset: String,
    pub engines: Vec<String>,
    pub workloads: Vec<String>,
    pub params: Params,
    pub settings: EngineSettings,
    pub out: PathBuf,
    pub repeats: usize,
    /// Drop the page cache of the database files after each load.
    pub cold: bool,
    /// Wait for background work after each load and each writing run.
    pub settle: bool,
    /// Keep every run's database under `OUT/data/` (engine logs, tables).
    pub keep_data: bool,
    /// Cap every child's memory (heap and page cache) with a cgroup.
    pub memory_limit: Option<u64>,
    /// Measure the device's 4 KiB random read/write ceilings first: on a
    /// file of this many MiB, each pattern for this many seconds.
    pub ceilings: Option<(u64, f64)>,
    /// Load each engine's database once per kind of load (db_bench keys,
    /// YCSB records) and start every later run that needs that load from a
    /// copy of it (evicted from the page cache), instead of loading again:
    /// for data sets whose load takes minutes.
    pub reuse_loads: bool,
    /// Kill a run's process that has not finished (run, settle and close)
    /// after this many seconds; a run that also loads the data it keeps as
    /// an image gets four times as long. The run is reported as killed by
    /// the limit and the engine's later repeats of that row are not run.
    pub time_limit: Option<f64>,
}

/// The engines available in this build.
pub fn available_engines() -> Vec<String> {
    if COMPARATORS {
        names(&["strata", "rocksdb", "leveldb", "fjall"])
    } else {
        vec!["strata".into()]
    }
}

/// The engines of the headline presets: strata with the shared settings
/// and as shipped (`strata@own`, `Options::default()`), and each peer in
/// both views, so that "÷ best peer" takes each peer at its better one.
pub fn both_views() -> Vec<String> {
    if COMPARATORS {
        names(&[
            "strata",
            "strata@own",
            "rocksdb",
            "rocksdb@own",
            "leveldb",
            "leveldb@own",
            "fjall",
            "fjall@own",
        ])
    } else {
        names(&["strata", "strata@own"])
    }
}

/// The rows of the capped presets: db_bench's (the fill settle-inclusive),
/// a timed overwrite after the bulk load, and YCSB A-F.
fn capped_rows() -> Vec<String> {
    let mut v = names(&[
        "fillrandom",
        "overwrite",
        "overwrite-timed",
        "readrandom",
        "seekrandom",
        "readseq",
    ]);
    v.extend("abcdef".chars().map(|c| format!("ycsb-{c}")));
    v
}

/// A capped preset: every run's process in a `cap`-byte memory cgroup,
/// `num` records of `value_size` bytes (at least 4× the cap), both views,
/// loads reused, 5 repeats, each run at most `budget` seconds.
fn capped(base: Config, cap: u64, num: u64, value_size: usize, budget: f64) -> Config {
    Config {
        engines: both_views(),
        workloads: capped_rows(),
        params: Params {
            num,
            ops: 200_000,
            value_size,
            max_run_secs: Some(budget),
            // The timed overwrite: with its settle, several compactions
            // into the last level of a load this size.
            duration_secs: 30.0,
            ..Params::default()
        },
        // An eighth of the cap per memtable (two of them: a quarter) and an
        // eighth for the cache: what a user sizes an LSM to in a container
        // of that size.
        settings: EngineSettings {
            write_buffer_size: (cap / 8) as usize,
            block_cache_size: (cap / 8) as usize,
            target_file_size: 32 << 20,
            level_base: 128 << 20,
            ..EngineSettings::default()
        },
        repeats: 5,
        memory_limit: Some(cap),
        reuse_loads: true,
        // An engine that thrashes under the cap (its settle re-reading
        // mapped pages for ever) is a row, not a stalled report.
        time_limit: Some(300.0),
        ..base
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The preset names and what they are for.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "tiny",
        "every workload on a few thousand keys; seconds (the test suite runs it)",
    ),
    (
        "quick",
        "IN MEMORY: db_bench fill/overwrite/read/readseq/seek (reads warm, one cold row) + YCSB A/B/C, \
         1M keys of 100 B (111 MiB), 32 MiB cache, strata and every peer in both views; ~8 minutes \
         (the published table: --repeats 5)",
    ),
    (
        "capped",
        "LARGER THAN MEMORY: every process in a 256 MiB memory cgroup (page cache included), 10M keys of \
         100 B (1.1 GiB, 4.3x the cap), fillrandom (burst and settle-inclusive), overwrite, 30 s of overwrite-timed, readrandom, \
         seekrandom, readseq, YCSB A-F, strata and every peer in both views, loads reused, 5 repeats, \
         runs of at most 20 s; several hours",
    ),
    (
        "capped-1k",
        "LARGER THAN MEMORY, 1 KiB values: as capped with 1.1M keys of 1 KiB (1.1 GiB, 4.3x the 256 MiB cap); \
         several hours",
    ),
    (
        "capped-small",
        "LARGER THAN MEMORY, scaled down: as capped with a 128 MiB cap and 5M keys of 100 B (580 MB, 4.3x); \
         about two hours",
    ),
    (
        "active",
        "active compaction: U1..U9 and YCSB a-d, uniform, 1 KiB values, 300k records (300 MiB, 19x the \
         16 MiB cache), 8 MiB memtables and tables, strata leveled vs stale picker vs LevelDB vs RocksDB, \
         3 repeats; ~30 min",
    ),
    (
        "copro",
        "CoPro: fillrandom + YCSB A/B/C, 1 KiB values (rerun with --value-size 100 and 65536 for the \
         paper's other sizes), 150k records, 4 MiB memtables, 2 MiB tables, every executor, 3 repeats; ~15 min",
    ),
    (
        "matrixkv",
        "MatrixKV: random puts, random gets and a sequential load, 4 KiB values, \
         300k records (1.2 GB, the 128 MiB container filled ~9 times), 4 MiB memtables and tables, \
         16 MiB L1 target; classic strata on disk and on tmpfs, the matrix container on tmpfs (with and \
         without hints) and on the disk, RocksDB, LevelDB; 3 repeats; ~17 min",
    ),
    (
        "kvell",
        "KVell: YCSB A-F, zipfian and uniform, 1 KiB values, 400k records (410 MB) against a 128 MiB \
         cgroup memory cap per engine (3.2x), 40 MiB of cache each (KVell's page cache = an LSM's 32 MiB \
         block cache + 8 MiB memtable), 8 client threads, 200k ops, per-second timelines, p99/max latency, \
         the device's own 4 KiB ceilings; KVell, strata LSM (pread + block cache), RocksDB, LevelDB; \
         3 repeats; ~60 min",
    ),
    (
        "full",
        "every workload, 2M keys (232 MB, 3.6x the 64 MiB cache), 1M ops, 30 s timed runs; about 40 minutes on 2 cores",
    ),
];

/// The configuration of preset `name`, writing to `out`.
pub fn preset(name: &str, out: PathBuf) -> Result<Config, BenchError> {
    let all: Vec<String> = crate::workload::all().iter().map(|w| w.name()).collect();
    let base = Config {
        preset: name.to_string(),
        engines: available_engines(),
        workloads: Vec::new(),
        params: Params::default(),
        settings: EngineSettings::default(),
        out,
        repeats: 1,
        cold: false,
        settle: true,
        keep_data: false,
        memory_limit: None,
        ceilings: None,
        reuse_loads: false,
        time_limit: None,
    };
    match name {
        "tiny" => Ok(Config {
            workloads: all,
            params: Params {
                num: 2000,
                ops: 2000,
                duration_secs: 1.0,
                ..Params::default()
            },
            settings: EngineSettings {
                write_buffer_size: 256 << 10,
                block_cache_size: 128 << 10,
                target_file_size: 256 << 10,
                ..EngineSettings::default()
            },
            ..base
        }),
        "quick" => Ok(Config {
            engines: both_views(),
            workloads: names(&[
                "fillseq",
                "fillrandom",
                "overwrite",
                "readrandom",
                "readrandom:cold",
                "readseq",
                "seekrandom",
                "ycsb-a",
                "ycsb-b",
                "ycsb-c",
            ]),
            params: Params {
                num: 1_000_000,
                ops: 300_000,
                ..Params::default()
            },
            ..base
        }),
        "active" => {
            let mut engines = vec![
                "strata".to_string(),
                "strata:compaction_picker=stale".to_string(),
            ];
            if COMPARATORS {
                engines.extend(["leveldb", "rocksdb", "fjall"].map(String::from));
            }
            let mut workloads: Vec<String> = (1..=9).map(|i| format!("u{i}")).collect();
            workloads.extend("abcd".chars().map(|c| format!("ycsb-{c}")));
            Ok(Config {
                engines,
                workloads,
                params: Params {
                    num: 300_000,
                    ops: 300_000,
                    value_size: 1024,
                    distribution: Some(crate::gen::Distribution::Uniform),
                    ..Params::default()
                },
                settings: EngineSettings {
                    block_cache_size: 16 << 20,
                    write_buffer_size: 8 << 20,
                    target_file_size: 8 << 20,
                    ..EngineSettings::default()
                },
                repeats: 3,
                ..base
            })
        }
        "copro" => {
            let mut engines: Vec<String> =
                ["linear", "subtasks:2", "pipelined", "copro:2", "copro+:2"]
                    .iter()
                    .map(|e| format!("strata:executor={e}"))
                    .collect();
            if COMPARATORS {
                engines.extend(["leveldb", "rocksdb", "fjall"].map(String::from));
            }
            Ok(Config {
                engines,
                workloads: ["fillrandom", "ycsb-a", "ycsb-b", "ycsb-c"]
                    .map(String::from)
                    .to_vec(),
                params: Params {
                    num: 150_000,
                    ops: 150_000,
                    value_size: 1024,
                    ..Params::default()
                },
                // The paper's LevelDB shape: 4 MB memtable, 2 MB tables.
                settings: EngineSettings {
                    block_cache_size: 16 << 20,
                    write_buffer_size: 4 << 20,
                    target_file_size: 2 << 20,
                    subcompactions: 2,
                    ..EngineSettings::default()
                },
                repeats: 3,
                ..base
            })
        }
        "matrixkv" => {
            // The thesis' shape scaled down 16x: 64 MB memtables and
            // tables, an 8 GB container (128 rows), L1 = the container.
            let matrix = "l0=matrix,matrix_capacity=128M,matrix_column_bytes=16M";
            let mut engines = vec![
                "strata".to_string(),
                format!("strata:{matrix},fast_dir=@shm/fast"),
                format!("strata:{matrix},fast_dir=@shm/fast,matrix_hints=false"),
                format!("strata:{matrix}"),
                "strata:db_dir=@shm/db".to_string(),
            ];
            if COMPARATORS {
                engines.extend(["rocksdb", "leveldb", "fjall"].map(String::from));
            }
            Ok(Config {
                engines,
                workloads: ["fillrandom", "readrandom", "fillseq"]
                    .map(String::from)
                    .to_vec(),
                params: Params {
                    num: 300_000,
                    ops: 300_000,
                    value_size: 4096,
                    ..Params::default()
                },
                settings: EngineSettings {
                    block_cache_size: 16 << 20,
                    write_buffer_size: 4 << 20,
                    target_file_size: 4 << 20,
                    level_base: 16 << 20,
                    ..EngineSettings::default()
                },
                repeats: 3,
                ..base
            })
        }
        "kvell" => {
            // strata's LSM as shipped: its tables outgrow the page cache's
            // room under the cap, so it reads them with pread and its block
            // cache, as RocksDB does.
            let mut engines = vec!["kvell".to_string(), "strata".to_string()];
            if COMPARATORS {
                engines.extend(["rocksdb", "leveldb", "fjall"].map(String::from));
            }
            let mut workloads: Vec<String> =
                "abcdef".chars().map(|c| format!("ycsb-{c}")).collect();
            workloads.extend("abcdef".chars().map(|c| format!("ycsb-{c}-uniform")));
            Ok(Config {
                engines,
                workloads,
                params: Params {
                    num: 400_000,
                    ops: 200_000,
                    value_size: 1024,
                    threads: 8,
                    // LevelDB cannot turn off its memory-mapped reads and
                    // collapses under the cap (~350 ops/s): a budget keeps
                    // its runs to a minute, its rate marked as cut short.
                    max_run_secs: Some(60.0),
                    ..Params::default()
                },
                settings: EngineSettings {
                    block_cache_size: 32 << 20,
                    write_buffer_size: 8 << 20,
                    target_file_size: 8 << 20,
                    ..EngineSettings::default()
                },
                repeats: 3,
                memory_limit: Some(128 << 20),
                ceilings: Some((512, 3.0)),
                ..base
            })
        }
        "capped" => Ok(capped(base, 256 << 20, 10_000_000, 100, 20.0)),
        "capped-1k" => Ok(capped(base, 256 << 20, 1_100_000, 1024, 20.0)),
        "capped-small" => Ok(capped(base, 128 << 20, 5_000_000, 100, 15.0)),
        "full" => Ok(Config {
            workloads: all,
            params: Params {
                num: 2_000_000,
                ops: 1_000_000,
                duration_secs: 30.0,
                ..Params::default()
            },
            settings: EngineSettings {
                block_cache_size: 64 << 20,
                ..EngineSettings::default()
            },
            ..base
        }),
        _ => Err(BenchError::Usage(format!(
            "unknown preset {name:?}; known: {}",
            PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The report's note on an `--own-defaults` run.
pub const OWN_DEFAULTS_NOTE: &str =
    "own-defaults mode (the second view of fairness): every engine ran with its own library \
     defaults for write buffer, block cache, block and table sizes, bloom filter, compression, level \
     shape and background threads, not the shared settings (the preset's size fields in report.json's \
     `settings` were ignored); durability was equal (WAL on, the same sync policy). Each engine's \
     effective settings are listed with it.";

/// How to start a child: this program plus the hidden subcommand.
#[derive(Debug, Clone)]
pub struct ChildCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Environment variables every child gets (the peer libraries' paths,
    /// whether a debug build may run: see `ffi::dl`); the parent's own
    /// checks read them from here too.
    pub env: Vec<(String, String)>,
}

/// A file name for `s`: its first 40 characters made safe, and a hash of
/// the whole, so that two long names that share a beginning stay apart.
fn sanitize(s: &str) -> String {
    let head: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect();
    if head.len() == s.len() && head == s {
        return head;
    }
    // Names live for one bench run (OUT/data is wiped at its start): the
    // standard hasher, fixed within a build, is enough.
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    s.hash(&mut h);
    format!("{head}-{:08x}", h.finish() as u32)
}

fn bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(1);
    let style = ProgressStyle::with_template(
        "{prefix} {msg:>14} [{bar:30.cyan/blue}] {pos}/{len} {elapsed}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    pb.set_style(style);
    pb
}

/// The start of the error of a run killed by `Config::time_limit`.
pub const TIME_LIMIT_KILL: &str = "killed by the time limit after";

/// Runs one child and collects its result (an error result if it failed).
fn run_child(
    child: &ChildCommand,
    spec: &RunSpec,
    pb: &ProgressBar,
    cap: Option<&crate::limits::MemoryCap>,
    limit: Option<std::time::Duration>,
) -> RunResult {
    let failed = |msg: String| RunResult {
        engine: spec.engine.clone(),
        workload: spec.workload.clone(),
        error: Some(msg),
        ..RunResult::default()
    };
    let json = match serde_json::to_string(spec) {
        Ok(j) => j,
        Err(e) => return failed(e.to_string()),
    };
    let program = &child.program;
    let mut command = Command::new(program);
    if let Some(cap) = cap {
        // The child enters the cgroup itself before anything else: an
        // engine that sizes itself by its cgroup's limit at open (strata's
        // memory budget) must not open before it is in.
        command.env(crate::child::CGROUP_PROCS_ENV, cap.procs());
    }
    let spawned = command
        .args(&child.args)
        .envs(child.env.iter().map(|(k, v)| (k, v)))
        .arg("--spec")
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut proc = match spawned {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot start {}: {e}", program.display())),
    };
    // Into the memory cgroup at once (the child enters it itself too,
    // first thing); a child that cannot be capped does not run uncapped.
    if let Some(cap) = cap {
        if let Err(e) = cap.enter(proc.id()) {
            let _ = proc.kill();
            let _ = proc.wait();
            return failed(format!("memory cap: {e}"));
        }
    }
    // The watchdog kills the child at the limit unless told first that
    // its output ended. It is told before the child is reaped, so the pid
    // it may signal is still this child's (alive or a zombie).
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (done, watchdog) = match limit {
        Some(limit) => {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let pid = proc.id() as libc::pid_t;
            let killed = killed.clone();
            let h = std::thread::spawn(move || {
                if rx.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                    killed.store(true, std::sync::atomic::Ordering::SeqCst);
                    // SAFETY: kill(2) with a pid this process spawned and
                    // has not reaped; no memory is shared with it.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            });
            (Some(tx), Some(h))
        }
        None => (None, None),
    };
    let mut result = None;
    if let Some(out) = proc.stdout.take() {
        let started = std::time::Instant::now();
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix(PROGRESS_PREFIX) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                if let [phase, done, total] = f[..] {
                    let (done, total) =
                        (done.parse().unwrap_or(0u64), total.parse().unwrap_or(0u64));
                    pb.set_length(total.max(1));
                    pb.set_position(done);
                    let secs = started.elapsed().as_secs_f64().max(1e-3);
                    pb.set_message(if phase == "run" {
                        format!("run {:.0}k/s", done as f64 / secs / 1000.0)
                    } else {
                        phase.to_string()
                    });
                }
            } else if let Some(j) = line.strip_prefix(RESULT_PREFIX) {
                result = Some(serde_json::from_str::<RunResult>(j).map_err(|e| e.to_string()));
            }
        }
    }
    if let Some(tx) = done {
        let _ = tx.send(());
    }
    if let Some(h) = watchdog {
        let _ = h.join();
    }
    let status = proc.wait();
    if killed.load(std::sync::atomic::Ordering::SeqCst) && result.is_none() {
        return failed(format!(
            "{TIME_LIMIT_KILL} {:.0} s (load, run, settle and close)",
            limit.map_or(0.0, |l| l.as_secs_f64())
        ));
    }
    match (result, status) {
        (Some(Ok(r)), _) => r,
        (Some(Err(e)), _) => failed(format!("unreadable result: {e}")),
        (None, Ok(s)) => failed(format!("child exited with {s} and no result")),
        (None, Err(e)) => failed(format!("child: {e}")),
    }
}

/// Removes what the child of `spec` leaves behind when it dies (killed by
/// the OOM killer or the time limit, or crashed) before its own cleanup:
/// its directory unless `spec.keep_data`, its tmpfs directories, and an
/// image it was saving and did not finish. Without this a run of 20 GB
/// databases fills the disk with the first dead child.
fn remove_leftovers(spec: &RunSpec) {
    if !spec.keep_data && spec.dir.exists() {
        let _ = std::fs::remove_dir_all(&spec.dir);
    }
    crate::child::remove_shm_dirs(&spec.dir);
    if let Some(img) = &spec.save_image {
        if img.exists() && !crate::sys::image_ready(img) {
            let _ = std::fs::remove_dir_all(img);
        }
    }
}

/// Checks and loads the C library behind engine spec `name` (RocksDB or
/// LevelDB, either view); returns the report's line for it, `None` for an
/// engine that loads no library.
fn probe_peer(name: &str) -> Result<Option<String>, BenchError> {
    let (base, _) = crate::engine::split_view(name);
    match base {
        #[cfg(feature = "comparators")]
        "rocksdb" => crate::ffi::rocksdb::probe().map(Some),
        #[cfg(feature = "comparators")]
        "leveldb" => crate::ffi::leveldb::probe().map(Some),
        _ => Ok(None),
    }
}

/// Runs the benchmark; returns the report (already written to `cfg.out`).
pub fn run(cfg: &Config, child: &ChildCommand) -> Result<Report, BenchError> {
    let kinds = cfg
        .engines
        .iter()
        .map(|e| EngineKind::parse(e))
        .collect::<Result<Vec<_>, _>>()?;
    let mut notes = Vec::new();
    let mut engines = Vec::new();
    for (name, kind) in cfg.engines.iter().zip(&kinds) {
        if kind.is_comparator() && !COMPARATORS {
            let msg = format!(
                "{name} skipped: RocksDB/LevelDB/fjall are not compiled in (build with --features comparators, \
                 after scripts/peers installs the peer libraries; `scripts/bench` does both)"
            );
            eprintln!("note: {msg}");
            notes.push(msg);
        } else {
            engines.push(name.clone());
        }
    }
    if engines.is_empty() {
        return Err(BenchError::Usage("no engine to run".into()));
    }
    // The parent looks at each peer library before any run: a missing or
    // debug-built one stops the bench here, and the report names each.
    for (k, v) in &child.env {
        std::env::set_var(k, v);
    }
    let mut peers = Vec::new();
    for name in &engines {
        if let Some(line) = probe_peer(name)? {
            if !peers.contains(&line) {
                peers.push(line);
            }
        }
    }
    if cfg.settings.own_defaults {
        notes.push(OWN_DEFAULTS_NOTE.to_string());
    }
    let workloads = cfg
        .workloads
        .iter()
        .map(|w| Workload::parse(w).map(|parsed| (w.trim().to_string(), parsed)))
        .collect::<Result<Vec<_>, _>>()?;
    cfg.params.validate()?;
    std::fs::create_dir_all(&cfg.out).map_err(|e| BenchError::Io(cfg.out.clone(), e))?;
    let data = cfg.out.join("data");
    // Nothing of an earlier bench (its load images above all, made with
    // other parameters) may stand in for this one's.
    if data.exists() {
        std::fs::remove_dir_all(&data).map_err(|e| BenchError::Io(data.clone(), e))?;
    }
    let cap = match cfg.memory_limit {
        None => None,
        Some(bytes) => match crate::limits::MemoryCap::new(bytes) {
            Ok(c) => {
                notes.push(format!(
                    "every run's process is capped at {} MiB of memory, page cache included ({})",
                    bytes >> 20,
                    c.how
                ));
                Some(c)
            }
            // A capped run that ran uncapped would measure another regime
            // under the same name: refuse instead.
            Err(e) => {
                return Err(BenchError::Usage(format!(
                    "cannot cap memory at {} MiB ({e}): run as root on a machine with a memory \
                     cgroup controller, or pass --memory-limit none to run uncapped",
                    bytes >> 20
                )))
            }
        },
    };
    let device = if let Some((mib, secs)) = cfg.ceilings {
        eprintln!("measuring the device's 4 KiB random I/O ceilings ...");
        let c = crate::limits::measure(&data.join("ceilings"), mib, secs)?;
        eprintln!(
            "device: random 4 KiB reads {:.0} IOPS at QD1, {:.0} at QD64; writes {:.0} at QD1, {:.0} at QD64 ({}{})",
            c.read_qd1_iops,
            c.read_qd64_iops,
            c.write_qd1_iops,
            c.write_qd64_iops,
            c.backend,
            if c.direct { ", O_DIRECT" } else { "" }
        );
        Some(c)
    } else {
        None
    };
    if cfg.repeats > 1 && engines.len() > 1 {
        notes.push(
            "the engine order turns by one each repeat (report.json lists the runs in the order they ran)"
                .into(),
        );
    }
    let total = engines.len() * workloads.len() * cfg.repeats;
    let mut results = Vec::new();
    // Images whose load failed (a killed or failed child): later runs that
    // would start from them fail at once with the same cause.
    let mut failed_images: Vec<(PathBuf, String)> = Vec::new();
    // Engine × row pairs a repeat of which was killed by the time limit:
    // their later repeats are not run (they would spend the limit again).
    let mut over_limit: Vec<(String, String, String)> = Vec::new();
    let mut k = 0;
    for (row, wl) in &workloads {
        for rep in 0..cfg.repeats {
            // The engine order turns by one each repeat, so no engine
            // always runs first (after a cold device) or last.
            for e in engines
                .iter()
                .cycle()
                .skip(rep % engines.len())
                .take(engines.len())
            {
                k += 1;
                let dir = data.join(format!("{}-{}-{rep}", sanitize(e), sanitize(row)));
                // A reused load: the first run of this engine and kind of
                // load keeps an image of it, later ones start from a copy.
                // Engines placed outside the run's directory load every time.
                let placed = ["db_dir=", "fast_dir=", crate::engine::SHM]
                    .iter()
                    .any(|p| e.contains(p));
                let image = (cfg.reuse_loads && !placed)
                    .then(|| match wl.preload() {
                        Preload::Nothing => None,
                        kind => Some(
                            data.join("images")
                                .join(format!("{}-{kind:?}", sanitize(e))),
                        ),
                    })
                    .flatten();
                let mut spec = RunSpec {
                    engine: e.clone(),
                    workload: row.clone(),
                    params: cfg.params.clone(),
                    settings: cfg.settings.clone(),
                    dir: dir.clone(),
                    cold: cfg.cold,
                    settle: cfg.settle,
                    keep_data: cfg.keep_data,
                    preloaded: false,
                    save_image: None,
                };
                let earlier = image.as_ref().and_then(|img| {
                    failed_images
                        .iter()
                        .find(|(p, _)| p == img)
                        .map(|(_, why)| why.clone())
                });
                let slow = over_limit
                    .iter()
                    .find(|(en, r, _)| en == e && r == row)
                    .map(|(_, _, why)| why.clone());
                let restored = match &image {
                    _ if slow.is_some() => Err(format!(
                        "not run: an earlier repeat of this engine and row was {}",
                        slow.unwrap_or_default()
                    )),
                    _ if earlier.is_some() => Err(format!(
                        "the load it starts from failed in an earlier run of this engine: {}",
                        earlier.unwrap_or_default()
                    )),
                    Some(img) if crate::sys::image_ready(img) => {
                        spec.preloaded = true;
                        crate::sys::restore_image(img, &dir)
                            .map_err(|e| format!("copying the loaded image: {e}"))
                    }
                    Some(img) => {
                        if let Some(parent) = img.parent() {
                            let _ = std::fs::create_dir_all(parent);
                        }
                        spec.save_image = Some(img.clone());
                        Ok(())
                    }
                    None => Ok(()),
                };
                crate::sys::settle_device();
                let pb = bar();
                pb.set_prefix(format!("[{k}/{total}] {e} {row}"));
                let limit = cfg.time_limit.map(|l| {
                    let l = if spec.save_image.is_some() {
                        4.0 * l
                    } else {
                        l
                    };
                    std::time::Duration::from_secs_f64(l)
                });
                let r = match restored {
                    Ok(()) => {
                        let r = run_child(child, &spec, &pb, cap.as_ref(), limit);
                        remove_leftovers(&spec);
                        r
                    }
                    Err(msg) => RunResult {
                        engine: e.clone(),
                        workload: row.clone(),
                        error: Some(msg),
                        ..RunResult::default()
                    },
                };
                pb.finish_and_clear();
                if let Some(err) = r
                    .error
                    .as_deref()
                    .filter(|e| e.starts_with(TIME_LIMIT_KILL))
                {
                    over_limit.push((e.clone(), row.clone(), err.to_string()));
                }
                if let (Some(img), Some(err)) = (&spec.save_image, &r.error) {
                    if !crate::sys::image_ready(img) {
                        failed_images.push((img.clone(), err.clone()));
                    }
                }
                let line = match &r.error {
                    Some(err) => format!("[{k}/{total}] {e} {row}: FAILED: {err}"),
                    None => format!(
                        "[{k}/{total}] {e} {row}: {:.0} ops/s, p99 {:.1} us, {:.1} s",
                        r.ops_per_sec, r.latency.p99_us, r.secs
                    ),
                };
                eprintln!("{line}");
                results.push(r);
                let partial = Report::new(cfg, engines.clone(), results.clone(), notes.clone());
                if let Err(e) = report::write_partial(&partial, &cfg.out) {
                    eprintln!("warning: the partial report was not written: {e}");
                }
            }
        }
    }
    if !cfg.keep_data {
        let _ = std::fs::remove_dir_all(&data);
    }
    let mut report = Report::new(cfg, engines, results, notes);
    report.peers = peers;
    report.device = device;
    report::write_all(&report, &cfg.out)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that outlives the time limit is killed and reported as such
    /// (a shell that sleeps stands in for an engine thrashing under a cap).
    #[test]
    fn a_child_past_the_time_limit_is_killed_and_reported() {
        let child = ChildCommand {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), "exec sleep 600".into()],
            env: Vec::new(),
        };
        let spec = RunSpec {
            engine: "strata".into(),
            workload: "readrandom".into(),
            params: Params::default(),
            settings: EngineSettings::default(),
            dir: PathBuf::from("/nonexistent"),
            cold: false,
            settle: true,
            keep_data: false,
            preloaded: false,
            save_image: None,
        };
        let r = run_child(
            &child,
            &spec,
            &ProgressBar::hidden(),
            None,
            Some(std::time::Duration::from_millis(300)),
        );
        let err = r.error.unwrap_or_default();
        assert!(err.starts_with(TIME_LIMIT_KILL), "{err}");
        // Without a limit a child that ends on its own is not "killed".
        let quick = ChildCommand {
            args: vec!["-c".into(), "exit 3".into()],
            ..child
        };
        let r = run_child(
            &quick,
            &spec,
            &ProgressBar::hidden(),
            None,
            Some(std::time::Duration::from_secs(600)),
        );
        let err = r.error.unwrap_or_default();
        assert!(
            err.contains("no result") && !err.starts_with(TIME_LIMIT_KILL),
            "{err}"
        );
    }

    /// A child killed mid-run leaves neither its directory nor a half-made
    /// image behind; with `keep_data` its directory stays.
    #[test]
    fn a_killed_childs_files_are_removed() {
        let name = format!("strata-bench-clean-{}", std::process::id());
        let root = std::env::temp_dir().join(&name);
        let dir = root.join(&name);
        let img = root.join("image");
        let shm = std::path::Path::new(crate::child::SHM_ROOT).join(format!("{name}-1"));
        let script = format!(
            "mkdir -p {d} {i} {s} && echo x > {d}/f && echo x > {i}/f && exec sleep 600",
            d = dir.display(),
            i = img.display(),
            s = shm.display()
        );
        let child = ChildCommand {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), script],
            env: Vec::new(),
        };
        let mut spec = RunSpec {
            engine: "strata".into(),
            workload: "fillrandom".into(),
            params: Params::default(),
            settings: EngineSettings::default(),
            dir: dir.clone(),
            cold: false,
            settle: true,
            keep_data: false,
            preloaded: false,
            save_image: Some(img.clone()),
        };
        let limit = Some(std::time::Duration::from_secs(2));
        let r = run_child(&child, &spec, &ProgressBar::hidden(), None, limit);
        remove_leftovers(&spec);
        assert!(r.error.unwrap_or_default().starts_with(TIME_LIMIT_KILL));
        assert!(!dir.exists(), "the dead child's directory is left");
        assert!(!img.exists(), "the unfinished image is left");
        assert!(!shm.exists(), "the tmpfs directory is left");
        spec.keep_data = true;
        spec.save_image = None;
        let r = run_child(&child, &spec, &ProgressBar::hidden(), None, limit);
        remove_leftovers(&spec);
        assert!(r.error.is_some());
        assert!(dir.join("f").exists(), "keep_data keeps the directory");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn presets_are_valid() -> Result<(), BenchError> {
        for (name, _) in PRESETS {
            let c = preset(name, PathBuf::from("x"))?;
            c.params.validate()?;
            for w in &c.workloads {
                Workload::parse(w)?;
            }
            assert!(!c.engines.is_empty());
        }
        assert!(preset("nope", PathBuf::from("x")).is_err());
        Ok(())
    }
}
