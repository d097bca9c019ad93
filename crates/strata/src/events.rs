//! Flush and compaction output events: which table was created or removed,
//! and (when a listener asks) which user keys went into each new table.
//! (The stale-version tracker of active compaction is fed by the engine
//! directly, not through these events.)

use crate::edit::FileDesc;

/// Why a table was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableReason {
    Flush,
    Compaction,
}

/// A table that became part of the current version.
#[derive(Debug)]
pub struct TableCreated<'a> {
    pub reason: TableReason,
    pub level: usize,
    pub file: &'a FileDesc,
    /// The distinct user keys of the table, in order; empty unless some
    /// listener's `wants_keys` is true.
    pub keys: &'a [Vec<u8>],
}

/// Receives engine events. Called from background threads, without engine
/// locks held, after the version that contains the change is installed.
/// A listener should return quickly: the background thread waits for it.
/// Events arrive in version order: a new table counts as busy until its
/// creation has been announced, so no compaction moves or merges it first.
/// So a listener may read the database, but must not write to it (a write
/// can stall until a flush ends) or wait for background work (`flush`,
/// `compact_range`, `wait_for_compactions`, `close`): that work waits for
/// the listener.
pub trait EventListener: Send + Sync {
    /// Ask for the keys of every new table (costs a copy of each key).
    fn wants_keys(&self) -> bool {
        false
    }
    fn on_table_created(&self, _event: &TableCreated<'_>) {}
    /// A table left the current version (it is deleted once unreferenced).
    fn on_table_removed(&self, _level: usize, _id: u64) {}
    /// A table moved down unchanged (a trivial move): same file, same keys,
    /// now in `to_level`. No created/removed event is sent for it.
    fn on_table_moved(&self, _from_level: usize, _to_level: usize, _id: u64) {}
}
