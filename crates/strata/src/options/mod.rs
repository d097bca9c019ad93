//! Options: every knob in one table (the `options!` invocation below), a
//! row each: doc, name, type, default, and where they apply the range
//! `validate` accepts and RocksDB's name for it. The struct, its builder
//! setters, [`Options::set`] and [`Options::get`] (which the command line,
//! the C ABI and the benchmark use), `Display` (`name=value` pairs that
//! [`Options::apply`] reads back), the range checks and the options
//! reference (`docs/OPTIONS.md`, [`Options::reference`]) are made from it:
//! adding an option is one row. Rules between options are in `validate`.
//!
//! Design choices are enums, not scattered booleans.

pub use crate::compaction_filter::FilterOp;
use crate::error::{Error, Result};
use crate::events::EventListener;
use crate::io::{FileSystem, PosixFs};
pub use crate::merge::MergeOp;
pub use crate::table::format::Compression;
use crate::table::TableOptions;
use std::fmt;
use std::sync::Arc;

#[macro_use]
mod table;
mod kinds;
mod reference;
mod value;

pub use kinds::{
    EngineKind, ExecutorKind, KvellDurability, KvellIo, KvellOnDamage, L0Kind, PickerKind,
    WalRecovery,
};
pub use table::OptionInfo;
pub use value::{parse_size, OptionValue};

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

options! {
    text {
        /// Create the directory and an empty database if none exists. Default true.
        create_if_missing: bool = true, rocksdb "create_if_missing";
        /// Fail the open if a database exists. Default false.
        error_if_exists: bool = false, rocksdb "error_if_exists";
        /// How merge operands fold (`Db::merge`): `none` (merges are
        /// refused), a built-in (`u64add`, `max`, `append`, `append:SEP`) or,
        /// from Rust, any `MergeOperator` (`MergeOp::new`). Open a database
        /// with the operator it was written with. Default none.
        merge_operator: MergeOp = MergeOp::none(), rocksdb "merge_operator";
        /// Time to live in seconds: a version written longer ago than this
        /// is gone for every reader (snapshots too) and compactions remove
        /// it. Ages come from the times of writes, kept to within 1/512 of
        /// the ttl (an entry may outlive it by that much, never fall short).
        /// Reopening without a ttl shows expired entries that compactions
        /// have not removed yet. 0: no expiry. Default 0.
        ttl_secs: u64 = 0;
        /// Memtable size that triggers a switch and flush (RocksDB
        /// `write_buffer_size`). Default 64 MiB.
        write_buffer_size: usize = 64 * MIB, range 4 * KIB.., rocksdb "write_buffer_size";
        /// Memtables (active + immutable) before writes stop (RocksDB
        /// `max_write_buffer_number`). Default 2.
        max_write_buffer_number: usize = 2, range 2.., rocksdb "max_write_buffer_number";
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
        /// 2 MiB, half a core's 4 MiB L2 cache on the reference machine (why:
        /// docs/design/2026-12-02-memtable-shard-size.md).
        memtable_shard_size: usize = 2 * MIB, range 4 * KIB..;
        /// Scans and seeks over a memtable of several shards ask for a sorted
        /// index of its sealed shards (an array of entry pointers in key order,
        /// built by a short-lived thread, 16 bytes per entry): the indexed
        /// shards then take one merge child instead of one skiplist each, read
        /// in order with the next entries prefetched, and a seek is one binary
        /// search over mostly inline key prefixes. Writes and point lookups do
        /// not use it. Default true.
        memtable_index: bool = true;
        /// L0 tables that trigger an L0→L1 compaction. Default 4.
        level0_file_num_compaction_trigger: usize = 4, range 1.., rocksdb "level0_file_num_compaction_trigger";
        /// L0 tables at which writes are held to 0.8× the rate compactions drain level 0, at least 1 MiB/s (`sched/slowdown.rs`). Default 20.
        level0_slowdown_writes_trigger: usize = 20, rocksdb "level0_slowdown_writes_trigger";
        /// L0 tables at which writes wait for compaction. Default 36.
        level0_stop_writes_trigger: usize = 36, rocksdb "level0_stop_writes_trigger";
        /// Target size of L1 (RocksDB `max_bytes_for_level_base`). Default 256 MiB.
        max_bytes_for_level_base: u64 = 256 * MIB as u64, range 1.., rocksdb "max_bytes_for_level_base";
        /// Growth factor between levels. Default 10.
        max_bytes_for_level_multiplier: u64 = 10, range 2.., rocksdb "max_bytes_for_level_multiplier";
        /// Number of levels including L0. Default 7.
        num_levels: usize = 7, range 2..=32, rocksdb "num_levels";
        /// Size near which compaction output tables are cut (RocksDB
        /// `target_file_size_base`): from about half of it where a table of the
        /// level below ends, up to twice it to reach such an end (see
        /// `runs::output`). Default 64 MiB.
        target_file_size: u64 = 64 * MIB as u64, range 4 * KIB as u64.., rocksdb "target_file_size_base";
        /// Uncompressed size of a data block. Default 4 KiB.
        block_size: usize = 4 * KIB, range 64..=64 * MIB, rocksdb "block_size";
        /// Fit data blocks to pages: a block that nearly fills its page is cut
        /// before the entry that would take it past the page, and the next
        /// block starts on the next page, the gap (at most
        /// `block_align_padding`) padded with zeros. A point read that misses the page cache
        /// then reads one 4 KiB page instead of the two an unaligned block
        /// straddles, and cached pages hold no pieces of other blocks. Applies
        /// to tables written without compression with a `block_size` from 2 to
        /// 4 KiB (a block that fits one page); entries too large to fill a
        /// page closely leave blocks unaligned. Costs the padding: about half
        /// an entry per block. Default true.
        block_align: bool = true;
        /// With `block_align`, the most zeros a block may leave before the
        /// next page (bytes): a block is cut early only once it fills all but
        /// this much of its page. Entries larger than it seldom fit a page
        /// closely; raising it toward an entry's size fits such blocks to one
        /// page at the cost of up to this much padding per page. Default 512
        /// (an eighth of a page).
        block_align_padding: usize = 512, range ..=2048;
        /// Keys between restart points in a block. Default 16.
        block_restart_interval: usize = 16, range 1.., rocksdb "block_restart_interval";
        /// Bloom filter bits per key; 0 disables filters. Default 10.
        bloom_bits_per_key: usize = 10, range ..=64, rocksdb "bloom_bits_per_key (NewBloomFilterPolicy)";
        /// Capacity of the shared block cache in bytes. Default 32 MiB.
        block_cache_size: usize = 32 * MIB, rocksdb "block_cache (LRUCache capacity)";
        /// Block compression. Default none.
        compression: Compression = Compression::None, rocksdb "compression";
        /// Threads for flushes and compactions (RocksDB `max_background_jobs`).
        /// With more than one, compactions leave one free for flushes (at most
        /// `background_threads - 1` run at once). Default 2.
        background_threads: usize = 2, range 1.., rocksdb "max_background_jobs";
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
        background_cpus: usize = 0;
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
        background_nice: i32 = 10, range 0..=19, rocksdb "LowerThreadPoolCPUPriority";
        /// Pending compaction bytes at which writes are held to the level-0 slowdown's rate (`level0_slowdown_writes_trigger`). Default 64 GiB.
        soft_pending_compaction_bytes_limit: u64 = 64 << 30, rocksdb "soft_pending_compaction_bytes_limit";
        /// Pending compaction bytes at which writes stop. Default 256 GiB.
        hard_pending_compaction_bytes_limit: u64 = 256 << 30, rocksdb "hard_pending_compaction_bytes_limit";
        /// What recovery does with a damaged WAL. Default `TolerateCorruptedTail`.
        wal_recovery: WalRecovery = WalRecovery::TolerateCorruptedTail, rocksdb "wal_recovery_mode";
        /// Verify block checksums when blocks are read (always done for
        /// metadata). A block read into memory or the block cache is checked
        /// as it is read; a block used in place from a table's memory map is
        /// checked on its first use by a point lookup or iterator after the
        /// table opened and trusted after that (compactions check it on every
        /// read), so
        /// damage that reaches a page after it was verified once is not seen
        /// until the table is opened again (`strata verify` reads everything).
        /// Default true.
        verify_checksums: bool = true, rocksdb "verify_checksums (ReadOptions)";
        /// Flush the memtable to a table at `close` (RocksDB flushes at close
        /// only when the WAL is off). Default false: the memtable's data is in
        /// the synced WAL and the next open replays it, so close is quick and
        /// writes nothing a later overwrite could make useless.
        flush_on_close: bool = false;
        /// Read tables through memory maps (zero-copy data blocks, no block
        /// cache for uncompressed blocks: the page cache holds them). Off, reads
        /// use pread(2) and every data block goes through the block cache.
        /// Only the OS file system maps; others always read. Default true.
        mmap_reads: bool = true, rocksdb "allow_mmap_reads";
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
        mmap_random: bool = false;
        /// With `mmap_reads`, once the live tables outgrow the page cache's
        /// room (`memory_budget`) and are read with pread(2), point reads use
        /// direct I/O (`O_DIRECT`, where the file system has it; scans and
        /// compactions still read through the page cache): no page-cache
        /// insertion, reclaim or copy per read, and half the room holds a row
        /// cache of the entries point lookups found instead. Off by default:
        /// on a 2-core VM under a memory limit it won no row clearly (uniform
        /// gets at times, seeks and skewed gets lost; measured in
        /// docs/design/2026-11-29-direct-reads.md).
        direct_reads: bool = false, rocksdb "use_direct_reads";
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
        mmap_huge: bool = false;
        /// Write the WAL through a shared memory map of its file instead of a
        /// `write(2)` per write group: the bytes are in the page cache (safe
        /// from a process crash) after a `memcpy`. The log's blocks are
        /// reserved 1 MiB ahead with `fallocate(2)`, so a full disk is an
        /// error from the write, not a fault. Only the OS file system maps, and
        /// only on ext2/3/4, XFS and tmpfs (where reserved blocks stay
        /// reserved); elsewhere logs are written with `write(2)`. Default true.
        mmap_writes: bool = true;
        /// Files the database may keep open (RocksDB and LevelDB
        /// `max_open_files`); −1 = no limit. The table cache holds at most
        /// `max_open_files − 10` open tables (each an open descriptor or a
        /// memory map, plus its pinned index and filter) and closes the least
        /// recently used one to open another; the 10 are left for the WAL, the
        /// MANIFEST, the LOCK and the tables being written, as in LevelDB.
        /// Values from 1 to 19 count as 20 (LevelDB raises small values too);
        /// 0 and values below −1 are rejected. Default 1000.
        max_open_files: i32 = 1000, rocksdb "max_open_files";
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
        warm_budget: i64 = -1, range -1..;
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
        memory_budget: i64 = -1, rocksdb "WriteBufferManager and block cache charging";
        /// Storage of level 0. Default `Tables`.
        l0: L0Kind = L0Kind::Tables;
        /// Compaction executor. Default `Linear`.
        executor: ExecutorKind = ExecutorKind::Linear;
        /// Compaction picker. Default `Leveled`.
        compaction_picker: PickerKind = PickerKind::Leveled;
        /// Read-triggered compaction (LevelDB's seek compaction): a table is
        /// charged a miss when a point lookup read one of its blocks in vain
        /// before reading another table (misses its bloom filter rules out are
        /// free), and when a sampled iterator seek (1 in 8 per thread) lands on
        /// a key it covers with another table below it. Once charged one miss
        /// per 16 KiB of its size (at least 100), and one per 16 KiB of every
        /// table the plan would read (the next level's overlap included), it is
        /// merged into the next level when the picker has no size-triggered
        /// (or, with the stale picker, early) plan it can start. Default true.
        read_compaction: bool = true;
        /// The engine `strata::open` runs (`Db::open` is always the LSM).
        engine: EngineKind = EngineKind::Lsm;
    }
    designs {
        /// The matrix container's knobs (`l0=matrix`).
        matrix: MatrixOptions {
            /// The fast tier holding the matrix container's rows (`l0=matrix`):
            /// tmpfs (`/dev/shm/...`) stands in for persistent memory. `None`: the
            /// database directory. Default `None`.
            fast_dir => dir: Option<std::path::PathBuf> = None;
            /// Bytes the matrix container may hold. Column compaction starts at
            /// 2/3 of it; flushes wait while it is full; L1's target is raised to
            /// at least this (the thesis: L1 ≈ the container). Default 1 GiB.
            matrix_capacity => capacity: u64 = 1 << 30, range 64 * KIB as u64..;
            /// Target bytes of one column compaction (rows' part plus the L1
            /// tables it meets). Default 64 MiB.
            matrix_column_bytes => column_bytes: u64 = 64 * MIB as u64, range 1..;
            /// Rows per segment bloom filter. Default 50 (the thesis').
            matrix_segment_rows => segment_rows: usize = 50, range 1..;
            /// Narrow each next row's search with the cross-row hints (off: a full
            /// binary search per row, to measure what the hints save). Default true.
            matrix_hints => hints: bool = true;
        }
        /// Active compaction's knobs (`compaction_picker=stale`).
        stale: StaleOptions {
            /// Bytes of the update table (`Stale` picker): user key + 8 B table id
            /// + 8 B sequence + bookkeeping per entry. Default 64 MiB (the paper's).
            update_table_size => update_table_size: usize = 64 * MIB, range 4 * KIB..;
            /// Share of a table's entries that must be stale before the `Stale`
            /// picker compacts it early (0 < t ≤ 1). Default 0.5 (the paper's
            /// 1,000 stale keys in a ~2,000-entry table).
            stale_threshold => threshold: f64 = 0.5;
        }
        /// CoPro's knobs (`executor=copro+`, `executor=offload`).
        copro: CoproOptions {
            /// CoPro+ decision (`executor=copro+`): a value larger than this is
            /// "large". Default 256 B (the paper's host setting is 32 KB; why:
            /// docs/design/2026-11-29-code-comment-measurements.md
            /// §copro-large-value).
            copro_large_value => large_value: u64 = 256;
            /// CoPro+ decision: a sub-task whose `f` reaches this runs linear.
            /// Default 0.7 (the paper's).
            copro_threshold => threshold: f64 = 0.7;
            /// CoPro+ weight α of CPU load in `f` (the value-size weight φ is
            /// 1). Default 0 (the paper's tested setting).
            copro_alpha => alpha: f64 = 0.0;
            /// CoPro+ weight β of memory use in `f`. Default 0 (the paper's
            /// tested setting).
            copro_beta => beta: f64 = 0.0;
            /// How long the host waits for a compaction worker's answer before it
            /// runs the sub-task itself (`executor=offload`). Default 300 s.
            offload_timeout_ms => offload_timeout_ms: u64 = 300_000, range 1..;
        }
        /// The KVell engine's knobs (`engine=kvell`).
        kvell: KvellOptions {
            /// KVell's worker threads, each owning a key partition (0 = one per
            /// core). Fixed when the database is created.
            kvell_workers => workers: usize = 0, range ..=256;
            /// Bytes of 4 KiB pages all KVell workers together may cache.
            kvell_page_cache => page_cache: u64 = 64 << 20;
            /// When KVell acknowledges a write.
            kvell_durability => durability: KvellDurability = KvellDurability::Written;
            /// How KVell submits I/O.
            kvell_io => io: KvellIo = KvellIo::Auto;
            /// Open KVell's slab files with O_DIRECT (where the file system
            /// allows it; tmpfs does not).
            kvell_direct => direct: bool = true;
            /// Most I/Os a KVell worker submits at once.
            kvell_batch => batch: usize = 64, range 1..=1024;
            /// What the open does with damaged slots. Default `keep`.
            kvell_on_damage => on_damage: KvellOnDamage = KvellOnDamage::Keep;
        }
    }
    other {
        /// The file layer; tests substitute a fault-injecting one. Default the OS.
        fs: Arc<dyn FileSystem> = Arc::new(PosixFs);
        /// Receivers of flush/compaction events. Default none.
        listeners: Vec<Arc<dyn EventListener>> = Vec::new();
        /// What compactions make of the values they write
        /// ([`crate::compaction_filter`]). Default none.
        compaction_filter: FilterOp = FilterOp::none();
        /// The wall clock `ttl_secs` reads. Default the system's.
        clock: Arc<dyn crate::clock::Clock> = Arc::new(crate::clock::SystemClock);
    }
}

impl Options {
    /// The defaults; chain setters on it.
    pub fn builder() -> Self {
        Self::default()
    }

    /// Sets `fs`.
    #[must_use]
    pub fn fs(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = fs;
        self
    }

    /// The options a keyspace may set for its own tree
    /// ([`Options::for_keyspace`]); the rest are the database's.
    pub const KEYSPACE_OPTIONS: &'static [&'static str] = &[
        "write_buffer_size",
        "max_write_buffer_number",
        "memtable_shard_size",
        "level0_file_num_compaction_trigger",
        "level0_slowdown_writes_trigger",
        "level0_stop_writes_trigger",
        "max_bytes_for_level_base",
        "max_bytes_for_level_multiplier",
        "target_file_size",
        "block_size",
        "block_restart_interval",
        "bloom_bits_per_key",
        "compression",
        "compaction_picker",
        "soft_pending_compaction_bytes_limit",
        "hard_pending_compaction_bytes_limit",
        "read_compaction",
        "stale_threshold",
        "update_table_size",
        "merge_operator",
        "ttl_secs",
    ];

    /// These options with a keyspace's `name=value` pairs (`spec`, as
    /// [`apply`](Self::apply) reads them) over them, checked.
    /// `InvalidArgument` for a name outside [`KEYSPACE_OPTIONS`](Self::KEYSPACE_OPTIONS)
    /// or a value `validate` refuses.
    pub fn for_keyspace(&self, spec: &str) -> Result<Options> {
        let mut o = self.clone();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').ok_or_else(|| {
                Error::InvalidArgument(format!("expected name=value, got {pair:?}"))
            })?;
            let k = k.trim();
            if !Self::KEYSPACE_OPTIONS.contains(&k) {
                return Err(Error::InvalidArgument(format!(
                    "option {k} is the database's, not a keyspace's (a keyspace sets {})",
                    Self::KEYSPACE_OPTIONS.join(", ")
                )));
            }
            o.set(k, v.trim())?;
        }
        o.validate()?;
        Ok(o)
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

    /// Sets the compaction filter.
    #[must_use]
    pub fn compaction_filter(mut self, f: impl crate::CompactionFilter + 'static) -> Self {
        self.compaction_filter = FilterOp::new(f);
        self
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

    /// Checks the options: each against its range in the table, then the
    /// rules between them; called by `Db::open`.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()?;
        let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
        if self.level0_slowdown_writes_trigger < self.level0_file_num_compaction_trigger
            || self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger
        {
            return bad("need 0 < level0 compaction trigger <= slowdown trigger <= stop trigger");
        }
        if self.max_open_files == 0 || self.max_open_files < -1 {
            return bad("max_open_files must be -1 (no limit) or at least 1");
        }
        if self.memory_budget < -1 || (1..1 << 20).contains(&self.memory_budget) {
            return bad("memory_budget must be -1 (half of memory), 0 (none) or at least 1 MiB");
        }
        if !(self.stale.threshold > 0.0 && self.stale.threshold <= 1.0) {
            return bad("stale_threshold must be in (0, 1]");
        }
        let finite = |x: f64| x.is_finite() && x >= 0.0;
        if !(finite(self.copro.threshold) && finite(self.copro.alpha) && finite(self.copro.beta)) {
            return bad("copro_threshold, copro_alpha and copro_beta must be finite and >= 0");
        }
        // A row addresses its cells with 32-bit offsets; a memtable holds at
        // most a write buffer plus one commit group (a batch of at most
        // `MAX_BATCH_BYTES` and 1 MiB of others), and so does a piece of a
        // replayed log.
        if self.l0 == L0Kind::Matrix && self.write_buffer_size > MAX_MATRIX_WRITE_BUFFER {
            return bad("write_buffer_size must be at most 2 GiB with l0=matrix");
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
            align_padding: o.block_align_padding,
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
