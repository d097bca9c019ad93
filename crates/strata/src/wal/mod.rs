//! The write-ahead log: every write batch is appended here before it reaches
//! the memtable, so a crash loses nothing that was acknowledged (and, with
//! `sync`, nothing on power loss either). The format is LevelDB's log format,
//! plus a header record; see `docs/FORMAT.md` for the byte-level description.
//!
//! ```text
//! file     := block* [partial block]
//! block    := fragment* trailer?            -- exactly 32768 bytes except the last
//! fragment := crc:u32 LE | len:u16 LE | type:u8 | payload[len]
//!             crc = mask(crc32c(type ++ payload)); a fragment never crosses a block
//! trailer  := 0x00 * (1..=6)                -- when < 7 bytes are left in a block
//! type     := 1 FULL | 2 FIRST | 3 MIDDLE | 4 LAST | 5 HEADER   (0 reserved: zero fill)
//!
//!  offset 0                                            32768
//!  +------------------+-----------+-----------+-------+--+---------------
//!  | HEADER fragment  | FULL rec  | FIRST ... | ...   |00| MIDDLE/LAST ..
//!  | 7 + 20 bytes     | 7 + n     | 7 + n     |       |  |
//!  +------------------+-----------+-----------+-------+--+---------------
//!
//! header record payload (20 bytes, type 5, always the first fragment):
//!   magic u64 LE = "STRATWAL" | version u32 LE = 2 | log number u64 LE
//!   (format 1 logs, whose batch entries all carry a keyspace byte, are
//!   still replayed)
//! ```
//!
//! A record (a [`crate::batch::WriteBatch`] encoding) is the concatenation of
//! the payloads of a FULL fragment, or of FIRST, MIDDLE*, LAST. A record may
//! be empty (one FULL fragment of length 0).

pub mod format;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

pub use reader::Reader;
pub use writer::Writer;
