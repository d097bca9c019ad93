//! The row cache: the entries point lookups found in tables, keyed by
//! `(table id, user key)`, so a key read again is answered without its
//! block. Where reads are skewed (a few keys read most often) this holds
//! several times more of the keys being read than a block cache of the
//! same size, whose blocks hold mostly keys nobody asks for.
//!
//! A table is immutable, so an entry never goes stale: it is the newest
//! entry of the key in that table, which is what a lookup returns there
//! whenever its snapshot is at or past the table's largest sequence. A
//! lookup at an older snapshot neither reads nor fills the cache. Keys are
//! hashed (xxh3) and the entry keeps the whole key, compared on every hit.

use crate::types::ValueKind;
use quick_cache::sync::Cache;
use quick_cache::Weighter;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// `(table id, hash of the user key)`.
type Key = (u64, u64);

/// Bytes charged per row beyond its key and value: the row, its `Arc` and
/// the cache's own entry.
const ROW_OVERHEAD: usize = 96;

/// A found entry: its user key, sequence, kind and value.
#[derive(Debug)]
struct Row {
    key: Box<[u8]>,
    seq: u64,
    kind: ValueKind,
    value: Box<[u8]>,
}

#[derive(Debug, Clone, Copy, Default)]
struct RowWeighter;

impl Weighter<Key, Arc<Row>> for RowWeighter {
    fn weight(&self, _key: &Key, row: &Arc<Row>) -> u64 {
        (row.key.len() + row.value.len() + ROW_OVERHEAD) as u64
    }
}

/// A byte-bounded cache of rows shared by the tables of one database.
/// Capacity 0: nothing is cached (and lookups cost one atomic load).
#[derive(Debug)]
pub struct RowCache {
    cache: Cache<Key, Arc<Row>, RowWeighter>,
    capacity: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl RowCache {
    /// A cache holding rows of up to `capacity` bytes in all.
    pub fn new(capacity: usize) -> Self {
        // Sized for rows of about 256 bytes at the largest capacity the
        // cache is expected to grow to; it grows past that if it must.
        let est_items = (capacity / 256).clamp(64, 1 << 20);
        RowCache {
            cache: Cache::with_weighter(est_items, capacity.max(1) as u64, RowWeighter),
            capacity: AtomicUsize::new(capacity),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Capacity in bytes (0: off).
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Sets the capacity, evicting down to it; 0 empties the cache and
    /// turns it off.
    pub(crate) fn resize(&self, bytes: usize) {
        self.capacity.store(bytes, Ordering::Relaxed);
        self.cache.set_capacity(bytes.max(1) as u64);
        if bytes == 0 {
            self.cache.clear();
        }
    }

    /// Bytes charged to the cache.
    pub fn usage(&self) -> u64 {
        self.cache.weight()
    }

    /// Lookups answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that were not (while the cache was on).
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// True while rows are cached.
    #[inline]
    pub fn on(&self) -> bool {
        self.capacity() > 0
    }

    /// The entry of `user_key` cached for table `table`: `(seq, kind,
    /// value)`.
    pub(crate) fn get(&self, table: u64, user_key: &[u8]) -> Option<(u64, ValueKind, Vec<u8>)> {
        let found = self
            .cache
            .get(&(table, hash(user_key)))
            .filter(|row| *row.key == *user_key);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found.map(|row| (row.seq, row.kind, row.value.to_vec()))
    }

    /// Caches `user_key`'s newest entry in table `table`.
    pub(crate) fn insert(
        &self,
        table: u64,
        user_key: &[u8],
        seq: u64,
        kind: ValueKind,
        value: &[u8],
    ) {
        let row = Row {
            key: user_key.into(),
            seq,
            kind,
            value: value.into(),
        };
        self.cache.insert((table, hash(user_key)), Arc::new(row));
    }
}

fn hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_found_by_table_and_key_and_only_there() {
        let rows = RowCache::new(1 << 20);
        assert!(rows.on());
        rows.insert(7, b"k", 42, ValueKind::Value, b"v");
        rows.insert(7, b"gone", 43, ValueKind::Delete, b"");
        assert_eq!(
            rows.get(7, b"k"),
            Some((42, ValueKind::Value, b"v".to_vec()))
        );
        assert_eq!(
            rows.get(7, b"gone"),
            Some((43, ValueKind::Delete, Vec::new()))
        );
        assert_eq!(rows.get(8, b"k"), None, "another table");
        assert_eq!(rows.get(7, b"k2"), None);
        assert_eq!((rows.hits(), rows.misses()), (2, 2));
        assert!(rows.usage() >= (1 + 1 + ROW_OVERHEAD) as u64);
    }

    #[test]
    fn a_hash_collision_is_a_miss() {
        let rows = RowCache::new(1 << 20);
        rows.insert(1, b"a", 1, ValueKind::Value, b"x");
        // Plant a row under another key's hash: the stored key is compared.
        rows.cache.insert(
            (1, hash(b"b")),
            Arc::new(Row {
                key: b"a".as_slice().into(),
                seq: 1,
                kind: ValueKind::Value,
                value: b"x".as_slice().into(),
            }),
        );
        assert_eq!(rows.get(1, b"b"), None);
    }

    #[test]
    fn the_capacity_bounds_the_bytes_and_zero_turns_it_off() {
        let rows = RowCache::new(64 << 10);
        for i in 0..10_000u32 {
            rows.insert(1, &i.to_be_bytes(), 1, ValueKind::Value, &[0; 100]);
        }
        assert!(rows.usage() <= 64 << 10, "{}", rows.usage());
        rows.resize(0);
        assert!(!rows.on());
        assert_eq!(rows.usage(), 0);
        rows.resize(1 << 20);
        rows.insert(1, b"k", 1, ValueKind::Value, b"v");
        assert!(rows.get(1, b"k").is_some());
    }
}
