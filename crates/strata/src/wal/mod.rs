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
//! header record payload (type 5, always the first fragment, untagged):
//!   magic u64 LE = "STRATWAL" | version u32 LE | log number u64 LE
//!   [| tag u32 LE, format 4]
//!   (format 4 writes; formats 1-3 are still replayed; manifests write 2)
//!
//! format 4: every fragment after the header record is tagged:
//!   crc:u32 LE | len:u16 LE | type:u8 | tag:u32 LE | payload[len]
//!   crc = mask(crc32c(type ++ tag ++ payload)); type 6 = sync mark
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
