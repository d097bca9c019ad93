//! [`WriteBatch`]: an atomic group of puts and deletes, and its encoding,
//! which is also the payload of a write-ahead-log record.
//!
//! ```text
//! batch   := sequence:u64 LE | count:u32 LE | entry*count
//! entry   := tag:u8 | [ keyspace:varint ]        -- only when tag & 0x80
//!            key_len:varint | key
//!            [ value_len:varint | value ]        -- when kind = 1 (Value) or 3
//! ```
//!
//! `tag & 0x7f` is a [`ValueKind`] (0 delete, 1 value, 3 range tombstone,
//! whose key is the range's start and value its exclusive end, with
//! `start <= end`; 2 is a merge operand). Bit 0x80 says a keyspace id
//! follows (at most [`MAX_KEYSPACE`]): entries of the default keyspace
//! (id 0) are written without it, so they cost no byte for it, and a
//! database with only `default` writes the bytes it wrote before keyspaces
//! existed. Entry `i` of a batch gets sequence number `sequence + i`.
//!
//! WAL format 1 wrote every entry with a keyspace varint (always 0) after
//! the kind; [`WriteBatch::decode_format`] still reads those records.
//!
//! Building a batch never fails; [`WriteBatch::validate`] checks the limits
//! before anything is written. [`WriteBatch::decode`] checks everything and
//! turns every malformation into `Error::Corruption`, never a panic.

use crate::coding::{put_bytes, Reader};
use crate::error::{corrupt, Error, Result};
use crate::types::{SeqNo, ValueKind, MAX_BATCH_BYTES, MAX_KEY_LEN, MAX_VALUE_LEN};
use std::fmt;

/// Length of the batch header: `u64 sequence + u32 count`.
pub const HEADER_LEN: usize = 12;

/// Tag bit: a keyspace id follows the tag.
const KEYSPACE_FLAG: u8 = 0x80;

/// The largest keyspace id an entry may carry (the manifest's limit too).
pub const MAX_KEYSPACE: u32 = crate::types::MAX_KEYSPACE;

/// A handle that names a keyspace of one database (`Keyspace`): what the
/// `*_in` methods of [`WriteBatch`] take.
pub trait KeyspaceRef {
    /// The keyspace's id in its database.
    fn keyspace_id(&self) -> u32;
}

/// A keyspace by its id (`Keyspace::id`), for callers that keep ids (the
/// C ABI); a write checks that the id names a live keyspace.
impl KeyspaceRef for u32 {
    fn keyspace_id(&self) -> u32 {
        *self
    }
}

/// The entry encoding of this version (WAL format 2 and later); format 1
/// had a keyspace varint after every tag.
pub const ENTRY_FORMAT: u32 = 2;

/// An atomic group of puts and deletes, stored in its encoded form.
///
/// A count of `u32::MAX` means "overflowed" and is rejected by
/// [`validate`](Self::validate).
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    /// Encoded header + entries.
    rep: Vec<u8>,
    /// Number of entries (saturating).
    count: u32,
    /// Sum of key and value lengths.
    user_bytes: u64,
    /// The kinds of its entries, a bit (`1 << kind`) each.
    kinds: u8,
    /// The highest keyspace id of its entries (0: only `default`).
    max_keyspace: u32,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch {
            rep: vec![0; HEADER_LEN],
            count: 0,
            user_bytes: 0,
            kinds: 0,
            max_keyspace: 0,
        }
    }
}

impl fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBatch")
            .field("sequence", &self.sequence())
            .field("count", &self.count)
            .field("encoded_len", &self.rep.len())
            .finish()
    }
}

/// One entry of a batch, borrowing the batch's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    pub kind: ValueKind,
    /// The keyspace the entry writes to (0: `default`).
    pub keyspace: u32,
    pub key: &'a [u8],
    /// Empty for `Delete`; the range's end for `RangeDelete`.
    pub value: &'a [u8],
}

impl WriteBatch {
    /// An empty batch with sequence 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a put of `key` → `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.push(0, ValueKind::Value, key.as_ref(), value.as_ref());
    }

    /// Appends a deletion of `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.push(0, ValueKind::Delete, key.as_ref(), &[]);
    }

    /// Appends a deletion of every key in `[start, end)`: every version
    /// older than this entry of a key in the range is deleted. An empty
    /// range (`start == end`) deletes nothing; `start > end` is refused by
    /// [`validate`](Self::validate) (so by every write).
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        self.push(0, ValueKind::RangeDelete, start.as_ref(), end.as_ref());
    }

    /// Appends a merge of `operand` into `key`: the database's merge
    /// operator folds it onto the value `key` has before this entry
    /// (`crate::merge`).
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) {
        self.push(0, ValueKind::Merge, key.as_ref(), operand.as_ref());
    }

    /// [`put`](Self::put) into keyspace `ks`.
    pub fn put_in(
        &mut self,
        ks: &impl KeyspaceRef,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) {
        self.push(
            ks.keyspace_id(),
            ValueKind::Value,
            key.as_ref(),
            value.as_ref(),
        );
    }

    /// [`delete`](Self::delete) in keyspace `ks`.
    pub fn delete_in(&mut self, ks: &impl KeyspaceRef, key: impl AsRef<[u8]>) {
        self.push(ks.keyspace_id(), ValueKind::Delete, key.as_ref(), &[]);
    }

    /// [`delete_range`](Self::delete_range) in keyspace `ks`.
    pub fn delete_range_in(
        &mut self,
        ks: &impl KeyspaceRef,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) {
        self.push(
            ks.keyspace_id(),
            ValueKind::RangeDelete,
            start.as_ref(),
            end.as_ref(),
        );
    }

    /// [`merge`](Self::merge) into keyspace `ks` (its merge operator folds it).
    pub fn merge_in(
        &mut self,
        ks: &impl KeyspaceRef,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) {
        self.push(
            ks.keyspace_id(),
            ValueKind::Merge,
            key.as_ref(),
            operand.as_ref(),
        );
    }

    /// Appends one entry of `kind` to keyspace `keyspace` (a `Delete` has
    /// no value).
    fn push(&mut self, keyspace: u32, kind: ValueKind, key: &[u8], value: &[u8]) {
        if keyspace == 0 {
            self.rep.push(kind as u8);
        } else {
            self.rep.push(kind as u8 | KEYSPACE_FLAG);
            crate::coding::put_varint(&mut self.rep, u64::from(keyspace));
            self.max_keyspace = self.max_keyspace.max(keyspace);
        }
        put_bytes(&mut self.rep, key);
        if kind != ValueKind::Delete {
            put_bytes(&mut self.rep, value);
        }
        self.bump(kind, key.len() + value.len());
    }

    /// This batch with its entries of `default` moved to keyspace `id`
    /// (the others stay where they are), at the same sequence.
    pub(crate) fn moved_to(&self, id: u32) -> Result<WriteBatch> {
        if id == 0 {
            return Ok(self.clone());
        }
        let mut out = WriteBatch::new();
        for e in self.iter() {
            let e = e?;
            let to = if e.keyspace == 0 { id } else { e.keyspace };
            out.push(to, e.kind, e.key, e.value);
        }
        out.set_sequence(self.sequence());
        Ok(out)
    }

    /// The highest keyspace id the batch writes to (0: only `default`).
    pub fn max_keyspace(&self) -> u32 {
        self.max_keyspace
    }

    /// True if the batch holds a range tombstone (an engine without them
    /// refuses such a batch).
    pub fn has_range_deletes(&self) -> bool {
        self.has(ValueKind::RangeDelete)
    }

    /// True if the batch holds a merge operand (an engine without a merge
    /// operator refuses such a batch).
    pub fn has_merges(&self) -> bool {
        self.has(ValueKind::Merge)
    }

    fn has(&self, kind: ValueKind) -> bool {
        self.kinds & (1 << kind as u8) != 0
    }

    fn bump(&mut self, kind: ValueKind, user_bytes: usize) {
        self.kinds |= 1 << kind as u8;
        self.count = self.count.saturating_add(1);
        self.user_bytes = self.user_bytes.saturating_add(user_bytes as u64);
        self.write_count();
    }

    fn write_count(&mut self) {
        if let Some(c) = self.rep.get_mut(8..HEADER_LEN) {
            c.copy_from_slice(&self.count.to_le_bytes());
        }
    }

    /// Removes every entry and resets the sequence to 0.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(HEADER_LEN, 0);
        self.count = 0;
        self.user_bytes = 0;
        self.kinds = 0;
        self.max_keyspace = 0;
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when the batch has no entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size of the encoding in bytes.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Sum of the key and value lengths of all entries.
    pub fn user_bytes(&self) -> u64 {
        self.user_bytes
    }

    /// `InvalidArgument` if a key is longer than [`MAX_KEY_LEN`], a value
    /// longer than [`MAX_VALUE_LEN`], the encoding larger than
    /// [`MAX_BATCH_BYTES`], or the entry count overflowed.
    pub fn validate(&self) -> Result<()> {
        if self.rep.len() > MAX_BATCH_BYTES {
            return Err(Error::InvalidArgument(format!(
                "write batch of {} bytes exceeds the limit of {MAX_BATCH_BYTES}",
                self.rep.len()
            )));
        }
        if self.count == u32::MAX {
            return Err(Error::InvalidArgument(format!(
                "write batch has too many entries (limit {})",
                u32::MAX - 1
            )));
        }
        for (i, e) in self.iter().enumerate() {
            let e = e?;
            check_entry(&e)
                .map_err(|m| Error::InvalidArgument(format!("write batch entry {i}: {m}")))?;
        }
        Ok(())
    }

    /// The entries in insertion order.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            reader: Reader::new(self.rep.get(HEADER_LEN..).unwrap_or(&[])),
            left: self.count,
        }
    }

    /// Sets the sequence number of the first entry.
    pub fn set_sequence(&mut self, seq: SeqNo) {
        if let Some(s) = self.rep.get_mut(..8) {
            s.copy_from_slice(&seq.to_le_bytes());
        }
    }

    /// The sequence number of the first entry.
    pub fn sequence(&self) -> SeqNo {
        crate::coding::get_u64(&self.rep, 0).unwrap_or(0)
    }

    /// Appends the entries of `other` (group commit); keeps this batch's sequence.
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep
            .extend_from_slice(other.rep.get(HEADER_LEN..).unwrap_or(&[]));
        self.count = self.count.saturating_add(other.count);
        self.user_bytes = self.user_bytes.saturating_add(other.user_bytes);
        self.kinds |= other.kinds;
        self.max_keyspace = self.max_keyspace.max(other.max_keyspace);
        self.write_count();
    }

    /// The encoding: the payload of a WAL record.
    pub fn encoded(&self) -> &[u8] {
        &self.rep
    }

    /// Decodes a WAL record payload written with entry format `format` (the
    /// WAL file's format version): format 1 records are rewritten into the
    /// current encoding, later ones decoded as they are.
    pub fn decode_format(bytes: &[u8], format: u32) -> Result<WriteBatch> {
        if format >= ENTRY_FORMAT {
            return Self::decode(bytes);
        }
        let mut header = Reader::new(bytes);
        let (Some(_), Some(count)) = (header.u64(), header.u32()) else {
            return Self::decode(bytes);
        };
        // Copy each entry without its keyspace byte; the current decoder
        // then checks the result (count, lengths, trailing bytes).
        let mut r = Reader::new(bytes.get(HEADER_LEN..).unwrap_or(&[]));
        let mut rep = bytes.get(..HEADER_LEN).unwrap_or(&[]).to_vec();
        for _ in 0..count {
            if r.is_empty() {
                break;
            }
            let at = (HEADER_LEN + r.pos()) as u64;
            let tag = r.u8().unwrap_or(u8::MAX);
            let Some(kind) = ValueKind::from_u8(tag) else {
                return Err(corrupt(at, format!("unknown write batch entry kind {tag}")));
            };
            if r.varint() != Some(0) {
                return Err(corrupt(at, "format-1 write batch entry without keyspace 0"));
            }
            let entry_body = r.remaining();
            let whole = r.len_prefixed().is_some()
                && (kind == ValueKind::Delete || r.len_prefixed().is_some());
            if !whole {
                return Err(corrupt(at, "write batch entry truncated or bad length"));
            }
            let used = entry_body.len() - r.remaining().len();
            rep.push(tag);
            rep.extend_from_slice(entry_body.get(..used).unwrap_or(&[]));
        }
        rep.extend_from_slice(r.remaining());
        Self::decode(&rep)
    }

    /// Decodes a WAL record payload. Every malformation is an
    /// `Error::Corruption` with an offset into `bytes` and no file (the caller
    /// attaches it with [`Error::in_file`]).
    pub fn decode(bytes: &[u8]) -> Result<WriteBatch> {
        let mut header = Reader::new(bytes);
        let (Some(_seq), Some(count)) = (header.u64(), header.u32()) else {
            return Err(corrupt(
                0,
                format!(
                    "write batch of {} bytes is shorter than its header",
                    bytes.len()
                ),
            ));
        };
        if count == u32::MAX {
            return Err(corrupt(8, "write batch count overflow"));
        }
        let body = bytes.get(HEADER_LEN..).unwrap_or(&[]);
        let mut r = Reader::new(body);
        let mut user_bytes = 0u64;
        let mut kinds = 0u8;
        let mut max_keyspace = 0u32;
        let mut found = 0u32;
        while found < count && !r.is_empty() {
            let at = (HEADER_LEN + r.pos()) as u64;
            let e = parse_entry(&mut r)?;
            check_entry(&e).map_err(|m| corrupt(at, m))?;
            user_bytes += (e.key.len() + e.value.len()) as u64;
            kinds |= 1 << e.kind as u8;
            max_keyspace = max_keyspace.max(e.keyspace);
            found += 1;
        }
        if found != count {
            return Err(corrupt(
                bytes.len() as u64,
                format!("write batch count is {count} but it holds {found} entries"),
            ));
        }
        if !r.is_empty() {
            return Err(corrupt(
                (HEADER_LEN + r.pos()) as u64,
                format!(
                    "{} trailing bytes after the {count} entries of a write batch",
                    r.remaining().len()
                ),
            ));
        }
        Ok(WriteBatch {
            rep: bytes.to_vec(),
            count,
            user_bytes,
            kinds,
            max_keyspace,
        })
    }
}

/// The limits on an entry (key and value lengths; a range tombstone's end
/// is a key, at or after its start), as a message.
fn check_entry(e: &BatchEntry<'_>) -> std::result::Result<(), String> {
    if e.kind == ValueKind::RangeDelete {
        check_lengths(e.value.len(), 0)?;
        if e.key > e.value {
            return Err("range deletion whose start is after its end".into());
        }
    }
    check_lengths(e.key.len(), e.value.len())
}

/// The limits on key and value lengths, as a message.
fn check_lengths(key_len: usize, value_len: usize) -> std::result::Result<(), String> {
    if key_len > MAX_KEY_LEN {
        return Err(format!(
            "key of {key_len} bytes exceeds the limit of {MAX_KEY_LEN}"
        ));
    }
    if value_len > MAX_VALUE_LEN {
        return Err(format!(
            "value of {value_len} bytes exceeds the limit of {MAX_VALUE_LEN}"
        ));
    }
    Ok(())
}

/// Parses one entry at the reader's position (offsets in errors are relative
/// to the whole encoding, header included).
fn parse_entry<'a>(r: &mut Reader<'a>) -> Result<BatchEntry<'a>> {
    let at = |r: &Reader<'_>| (HEADER_LEN + r.pos()) as u64;
    let start = at(r);
    let tag = r
        .u8()
        .ok_or_else(|| corrupt(start, "write batch entry truncated"))?;
    let keyspace = if tag & KEYSPACE_FLAG != 0 {
        match r.varint() {
            Some(k @ 1..) if k <= u64::from(MAX_KEYSPACE) => k as u32,
            Some(k) => {
                return Err(corrupt(
                    start,
                    format!(
                    "write batch entry has keyspace id {k} (1..={MAX_KEYSPACE} follow the flag)"
                ),
                ))
            }
            None => return Err(corrupt(start, "write batch entry keyspace id truncated")),
        }
    } else {
        0
    };
    let tag = tag & !KEYSPACE_FLAG;
    let kind = ValueKind::from_batch_tag(tag)
        .ok_or_else(|| corrupt(start, format!("unknown write batch entry kind {tag}")))?;
    let key_at = at(r);
    let key = r
        .len_prefixed()
        .ok_or_else(|| corrupt(key_at, "write batch entry key truncated or bad length"))?;
    let value = match kind {
        ValueKind::Value | ValueKind::Merge | ValueKind::RangeDelete => {
            let v_at = at(r);
            r.len_prefixed()
                .ok_or_else(|| corrupt(v_at, "write batch entry value truncated or bad length"))?
        }
        ValueKind::Delete => &[],
    };
    Ok(BatchEntry {
        kind,
        keyspace,
        key,
        value,
    })
}

/// Iterator over the entries of a [`WriteBatch`]; stops after the first error.
pub struct BatchIter<'a> {
    reader: Reader<'a>,
    left: u32,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let r = parse_entry(&mut self.reader);
        if r.is_err() {
            self.left = 0;
        }
        Some(r)
    }
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = Result<BatchEntry<'a>>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn entries(b: &WriteBatch) -> Vec<(ValueKind, Vec<u8>, Vec<u8>)> {
        b.iter()
            .map(|e| {
                let e = e.expect("valid entry");
                (e.kind, e.key.to_vec(), e.value.to_vec())
            })
            .collect()
    }

    fn sample() -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put("apple", "red");
        b.delete("banana");
        b.put("", "empty key");
        b.put("cherry", "");
        b.put(vec![0xffu8; 300], vec![7u8; 1000]);
        b.set_sequence(42);
        b
    }

    #[test]
    fn round_trip() {
        let b = sample();
        assert_eq!(b.len(), 5);
        assert!(!b.is_empty());
        assert_eq!(b.sequence(), 42);
        assert_eq!(b.user_bytes(), (5 + 3 + 6 + 9 + 6 + 300 + 1000) as u64);
        assert_eq!(b.approximate_size(), b.encoded().len());
        let d = WriteBatch::decode(b.encoded()).expect("decodes");
        assert_eq!(d, b);
        assert_eq!(d.user_bytes(), b.user_bytes());
        let e = entries(&d);
        assert_eq!(e[0], (ValueKind::Value, b"apple".to_vec(), b"red".to_vec()));
        assert_eq!(e[1], (ValueKind::Delete, b"banana".to_vec(), vec![]));
        assert_eq!(e[2], (ValueKind::Value, vec![], b"empty key".to_vec()));
        assert_eq!(e[3], (ValueKind::Value, b"cherry".to_vec(), vec![]));
        assert_eq!(e[4].1.len(), 300);
        assert!(d
            .iter()
            .all(|e| e.map(|e| e.keyspace == 0).unwrap_or(false)));
        assert!(b.validate().is_ok());
    }

    #[test]
    fn encoding_matches_the_documented_bytes() {
        let mut b = WriteBatch::new();
        b.put("k", "vv");
        b.delete("x");
        b.set_sequence(5);
        let want: &[u8] = &[
            5, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 1, b'k', 2, b'v', b'v', 0, 1, b'x',
        ];
        assert_eq!(b.encoded(), want);
    }

    #[test]
    fn format_1_records_decode_into_the_current_encoding() {
        // The same batch as above as WAL format 1 wrote it: a keyspace 0
        // after every kind.
        let v1: &[u8] = &[
            5, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, b'k', 2, b'v', b'v', 0, 0, 1, b'x',
        ];
        let mut b = WriteBatch::new();
        b.put("k", "vv");
        b.delete("x");
        b.set_sequence(5);
        assert_eq!(WriteBatch::decode_format(v1, 1).expect("v1"), b);
        assert_eq!(
            WriteBatch::decode_format(b.encoded(), ENTRY_FORMAT).expect("v2"),
            b
        );
        // Format-1 damage is still corruption: a keyspace other than 0, a
        // truncated value, a count that does not match, trailing bytes.
        let mut bad = v1.to_vec();
        bad[13] = 1;
        assert!(WriteBatch::decode_format(&bad, 1)
            .expect_err("ks")
            .is_corruption());
        assert!(WriteBatch::decode_format(&v1[..v1.len() - 1], 1)
            .expect_err("truncated")
            .is_corruption());
        let mut bad = v1.to_vec();
        bad[8] = 3;
        assert!(WriteBatch::decode_format(&bad, 1)
            .expect_err("count")
            .is_corruption());
        let mut bad = v1.to_vec();
        bad.push(9);
        assert!(WriteBatch::decode_format(&bad, 1)
            .expect_err("trailing")
            .is_corruption());
        assert!(WriteBatch::decode_format(&[1, 2], 1)
            .expect_err("short")
            .is_corruption());
    }

    #[test]
    fn empty_batch_and_clear() {
        let b = WriteBatch::new();
        assert_eq!(b, WriteBatch::default());
        assert_eq!(b.encoded().len(), HEADER_LEN);
        assert_eq!(WriteBatch::decode(b.encoded()).expect("empty decodes"), b);
        assert_eq!(b.iter().count(), 0);
        let mut s = sample();
        s.clear();
        assert_eq!(s, WriteBatch::new());
        assert_eq!(s.sequence(), 0);
    }

    #[test]
    fn append_concatenates() {
        let mut a = WriteBatch::new();
        a.put("a", "1");
        a.set_sequence(10);
        let b = sample();
        a.append(&b);
        assert_eq!(a.len(), 6);
        assert_eq!(a.sequence(), 10);
        assert_eq!(a.user_bytes(), 2 + b.user_bytes());
        let mut want = vec![(ValueKind::Value, b"a".to_vec(), b"1".to_vec())];
        want.extend(entries(&b));
        assert_eq!(entries(&a), want);
        assert_eq!(WriteBatch::decode(a.encoded()).expect("decodes"), a);
    }

    #[test]
    fn a_batch_past_the_size_limit_is_refused() {
        // Four values at the value limit: past 1 GiB in one batch (one WAL
        // record, one memtable's worth).
        let value = vec![7u8; MAX_VALUE_LEN];
        let mut b = WriteBatch::new();
        for i in 0..3u8 {
            b.put([i], &value[..]);
        }
        assert!(b.validate().is_ok(), "three quarters of a GiB");
        b.put([9u8], &value[..]);
        let e = b.validate();
        assert!(
            matches!(&e, Err(Error::InvalidArgument(m)) if m.contains("limit")),
            "{e:?}"
        );
    }

    #[test]
    fn validate_limits() {
        let mut b = WriteBatch::new();
        b.put(vec![1u8; MAX_KEY_LEN], "v");
        b.delete(vec![2u8; MAX_KEY_LEN]);
        assert!(b.validate().is_ok());
        assert!(WriteBatch::decode(b.encoded()).is_ok());

        let mut b = WriteBatch::new();
        b.put("ok", "v");
        b.put(vec![1u8; MAX_KEY_LEN + 1], "v");
        assert!(matches!(b.validate(), Err(Error::InvalidArgument(_))));
        // The decoder refuses the same bytes as corruption.
        let err = WriteBatch::decode(b.encoded()).expect_err("oversize key");
        assert!(err.is_corruption(), "{err}");

        let mut b = WriteBatch::new();
        b.delete(vec![1u8; MAX_KEY_LEN + 1]);
        assert!(matches!(b.validate(), Err(Error::InvalidArgument(_))));

        // (A 256 MiB value is too big to build in a unit test; check the rule.)
        assert!(check_lengths(0, MAX_VALUE_LEN).is_ok());
        assert!(check_lengths(0, MAX_VALUE_LEN + 1).is_err());

        let mut b = WriteBatch::new();
        b.put("k", "v");
        b.count = u32::MAX - 1;
        b.append(&sample());
        assert_eq!(b.count, u32::MAX);
        assert!(matches!(b.validate(), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn decode_rejects_every_truncation() {
        let b = sample();
        let enc = b.encoded();
        for cut in 0..enc.len() {
            let err = WriteBatch::decode(&enc[..cut]).expect_err("truncated");
            assert!(err.is_corruption(), "cut {cut}: {err}");
        }
        let mut longer = enc.to_vec();
        longer.push(0);
        assert!(WriteBatch::decode(&longer)
            .expect_err("trailing")
            .is_corruption());
    }

    #[test]
    fn range_deletions_round_trip_and_inverted_ones_are_refused() {
        let mut b = WriteBatch::new();
        b.put("a", "1");
        b.delete_range("b", "f");
        b.delete_range("g", "g");
        assert!(b.has_range_deletes());
        b.validate().expect("valid");
        let d = WriteBatch::decode(b.encoded()).expect("decodes");
        let e = entries(&d);
        assert_eq!(e[1], (ValueKind::RangeDelete, b"b".to_vec(), b"f".to_vec()));
        assert_eq!(e[2], (ValueKind::RangeDelete, b"g".to_vec(), b"g".to_vec()));
        let mut bad = WriteBatch::new();
        bad.delete_range("z", "a");
        assert!(matches!(bad.validate(), Err(Error::InvalidArgument(_))));
        assert!(WriteBatch::decode(bad.encoded())
            .expect_err("inverted")
            .is_corruption());
        let mut long = WriteBatch::new();
        long.delete_range("a", vec![b'z'; MAX_KEY_LEN + 1]);
        assert!(long.validate().is_err());
        assert!(!sample().has_range_deletes());
    }

    #[test]
    fn decode_rejects_bad_tags_counts_and_keyspaces() {
        for tag in [4u8, 7, 0x7f] {
            let mut enc = WriteBatch::new().encoded().to_vec();
            enc[8] = 1;
            enc.extend_from_slice(&[tag, 1, b'k', 1, b'v']);
            let err = WriteBatch::decode(&enc).expect_err("bad tag");
            assert!(err.is_corruption());
            assert!(err.to_string().contains("kind"), "{err}");
        }
        let mut b = WriteBatch::new();
        b.put("k", "v");
        let mut enc = b.encoded().to_vec();
        enc[8] = 2; // count larger than the entries
        assert!(WriteBatch::decode(&enc).expect_err("count").is_corruption());
        enc[8] = 0; // count smaller than the entries
        assert!(WriteBatch::decode(&enc).expect_err("count").is_corruption());
        let mut enc = b.encoded().to_vec();
        enc[HEADER_LEN] |= 0x80; // a keyspace id follows
        enc.insert(HEADER_LEN + 1, 1);
        let one = WriteBatch::decode(&enc).expect("keyspace 1");
        assert_eq!(one.iter().next().expect("entry").expect("ok").keyspace, 1);
        assert_eq!(one.max_keyspace(), 1);
        enc[HEADER_LEN + 1] = 0; // keyspace 0 is never written with the flag
        assert!(WriteBatch::decode(&enc)
            .expect_err("keyspace 0")
            .is_corruption());
        enc.truncate(HEADER_LEN + 1); // the id is cut off
        assert!(WriteBatch::decode(&enc)
            .expect_err("keyspace cut")
            .is_corruption());
        let mut enc = b.encoded().to_vec();
        enc[HEADER_LEN + 1] = 0x80; // overlong / unterminated varint
        assert!(WriteBatch::decode(&enc)
            .expect_err("varint")
            .is_corruption());
        let mut enc = WriteBatch::new().encoded().to_vec();
        enc[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(WriteBatch::decode(&enc)
            .expect_err("overflow")
            .is_corruption());
    }

    #[test]
    fn decode_never_panics_on_random_bytes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_ba7c);
        let mut errors = 0;
        for i in 0..600 {
            let len = rng.gen_range(0..200);
            let mut buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if i % 2 == 0 && buf.len() >= HEADER_LEN {
                // Plausible headers: small counts reach the entry parser.
                buf[8..12].copy_from_slice(&rng.gen_range(0u32..4).to_le_bytes());
            }
            match WriteBatch::decode(&buf) {
                Ok(b) => assert_eq!(b.encoded(), &buf[..]),
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    errors += 1;
                }
            }
        }
        assert!(errors > 550, "only {errors} of 600 random buffers rejected");

        // Mutations of a valid encoding: never a panic, and whatever decodes
        // iterates cleanly.
        let enc = sample().encoded().to_vec();
        for _ in 0..400 {
            let mut m = enc.clone();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..m.len());
                m[at] = rng.gen();
            }
            m.truncate(rng.gen_range(0..=m.len()));
            match WriteBatch::decode(&m) {
                Ok(b) => assert!(b.iter().all(|e| e.is_ok())),
                Err(e) => assert!(e.is_corruption(), "{e}"),
            }
        }
    }
}
