//! What every engine is opened with (the shared settings, or each
//! engine's own defaults) and what an opened engine reports about itself:
//! the floor under `engine` and the peers' adapters.

use serde::{Deserialize, Serialize};
use strata::KvStore;

/// Settings every engine receives, so that the comparison is fair.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EngineSettings {
    /// Memtable size (every engine).
    pub write_buffer_size: usize,
    /// Block cache capacity (every engine).
    pub block_cache_size: usize,
    /// Bloom filter bits per key.
    pub bloom_bits_per_key: usize,
    /// Data block size.
    pub block_size: usize,
    /// Size at which tables are cut.
    pub target_file_size: u64,
    /// `none`, `lz4` or `zstd` (LevelDB supports only `none`).
    pub compression: String,
    /// fdatasync the WAL on every write.
    pub sync: bool,
    /// Background flush/compaction threads.
    pub background_threads: usize,
    /// RocksDB's `max_subcompactions` (matched to strata's sub-task count
    /// in the CoPro preset; strata's executor is part of its engine spec).
    #[serde(default = "one")]
    pub subcompactions: u32,
    /// L1's target size (strata's `max_bytes_for_level_base`, RocksDB's
    /// option of that name; LevelDB's is fixed at 10 MiB).
    #[serde(default = "level_base")]
    pub level_base: u64,
    /// The second view of fairness (`strata bench --own-defaults`):
    /// every engine runs with its own library defaults for every memory
    /// and shape setting above (write buffer, block cache, block size,
    /// table size, bloom filter, L1 target, background threads,
    /// subcompactions, and compression), which are then ignored. Durability
    /// stays equal: the WAL on in every engine, `sync` for all.
    #[serde(default, skip_serializing_if = "is_false")]
    pub own_defaults: bool,
    /// Open with a `u64add` merge operator (the counter workloads; set per
    /// run, ignored by engines without merges).
    #[serde(default, skip_serializing_if = "is_false")]
    pub counters: bool,
    /// How long RocksDB's or LevelDB's wait for its background work (the
    /// settle, polled) may last before the run fails (`--settle-limit`;
    /// fjall's is fixed at 600 s, strata's own wait has none). Default
    /// [`SETTLE_LIMIT_SECS`].
    #[serde(default = "settle_limit")]
    pub settle_limit_secs: u64,
}

/// The default of [`EngineSettings::settle_limit_secs`].
pub const SETTLE_LIMIT_SECS: u64 = 600;

fn settle_limit() -> u64 {
    SETTLE_LIMIT_SECS
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn level_base() -> u64 {
    256 << 20
}

fn one() -> u32 {
    1
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            write_buffer_size: 64 << 20,
            block_cache_size: 32 << 20,
            bloom_bits_per_key: 10,
            block_size: 4096,
            target_file_size: 64 << 20,
            compression: "none".into(),
            sync: false,
            background_threads: 2,
            subcompactions: 1,
            level_base: level_base(),
            own_defaults: false,
            counters: false,
            settle_limit_secs: SETTLE_LIMIT_SECS,
        }
    }
}

impl EngineSettings {
    /// One line for reports.
    pub fn summary(&self) -> String {
        if self.own_defaults {
            return format!(
                "OWN DEFAULTS: each engine with its own library defaults for write buffer, block cache, \
                 block and table sizes, bloom filter, compression, level shape and background threads \
                 (listed per engine); equal durability: WAL on, sync={}",
                self.sync
            );
        }
        format!(
            "WAL on, sync={}, compression={}, write_buffer={} MiB, block_cache={} MiB, bloom={} bits/key, block={} KiB, target_file={} MiB, L1 target={} MiB, background_threads={} at nice 0 (strata: one flush or compaction at a time on two cores by its CPU budget; its memtable chunk filler at nice 0, its WAL page filler at nice 19), RocksDB max_subcompactions={}",
            self.sync,
            self.compression,
            self.write_buffer_size >> 20,
            self.block_cache_size >> 20,
            self.bloom_bits_per_key,
            self.block_size >> 10,
            self.target_file_size >> 20,
            self.level_base >> 20,
            self.background_threads,
            self.subcompactions
        )
    }
}

/// How an engine's settings line starts in `--own-defaults` mode.
pub const OWN_DEFAULTS_PREFIX: &str = "own defaults";

/// An open engine with what the report says about it.
pub struct OpenEngine {
    pub store: Box<dyn KvStore>,
    pub version: String,
    /// The engine's own configuration, printed in the report.
    pub settings: String,
}
