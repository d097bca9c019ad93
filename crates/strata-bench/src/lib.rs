//! strata-bench: runs the same workloads on strata, RocksDB, LevelDB and fjall,
//! each engine × workload in its own child process, and writes a terminal
//! summary, `report.json`, `report.md` and charts. See `docs/BENCHMARKS.md`.
//!
//! The `strata bench` command drives [`runner::run`]; the hidden
//! `strata bench-child` command is [`child::child_main`].

pub mod charts;
pub mod child;
pub mod config;
pub mod engine;
#[cfg(feature = "comparators")]
pub mod ffi;
#[cfg(feature = "comparators")]
pub mod fjall_store;
pub mod gen;
pub mod limits;
pub mod report;
pub mod runner;
pub mod settings;
pub mod sys;
pub mod workload;

use std::path::PathBuf;

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad flags or an unknown engine/workload/preset.
    #[error("{0}")]
    Usage(String),
    /// An engine call failed.
    #[error("engine error: {0}")]
    Engine(#[from] strata::Error),
    /// A file or directory operation failed.
    #[error("I/O error on {path}: {source}", path = .0.display(), source = .1)]
    Io(PathBuf, std::io::Error),
    /// A child process misbehaved.
    #[error("child process: {0}")]
    Child(String),
    /// Drawing a chart failed.
    #[error("chart {0}")]
    Chart(String),
    /// (De)serialising a spec or report failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A C library reported an error.
    #[cfg(feature = "comparators")]
    #[error(transparent)]
    Ffi(#[from] ffi::FfiError),
}
