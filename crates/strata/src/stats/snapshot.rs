//! A copy of an LSM database's counters and the shape of its tree.

use super::{mib, Stats, StatsSnapshot};
use std::fmt::{self, Write as _};

/// Per-level shape in a snapshot.
#[derive(Debug, Clone, Default)]
pub struct LevelStats {
    pub files: usize,
    pub bytes: u64,
    pub compaction_bytes_written: u64,
    pub compaction_bytes_read: u64,
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
    /// Held now: the memtables (active and immutable: their arena chunks
    /// whole, `MemTable::memory_held`) with the arena chunks kept for the
    /// next ones, the block cache, the pins.
    pub memtables: u64,
    pub block_cache: u64,
    pub pins: u64,
    /// The row cache's capacity (half the page cache's room while tables
    /// are read directly, otherwise 0) and the bytes it holds.
    pub row_cache_capacity: u64,
    pub row_cache: u64,
}

impl StatsSnapshot {
    /// The counters of `s` (the rest of the snapshot is filled by the
    /// database from its caches and version).
    pub(crate) fn from_counters(s: &Stats) -> Self {
        let mut snap = StatsSnapshot::counters_of(s);
        snap.user_reads = s.user_reads.get();
        snap
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
        let mut out = String::from("{");
        self.counters_json(&mut out);
        let _ = write!(
            out,
            "\"user_reads\":{},\"arena_chunks_made_ahead\":{},\"arena_chunk_misses\":{},\
             \"update_table_entries\":{},\"update_table_bytes\":{},\"range_tombstones\":{},\"range_tombstone_bytes\":{},\"manifest_bytes\":{},\"slowdown_rate\":{},\
             \"table_bytes_read\":{},\"block_cache_hits\":{},\"block_cache_misses\":{},\"block_cache_usage\":{},\"row_cache_hits\":{},\"row_cache_misses\":{},\
             \"open_tables\":{},\"mapped_table_bytes\":{},\"pinned_index_filter_bytes\":{},\"table_cache_hits\":{},\
             \"table_cache_misses\":{},\"table_cache_evictions\":{},\"warmed_tables\":{},\"warmed_table_bytes\":{},\"tables_mapped\":{},\"memory\":{},\"memtable_bytes\":{},\"immutable_memtables\":{},\"last_sequence\":{},\
             \"engine_bytes_written\":{},\"write_amplification\":{:.4},\"cache_hit_rate\":{:.4},\"l0_rows\":{},\"levels\":[{}]}}",
            self.user_reads,
            self.arena_chunks_made_ahead,
            self.arena_chunk_misses,
            self.update_table_entries,
            self.update_table_bytes,
            self.range_tombstones,
            self.range_tombstone_bytes,
            self.manifest_bytes,
            self.slowdown_rate,
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
            self.l0_rows.to_json(),
            levels.join(",")
        );
        out
    }
}

/// Level 0's rows (`l0=matrix`; zeros otherwise): their shape, the
/// compactions that took their cells, and the lookups that searched them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowStats {
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

impl RowStats {
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
        let m = &self.l0_rows;
        if m.rows > 0 || m.column_compactions > 0 {
            writeln!(
                f,
                "level-0 rows:       {} rows in {} segments, {:.2} MiB ({:.2} MiB not compacted); \
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
            "stalls:             {} ({:.3} s); slowdowns {} ({:.3} s, at {:.1} MiB/s); paced {} ({:.3} s)",
            self.stall_count,
            self.stall_micros as f64 / 1e6,
            self.slowdown_count,
            self.slowdown_micros as f64 / 1e6,
            self.slowdown_rate as f64 / 1048576.0,
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
