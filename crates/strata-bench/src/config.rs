//! What a benchmark run is asked to do: the preset's or the command line's
//! engines, workloads, sizes, settings and limits.

use crate::settings::EngineSettings;
use crate::workload::Params;
use std::path::PathBuf;

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
    /// an image, or a chain's load, gets four times as long. The run is
    /// reported as killed by the limit and the engine's later repeats of
    /// that row are not run.
    pub time_limit: Option<f64>,
    /// Run every row on one database per engine (db_bench's
    /// `--use_existing_db`): the first row, `ycsb-load`, loads it (once per
    /// engine, whatever `repeats` is), and every later row runs, in the
    /// listed order, on what the rows before it left, started with its
    /// files evicted from the page cache. No copies: for data sets too
    /// large to copy per run. See `runner::chain`.
    pub chain: bool,
}
