//! What a flush or compaction may drop.
//!
//! Entries arrive in internal-key order (per user key, newest first). The
//! live snapshots cut the sequence space into *stripes*: two versions of a
//! key in the same stripe look the same to every reader, so only the newest
//! is kept. A tombstone in the oldest stripe (visible to every snapshot) is
//! dropped too when no deeper level can hold an older version of its key.

use crate::error::{corrupt, Result};
use crate::types::{self, SeqNo, ValueKind};

/// The per-entry keep/drop decision; see the module doc.
pub struct Dropper<F: FnMut(&[u8]) -> bool> {
    /// Live snapshot sequence numbers, ascending.
    snapshots: Vec<SeqNo>,
    /// True if no level below the output holds `user_key`.
    is_bottom_for: F,
    current_key: Vec<u8>,
    has_current: bool,
    last_stripe: usize,
    pub dropped: u64,
}

impl<F: FnMut(&[u8]) -> bool> Dropper<F> {
    pub fn new(mut snapshots: Vec<SeqNo>, is_bottom_for: F) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        Dropper {
            snapshots,
            is_bottom_for,
            current_key: Vec::new(),
            has_current: false,
            last_stripe: 0,
            dropped: 0,
        }
    }

    fn stripe(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|s| *s < seq)
    }

    /// Decides whether the entry with internal key `ikey` is written out.
    pub fn keep(&mut self, ikey: &[u8]) -> Result<bool> {
        let p = types::parse_internal_key(ikey)
            .ok_or_else(|| corrupt(0, "malformed internal key in compaction input"))?;
        let stripe = self.stripe(p.seq);
        if self.has_current && p.user_key == self.current_key.as_slice() {
            if stripe == self.last_stripe {
                self.dropped += 1;
                return Ok(false);
            }
        } else {
            self.current_key.clear();
            self.current_key.extend_from_slice(p.user_key);
            self.has_current = true;
        }
        self.last_stripe = stripe;
        if p.kind == ValueKind::Delete && stripe == 0 && (self.is_bottom_for)(p.user_key) {
            self.dropped += 1;
            return Ok(false);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::internal_key;

    fn run(snaps: Vec<SeqNo>, bottom: bool, entries: &[(&[u8], SeqNo, ValueKind)]) -> Vec<SeqNo> {
        let mut d = Dropper::new(snaps, |_| bottom);
        entries
            .iter()
            .filter(|(k, s, kind)| d.keep(&internal_key(k, *s, *kind as u8)).unwrap_or(true))
            .map(|e| e.1)
            .collect()
    }

    #[test]
    fn keeps_newest_per_stripe() {
        let e: &[(&[u8], SeqNo, ValueKind)] = &[
            (b"a", 9, ValueKind::Value),
            (b"a", 7, ValueKind::Value),
            (b"a", 5, ValueKind::Value),
            (b"a", 2, ValueKind::Value),
            (b"b", 3, ValueKind::Value),
        ];
        assert_eq!(run(vec![], false, e), vec![9, 3]);
        // Snapshot 6 sees a@5; snapshot 2 sees a@2.
        assert_eq!(run(vec![6, 2], false, e), vec![9, 5, 2, 3]);
    }

    #[test]
    fn tombstones_drop_only_at_bottom_and_below_all_snapshots() {
        let e: &[(&[u8], SeqNo, ValueKind)] =
            &[(b"a", 8, ValueKind::Delete), (b"a", 4, ValueKind::Value)];
        assert_eq!(run(vec![], false, e), vec![8]);
        assert_eq!(run(vec![], true, e), Vec::<SeqNo>::new());
        // A snapshot at 5 still needs a@4, and the tombstone above it.
        assert_eq!(run(vec![5], true, e), vec![8, 4]);
    }
}
