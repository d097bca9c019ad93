//! Options: every knob with its default and, where one exists, its RocksDB name.
//!
//! Design choices are enums, not scattered booleans. `Options` prints as
//! `key=value` pairs (`Display`) and parses back from them
//! ([`Options::set`]), so reports and failures name their configuration.

use crate::error::{Error, Result};
use crate::events::EventListener;
use crate::io::{FileSystem, PosixFs};
pub use crate::table::format::Compression;
use crate::table::TableOptions;
use std::fmt;
use std::sync::Arc;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The largest write buffer the matrix container takes: a row (one
/// memtable) must stay under 4 GiB, and a memtable can pass its write
/// buffer by one commit group (at most `types::MAX_BATCH_BYTES` + 1 MiB).
const MAX_MATRIX_WRITE_BUFFER: usize = 2048 * MIB;
/// Descriptors `max_open_files` leaves to files other than open tables.
const NON_TABLE_FILES: usize = 10;
/// The smallest `max_open_files` that takes effect.
const MIN_OPEN_FILES: usize = 20;

/// What recovery does with a damaged write-ahead log (RocksDB `wal_recovery_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalRecovery {
    /// A torn record at the end of a log (damage after which no valid
    /// record follows: a crash during a write) is dropped; any other damage
    /// fails the open with `Corruption`. RocksDB
    /// `kTolerateCorruptedTailRecords`. Default.
    TolerateCorruptedTail,
    /// Any damage, even a torn tail, fails the open. RocksDB `kAbsoluteConsistency`.
    AbsoluteConsistency,
    /// Replay up to the first damaged record and drop everything after it,
    /// in that log and in later logs. RocksDB `kPointInTimeRecovery`.
    PointInTime,
    /// Skip damaged records and keep going. RocksDB `kSkipAnyCorruptedRecords`.
    SkipAnyCorrupted,
}

impl WalRecovery {
    fn name(self) -> &'static str {
        match self {
            WalRecovery::TolerateCorruptedTail => "tolerate-tail",
            WalRecovery::AbsoluteConsistency => "absolute",
            WalRecovery::PointInTime => "point-in-time",
            WalRecovery::SkipAnyCorrupted => "skip-corrupted",
        }
    }
}

/// Which engine a store runs (`strata::open` picks it once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// The log-structured merge tree (`Db`): WAL, memtables, tables,
    /// compaction, and the seed designs that plug into it.
    Lsm,
    /// KVell: shared-nothing workers, unsorted slabs of 4 KiB
    /// pages, in-memory indexes, no log, batched I/O.
    Kvell,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Lsm => "lsm",
            EngineKind::Kvell => "kvell",
        }
    }
}

/// When KVell acknowledges a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvellDurability {
    /// The paper's: when the write reached the device (O_DIRECT where the
    /// file system allows it, else the page cache). Survives a process
    /// crash; after a power loss each key holds its value as of the last
    /// `flush` or a later one.
    Written,
    /// One `fdatasync` per I/O batch before any write of the batch is
    /// acknowledged. Survives a power loss.
    Synced,
}

impl KvellDurability {
    pub fn name(self) -> &'static str {
        match self {
            KvellDurability::Written => "written",
            KvellDurability::Synced => "synced",
        }
    }
}

/// How KVell's workers submit I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvellIo {
    /// io_uring where the kernel allows it, else pread/pwrite.
    Auto,
    /// io_uring or fail the open.
    Uring,
    /// One pread/pwrite system call per page.
    Pread,
}

impl KvellIo {
    pub fn name(self) -> &'static str {
        match self {
            KvellIo::Auto => "auto",
            KvellIo::Uring => "uring",
            KvellIo::Pread => "pread",
        }
    }
}

/// What a KVell open does with slots that do not decode and that no intact
/// version of their key explains (`kvell/worker/recover.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvellOnDamage {
    /// Keep them in place and counted: a key whose newest slot is damaged
    /// reads as `Corruption` until it is written or deleted.
    Keep,
    /// Fail the open with `Corruption` naming the first one.
    Refuse,
    /// Erase and reuse them: the keys they held become absent. The open's
    /// report lists what was dropped.
    Reclaim,
}

impl KvellOnDamage {
    pub fn name(self) -> &'static str {
        match self {
            KvellOnDamage::Keep => "keep",
            KvellOnDamage::Refuse => "refuse",
            KvellOnDamage::Reclaim => "reclaim",
        }
    }
}

/// How level 0 is stored (`l0::design` picks the container).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L0Kind {
    /// Overlapping sorted tables, as LevelDB/RocksDB.
    Tables,
    /// MatrixKV's matrix container: one row per flush on the
    /// fast tier (`fast_dir`), cross-row hints, segment bloom filters, and
    /// column compaction into L1.
    Matrix,
}

impl L0Kind {
    pub fn name(self) -> &'static str {
        match self {
            L0Kind::Tables => "tables",
            L0Kind::Matrix => "matrix",
        }
    }
}

/// How a compaction plan is executed (CoPro; see
/// `compaction::executor`). Spelled as in `executor=`: `linear`,
/// `subtasks:N`, `pipelined`, `copro[:N]`, `copro+[:N]`, `offload:ADDR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorKind {
    /// Read, merge and write in one thread.
    Linear,
    /// Key-range sub-tasks on N threads, each linear.
    Subtasks(usize),
    /// One read → merge → write pipeline of three threads.
    Pipelined,
    /// N key-range sub-tasks, each pipelined (CoPro; `copro` = 2).
    Copro(usize),
    /// N sub-tasks, each pipelined or linear as the decision component
    /// chooses (CoPro+; `copro+` = 2).
    CoproPlus(usize),
    /// Two sub-tasks, one run here and one by a `strata compaction-worker`
    /// at this address (`unix:PATH` or `HOST:PORT`); falls back to running
    /// it here if the worker fails.
    Offload(String),
}

impl ExecutorKind {
    /// Parses the `executor=` spelling.
    pub fn parse(s: &str) -> Option<ExecutorKind> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let count = |default: usize| -> Option<usize> {
            match arg {
                None => Some(default),
                Some(a) => a.parse().ok().filter(|n| (1..=64).contains(n)),
            }
        };
        Some(match name {
            "linear" if arg.is_none() => ExecutorKind::Linear,
            "pipelined" if arg.is_none() => ExecutorKind::Pipelined,
            "subtasks" if arg.is_some() => ExecutorKind::Subtasks(count(2)?),
            "copro" => ExecutorKind::Copro(count(2)?),
            "copro+" => ExecutorKind::CoproPlus(count(2)?),
            "offload" => ExecutorKind::Offload(arg.filter(|a| !a.is_empty())?.to_string()),
            _ => return None,
        })
    }

    /// The `executor=` spelling.
    pub fn name(&self) -> String {
        match self {
            ExecutorKind::Linear => "linear".into(),
            ExecutorKind::Subtasks(n) => format!("subtasks:{n}"),
            ExecutorKind::Pipelined => "pipelined".into(),
            ExecutorKind::Copro(n) => format!("copro:{n}"),
            ExecutorKind::CoproPlus(n) => format!("copro+:{n}"),
            ExecutorKind::Offload(a) => format!("offload:{a}"),
        }
    }
}

/// How compactions are chosen (active compaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickerKind {
    /// Size triggers only: L0 table count, level bytes over target.
    Leveled,
    /// The size triggers first; then a table whose share of stale versions
    /// (versions with a newer one in a higher table, counted by the update
    /// table) reaches `stale_threshold` is compacted early; compactions drop
    /// stale versions no snapshot needs; reads go straight to the table the
    /// update table names.
    Stale,
}

impl PickerKind {
    pub fn name(self) -> &'static str {
        match self {
            PickerKind::Leveled => "leveled",
            PickerKind::Stale => "stale",
        }
    }
}

/// Options of a database, fixed at open.
#[derive(Clone)]
pub struct Options {
    /// Create the directory and an empty database if none exists. Default true.
    pub create_if_missing: bool,
    /// Fail the open if a database exists. Default false.
    pub error_if_exists: bool,
    /// Memtable size that triggers a switch and flush (RocksDB
    /// `write_buffer_size`). Default 64 MiB.
    pub write_buffer_size: usize,
    /// Memtables (active + immutable) before writes stop (RocksDB
    /// `max_write_buffer_number`). Default 2.
    pub max_write_buffer_number: usize,
    /// A memtable fills skiplists ("shards") of this many bytes (or of
    /// this ÷ 128 entries, whichever comes first: small entries such as
    /// tombstones get smaller shards) one after
    /// another and flushes them together as one table (at most 32 shards,
    /// each at least 1/32 of `write_buffer_size`; the last takes the
    /// rest). A shard this small stays in the CPU cache while it is
    /// filled: random inserts run several times faster than into one
    /// 64 MiB skiplist (why: docs/design/2026-11-29-code-comment-measurements.md
    /// §memtable-shards). Each shard has a bloom filter, so
    /// a point lookup searches only the shards that may hold its key. At
    /// or above `write_buffer_size`: one skiplist per memtable. Default
    /// 8 MiB.
    pub memtable_shard_size: usize,
    /// Scans and seeks over a memtable of several shards ask for a sorted
    /// index of its sealed shards (an array of entry pointers in key order,
    /// built by a short-lived thread, 16 bytes per entry): the indexed
    /// shards then take one merge child instead of one skiplist each, read
    /// in order with the next entries prefetched, and a seek is one binary
    /// search over mostly inline key prefixes. Writes and point lookups do
    /// not use it. Default true.
    pub memtable_index: bool,
    /// L0 tables that trigger an L0→L1 compaction. Default 4.
    pub level0_file_num_compaction_trigger: usize,
    /// L0 tables at which each write is delayed. Default 20.
    pub level0_slowdown_writes_trigger: usize,
    /// L0 tables at which writes wait for compaction. Default 36.
    pub level0_stop_writes_trigger: usize,
    /// Target size of L1 (RocksDB `max_bytes_for_level_base`). Default 256 MiB.
    pub max_bytes_for_level_base: u64,
    /// Growth factor between levels. Default 10.
    pub max_bytes_for_level_multiplier: u64,
    /// Number of levels including L0. Default 7.
    pub num_levels: usize,
    /// Size near which compaction output tables are cut (RocksDB
    /// `target_file_size_base`): from about half of it where a table of the
    /// level below ends, up to twice it to reach such an end (see
    /// `compaction::output`). Default 64 MiB.
    pub target_file_size: u64,
    /// Uncompressed size of a data block. Default 4 KiB.
    pub block_size: usize,
    /// Fit data blocks to pages: a block that nearly fills its page is cut
    /// before the entry that would take it past the page, and the next
    /// block starts on the next page, the gap (at most an eighth of a
    /// page) padded with zeros. A point read that misses the page cache
    /// then reads one 4 KiB page instead of the two an unaligned block
    /// straddles, and cached pages hold no pieces of other blocks. Applies
    /// to tables written without compression with a `block_size` from 2 to
    /// 4 KiB (a block that fits one page); entries too large to fill a
    /// page closely leave blocks unaligned. Costs the padding: about half
    /// an entry per block. Default true.
    pub block_align: bool,
    /// Keys between restart points in a block. Default 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default 10.
    pub bloom_bits_per_key: usize,
    /// Capacity of the shared block cache in bytes. Default 32 MiB.
    pub block_cache_size: usize,
    /// Block compression. Default none.
    pub compression: Compression,
    /// Threads for flushes and compactions (RocksDB `max_background_jobs`).
    /// With more than one, compactions leave one free for flushes (at most
    /// `background_threads - 1` run at once). Default 2.
    pub background_threads: usize,
    /// Flushes and compactions that may run at once, whatever
    /// `background_threads` is; 0 (the default) means one less than the
    /// cores this process may use, at least one. A flush comes first: a
    /// running compaction gives it its slot within a few hundred entries
    /// and takes it back after the flush. On two cores, one slot makes
    /// 4 KiB overwrites faster than two (fewer compaction bytes), with a
    /// worse worst put on some runs (why:
    /// docs/design/2026-11-29-code-comment-measurements.md §cpu-budget). Manual
    /// `compact_range` runs in the caller's thread, outside the budget;
    /// executors with several threads (`subtasks`, `pipelined`) use one
    /// slot for all of theirs.
    pub background_cpus: usize,
    /// Added to the nice value of the background threads (Linux; elsewhere
    /// ignored), 0..=19: flushes and compactions yield the CPU to the
    /// threads that read and write. On two cores, 10 cuts the worst put of
    /// a random load severalfold (why:
    /// docs/design/2026-11-29-code-comment-measurements.md §background-nice; RocksDB's
    /// `LowerThreadPoolCPUPriority`, which RocksDB applies to its
    /// compaction pool only). Here flushes run at the lower priority too:
    /// writers still pace and stall on the background work's debt (and
    /// then leave it the CPU), but on a machine whose cores other
    /// processes keep busy a flush gets a smaller share, so stalls on a
    /// full set of memtables can last longer; set 0 there. The priority
    /// cannot be raised again without privileges. Default 10; 0 leaves
    /// them at the process's priority.
    pub background_nice: i32,
    /// Pending compaction bytes at which writes are delayed. Default 64 GiB.
    pub soft_pending_compaction_bytes_limit: u64,
    /// Pending compaction bytes at which writes stop. Default 256 GiB.
    pub hard_pending_compaction_bytes_limit: u64,
    /// What recovery does with a damaged WAL. Default `TolerateCorruptedTail`.
    pub wal_recovery: WalRecovery,
    /// Verify block checksums when blocks are read (always done for
    /// metadata). A block read into memory or the block cache is checked
    /// as it is read; a block used in place from a table's memory map is
    /// checked on its first use by a point lookup or iterator after the
    /// table opened and trusted after that (compactions check it on every
    /// read), so
    /// damage that reaches a page after it was verified once is not seen
    /// until the table is opened again (`strata verify` reads everything).
    /// Default true.
    pub verify_checksums: bool,
    /// Flush the memtable to a table at `close` (RocksDB flushes at close
    /// only when the WAL is off). Default false: the memtable's data is in
    /// the synced WAL and the next open replays it, so close is quick and
    /// writes nothing a later overwrite could make useless.
    pub flush_on_close: bool,
    /// Read tables through memory maps (zero-copy data blocks, no block
    /// cache for uncompressed blocks: the page cache holds them). Off, reads
    /// use pread(2) and every data block goes through the block cache.
    /// Only the OS file system maps; others always read. Default true.
    pub mmap_reads: bool,
    /// With `mmap_reads`, advise the OS that table maps are read at random
    /// (`MADV_RANDOM`): a page fault reads its page alone instead of the
    /// 128 KiB around it, and forward scans ask for what comes next
    /// themselves (`MADV_WILLNEED`). Without it, a database larger than
    /// the memory it may use thrashes: each fault's read-around evicts
    /// pages another fault brought in. Default false: when the database
    /// fits in memory, read-around warms a cold cache in far fewer faults
    /// (cold random gets and scans are both markedly faster without it).
    /// Warming (`warm_budget`) narrows the gap for tables within its
    /// budget: warmed, cold gets with `mmap_random` run about as fast as
    /// without it (why: docs/design/2026-11-29-code-comment-measurements.md
    /// §mmap-advice).
    pub mmap_random: bool,
    /// With `mmap_reads` (and without `mmap_random`), advise table maps
    /// `MADV_HUGEPAGE` where the file system keeps large folios in its page
    /// cache (XFS from Linux 5.18, ext4 from 6.16; elsewhere nothing is
    /// advised and this option changes nothing): a page fault then reads a
    /// 2 MiB piece of the table (and the next one ahead) and maps it with
    /// one PMD entry. A cold start reads tables in far fewer, larger
    /// pieces (faster cold random gets over small values). Such maps ask
    /// for nothing with `MADV_WILLNEED` (it fills the cache with 4 KiB
    /// folios, which cannot be mapped huge) and are not warmed: the fault
    /// path reads ahead itself. The cost: each fault reads 2–4 MiB synchronously whatever
    /// `read_ahead_kb` says, and the tables are not warmed: over large
    /// values, cold random gets run far slower than without it (warming
    /// streams whole tables with deep queues), while warm lookups gain
    /// nothing from PMD-mapped tables (why:
    /// docs/design/2026-11-29-code-comment-measurements.md §mmap-advice). Default
    /// false.
    pub mmap_huge: bool,
    /// Write the WAL through a shared memory map of its file instead of a
    /// `write(2)` per write group: the bytes are in the page cache (safe
    /// from a process crash) after a `memcpy`. The log's blocks are
    /// reserved 1 MiB ahead with `fallocate(2)`, so a full disk is an
    /// error from the write, not a fault. Only the OS file system maps, and
    /// only on ext2/3/4, XFS and tmpfs (where reserved blocks stay
    /// reserved); elsewhere logs are written with `write(2)`. Default true.
    pub mmap_writes: bool,
    /// Files the database may keep open (RocksDB and LevelDB
    /// `max_open_files`); −1 = no limit. The table cache holds at most
    /// `max_open_files − 10` open tables (each an open descriptor or a
    /// memory map, plus its pinned index and filter) and closes the least
    /// recently used one to open another; the 10 are left for the WAL, the
    /// MANIFEST, the LOCK and the tables being written, as in LevelDB.
    /// Values from 1 to 19 count as 20 (LevelDB raises small values too);
    /// 0 and values below −1 are rejected. Default 1000.
    pub max_open_files: i32,
    /// Bytes of memory-mapped tables that may be read whole into memory
    /// when point lookups and seeks on them keep waiting for the device
    /// (four block reads that each took more than about 20 µs): a
    /// short-lived thread asks for the whole table (`MADV_WILLNEED`, which
    /// streams it in large requests instead of a fault per block, far
    /// faster than 4 KiB random reads: docs/design/2026-11-29-code-comment-measurements.md
    /// §warming) and maps it (`MADV_POPULATE_READ`). Tables mapped in huge
    /// pages (`mmap_huge`) are not warmed. A table keeps its share until it
    /// is closed. −1 (the default): a quarter of the memory the process may
    /// use (physical memory, or its cgroup's limit when lower); 0: never.
    pub warm_budget: i64,
    /// Bytes of memory the database's own structures may hold: memtables
    /// and their arena pool (half), the block cache (a quarter), pinned
    /// index and filter blocks and the table cache (a quarter). Sizes
    /// that would pass their share are lowered at open
    /// (`write_buffer_size`, `block_cache_size`, `kvell_page_cache`); the
    /// memory the process may use beyond the budget is what the tables can
    /// count on in the page cache, and once the live tables outgrow it,
    /// mapped tables are read page by page and not warmed (see
    /// `crate::budget`). −1 (the default): half of the memory the process
    /// may use (its cgroup's limit where one is set and lower, otherwise
    /// the machine's memory); 0: no budget (sizes are taken as given).
    pub memory_budget: i64,
    /// Storage of level 0. Default `Tables`.
    pub l0: L0Kind,
    /// The fast tier holding the matrix container's rows (`l0=matrix`):
    /// tmpfs (`/dev/shm/...`) stands in for persistent memory. `None`: the
    /// database directory. Default `None`.
    pub fast_dir: Option<std::path::PathBuf>,
    /// Bytes the matrix container may hold. Column compaction starts at
    /// 2/3 of it; flushes wait while it is full; L1's target is raised to
    /// at least this (the thesis: L1 ≈ the container). Default 1 GiB.
    pub matrix_capacity: u64,
    /// Target bytes of one column compaction (rows' part plus the L1
    /// tables it meets). Default 64 MiB.
    pub matrix_column_bytes: u64,
    /// Rows per segment bloom filter. Default 50 (the thesis').
    pub matrix_segment_rows: usize,
    /// Narrow each next row's search with the cross-row hints (off: a full
    /// binary search per row, to measure what the hints save). Default true.
    pub matrix_hints: bool,
    /// Compaction executor. Default `Linear`.
    pub executor: ExecutorKind,
    /// Compaction picker. Default `Leveled`.
    pub compaction_picker: PickerKind,
    /// Bytes of the update table (`Stale` picker): user key + 8 B table id
    /// + 8 B sequence + bookkeeping per entry. Default 64 MiB (the paper's).
    pub update_table_size: usize,
    /// Share of a table's entries that must be stale before the `Stale`
    /// picker compacts it early (0 < t ≤ 1). Default 0.5 (the paper's
    /// 1,000 stale keys in a ~2,000-entry table).
    pub stale_threshold: f64,
    /// Read-triggered compaction (LevelDB's seek compaction): a table is
    /// charged a miss when a point lookup read one of its blocks in vain
    /// before reading another table (misses its bloom filter rules out are
    /// free), and when a sampled iterator seek (1 in 8 per thread) lands on
    /// a key it covers with another table below it. Once charged one miss
    /// per 16 KiB of its size (at least 100), and one per 16 KiB of every
    /// table the plan would read (the next level's overlap included), it is
    /// merged into the next level when the picker has no size-triggered
    /// (or, with the stale picker, early) plan it can start. Default true.
    pub read_compaction: bool,
    /// CoPro+ decision (`executor=copro+`): a value larger than this is
    /// "large". Default 256 B: re-derived on the reference machine with
    /// the paper's §3.3 procedure (pipelining's bandwidth gain stops paying
    /// for its CPU growth between 100 B and 256 B values; the paper's host
    /// setting is 32 KB; why: docs/design/2026-11-29-code-comment-measurements.md
    /// §copro-large-value).
    pub copro_large_value: u64,
    /// CoPro+ decision: a sub-task whose `f` reaches this runs linear.
    /// Default 0.7 (the paper's).
    pub copro_threshold: f64,
    /// CoPro+ weights of CPU load and memory use in `f` (the value-size
    /// weight φ is 1). Default 0 and 0 (the paper's tested setting).
    pub copro_alpha: f64,
    pub copro_beta: f64,
    /// How long the host waits for a compaction worker's answer before it
    /// runs the sub-task itself (`executor=offload`). Default 300 s.
    pub offload_timeout_ms: u64,
    /// The engine `strata::open` runs (`Db::open` is always the LSM).
    pub engine: EngineKind,
    /// KVell's worker threads, each owning a key partition (0 = one per
    /// core). Fixed when the database is created.
    pub kvell_workers: usize,
    /// Bytes of 4 KiB pages all KVell workers together may cache.
    pub kvell_page_cache: u64,
    /// When KVell acknowledges a write.
    pub kvell_durability: KvellDurability,
    /// How KVell submits I/O.
    pub kvell_io: KvellIo,
    /// Open KVell's slab files with O_DIRECT (where the file system
    /// allows it; tmpfs does not).
    pub kvell_direct: bool,
    /// Most I/Os a KVell worker submits at once.
    pub kvell_batch: usize,
    /// What the open does with damaged slots. Default `keep`.
    pub kvell_on_damage: KvellOnDamage,
    /// The file layer; tests substitute a fault-injecting one. Default the OS.
    pub fs: Arc<dyn FileSystem>,
    /// Receivers of flush/compaction events. Default none.
    pub listeners: Vec<Arc<dyn EventListener>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            write_buffer_size: 64 * MIB,
            max_write_buffer_number: 2,
            memtable_shard_size: 8 * MIB,
            memtable_index: true,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 * MIB as u64,
            max_bytes_for_level_multiplier: 10,
            num_levels: 7,
            target_file_size: 64 * MIB as u64,
            block_size: 4 * KIB,
            block_align: true,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            block_cache_size: 32 * MIB,
            compression: Compression::None,
            background_threads: 2,
            background_cpus: 0,
            background_nice: 10,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            wal_recovery: WalRecovery::TolerateCorruptedTail,
            verify_checksums: true,
            flush_on_close: false,
            mmap_reads: true,
            mmap_random: false,
            mmap_huge: false,
            mmap_writes: true,
            max_open_files: 1000,
            warm_budget: -1,
            memory_budget: -1,
            l0: L0Kind::Tables,
            engine: EngineKind::Lsm,
            kvell_workers: 0,
            kvell_page_cache: 64 << 20,
            kvell_durability: KvellDurability::Written,
            kvell_io: KvellIo::Auto,
            kvell_direct: true,
            kvell_batch: 64,
            kvell_on_damage: KvellOnDamage::Keep,
            fast_dir: None,
            matrix_capacity: 1 << 30,
            matrix_column_bytes: 64 * MIB as u64,
            matrix_segment_rows: 50,
            matrix_hints: true,
            executor: ExecutorKind::Linear,
            compaction_picker: PickerKind::Leveled,
            update_table_size: 64 * MIB,
            stale_threshold: 0.5,
            read_compaction: true,
            copro_large_value: 256,
            copro_threshold: 0.7,
            copro_alpha: 0.0,
            copro_beta: 0.0,
            offload_timeout_ms: 300_000,
            fs: Arc::new(PosixFs),
            listeners: Vec::new(),
        }
    }
}

macro_rules! setters {
    ($($(#[$m:meta])* $name:ident : $ty:ty),* $(,)?) => {
        impl Options {
            $(
                $(#[$m])*
                #[must_use]
                pub fn $name(mut self, v: $ty) -> Self {
                    self.$name = v;
                    self
                }
            )*
        }
    };
}

setters! {
    /// Sets `create_if_missing`.
    create_if_missing: bool,
    /// Sets `error_if_exists`.
    error_if_exists: bool,
    /// Sets `write_buffer_size`.
    write_buffer_size: usize,
    /// Sets `max_write_buffer_number`.
    max_write_buffer_number: usize,
    /// Sets `memtable_shard_size`.
    memtable_shard_size: usize,
    /// Sets `memtable_index`.
    memtable_index: bool,
    /// Sets `level0_file_num_compaction_trigger`.
    level0_file_num_compaction_trigger: usize,
    /// Sets `level0_slowdown_writes_trigger`.
    level0_slowdown_writes_trigger: usize,
    /// Sets `level0_stop_writes_trigger`.
    level0_stop_writes_trigger: usize,
    /// Sets `max_bytes_for_level_base`.
    max_bytes_for_level_base: u64,
    /// Sets `max_bytes_for_level_multiplier`.
    max_bytes_for_level_multiplier: u64,
    /// Sets `num_levels`.
    num_levels: usize,
    /// Sets `target_file_size`.
    target_file_size: u64,
    /// Sets `block_size`.
    block_size: usize,
    /// Sets `block_restart_interval`.
    block_restart_interval: usize,
    /// Sets `block_align`.
    block_align: bool,
    /// Sets `bloom_bits_per_key`.
    bloom_bits_per_key: usize,
    /// Sets `block_cache_size`.
    block_cache_size: usize,
    /// Sets `compression`.
    compression: Compression,
    /// Sets `background_threads`.
    background_threads: usize,
    /// Sets `background_cpus`.
    background_cpus: usize,
    /// Sets `background_nice`.
    background_nice: i32,
    /// Sets `wal_recovery`.
    wal_recovery: WalRecovery,
    /// Sets `verify_checksums`.
    verify_checksums: bool,
    /// Sets `flush_on_close`.
    flush_on_close: bool,
    /// Sets `mmap_reads`.
    mmap_reads: bool,
    /// Sets `mmap_random`.
    mmap_random: bool,
    /// Sets `mmap_huge`.
    mmap_huge: bool,
    /// Sets `mmap_writes`.
    mmap_writes: bool,
    /// Sets `max_open_files` (−1 = no limit).
    max_open_files: i32,
    /// Sets `warm_budget` (−1 = a quarter of memory, 0 = off).
    warm_budget: i64,
    /// Sets `memory_budget` (−1 = half of memory, 0 = none).
    memory_budget: i64,
    /// Sets `l0`.
    l0: L0Kind,
    /// Sets `fast_dir`.
    fast_dir: Option<std::path::PathBuf>,
    /// Sets `matrix_capacity`.
    matrix_capacity: u64,
    /// Sets `matrix_column_bytes`.
    matrix_column_bytes: u64,
    /// Sets `matrix_segment_rows`.
    matrix_segment_rows: usize,
    /// Sets `matrix_hints`.
    matrix_hints: bool,
    /// Sets `compaction_picker`.
    compaction_picker: PickerKind,
    /// Sets `update_table_size`.
    update_table_size: usize,
    /// Sets `stale_threshold`.
    stale_threshold: f64,
    /// Sets `read_compaction`.
    read_compaction: bool,
    /// Sets `executor`.
    executor: ExecutorKind,
    /// Sets `copro_large_value`.
    copro_large_value: u64,
    /// Sets `copro_threshold`.
    copro_threshold: f64,
    /// Sets `offload_timeout_ms`.
    offload_timeout_ms: u64,
    /// Sets `fs`.
    fs: Arc<dyn FileSystem>,
}

impl Options {
    /// The defaults; chain setters on it.
    pub fn builder() -> Self {
        Self::default()
    }

    /// Adds an event listener.
    #[must_use]
    pub fn listener(mut self, l: Arc<dyn EventListener>) -> Self {
        self.listeners.push(l);
        self
    }

    /// Creates a write-ahead log file: through a memory map with
    /// `mmap_writes` ([`FileSystem::create_log`](crate::io::FileSystem::create_log)).
    pub(crate) fn create_wal(
        &self,
        path: &std::path::Path,
    ) -> Result<Box<dyn crate::io::WritableFile>> {
        if self.mmap_writes {
            self.fs.create_log(path)
        } else {
            self.fs.create(path)
        }
    }

    /// Checks the options for consistency; called by `Db::open`.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if self.write_buffer_size < 4 * KIB {
            return bad("write_buffer_size must be at least 4 KiB");
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2");
        }
        if self.memtable_shard_size < 4 * KIB {
            return bad("memtable_shard_size must be at least 4 KiB");
        }
        if !(2..=32).contains(&self.num_levels) {
            return bad("num_levels must be between 2 and 32");
        }
        if self.block_size < 64 || self.block_size > 64 * MIB {
            return bad("block_size must be between 64 B and 64 MiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if self.bloom_bits_per_key > 64 {
            return bad("bloom_bits_per_key must be at most 64");
        }
        if self.level0_file_num_compaction_trigger == 0
            || self.level0_slowdown_writes_trigger < self.level0_file_num_compaction_trigger
            || self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger
        {
            return bad("need 0 < level0 compaction trigger <= slowdown trigger <= stop trigger");
        }
        if self.max_bytes_for_level_multiplier < 2 {
            return bad("max_bytes_for_level_multiplier must be at least 2");
        }
        if self.target_file_size < 4 * KIB as u64 || self.max_bytes_for_level_base == 0 {
            return bad("target_file_size must be at least 4 KiB and max_bytes_for_level_base > 0");
        }
        if !(0..=19).contains(&self.background_nice) {
            return bad("background_nice must be between 0 and 19");
        }
        if self.background_threads == 0 {
            return bad("background_threads must be at least 1");
        }
        if self.max_open_files == 0 || self.max_open_files < -1 {
            return bad("max_open_files must be -1 (no limit) or at least 1");
        }
        if self.memory_budget < -1 || (1..1 << 20).contains(&self.memory_budget) {
            return bad("memory_budget must be -1 (half of memory), 0 (none) or at least 1 MiB");
        }
        if self.warm_budget < -1 {
            return bad("warm_budget must be -1 (a quarter of memory), 0 (off) or a size");
        }
        if !(self.stale_threshold > 0.0 && self.stale_threshold <= 1.0) {
            return bad("stale_threshold must be in (0, 1]");
        }
        if self.update_table_size < 4 * KIB {
            return bad("update_table_size must be at least 4 KiB");
        }
        let finite = |x: f64| x.is_finite() && x >= 0.0;
        if !(finite(self.copro_threshold) && finite(self.copro_alpha) && finite(self.copro_beta)) {
            return bad("copro_threshold, copro_alpha and copro_beta must be finite and >= 0");
        }
        if self.offload_timeout_ms == 0 {
            return bad("offload_timeout_ms must be at least 1");
        }
        if self.matrix_capacity < 64 * KIB as u64 || self.matrix_column_bytes == 0 {
            return bad("matrix_capacity must be at least 64 KiB and matrix_column_bytes > 0");
        }
        if self.matrix_segment_rows == 0 {
            return bad("matrix_segment_rows must be at least 1");
        }
        // A row addresses its cells with 32-bit offsets; a memtable holds at
        // most a write buffer plus one commit group (a batch of at most
        // `MAX_BATCH_BYTES` and 1 MiB of others), and so does a piece of a
        // replayed log.
        if self.l0 == L0Kind::Matrix && self.write_buffer_size > MAX_MATRIX_WRITE_BUFFER {
            return bad("write_buffer_size must be at most 2 GiB with l0=matrix");
        }
        if self.kvell_workers > 256 || !(1..=1024).contains(&self.kvell_batch) {
            return bad("kvell_workers must be at most 256 and kvell_batch in 1..=1024");
        }
        Ok(())
    }

    /// The bytes of tables the warmer may read whole (`warm_budget`
    /// resolved: −1 is a quarter of the memory this process may use).
    pub fn warm_budget_bytes(&self) -> u64 {
        u64::try_from(self.warm_budget).unwrap_or_else(|_| crate::table::warm::default_budget())
    }

    /// Tables the table cache may hold open: `max_open_files − 10`, with
    /// `max_open_files` raised to at least 20; `None` for −1 (no limit).
    pub fn table_cache_capacity(&self) -> Option<usize> {
        let files = usize::try_from(self.max_open_files).ok()?;
        Some(files.max(MIN_OPEN_FILES) - NON_TABLE_FILES)
    }

    /// Sets one option from its textual `name=value` form, as printed by
    /// `Display` (used by the command line and the benchmark).
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T> {
            parse_size(v)
                .and_then(|n| n.to_string().parse().ok())
                .ok_or_else(|| Error::InvalidArgument(format!("option {name}: bad number {v:?}")))
        }
        fn flag(name: &str, v: &str) -> Result<bool> {
            match v {
                "true" | "on" | "1" => Ok(true),
                "false" | "off" | "0" => Ok(false),
                _ => Err(Error::InvalidArgument(format!(
                    "option {name}: bad flag {v:?}"
                ))),
            }
        }
        match name {
            "create_if_missing" => self.create_if_missing = flag(name, value)?,
            "error_if_exists" => self.error_if_exists = flag(name, value)?,
            "write_buffer_size" => self.write_buffer_size = num(name, value)?,
            "memtable_shard_size" => self.memtable_shard_size = num(name, value)?,
            "memtable_index" => self.memtable_index = flag(name, value)?,
            "max_write_buffer_number" => self.max_write_buffer_number = num(name, value)?,
            "level0_file_num_compaction_trigger" => {
                self.level0_file_num_compaction_trigger = num(name, value)?
            }
            "level0_slowdown_writes_trigger" => {
                self.level0_slowdown_writes_trigger = num(name, value)?
            }
            "level0_stop_writes_trigger" => self.level0_stop_writes_trigger = num(name, value)?,
            "max_bytes_for_level_base" => self.max_bytes_for_level_base = num(name, value)?,
            "max_bytes_for_level_multiplier" => {
                self.max_bytes_for_level_multiplier = num(name, value)?
            }
            "num_levels" => self.num_levels = num(name, value)?,
            "target_file_size" => self.target_file_size = num(name, value)?,
            "block_size" => self.block_size = num(name, value)?,
            "block_restart_interval" => self.block_restart_interval = num(name, value)?,
            "block_align" => self.block_align = flag(name, value)?,
            "bloom_bits_per_key" => self.bloom_bits_per_key = num(name, value)?,
            "block_cache_size" => self.block_cache_size = num(name, value)?,
            "background_threads" => self.background_threads = num(name, value)?,
            "background_nice" => self.background_nice = num(name, value)?,
            "background_cpus" => self.background_cpus = num(name, value)?,
            "verify_checksums" => self.verify_checksums = flag(name, value)?,
            "flush_on_close" => self.flush_on_close = flag(name, value)?,
            "mmap_reads" => self.mmap_reads = flag(name, value)?,
            "mmap_random" => self.mmap_random = flag(name, value)?,
            "mmap_huge" => self.mmap_huge = flag(name, value)?,
            "mmap_writes" => self.mmap_writes = flag(name, value)?,
            "read_compaction" => self.read_compaction = flag(name, value)?,
            "max_open_files" => {
                self.max_open_files = value.parse().map_err(|_| {
                    Error::InvalidArgument(format!("option {name}: bad number {value:?}"))
                })?
            }
            "memory_budget" => {
                self.memory_budget = if value == "-1" { -1 } else { num(name, value)? }
            }
            "warm_budget" => {
                self.warm_budget = if value == "-1" { -1 } else { num(name, value)? }
            }
            "compression" => {
                self.compression = match value {
                    "none" => Compression::None,
                    "lz4" => Compression::Lz4,
                    "zstd" => Compression::Zstd,
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "compression must be none|lz4|zstd, not {value:?}"
                        )))
                    }
                }
            }
            "wal_recovery" => {
                self.wal_recovery = match value {
                    "tolerate-tail" => WalRecovery::TolerateCorruptedTail,
                    "absolute" => WalRecovery::AbsoluteConsistency,
                    "point-in-time" => WalRecovery::PointInTime,
                    "skip-corrupted" => WalRecovery::SkipAnyCorrupted,
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "wal_recovery must be tolerate-tail|absolute|point-in-time|skip-corrupted, not {value:?}"
                        )))
                    }
                }
            }
            "engine" if value == "lsm" => self.engine = EngineKind::Lsm,
            "engine" if value == "kvell" => self.engine = EngineKind::Kvell,
            "kvell_workers" => self.kvell_workers = num(name, value)?,
            "kvell_page_cache" => self.kvell_page_cache = num(name, value)?,
            "kvell_durability" if value == "written" => {
                self.kvell_durability = KvellDurability::Written
            }
            "kvell_durability" if value == "synced" => {
                self.kvell_durability = KvellDurability::Synced
            }
            "kvell_io" if value == "auto" => self.kvell_io = KvellIo::Auto,
            "kvell_io" if value == "uring" => self.kvell_io = KvellIo::Uring,
            "kvell_io" if value == "pread" => self.kvell_io = KvellIo::Pread,
            "kvell_direct" => self.kvell_direct = flag(name, value)?,
            "kvell_batch" => self.kvell_batch = num(name, value)?,
            "kvell_on_damage" if value == "keep" => self.kvell_on_damage = KvellOnDamage::Keep,
            "kvell_on_damage" if value == "refuse" => self.kvell_on_damage = KvellOnDamage::Refuse,
            "kvell_on_damage" if value == "reclaim" => {
                self.kvell_on_damage = KvellOnDamage::Reclaim
            }
            "l0" if value == "tables" => self.l0 = L0Kind::Tables,
            "l0" if value == "matrix" => self.l0 = L0Kind::Matrix,
            "fast_dir" => {
                self.fast_dir = (!value.is_empty()).then(|| std::path::PathBuf::from(value))
            }
            "matrix_capacity" => self.matrix_capacity = num(name, value)?,
            "matrix_column_bytes" => self.matrix_column_bytes = num(name, value)?,
            "matrix_segment_rows" => self.matrix_segment_rows = num(name, value)?,
            "matrix_hints" => {
                self.matrix_hints = value.parse().map_err(|_| {
                    Error::InvalidArgument(format!("matrix_hints: expected true|false, got {value:?}"))
                })?
            }
            "executor" => {
                self.executor = ExecutorKind::parse(value).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "executor must be linear|subtasks:N|pipelined|copro[:N]|copro+[:N]|offload:ADDR (N in 1..=64), not {value:?}"
                    ))
                })?
            }
            "copro_large_value" => self.copro_large_value = num(name, value)?,
            "copro_threshold" | "copro_alpha" | "copro_beta" => {
                let v: f64 = value.parse().map_err(|_| {
                    Error::InvalidArgument(format!("{name}: expected a number, got {value:?}"))
                })?;
                match name {
                    "copro_threshold" => self.copro_threshold = v,
                    "copro_alpha" => self.copro_alpha = v,
                    _ => self.copro_beta = v,
                }
            }
            "offload_timeout_ms" => self.offload_timeout_ms = num(name, value)?,
            "compaction_picker" if value == "leveled" => {
                self.compaction_picker = PickerKind::Leveled
            }
            "compaction_picker" if value == "stale" => self.compaction_picker = PickerKind::Stale,
            "update_table_size" => self.update_table_size = num(name, value)?,
            "stale_threshold" => {
                self.stale_threshold = value.parse().map_err(|_| {
                    Error::InvalidArgument(format!("{name}: expected a number, got {value:?}"))
                })?
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "unknown option or value: {name}={value}"
                )))
            }
        }
        Ok(())
    }

    /// Applies a comma-separated list of `name=value` pairs.
    pub fn apply(&mut self, spec: &str) -> Result<()> {
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').ok_or_else(|| {
                Error::InvalidArgument(format!("expected name=value, got {pair:?}"))
            })?;
            self.set(k.trim(), v.trim())?;
        }
        Ok(())
    }
}

/// Parses `123`, `64K`, `64KiB`, `4M`, `1G` (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let mul = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mul)
}

impl fmt::Display for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "write_buffer_size={},max_write_buffer_number={},memtable_shard_size={},memtable_index={},level0_file_num_compaction_trigger={},\
             level0_slowdown_writes_trigger={},level0_stop_writes_trigger={},max_bytes_for_level_base={},\
             max_bytes_for_level_multiplier={},num_levels={},target_file_size={},block_size={},block_align={},\
             block_restart_interval={},bloom_bits_per_key={},block_cache_size={},compression={},\
             background_threads={},background_cpus={},background_nice={},wal_recovery={},verify_checksums={},flush_on_close={},mmap_reads={},mmap_random={},mmap_huge={},mmap_writes={},max_open_files={},warm_budget={},memory_budget={},\
             l0={},fast_dir={},matrix_capacity={},matrix_column_bytes={},matrix_segment_rows={},\
             matrix_hints={},executor={},compaction_picker={},update_table_size={},stale_threshold={},read_compaction={},\
             copro_large_value={},copro_threshold={},copro_alpha={},copro_beta={},offload_timeout_ms={},\
             engine={},kvell_workers={},kvell_page_cache={},kvell_durability={},kvell_io={},kvell_direct={},kvell_batch={},kvell_on_damage={}",
            self.write_buffer_size,
            self.max_write_buffer_number,
            self.memtable_shard_size,
            self.memtable_index,
            self.level0_file_num_compaction_trigger,
            self.level0_slowdown_writes_trigger,
            self.level0_stop_writes_trigger,
            self.max_bytes_for_level_base,
            self.max_bytes_for_level_multiplier,
            self.num_levels,
            self.target_file_size,
            self.block_size,
            self.block_align,
            self.block_restart_interval,
            self.bloom_bits_per_key,
            self.block_cache_size,
            self.compression.name(),
            self.background_threads,
            self.background_cpus,
            self.background_nice,
            self.wal_recovery.name(),
            self.verify_checksums,
            self.flush_on_close,
            self.mmap_reads,
            self.mmap_random,
            self.mmap_huge,
            self.mmap_writes,
            self.max_open_files,
            self.warm_budget,
            self.memory_budget,
            self.l0.name(),
            self.fast_dir
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            self.matrix_capacity,
            self.matrix_column_bytes,
            self.matrix_segment_rows,
            self.matrix_hints,
            self.executor.name(),
            self.compaction_picker.name(),
            self.update_table_size,
            self.stale_threshold,
            self.read_compaction,
            self.copro_large_value,
            self.copro_threshold,
            self.copro_alpha,
            self.copro_beta,
            self.offload_timeout_ms,
            self.engine.name(),
            self.kvell_workers,
            self.kvell_page_cache,
            self.kvell_durability.name(),
            self.kvell_io.name(),
            self.kvell_direct,
            self.kvell_batch,
            self.kvell_on_damage.name(),
        )
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Options({self})")
    }
}

/// Options of one write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// `fdatasync` the WAL before acknowledging. Default false:
    /// a process crash loses nothing acknowledged, a power loss may lose the tail.
    pub sync: bool,
}

impl From<&Options> for TableOptions {
    /// The table-format subset of `o`.
    fn from(o: &Options) -> Self {
        TableOptions {
            block_size: o.block_size,
            restart_interval: o.block_restart_interval,
            bloom_bits_per_key: o.bloom_bits_per_key,
            compression: o.compression,
            block_align: o.block_align,
        }
    }
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions::from(&Options::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_round_trips_through_apply() {
        let o = Options::default()
            .write_buffer_size(1 << 20)
            .compression(Compression::Lz4)
            .wal_recovery(WalRecovery::PointInTime);
        let mut p = Options::default();
        p.apply(&o.to_string()).expect("own output parses");
        assert_eq!(p.to_string(), o.to_string());
    }

    #[test]
    fn validation_rejects_nonsense() {
        assert!(Options::default().validate().is_ok());
        assert!(Options::default().write_buffer_size(10).validate().is_err());
        assert!(Options::default().num_levels(1).validate().is_err());
        assert!(Options::default()
            .level0_stop_writes_trigger(2)
            .validate()
            .is_err());
        let mut o = Options::default();
        assert!(o.set("compression", "brotli").is_err());
        assert!(o.set("nope", "1").is_err());
        assert!(o.set("block_size", "4K").is_ok());
        assert_eq!(o.block_size, 4096);
    }

    #[test]
    fn a_matrix_write_buffer_must_fit_a_row() {
        // A row past 4 GiB cannot be written: the flush would fail, poison
        // the database and fail again at every reopen with the matrix.
        let matrix = || Options::default().l0(L0Kind::Matrix);
        assert!(matrix().write_buffer_size(2048 * MIB).validate().is_ok());
        let e = matrix().write_buffer_size(4096 * MIB).validate();
        assert!(matches!(e, Err(Error::InvalidArgument(_))), "{e:?}");
        assert!(matrix()
            .write_buffer_size(2048 * MIB + 1)
            .validate()
            .is_err());
        // The table container writes tables of any size.
        assert!(Options::default()
            .write_buffer_size(4096 * MIB)
            .validate()
            .is_ok());
    }

    #[test]
    fn max_open_files_limits_the_table_cache() {
        let d = Options::default();
        assert_eq!(d.max_open_files, 1000);
        assert_eq!(d.table_cache_capacity(), Some(990));
        assert_eq!(d.clone().max_open_files(-1).table_cache_capacity(), None);
        assert_eq!(
            d.clone().max_open_files(64).table_cache_capacity(),
            Some(54)
        );
        // Small values are raised to 20.
        assert_eq!(d.clone().max_open_files(1).table_cache_capacity(), Some(10));
        assert_eq!(
            d.clone().max_open_files(19).table_cache_capacity(),
            Some(10)
        );
        for ok in [-1, 1, 20, 1000, i32::MAX] {
            assert!(d.clone().max_open_files(ok).validate().is_ok(), "{ok}");
        }
        for bad in [0, -2, i32::MIN] {
            assert!(matches!(
                d.clone().max_open_files(bad).validate(),
                Err(Error::InvalidArgument(_))
            ));
        }
        let mut o = Options::default();
        o.apply("max_open_files=-1").expect("-1 parses");
        assert_eq!(o.max_open_files, -1);
        assert!(o.to_string().contains("max_open_files=-1"));
        let mut p = Options::default();
        p.apply(&o.to_string()).expect("own output parses");
        assert_eq!(p.max_open_files, -1);
        assert!(o.set("max_open_files", "lots").is_err());
        assert!(o.set("max_open_files", "4K").is_err());
    }
}
