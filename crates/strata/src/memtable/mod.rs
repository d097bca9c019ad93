//! The memtable: a concurrent skiplist of internal keys.
//!
//! Thread-safety: any number of readers run concurrently with one inserter
//! (the group-commit leader); the skiplist is lock-free. Entries are never
//! removed; a full memtable becomes immutable and is flushed to a table.
//! Invariant: every internal key is unique (sequence numbers are unique).

mod iter;
mod skiplist;

pub use iter::MemIter;

use crate::types::{self, SeqNo, ValueKind};
use skiplist::{node_key, node_value, NodePtr, SkipList};
use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};

/// Orders a stored internal key against the probe `(user_key, trailer)`.
#[inline]
fn cmp_probe(node: &[u8], user_key: &[u8], trailer: u64) -> Ordering {
    match types::user_key(node).cmp(user_key) {
        Ordering::Equal => trailer.cmp(&types::trailer(node)),
        o => o,
    }
}

/// A memtable bound to the write-ahead log that holds its entries.
pub struct MemTable {
    list: SkipList,
    size: AtomicUsize,
    max_seq: AtomicU64,
    log_number: u64,
}

impl MemTable {
    /// An empty memtable whose entries are logged in WAL `log_number`.
    pub fn new(log_number: u64) -> Self {
        MemTable {
            list: SkipList::new(),
            size: AtomicUsize::new(0),
            max_seq: AtomicU64::new(0),
            log_number,
        }
    }

    /// The WAL that holds this memtable's entries.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Inserts one entry. Caller guarantees `seq` is unique.
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let trailer = types::pack_trailer(seq, kind as u8);
        self.list
            .insert(user_key, &trailer.to_le_bytes(), value, &mut |n| {
                cmp_probe(n, user_key, trailer)
            });
        self.size.store(self.list.memory(), AtomicOrdering::Relaxed);
        self.max_seq.fetch_max(seq, AtomicOrdering::Relaxed);
    }

    /// The newest entry of `user_key` with sequence `<= seq`.
    pub fn get(&self, user_key: &[u8], seq: SeqNo) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
        let probe = types::pack_trailer(seq, types::KIND_FOR_SEEK);
        let n = self.list.seek(&mut |k| cmp_probe(k, user_key, probe));
        if n.is_null() {
            return None;
        }
        let p = types::parse_internal_key(node_key(n))?;
        if p.user_key != user_key {
            return None;
        }
        Some((p.seq, p.kind, node_value(n).to_vec()))
    }

    /// Calls `f(internal_key, value)` for every entry in order (used by flush).
    pub fn for_each<E>(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<(), E>) -> Result<(), E> {
        let mut n = self.list.first();
        while !n.is_null() {
            f(node_key(n), node_value(n))?;
            n = self.list.successor(n);
        }
        Ok(())
    }

    fn seek_node(&self, target: &[u8]) -> NodePtr {
        self.list.seek(&mut |k| types::compare_internal(k, target))
    }

    /// Approximate bytes used.
    pub fn approximate_size(&self) -> usize {
        self.size.load(AtomicOrdering::Relaxed)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when no entry was added.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Largest sequence number inserted.
    pub fn max_seq(&self) -> SeqNo {
        self.max_seq.load(AtomicOrdering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;
    use std::sync::Arc;

    #[test]
    fn get_sees_newest_visible_version() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(2, ValueKind::Value, b"k", b"v2");
        m.add(3, ValueKind::Delete, b"k", b"");
        m.add(4, ValueKind::Value, b"k2", b"x");
        assert_eq!(m.get(b"k", 0), None);
        assert_eq!(m.get(b"k", 1).map(|e| e.2), Some(b"v1".to_vec()));
        assert_eq!(m.get(b"k", 2).map(|e| e.2), Some(b"v2".to_vec()));
        assert_eq!(m.get(b"k", 3).map(|e| e.1), Some(ValueKind::Delete));
        assert_eq!(m.get(b"j", 9), None);
        assert_eq!(m.get(b"k2", 9).map(|e| e.2), Some(b"x".to_vec()));
        assert_eq!(m.max_seq(), 4);
        assert!(m.approximate_size() > 0);
    }

    #[test]
    fn iterator_walks_both_ways_in_internal_order() {
        let m = Arc::new(MemTable::new(1));
        let mut expect = Vec::new();
        for i in 0..200u32 {
            let k = format!("key{:05}", i * 7 % 200);
            m.add(
                u64::from(i) + 1,
                ValueKind::Value,
                k.as_bytes(),
                &i.to_le_bytes(),
            );
            expect.push(types::internal_key(k.as_bytes(), u64::from(i) + 1, 1));
        }
        expect.sort_by(|a, b| types::compare_internal(a, b));
        let mut it = MemIter::new(m.clone());
        it.seek_to_first();
        let mut got = Vec::new();
        while it.valid() {
            got.push(it.key().to_vec());
            it.next();
        }
        assert_eq!(got, expect);
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push(it.key().to_vec());
            it.prev();
        }
        back.reverse();
        assert_eq!(back, expect);
        it.seek(&types::seek_key(b"key00100", u64::MAX >> 8));
        assert!(it.valid());
        assert_eq!(types::user_key(it.key()), b"key00100");
        it.prev();
        assert_eq!(types::user_key(it.key()), b"key00099");
    }
}
