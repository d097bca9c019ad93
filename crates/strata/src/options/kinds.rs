//! The design choices an `Options` names: one enum per choice, each with
//! the name it prints and parses as.

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
    /// in that log and in later logs, unless the damage held no write (the
    /// next log continues the history without a gap). RocksDB
    /// `kPointInTimeRecovery`.
    PointInTime,
    /// Skip damaged records and keep going. RocksDB `kSkipAnyCorruptedRecords`.
    SkipAnyCorrupted,
}

impl WalRecovery {
    pub(super) fn name(self) -> &'static str {
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
