//! The data commands: put, get, delete, scan, load, stats, compact, verify.

use crate::workload::{self, LoadSpec};
use crate::{Cli, CliError, Command};
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use strata::{KvStore, Options, WriteBatch, WriteOptions};

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
            let found = db.get(key.as_bytes())?;
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
        Command::Merge {
            key,
            operand,
            u64,
            sync,
        } => {
            let operand = if *u64 {
                let n: u64 = operand.parse().map_err(|_| {
                    strata::Error::InvalidArgument(format!("--u64: {operand:?} is not a number"))
                })?;
                n.to_le_bytes().to_vec()
            } else {
                operand.as_bytes().to_vec()
            };
            let db = open(cli, "merge", false)?;
            let mut b = WriteBatch::new();
            b.merge(key, operand);
            db.write(b, &WriteOptions { sync: *sync })?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::DeleteRange { from, to, sync } => {
            let db = open(cli, "delete-range", false)?;
            let mut b = WriteBatch::new();
            b.delete_range(from, to);
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
            let lo = from.as_ref().map(|k| k.as_bytes());
            let hi = to.as_ref().map(|k| k.as_bytes());
            // A cursor from the start of the range, or back from its end.
            let mut c = db.cursor(None)?;
            match (reverse, lo, hi) {
                (false, Some(k), _) => c.seek(k),
                (false, None, _) => c.seek_to_first(),
                (true, _, Some(k)) => {
                    c.seek_for_prev(k);
                    if c.valid() && c.key() == k {
                        c.prev();
                    }
                }
                (true, _, None) => c.seek_to_last(),
            }
            let mut out = BufWriter::new(std::io::stdout().lock());
            let mut left = limit.unwrap_or(usize::MAX);
            while left > 0 && c.valid() {
                let inside = if *reverse {
                    lo.is_none_or(|l| c.key() >= l)
                } else {
                    hi.is_none_or(|h| c.key() < h)
                };
                if !inside {
                    break;
                }
                writeln!(out, "{}\t{}", show(c.key(), *hex), show(c.value(), *hex))?;
                left -= 1;
                if *reverse {
                    c.prev();
                } else {
                    c.next();
                }
            }
            c.status()?;
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
            let elapsed = workload::load(db.as_ref(), &spec)?;
            // A bulk load ends with its data in the engine's files, not
            // only in the WAL (LSM) or unsynced (KVell).
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
            db.compact()?;
            let elapsed = start.elapsed();
            let s = db.stats();
            db.close()?;
            println!("compacted in {:.3} s", elapsed.as_secs_f64());
            println!("{s}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Checkpoint { target } => {
            let db = open(cli, "checkpoint", false)?;
            let start = std::time::Instant::now();
            let s = db.checkpoint(target)?;
            let elapsed = start.elapsed();
            db.close()?;
            println!(
                "checkpoint {}: {} files, {:.2} MiB ({:.2} MiB copied, the rest hard links) in {:.3} s",
                target.display(),
                s.files,
                s.bytes as f64 / (1 << 20) as f64,
                s.copied_bytes as f64 / (1 << 20) as f64,
                elapsed.as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Backup { store } => {
            let db = open(cli, "backup", false)?;
            let backups = strata::BackupStore::open(store)?;
            let start = std::time::Instant::now();
            let b = db.backup(&backups)?;
            let elapsed = start.elapsed();
            db.close()?;
            println!(
                "backup {} in {}: {} files, {:.2} MiB ({:.2} MiB copied, the rest already there) in {:.3} s",
                b.id,
                store.display(),
                b.files,
                mib(b.bytes),
                mib(b.copied_bytes),
                elapsed.as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore { store, target, id } => {
            let backups = strata::BackupStore::open(store)?;
            let start = std::time::Instant::now();
            let r = backups.restore(*id, target)?;
            println!(
                "restored backup {} into {}: {} files, {:.2} MiB in {:.3} s",
                r.id,
                target.display(),
                r.files,
                mib(r.bytes),
                start.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Backups {
            store,
            delete,
            keep,
            verify,
        } => {
            let backups = strata::BackupStore::open(store)?;
            if let Some(id) = delete {
                let freed = backups.delete(*id)?;
                println!("deleted backup {id}; {:.2} MiB freed", mib(freed));
            }
            if let Some(n) = keep {
                let (gone, freed) = backups.keep_newest(*n)?;
                println!("deleted backups {gone:?}; {:.2} MiB freed", mib(freed));
            }
            let mut damaged = false;
            for b in backups.list()? {
                let state = if *verify {
                    match backups.verify(b.id) {
                        Ok(_) => "  verified",
                        Err(e) if e.is_corruption() => {
                            eprintln!("backup {}: {e}", b.id);
                            damaged = true;
                            "  DAMAGED"
                        }
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    ""
                };
                println!(
                    "{:>6}  {}  seq {:>12}  {:>5} files  {:>10.2} MiB{state}",
                    b.id,
                    b.created_ms,
                    b.last_sequence,
                    b.files,
                    mib(b.bytes)
                );
            }
            Ok(if damaged {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Keyspaces { drop } => {
            let db = open_with(cli, "keyspaces", false, |o| o)?;
            if let Some(name) = drop {
                db.drop_keyspace(name)?;
            }
            let names = db.keyspace_names()?;
            db.close()?;
            for n in names {
                println!("{n}");
            }
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
                ..Default::default()
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
    let db = open_with(cli, "serve", true, strata_server::server_options)?;
    let cfg = strata_server::Config {
        bind: args.bind.clone(),
        port: args.port,
        requirepass: args.requirepass.clone(),
        max_bulk_len: max_bulk,
        idle_timeout: (args.timeout > 0).then(|| std::time::Duration::from_secs(args.timeout)),
        ..Default::default()
    };
    strata_server::serve_blocking(std::sync::Arc::from(db), cfg).map_err(CliError::Usage)?;
    Ok(ExitCode::SUCCESS)
}

/// Opens the database of `--dir` with the `--opt` options, and its
/// `--keyspace` if one is named (made if missing by a `create` command);
/// only `create` commands may create the database. The open's recovery
/// report, if any, goes to stderr.
fn open(cli: &Cli, command: &str, create: bool) -> Result<Store, CliError> {
    let db = open_with(cli, command, create, |o| o)?;
    let ks = match cli.keyspace.as_deref() {
        None | Some("default") => None,
        Some(name) => {
            let known = db.keyspace_names()?.iter().any(|n| n == name);
            if !known && !create {
                let _ = db.close();
                return Err(CliError::Usage(format!(
                    "the database has no keyspace {name:?} (`strata keyspaces` lists them)"
                )));
            }
            Some(db.keyspace(name, &cli.keyspace_opt)?)
        }
    };
    Ok(Store { db, ks })
}

/// An open database and, with `--keyspace`, the store of that keyspace:
/// the commands' store is the keyspace's, `close` closes the database.
struct Store {
    db: Box<dyn KvStore>,
    ks: Option<Box<dyn KvStore>>,
}

impl Store {
    /// The store the command reads and writes.
    fn as_ref(&self) -> &(dyn KvStore + 'static) {
        self.ks.as_deref().unwrap_or(&*self.db)
    }

    /// Closes the database.
    fn close(&self) -> strata::Result<()> {
        self.db.close()
    }
}

impl std::ops::Deref for Store {
    type Target = dyn KvStore;
    fn deref(&self) -> &(dyn KvStore + 'static) {
        self.as_ref()
    }
}

/// [`open`] with the options passed through `adjust` first.
fn open_with(
    cli: &Cli,
    command: &str,
    create: bool,
    adjust: impl FnOnce(Options) -> Options,
) -> Result<Box<dyn KvStore>, CliError> {
    let dir = cli.dir(command)?;
    let opts = adjust(cli.options(Options::default())?.create_if_missing(create));
    let db = strata::open(dir, opts)?;
    // What the open did not serve as written (a log tail it left out,
    // damaged slots): on stderr, so a script's output stays the data.
    if let Some(report) = db.recovery_report() {
        eprintln!("strata: the open reports:\n{report}");
    }
    Ok(db)
}

/// Bytes as lossy UTF-8, or as lowercase hex.
fn show(b: &[u8], hex: bool) -> String {
    if hex {
        b.iter().map(|x| format!("{x:02x}")).collect()
    } else {
        String::from_utf8_lossy(b).into_owned()
    }
}

/// Bytes in MiB, for printing.
fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}
