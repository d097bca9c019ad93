//! strata: an embedded, crash-safe, ordered key-value storage engine.
//!
//! See `docs/ARCHITECTURE.md` for the data flow and which module owns what.

pub mod batch;
pub mod coding;
pub mod compaction;
mod db;
pub mod error;
pub mod filename;
pub mod io;
pub mod iter;
pub mod memtable;
pub mod options;
pub mod stats;
pub mod store;
pub mod table;
pub mod types;
pub mod verify;
pub mod version;
pub mod wal;

pub use batch::WriteBatch;
pub use compaction::events::{EventListener, TableCreated, TableReason};
pub use db::{Db, ReadOptions, Scan, Snapshot};
pub use error::{Error, Result};
pub use iter::DbIter;
pub use options::{Compression, Options, WalRecovery, WriteOptions};
pub use stats::StatsSnapshot;
pub use store::KvStore;
