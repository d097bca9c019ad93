//! The presets: named benchmark configurations, from the quick in-memory
//! run to the capped runs past the page cache.

use super::{chain, Config};
use crate::engine::{EngineSettings, COMPARATORS};
use crate::workload::Params;
use crate::BenchError;
use std::path::PathBuf;

/// The engines available in this build.
pub fn available_engines() -> Vec<String> {
    if COMPARATORS {
        names(&["strata", "rocksdb", "leveldb", "fjall"])
    } else {
        vec!["strata".into()]
    }
}

/// The engines of the headline presets: strata with the shared settings
/// and as shipped (`strata@own`, `Options::default()`), and each peer in
/// both views, so that "÷ best peer" takes each peer at its better one.
pub fn both_views() -> Vec<String> {
    if COMPARATORS {
        names(&[
            "strata",
            "strata@own",
            "rocksdb",
            "rocksdb@own",
            "leveldb",
            "leveldb@own",
            "fjall",
            "fjall@own",
        ])
    } else {
        names(&["strata", "strata@own"])
    }
}

/// The rows of the capped presets: db_bench's (the fill settle-inclusive),
/// a timed overwrite after the bulk load, and YCSB A-F.
fn capped_rows() -> Vec<String> {
    let mut v = names(&[
        "fillrandom",
        "overwrite",
        "overwrite-timed",
        "readrandom",
        "seekrandom",
        "readseq",
    ]);
    v.extend("abcdef".chars().map(|c| format!("ycsb-{c}")));
    v
}

/// A capped preset: every run's process in a `cap`-byte memory cgroup,
/// `num` records of `value_size` bytes (at least 4× the cap), both views,
/// loads reused, 5 repeats, each run at most `budget` seconds.
fn capped(base: Config, cap: u64, num: u64, value_size: usize, budget: f64) -> Config {
    Config {
        engines: both_views(),
        workloads: capped_rows(),
        params: Params {
            num,
            ops: 200_000,
            value_size,
            max_run_secs: Some(budget),
            // The timed overwrite: with its settle, several compactions
            // into the last level of a load this size.
            duration_secs: 30.0,
            ..Params::default()
        },
        // An eighth of the cap per memtable (two of them: a quarter) and an
        // eighth for the cache: what a user sizes an LSM to in a container
        // of that size.
        settings: EngineSettings {
            write_buffer_size: (cap / 8) as usize,
            block_cache_size: (cap / 8) as usize,
            target_file_size: 32 << 20,
            level_base: 128 << 20,
            ..EngineSettings::default()
        },
        repeats: 5,
        memory_limit: Some(cap),
        reuse_loads: true,
        // An engine that thrashes under the cap (its settle re-reading
        // mapped pages for ever) is a row, not a stalled report.
        time_limit: Some(300.0),
        ..base
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The preset names and what they are for.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "tiny",
        "every workload but checkpoint and backup (which LevelDB and fjall lack) on a few thousand keys; \
         seconds (the test suite runs it)",
    ),
    (
        "quick",
        "IN MEMORY: db_bench fill/overwrite/read/readseq/seek (reads warm, one cold row) + YCSB A/B/C, \
         1M keys of 100 B (111 MiB), 32 MiB cache, strata and every peer in both views; ~8 minutes \
         (the published table: --repeats 5)",
    ),
    (
        "capped",
        "LARGER THAN MEMORY: every process in a 256 MiB memory cgroup (page cache included), 10M keys of \
         100 B (1.1 GiB, 4.3x the cap), fillrandom (burst and settle-inclusive), overwrite, 30 s of overwrite-timed, readrandom, \
         seekrandom, readseq, YCSB A-F, strata and every peer in both views, loads reused, 5 repeats, \
         runs of at most 20 s; several hours",
    ),
    (
        "capped-1k",
        "LARGER THAN MEMORY, 1 KiB values: as capped with 1.1M keys of 1 KiB (1.1 GiB, 4.3x the 256 MiB cap); \
         several hours",
    ),
    (
        "capped-small",
        "LARGER THAN MEMORY, scaled down: as capped with a 128 MiB cap and 5M keys of 100 B (580 MB, 4.3x); \
         about two hours",
    ),
    (
        "scale",
        "LARGER THAN MEMORY, at scale: one chain per engine (--chain): 12.5M records of 1 KiB (13 GB, \
         4.0x a 3 GiB memory cgroup) loaded once by ycsb-load, then readrandom, seekrandom and YCSB C, B, \
         E, A in that order on that database, runs of 60 s, 3 repeats; strata and RocksDB (shared \
         settings: cap/16 memtables, cap/8 cache, 64 MiB tables, 1 GiB L1); ~80 minutes and 35 GB of disk",
    ),
    (
        "active",
        "active compaction: U1..U9 and YCSB a-d, uniform, 1 KiB values, 300k records (300 MiB, 19x the \
         16 MiB cache), 8 MiB memtables and tables, strata leveled vs stale picker vs LevelDB vs RocksDB, \
         3 repeats; ~30 min",
    ),
    (
        "copro",
        "CoPro: fillrandom + YCSB A/B/C, 1 KiB values (rerun with --value-size 100 and 65536 for the \
         paper's other sizes), 150k records, 4 MiB memtables, 2 MiB tables, every executor, 3 repeats; ~15 min",
    ),
    (
        "matrixkv",
        "MatrixKV: random puts, random gets and a sequential load, 4 KiB values, \
         300k records (1.2 GB, the 128 MiB container filled ~9 times), 4 MiB memtables and tables, \
         16 MiB L1 target; classic strata on disk and on tmpfs, the matrix container on tmpfs (with and \
         without hints) and on the disk, RocksDB, LevelDB; 3 repeats; ~17 min",
    ),
    (
        "kvell",
        "KVell: YCSB A-F, zipfian and uniform, 1 KiB values, 400k records (410 MB) against a 128 MiB \
         cgroup memory cap per engine (3.2x), 40 MiB of cache each (KVell's page cache = an LSM's 32 MiB \
         block cache + 8 MiB memtable), 8 client threads, 200k ops, per-second timelines, p99/max latency, \
         the device's own 4 KiB ceilings; KVell, strata LSM (pread + block cache), RocksDB, LevelDB; \
         3 repeats; ~60 min",
    ),
    (
        "deletes",
        "IN MEMORY, range deletion: 10 % of 1M keys of 100 B deleted in blocks of 100 (one range deletion \
         each, or 100 point deletes), then readrandom, seekrandom and readseq on the result, both ways; \
         strata and every peer (LevelDB and fjall delete point by point), loads reused, 5 repeats; ~15 min",
    ),
    (
        "merges",
        "IN MEMORY, counters: 1M increments (+1, u64add) of 100k counters, each a merge (RocksDB's \
         uint64add operator) or a get and a put (updaterandom, and engines without merges), then \
         readrandom of counters made by 1M merges; strata and every peer, 5 repeats; ~10 min",
    ),
    (
        "merges-capped",
        "LARGER THAN MEMORY, counters: 22M loaded keys with 8-byte values, in key order (each a \
         counter's start; 528 MB (504 MiB) of user data, 3.9x the 128 MiB cap), then 1M increments of random loaded counters by \
         merges (strata's and RocksDB's uint64add; LevelDB get+put) and by get+put; strata, RocksDB, \
         LevelDB, capped presets' sizing (cap/8 memtables and cache), runs of at most 20 s, loads \
         reused, 5 repeats; ~30 min",
    ),
    (
        "checkpoint",
        "IN MEMORY, checkpoints: one checkpoint of 1M loaded keys of 100 B (116 MB, flushed and settled) \
         into a new directory on the same file system, timed as one call, with its files' bytes and those \
         not hard-linked; strata and RocksDB (LevelDB and fjall have none), loads reused, 5 repeats; \
         a few minutes",
    ),
    (
        "backup",
        "IN MEMORY, backups: one backup of 1M loaded keys of 100 B (116 MB, flushed and settled) into a \
         new, empty backup directory on the same file system, timed as one call, with the files and bytes \
         it wrote; strata and RocksDB's BackupEngine (LevelDB and fjall have none), loads reused, \
         5 repeats; a few minutes",
    ),
    (
        "full",
        "every workload but checkpoint and backup, 2M keys (232 MB, 3.6x the 64 MiB cache), 1M ops, 30 s timed runs; about 40 minutes on 2 cores",
    ),
];

/// The configuration of preset `name`, writing to `out`.
pub fn preset(name: &str, out: PathBuf) -> Result<Config, BenchError> {
    let all: Vec<String> = crate::workload::all().iter().map(|w| w.name()).collect();
    let base = Config {
        preset: name.to_string(),
        engines: available_engines(),
        workloads: Vec::new(),
        params: Params::default(),
        settings: EngineSettings::default(),
        out,
        repeats: 1,
        cold: false,
        settle: true,
        keep_data: false,
        memory_limit: None,
        ceilings: None,
        reuse_loads: false,
        time_limit: None,
        chain: false,
    };
    match name {
        "tiny" => Ok(Config {
            workloads: all,
            params: Params {
                num: 2000,
                ops: 2000,
                duration_secs: 1.0,
                ..Params::default()
            },
            settings: EngineSettings {
                write_buffer_size: 256 << 10,
                block_cache_size: 128 << 10,
                target_file_size: 256 << 10,
                ..EngineSettings::default()
            },
            ..base
        }),
        "deletes" => Ok(Config {
            workloads: names(&[
                "deleterange",
                "deletekeys",
                "readrandom-after-ranges",
                "readrandom-after-keys",
                "seekrandom-after-ranges",
                "seekrandom-after-keys",
                "readseq-after-ranges",
                "readseq-after-keys",
            ]),
            params: Params {
                num: 1_000_000,
                ops: 300_000,
                ..Params::default()
            },
            repeats: 5,
            reuse_loads: true,
            ..base
        }),
        "checkpoint" => {
            let mut engines = vec!["strata".to_string()];
            if COMPARATORS {
                engines.push("rocksdb".to_string());
            }
            Ok(Config {
                engines,
                workloads: names(&["checkpoint"]),
                params: Params {
                    num: 1_000_000,
                    ..Params::default()
                },
                repeats: 5,
                reuse_loads: true,
                ..base
            })
        }
        "backup" => {
            let mut engines = vec!["strata".to_string()];
            if COMPARATORS {
                engines.push("rocksdb".to_string());
            }
            Ok(Config {
                engines,
                workloads: names(&["backup"]),
                params: Params {
                    num: 1_000_000,
                    ..Params::default()
                },
                repeats: 5,
                reuse_loads: true,
                ..base
            })
        }
        "scale" => {
            let cap: u64 = 3 << 30;
            let mut c = capped(base, cap, 12_500_000, 1024, 60.0);
            c.engines = if COMPARATORS {
                names(&["strata", "rocksdb"])
            } else {
                names(&["strata"])
            };
            c.workloads = names(&[
                chain::LOAD_ROW,
                "readrandom",
                "seekrandom",
                "ycsb-c",
                "ycsb-b",
                "ycsb-e",
                "ycsb-a",
            ]);
            // Rows stop at their budget, not their count.
            c.params.ops = 100_000_000;
            c.repeats = 3;
            c.reuse_loads = false;
            c.chain = true;
            // The load's limit is four times this.
            c.time_limit = Some(1800.0);
            c.settings.write_buffer_size = (cap / 16) as usize;
            c.settings.target_file_size = 64 << 20;
            c.settings.level_base = 1 << 30;
            // Below the later rows' time limit, so a settle that runs
            // too long fails as such rather than being killed.
            c.settings.settle_limit_secs = 1500;
            Ok(c)
        }
        "merges-capped" => {
            let cap = 128 << 20;
            let mut c = capped(base, cap, 22_000_000, 8, 20.0);
            c.engines = if COMPARATORS {
                names(&["strata", "rocksdb", "leveldb"])
            } else {
                names(&["strata"])
            };
            c.workloads = names(&["mergerandom-loaded", "updaterandom-loaded"]);
            c.params.ops = 1_000_000;
            Ok(c)
        }
        "merges" => Ok(Config {
            workloads: names(&["mergerandom", "updaterandom", "readrandom-after-merges"]),
            params: Params {
                num: 1_000_000,
                ops: 1_000_000,
                ..Params::default()
            },
            repeats: 5,
            ..base
        }),
        "quick" => Ok(Config {
            engines: both_views(),
            workloads: names(&[
                "fillseq",
                "fillrandom",
                "overwrite",
                "readrandom",
                "readrandom:cold",
                "readseq",
                "seekrandom",
                "ycsb-a",
                "ycsb-b",
                "ycsb-c",
            ]),
            params: Params {
                num: 1_000_000,
                ops: 300_000,
                ..Params::default()
            },
            ..base
        }),
        "active" => {
            let mut engines = vec![
                "strata".to_string(),
                "strata:compaction_picker=stale".to_string(),
            ];
            if COMPARATORS {
                engines.extend(["leveldb", "rocksdb", "fjall"].map(String::from));
            }
            let mut workloads: Vec<String> = (1..=9).map(|i| format!("u{i}")).collect();
            workloads.extend("abcd".chars().map(|c| format!("ycsb-{c}")));
            Ok(Config {
                engines,
                workloads,
                params: Params {
                    num: 300_000,
                    ops: 300_000,
                    value_size: 1024,
                    distribution: Some(crate::gen::Distribution::Uniform),
                    ..Params::default()
                },
                settings: EngineSettings {
                    block_cache_size: 16 << 20,
                    write_buffer_size: 8 << 20,
                    target_file_size: 8 << 20,
                    ..EngineSettings::default()
                },
                repeats: 3,
                ..base
            })
        }
        "copro" => {
            let mut engines: Vec<String> =
                ["linear", "subtasks:2", "pipelined", "copro:2", "copro+:2"]
                    .iter()
                    .map(|e| format!("strata:executor={e}"))
                    .collect();
            if COMPARATORS {
                engines.extend(["leveldb", "rocksdb", "fjall"].map(String::from));
            }
            Ok(Config {
                engines,
                workloads: ["fillrandom", "ycsb-a", "ycsb-b", "ycsb-c"]
                    .map(String::from)
                    .to_vec(),
                params: Params {
                    num: 150_000,
                    ops: 150_000,
                    value_size: 1024,
                    ..Params::default()
                },
                // The paper's LevelDB shape: 4 MB memtable, 2 MB tables.
                settings: EngineSettings {
                    block_cache_size: 16 << 20,
                    write_buffer_size: 4 << 20,
                    target_file_size: 2 << 20,
                    subcompactions: 2,
                    ..EngineSettings::default()
                },
                repeats: 3,
                ..base
            })
        }
        "matrixkv" => {
            // The thesis' shape scaled down 16x: 64 MB memtables and
            // tables, an 8 GB container (128 rows), L1 = the container.
            let matrix = "l0=matrix,matrix_capacity=128M,matrix_column_bytes=16M";
            let mut engines = vec![
                "strata".to_string(),
                format!("strata:{matrix},fast_dir=@shm/fast"),
                format!("strata:{matrix},fast_dir=@shm/fast,matrix_hints=false"),
                format!("strata:{matrix}"),
                "strata:db_dir=@shm/db".to_string(),
            ];
            if COMPARATORS {
                engines.extend(["rocksdb", "leveldb", "fjall"].map(String::from));
            }
            Ok(Config {
                engines,
                workloads: ["fillrandom", "readrandom", "fillseq"]
                    .map(String::from)
                    .to_vec(),
                params: Params {
                    num: 300_000,
                    ops: 300_000,
                    value_size: 4096,
                    ..Params::default()
                },
                settings: EngineSettings {
                    block_cache_size: 16 << 20,
                    write_buffer_size: 4 << 20,
                    target_file_size: 4 << 20,
                    level_base: 16 << 20,
                    ..EngineSettings::default()
                },
                repeats: 3,
                ..base
            })
        }
        "kvell" => {
            // strata's LSM as shipped: its tables outgrow the page cache's
            // room under the cap, so it reads them with pread and its block
            // cache, as RocksDB does.
            let mut engines = vec!["kvell".to_string(), "strata".to_string()];
            if COMPARATORS {
                engines.extend(["rocksdb", "leveldb", "fjall"].map(String::from));
            }
            let mut workloads: Vec<String> =
                "abcdef".chars().map(|c| format!("ycsb-{c}")).collect();
            workloads.extend("abcdef".chars().map(|c| format!("ycsb-{c}-uniform")));
            Ok(Config {
                engines,
                workloads,
                params: Params {
                    num: 400_000,
                    ops: 200_000,
                    value_size: 1024,
                    threads: 8,
                    // LevelDB cannot turn off its memory-mapped reads and
                    // collapses under the cap (~350 ops/s): a budget keeps
                    // its runs to a minute, its rate marked as cut short.
                    max_run_secs: Some(60.0),
                    ..Params::default()
                },
                settings: EngineSettings {
                    block_cache_size: 32 << 20,
                    write_buffer_size: 8 << 20,
                    target_file_size: 8 << 20,
                    ..EngineSettings::default()
                },
                repeats: 3,
                memory_limit: Some(128 << 20),
                ceilings: Some((512, 3.0)),
                ..base
            })
        }
        "capped" => Ok(capped(base, 256 << 20, 10_000_000, 100, 20.0)),
        "capped-1k" => Ok(capped(base, 256 << 20, 1_100_000, 1024, 20.0)),
        "capped-small" => Ok(capped(base, 128 << 20, 5_000_000, 100, 15.0)),
        "full" => Ok(Config {
            workloads: all,
            params: Params {
                num: 2_000_000,
                ops: 1_000_000,
                duration_secs: 30.0,
                ..Params::default()
            },
            settings: EngineSettings {
                block_cache_size: 64 << 20,
                ..EngineSettings::default()
            },
            ..base
        }),
        _ => Err(BenchError::Usage(format!(
            "unknown preset {name:?}; known: {}",
            PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
        ))),
    }
}
