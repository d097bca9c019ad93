//! strata: an embedded, crash-safe, ordered key-value storage engine.
//!
//! See `docs/ARCHITECTURE.md` for the data flow and which module owns what.

pub mod batch;
pub mod coding;
pub mod compaction;
pub mod error;
pub mod filename;
pub mod io;
pub mod memtable;
pub mod iter;
pub mod options;
pub mod stats;
pub mod table;
pub mod types;
pub mod version;
pub mod wal;

pub use error::{Error, Result};
pub use options::{Compression, Options, WalRecovery, WriteOptions};
