//! Engine-neutral figures of a store, with each engine's own.

use super::mib;
use super::StatsSnapshot;
use std::fmt;

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
