//! Block-based sorted table files (LevelDB/RocksDB style).
//!
//! A table holds internal keys (`user_key ++ 8-byte trailer`) in
//! [`compare_internal`](crate::types::compare_internal) order with raw values.
//!
//! ```text
//! +---------------------------+
//! | data block 0   | trailer  |  trailer = u8 compression | u32 masked crc32c(block ++ type)
//! | data block 1   | trailer  |
//! | ...                       |
//! | filter block   | trailer  |  (absent when no filter: handle (0, 0))
//! | properties blk | trailer  |
//! | index block    | trailer  |  key = last key of data block i, value = varint offset, varint size
//! +---------------------------+
//! | footer (64 bytes)         |  filter, index, properties handles as u64 pairs,
//! |                           |  u32 version, u32 masked crc32c(footer[0..52]), u64 magic
//! +---------------------------+
//! ```
//!
//! Blocks are prefix compressed with restart points ([`block`]); data blocks
//! may be LZ4/zstd compressed when that saves at least 12.5 %. The bloom
//! filter is one per table over user keys ([`filter`]). The exact byte layout
//! is in `docs/FORMAT.md`.
//!
//! Readers treat the file as untrusted: any malformed byte becomes
//! [`Error::Corruption`](crate::Error::Corruption) naming the file and offset.

pub mod block;
mod builder;
mod cache;
mod fence;
pub mod filter;
pub mod format;
mod iter;
mod prefetch;
mod properties;
mod readahead;
mod reader;
mod rows;
pub mod warm;

pub use builder::{TableBuilder, TableOptions};
pub use cache::BlockCache;
pub use iter::TableIter;
pub use properties::TableProperties;
pub use reader::Table;
pub use rows::RowCache;

#[cfg(test)]
mod tests;
