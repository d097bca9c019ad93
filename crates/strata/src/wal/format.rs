//! Constants of the write-ahead-log file format (see the module docs).

/// The file is a sequence of blocks of this size; fragments never cross them.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Fragment header of manifests and write-ahead logs before format 4:
/// `masked crc32c u32 LE | length u16 LE | type u8`. The header record at
/// offset 0 of every log uses it too.
pub const HEADER_SIZE: usize = 7;

/// Fragment header of write-ahead logs of format 4 and later (after the
/// header record): `masked crc32c u32 LE | length u16 LE | type u8 | tag
/// u32 LE`, the crc over the type byte, the tag and the payload. The tag
/// is the log's own (its header record holds it, [`log_tag`]): bytes of
/// another log (a recycled file's earlier life, zeros) never carry it, and
/// record payloads cannot forge a fragment of a log whose tag they do not
/// know.
pub const TAGGED_HEADER_SIZE: usize = 11;

/// The first format whose fragments carry the log's tag.
pub const TAGGED_VERSION: u32 = 4;

/// `"STRATWAL"` read as a little-endian u64: the first 8 payload bytes of the
/// header record.
pub const WAL_MAGIC: u64 = u64::from_le_bytes(*b"STRATWAL");

/// Version of the write-ahead logs written by this build. Version 4 tags
/// every fragment after the header with the log's tag
/// ([`TAGGED_HEADER_SIZE`]). Version 3 adds [`FragmentType::Synced`]
/// marks, which tell recovery how far a sync of the log is known to have
/// completed (`Reader::read_record`). Version 2 changed only the
/// write-batch entries inside the records (no keyspace byte for the default
/// keyspace, `batch.rs`). Older logs are still read.
pub const WAL_VERSION: u32 = 4;

/// The version written in manifests, which share the log format but take
/// no sync marks.
pub const MANIFEST_LOG_VERSION: u32 = 2;

/// Payload length of a [`FragmentType::Synced`] mark that carries its
/// offset (u64 LE); shorter marks only fill the end of a block.
pub const SYNCED_MARK_LEN: usize = 8;

/// Payload length of the header record of a manifest or of a log before
/// format 4: magic u64 + version u32 + log number u64.
pub const FILE_HEADER_LEN: usize = 8 + 4 + 8;

/// Payload length of the header record of a log of format 4 and later:
/// magic u64 + version u32 + log number u64 + tag u32.
pub const TAGGED_FILE_HEADER_LEN: usize = FILE_HEADER_LEN + 4;

/// Fragment types. The values are on-disk tags: never renumber them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FragmentType {
    /// Reserved: a zero type is what a zero-filled (preallocated) region reads as.
    Zero = 0,
    /// A whole record.
    Full = 1,
    /// The first fragment of a record.
    First = 2,
    /// An inner fragment of a record.
    Middle = 3,
    /// The last fragment of a record.
    Last = 4,
    /// The file header record; only valid as the very first fragment.
    Header = 5,
    /// A sync mark (write-ahead logs of version 3 and 4), written between
    /// records in front of the first append after a completed sync: its
    /// 8-byte payload is the offset that sync reached (never past the
    /// mark's own offset). A mark with a shorter payload only
    /// fills the end of a block. Not a record: readers skip it.
    Synced = 6,
}

impl FragmentType {
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(FragmentType::Zero),
            1 => Some(FragmentType::Full),
            2 => Some(FragmentType::First),
            3 => Some(FragmentType::Middle),
            4 => Some(FragmentType::Last),
            5 => Some(FragmentType::Header),
            6 => Some(FragmentType::Synced),
            _ => None,
        }
    }
}

/// The masked crc32c stored in a fragment header: over the type byte, then the payload.
#[inline]
pub fn fragment_crc(ty: u8, payload: &[u8]) -> u32 {
    crate::coding::mask_crc(crc32c::crc32c_append(crc32c::crc32c(&[ty]), payload))
}

/// The masked crc32c stored in a tagged fragment's header: over the type
/// byte, the tag (u32 LE), then the payload.
#[inline]
pub fn tagged_fragment_crc(ty: u8, tag: u32, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[ty]), &tag.to_le_bytes());
    crate::coding::mask_crc(crc32c::crc32c_append(crc, payload))
}

/// Encodes the 11-byte header of a fragment of a log with `tag`.
#[inline]
pub fn tagged_fragment_header(
    ty: FragmentType,
    tag: u32,
    payload: &[u8],
) -> [u8; TAGGED_HEADER_SIZE] {
    assert!(
        payload.len() <= BLOCK_SIZE - TAGGED_HEADER_SIZE,
        "a WAL fragment larger than a block"
    );
    let mut h = [0u8; TAGGED_HEADER_SIZE];
    h[..4].copy_from_slice(&tagged_fragment_crc(ty as u8, tag, payload).to_le_bytes());
    h[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    h[6] = ty as u8;
    h[7..].copy_from_slice(&tag.to_le_bytes());
    h
}

/// A fresh tag for log `log_number`: never 0 (what zeros read as), and
/// drawn from the process's random hash keys and the clock, so that two
/// lives of one file (a recycled log) and a payload written without access
/// to the file do not share it (a coincidence is 1 in 2^32).
pub fn log_tag(log_number: u64) -> u32 {
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let h = std::collections::hash_map::RandomState::new().hash_one((log_number, now));
    let tag = (h ^ (h >> 32)) as u32;
    tag.max(1)
}

/// Encodes the 7-byte header of a fragment.
#[inline]
pub fn fragment_header(ty: FragmentType, payload: &[u8]) -> [u8; HEADER_SIZE] {
    // Its length must fit the header's 16 bits and the block.
    assert!(
        payload.len() <= BLOCK_SIZE - HEADER_SIZE,
        "a WAL fragment larger than a block"
    );
    let mut h = [0u8; HEADER_SIZE];
    h[..4].copy_from_slice(&fragment_crc(ty as u8, payload).to_le_bytes());
    h[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    h[6] = ty as u8;
    h
}
