//! The update table: a bounded LRU from user key to the table holding the
//! key's newest on-disk version, with that version's sequence number.
//!
//! Sharded by key hash ([`SHARDS`] mutexes, each an LRU with its share of
//! the byte budget), so flushes, compactions and reads rarely meet on one
//! lock. Writes (flush inserts and re-points) refresh an entry's recency;
//! reads and compactions do not (the digest's decision 1).
//!
//! Invariant kept by the callers: an entry is only ever inserted or moved
//! forward by a flush whose table is durably installed, so `seq` is the
//! newest version of the key in any table, and a newer version anywhere
//! on disk means a higher `seq` here (or no entry: evicted, or never seen
//! since the last open).

use super::Entry;
use crate::types::SeqNo;
use lru::LruCache;
use parking_lot::Mutex;

/// Number of independently locked shards.
pub const SHARDS: usize = 16;

/// Bytes charged per entry besides the key: the 8 B table id and 8 B
/// sequence number, the boxed key's pointer and length, the LRU's two list
/// links and its hash-table slot.
pub const ENTRY_OVERHEAD: usize = 64;

fn cost(key: &[u8]) -> usize {
    key.len() + ENTRY_OVERHEAD
}

struct Shard {
    lru: LruCache<Box<[u8]>, Entry>,
    bytes: usize,
}

/// See the module doc.
pub struct UpdateTable {
    shards: Vec<Mutex<Shard>>,
    budget_per_shard: usize,
}

impl UpdateTable {
    /// An empty table of at most `bytes` (entry keys plus [`ENTRY_OVERHEAD`] each).
    pub fn new(bytes: usize) -> Self {
        UpdateTable {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        lru: LruCache::unbounded(),
                        bytes: 0,
                    })
                })
                .collect(),
            budget_per_shard: (bytes / SHARDS).max(1),
        }
    }

    fn shard(&self, key: &[u8]) -> &Mutex<Shard> {
        let h = xxhash_rust::xxh3::xxh3_64(key) as usize;
        &self.shards[h % SHARDS]
    }

    /// The entry of `key`, without refreshing its recency.
    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        self.shard(key).lock().lru.peek(key).copied()
    }

    /// A flush wrote version `seq` of `key` to `table`: insert the entry, or
    /// move it there if `seq` is newer than the one it names. Returns the
    /// table the entry moved away from (its version of `key` is now stale).
    pub fn upsert(&self, key: &[u8], table: u64, seq: SeqNo) -> Option<u64> {
        let mut s = self.shard(key).lock();
        if let Some(e) = s.lru.get_mut(key) {
            if seq <= e.seq {
                return None;
            }
            let old = e.table;
            *e = Entry { table, seq };
            return (old != table).then_some(old);
        }
        if cost(key) > self.budget_per_shard {
            // It would evict the whole shard, then itself.
            return None;
        }
        s.lru.put(key.into(), Entry { table, seq });
        s.bytes += cost(key);
        while s.bytes > self.budget_per_shard {
            match s.lru.pop_lru() {
                Some((k, _)) => s.bytes -= cost(&k),
                None => break,
            }
        }
        None
    }

    /// A compaction wrote version `seq` of `key` to `table`: if the entry
    /// still names that version, it now names `table`.
    pub fn repoint(&self, key: &[u8], seq: SeqNo, table: u64) {
        if let Some(e) = self.shard(key).lock().lru.peek_mut(key) {
            if e.seq == seq {
                e.table = table;
            }
        }
    }

    /// A compaction dropped version `seq` of `key` (a tombstone with nothing
    /// left below it): forget the entry if it names that version.
    pub fn erase(&self, key: &[u8], seq: SeqNo) {
        let mut s = self.shard(key).lock();
        if s.lru.peek(key).is_some_and(|e| e.seq == seq) {
            if let Some((k, _)) = s.lru.pop_entry(key) {
                s.bytes -= cost(&k);
            }
        }
    }

    /// Forgets `key`'s entry, whatever version it names (a flush wrote a
    /// merge operand of it: no one version is the whole of it now).
    pub fn forget(&self, key: &[u8]) {
        let mut s = self.shard(key).lock();
        if let Some((k, _)) = s.lru.pop_entry(key) {
            s.bytes -= cost(&k);
        }
    }

    /// Entries and bytes held.
    pub fn usage(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock();
            (n + s.lru.len() as u64, b + s.bytes as u64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upsert_moves_forward_only_and_reports_the_old_table() {
        let t = UpdateTable::new(1 << 20);
        assert_eq!(t.upsert(b"k", 5, 10), None);
        assert_eq!(t.get(b"k"), Some(Entry { table: 5, seq: 10 }));
        // An older or equal version never moves the entry back.
        assert_eq!(t.upsert(b"k", 3, 9), None);
        assert_eq!(t.upsert(b"k", 3, 10), None);
        assert_eq!(t.get(b"k"), Some(Entry { table: 5, seq: 10 }));
        assert_eq!(t.upsert(b"k", 7, 12), Some(5));
        assert_eq!(t.get(b"k"), Some(Entry { table: 7, seq: 12 }));
    }

    #[test]
    fn repoint_and_erase_need_the_same_version() {
        let t = UpdateTable::new(1 << 20);
        t.upsert(b"k", 5, 10);
        t.repoint(b"k", 9, 8);
        assert_eq!(t.get(b"k"), Some(Entry { table: 5, seq: 10 }));
        t.repoint(b"k", 10, 8);
        assert_eq!(t.get(b"k"), Some(Entry { table: 8, seq: 10 }));
        t.erase(b"k", 9);
        assert!(t.get(b"k").is_some());
        t.erase(b"k", 10);
        assert_eq!(t.get(b"k"), None);
        assert_eq!(t.usage(), (0, 0));
    }

    #[test]
    fn a_key_larger_than_a_shard_is_not_tracked() {
        let t = UpdateTable::new(SHARDS * 200);
        t.upsert(b"small", 1, 1);
        let big = vec![7u8; 300];
        assert_eq!(t.upsert(&big, 1, 2), None);
        assert_eq!(t.get(&big), None);
        assert!(t.get(b"small").is_some());
    }

    #[test]
    fn the_byte_budget_evicts_the_least_recently_written() {
        let budget = SHARDS * 10 * (ENTRY_OVERHEAD + 8);
        let t = UpdateTable::new(budget);
        for i in 0..10_000u64 {
            t.upsert(&i.to_be_bytes(), 1, i + 1);
        }
        let (n, bytes) = t.usage();
        assert!(bytes as usize <= budget, "{bytes} > {budget}");
        assert!((100..=160).contains(&n), "{n} entries");
        // The newest keys stay, the oldest went.
        assert!(t.get(&9_999u64.to_be_bytes()).is_some());
        assert!(t.get(&0u64.to_be_bytes()).is_none());
    }
}
