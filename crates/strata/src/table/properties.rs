//! The properties block: facts about a table, as a self-describing record.
//!
//! Encoding: `u8 version(=1)` then fields `varint tag | varint len | bytes`
//! until the end of the block. Numeric fields hold one varint in their bytes,
//! key fields hold the raw internal key. Unknown tags are skipped (forward
//! compatible); a repeated tag keeps the last value.

use super::format::Compression;
use crate::coding::{put_bytes, put_varint, Reader};
use crate::error::{corrupt, Result};

const PROPS_VERSION: u8 = 1;

const TAG_FORMAT_VERSION: u64 = 1;
const TAG_ENTRIES: u64 = 2;
const TAG_DELETIONS: u64 = 3;
const TAG_RAW_KEY_BYTES: u64 = 4;
const TAG_RAW_VALUE_BYTES: u64 = 5;
const TAG_DATA_BLOCKS: u64 = 6;
const TAG_SMALLEST: u64 = 7;
const TAG_LARGEST: u64 = 8;
const TAG_MAX_SEQ: u64 = 9;
const TAG_COMPRESSION: u64 = 10;
const TAG_MIN_SEQ: u64 = 11;
const TAG_UNIQUE_ID: u64 = 12;

/// Facts about a table, written at build time and read at open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableProperties {
    /// Size of the whole file (not stored: the builder's final offset, or the
    /// file length at open).
    pub file_size: u64,
    pub entries: u64,
    /// Point tombstones among `entries`.
    pub deletions: u64,
    /// Sum of internal key lengths.
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
    pub data_blocks: u64,
    /// Smallest internal key (empty for an empty table).
    pub smallest: Vec<u8>,
    /// Largest internal key (empty for an empty table).
    pub largest: Vec<u8>,
    /// Largest sequence number in the table (its "creation sequence").
    pub max_seq: u64,
    /// Smallest sequence number in the table (0 if unknown: tables
    /// written before this field).
    pub min_seq: u64,
    /// A random, nonzero number the builder drew for this table, which no
    /// other table shares (0: written before this field). Backups name a
    /// table's copy by it, so two different tables that happen to share a
    /// file number and a size are never taken for one.
    pub unique_id: u64,
    pub format_version: u32,
}

/// Encodes the properties plus the table's configured compression.
pub(crate) fn encode_properties(p: &TableProperties, compression: Compression) -> Vec<u8> {
    let mut out = vec![PROPS_VERSION];
    let num = |out: &mut Vec<u8>, tag: u64, v: u64| {
        let mut b = Vec::with_capacity(10);
        put_varint(&mut b, v);
        put_varint(out, tag);
        put_bytes(out, &b);
    };
    num(&mut out, TAG_FORMAT_VERSION, u64::from(p.format_version));
    num(&mut out, TAG_ENTRIES, p.entries);
    num(&mut out, TAG_DELETIONS, p.deletions);
    num(&mut out, TAG_RAW_KEY_BYTES, p.raw_key_bytes);
    num(&mut out, TAG_RAW_VALUE_BYTES, p.raw_value_bytes);
    num(&mut out, TAG_DATA_BLOCKS, p.data_blocks);
    num(&mut out, TAG_MAX_SEQ, p.max_seq);
    num(&mut out, TAG_MIN_SEQ, p.min_seq);
    if p.unique_id != 0 {
        // Fixed width, so a table's size does not depend on its id.
        put_varint(&mut out, TAG_UNIQUE_ID);
        put_bytes(&mut out, &p.unique_id.to_le_bytes());
    }
    num(&mut out, TAG_COMPRESSION, compression as u64);
    put_varint(&mut out, TAG_SMALLEST);
    put_bytes(&mut out, &p.smallest);
    put_varint(&mut out, TAG_LARGEST);
    put_bytes(&mut out, &p.largest);
    out
}

/// Decodes a properties block; offsets in errors are relative to the block.
pub(crate) fn decode_properties(buf: &[u8]) -> Result<(TableProperties, Compression)> {
    let mut r = Reader::new(buf);
    let version = r.u8().ok_or_else(|| corrupt(0, "empty properties block"))?;
    if version != PROPS_VERSION {
        return Err(corrupt(0, format!("unknown properties version {version}")));
    }
    let mut p = TableProperties::default();
    let mut compression = Compression::None;
    let mut seen_version = false;
    while !r.is_empty() {
        let at = r.pos() as u64;
        let bad = || corrupt(at, "malformed properties field");
        let tag = r.varint().ok_or_else(bad)?;
        let bytes = r.len_prefixed().ok_or_else(bad)?;
        let num = || -> Result<u64> {
            let mut v = Reader::new(bytes);
            let n = v.varint().ok_or_else(bad)?;
            if v.is_empty() {
                Ok(n)
            } else {
                Err(bad())
            }
        };
        match tag {
            TAG_FORMAT_VERSION => {
                p.format_version = u32::try_from(num()?).map_err(|_| bad())?;
                seen_version = true;
            }
            TAG_ENTRIES => p.entries = num()?,
            TAG_DELETIONS => p.deletions = num()?,
            TAG_RAW_KEY_BYTES => p.raw_key_bytes = num()?,
            TAG_RAW_VALUE_BYTES => p.raw_value_bytes = num()?,
            TAG_DATA_BLOCKS => p.data_blocks = num()?,
            TAG_MAX_SEQ => p.max_seq = num()?,
            TAG_MIN_SEQ => p.min_seq = num()?,
            TAG_UNIQUE_ID => {
                let b: [u8; 8] = bytes.try_into().map_err(|_| bad())?;
                p.unique_id = u64::from_le_bytes(b);
            }
            TAG_COMPRESSION => {
                compression = u8::try_from(num()?)
                    .ok()
                    .and_then(Compression::from_u8)
                    .ok_or_else(|| corrupt(at, "unknown compression in properties"))?
            }
            TAG_SMALLEST => p.smallest = bytes.to_vec(),
            TAG_LARGEST => p.largest = bytes.to_vec(),
            _ => {}
        }
    }
    if !seen_version {
        return Err(corrupt(0, "properties lack the format version"));
    }
    Ok((p, compression))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_skip_unknown() {
        let p = TableProperties {
            file_size: 0,
            entries: 10,
            deletions: 2,
            raw_key_bytes: 300,
            raw_value_bytes: 5000,
            data_blocks: 3,
            smallest: b"a\x01\0\0\0\0\0\0\0".to_vec(),
            largest: b"z\x01\0\0\0\0\0\0\0".to_vec(),
            max_seq: 77,
            min_seq: 0,
            unique_id: 0x1234_5678_9abc_def1,
            format_version: 1,
        };
        let mut b = encode_properties(&p, Compression::Zstd);
        let (q, c) = decode_properties(&b).expect("decodes");
        assert_eq!(q, p);
        assert_eq!(c, Compression::Zstd);
        // A future tag is skipped.
        put_varint(&mut b, 999);
        put_bytes(&mut b, b"future");
        assert_eq!(decode_properties(&b).expect("decodes").0, p);
        // Truncation is detected.
        assert!(decode_properties(&b[..b.len() - 2]).is_err());
        assert!(decode_properties(&[]).is_err());
        assert!(decode_properties(&[1]).is_err());
    }
}
