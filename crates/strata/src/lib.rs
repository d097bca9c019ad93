//! strata: an embedded, crash-safe, ordered key-value storage engine.
//!
//! See `docs/ARCHITECTURE.md` for the data flow and which module owns what.
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

pub mod batch;
pub mod budget;
pub mod coding;
pub mod compaction;
mod db;
pub mod edit;
pub mod error;
pub mod events;
pub mod filename;
#[cfg(test)]
mod floors;
#[doc(hidden)]
pub mod fuzzing;
pub mod io;
pub mod iter;
pub mod kvell;
pub(crate) mod l0;
pub mod memtable;
pub mod open;
pub mod options;
pub mod report;
pub mod runs;
pub(crate) mod sched;
pub mod stale;
pub mod stats;
pub mod store;
pub mod table;
pub mod types;
pub mod verify;
pub mod version;
pub mod wal;

pub use batch::WriteBatch;
pub use db::{Db, ReadOptions, Scan, Snapshot};
pub use error::{Error, Result};
pub use events::{EventListener, TableCreated, TableReason};
pub use iter::DbIter;
pub use open::open;
pub use options::{
    Compression, EngineKind, KvellDurability, KvellIo, KvellOnDamage, Options, PickerKind,
    WalRecovery, WriteOptions,
};
pub use stats::{EngineStats, KvellStats, StatsSnapshot, StoreStats};
pub use store::{Cursor, KvStore, ScanRange, Semantics, StoreSnapshot};
