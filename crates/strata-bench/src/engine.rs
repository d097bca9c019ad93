//! The engines under test, all behind [`strata::KvStore`], configured alike
//! (or, with [`EngineSettings::own_defaults`], each with its own defaults).

pub use crate::settings::{EngineSettings, OpenEngine, OWN_DEFAULTS_PREFIX};

use crate::BenchError;
use std::path::Path;
use strata::Options;

/// Which engine a run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineKind {
    /// strata with extra options (`name=value,...`) applied on top of the settings.
    Strata(String),
    RocksDb,
    LevelDb,
    /// fjall 3 (pure Rust, crates.io), with the `comparators` feature.
    Fjall,
}

/// The suffix of an engine spec that runs it with its own library defaults
/// (`rocksdb@own`) in a run whose other engines share the settings.
pub const OWN_VIEW: &str = "@own";

/// Splits an engine spec into the engine and whether it runs with its own
/// defaults (`rocksdb@own` → `("rocksdb", true)`).
pub fn split_view(spec: &str) -> (&str, bool) {
    match spec.trim().strip_suffix(OWN_VIEW) {
        Some(base) => (base, true),
        None => (spec.trim(), false),
    }
}

impl EngineKind {
    /// Parses `strata`, `strata:opt=v,opt=v`, `kvell[:opts]`, `rocksdb`,
    /// `leveldb` or `fjall`, each optionally followed by `@own` (the view,
    /// which [`split_view`] reads).
    pub fn parse(spec: &str) -> Result<Self, BenchError> {
        let spec = split_view(spec).0;
        if spec == "strata" {
            return Ok(EngineKind::Strata(String::new()));
        }
        // `kvell[:opts]` is strata's second engine: `strata:engine=kvell,...`.
        if spec == "kvell" {
            return Ok(EngineKind::Strata("engine=kvell".into()));
        }
        if let Some(opts) = spec.strip_prefix("kvell:") {
            return EngineKind::parse(&format!("strata:engine=kvell,{opts}"));
        }
        if let Some(opts) = spec.strip_prefix("strata:") {
            // Validate now so that a typo fails before any run starts.
            let (_, engine_opts) = split_placement(opts);
            let mut o = Options::default();
            o.apply(&engine_opts.replace(SHM, "/dev/shm"))
                .map_err(|e| BenchError::Usage(format!("{spec}: {e}")))?;
            return Ok(EngineKind::Strata(opts.to_string()));
        }
        match spec {
            "rocksdb" => Ok(EngineKind::RocksDb),
            "leveldb" => Ok(EngineKind::LevelDb),
            "fjall" => Ok(EngineKind::Fjall),
            _ => Err(BenchError::Usage(format!(
                "unknown engine {spec:?} (expected strata, strata:opt=v,..., kvell, kvell:opt=v,..., rocksdb, leveldb or fjall)"
            ))),
        }
    }

    /// True for RocksDB, LevelDB and fjall.
    pub fn is_comparator(&self) -> bool {
        !matches!(self, EngineKind::Strata(_))
    }
}

/// Whether RocksDB, LevelDB and fjall were compiled in (cargo feature
/// `comparators`).
pub const COMPARATORS: bool = cfg!(feature = "comparators");

/// The strata options for `settings` plus `extra` (`name=value,...`).
/// In a strata engine spec, the run's own directory on tmpfs
/// (`/dev/shm/strata-bench/<run>`): `fast_dir=@shm/fast` puts the matrix
/// container there, `db_dir=@shm/db` the whole database.
pub const SHM: &str = "@shm";

/// Splits `db_dir=PATH` (where the database lives, instead of the run's
/// directory) off a strata option list; returns it and the other options.
pub fn split_placement(opts: &str) -> (Option<String>, String) {
    let mut db_dir = None;
    let rest: Vec<&str> = opts
        .split(',')
        .filter(|item| match item.trim().strip_prefix("db_dir=") {
            Some(d) => {
                db_dir = Some(d.to_string());
                false
            }
            None => true,
        })
        .collect();
    (db_dir, rest.join(","))
}

pub fn strata_options(settings: &EngineSettings, extra: &str) -> Result<Options, BenchError> {
    if settings.own_defaults {
        // `Options::default()` untouched but for durability (KVell's
        // synced mode is its `--sync`) and the spec's own options.
        let mut o = Options::default();
        if settings.sync {
            o.kvell.durability = strata::KvellDurability::Synced;
        }
        if settings.counters {
            o.merge_operator = strata::MergeOp::new(strata::merge::U64Add);
        }
        o.apply(extra)
            .map_err(|e| BenchError::Usage(e.to_string()))?;
        o.validate().map_err(|e| BenchError::Usage(e.to_string()))?;
        return Ok(o);
    }
    let mut o = Options::default()
        .write_buffer_size(settings.write_buffer_size)
        .block_cache_size(settings.block_cache_size)
        .bloom_bits_per_key(settings.bloom_bits_per_key)
        .block_size(settings.block_size)
        .target_file_size(settings.target_file_size)
        .max_bytes_for_level_base(settings.level_base)
        .background_threads(settings.background_threads)
        // The peers' flush and compaction threads run at the default
        // priority: so do strata's in the shared view (its helper threads,
        // which only pre-fault and pre-zero memory, keep theirs).
        .background_nice(0);
    // KVell keeps no memtable and no block cache: its page cache gets what
    // an LSM may hold in memory (the block cache and one memtable).
    o.kvell.page_cache = (settings.block_cache_size + settings.write_buffer_size) as u64;
    if settings.sync {
        o.kvell.durability = strata::KvellDurability::Synced;
    }
    if settings.counters {
        o.merge_operator = strata::MergeOp::new(strata::merge::U64Add);
    }
    o.apply(&format!("compression={}", settings.compression))
        .map_err(|e| BenchError::Usage(e.to_string()))?;
    o.apply(extra)
        .map_err(|e| BenchError::Usage(e.to_string()))?;
    o.validate().map_err(|e| BenchError::Usage(e.to_string()))?;
    Ok(o)
}

/// Opens (creating) the engine `kind` in `dir`.
pub fn open(
    kind: &EngineKind,
    settings: &EngineSettings,
    dir: &Path,
) -> Result<OpenEngine, BenchError> {
    match kind {
        EngineKind::Strata(extra) => {
            let (_, extra) = split_placement(extra);
            let o = strata_options(settings, &extra)?;
            let shown = if settings.own_defaults {
                format!(
                    "{OWN_DEFAULTS_PREFIX} (Options::default(){}): {o}",
                    if extra.is_empty() {
                        String::new()
                    } else {
                        format!(" + {extra}")
                    }
                )
            } else {
                o.to_string()
            };
            let store = strata::open(dir, o)?;
            Ok(OpenEngine {
                store,
                version: format!("strata {}", env!("CARGO_PKG_VERSION")),
                settings: shown,
            })
        }
        #[cfg(feature = "comparators")]
        EngineKind::RocksDb => crate::ffi::rocksdb::open(settings, dir),
        #[cfg(feature = "comparators")]
        EngineKind::LevelDb => crate::ffi::leveldb::open(settings, dir),
        #[cfg(feature = "comparators")]
        EngineKind::Fjall => crate::fjall_store::open(settings, dir),
        #[cfg(not(feature = "comparators"))]
        EngineKind::RocksDb | EngineKind::LevelDb | EngineKind::Fjall => Err(BenchError::Usage(
            "RocksDB, LevelDB and fjall are not compiled in: build with --features comparators"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() -> Result<(), BenchError> {
        assert_eq!(
            EngineKind::parse("strata")?,
            EngineKind::Strata(String::new())
        );
        assert_eq!(
            EngineKind::parse("strata:compression=lz4")?,
            EngineKind::Strata("compression=lz4".into())
        );
        assert_eq!(EngineKind::parse("rocksdb")?, EngineKind::RocksDb);
        assert_eq!(EngineKind::parse("rocksdb@own")?, EngineKind::RocksDb);
        assert_eq!(split_view("rocksdb@own"), ("rocksdb", true));
        assert_eq!(split_view("strata:l0=matrix"), ("strata:l0=matrix", false));
        assert_eq!(EngineKind::parse("fjall")?, EngineKind::Fjall);
        assert_eq!(
            EngineKind::parse("kvell:kvell_workers=4")?,
            EngineKind::Strata("engine=kvell,kvell_workers=4".into())
        );
        assert!(EngineKind::parse("strata:nope=1").is_err());
        assert!(EngineKind::parse("sqlite").is_err());
        Ok(())
    }

    #[test]
    fn own_defaults_leave_strata_options_untouched() -> Result<(), BenchError> {
        let s = EngineSettings {
            write_buffer_size: 8 << 20,
            block_cache_size: 1 << 20,
            bloom_bits_per_key: 3,
            block_size: 16 << 10,
            target_file_size: 2 << 20,
            compression: "lz4".into(),
            background_threads: 1,
            level_base: 16 << 20,
            ..EngineSettings::default()
        };
        // Shared mode applies them ...
        let shared = strata_options(&s, "")?;
        assert_eq!(shared.write_buffer_size, 8 << 20);
        assert_eq!(shared.bloom_bits_per_key, 3);
        // ... own-defaults mode leaves Options::default() as it is.
        let own = EngineSettings {
            own_defaults: true,
            ..s.clone()
        };
        let o = strata_options(&own, "")?;
        assert_eq!(o.to_string(), Options::default().to_string());
        // Durability stays the run's; an engine spec's own options apply.
        let synced = EngineSettings {
            sync: true,
            ..own.clone()
        };
        let o = strata_options(&synced, "engine=kvell")?;
        assert_eq!(o.kvell.durability, strata::KvellDurability::Synced);
        assert_eq!(o.kvell.page_cache, Options::default().kvell.page_cache);
        // What the report prints for it.
        let opened_dir = tempfile::tempdir().map_err(|e| BenchError::Io("tmp".into(), e))?;
        let opened = open(&EngineKind::Strata(String::new()), &own, opened_dir.path())?;
        assert!(
            opened.settings.starts_with(OWN_DEFAULTS_PREFIX),
            "{}",
            opened.settings
        );
        assert!(
            opened.settings.contains("write_buffer_size=67108864"),
            "{}",
            opened.settings
        );
        opened.store.close()?;
        Ok(())
    }

    #[test]
    fn own_defaults_mode_is_in_the_summary_and_json() -> Result<(), BenchError> {
        let shared = EngineSettings::default();
        assert!(!shared.summary().contains("OWN DEFAULTS"));
        // Unchanged JSON without the mode; the flag round-trips with it.
        assert!(!serde_json::to_string(&shared)?.contains("own_defaults"));
        let own = EngineSettings {
            own_defaults: true,
            sync: true,
            ..EngineSettings::default()
        };
        let line = own.summary();
        assert!(line.starts_with("OWN DEFAULTS"), "{line}");
        assert!(line.contains("WAL on, sync=true"), "{line}");
        assert!(!line.contains("write_buffer=64 MiB"), "{line}");
        let back: EngineSettings = serde_json::from_str(&serde_json::to_string(&own)?)?;
        assert_eq!(back, own);
        let old: EngineSettings = serde_json::from_str(
            r#"{"write_buffer_size":1,"block_cache_size":1,"bloom_bits_per_key":1,"block_size":1,
                "target_file_size":1,"compression":"none","sync":false,"background_threads":1}"#,
        )?;
        assert!(!old.own_defaults);
        Ok(())
    }

    #[test]
    fn strata_gets_the_common_settings() -> Result<(), BenchError> {
        let s = EngineSettings {
            write_buffer_size: 8 << 20,
            ..EngineSettings::default()
        };
        let o = strata_options(&s, "bloom_bits_per_key=5")?;
        assert_eq!(o.write_buffer_size, 8 << 20);
        assert_eq!(o.bloom_bits_per_key, 5);
        assert_eq!(o.block_cache_size, s.block_cache_size);
        Ok(())
    }
}
