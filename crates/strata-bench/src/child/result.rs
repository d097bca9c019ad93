//! What a child reports: its result line and the figures in it.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use strata::StoreStats;

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    /// Mean and percentiles of a histogram of nanoseconds.
    pub(super) fn of(h: &Histogram<u64>) -> Self {
        let us = |v: u64| v as f64 / 1000.0;
        Latency {
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.50)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// Per-level shape (files, bytes; bytes 0 where the engine does not say).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Level {
    pub files: usize,
    pub bytes: u64,
}

/// What the checkpoint of a `checkpoint` row holds, its directory walked
/// after the call (then removed).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckpointFigures {
    /// Files in the checkpoint's directory.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of `bytes`, those of files that are not hard links of the
    /// database's same-named file (another inode, or no such file): the
    /// bytes the checkpoint wrote (copied or made) rather than linked.
    pub unlinked_bytes: u64,
    /// strata's own count of table and row bytes copied because a hard
    /// link was refused (`CheckpointStats::copied_bytes`); `None` for the
    /// comparators, whose libraries do not say.
    pub engine_copied_bytes: Option<u64>,
}

/// What the backup directory of a `backup` row holds, walked after the
/// call (then removed). It was empty before the call, so every byte in it
/// is one the backup wrote.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BackupFigures {
    /// Files in the backup directory (its store's empty `LOCK` included).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// strata's own count of table and row bytes the backup copied
    /// (`BackupInfo::copied_bytes`); `None` for the comparators, whose
    /// libraries do not say.
    pub engine_copied_bytes: Option<u64>,
}

/// Everything measured in one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunResult {
    pub engine: String,
    pub workload: String,
    pub description: String,
    pub version: String,
    pub engine_settings: String,
    /// Set when the run failed; the figures are then zero.
    pub error: Option<String>,
    pub ops: u64,
    /// The run's budget (`max_run_secs`) ended it before all its operations.
    #[serde(default)]
    pub cut_short: bool,
    pub secs: f64,
    pub ops_per_sec: f64,
    pub mb_per_sec: f64,
    pub latency: Latency,
    /// Mix workloads (YCSB, U1…U9): latency of the reads alone.
    #[serde(default)]
    pub read_latency: Option<Latency>,
    /// Mix workloads: latency of the updates and inserts alone.
    #[serde(default)]
    pub write_latency: Option<Latency>,
    /// Operations completed in each full second of the run.
    pub timeline: Vec<u64>,
    /// Operations completed in each full tenth of a second (the chart of a
    /// run of a few seconds draws this).
    #[serde(default)]
    pub timeline_fine: Vec<u64>,
    pub timeline_min: f64,
    pub timeline_mean: f64,
    pub seconds_below_half_mean: usize,
    /// Counts per operation kind.
    pub op_counts: BTreeMap<String, u64>,
    pub gets: u64,
    pub gets_found: u64,
    pub user_bytes_written: u64,
    pub live_bytes: u64,
    pub dir_bytes: u64,
    pub device_write_bytes: u64,
    pub device_read_bytes: u64,
    pub cancelled_write_bytes: u64,
    /// Bytes the block device under the run's directory wrote from the
    /// start of the run until the engine was idle again and closed, its
    /// dirty pages written back ([`sys::disk_written`]); `None` without a
    /// block device.
    #[serde(default)]
    pub disk_write_bytes: Option<u64>,
    /// `disk_write_bytes` (else `device_write_bytes`, the process's count
    /// of pages it dirtied) ÷ user bytes written.
    pub wa_device: Option<f64>,
    /// `device_write_bytes` ÷ user bytes written: pages counted when
    /// dirtied, including those deleted before they reached the device.
    #[serde(default)]
    pub wa_proc: Option<f64>,
    /// Device bytes written during the measured operations only ÷ user bytes.
    #[serde(default)]
    pub wa_window: Option<f64>,
    /// Seconds the engine needed after the run to become idle.
    #[serde(default)]
    pub settle_secs: Option<f64>,
    /// When the slowest operation started, in seconds of `CLOCK_MONOTONIC`
    /// (the clock of `perf record -k CLOCK_MONOTONIC`), to find it in a
    /// trace of the run.
    #[serde(default)]
    pub slowest_op_at: Option<f64>,
    /// CPU seconds the host took from this machine's virtual CPUs during
    /// the measured operations (`steal` in `/proc/stat`, summed over the
    /// CPUs): time in which no thread here ran, which shows up in latency
    /// maxima of every engine alike.
    #[serde(default)]
    pub steal_secs: Option<f64>,
    /// The engine's own count of bytes written ÷ user bytes (strata only).
    pub wa_engine: Option<f64>,
    /// Directory size after close ÷ live user bytes.
    pub space_amp: Option<f64>,
    /// Device bytes read per get (page-cache misses only).
    pub device_read_bytes_per_get: Option<f64>,
    /// Table bytes the engine read per get (strata only).
    pub engine_read_bytes_per_get: Option<f64>,
    pub cpu_secs: f64,
    /// The part of `cpu_secs` spent in the kernel.
    #[serde(default)]
    pub sys_secs: f64,
    pub max_rss_mib: f64,
    /// Page faults of the measured operations and the close: served from
    /// the page cache (minor) and waiting for a read (major).
    #[serde(default)]
    pub minor_faults: u64,
    #[serde(default)]
    pub major_faults: u64,
    /// Time writers were stopped or slowed (strata only).
    pub stall_secs: Option<f64>,
    pub levels: Vec<Level>,
    /// Seconds spent loading before the run, settling included (not measured).
    pub load_secs: f64,
    /// strata's statistics at the end of the run (`StoreStats::to_json`;
    /// counters cover load and run).
    #[serde(default)]
    pub engine_stats: Option<serde_json::Value>,
    /// The `checkpoint` row: what the checkpoint holds.
    #[serde(default)]
    pub checkpoint: Option<CheckpointFigures>,
    /// The `backup` row: what the backup directory holds.
    #[serde(default)]
    pub backup: Option<BackupFigures>,
}

/// Child's stdout protocol: progress lines, then one result line.
pub const PROGRESS_PREFIX: &str = "progress ";
pub const RESULT_PREFIX: &str = "result ";

pub(super) fn level_shape(s: &StoreStats) -> Vec<Level> {
    s.lsm()
        .map_or(&[][..], |l| &l.levels)
        .iter()
        .map(|l| Level {
            files: l.files,
            bytes: l.bytes,
        })
        .collect()
}

/// `a / b`, `None` when `b` is 0.
pub(super) fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}
