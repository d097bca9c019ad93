//! What a flush or compaction may drop.
//!
//! Entries arrive in internal-key order (per user key, newest first). The
//! live snapshots cut the sequence space into *stripes*: two versions of a
//! key in the same stripe look the same to every reader, so only the newest
//! is kept, with what a kept merge operand folds onto: below an operand
//! the next version of the stripe is kept too (a [`Fold`](super::fold::Fold)
//! ahead of the Dropper leaves such runs only where it cannot fold them). A tombstone in the oldest stripe (visible to every snapshot) is
//! dropped too when no deeper level can hold an older version of its key.
//! A version that a range tombstone of the [`Cover`] hides, with no
//! snapshot between the two, is dropped as well.

use crate::error::{corrupt, Result};
use crate::rangedel::Cover;
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
    /// The last entry judged was an operand kept in `last_stripe`: the
    /// next version of the stripe is what it folds onto.
    below_operand: bool,
    /// The range tombstones in force.
    cover: Cover,
    /// The oldest tombstone of `cover` hiding a kept entry (a snapshot
    /// needs the entry); `SeqNo::MAX` while there is none.
    kept_hidden_by: SeqNo,
    pub dropped: u64,
}

impl<F: FnMut(&[u8]) -> bool> Dropper<F> {
    /// Drops by `snapshots` (any order), `is_bottom_for` and the range
    /// tombstones of `cover`.
    pub fn new(mut snapshots: Vec<SeqNo>, is_bottom_for: F, cover: Cover) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        Dropper {
            snapshots,
            is_bottom_for,
            current_key: Vec::new(),
            has_current: false,
            last_stripe: 0,
            below_operand: false,
            cover,
            kept_hidden_by: SeqNo::MAX,
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
            if stripe == self.last_stripe && !self.below_operand {
                self.dropped += 1;
                return Ok(false);
            }
        } else {
            self.current_key.clear();
            self.current_key.extend_from_slice(p.user_key);
            self.has_current = true;
        }
        self.last_stripe = stripe;
        self.below_operand = false;
        if p.kind == ValueKind::Delete && stripe == 0 && (self.is_bottom_for)(p.user_key) {
            self.dropped += 1;
            return Ok(false);
        }
        if !self.cover.is_empty() {
            if let Some(t) = self.cover.oldest_above(p.user_key, p.seq) {
                if self.stripe(t) == stripe {
                    self.dropped += 1;
                    return Ok(false);
                }
                self.kept_hidden_by = self.kept_hidden_by.min(t);
            }
        }
        self.below_operand = p.kind == ValueKind::Merge;
        Ok(true)
    }

    /// What the outputs written from the kept entries may record as their
    /// `FileDesc::swept_seq`: no tombstone at or below it hides anything in
    /// them. That is the newest tombstone of the cover, but below the
    /// oldest one hiding a kept entry (the oldest tombstone above an entry
    /// is the first that may hide it). Valid once every entry was judged.
    pub fn swept(&self) -> SeqNo {
        self.cover
            .newest()
            .min(self.kept_hidden_by.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::internal_key;

    fn run(snaps: Vec<SeqNo>, bottom: bool, entries: &[(&[u8], SeqNo, ValueKind)]) -> Vec<SeqNo> {
        run_covered(snaps, bottom, Cover::none(), entries)
    }

    fn run_covered(
        snaps: Vec<SeqNo>,
        bottom: bool,
        cover: Cover,
        entries: &[(&[u8], SeqNo, ValueKind)],
    ) -> Vec<SeqNo> {
        let mut d = Dropper::new(snaps, |_| bottom, cover);
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
    fn an_operand_keeps_what_it_folds_onto() {
        let e: &[(&[u8], SeqNo, ValueKind)] = &[
            (b"a", 9, ValueKind::Merge),
            (b"a", 8, ValueKind::Merge),
            (b"a", 7, ValueKind::Value),
            (b"a", 5, ValueKind::Value),
            (b"b", 4, ValueKind::Merge),
            (b"b", 3, ValueKind::Delete),
            (b"b", 2, ValueKind::Value),
        ];
        assert_eq!(run(vec![], false, e), vec![9, 8, 7, 4, 3]);
        // At the bottom b's deletion goes, and with it what it shadowed.
        assert_eq!(run(vec![], true, e), vec![9, 8, 7, 4]);
        // A snapshot at 8 splits a's run: 9 folds onto 8 and below (the
        // snapshot's own view), 8 onto 7.
        assert_eq!(run(vec![8], false, e), vec![9, 8, 7, 4, 3]);
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

    #[test]
    fn range_tombstones_drop_what_no_snapshot_sees() {
        use crate::rangedel::{Fragments, RangeTombstone};
        let mut cover = Cover::none();
        cover.push(std::sync::Arc::new(Fragments::build(&[RangeTombstone {
            start: b"a".to_vec(),
            end: b"c".to_vec(),
            seq: 6,
        }])));
        let e: &[(&[u8], SeqNo, ValueKind)] = &[
            (b"a", 9, ValueKind::Value),
            (b"a", 4, ValueKind::Value),
            (b"b", 3, ValueKind::Value),
            (b"c", 2, ValueKind::Value),
        ];
        // a@9 is newer than the tombstone; c is outside it.
        assert_eq!(run_covered(vec![], false, cover.clone(), e), vec![9, 2]);
        // A snapshot at 5 still sees a@4 (the newest below it) and b@3.
        assert_eq!(run_covered(vec![5], false, cover, e), vec![9, 4, 3, 2]);
    }
}
