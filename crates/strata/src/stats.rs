//! Engine statistics: counters updated with relaxed atomics on
//! the hot paths, read as a consistent-enough [`StatsSnapshot`].

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Slots of a [`Striped`] counter (a power of two).
const STRIPES: usize = 4;

/// One slot of a [`Striped`] counter, alone on its cache lines (two: the
/// adjacent-line prefetcher pairs them).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot(AtomicU64);

/// A counter that threads add to on a shared hot path (every point lookup):
/// each thread adds to its own slot, so two readers do not pass one cache
/// line back and forth; a read sums the slots.
#[derive(Debug, Default)]
pub struct Striped([Slot; STRIPES]);

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Relaxed) & (STRIPES - 1);
}

impl Striped {
    #[inline]
    pub fn add(&self, v: u64) {
        // Stripe 0 for a thread whose locals are gone (a destructor).
        let i = STRIPE.try_with(|s| *s).unwrap_or(0) & (STRIPES - 1);
        self.0[i].0.fetch_add(v, Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Relaxed)).sum()
    }
}

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
             \"table_bytes_read\":{},\"block_cache_hits\":{},\"block_cache_misses\":{},\"block_cache_usage\":{},\
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
             \"memtables\":{},\"block_cache\":{},\"pins\":{}}}",
            self.budget,
            self.memtables_share,
            self.block_cache_share,
            self.pins_share,
            self.page_cache_room,
            self.write_buffer_size,
            self.block_cache_capacity,
            self.memtables,
            self.block_cache,
            self.pins
        )
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
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

/// Engine-neutral figures of a store ([`crate::KvStore::stats`]), with the
/// engine's own figures in `detail`.
#[derive(Debug, Clone)]
pub struct StoreStats {
    /// The engine's short name (`lsm`, `kvell`, or a comparator's).
    pub engine: &'static str,
    pub user_writes: u64,
    pub user_reads: u64,
    /// Key and value bytes the user wrote.
    pub user_bytes_written: u64,
    /// Bytes the engine wrote to its files (WAL, tables and manifest; slab
    /// pages).
    pub disk_bytes_written: u64,
    /// Bytes the engine read from its files.
    pub disk_bytes_read: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Bytes the engine's caches hold.
    pub cache_bytes: u64,
    pub detail: EngineStats,
}

/// The engine-specific part of [`StoreStats`].
#[derive(Debug, Clone)]
pub enum EngineStats {
    Lsm(Box<StatsSnapshot>),
    Kvell(Box<KvellStats>),
}

impl StoreStats {
    /// The neutral figures of an LSM's snapshot.
    pub fn from_lsm(s: StatsSnapshot) -> Self {
        StoreStats {
            engine: "lsm",
            user_writes: s.user_writes,
            user_reads: s.user_reads,
            user_bytes_written: s.user_bytes_written,
            disk_bytes_written: s.engine_bytes_written(),
            disk_bytes_read: s.table_bytes_read,
            cache_hits: s.block_cache_hits,
            cache_misses: s.block_cache_misses,
            cache_bytes: s.block_cache_usage,
            detail: EngineStats::Lsm(Box::new(s)),
        }
    }

    /// The LSM figures, if this is an LSM.
    pub fn lsm(&self) -> Option<&StatsSnapshot> {
        match &self.detail {
            EngineStats::Lsm(s) => Some(s),
            EngineStats::Kvell(_) => None,
        }
    }

    /// The KVell figures, if this is KVell.
    pub fn kvell(&self) -> Option<&KvellStats> {
        match &self.detail {
            EngineStats::Kvell(s) => Some(s),
            EngineStats::Lsm(_) => None,
        }
    }

    /// Bytes written to the device per user byte.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            0.0
        } else {
            self.disk_bytes_written as f64 / self.user_bytes_written as f64
        }
    }

    /// One JSON object: the neutral figures, then the engine's own under
    /// its name (`"lsm": {...}` or `"kvell": {...}`).
    pub fn to_json(&self) -> String {
        let (name, detail) = match &self.detail {
            EngineStats::Lsm(s) => ("lsm", s.to_json()),
            EngineStats::Kvell(s) => ("kvell", s.to_json()),
        };
        format!(
            "{{\"engine\":\"{}\",\"user_writes\":{},\"user_reads\":{},\"user_bytes_written\":{},\
             \"disk_bytes_written\":{},\"disk_bytes_read\":{},\"cache_hits\":{},\"cache_misses\":{},\
             \"cache_bytes\":{},\"write_amplification\":{:.4},\"{name}\":{detail}}}",
            self.engine,
            self.user_writes,
            self.user_reads,
            self.user_bytes_written,
            self.disk_bytes_written,
            self.disk_bytes_read,
            self.cache_hits,
            self.cache_misses,
            self.cache_bytes,
            self.write_amplification(),
        )
    }
}

impl fmt::Display for StoreStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.detail {
            EngineStats::Lsm(s) => write!(f, "{s}"),
            EngineStats::Kvell(s) => {
                writeln!(
                    f,
                    "user writes:        {} ({:.2} MiB)",
                    self.user_writes,
                    mib(self.user_bytes_written)
                )?;
                writeln!(f, "user reads:         {}", self.user_reads)?;
                writeln!(
                    f,
                    "device:             {:.2} MiB written, {:.2} MiB read; write amplification {:.3}",
                    mib(self.disk_bytes_written),
                    mib(self.disk_bytes_read),
                    self.write_amplification()
                )?;
                write!(f, "{s}")
            }
        }
    }
}

/// KVell's figures (`engine=kvell`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KvellStats {
    pub workers: usize,
    /// `io_uring` or `pread` (the fallback where io_uring is unavailable).
    pub io_backend: &'static str,
    /// Slab files opened with O_DIRECT.
    pub direct_io: bool,
    /// `written` or `synced`.
    pub durability: &'static str,
    /// Live items per worker (how evenly the keys partition).
    pub items_per_worker: Vec<u64>,
    /// Bytes of the slab files and the slots free in them.
    pub slab_bytes: u64,
    pub free_slots: u64,
    pub page_cache_hits: u64,
    pub page_cache_misses: u64,
    pub page_cache_bytes: u64,
    /// Page reads and writes issued, their bytes, and the `fdatasync`s.
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub syncs: u64,
    /// I/O batches submitted (one submission each), the I/Os in them and
    /// the largest.
    pub batches: u64,
    pub batched_ios: u64,
    pub max_batch: u64,
    /// Requests the workers took per wake-up (how many callers' requests
    /// were served together).
    pub request_batches: u64,
    pub requests: u64,
    /// The open's slab scan: its time, the items it kept and the bytes it read.
    pub recovery_micros: u64,
    pub recovered_items: u64,
    pub recovery_bytes: u64,
    /// Damaged slots the open kept in place: each names its key's newest
    /// version (the key reads as `Corruption`) or no key at all.
    pub damaged_slots: u64,
    /// Slots a crash tore that the open erased (an intact version decided
    /// their key).
    pub torn_slots: u64,
    /// Damaged slots `kvell_on_damage=reclaim` erased.
    pub reclaimed_slots: u64,
}

impl KvellStats {
    /// I/Os per submission.
    pub fn mean_batch(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.batched_ios as f64 / self.batches as f64
        }
    }

    /// Requests served per worker wake-up.
    pub fn mean_requests_per_batch(&self) -> f64 {
        if self.request_batches == 0 {
            0.0
        } else {
            self.requests as f64 / self.request_batches as f64
        }
    }

    pub fn to_json(&self) -> String {
        let per: Vec<String> = self.items_per_worker.iter().map(u64::to_string).collect();
        format!(
            "{{\"workers\":{},\"io_backend\":\"{}\",\"direct_io\":{},\"durability\":\"{}\",\
             \"items_per_worker\":[{}],\"slab_bytes\":{},\"free_slots\":{},\"page_cache_hits\":{},\
             \"page_cache_misses\":{},\"page_cache_bytes\":{},\"reads\":{},\"writes\":{},\
             \"read_bytes\":{},\"write_bytes\":{},\"syncs\":{},\"batches\":{},\"batched_ios\":{},\
             \"max_batch\":{},\"mean_batch\":{:.3},\"request_batches\":{},\"requests\":{},\
             \"mean_requests_per_batch\":{:.3},\"recovery_micros\":{},\"recovered_items\":{},\
             \"recovery_bytes\":{},\"damaged_slots\":{},\"torn_slots\":{},\"reclaimed_slots\":{}}}",
            self.workers,
            self.io_backend,
            self.direct_io,
            self.durability,
            per.join(","),
            self.slab_bytes,
            self.free_slots,
            self.page_cache_hits,
            self.page_cache_misses,
            self.page_cache_bytes,
            self.reads,
            self.writes,
            self.read_bytes,
            self.write_bytes,
            self.syncs,
            self.batches,
            self.batched_ios,
            self.max_batch,
            self.mean_batch(),
            self.request_batches,
            self.requests,
            self.mean_requests_per_batch(),
            self.recovery_micros,
            self.recovered_items,
            self.recovery_bytes,
            self.damaged_slots,
            self.torn_slots,
            self.reclaimed_slots,
        )
    }
}

impl fmt::Display for KvellStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kvell:              {} workers, {} I/O{}, durability {}; items per worker {:?}",
            self.workers,
            self.io_backend,
            if self.direct_io { " (O_DIRECT)" } else { "" },
            self.durability,
            self.items_per_worker
        )?;
        writeln!(
            f,
            "slabs:              {:.2} MiB, {} free slots; page cache {:.2} MiB, {} hits, {} misses",
            mib(self.slab_bytes),
            self.free_slots,
            mib(self.page_cache_bytes),
            self.page_cache_hits,
            self.page_cache_misses
        )?;
        writeln!(
            f,
            "I/O:                {} reads, {} writes, {} syncs; {} batches of {:.2} I/Os (max {}); {:.2} requests per wake-up",
            self.reads,
            self.writes,
            self.syncs,
            self.batches,
            self.mean_batch(),
            self.max_batch,
            self.mean_requests_per_batch()
        )?;
        writeln!(
            f,
            "recovery:           {:.3} s, {} items from {:.2} MiB; {} damaged slots kept, {} torn erased, {} reclaimed",
            self.recovery_micros as f64 / 1e6,
            self.recovered_items,
            mib(self.recovery_bytes),
            self.damaged_slots,
            self.torn_slots,
            self.reclaimed_slots
        )
    }
}
