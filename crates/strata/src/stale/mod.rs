//! Active compaction's bookkeeping (`docs/ARCHITECTURE.md`,
//! "Active compaction"): where each key's newest on-disk version lives,
//! and how many stale versions each table holds.
//!
//! The engine talks to a [`Tracker`] chosen once at open: [`NoTracking`]
//! for the leveled picker (every call does nothing), [`StaleTracker`] for
//! the stale picker. Flush and compaction feed it after their version edit
//! is durable and before readers see the new version; the picker reads its
//! scores; compaction asks it which versions are stale; reads ask it for a
//! shortcut.
//!
//! Safety rests on sequence numbers, not table ids: a version of a key is
//! stale when the update table names a *newer* version (higher sequence)
//! that every reader sees. Table ids only steer the read shortcut, which
//! checks them against the reader's own version and falls back to the
//! normal path on any mismatch.
//!
//! Both tables live in memory only; they start empty at open, and a key
//! without an entry is simply kept, so a restart is always safe.

pub mod update_table;

use crate::types::SeqNo;
use parking_lot::Mutex;
use std::collections::HashMap;
pub use update_table::UpdateTable;

/// The update table's record of a key: the table holding its newest
/// on-disk version, and that version's sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub table: u64,
    pub seq: SeqNo,
}

/// What a compaction tells the tracker once its edit is durable.
#[derive(Debug, Default, Clone)]
pub struct CompactionChange {
    /// Input tables, gone from the version (their scores go).
    pub removed: Vec<u64>,
    /// (user key, sequence, output table): versions the update table names
    /// that the compaction wrote to a new table.
    pub repointed: Vec<(Vec<u8>, SeqNo, u64)>,
    /// (user key, sequence): versions the update table names that the
    /// compaction dropped (bottom-level tombstones).
    pub erased: Vec<(Vec<u8>, SeqNo)>,
}

/// Update-table figures for `stats`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub entries: u64,
    pub bytes: u64,
}

/// The engine's view of stale-version tracking. Implementations must be
/// cheap when they track nothing: every get and compaction entry calls in.
pub trait Tracker: Send + Sync {
    /// True if flushes and compactions should report their keys.
    fn tracks(&self) -> bool {
        false
    }
    /// The update table's entry for `user_key`.
    fn newest(&self, _user_key: &[u8]) -> Option<Entry> {
        None
    }
    /// A flush durably installed `table` holding `keys` (distinct user keys
    /// in order) whose newest versions have sequence numbers `seqs` (0: a
    /// merge operand, `runs::output::tracked_seq`).
    fn on_flush(&self, _table: u64, _keys: &[Vec<u8>], _seqs: &[SeqNo]) {}
    /// A compaction's edit is durable.
    fn on_compaction(&self, _change: &CompactionChange) {}
    /// Stale-version count per table (tables with none are absent).
    fn scores(&self) -> HashMap<u64, u64> {
        HashMap::new()
    }
    /// Forgets the scores of tables for which `live` is false.
    fn retain_scores(&self, _live: &dyn Fn(u64) -> bool) {}
    fn usage(&self) -> Usage {
        Usage::default()
    }
}

/// The leveled picker's tracker: tracks nothing.
pub struct NoTracking;

impl Tracker for NoTracking {}

/// The update table and the stale score table of the paper.
pub struct StaleTracker {
    updates: UpdateTable,
    scores: Mutex<HashMap<u64, u64>>,
}

impl StaleTracker {
    /// A tracker whose update table holds at most `update_table_bytes`.
    pub fn new(update_table_bytes: usize) -> Self {
        StaleTracker {
            updates: UpdateTable::new(update_table_bytes),
            scores: Mutex::new(HashMap::new()),
        }
    }
}

impl Tracker for StaleTracker {
    fn tracks(&self) -> bool {
        true
    }

    fn newest(&self, user_key: &[u8]) -> Option<Entry> {
        self.updates.get(user_key)
    }

    fn on_flush(&self, table: u64, keys: &[Vec<u8>], seqs: &[SeqNo]) {
        let mut stale: HashMap<u64, u64> = HashMap::new();
        for (key, seq) in keys.iter().zip(seqs) {
            if *seq == 0 {
                // An operand needs the versions below it: none is stale.
                self.updates.forget(key);
                continue;
            }
            if let Some(old) = self.updates.upsert(key, table, *seq) {
                *stale.entry(old).or_default() += 1;
            }
        }
        let mut scores = self.scores.lock();
        for (t, n) in stale {
            *scores.entry(t).or_default() += n;
        }
    }

    fn on_compaction(&self, change: &CompactionChange) {
        for (key, seq, table) in &change.repointed {
            self.updates.repoint(key, *seq, *table);
        }
        for (key, seq) in &change.erased {
            self.updates.erase(key, *seq);
        }
        let mut scores = self.scores.lock();
        for id in &change.removed {
            scores.remove(id);
        }
    }

    fn scores(&self) -> HashMap<u64, u64> {
        self.scores.lock().clone()
    }

    fn retain_scores(&self, live: &dyn Fn(u64) -> bool) {
        self.scores.lock().retain(|id, _| live(*id));
    }

    fn usage(&self) -> Usage {
        let (entries, bytes) = self.updates.usage();
        Usage { entries, bytes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flush_moving_an_entry_scores_the_old_table() {
        let t = StaleTracker::new(1 << 20);
        let keys = |ks: &[&str]| ks.iter().map(|k| k.as_bytes().to_vec()).collect::<Vec<_>>();
        t.on_flush(10, &keys(&["a", "b", "c"]), &[1, 2, 3]);
        assert!(t.scores().is_empty());
        t.on_flush(11, &keys(&["a", "c", "d"]), &[4, 5, 6]);
        assert_eq!(t.scores().get(&10), Some(&2));
        assert_eq!(t.newest(b"a"), Some(Entry { table: 11, seq: 4 }));
        assert_eq!(t.newest(b"b"), Some(Entry { table: 10, seq: 2 }));
        // Table 11 compacted into 20 (a kept, d dropped as a bottom tombstone).
        t.on_compaction(&CompactionChange {
            removed: vec![11, 10],
            repointed: vec![(b"a".to_vec(), 4, 20)],
            erased: vec![(b"d".to_vec(), 6)],
        });
        assert_eq!(t.newest(b"a"), Some(Entry { table: 20, seq: 4 }));
        assert_eq!(t.newest(b"d"), None);
        assert!(t.scores().is_empty());
        let u = t.usage();
        assert_eq!(u.entries, 3);
        // A merge operand of b: the value it names is no longer all of b.
        t.on_flush(21, &keys(&["b"]), &[0]);
        assert_eq!(t.newest(b"b"), None);
        assert_eq!(t.usage().entries, 2);
    }
}
