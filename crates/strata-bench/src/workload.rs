//! The workloads: db_bench style, YCSB core, active compaction's U1…U9 and
//! MatrixKV's fluctuation run; and the operation mix each one draws from.

use crate::gen::{Distribution, KeyChooser};
use crate::BenchError;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Parameters of a run, shared by every workload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Params {
    /// Records loaded before the run (and the key space of db_bench workloads).
    pub num: u64,
    /// Operations of the run phase (per run, split among threads).
    pub ops: u64,
    pub key_size: usize,
    pub value_size: usize,
    /// Client threads (readers, for readwhilewriting).
    pub threads: usize,
    /// Length of timed runs (fluctuation, readwhilewriting), seconds.
    pub duration_secs: f64,
    pub seed: u64,
    /// Entries read after each seek (seekrandom).
    pub scan_len: usize,
    /// Overrides the YCSB / U-series request distribution.
    pub distribution: Option<Distribution>,
    /// A run of a fixed number of operations stops after this many seconds
    /// even if some are left (an engine that collapses still reports its
    /// rate in bounded time); the result then says it was cut short.
    #[serde(default)]
    pub max_run_secs: Option<f64>,
    /// How far values compress, as db_bench's `--compression_ratio`: each
    /// 100-byte stretch is this share of random bytes, repeated to fill it
    /// (1.0: incompressible; db_bench's default is 0.5).
    #[serde(default = "incompressible")]
    pub compression_ratio: f64,
}

fn incompressible() -> f64 {
    1.0
}

impl Default for Params {
    fn default() -> Self {
        Params {
            num: 100_000,
            ops: 100_000,
            key_size: 16,
            value_size: 100,
            threads: 1,
            duration_secs: 10.0,
            seed: 42,
            scan_len: 10,
            distribution: None,
            max_run_secs: None,
            compression_ratio: 1.0,
        }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.key_size < 16 {
            return Err(BenchError::Usage(
                "--key-size must be at least 16 (keys are 64-bit numbers in hex)".into(),
            ));
        }
        if self.value_size == 0 || self.value_size > 16 << 20 {
            return Err(BenchError::Usage("--value-size must be 1 B..16 MiB".into()));
        }
        if self.num == 0 || self.threads == 0 || self.threads > 256 {
            return Err(BenchError::Usage(
                "--num must be > 0 and --threads 1..256".into(),
            ));
        }
        if !(self.duration_secs > 0.0 && self.duration_secs <= MAX_RUN_SECS) {
            return Err(BenchError::Usage(format!(
                "--duration must be > 0 and at most {MAX_RUN_SECS} seconds"
            )));
        }
        if self
            .max_run_secs
            .is_some_and(|s| !(s > 0.0 && s <= MAX_RUN_SECS))
        {
            return Err(BenchError::Usage(format!(
                "--max-run-secs must be > 0 and at most {MAX_RUN_SECS} (about 11 days)"
            )));
        }
        Ok(())
    }
}

/// The longest budget `--max-run-secs` takes (a deadline past it could
/// overflow the clock).
pub const MAX_RUN_SECS: f64 = 1e6;

/// Shares of a YCSB-style operation mix (they sum to 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub rmw: f64,
    pub dist: Distribution,
}

/// A workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    FillSeq,
    FillRandom,
    Overwrite,
    /// Random overwrites of the loaded keys for `duration_secs` (as RocksDB's
    /// benchmark scripts run overwrite after a bulk load): long enough, with
    /// its settle, to push several compactions into the last level.
    OverwriteTimed,
    ReadRandom,
    /// db_bench's readseq: one iterator per thread, from the first key on.
    ReadSeq,
    /// A scan resumed in calls of 100 entries, each a new cursor seeking
    /// past the last key (how a paginating client scans).
    ScanResume,
    SeekRandom,
    DeleteRandom,
    ReadWhileWriting,
    YcsbLoad,
    /// YCSB A–F as 'a'..='f'.
    Ycsb(char),
    /// YCSB A–F with uniform requests (`ycsb-a-uniform`; the KVell paper
    /// runs every workload both ways).
    YcsbUniform(char),
    /// Active compaction's U1…U9: update share 10 %…90 %, the rest reads.
    Update(u8),
    Fluctuation,
    /// Deletes 10 % of the loaded keys: the first [`DELETED_PER_BLOCK`]
    /// keys of every block of [`DELETE_BLOCK`], with one range deletion
    /// per block (`ranges`, where the engine has them; else as `!ranges`)
    /// or as that many point deletes in one batch.
    DeleteBlocks {
        ranges: bool,
    },
    /// A read workload run on a load whose blocks were deleted so
    /// (`ranges` as in [`Workload::DeleteBlocks`]), flushed, and settled.
    AfterDeletes(AfterDeletes, bool),
    /// Counter increments (+1 in RocksDB's `uint64add` encoding: 8 bytes,
    /// little endian) of random counters among [`counters`]: with a merge
    /// where the engine has one (`merge`; else, and for `updaterandom`, a
    /// get and a put). With `loaded`, the counters are the `num` loaded
    /// keys (load with 8-byte values: each is then a counter's start),
    /// so the table of counters can be made larger than memory.
    Counters {
        merge: bool,
        loaded: bool,
    },
    /// Random gets of the counters after `num` increments by merges, not
    /// flushed: reads fold the operands where the writes left them.
    CountersRead,
    /// One checkpoint of the loaded database (`KvStore::checkpoint`) into
    /// a new directory beside it, on the same file system: one timed call.
    /// Not in [`all`]: engines without checkpoints (LevelDB, fjall, KVell)
    /// fail it with `NotSupported` (see [`extra`]).
    Checkpoint,
    /// One backup of the loaded database (`KvStore::backup`) into a new,
    /// empty backup directory beside it, on the same file system: one
    /// timed call. Not in [`all`]: engines without backups (LevelDB, fjall,
    /// KVell) fail it with `NotSupported` (see [`extra`]).
    Backup,
}

/// Counters of [`Workload::Counters`] for `num` (ten increments each per
/// `num` operations).
pub fn counters(num: u64) -> u64 {
    (num / 10).max(1)
}

/// How many counters a [`Workload::Counters`] run increments: the loaded
/// keys (`loaded`), else [`counters`].
pub fn counter_range(num: u64, loaded: bool) -> u64 {
    if loaded {
        num.max(1)
    } else {
        counters(num)
    }
}

/// Keys per block of [`Workload::DeleteBlocks`].
pub const DELETE_BLOCK: u64 = 1000;
/// Keys deleted at the start of each block.
pub const DELETED_PER_BLOCK: u64 = 100;

/// What [`Workload::AfterDeletes`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AfterDeletes {
    ReadRandom,
    SeekRandom,
    ReadSeq,
}

impl AfterDeletes {
    const ALL: [AfterDeletes; 3] = [
        AfterDeletes::ReadRandom,
        AfterDeletes::SeekRandom,
        AfterDeletes::ReadSeq,
    ];

    /// The workload it runs.
    fn base(self) -> Workload {
        match self {
            AfterDeletes::ReadRandom => Workload::ReadRandom,
            AfterDeletes::SeekRandom => Workload::SeekRandom,
            AfterDeletes::ReadSeq => Workload::ReadSeq,
        }
    }
}

/// `ranges` as a name part.
fn how(ranges: bool) -> &'static str {
    if ranges {
        "ranges"
    } else {
        "keys"
    }
}

/// Every workload, in report order.
pub fn all() -> Vec<Workload> {
    let mut v = vec![
        Workload::FillSeq,
        Workload::FillRandom,
        Workload::Overwrite,
        Workload::OverwriteTimed,
        Workload::ReadRandom,
        Workload::ReadSeq,
        Workload::ScanResume,
        Workload::SeekRandom,
        Workload::DeleteRandom,
        Workload::ReadWhileWriting,
        Workload::YcsbLoad,
    ];
    v.extend("abcdef".chars().map(Workload::Ycsb));
    v.extend("abcdef".chars().map(Workload::YcsbUniform));
    v.extend((1..=9).map(Workload::Update));
    v.push(Workload::Fluctuation);
    for ranges in [true, false] {
        v.push(Workload::DeleteBlocks { ranges });
        v.extend(
            AfterDeletes::ALL
                .iter()
                .map(|a| Workload::AfterDeletes(*a, ranges)),
        );
    }
    v.push(Workload::Counters {
        merge: true,
        loaded: false,
    });
    v.push(Workload::Counters {
        merge: false,
        loaded: false,
    });
    v.push(Workload::CountersRead);
    v
}

/// Workloads outside [`all`] (which the `tiny` and `full` presets run on
/// every engine): some engines lack their operation and fail them with
/// `NotSupported`. Their own presets name them.
pub fn extra() -> Vec<Workload> {
    vec![
        Workload::Counters {
            merge: true,
            loaded: true,
        },
        Workload::Counters {
            merge: false,
            loaded: true,
        },
        Workload::Checkpoint,
        Workload::Backup,
    ]
}

/// What a workload needs in the database before its run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preload {
    Nothing,
    /// Keys `0..num` (db_bench key space), written in a seeded random order.
    DbBench,
    /// YCSB records `0..num`, stored under scattered keys.
    Ycsb,
    /// Keys `0..num` (db_bench key space), written in order: no order is
    /// kept in memory, so a load may be larger than a small cap allows
    /// the harness (the loaded counters).
    Sequential,
    /// [`Preload::DbBench`], then 10 % deleted in blocks
    /// ([`Workload::DeleteBlocks`]) by range deletions.
    DeletedRanges,
    /// The same keys deleted one by one.
    DeletedKeys,
    /// `num` increments of [`counters`] counters by merges (get and put
    /// where the engine has none).
    Counters,
}

/// The suffix of a workload row that starts its run with the database's
/// files evicted from the page cache (`readrandom:cold`); rows without it
/// start warm, with whatever the load left cached.
pub const COLD_SUFFIX: &str = ":cold";

/// Splits a workload row into the workload and whether it starts cold.
pub fn split_cold(row: &str) -> (&str, bool) {
    match row.trim().strip_suffix(COLD_SUFFIX) {
        Some(base) => (base, true),
        None => (row.trim(), false),
    }
}

impl Workload {
    /// Parses a workload name, with or without [`COLD_SUFFIX`].
    pub fn parse(s: &str) -> Result<Self, BenchError> {
        let s = split_cold(s).0.to_ascii_lowercase();
        let w = match s.as_str() {
            "fillseq" => Workload::FillSeq,
            "fillrandom" => Workload::FillRandom,
            "overwrite" => Workload::Overwrite,
            "overwrite-timed" => Workload::OverwriteTimed,
            "readrandom" => Workload::ReadRandom,
            "readseq" => Workload::ReadSeq,
            "scan-resume" => Workload::ScanResume,
            "seekrandom" => Workload::SeekRandom,
            "deleterandom" => Workload::DeleteRandom,
            "readwhilewriting" => Workload::ReadWhileWriting,
            "ycsb-load" | "load" => Workload::YcsbLoad,
            "fluctuation" => Workload::Fluctuation,
            "deleterange" => Workload::DeleteBlocks { ranges: true },
            "deletekeys" => Workload::DeleteBlocks { ranges: false },
            "mergerandom" => Workload::Counters {
                merge: true,
                loaded: false,
            },
            "updaterandom" => Workload::Counters {
                merge: false,
                loaded: false,
            },
            "mergerandom-loaded" => Workload::Counters {
                merge: true,
                loaded: true,
            },
            "updaterandom-loaded" => Workload::Counters {
                merge: false,
                loaded: true,
            },
            "readrandom-after-merges" => Workload::CountersRead,
            "checkpoint" => Workload::Checkpoint,
            "backup" => Workload::Backup,
            _ => {
                if let Some(w) = all()
                    .into_iter()
                    .find(|w| matches!(w, Workload::AfterDeletes(..)) && w.name() == s)
                {
                    return Ok(w);
                }
                if let Some(c) = s.strip_prefix("ycsb-").and_then(|r| r.chars().next()) {
                    if s.len() == 6 && ('a'..='f').contains(&c) {
                        return Ok(Workload::Ycsb(c));
                    }
                    if s.len() == 14 && s.ends_with("-uniform") && ('a'..='f').contains(&c) {
                        return Ok(Workload::YcsbUniform(c));
                    }
                }
                if let Some(d) = s.strip_prefix('u').and_then(|r| r.parse::<u8>().ok()) {
                    if (1..=9).contains(&d) {
                        return Ok(Workload::Update(d));
                    }
                }
                return Err(BenchError::Usage(format!(
                    "unknown workload {s:?}; known: {}",
                    all()
                        .iter()
                        .chain(&extra())
                        .map(|w| w.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        Ok(w)
    }

    pub fn name(&self) -> String {
        match self {
            Workload::FillSeq => "fillseq".into(),
            Workload::FillRandom => "fillrandom".into(),
            Workload::Overwrite => "overwrite".into(),
            Workload::OverwriteTimed => "overwrite-timed".into(),
            Workload::ReadRandom => "readrandom".into(),
            Workload::ReadSeq => "readseq".into(),
            Workload::ScanResume => "scan-resume".into(),
            Workload::SeekRandom => "seekrandom".into(),
            Workload::DeleteRandom => "deleterandom".into(),
            Workload::ReadWhileWriting => "readwhilewriting".into(),
            Workload::YcsbLoad => "ycsb-load".into(),
            Workload::Ycsb(c) => format!("ycsb-{c}"),
            Workload::YcsbUniform(c) => format!("ycsb-{c}-uniform"),
            Workload::Update(d) => format!("u{d}"),
            Workload::Fluctuation => "fluctuation".into(),
            Workload::DeleteBlocks { ranges: true } => "deleterange".into(),
            Workload::DeleteBlocks { ranges: false } => "deletekeys".into(),
            Workload::AfterDeletes(a, ranges) => {
                format!("{}-after-{}", a.base().name(), how(*ranges))
            }
            Workload::Counters {
                merge: true,
                loaded: false,
            } => "mergerandom".into(),
            Workload::Counters {
                merge: false,
                loaded: false,
            } => "updaterandom".into(),
            Workload::Counters {
                merge: true,
                loaded: true,
            } => "mergerandom-loaded".into(),
            Workload::Counters {
                merge: false,
                loaded: true,
            } => "updaterandom-loaded".into(),
            Workload::CountersRead => "readrandom-after-merges".into(),
            Workload::Checkpoint => "checkpoint".into(),
            Workload::Backup => "backup".into(),
        }
    }

    /// One line for reports.
    pub fn describe(&self, p: &Params) -> String {
        match self {
            Workload::FillSeq => format!("write {} keys in order into an empty store", p.num),
            Workload::FillRandom => format!("write {} uniformly random keys (of {}) into an empty store", p.num, p.num),
            Workload::Overwrite => format!("{} random overwrites of {} loaded keys", p.ops, p.num),
            Workload::OverwriteTimed => format!(
                "random overwrites of {} loaded keys for {:.0} s",
                p.num, p.duration_secs
            ),
            Workload::ReadRandom => format!("{} random gets of {} loaded keys", p.ops, p.num),
            Workload::ReadSeq => format!(
                "read up to {} entries in order with one iterator (latency per 100 entries)",
                p.ops
            ),
            Workload::ScanResume => format!(
                "read up to {} entries in order in calls of 100, each a new cursor seeking past the last key",
                p.ops
            ),
            Workload::SeekRandom => format!("{} random seeks, each reading {} entries", p.ops, p.scan_len),
            Workload::DeleteRandom => format!("{} random deletes of {} loaded keys", p.ops, p.num),
            Workload::ReadWhileWriting => format!(
                "{} reader thread(s) do random gets for {:.0} s while 1 writer overwrites; reader figures",
                p.threads, p.duration_secs
            ),
            Workload::YcsbLoad => format!("YCSB load: insert {} records (hashed order)", p.num),
            Workload::Ycsb(_) | Workload::YcsbUniform(_) | Workload::Update(_) => {
                let m = self.mix(p).unwrap_or(Mix {
                    read: 0.0,
                    update: 0.0,
                    insert: 0.0,
                    scan: 0.0,
                    rmw: 0.0,
                    dist: Distribution::Uniform,
                });
                let mut parts = Vec::new();
                for (share, what) in [
                    (m.read, "read"),
                    (m.update, "update"),
                    (m.insert, "insert"),
                    (m.scan, "scan 1-100"),
                    (m.rmw, "read-modify-write"),
                ] {
                    if share > 0.0 {
                        parts.push(format!("{:.0}% {what}", share * 100.0));
                    }
                }
                format!("{} ops over {} records: {}, {}", p.ops, p.num, parts.join(", "), m.dist.name())
            }
            Workload::Fluctuation => format!(
                "random writes for {:.0} s into an empty store (per-second timeline)",
                p.duration_secs
            ),
            Workload::DeleteBlocks { ranges } => format!(
                "delete 10 % of {} loaded keys: the first {DELETED_PER_BLOCK} of every {DELETE_BLOCK}, {} (rate in keys)",
                p.num,
                if *ranges {
                    "one range deletion each (point deletes where the engine has none)"
                } else {
                    "as point deletes, a batch of them each"
                }
            ),
            Workload::AfterDeletes(a, ranges) => format!(
                "{}; after 10 % of the keys were deleted in blocks by {}, flushed and settled",
                a.base().describe(p),
                if *ranges { "range deletions" } else { "point deletes" }
            ),
            Workload::Counters { merge, loaded } => format!(
                "{} increments (+1, u64add encoding) of random counters among {}{}, {}",
                p.ops,
                counter_range(p.num, *loaded),
                if *loaded {
                    " (the loaded keys, 8-byte values: each a counter's start)"
                } else {
                    ""
                },
                if *merge {
                    "each a merge (a get and a put where the engine has no merge operator)"
                } else {
                    "each a get and a put"
                }
            ),
            Workload::CountersRead => format!(
                "{} random gets of {} counters after {} increments by merges (get and put where the engine has none), not flushed",
                p.ops,
                counters(p.num),
                p.num
            ),
            Workload::Checkpoint => format!(
                "one checkpoint of {} loaded keys (flushed and settled) into a new directory beside the \
                 database, on the same file system (the engine flushes its memtable first and hard-links \
                 what it can); the time is the call's, ops/s 1 ÷ it, MB/s the checkpoint's file bytes ÷ it",
                p.num
            ),
            Workload::Backup => format!(
                "one backup of {} loaded keys (flushed and settled) into a new, empty backup directory beside \
                 the database, on the same file system (the engine flushes its memtable first and copies \
                 every file); the time is the call's, ops/s 1 ÷ it, MB/s the backup directory's file bytes ÷ it",
                p.num
            ),
        }
    }

    pub fn preload(&self) -> Preload {
        match self {
            Workload::FillSeq
            | Workload::FillRandom
            | Workload::YcsbLoad
            | Workload::Fluctuation => Preload::Nothing,
            Workload::Ycsb(_) | Workload::YcsbUniform(_) | Workload::Update(_) => Preload::Ycsb,
            Workload::AfterDeletes(_, true) => Preload::DeletedRanges,
            Workload::AfterDeletes(_, false) => Preload::DeletedKeys,
            Workload::Counters { loaded: false, .. } => Preload::Nothing,
            Workload::Counters { loaded: true, .. } => Preload::Sequential,
            Workload::CountersRead => Preload::Counters,
            _ => Preload::DbBench,
        }
    }

    /// The workload whose operations a run of this one performs (its
    /// preload aside).
    pub fn run_as(&self) -> Workload {
        match self {
            Workload::AfterDeletes(a, _) => a.base(),
            w => *w,
        }
    }

    /// True for the counter workloads (the engines open with a `u64add`
    /// merge operator).
    pub fn counts(&self) -> bool {
        matches!(self, Workload::Counters { .. } | Workload::CountersRead)
    }

    /// True for workloads whose point is writing (write amplification applies).
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Workload::FillSeq
                | Workload::FillRandom
                | Workload::Overwrite
                | Workload::OverwriteTimed
                | Workload::DeleteRandom
                | Workload::DeleteBlocks { .. }
                | Workload::Counters { .. }
                | Workload::YcsbLoad
                | Workload::Fluctuation
        ) || matches!(self, Workload::Ycsb(c) | Workload::YcsbUniform(c) if *c != 'c')
            || matches!(self, Workload::Update(_))
    }

    /// True for workloads that run for a fixed time rather than a fixed count.
    pub fn timed(&self) -> bool {
        matches!(
            self,
            Workload::Fluctuation | Workload::ReadWhileWriting | Workload::OverwriteTimed
        )
    }

    /// The YCSB / U-series mix, per the YCSB core workload definitions.
    pub fn mix(&self, p: &Params) -> Option<Mix> {
        let m = |read, update, insert, scan, rmw, dist: Distribution| Mix {
            read,
            update,
            insert,
            scan,
            rmw,
            dist: p.distribution.unwrap_or(dist),
        };
        use Distribution::*;
        match self {
            Workload::Ycsb('a') => Some(m(0.5, 0.5, 0.0, 0.0, 0.0, Zipfian)),
            Workload::Ycsb('b') => Some(m(0.95, 0.05, 0.0, 0.0, 0.0, Zipfian)),
            Workload::Ycsb('c') => Some(m(1.0, 0.0, 0.0, 0.0, 0.0, Zipfian)),
            Workload::Ycsb('d') => Some(m(0.95, 0.0, 0.05, 0.0, 0.0, Latest)),
            Workload::Ycsb('e') => Some(m(0.0, 0.0, 0.05, 0.95, 0.0, Zipfian)),
            Workload::Ycsb('f') => Some(m(0.5, 0.0, 0.0, 0.0, 0.5, Zipfian)),
            Workload::YcsbUniform(c) => Workload::Ycsb(*c)
                .mix(p)
                .map(|m| Mix { dist: Uniform, ..m }),
            Workload::Update(d) => {
                let u = f64::from(*d) / 10.0;
                Some(m(1.0 - u, u, 0.0, 0.0, 0.0, Zipfian))
            }
            _ => None,
        }
    }
}

/// One operation of a mix, on record numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read(u64),
    Update(u64),
    /// Insert the next new record.
    Insert,
    Scan(u64, usize),
    ReadModifyWrite(u64),
}

/// Draws the operations of a [`Mix`].
pub struct MixGen {
    mix: Mix,
    chooser: KeyChooser,
}

/// YCSB's maximum scan length (uniform 1..=100).
pub const MAX_SCAN: usize = 100;

impl MixGen {
    pub fn new(mix: Mix, records: u64) -> Self {
        MixGen {
            mix,
            chooser: KeyChooser::new(mix.dist, records),
        }
    }

    /// The next operation when `records` records exist.
    pub fn next(&mut self, rng: &mut impl Rng, records: u64) -> Op {
        let r: f64 = rng.gen();
        let m = &self.mix;
        if r < m.read {
            Op::Read(self.chooser.next(rng, records))
        } else if r < m.read + m.update {
            Op::Update(self.chooser.next(rng, records))
        } else if r < m.read + m.update + m.insert {
            Op::Insert
        } else if r < m.read + m.update + m.insert + m.scan {
            let len = rng.gen_range(1..=MAX_SCAN);
            Op::Scan(self.chooser.next(rng, records), len)
        } else {
            Op::ReadModifyWrite(self.chooser.next(rng, records))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn names_round_trip() -> Result<(), BenchError> {
        for w in all().into_iter().chain(extra()) {
            assert_eq!(Workload::parse(&w.name())?, w);
        }
        assert!(Workload::parse("ycsb-g").is_err());
        assert!(Workload::parse("u10").is_err());
        Ok(())
    }

    #[test]
    fn ycsb_mixes_have_the_requested_shares() {
        let p = Params::default();
        for w in "abcdef"
            .chars()
            .map(Workload::Ycsb)
            .chain((1..=9).map(Workload::Update))
        {
            let Some(mix) = w.mix(&p) else {
                panic!("{w:?} has no mix");
            };
            let total = mix.read + mix.update + mix.insert + mix.scan + mix.rmw;
            assert!((total - 1.0).abs() < 1e-9, "{w:?}");
            let mut g = MixGen::new(mix, 10_000);
            let mut rng = SmallRng::seed_from_u64(5);
            let n = 100_000;
            let mut c = [0usize; 5];
            for _ in 0..n {
                match g.next(&mut rng, 10_000) {
                    Op::Read(k) | Op::Update(k) | Op::ReadModifyWrite(k) if k >= 10_000 => {
                        panic!("key {k} out of range")
                    }
                    Op::Read(_) => c[0] += 1,
                    Op::Update(_) => c[1] += 1,
                    Op::Insert => c[2] += 1,
                    Op::Scan(_, len) => {
                        assert!((1..=MAX_SCAN).contains(&len));
                        c[3] += 1
                    }
                    Op::ReadModifyWrite(_) => c[4] += 1,
                }
            }
            let want = [mix.read, mix.update, mix.insert, mix.scan, mix.rmw];
            for (got, want) in c.iter().zip(want) {
                let share = *got as f64 / n as f64;
                assert!((share - want).abs() < 0.01, "{w:?}: {share} vs {want}");
            }
        }
        let u3 = Workload::Update(3).mix(&p);
        assert_eq!(u3.map(|m| (m.update * 10.0).round()), Some(3.0));
        assert_eq!(
            Workload::Ycsb('d').mix(&p).map(|m| m.dist),
            Some(Distribution::Latest)
        );
    }

    #[test]
    fn distribution_override_applies() {
        let p = Params {
            distribution: Some(Distribution::Uniform),
            ..Params::default()
        };
        assert_eq!(
            Workload::Ycsb('a').mix(&p).map(|m| m.dist),
            Some(Distribution::Uniform)
        );
    }
}
