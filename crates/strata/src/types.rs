//! Sequence numbers, value kinds and the internal key.
//!
//! An internal key is `user_key ++ trailer`, where the 8-byte little-endian
//! trailer is `(seq << 8) | kind`. Internal keys order by user key ascending
//! (bytewise), then by trailer *descending*, so the newest version of a key
//! comes first. This is the one ordering used by the memtable, every table
//! and every iterator below the user-facing `DbIter`.

use std::cmp::Ordering;

/// A write's position in the global history. Only the low 56 bits are used.
pub type SeqNo = u64;

/// The largest sequence number that fits in the trailer.
pub const MAX_SEQ: SeqNo = (1 << 56) - 1;

/// Length of the trailer appended to the user key.
pub const TRAILER_LEN: usize = 8;

/// Maximum user key length (64 KiB).
pub const MAX_KEY_LEN: usize = 64 * 1024;

/// Maximum value length (256 MiB).
pub const MAX_VALUE_LEN: usize = 256 * 1024 * 1024;

/// Maximum encoded size of one write batch (1 GiB): a batch is one WAL
/// record, which recovery holds in memory whole, and goes into one
/// memtable, which a level-0 row must hold (`Options::validate`).
pub const MAX_BATCH_BYTES: usize = 1024 * 1024 * 1024;

/// What an entry means. The values are on-disk tags: never renumber them.
/// A range tombstone (3) exists only in write batches (the WAL); memtables
/// keep range tombstones apart and tables never hold one, so internal keys
/// carry only 0, 1 and 2 ([`ValueKind::from_u8`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A point tombstone.
    Delete = 0,
    /// A value.
    Value = 1,
    /// A merge operand: folded onto the older versions of its key by the
    /// database's merge operator (`crate::merge`).
    Merge = 2,
    /// A range tombstone: the key is the range's start, the value its
    /// (exclusive) end. Write batches only.
    RangeDelete = 3,
}

impl ValueKind {
    /// The kind of an internal key's trailer: `Delete`, `Value` or `Merge`.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::Merge),
            _ => None,
        }
    }

    /// The kind of a write-batch entry's tag: a point kind or
    /// `RangeDelete`.
    pub fn from_batch_tag(b: u8) -> Option<ValueKind> {
        match b {
            3 => Some(ValueKind::RangeDelete),
            _ => Self::from_u8(b),
        }
    }
}

/// Kind byte used in seek keys: the largest, so `(key, seq, KIND_FOR_SEEK)`
/// sorts before every real entry of `key` with a sequence `<= seq`.
pub const KIND_FOR_SEEK: u8 = 0xff;

#[inline]
pub fn pack_trailer(seq: SeqNo, kind: u8) -> u64 {
    (seq << 8) | u64::from(kind)
}

/// Appends the internal key `(user_key, seq, kind)` to `buf`.
#[inline]
pub fn append_internal_key(buf: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: u8) {
    buf.reserve(user_key.len() + TRAILER_LEN);
    buf.extend_from_slice(user_key);
    buf.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Builds the internal key `(user_key, seq, kind)`.
#[inline]
pub fn internal_key(user_key: &[u8], seq: SeqNo, kind: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind);
    v
}

/// The key a lookup at snapshot `seq` seeks to.
#[inline]
pub fn seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    internal_key(user_key, seq, KIND_FOR_SEEK)
}

/// The user-key part of an internal key (the whole slice if it is too short).
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    ikey.get(..ikey.len().saturating_sub(TRAILER_LEN))
        .unwrap_or(ikey)
}

/// The trailer of an internal key (0 if it is too short).
#[inline]
pub fn trailer(ikey: &[u8]) -> u64 {
    match ikey.len().checked_sub(TRAILER_LEN) {
        Some(at) => crate::coding::get_u64(ikey, at).unwrap_or(0),
        None => 0,
    }
}

/// A decoded internal key borrowing the user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
}

/// Decodes an internal key; `None` if it is shorter than the trailer or the
/// kind is unknown.
#[inline]
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let at = ikey.len().checked_sub(TRAILER_LEN)?;
    let t = crate::coding::get_u64(ikey, at)?;
    Some(ParsedKey {
        user_key: ikey.get(..at)?,
        seq: t >> 8,
        kind: ValueKind::from_u8((t & 0xff) as u8)?,
    })
}

/// Keys up to this long are compared inline, 8 bytes at a time; longer
/// ones through `memcmp`, whose vector loop wins on long keys.
const INLINE_CMP_MAX: usize = 32;

/// The lexicographic order of two byte strings (as `a.cmp(b)`), inline
/// for short keys: most keys here are 16-24 bytes, and a `memcmp` call
/// for them was about a tenth of a scan's or an insert's time.
#[inline]
pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    if n > INLINE_CMP_MAX {
        return a.cmp(b);
    }
    let (mut x, mut y) = (a, b);
    while let (Some((xc, xr)), Some((yc, yr))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        let (p, q) = (u64::from_be_bytes(*xc), u64::from_be_bytes(*yc));
        if p != q {
            return p.cmp(&q);
        }
        x = xr;
        y = yr;
    }
    for (p, q) in x.iter().zip(y) {
        if p != q {
            return p.cmp(q);
        }
    }
    a.len().cmp(&b.len())
}

/// The total order of internal keys.
#[inline]
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match compare_bytes(user_key(a), user_key(b)) {
        Ordering::Equal => trailer(b).cmp(&trailer(a)),
        o => o,
    }
}

/// The largest keyspace id: what a batch entry (WAL) and a manifest edit
/// may carry.
pub const MAX_KEYSPACE: u32 = (1 << 20) - 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_bytes_is_slice_order() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(3);
        let mut keys: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0, 0], vec![255; 40]];
        for _ in 0..400 {
            let len = rng.gen_range(0..48);
            // Few distinct bytes, so keys share long prefixes.
            keys.push((0..len).map(|_| rng.gen_range(0..3u8) * 127).collect());
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(compare_bytes(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn ordering_is_user_key_then_newest_first() {
        let a1 = internal_key(b"a", 1, 1);
        let a9 = internal_key(b"a", 9, 1);
        let b0 = internal_key(b"b", 0, 0);
        let ab = internal_key(b"ab", 100, 1);
        assert_eq!(compare_internal(&a9, &a1), Ordering::Less);
        assert_eq!(compare_internal(&a1, &ab), Ordering::Less);
        assert_eq!(compare_internal(&ab, &b0), Ordering::Less);
        assert_eq!(compare_internal(&seek_key(b"a", 5), &a1), Ordering::Less);
        assert_eq!(compare_internal(&seek_key(b"a", 5), &a9), Ordering::Greater);
        assert_eq!(compare_internal(&seek_key(b"a", 9), &a9), Ordering::Less);
    }

    #[test]
    fn parse_round_trips_and_rejects_short_or_unknown() {
        let k = internal_key(b"key", 42, ValueKind::Delete as u8);
        let p = parse_internal_key(&k).expect("valid key");
        assert_eq!(p.user_key, b"key");
        assert_eq!(p.seq, 42);
        assert_eq!(p.kind, ValueKind::Delete);
        assert!(parse_internal_key(b"short").is_none());
        assert!(parse_internal_key(&internal_key(b"k", 1, 7)).is_none());
        // Empty user keys are legal.
        assert_eq!(
            parse_internal_key(&internal_key(b"", 3, 1)).map(|p| p.seq),
            Some(3)
        );
    }
}
