//! Sorted runs of tables, the floor below level 0 and the versions: a live
//! table as a version holds it ([`FileMeta`]) and the cache that opens it
//! ([`TableCache`]), a run read as one iterator ([`LevelIter`]), a run
//! written as tables cut by size ([`output::Outputs`]), which entries a
//! flush or compaction may drop ([`filter::Dropper`]), how it folds
//! merge operands ([`fold::Fold`]) and what else it does to entries: expiry
//! and the user's compaction filter ([`rules::Rules`]).
//!
//! A table file is deleted when it was removed by an edit *and* the last
//! version, iterator or compaction holding its `FileMeta` lets go. A
//! `FileMeta` does not keep its table open: the shared `TableCache` does,
//! for at most `max_open_files` tables at a time.

pub mod filter;
pub mod fold;
mod level_iter;
mod meta;
pub mod output;
pub mod rules;
mod table_cache;

pub use level_iter::LevelIter;
#[cfg(test)]
pub(crate) use meta::probes;
pub use meta::{FileMeta, ReadCharge, BYTES_PER_MISS};
pub use table_cache::TableCache;
