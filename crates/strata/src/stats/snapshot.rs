//! A copy of an LSM database's counters and the shape of its tree.

use super::{mib, Stats};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Per-level shape in a snapshot.
#[derive(Debug, Clone, Default)]
pub struct LevelStats {
    pub files: usize,
    pub bytes: u64,
    pub compaction_bytes_written: u64,
    pub compaction_bytes_read: u64,
}

/// A copy of the counters plus the current shape of the tree.
#[derive(Debug, Clone, Default)]
pub struct StatsSnapshot {
    pub user_bytes_written: u64,
    pub user_writes: u64,
    pub user_reads: u64,
    pub wal_bytes: u64,
    pub wal_syncs: u64,
    pub write_groups: u64,
    pub flush_bytes: u64,
    pub flush_count: u64,
    pub flush_micros: u64,
    pub compaction_count: u64,
    pub compaction_micros: u64,
    pub compaction_bytes_read: u64,
    pub compaction_bytes_written: u64,
    pub trivial_moves: u64,
    pub stall_count: u64,
    pub stall_micros: u64,
    pub slowdown_count: u64,
    pub slowdown_micros: u64,
    pub pace_count: u64,
    pub pace_micros: u64,
    pub wal_spares_used: u64,
    pub wal_spare_failures: u64,
    pub recovery_stopped: u64,
    pub recovery_logs_dropped: u64,
    pub recovery_regions_skipped: u64,
    /// Memtable arena chunks the filler thread made ahead.
    pub arena_chunks_made_ahead: u64,
    /// Arena chunks a writer had to make itself (none was ready).
    pub arena_chunk_misses: u64,
    pub shortcut_hits: u64,
    pub shortcut_misses: u64,
    pub stale_compactions: u64,
    pub stale_dropped: u64,
    pub read_compactions: u64,
    /// CPU time of the threads that ran compactions.
    pub compaction_cpu_micros: u64,
    /// Busy time of pipelined read stages.
    pub compaction_read_busy_micros: u64,
    /// Busy time of merge stages (all of a linear sub-task).
    pub compaction_merge_busy_micros: u64,
    /// Busy time of pipelined write stages.
    pub compaction_write_busy_micros: u64,
    /// Compaction sub-tasks run (a linear plan is one).
    pub compaction_subtasks: u64,
    /// Sub-tasks run as a read → merge → write pipeline.
    pub compaction_pipelined_subtasks: u64,
    /// Sub-tasks a compaction worker ran.
    pub compaction_offloaded_subtasks: u64,
    /// Sub-tasks a failed worker left, re-run here.
    pub compaction_offload_fallbacks: u64,
    /// Most compactions that ran at the same time.
    pub compactions_running_max: u64,
    /// Times a running compaction paused to give its CPU slot to a flush
    /// (`Options::background_cpus`).
    pub compaction_give_ways: u64,
    /// The matrix container (`l0=matrix`; zeros otherwise).
    pub matrix: MatrixStats,
    /// Entries and bytes of the update table (0 without stale tracking).
    pub update_table_entries: u64,
    pub update_table_bytes: u64,
    pub manifest_bytes: u64,
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

/// The memory budget (`Options::memory_budget`, see `crate::budget`) as
/// resolved at open, and what its parts hold now, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// The whole budget; 0 when there is none.
    pub budget: u64,
    /// The memtables' share, the block cache's and the pins' (index and
    /// filter blocks of open tables).
    pub memtables_share: u64,
    pub block_cache_share: u64,
    pub pins_share: u64,
    /// Bytes of tables the page cache can be expected to hold.
    pub page_cache_room: u64,
    /// The write buffer and block cache sizes in force (lowered to fit
    /// their shares where the options asked for more).
    pub write_buffer_size: u64,
    pub block_cache_capacity: u64,
    /// Held now: the memtables (active and immutable) with the arena
    /// chunks kept for the next ones, the block cache, the pins.
    pub memtables: u64,
    pub block_cache: u64,
    pub pins: u64,
    /// The row cache's capacity (half the page cache's room while tables
    /// are read directly, otherwise 0) and the bytes it holds.
    pub row_cache_capacity: u64,
    pub row_cache: u64,
}

impl StatsSnapshot {
    pub(crate) fn from_counters(s: &Stats) -> Self {
        let g = |c: &AtomicU64| c.load(Relaxed);
        StatsSnapshot {
            user_bytes_written: g(&s.user_bytes_written),
            user_writes: g(&s.user_writes),
            user_reads: s.user_reads.get(),
            wal_bytes: g(&s.wal_bytes),
            wal_syncs: g(&s.wal_syncs),
            write_groups: g(&s.write_groups),
            flush_bytes: g(&s.flush_bytes),
            flush_count: g(&s.flush_count),
            flush_micros: g(&s.flush_micros),
            compaction_count: g(&s.compaction_count),
            compaction_micros: g(&s.compaction_micros),
            compaction_bytes_read: g(&s.compaction_bytes_read),
            compaction_bytes_written: g(&s.compaction_bytes_written),
            trivial_moves: g(&s.trivial_moves),
            stall_count: g(&s.stall_count),
            stall_micros: g(&s.stall_micros),
            slowdown_count: g(&s.slowdown_count),
            slowdown_micros: g(&s.slowdown_micros),
            pace_count: g(&s.pace_count),
            pace_micros: g(&s.pace_micros),
            wal_spares_used: g(&s.wal_spares_used),
            wal_spare_failures: g(&s.wal_spare_failures),
            recovery_stopped: g(&s.recovery_stopped),
            recovery_logs_dropped: g(&s.recovery_logs_dropped),
            recovery_regions_skipped: g(&s.recovery_regions_skipped),
            shortcut_hits: g(&s.shortcut_hits),
            shortcut_misses: g(&s.shortcut_misses),
            stale_compactions: g(&s.stale_compactions),
            read_compactions: g(&s.read_compactions),
            stale_dropped: g(&s.stale_dropped),
            compaction_cpu_micros: g(&s.compaction_cpu_micros),
            compaction_read_busy_micros: g(&s.compaction_read_busy_micros),
            compaction_merge_busy_micros: g(&s.compaction_merge_busy_micros),
            compaction_write_busy_micros: g(&s.compaction_write_busy_micros),
            compaction_subtasks: g(&s.compaction_subtasks),
            compaction_pipelined_subtasks: g(&s.compaction_pipelined_subtasks),
            compaction_offloaded_subtasks: g(&s.compaction_offloaded_subtasks),
            compaction_offload_fallbacks: g(&s.compaction_offload_fallbacks),
            compactions_running_max: g(&s.compactions_running_max),
            compaction_give_ways: g(&s.compaction_give_ways),
            matrix: MatrixStats {
                column_compactions: g(&s.matrix_column_compactions),
                column_bytes: g(&s.matrix_column_bytes),
                ..MatrixStats::default()
            },
            ..StatsSnapshot::default()
        }
    }

    /// Bytes the engine wrote to storage (WAL + flush + compaction + manifest).
    pub fn engine_bytes_written(&self) -> u64 {
        self.wal_bytes + self.flush_bytes + self.compaction_bytes_written + self.manifest_bytes
    }

    /// Engine bytes written ÷ user bytes (key + value) written.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            0.0
        } else {
            self.engine_bytes_written() as f64 / self.user_bytes_written as f64
        }
    }

    /// Block-cache hit rate in [0, 1].
    pub fn cache_hit_rate(&self) -> f64 {
        let total = self.block_cache_hits + self.block_cache_misses;
        if total == 0 {
            0.0
        } else {
            self.block_cache_hits as f64 / total as f64
        }
    }

    /// The snapshot as a JSON object.
    pub fn to_json(&self) -> String {
        let levels: Vec<String> = self
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                format!(
                    "{{\"level\":{i},\"files\":{},\"bytes\":{},\"compaction_bytes_written\":{},\"compaction_bytes_read\":{}}}",
                    l.files, l.bytes, l.compaction_bytes_written, l.compaction_bytes_read
                )
            })
            .collect();
        format!(
            "{{\"user_bytes_written\":{},\"user_writes\":{},\"user_reads\":{},\"wal_bytes\":{},\"wal_syncs\":{},\
             \"write_groups\":{},\"flush_bytes\":{},\"flush_count\":{},\"flush_micros\":{},\"compaction_count\":{},\
             \"compaction_micros\":{},\"compaction_bytes_read\":{},\"compaction_bytes_written\":{},\"trivial_moves\":{},\
             \"stall_count\":{},\"stall_micros\":{},\"slowdown_count\":{},\"slowdown_micros\":{},\"pace_count\":{},\"pace_micros\":{},\"wal_spares_used\":{},\"wal_spare_failures\":{},\"recovery_stopped\":{},\"recovery_logs_dropped\":{},\"recovery_regions_skipped\":{},\"arena_chunks_made_ahead\":{},\"arena_chunk_misses\":{},\
             \"shortcut_hits\":{},\"shortcut_misses\":{},\"stale_compactions\":{},\"stale_dropped\":{},\"read_compactions\":{},\
             \"compaction_cpu_micros\":{},\"compaction_read_busy_micros\":{},\"compaction_merge_busy_micros\":{},\"compaction_write_busy_micros\":{},\"compaction_subtasks\":{},\"compaction_pipelined_subtasks\":{},\"compaction_offloaded_subtasks\":{},\"compaction_offload_fallbacks\":{},\"compactions_running_max\":{},\"compaction_give_ways\":{},\
             \"update_table_entries\":{},\"update_table_bytes\":{},\"manifest_bytes\":{},\
             \"table_bytes_read\":{},\"block_cache_hits\":{},\"block_cache_misses\":{},\"block_cache_usage\":{},\"row_cache_hits\":{},\"row_cache_misses\":{},\
             \"open_tables\":{},\"mapped_table_bytes\":{},\"pinned_index_filter_bytes\":{},\"table_cache_hits\":{},\
             \"table_cache_misses\":{},\"table_cache_evictions\":{},\"warmed_tables\":{},\"warmed_table_bytes\":{},\"tables_mapped\":{},\"memory\":{},\"memtable_bytes\":{},\"immutable_memtables\":{},\"last_sequence\":{},\
             \"engine_bytes_written\":{},\"write_amplification\":{:.4},\"cache_hit_rate\":{:.4},\"matrix\":{},\"levels\":[{}]}}",
            self.user_bytes_written,
            self.user_writes,
            self.user_reads,
            self.wal_bytes,
            self.wal_syncs,
            self.write_groups,
            self.flush_bytes,
            self.flush_count,
            self.flush_micros,
            self.compaction_count,
            self.compaction_micros,
            self.compaction_bytes_read,
            self.compaction_bytes_written,
            self.trivial_moves,
            self.stall_count,
            self.stall_micros,
            self.slowdown_count,
            self.slowdown_micros,
            self.pace_count,
            self.pace_micros,
            self.wal_spares_used,
            self.wal_spare_failures,
            self.recovery_stopped,
            self.recovery_logs_dropped,
            self.recovery_regions_skipped,
            self.arena_chunks_made_ahead,
            self.arena_chunk_misses,
            self.shortcut_hits,
            self.shortcut_misses,
            self.stale_compactions,
            self.stale_dropped,
            self.read_compactions,
            self.compaction_cpu_micros,
            self.compaction_read_busy_micros,
            self.compaction_merge_busy_micros,
            self.compaction_write_busy_micros,
            self.compaction_subtasks,
            self.compaction_pipelined_subtasks,
            self.compaction_offloaded_subtasks,
            self.compaction_offload_fallbacks,
            self.compactions_running_max,
            self.compaction_give_ways,
            self.update_table_entries,
            self.update_table_bytes,
            self.manifest_bytes,
            self.table_bytes_read,
            self.block_cache_hits,
            self.block_cache_misses,
            self.block_cache_usage,
            self.row_cache_hits,
            self.row_cache_misses,
            self.open_tables,
            self.mapped_table_bytes,
            self.pinned_index_filter_bytes,
            self.table_cache_hits,
            self.table_cache_misses,
            self.table_cache_evictions,
            self.warmed_tables,
            self.warmed_table_bytes,
            self.tables_mapped,
            self.memory.to_json(),
            self.memtable_bytes,
            self.immutable_memtables,
            self.last_sequence,
            self.engine_bytes_written(),
            self.write_amplification(),
            self.cache_hit_rate(),
            self.matrix.to_json(),
            levels.join(",")
        )
    }
}

/// The matrix container's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MatrixStats {
    pub rows: usize,
    /// Bytes of the row files, and of their cells not compacted yet.
    pub bytes: u64,
    pub remaining_bytes: u64,
    pub segments: usize,
    pub column_compactions: u64,
    /// Row bytes the column compactions took.
    pub column_bytes: u64,
    /// Lookups that reached the container, the key comparisons their row
    /// searches made, the rows they searched and the segments their bloom
    /// filters skipped.
    pub lookups: u64,
    pub comparisons: u64,
    pub rows_searched: u64,
    pub segments_skipped: u64,
}

impl MatrixStats {
    /// Key comparisons per row searched (the hints shrink it).
    pub fn comparisons_per_row(&self) -> f64 {
        if self.rows_searched == 0 {
            0.0
        } else {
            self.comparisons as f64 / self.rows_searched as f64
        }
    }

    pub fn to_json(&self) -> String {
        format!(
            "{{\"rows\":{},\"bytes\":{},\"remaining_bytes\":{},\"segments\":{},\"column_compactions\":{},\
             \"column_bytes\":{},\"lookups\":{},\"comparisons\":{},\"rows_searched\":{},\"segments_skipped\":{}}}",
            self.rows,
            self.bytes,
            self.remaining_bytes,
            self.segments,
            self.column_compactions,
            self.column_bytes,
            self.lookups,
            self.comparisons,
            self.rows_searched,
            self.segments_skipped
        )
    }
}

impl MemoryStats {
    /// The figures as a JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"budget\":{},\"memtables_share\":{},\"block_cache_share\":{},\"pins_share\":{},\
             \"page_cache_room\":{},\"write_buffer_size\":{},\"block_cache_capacity\":{},\
             \"memtables\":{},\"block_cache\":{},\"pins\":{},\"row_cache_capacity\":{},\"row_cache\":{}}}",
            self.budget,
            self.memtables_share,
            self.block_cache_share,
            self.pins_share,
            self.page_cache_room,
            self.write_buffer_size,
            self.block_cache_capacity,
            self.memtables,
            self.block_cache,
            self.pins,
            self.row_cache_capacity,
            self.row_cache
        )
    }
}

impl fmt::Display for StatsSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "level  files      size MiB   compacted-in MiB  compacted-out MiB"
        )?;
        for (i, l) in self.levels.iter().enumerate() {
            writeln!(
                f,
                "L{i:<5} {:>5} {:>13.2} {:>18.2} {:>18.2}",
                l.files,
                mib(l.bytes),
                mib(l.compaction_bytes_written),
                mib(l.compaction_bytes_read)
            )?;
        }
        writeln!(
            f,
            "user writes:        {} ({:.2} MiB)",
            self.user_writes,
            mib(self.user_bytes_written)
        )?;
        writeln!(f, "user reads:         {}", self.user_reads)?;
        writeln!(
            f,
            "WAL written:        {:.2} MiB in {} groups, {} syncs",
            mib(self.wal_bytes),
            self.write_groups,
            self.wal_syncs
        )?;
        writeln!(
            f,
            "flushes:            {} ({:.2} MiB, {:.3} s)",
            self.flush_count,
            mib(self.flush_bytes),
            self.flush_micros as f64 / 1e6
        )?;
        writeln!(
            f,
            "compactions:        {} ({:.2} MiB read, {:.2} MiB written, {:.3} s, {} trivial moves, {} read-triggered)",
            self.compaction_count,
            mib(self.compaction_bytes_read),
            mib(self.compaction_bytes_written),
            self.compaction_micros as f64 / 1e6,
            self.trivial_moves,
            self.read_compactions
        )?;
        writeln!(f, "write amplification: {:.3}", self.write_amplification())?;
        if self.update_table_entries > 0 || self.stale_compactions > 0 {
            writeln!(
                f,
                "stale tracking:     update table {} entries ({:.2} MiB); shortcut {} hits, {} misses; \
                 {} early compactions; {} stale versions dropped",
                self.update_table_entries,
                mib(self.update_table_bytes),
                self.shortcut_hits,
                self.shortcut_misses,
                self.stale_compactions,
                self.stale_dropped
            )?;
        }
        let m = &self.matrix;
        if m.rows > 0 || m.column_compactions > 0 {
            writeln!(
                f,
                "matrix container:   {} rows in {} segments, {:.2} MiB ({:.2} MiB not compacted); \
                 {} column compactions ({:.2} MiB of rows); {} lookups, {:.1} comparisons per row \
                 searched, {} segments skipped",
                m.rows,
                m.segments,
                mib(m.bytes),
                mib(m.remaining_bytes),
                m.column_compactions,
                mib(m.column_bytes),
                m.lookups,
                m.comparisons_per_row(),
                m.segments_skipped
            )?;
        }
        writeln!(
            f,
            "stalls:             {} ({:.3} s); slowdowns {} ({:.3} s); paced {} ({:.3} s)",
            self.stall_count,
            self.stall_micros as f64 / 1e6,
            self.slowdown_count,
            self.slowdown_micros as f64 / 1e6,
            self.pace_count,
            self.pace_micros as f64 / 1e6
        )?;
        writeln!(
            f,
            "table bytes read:   {:.2} MiB",
            mib(self.table_bytes_read)
        )?;
        writeln!(
            f,
            "block cache:        {:.1}% hits ({} hits, {} misses), {:.2} MiB used",
            self.cache_hit_rate() * 100.0,
            self.block_cache_hits,
            self.block_cache_misses,
            mib(self.block_cache_usage),
        )?;
        if self.memory.row_cache_capacity > 0 {
            writeln!(
                f,
                "row cache:          {} hits, {} misses, {:.2} of {:.2} MiB used",
                self.row_cache_hits,
                self.row_cache_misses,
                mib(self.memory.row_cache),
                mib(self.memory.row_cache_capacity),
            )?;
        }
        writeln!(
            f,
            "table cache:        {} open ({:.2} MiB mapped, pinned index+filter {:.2} MiB); {} hits, {} misses, {} evictions; {} warmed ({:.2} MiB)",
            self.open_tables,
            mib(self.mapped_table_bytes),
            mib(self.pinned_index_filter_bytes),
            self.table_cache_hits,
            self.table_cache_misses,
            self.table_cache_evictions,
            self.warmed_tables,
            mib(self.warmed_table_bytes),
        )?;
        let m = &self.memory;
        if m.budget > 0 {
            writeln!(
                f,
                "memory budget:      {:.1} MiB: memtables {:.1} of {:.1} MiB (write buffer {:.1} MiB), \
                 block cache {:.1} of {:.1} MiB, pins {:.1} of {:.1} MiB; page cache room {:.1} MiB, tables read {}",
                mib(m.budget),
                mib(m.memtables),
                mib(m.memtables_share),
                mib(m.write_buffer_size),
                mib(m.block_cache),
                mib(m.block_cache_share),
                mib(m.pins),
                mib(m.pins_share),
                mib(m.page_cache_room),
                if self.tables_mapped { "mapped" } else { "with pread" },
            )?;
        }
        write!(
            f,
            "memtables:          {:.2} MiB active, {} immutable; last sequence {}",
            mib(self.memtable_bytes),
            self.immutable_memtables,
            self.last_sequence
        )
    }
}
