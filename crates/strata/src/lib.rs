//! strata: an embedded, crash-safe, ordered key-value storage engine.
//!
//! See `docs/ARCHITECTURE.md` for the data flow and which module owns what.
//!
//! The door is [`open`], returning a [`KvStore`] for the engine
//! `Options::engine` names (scans by [`ScanRange`], [`Cursor`]s,
//! [`Semantics`]), with [`Options`], [`WriteBatch`], [`Error`], the
//! statistics ([`StatsSnapshot`], [`StoreStats`]) and the events
//! ([`EventListener`]); the LSM's extras are [`Db`], [`Snapshot`] and
//! [`DbIter`]. Public modules: `options`, `stats`, `io` (the file layer
//! `Options::fs` takes, and its fault injection), `merge` (merge operators:
//! the trait and the built-ins), `compaction_filter` (the filter
//! hook), `clock` (the wall clock time to live reads), `types` (key and value
//! limits), `filename` (the on-disk names) and `verify`; modules marked
//! hidden are for the crate's tools and tests.
//!
//! ```
//! use strata::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
//!
//! # fn main() -> strata::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("strata-doc-{}", std::process::id()));
//! let db = Db::open(&dir, Options::default())?;
//! db.put(b"apple", b"red")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"banana", b"yellow");
//! batch.delete(b"apple");
//! db.write(batch, &WriteOptions { sync: true })?;
//! assert_eq!(db.get(b"apple")?, None);
//!
//! let snap = db.snapshot();
//! db.put(b"cherry", b"dark red")?;
//! let keys: Vec<Vec<u8>> = db
//!     .scan_opt::<&[u8], _>(.., &ReadOptions { snapshot: Some(&snap) })?
//!     .map(|entry| entry.map(|(k, _)| k))
//!     .collect::<strata::Result<_>>()?;
//! assert_eq!(keys, vec![b"banana".to_vec()]);
//! # drop(snap);
//! # drop(db);
//! # let _ = std::fs::remove_dir_all(&dir);
//! # Ok(())
//! # }
//! ```

pub mod backup;
pub(crate) mod batch;
pub(crate) mod budget;
pub mod clock;
pub(crate) mod coding;
/// Compaction internals, public for the compaction worker (`strata
/// compaction-worker`) and the tests.
#[doc(hidden)]
pub mod compaction;
pub mod compaction_filter;
mod db;
pub(crate) mod edit;
pub mod error;
pub(crate) mod events;
pub mod filename;
#[cfg(test)]
mod floors;
#[doc(hidden)]
pub mod fuzzing;
pub mod io;
pub(crate) mod iter;
/// The KVell engine's internals (open it with `strata::open` and
/// `engine=kvell`), public for its fault and power-loss tests.
#[doc(hidden)]
pub mod kvell;
pub(crate) mod l0;
/// The memtable, public for the memtable benchmark in `examples/`.
#[doc(hidden)]
pub mod memtable;
pub mod merge;
pub(crate) mod open;
pub mod options;
pub(crate) mod rangedel;
pub(crate) mod report;
pub(crate) mod runs;
pub(crate) mod sched;
pub(crate) mod stale;
pub mod stats;
pub(crate) mod store;
/// The table format, public for the tests and the fuzz corpus.
#[doc(hidden)]
pub mod table;
pub mod types;
pub mod verify;
pub(crate) mod version;
/// The log format, public for the tests and the fuzz corpus.
#[doc(hidden)]
pub mod wal;

pub use backup::{BackupInfo, BackupStore, RestoreStats};
pub use batch::{BatchEntry, BatchIter, KeyspaceRef, WriteBatch};
pub use compaction_filter::{CompactionFilter, FilterOp};
pub use db::{CheckpointStats, Db, Keyspace, ReadOptions, Scan, Snapshot, MAX_KEYSPACE_NAME};
pub use edit::FileDesc;
pub use error::{Error, Result};
pub use events::{EventListener, TableCreated, TableReason};
pub use iter::DbIter;
pub use merge::{MergeOp, MergeOperator};
pub use open::open;
pub use options::{
    Compression, EngineKind, KvellDurability, KvellIo, KvellOnDamage, Options, PickerKind,
    WalRecovery, WriteOptions,
};
pub use stats::{EngineStats, KvellStats, StatsSnapshot, StoreStats};
pub use store::{Cursor, KvStore, ScanRange, Semantics, StoreSnapshot};
