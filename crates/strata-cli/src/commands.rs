//! The data commands: put, get, delete, scan, load, stats, compact, verify.

use crate::workload::{self, LoadSpec};
use crate::{Cli, CliError, Command};
use std::io::{BufWriter, Write};
use std::ops::Bound;
use std::process::ExitCode;
use strata::{Db, Options, WriteBatch, WriteOptions};

/// Runs the command of `cli`.
pub fn run(cli: &Cli) -> Result<ExitCode, CliError> {
    match &cli.command {
        Command::Put { key, value, sync } => {
            let db = open(cli, "put", true)?;
            let mut b = WriteBatch::new();
            b.put(key, value);
            db.write(b, &WriteOptions { sync: *sync })?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { key, hex } => {
            let db = open(cli, "get", false)?;
            let found = db.get(key)?;
            db.close()?;
            match found {
                Some(v) => {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{}", show(&v, *hex))?;
                    out.flush()?;
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    eprintln!("not found: {key}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        Command::Delete { key, sync } => {
            let db = open(cli, "delete", false)?;
            let mut b = WriteBatch::new();
            b.delete(key);
            db.write(b, &WriteOptions { sync: *sync })?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Scan {
            from,
            to,
            limit,
            reverse,
            hex,
        } => {
            let db = open(cli, "scan", false)?;
            let lo = from
                .as_ref()
                .map_or(Bound::Unbounded, |k| Bound::Included(k.as_bytes().to_vec()));
            let hi = to
                .as_ref()
                .map_or(Bound::Unbounded, |k| Bound::Excluded(k.as_bytes().to_vec()));
            let scan = db.scan::<Vec<u8>, _>((lo, hi))?;
            let entries = workload::directed(scan, *reverse);
            let mut out = BufWriter::new(std::io::stdout().lock());
            for entry in entries.take(limit.unwrap_or(usize::MAX)) {
                let (k, v) = entry?;
                writeln!(out, "{}\t{}", show(&k, *hex), show(&v, *hex))?;
            }
            out.flush()?;
            drop(out);
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Load(a) => {
            let db = open(cli, "load", true)?;
            let spec = LoadSpec {
                count: a.count,
                key_size: a.key_size,
                value_size: a.value_size,
                order: a.order,
                seed: a.seed,
                sync: a.sync,
            };
            let elapsed = workload::load(&db, &spec)?;
            // A bulk load ends with its data in tables, not only in the WAL.
            db.flush()?;
            db.close()?;
            println!("load: {}", workload::rate(a.count, elapsed));
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { json } => {
            let db = open(cli, "stats", false)?;
            let s = db.stats();
            db.close()?;
            if *json {
                println!("{}", s.to_json());
            } else {
                println!("{s}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compact => {
            let db = open(cli, "compact", false)?;
            let start = std::time::Instant::now();
            db.compact_range::<&[u8], _>(..)?;
            let elapsed = start.elapsed();
            let s = db.stats();
            db.close()?;
            println!("compacted in {:.3} s", elapsed.as_secs_f64());
            println!("{s}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify => {
            let dir = cli.dir("verify")?;
            let opts = cli.options(Options::default())?;
            let report = strata::verify::verify_dir(dir, &opts)?;
            println!("{report}");
            Ok(if report.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Demo { count, seed } => crate::demo::run(cli, *count, *seed),
        Command::Bench(a) => crate::bench::run(a),
        Command::BenchChild { spec } => Ok(crate::bench::child(spec)),
        Command::Serve(args) => serve(cli, args),
        Command::Stress(args) => crate::stress::run(cli, args),
        Command::CompactionWorker {
            listen,
            cpus,
            allow,
            reply_delay_ms,
        } => {
            let allow = allow
                .iter()
                .map(std::fs::canonicalize)
                .collect::<Result<Vec<_>, _>>()?;
            let cfg = strata::compaction::executor::offload::WorkerConfig {
                reply_delay: std::time::Duration::from_millis(*reply_delay_ms),
                cpus: cpus.clone(),
                allow,
            };
            strata::compaction::executor::offload::serve(listen, &cfg, || {
                println!("compaction worker listening on {listen}");
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `strata serve`: the Redis-protocol server until SIGINT/SIGTERM.
fn serve(cli: &Cli, args: &crate::ServeArgs) -> Result<ExitCode, CliError> {
    let max_bulk = strata::options::parse_size(&args.max_bulk_len)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| CliError::Usage(format!("bad --max-bulk-len {:?}", args.max_bulk_len)))?;
    let db = open(cli, "serve", true)?;
    let cfg = strata_server::Config {
        bind: args.bind.clone(),
        port: args.port,
        requirepass: args.requirepass.clone(),
        max_bulk_len: max_bulk,
        idle_timeout: (args.timeout > 0).then(|| std::time::Duration::from_secs(args.timeout)),
        ..Default::default()
    };
    strata_server::serve_blocking(std::sync::Arc::new(db), cfg).map_err(CliError::Usage)?;
    Ok(ExitCode::SUCCESS)
}

/// Opens the database of `--dir` with the `--opt` options; only `create`
/// commands may create it.
fn open(cli: &Cli, command: &str, create: bool) -> Result<Db, CliError> {
    let dir = cli.dir(command)?;
    let opts = cli.options(Options::default())?.create_if_missing(create);
    Ok(Db::open(dir, opts)?)
}

/// Bytes as lossy UTF-8, or as lowercase hex.
fn show(b: &[u8], hex: bool) -> String {
    if hex {
        b.iter().map(|x| format!("{x:02x}")).collect()
    } else {
        String::from_utf8_lossy(b).into_owned()
    }
}
