//! Version edits: the records of the MANIFEST.
//!
//! An edit adds and removes table files and updates counters. Only the
//! version set applies edits, and recovery replays them, so recovery never
//! runs picker code. Tags are on-disk values: never renumber them.
//!
//! ```text
//! edit   := field*
//! field  := 1 varint(log_number)          min WAL still needed
//!         | 2 varint(next_file_number)
//!         | 3 varint(last_sequence)
//!         | 4 varint(level) bytes(key)     compaction pointer of a level
//!         | 5 varint(level) varint(id)     table removed
//!         | 6 varint(level) varint(id) varint(size) bytes(smallest) bytes(largest)
//!             varint(entries) varint(deletions) varint(max_seq)   table added
//!         | 7 varint(id) varint(size) bytes(smallest) bytes(largest)
//!             varint(entries) varint(deletions) varint(max_seq)   matrix row added
//!         | 8 varint(id) varint(cursor)    matrix row compacted up to cell `cursor`
//!                                           (and in the compacting group)
//!         | 9 varint(id)                   matrix row removed
//!         | 10 varint(level) desc varint(min_seq) varint(swept_seq)   table added
//!         | 11 desc varint(min_seq) varint(swept_seq)                 matrix row added
//!         | 12 varint(seq) bytes(start) bytes(end)  range tombstone added
//!         | 13 varint(seq)                 range tombstone removed
//!         | 14 varint(n) (varint(seq_delta) varint(ms_delta))*n
//!                                           write times (replace the last
//!                                           list; deltas from the previous pair)
//!         | 15 varint(id)                  the keyspace the edit's tree fields
//!                                           (1, 4-13) change; absent: 0, `default`
//!         | 16 bytes(name) bytes(options)  the keyspace begins (or, in a
//!                                           manifest's first record, exists)
//!         | 17                             the keyspace is dropped
//!         | 18 bytes(edit)                 another keyspace's edit, applied
//!                                           with this one (never nested)
//! desc   := the fields of tag 7
//! bytes  := varint(len) byte*len
//! ```
//!
//! This version writes tables and rows with tags 10 and 11; tags 6 and 7
//! (written before range tombstones existed) are read with `min_seq` and
//! `swept_seq` 0, which keeps a range tombstone over their keys alive
//! until they are compacted away.

use crate::coding::{put_bytes, put_varint, Reader};
use crate::error::{corrupt, Result};
use crate::rangedel::RangeTombstone;
use crate::types::SeqNo;

const TAG_LOG_NUMBER: u64 = 1;
const TAG_NEXT_FILE: u64 = 2;
const TAG_LAST_SEQ: u64 = 3;
const TAG_COMPACT_POINTER: u64 = 4;
const TAG_DELETED_FILE: u64 = 5;
const TAG_NEW_FILE: u64 = 6;
const TAG_NEW_ROW: u64 = 7;
const TAG_ROW_CURSOR: u64 = 8;
const TAG_DELETED_ROW: u64 = 9;
const TAG_NEW_FILE_MIN_SEQ: u64 = 10;
const TAG_NEW_ROW_MIN_SEQ: u64 = 11;
const TAG_RANGE_DEL: u64 = 12;
const TAG_RANGE_DEL_REMOVED: u64 = 13;
const TAG_WRITE_TIMES: u64 = 14;
const TAG_FAMILY: u64 = 15;
const TAG_FAMILY_CREATED: u64 = 16;
const TAG_FAMILY_DROPPED: u64 = 17;
const TAG_OTHER_FAMILY: u64 = 18;
/// The largest keyspace id.
pub const MAX_FAMILY: u32 = crate::types::MAX_KEYSPACE;
/// Most pairs one write-times field may hold.
const MAX_WRITE_TIMES: u64 = 1 << 16;

/// Everything the manifest knows about a table file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileDesc {
    pub id: u64,
    pub size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    pub entries: u64,
    pub deletions: u64,
    pub max_seq: SeqNo,
    /// The smallest sequence number of an entry (0 if unknown): a range
    /// tombstone newer than it may still hide one of its entries.
    pub min_seq: SeqNo,
    /// Every range tombstone at or below this sequence was applied when
    /// the file was written and hides nothing in it (0: none known).
    pub swept_seq: SeqNo,
}

/// A change from one version to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edit {
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_sequence: Option<SeqNo>,
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    pub deleted: Vec<(usize, u64)>,
    pub added: Vec<(usize, FileDesc)>,
    /// Matrix container rows added (one per flush, `l0=matrix`).
    pub rows_added: Vec<FileDesc>,
    /// Matrix rows whose first `cursor` cells went to L1: (row, cursor).
    pub row_cursors: Vec<(u64, u32)>,
    /// Matrix rows removed (every cell went to L1).
    pub rows_deleted: Vec<u64>,
    /// Range tombstones added (a flush moves its memtable's here).
    pub range_dels_added: Vec<RangeTombstone>,
    /// Range tombstones retired, by sequence number.
    pub range_dels_removed: Vec<SeqNo>,
    /// Write times for time to live (`ttl_secs`): pairs (sequence, Unix
    /// ms), both ascending, each saying every version at or below the
    /// sequence was written by that time. Replaces the previous list.
    pub write_times: Option<Vec<(SeqNo, u64)>>,
    /// The keyspace whose tree the fields above change (all but the
    /// counters and the write times, which are the database's); 0 is
    /// `default`.
    pub family: u32,
    /// The keyspace `family` begins here: its name and its options as
    /// `name=value` text. In a manifest's first record: it exists.
    pub created: Option<(String, String)>,
    /// The keyspace `family` is dropped: its tables and rows leave every
    /// later version.
    pub dropped: bool,
    /// Edits of other keyspaces that belong to the same record (applied
    /// together with this one); they hold no `others` of their own.
    pub others: Vec<Edit>,
}

impl FileDesc {
    /// Appends `varint(id) varint(size) bytes(smallest) bytes(largest)
    /// varint(entries) varint(deletions) varint(max_seq)`: the descriptor
    /// in manifest edits and in the compaction worker protocol.
    pub fn encode_into(&self, b: &mut Vec<u8>) {
        put_varint(b, self.id);
        put_varint(b, self.size);
        put_bytes(b, &self.smallest);
        put_bytes(b, &self.largest);
        put_varint(b, self.entries);
        put_varint(b, self.deletions);
        put_varint(b, self.max_seq);
    }

    /// Reads what [`FileDesc::encode_into`] wrote; `None` if truncated.
    pub fn decode_from(r: &mut Reader<'_>) -> Option<FileDesc> {
        Some(FileDesc {
            id: r.varint()?,
            size: r.varint()?,
            smallest: r.len_prefixed()?.to_vec(),
            largest: r.len_prefixed()?.to_vec(),
            entries: r.varint()?,
            deletions: r.varint()?,
            max_seq: r.varint()?,
            min_seq: 0,
            swept_seq: 0,
        })
    }
}

impl Edit {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        if self.family != 0 {
            put_varint(&mut b, TAG_FAMILY);
            put_varint(&mut b, u64::from(self.family));
        }
        if let Some((name, options)) = &self.created {
            put_varint(&mut b, TAG_FAMILY_CREATED);
            put_bytes(&mut b, name.as_bytes());
            put_bytes(&mut b, options.as_bytes());
        }
        if self.dropped {
            put_varint(&mut b, TAG_FAMILY_DROPPED);
        }
        if let Some(n) = self.log_number {
            put_varint(&mut b, TAG_LOG_NUMBER);
            put_varint(&mut b, n);
        }
        if let Some(n) = self.next_file_number {
            put_varint(&mut b, TAG_NEXT_FILE);
            put_varint(&mut b, n);
        }
        if let Some(n) = self.last_sequence {
            put_varint(&mut b, TAG_LAST_SEQ);
            put_varint(&mut b, n);
        }
        for (level, key) in &self.compact_pointers {
            put_varint(&mut b, TAG_COMPACT_POINTER);
            put_varint(&mut b, *level as u64);
            put_bytes(&mut b, key);
        }
        for (level, id) in &self.deleted {
            put_varint(&mut b, TAG_DELETED_FILE);
            put_varint(&mut b, *level as u64);
            put_varint(&mut b, *id);
        }
        for (level, f) in &self.added {
            put_varint(&mut b, TAG_NEW_FILE_MIN_SEQ);
            put_varint(&mut b, *level as u64);
            f.encode_into(&mut b);
            put_varint(&mut b, f.min_seq);
            put_varint(&mut b, f.swept_seq);
        }
        for f in &self.rows_added {
            put_varint(&mut b, TAG_NEW_ROW_MIN_SEQ);
            f.encode_into(&mut b);
            put_varint(&mut b, f.min_seq);
            put_varint(&mut b, f.swept_seq);
        }
        for (id, cursor) in &self.row_cursors {
            put_varint(&mut b, TAG_ROW_CURSOR);
            put_varint(&mut b, *id);
            put_varint(&mut b, u64::from(*cursor));
        }
        for id in &self.rows_deleted {
            put_varint(&mut b, TAG_DELETED_ROW);
            put_varint(&mut b, *id);
        }
        for t in &self.range_dels_added {
            put_varint(&mut b, TAG_RANGE_DEL);
            put_varint(&mut b, t.seq);
            put_bytes(&mut b, &t.start);
            put_bytes(&mut b, &t.end);
        }
        for seq in &self.range_dels_removed {
            put_varint(&mut b, TAG_RANGE_DEL_REMOVED);
            put_varint(&mut b, *seq);
        }
        if let Some(times) = &self.write_times {
            put_varint(&mut b, TAG_WRITE_TIMES);
            put_varint(&mut b, times.len() as u64);
            let (mut seq, mut ms) = (0, 0);
            for &(s, t) in times {
                put_varint(&mut b, s.saturating_sub(seq));
                put_varint(&mut b, t.saturating_sub(ms));
                (seq, ms) = (s.max(seq), t.max(ms));
            }
        }
        for other in &self.others {
            put_varint(&mut b, TAG_OTHER_FAMILY);
            put_bytes(&mut b, &other.encode());
        }
        b
    }

    /// This edit and the others of its record, in the order they apply.
    pub fn parts(&self) -> impl Iterator<Item = &Edit> {
        std::iter::once(self).chain(&self.others)
    }

    /// Decodes an edit; offsets in errors are relative to `buf`.
    pub fn decode(buf: &[u8]) -> Result<Edit> {
        Self::decode_nested(buf, true)
    }

    /// [`decode`](Self::decode), taking edits of other keyspaces only
    /// when `outer`.
    fn decode_nested(buf: &[u8], outer: bool) -> Result<Edit> {
        let mut r = Reader::new(buf);
        let mut e = Edit::default();
        while !r.is_empty() {
            let at = r.pos() as u64;
            let bad = |what: &str| corrupt(at, format!("manifest edit: {what}"));
            let tag = r.varint().ok_or_else(|| bad("truncated tag"))?;
            let level = |r: &mut Reader<'_>| -> Result<usize> {
                let l = r.varint().ok_or_else(|| bad("truncated level"))?;
                if l >= 64 {
                    return Err(bad("level out of range"));
                }
                Ok(l as usize)
            };
            match tag {
                TAG_FAMILY => {
                    e.family =
                        r.varint()
                            .filter(|&f| f <= u64::from(MAX_FAMILY))
                            .ok_or_else(|| bad("bad keyspace id"))? as u32;
                }
                TAG_FAMILY_CREATED => {
                    let mut text = || {
                        r.len_prefixed()
                            .and_then(|b| std::str::from_utf8(b).ok())
                            .map(str::to_string)
                            .ok_or_else(|| bad("bad keyspace name or options"))
                    };
                    let name = text()?;
                    let options = text()?;
                    e.created = Some((name, options));
                }
                TAG_FAMILY_DROPPED => e.dropped = true,
                TAG_OTHER_FAMILY if outer => {
                    let b = r
                        .len_prefixed()
                        .ok_or_else(|| bad("truncated keyspace edit"))?;
                    let other =
                        Self::decode_nested(b, false).map_err(|_| bad("damaged keyspace edit"))?;
                    e.others.push(other);
                }
                TAG_LOG_NUMBER => {
                    e.log_number = Some(r.varint().ok_or_else(|| bad("truncated log number"))?)
                }
                TAG_NEXT_FILE => {
                    e.next_file_number = Some(
                        r.varint()
                            .ok_or_else(|| bad("truncated next file number"))?,
                    )
                }
                TAG_LAST_SEQ => {
                    let seq = r.varint().ok_or_else(|| bad("truncated sequence"))?;
                    if seq > crate::types::MAX_SEQ {
                        return Err(bad("last sequence beyond the largest sequence number"));
                    }
                    e.last_sequence = Some(seq);
                }
                TAG_COMPACT_POINTER => {
                    let l = level(&mut r)?;
                    let k = r.len_prefixed().ok_or_else(|| bad("truncated key"))?;
                    e.compact_pointers.push((l, k.to_vec()));
                }
                TAG_DELETED_FILE => {
                    let l = level(&mut r)?;
                    let id = r.varint().ok_or_else(|| bad("truncated file id"))?;
                    e.deleted.push((l, id));
                }
                TAG_NEW_FILE | TAG_NEW_ROW | TAG_NEW_FILE_MIN_SEQ | TAG_NEW_ROW_MIN_SEQ => {
                    let table = matches!(tag, TAG_NEW_FILE | TAG_NEW_FILE_MIN_SEQ);
                    let l = if table { level(&mut r)? } else { 0 };
                    let mut f = FileDesc::decode_from(&mut r)
                        .ok_or_else(|| bad("truncated table or row descriptor"))?;
                    if matches!(tag, TAG_NEW_FILE_MIN_SEQ | TAG_NEW_ROW_MIN_SEQ) {
                        f.min_seq = r.varint().ok_or_else(|| bad("truncated min_seq"))?;
                        f.swept_seq = r.varint().ok_or_else(|| bad("truncated swept_seq"))?;
                    }
                    if table {
                        e.added.push((l, f));
                    } else {
                        e.rows_added.push(f);
                    }
                }
                TAG_RANGE_DEL => {
                    let seq = r.varint().ok_or_else(|| bad("truncated range tombstone"))?;
                    let start = r
                        .len_prefixed()
                        .ok_or_else(|| bad("truncated range start"))?;
                    let end = r.len_prefixed().ok_or_else(|| bad("truncated range end"))?;
                    if seq > crate::types::MAX_SEQ || start >= end {
                        return Err(bad("range tombstone with a bad sequence or range"));
                    }
                    e.range_dels_added.push(RangeTombstone {
                        start: start.to_vec(),
                        end: end.to_vec(),
                        seq,
                    });
                }
                TAG_RANGE_DEL_REMOVED => {
                    e.range_dels_removed
                        .push(r.varint().ok_or_else(|| bad("truncated range tombstone"))?);
                }
                TAG_WRITE_TIMES => {
                    let n = r
                        .varint()
                        .filter(|n| *n <= MAX_WRITE_TIMES)
                        .ok_or_else(|| bad("bad write-times count"))?;
                    let (mut seq, mut ms) = (0u64, 0u64);
                    let mut times = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let ds = r.varint().ok_or_else(|| bad("truncated write times"))?;
                        let dt = r.varint().ok_or_else(|| bad("truncated write times"))?;
                        seq = seq
                            .checked_add(ds)
                            .ok_or_else(|| bad("write-time overflow"))?;
                        ms = ms
                            .checked_add(dt)
                            .ok_or_else(|| bad("write-time overflow"))?;
                        times.push((seq, ms));
                    }
                    e.write_times = Some(times);
                }
                TAG_ROW_CURSOR => {
                    let id = r.varint().ok_or_else(|| bad("truncated row id"))?;
                    let cursor = r
                        .varint()
                        .and_then(|c| u32::try_from(c).ok())
                        .ok_or_else(|| bad("bad row cursor"))?;
                    e.row_cursors.push((id, cursor));
                }
                TAG_DELETED_ROW => {
                    e.rows_deleted
                        .push(r.varint().ok_or_else(|| bad("truncated row id"))?);
                }
                _ => return Err(bad("unknown tag")),
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn round_trip() {
        let e = Edit {
            log_number: Some(5),
            next_file_number: Some(9),
            last_sequence: Some(1234),
            compact_pointers: vec![(1, b"k".to_vec())],
            deleted: vec![(0, 3), (1, 4)],
            added: vec![(
                2,
                FileDesc {
                    id: 8,
                    size: 4096,
                    smallest: b"a\0\0\0\0\0\0\0\x01".to_vec(),
                    largest: b"z\0\0\0\0\0\0\0\x01".to_vec(),
                    entries: 10,
                    deletions: 1,
                    max_seq: 77,
                    min_seq: 3,
                    swept_seq: 60,
                },
            )],
            rows_added: vec![FileDesc {
                id: 11,
                size: 900,
                smallest: b"b\0\0\0\0\0\0\0\x01".to_vec(),
                largest: b"y\0\0\0\0\0\0\0\x01".to_vec(),
                entries: 3,
                deletions: 0,
                max_seq: 80,
                min_seq: 0,
                swept_seq: 0,
            }],
            row_cursors: vec![(10, 7)],
            rows_deleted: vec![6],
            range_dels_added: vec![RangeTombstone {
                start: b"c".to_vec(),
                end: b"f".to_vec(),
                seq: 70,
            }],
            range_dels_removed: vec![12],
            write_times: Some(vec![(0, 1_000), (40, 1_000), (77, 2_500)]),
            ..Edit::default()
        };
        assert_eq!(Edit::decode(&e.encode()).ok(), Some(e.clone()));
        // A record with edits of other keyspaces, one made and one dropped.
        let multi = Edit {
            others: vec![
                Edit {
                    family: 3,
                    created: Some(("users".into(), "compression=lz4".into())),
                    added: e.added.clone(),
                    log_number: Some(9),
                    ..Edit::default()
                },
                Edit {
                    family: 2,
                    dropped: true,
                    ..Edit::default()
                },
            ],
            ..e
        };
        assert_eq!(Edit::decode(&multi.encode()).ok(), Some(multi.clone()));
        assert_eq!(
            multi.parts().map(|p| p.family).collect::<Vec<_>>(),
            [0, 3, 2]
        );
    }

    /// An edit of another keyspace never holds one of its own: nesting is
    /// refused, not recursed into.
    #[test]
    fn nested_keyspace_edits_are_corruption() {
        let inner = Edit {
            family: 1,
            others: vec![Edit::default()],
            ..Edit::default()
        };
        let outer = Edit {
            others: vec![inner],
            ..Edit::default()
        };
        assert!(Edit::decode(&outer.encode()).is_err());
        let mut b = Vec::new();
        put_varint(&mut b, TAG_FAMILY);
        put_varint(&mut b, u64::from(MAX_FAMILY) + 1);
        assert!(Edit::decode(&b).is_err());
    }

    #[test]
    fn old_descriptor_tags_read_with_min_seq_zero() {
        let d = FileDesc {
            id: 4,
            max_seq: 9,
            ..FileDesc::default()
        };
        let mut b = Vec::new();
        put_varint(&mut b, TAG_NEW_FILE);
        put_varint(&mut b, 1);
        d.encode_into(&mut b);
        put_varint(&mut b, TAG_NEW_ROW);
        d.encode_into(&mut b);
        let e = Edit::decode(&b).expect("decodes");
        assert_eq!(e.added, vec![(1, d.clone())]);
        assert_eq!(e.rows_added, vec![d]);
    }

    #[test]
    fn empty_range_tombstone_is_corruption() {
        let e = Edit {
            range_dels_added: vec![RangeTombstone {
                start: b"b".to_vec(),
                end: b"b".to_vec(),
                seq: 4,
            }],
            ..Edit::default()
        };
        assert!(Edit::decode(&e.encode()).is_err());
    }

    #[test]
    fn sequence_beyond_max_is_corruption() {
        let ok = Edit {
            last_sequence: Some(crate::types::MAX_SEQ),
            ..Edit::default()
        };
        assert!(Edit::decode(&ok.encode()).is_ok());
        let bad = Edit {
            last_sequence: Some(crate::types::MAX_SEQ + 1),
            ..Edit::default()
        };
        match Edit::decode(&bad.encode()) {
            Err(e) => assert!(e.is_corruption(), "{e}"),
            Ok(e) => panic!("decoded {:?}", e.last_sequence),
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let good = Edit {
            added: vec![(1, FileDesc::default())],
            ..Edit::default()
        }
        .encode();
        for _ in 0..500 {
            let len = rng.gen_range(0..64);
            let buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let _ = Edit::decode(&buf);
            let cut = rng.gen_range(0..good.len());
            assert!(Edit::decode(&good[..cut]).is_err() || cut == 0);
        }
    }
}
