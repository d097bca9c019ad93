//! Engine statistics: counters updated with relaxed atomics on
//! the hot paths, read as a consistent-enough [`StatsSnapshot`].

mod snapshot;
mod store;
mod striped;

pub use snapshot::{LevelStats, MatrixStats, MemoryStats, StatsSnapshot};
pub use store::{EngineStats, KvellStats, StoreStats};
pub use striped::Striped;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Maximum number of levels tracked per level.
pub const MAX_LEVELS: usize = 32;

/// Live counters owned by a database.
#[derive(Default)]
pub struct Stats {
    pub user_bytes_written: AtomicU64,
    pub user_writes: AtomicU64,
    pub user_reads: Striped,
    pub wal_bytes: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub write_groups: AtomicU64,
    pub flush_bytes: AtomicU64,
    pub flush_count: AtomicU64,
    pub flush_micros: AtomicU64,
    pub compaction_count: AtomicU64,
    pub compaction_micros: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    /// Trivial-move plans (each moves one or more tables).
    pub trivial_moves: AtomicU64,
    pub compaction_written_by_level: [AtomicU64; MAX_LEVELS],
    pub compaction_read_by_level: [AtomicU64; MAX_LEVELS],
    pub stall_count: AtomicU64,
    pub stall_micros: AtomicU64,
    pub slowdown_count: AtomicU64,
    pub slowdown_micros: AtomicU64,
    /// Write groups delayed by write pacing, and the time they slept.
    pub pace_count: AtomicU64,
    pub pace_micros: AtomicU64,
    /// Memtable switches that took a WAL made ahead by a background thread.
    pub wal_spares_used: AtomicU64,
    /// Logs a background thread failed to make ahead (the switch then
    /// made its own, reporting any failure).
    pub wal_spare_failures: AtomicU64,
    /// What the open's log replay left out: 1 when it stopped early (a
    /// torn tail, damage, or a gap in the history; `Db::recovery_report`
    /// says where and why), the logs after that one it did not replay, and
    /// the damaged regions `SkipAnyCorrupted` skipped.
    pub recovery_stopped: AtomicU64,
    pub recovery_logs_dropped: AtomicU64,
    pub recovery_regions_skipped: AtomicU64,
    /// Gets answered by the table the update table named.
    pub shortcut_hits: AtomicU64,
    /// Gets where the update table named a table that did not answer
    /// (gone from the reader's version, or not holding the version).
    pub shortcut_misses: AtomicU64,
    /// Compactions the stale picker started early.
    pub stale_compactions: AtomicU64,
    /// Versions compactions dropped because a newer one was tracked.
    pub stale_dropped: AtomicU64,
    /// Compactions started because point lookups kept missing a table.
    pub read_compactions: AtomicU64,
    /// CPU time of the threads that ran compactions.
    pub compaction_cpu_micros: AtomicU64,
    /// Busy time of pipelined read stages.
    pub compaction_read_busy_micros: AtomicU64,
    /// Busy time of merge stages (all of a linear sub-task).
    pub compaction_merge_busy_micros: AtomicU64,
    /// Busy time of pipelined write stages.
    pub compaction_write_busy_micros: AtomicU64,
    /// Compaction sub-tasks run (a linear plan is one).
    pub compaction_subtasks: AtomicU64,
    /// Sub-tasks run as a read → merge → write pipeline.
    pub compaction_pipelined_subtasks: AtomicU64,
    /// Sub-tasks a compaction worker ran.
    pub compaction_offloaded_subtasks: AtomicU64,
    /// Sub-tasks a failed worker left, re-run here.
    pub compaction_offload_fallbacks: AtomicU64,
    /// Most compactions that ran at the same time.
    pub compactions_running_max: AtomicU64,
    /// Times a running compaction paused to give its CPU slot to a flush.
    pub compaction_give_ways: AtomicU64,
    /// Column compactions of the matrix container and the row bytes they read.
    pub matrix_column_compactions: AtomicU64,
    pub matrix_column_bytes: AtomicU64,
}

impl Stats {
    #[inline]
    pub fn add(counter: &AtomicU64, v: u64) {
        counter.fetch_add(v, Relaxed);
    }
}

/// Bytes as MiB, for the reports.
fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}
