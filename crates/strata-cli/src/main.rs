//! `strata`: the command-line tool of the strata storage engine.
//!
//! Exit codes: 0 success; 1 a negative answer (`get` found nothing,
//! `verify` found damage, `demo` found a mismatch); 2 an error (bad
//! arguments, a missing or unreadable database, an I/O failure).

mod bench;
mod commands;
mod demo;
mod stress;
mod workload;

use clap::{Parser, Subcommand};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use strata::Options;
use workload::Order;

/// strata: an embedded, crash-safe, ordered key-value store (LSM core).
#[derive(Parser, Debug)]
#[command(
    name = "strata",
    version,
    about,
    max_term_width = 100,
    args_override_self = true
)]
pub struct Cli {
    /// Database directory (required by every command but `demo`).
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Engine options as name=value pairs separated by commas, e.g.
    /// `write_buffer_size=4M,compression=lz4` (may be repeated).
    #[arg(long = "opt", global = true, value_name = "NAME=VALUE,...")]
    pub opts: Vec<String>,

    /// The keyspace a data command reads and writes (`default` when
    /// absent); a command that may create the database makes it if missing.
    #[arg(long, global = true, value_name = "NAME")]
    pub keyspace: Option<String>,

    /// Options of a keyspace `--keyspace` makes (name=value pairs of the
    /// options a keyspace may set, e.g. `compression=zstd`).
    #[arg(long, global = true, value_name = "NAME=VALUE,...", default_value = "")]
    pub keyspace_opt: String,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Store VALUE under KEY (creates the database if missing).
    Put {
        key: String,
        value: String,
        /// fdatasync the WAL before returning.
        #[arg(long)]
        sync: bool,
    },
    /// Print the value of KEY; exit code 1 if it is absent.
    Get {
        key: String,
        /// Print the value hex-encoded.
        #[arg(long)]
        hex: bool,
    },
    /// Delete KEY.
    Delete {
        key: String,
        /// fdatasync the WAL before returning.
        #[arg(long)]
        sync: bool,
    },
    /// Merge OPERAND into KEY by the database's merge operator (set it with
    /// `--opt merge_operator=u64add|max|append|append:SEP`).
    Merge {
        key: String,
        operand: String,
        /// OPERAND is a decimal number, written as u64add's 8-byte
        /// little-endian operand.
        #[arg(long)]
        u64: bool,
        /// fdatasync the WAL before returning.
        #[arg(long)]
        sync: bool,
    },
    /// Delete every key in [FROM, TO) with one range tombstone.
    DeleteRange {
        from: String,
        to: String,
        /// fdatasync the WAL before returning.
        #[arg(long)]
        sync: bool,
    },
    /// Print `key<TAB>value` lines of a key range, in order.
    Scan {
        /// First key (inclusive).
        #[arg(long, value_name = "KEY")]
        from: Option<String>,
        /// End key (exclusive).
        #[arg(long, value_name = "KEY")]
        to: Option<String>,
        /// Print at most N entries.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Largest keys first.
        #[arg(long)]
        reverse: bool,
        /// Print keys and values hex-encoded instead of as (lossy) UTF-8.
        #[arg(long)]
        hex: bool,
    },
    /// Write COUNT generated keys and print the rate (creates the database if missing).
    Load(LoadArgs),
    /// Print the engine statistics and the shape of the tree.
    Stats {
        /// Print as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Compact the whole key range down the levels, then print the statistics.
    Compact,
    /// Check every file of the database without opening it; exit code 1 on damage.
    Verify,
    /// List the database's keyspaces, one name a line (`default` first);
    /// with --drop, drop one first (its data is gone for good).
    Keyspaces {
        /// Drop this keyspace.
        #[arg(long, value_name = "NAME")]
        drop: Option<String>,
    },
    /// Write a consistent copy of the database to TARGET (a new directory)
    /// that opens on its own: every write made before the command, tables
    /// hard-linked where the file system allows, copied otherwise.
    Checkpoint {
        /// The new directory.
        target: PathBuf,
    },
    /// Add a backup of the database to the backup store STORE (created if
    /// missing): every write made before the command, copying only the
    /// tables and rows no earlier backup in STORE holds.
    Backup {
        /// The backup store's directory.
        store: PathBuf,
    },
    /// Restore a backup from STORE into TARGET (a new directory), checking
    /// every file's size and crc32c; the newest backup unless --id.
    Restore {
        /// The backup store's directory.
        store: PathBuf,
        /// The new database directory.
        target: PathBuf,
        /// The backup to restore (see `strata backups`).
        #[arg(long)]
        id: Option<u64>,
    },
    /// List the backups in STORE; optionally delete some or verify all
    /// (no --dir needed). Exit code 1 when --verify finds damage.
    Backups {
        /// The backup store's directory.
        store: PathBuf,
        /// Delete this backup (and the files no other backup holds).
        #[arg(long)]
        delete: Option<u64>,
        /// Delete all but the newest N backups.
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Read every file of every backup and check its size and crc32c.
        #[arg(long)]
        verify: bool,
    },
    /// Serve the database over the Redis protocol (RESP2) until SIGINT or
    /// SIGTERM (creates the database if missing). See docs/SERVER.md.
    Serve(ServeArgs),
    /// Randomized multi-threaded workload checked against an expected state
    /// kept beside the database (`DIR.expected`); `--crash` kills it with
    /// SIGKILL at random moments and verifies after every reopen.
    Stress(stress::StressArgs),
    /// The end-to-end demo: load, read back, delete, scan, flush, compact,
    /// reopen and verify a fresh database, timing each phase.
    Demo {
        /// Number of keys (16-byte keys, 100-byte values).
        #[arg(long, default_value_t = 200_000)]
        count: u64,
        /// Seed of the key order and the values.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Benchmark strata side by side with RocksDB and LevelDB; writes a
    /// summary, report.json, report.md and charts to --out.
    Bench(Box<bench::BenchArgs>),
    /// Run compactions offloaded by databases opened with
    /// `executor=offload:ADDR` (CoPro's device side, emulated near-data
    /// processing): the worker opens the same table directory, runs the
    /// sub-task it is sent and answers with its output tables.
    CompactionWorker {
        /// Where to listen: `unix:PATH` or `HOST:PORT` (loopback).
        #[arg(long)]
        listen: String,
        /// Run only on these CPUs (comma-separated), to mimic a weaker device.
        #[arg(long, value_delimiter = ',')]
        cpus: Vec<usize>,
        /// Serve only table directories under this one (may be repeated).
        #[arg(long, value_name = "DIR")]
        allow: Vec<PathBuf>,
        /// (testing) Wait this many milliseconds before each answer.
        #[arg(long, default_value_t = 0, hide = true)]
        reply_delay_ms: u64,
    },
    /// (internal) One benchmark run in a child process.
    #[command(hide = true)]
    BenchChild {
        /// The run, as JSON.
        #[arg(long)]
        spec: String,
    },
}

#[derive(clap::Args, Debug)]
pub struct LoadArgs {
    /// Number of keys to write.
    #[arg(long)]
    pub count: u64,
    /// Bytes per key (keys are zero-padded decimal numbers).
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Key order.
    #[arg(long, value_enum, default_value_t = Order::Random)]
    pub order: Order,
    /// Seed of the key order and the values.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// fdatasync the WAL on every write.
    #[arg(long)]
    pub sync: bool,
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; use 0.0.0.0 deliberately).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// TCP port (0 picks a free one).
    #[arg(long, default_value_t = 6380)]
    pub port: u16,
    /// Require clients to AUTH with this password.
    #[arg(long, value_name = "PASSWORD")]
    pub requirepass: Option<String>,
    /// Largest bulk string a client may send, e.g. 512M (as Redis'
    /// proto-max-bulk-len).
    #[arg(long, default_value = "512M", value_name = "SIZE")]
    pub max_bulk_len: String,
    /// Close clients idle for this many seconds (0: never).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    pub timeout: u64,
}

/// Why a command failed (exit code 2).
#[derive(Debug)]
pub enum CliError {
    /// An engine error.
    Db(strata::Error),
    /// A bad combination of arguments.
    Usage(String),
    /// Writing the output failed.
    Output(std::io::Error),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Db(e) => write!(f, "{e}"),
            CliError::Usage(m) => write!(f, "{m}"),
            CliError::Output(e) => write!(f, "writing output: {e}"),
        }
    }
}

impl From<strata::Error> for CliError {
    fn from(e: strata::Error) -> Self {
        CliError::Db(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Output(e)
    }
}

impl Cli {
    /// Default options with every `--opt` applied on top of `base`.
    pub fn options(&self, base: Options) -> Result<Options, CliError> {
        let mut o = base;
        for spec in &self.opts {
            o.apply(spec)?;
        }
        o.validate()?;
        Ok(o)
    }

    /// The `--dir` a data command needs.
    pub fn dir(&self, command: &str) -> Result<&Path, CliError> {
        self.dir.as_deref().ok_or_else(|| {
            CliError::Usage(format!(
                "`strata {command}` needs --dir DIR (the database directory)"
            ))
        })
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(&cli) {
        Ok(code) => code,
        // `strata scan | head`: the reader went away; not an error.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
