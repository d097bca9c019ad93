//! Fixed on-disk structures of a table: block handles, the block trailer
//! (compression type + checksum), block compression, and the footer.

use crate::coding::{get_u32, get_u64, mask_crc, put_u32, put_u64, put_varint, unmask_crc, Reader};
use crate::error::{corrupt, Error, Result};
use crate::types::{MAX_KEY_LEN, MAX_VALUE_LEN};

/// Block compression of tables. The values are on-disk tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Compression {
    None = 0,
    Lz4 = 1,
    Zstd = 2,
}

impl Compression {
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }
    /// The name `Options` writes and parses.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Last 8 bytes of every table file, written little-endian (the bytes read
/// "BTATARTS" on disk).
pub const TABLE_MAGIC: u64 = 0x5354_5241_5441_5442;

/// The table format version written by this build and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Bytes after every block: 1 byte compression type + 4 bytes masked crc32c.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Size of the footer at the end of every table file.
pub const FOOTER_LEN: usize = 64;

/// Largest uncompressed block a decoder accepts (one maximal entry plus slack).
pub const MAX_BLOCK_LEN: usize = MAX_KEY_LEN + MAX_VALUE_LEN + (1 << 20);

/// Where a block lives in the file: `size` counts the stored (possibly
/// compressed) block bytes, not the 5-byte trailer that follows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    pub fn new(offset: u64, size: u64) -> Self {
        BlockHandle { offset, size }
    }

    /// Appends `varint offset ++ varint size` (the index-block value encoding).
    pub fn encode_to(&self, buf: &mut Vec<u8>) {
        put_varint(buf, self.offset);
        put_varint(buf, self.size);
    }

    /// Decodes the varint encoding; the whole slice must be consumed.
    pub fn decode(buf: &[u8]) -> Result<BlockHandle> {
        let mut r = Reader::new(buf);
        let offset = r
            .varint()
            .ok_or_else(|| corrupt(0, "bad block handle offset"))?;
        let size = r
            .varint()
            .ok_or_else(|| corrupt(r.pos() as u64, "bad block handle size"))?;
        if !r.is_empty() {
            return Err(corrupt(r.pos() as u64, "trailing bytes after block handle"));
        }
        Ok(BlockHandle { offset, size })
    }

    /// File offset one past the block's trailer, `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// The fixed-size record at the end of a table file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Filter block; `size == 0` means the table has no filter.
    pub filter: BlockHandle,
    pub index: BlockHandle,
    pub properties: BlockHandle,
    pub version: u32,
}

impl Footer {
    /// Layout (all little-endian):
    /// `filter(u64 off, u64 size) index(..) properties(..) u32 version
    ///  u32 masked_crc32c(bytes 0..52) u64 magic`.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut b = Vec::with_capacity(FOOTER_LEN);
        for h in [self.filter, self.index, self.properties] {
            put_u64(&mut b, h.offset);
            put_u64(&mut b, h.size);
        }
        put_u32(&mut b, self.version);
        let crc = mask_crc(crc32c::crc32c(&b));
        put_u32(&mut b, crc);
        put_u64(&mut b, TABLE_MAGIC);
        let mut out = [0u8; FOOTER_LEN];
        out.copy_from_slice(&b);
        out
    }

    /// Decodes and checks magic, checksum, then version (so garbage is
    /// `Corruption`, a well-formed footer of another version `NotSupported`;
    /// future versions keep the last 16 bytes in place). Offsets in errors are
    /// relative to the start of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Footer> {
        if buf.len() != FOOTER_LEN {
            return Err(corrupt(
                0,
                format!("footer is {} bytes, expected {FOOTER_LEN}", buf.len()),
            ));
        }
        let magic = get_u64(buf, 56).ok_or_else(|| corrupt(56, "short footer"))?;
        if magic != TABLE_MAGIC {
            return Err(corrupt(56, format!("bad table magic {magic:#018x}")));
        }
        let stored = get_u32(buf, 52).ok_or_else(|| corrupt(52, "short footer"))?;
        let actual = crc32c::crc32c(buf.get(..52).unwrap_or(&[]));
        if unmask_crc(stored) != actual {
            return Err(corrupt(52, "footer checksum mismatch"));
        }
        let version = get_u32(buf, 48).ok_or_else(|| corrupt(48, "short footer"))?;
        if version != FORMAT_VERSION {
            return Err(Error::NotSupported(format!(
                "table format version {version} (this build reads {FORMAT_VERSION})"
            )));
        }
        let h = |at: usize| -> Result<BlockHandle> {
            match (get_u64(buf, at), get_u64(buf, at + 8)) {
                (Some(offset), Some(size)) => Ok(BlockHandle { offset, size }),
                _ => Err(corrupt(at as u64, "short footer")),
            }
        };
        Ok(Footer {
            filter: h(0)?,
            index: h(16)?,
            properties: h(32)?,
            version,
        })
    }
}

/// Masked crc32c over the block bytes followed by the type byte.
pub fn block_crc(block: &[u8], ctype: u8) -> u32 {
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(block), &[ctype]))
}

/// Appends the 5-byte trailer of `block` stored with compression `ctype`.
pub fn put_block_trailer(buf: &mut Vec<u8>, block: &[u8], ctype: u8) {
    buf.push(ctype);
    put_u32(buf, block_crc(block, ctype));
}

/// Compresses `raw` with `c` into `out` (cleared first). Returns false when
/// compression is off, fails, or saves less than 12.5 %: store `raw` as is.
///
/// Compressed payload: `varint uncompressed_len ++ codec bytes` (an LZ4 block
/// or a zstd frame).
pub fn compress_block(raw: &[u8], c: Compression, out: &mut Vec<u8>) -> bool {
    out.clear();
    match c {
        Compression::None => return false,
        Compression::Lz4 => {
            put_varint(out, raw.len() as u64);
            out.extend_from_slice(&lz4_flex::block::compress(raw));
        }
        Compression::Zstd => {
            put_varint(out, raw.len() as u64);
            match zstd::bulk::compress(raw, 3) {
                Ok(z) => out.extend_from_slice(&z),
                Err(_) => return false,
            }
        }
    }
    out.len() <= raw.len() - raw.len() / 8
}

/// Checks the trailer of `stored` (block bytes followed by the trailer,
/// the checksum only with `verify`) and returns the length of the block
/// bytes and the compression tag. Offsets in errors are relative to the
/// start of the block.
pub fn check_block_trailer(stored: &[u8], verify: bool) -> Result<(usize, u8)> {
    let n = stored
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or_else(|| corrupt(0, "block shorter than its trailer"))?;
    let ctype = *stored
        .get(n)
        .ok_or_else(|| corrupt(n as u64, "missing block trailer"))?;
    if verify {
        let want = get_u32(stored, n + 1).ok_or_else(|| corrupt(n as u64, "missing block crc"))?;
        let body = stored.get(..n).unwrap_or(&[]);
        if block_crc(body, ctype) != want {
            return Err(corrupt(
                0,
                format!("checksum mismatch in block of {n} bytes"),
            ));
        }
    }
    Ok((n, ctype))
}

/// Checks the trailer of `stored` (block bytes followed by the trailer) and
/// returns the uncompressed block contents and whether it was compressed.
/// Offsets in errors are relative to the start of the block.
pub fn decode_stored_block(mut stored: Vec<u8>, verify: bool) -> Result<(Vec<u8>, bool)> {
    let (n, ctype) = check_block_trailer(&stored, verify)?;
    stored.truncate(n);
    let bad = |what: String| corrupt(0, what);
    match Compression::from_u8(ctype) {
        Some(Compression::None) => Ok((stored, false)),
        Some(c) => {
            let mut r = Reader::new(&stored);
            let len = r
                .varint()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| bad("bad uncompressed length".into()))?;
            let payload = r.remaining();
            let cap = match c {
                // LZ4 cannot expand more than ~255x.
                Compression::Lz4 => payload.len().saturating_mul(255).saturating_add(64),
                _ => MAX_BLOCK_LEN,
            };
            if len > MAX_BLOCK_LEN || len > cap {
                return Err(bad(format!("implausible uncompressed length {len}")));
            }
            let out = match c {
                Compression::Lz4 => lz4_flex::block::decompress(payload, len)
                    .map_err(|e| bad(format!("lz4: {e}")))?,
                _ => zstd::bulk::decompress(payload, len).map_err(|e| bad(format!("zstd: {e}")))?,
            };
            if out.len() != len {
                return Err(bad(format!(
                    "decompressed to {} bytes, expected {len}",
                    out.len()
                )));
            }
            Ok((out, true))
        }
        None => Err(corrupt(
            n as u64,
            format!("unknown compression type {ctype}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trip_and_rejections() {
        let f = Footer {
            filter: BlockHandle::new(1, 2),
            index: BlockHandle::new(300, 40000),
            properties: BlockHandle::new(u64::MAX, 5),
            version: FORMAT_VERSION,
        };
        let b = f.encode();
        assert_eq!(Footer::decode(&b).expect("decodes"), f);
        let mut bad = b;
        bad[3] ^= 1;
        assert!(Footer::decode(&bad).unwrap_err().is_corruption());
        let mut bad = b;
        bad[60] ^= 1;
        assert!(Footer::decode(&bad).unwrap_err().is_corruption());
        let mut bad = b;
        bad[48] = 9;
        assert!(Footer::decode(&bad).unwrap_err().is_corruption());
        let newer = Footer { version: 2, ..f }.encode();
        assert!(matches!(
            Footer::decode(&newer),
            Err(Error::NotSupported(_))
        ));
        assert!(Footer::decode(&b[1..]).is_err());
    }

    #[test]
    fn handle_round_trip() {
        let h = BlockHandle::new(123_456_789, 4096);
        let mut b = Vec::new();
        h.encode_to(&mut b);
        assert_eq!(BlockHandle::decode(&b).expect("decodes"), h);
        assert!(BlockHandle::decode(&b[..b.len() - 1]).is_err());
        b.push(0);
        assert!(BlockHandle::decode(&b).is_err());
    }

    #[test]
    fn compressed_blocks_round_trip_and_verify() {
        let raw: Vec<u8> = (0..4000u32).flat_map(|i| (i % 17).to_le_bytes()).collect();
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let mut z = Vec::new();
            let compressed = compress_block(&raw, c, &mut z);
            assert_eq!(compressed, c != Compression::None);
            let (body, ctype) = if compressed {
                (z.clone(), c as u8)
            } else {
                (raw.clone(), 0)
            };
            let mut stored = body.clone();
            put_block_trailer(&mut stored, &body, ctype);
            let (out, was) = decode_stored_block(stored.clone(), true).expect("decodes");
            assert_eq!(out, raw);
            assert_eq!(was, compressed);
            stored[7] ^= 0x40;
            assert!(decode_stored_block(stored, true)
                .unwrap_err()
                .is_corruption());
        }
        // Incompressible data is stored raw.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let noise: Vec<u8> = (0..1000).map(|_| rng.gen()).collect();
        let mut z = Vec::new();
        assert!(!compress_block(&noise, Compression::Lz4, &mut z));
    }
}
