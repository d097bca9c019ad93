//! The engine's counters, declared once in the table below: each line
//! makes an `AtomicU64` in [`Stats`] (added to on the hot paths with
//! relaxed atomics), a `u64` of the same name in [`StatsSnapshot`], its copy
//! in `StatsSnapshot::from_counters` and its key in `StatsSnapshot::to_json`.
//! Adding a counter is one line here. What is not a plain event count (a
//! striped counter, per-level arrays, figures read from the caches and the
//! version when a snapshot is taken) is declared after the table, in the
//! struct it belongs to.

use super::{LevelStats, MemoryStats, RowStats, Striped, MAX_LEVELS};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    (
        counters { $( $(#[doc = $doc:literal])* $name:ident, )* }
        stats { $($stats_extra:tt)* }
        snapshot { $($snapshot_extra:tt)* }
    ) => {
        /// Live counters owned by a database.
        #[derive(Default)]
        pub struct Stats {
            $( $(#[doc = $doc])* pub $name: AtomicU64, )*
            $($stats_extra)*
        }

        /// A copy of the counters plus the current shape of the tree.
        #[derive(Debug, Clone, Default)]
        pub struct StatsSnapshot {
            $( $(#[doc = $doc])* pub $name: u64, )*
            $($snapshot_extra)*
        }

        impl StatsSnapshot {
            /// The names of the counters of the table, in its order.
            pub const COUNTERS: &'static [&'static str] = &[$(stringify!($name)),*];

            /// A snapshot holding the counters' values (every other
            /// figure at its default).
            pub(super) fn counters_of(s: &Stats) -> Self {
                StatsSnapshot {
                    $( $name: s.$name.load(Relaxed), )*
                    ..StatsSnapshot::default()
                }
            }

            /// Appends `"name":value,` for every counter of the table.
            pub(super) fn counters_json(&self, out: &mut String) {
                $( let _ = write!(out, "\"{}\":{},", stringify!($name), self.$name); )*
            }
        }
    };
}

counters! {
    counters {
        /// Key and value bytes of acknowledged writes, and their entries.
        user_bytes_written,
        user_writes,
        /// Bytes appended to write-ahead logs, and the syncs of logs.
        wal_bytes,
        wal_syncs,
        /// Commit groups written (one WAL record each).
        write_groups,
        /// Memtable flushes: table bytes written, flushes, their time.
        flush_bytes,
        flush_count,
        flush_micros,
        /// Compactions (moves included), their time, and the table bytes they read and wrote.
        compaction_count,
        compaction_micros,
        compaction_bytes_read,
        compaction_bytes_written,
        /// Trivial-move plans (each moves one or more tables).
        trivial_moves,
        /// Write groups that waited for background work (every memtable slot taken, L0 stop trigger, hard debt limit), and the time they waited.
        stall_count,
        stall_micros,
        /// Write groups admitted at the slowdown's rate (L0's slowdown trigger or the soft debt limit; `sched::slowdown`), and the time they slept.
        slowdown_count,
        slowdown_micros,
        /// Write groups delayed by write pacing, and the time they slept.
        pace_count,
        pace_micros,
        /// Memtable switches that took a WAL made ahead by a background thread.
        wal_spares_used,
        /// Logs a background thread failed to make ahead (the switch then
        /// made its own, reporting any failure).
        wal_spare_failures,
        /// Memtables of a keyspace switched because the logs kept for
        /// flushes passed their bound (a keyspace written rarely).
        wal_forced_switches,
        /// Memtables switched to keep every keyspace's memtables within the
        /// memtables' share of the memory budget, and write groups that
        /// waited for a flush because they were at it (also counted in
        /// `stall_count`).
        memtable_budget_switches,
        memtable_budget_stalls,
        /// What the open's log replay left out: 1 when it stopped early (a
        /// torn tail, damage, or a gap in the history; `Db::recovery_report`
        /// says where and why), the logs after that one it did not replay, and
        /// the damaged regions `SkipAnyCorrupted` skipped.
        recovery_stopped,
        recovery_logs_dropped,
        recovery_regions_skipped,
        /// Gets answered by the table the update table named.
        shortcut_hits,
        /// Gets where the update table named a table that did not answer
        /// (gone from the reader's version, or not holding the version).
        shortcut_misses,
        /// Compactions the stale picker started early.
        stale_compactions,
        /// Versions compactions dropped because a newer one was tracked.
        stale_dropped,
        /// Compactions started because point lookups kept missing a table.
        read_compactions,
        /// CPU time of the threads that ran compactions.
        compaction_cpu_micros,
        /// Busy time of pipelined read stages.
        compaction_read_busy_micros,
        /// Busy time of merge stages (all of a linear sub-task).
        compaction_merge_busy_micros,
        /// Busy time of pipelined write stages.
        compaction_write_busy_micros,
        /// Compaction sub-tasks run (a linear plan is one).
        compaction_subtasks,
        /// Sub-tasks run as a read → merge → write pipeline.
        compaction_pipelined_subtasks,
        /// Sub-tasks a compaction worker ran.
        compaction_offloaded_subtasks,
        /// Sub-tasks a failed worker left, re-run here.
        compaction_offload_fallbacks,
        /// Compactions of tables holding versions a range tombstone hides
        /// (`Trigger::RangeDel`).
        range_del_compactions,
        /// Tables deleted unread: a range tombstone hid every entry.
        range_dropped_tables,
        /// Gets whose newest version was a merge operand (read by folding).
        merge_folds,
        /// Merge operands flushes and compactions folded away (into a value
        /// or a combined operand).
        merge_operands_folded,
        /// Values compaction filters removed (written as deletions).
        filter_removed,
        /// Values compaction filters rewrote.
        filter_changed,
        /// Compactions run again without the filter: a snapshot was taken
        /// while the filter changed entries.
        filter_reruns,
        /// Versions flushes and compactions wrote as deletions because
        /// they expired (`ttl_secs`).
        expired_versions,
        /// Tables deleted unread: every entry had expired (`ttl_secs`).
        expired_dropped_tables,
        /// Most compactions that ran at the same time.
        compactions_running_max,
        /// Times a running compaction paused to give its CPU slot to a flush
        /// (`Options::background_cpus`).
        compaction_give_ways,
    }
    stats {
        pub user_reads: Striped,
        pub compaction_written_by_level: [AtomicU64; MAX_LEVELS],
        pub compaction_read_by_level: [AtomicU64; MAX_LEVELS],
    }
    snapshot {
        pub user_reads: u64,
        /// Memtable arena chunks the filler thread made ahead.
        pub arena_chunks_made_ahead: u64,
        /// Arena chunks a writer had to make itself (none was ready).
        pub arena_chunk_misses: u64,
        /// Level 0's rows (`l0=matrix`; zeros otherwise).
        pub l0_rows: RowStats,
        /// Entries and bytes of the update table (0 without stale tracking).
        pub update_table_entries: u64,
        pub update_table_bytes: u64,
        /// Range tombstones the version holds (flushed, not yet retired),
        /// and the bytes of their keys.
        pub range_tombstones: u64,
        pub range_tombstone_bytes: u64,
        pub manifest_bytes: u64,
        /// Bytes per second writers are admitted at while slowed: 0.8 × the
        /// rate compactions lately drained level 0, or 16 MiB/s before the
        /// first drain (`sched/slowdown.rs`).
        pub slowdown_rate: u64,
        /// Bytes read from table files: metadata, data blocks on block-cache
        /// misses, and every use of an uncompressed block of a memory-mapped
        /// table (those bypass the block cache, so they count in neither
        /// `block_cache_hits` nor `block_cache_misses`).
        pub table_bytes_read: u64,
        pub block_cache_hits: u64,
        pub block_cache_misses: u64,
        pub block_cache_usage: u64,
        /// Point lookups in tables read directly answered by the row cache, and
        /// those that were not (0 while tables are mapped).
        pub row_cache_hits: u64,
        pub row_cache_misses: u64,
        /// Tables the table cache holds open (at most `max_open_files − 10`).
        pub open_tables: usize,
        /// Bytes of table files memory-mapped by the open tables.
        pub mapped_table_bytes: u64,
        /// Index and filter bytes pinned by the open tables.
        pub pinned_index_filter_bytes: u64,
        /// Table-cache lookups that found their table open.
        pub table_cache_hits: u64,
        /// Table-cache lookups that opened their table.
        pub table_cache_misses: u64,
        /// Tables the table cache closed to make room.
        pub table_cache_evictions: u64,
        /// Requests to read a whole table into the page cache because lookups
        /// kept waiting for the device (`Options::warm_budget`; a table warmed
        /// again later counts again), and the bytes of the tables warmed the
        /// first time.
        pub warmed_tables: u64,
        pub warmed_table_bytes: u64,
        /// Tables are read through memory maps (`Options::mmap_reads` while the
        /// live tables fit in `memory.page_cache_room`); otherwise with
        /// pread(2) through the block cache.
        pub tables_mapped: bool,
        /// The memory budget, its shares and what each part holds.
        pub memory: MemoryStats,
        pub memtable_bytes: u64,
        pub immutable_memtables: usize,
        pub last_sequence: u64,
        pub levels: Vec<LevelStats>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every counter of the table is copied into a snapshot and written
    /// to its JSON, once, under its own name.
    #[test]
    fn every_counter_reaches_the_snapshot_and_its_json() {
        let stats = Stats::default();
        stats.wal_bytes.store(7, Relaxed);
        stats.compaction_give_ways.store(11, Relaxed);
        let snap = StatsSnapshot::from_counters(&stats);
        assert_eq!((snap.wal_bytes, snap.compaction_give_ways), (7, 11));
        let json = snap.to_json();
        let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        for name in StatsSnapshot::COUNTERS {
            assert_eq!(json.matches(&format!("\"{name}\":")).count(), 1, "{name}");
            assert!(v.get(name).is_some_and(|x| x.is_u64()), "{name}");
        }
        assert_eq!(v["wal_bytes"], 7);
        assert_eq!(v["compaction_give_ways"], 11);
    }
}
