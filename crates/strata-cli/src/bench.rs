//! `strata bench`: the side-by-side benchmark (crate `strata-bench`).

use crate::CliError;
use std::path::PathBuf;
use std::process::ExitCode;
use strata_bench::gen::Distribution;
use strata_bench::runner::{self, ChildCommand};

/// Flags of `strata bench`; unset ones take the preset's value.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// tiny (seconds), quick (in memory, ~8 minutes), capped, capped-1k,
    /// capped-small (larger than memory, hours), active, copro, matrixkv,
    /// kvell, deletes, merges, merges-capped, checkpoint, backup, full:
    /// docs/BENCHMARKS.md describes each.
    #[arg(long, default_value = "quick")]
    pub preset: String,
    /// Engines, comma-separated: strata, strata:opt=v;opt=v (use ';' between
    /// options), kvell, kvell:opt=v, rocksdb, leveldb, fjall; a peer
    /// name followed by `@own` runs it with its own defaults (rocksdb@own).
    /// Default: every engine compiled in.
    #[arg(long, value_delimiter = ',')]
    pub engines: Option<Vec<String>>,
    /// Workloads, comma-separated (fillseq, fillrandom, overwrite,
    /// overwrite-timed, readrandom, readseq, scan-resume, seekrandom,
    /// deleterandom, readwhilewriting, ycsb-load, ycsb-a..ycsb-f,
    /// ycsb-a-uniform..ycsb-f-uniform, u1..u9, fluctuation; a read row with
    /// `:cold` starts with the files evicted). Default: the preset's.
    #[arg(long, value_delimiter = ',')]
    pub workloads: Option<Vec<String>>,
    /// Output directory for report.json, report.md and the charts.
    #[arg(long, default_value = "strata-bench-out")]
    pub out: PathBuf,
    /// Records loaded (and the db_bench key space).
    #[arg(long)]
    pub num: Option<u64>,
    /// Operations per run.
    #[arg(long)]
    pub ops: Option<u64>,
    #[arg(long)]
    pub key_size: Option<usize>,
    #[arg(long)]
    pub value_size: Option<usize>,
    /// Client threads.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seconds of the timed workloads (overwrite-timed, fluctuation,
    /// readwhilewriting).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop a run of a fixed number of operations after SECS even if some
    /// are left (its rate is then marked `*` in the report).
    #[arg(long, value_name = "SECS")]
    pub max_run_secs: Option<f64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Entries read after each seek of seekrandom.
    #[arg(long)]
    pub scan_len: Option<usize>,
    /// Request distribution of YCSB and U workloads: uniform, zipfian, latest.
    #[arg(long)]
    pub distribution: Option<String>,
    /// Block cache of every engine, e.g. 32M.
    #[arg(long)]
    pub cache_size: Option<String>,
    /// Memtable size of every engine, e.g. 64M.
    #[arg(long)]
    pub write_buffer_size: Option<String>,
    #[arg(long)]
    pub bloom_bits: Option<usize>,
    #[arg(long)]
    pub block_size: Option<String>,
    /// none, lz4 or zstd (LevelDB: none, or lz4 run as snappy).
    #[arg(long)]
    pub compression: Option<String>,
    /// How far values compress: the share of each 100 bytes that is
    /// random (1.0, the default: incompressible; db_bench's is 0.5).
    #[arg(long)]
    pub compression_ratio: Option<f64>,
    /// fdatasync the WAL on every write (every engine).
    #[arg(long)]
    pub sync: bool,
    /// Run every engine with its own library defaults (write buffer, block
    /// cache, block and table sizes, bloom filter, compression, level shape,
    /// background threads) instead of the shared settings; durability stays
    /// equal (WAL on, --sync for all). The report lists each engine's values.
    #[arg(long, conflicts_with_all = ["cache_size", "write_buffer_size", "bloom_bits", "block_size", "compression"])]
    pub own_defaults: bool,
    /// Repeats of every run (the report shows the median and the spread).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Evict the database's files from the page cache after each load, so
    /// every run starts cold (by default only rows named `WORKLOAD:cold` do).
    #[arg(long)]
    pub cold: bool,
    /// Load each engine once per kind of load and start later runs from a
    /// copy of that database (the capped presets do).
    #[arg(long)]
    pub reuse_loads: bool,
    /// Do not wait for background work after the load and after writing
    /// runs (runs then start mid-compaction, and write amplification counts
    /// only what happened before the close).
    #[arg(long)]
    pub no_settle: bool,
    /// Keep every run's database under OUT/data/ (RocksDB's LOG, the tables)
    /// for inspection; they are deleted otherwise.
    #[arg(long)]
    pub keep_data: bool,
    /// Cap every run's process (heap and page cache) at SIZE with a memory
    /// cgroup; `none` lifts a preset's cap.
    #[arg(long)]
    pub memory_limit: Option<String>,
    /// Kill a run that has not finished (run, settle, close) after SECS,
    /// four times as long for a run that loads a reused image; it is
    /// reported as killed and its later repeats are skipped (`none` lifts a
    /// preset's limit; the capped presets use 300).
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<String>,
    /// Run every row on one database per engine: the first row, ycsb-load,
    /// loads it (once per engine) and every later row runs,
    /// in the listed order, on what the rows before it left, its files
    /// evicted first (db_bench's --use_existing_db; the scale preset does).
    #[arg(long)]
    pub chain: bool,
    /// Fail a RocksDB or LevelDB run whose wait for its background work
    /// (the settle) passes SECS (default 600; the scale preset 1500).
    #[arg(long, value_name = "SECS")]
    pub settle_limit: Option<u64>,
    /// Measure the device's 4 KiB random read/write ceilings before the
    /// runs (a 256 MiB file, 2 s per pattern).
    #[arg(long)]
    pub ceilings: bool,
    /// The RocksDB shared library to load (default: the release library
    /// scripts/peers installs, ~/.cache/strata/peers/rocksdb/librocksdb.so).
    #[arg(long, env = "STRATA_ROCKSDB_LIB", value_name = "PATH")]
    pub rocksdb_lib: Option<PathBuf>,
    /// The LevelDB shared library to load (default: the release build
    /// scripts/peers makes, ~/.cache/strata/peers/leveldb/libleveldb.so).
    #[arg(long, env = "STRATA_LEVELDB_LIB", value_name = "PATH")]
    pub leveldb_lib: Option<PathBuf>,
    /// Run a peer library built with assertions (refused otherwise: its
    /// figures measure its debug checks).
    #[arg(long)]
    pub allow_debug_peers: bool,
}

fn size(flag: &str, v: &str) -> Result<u64, CliError> {
    strata::options::parse_size(v)
        .ok_or_else(|| CliError::Usage(format!("--{flag}: bad size {v:?}")))
}

fn bench_err(e: strata_bench::BenchError) -> CliError {
    CliError::Usage(e.to_string())
}

pub fn run(a: &BenchArgs) -> Result<ExitCode, CliError> {
    let mut cfg = runner::preset(&a.preset, a.out.clone()).map_err(bench_err)?;
    if let Some(e) = &a.engines {
        cfg.engines = e.iter().map(|s| s.replace(';', ",")).collect();
    }
    if let Some(w) = &a.workloads {
        cfg.workloads = w.clone();
    }
    let p = &mut cfg.params;
    p.num = a.num.unwrap_or(p.num);
    p.ops = a.ops.unwrap_or(p.ops);
    p.key_size = a.key_size.unwrap_or(p.key_size);
    p.value_size = a.value_size.unwrap_or(p.value_size);
    p.threads = a.threads.unwrap_or(p.threads);
    p.duration_secs = a.duration.unwrap_or(p.duration_secs);
    p.max_run_secs = a.max_run_secs.or(p.max_run_secs);
    p.seed = a.seed.unwrap_or(p.seed);
    p.scan_len = a.scan_len.unwrap_or(p.scan_len);
    if let Some(r) = a.compression_ratio {
        if !(r > 0.0 && r <= 1.0) {
            return Err(CliError::Usage(format!(
                "--compression-ratio: {r} is not in (0, 1]"
            )));
        }
        p.compression_ratio = r;
    }
    if let Some(d) = &a.distribution {
        p.distribution = Some(Distribution::parse(d).ok_or_else(|| {
            CliError::Usage(format!(
                "--distribution: {d:?} is not uniform, zipfian or latest"
            ))
        })?);
    }
    let s = &mut cfg.settings;
    if let Some(v) = &a.cache_size {
        s.block_cache_size = size("cache-size", v)? as usize;
    }
    if let Some(v) = &a.write_buffer_size {
        s.write_buffer_size = size("write-buffer-size", v)? as usize;
    }
    if let Some(v) = &a.block_size {
        s.block_size = size("block-size", v)? as usize;
    }
    s.bloom_bits_per_key = a.bloom_bits.unwrap_or(s.bloom_bits_per_key);
    if let Some(c) = &a.compression {
        s.compression = c.clone();
    }
    s.sync |= a.sync;
    s.own_defaults |= a.own_defaults;
    cfg.repeats = a.repeats.unwrap_or(cfg.repeats).max(1);
    cfg.cold |= a.cold;
    cfg.reuse_loads |= a.reuse_loads;
    cfg.settle = !a.no_settle;
    cfg.keep_data = a.keep_data;
    cfg.chain |= a.chain;
    if let Some(l) = a.settle_limit {
        cfg.settings.settle_limit_secs = l.max(1);
    }
    if a.ceilings && cfg.ceilings.is_none() {
        cfg.ceilings = Some((256, 2.0));
    }
    match a.time_limit.as_deref() {
        None => {}
        Some("none") => cfg.time_limit = None,
        Some(v) => match v.parse::<f64>() {
            Ok(l) if l > 0.0 && l <= strata_bench::workload::MAX_RUN_SECS => {
                cfg.time_limit = Some(l)
            }
            _ => {
                return Err(CliError::Usage(format!(
                    "--time-limit takes seconds (> 0) or none, not {v:?}"
                )))
            }
        },
    }
    match a.memory_limit.as_deref() {
        None => {}
        Some("none") => cfg.memory_limit = None,
        Some(v) => cfg.memory_limit = Some(size("memory-limit", v)?),
    }
    if !strata_bench::engine::COMPARATORS {
        eprintln!(
            "note: this build has no comparators (RocksDB, LevelDB); running strata alone. \
             Use scripts/bench, or build with --features comparators."
        );
    }
    // The children run this very binary: /proc/self/exe stays valid even if
    // the file at our path is replaced by a rebuild while the bench runs.
    let proc_exe = PathBuf::from("/proc/self/exe");
    let exe = if proc_exe.exists() {
        proc_exe
    } else {
        std::env::current_exe().map_err(CliError::Output)?
    };
    // The children inherit where the peer libraries are and whether a
    // debug build may run.
    let mut env = Vec::new();
    if let Some(p) = &a.rocksdb_lib {
        env.push(("STRATA_ROCKSDB_LIB".to_string(), p.display().to_string()));
    }
    if let Some(p) = &a.leveldb_lib {
        env.push(("STRATA_LEVELDB_LIB".to_string(), p.display().to_string()));
    }
    if a.allow_debug_peers {
        env.push((
            "STRATA_BENCH_ALLOW_DEBUG_PEERS".to_string(),
            "1".to_string(),
        ));
    }
    let child = ChildCommand {
        program: exe,
        args: vec!["bench-child".into()],
        env,
    };
    let report = runner::run(&cfg, &child).map_err(bench_err)?;
    let failed = report.results.iter().filter(|r| r.error.is_some()).count();
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn child(spec: &str) -> ExitCode {
    ExitCode::from(strata_bench::child::child_main(spec).clamp(0, 255) as u8)
}
