//! Folding merge operands in a flush or compaction.
//!
//! Entries arrive in internal-key order (per user key, newest first). The
//! live snapshots cut the sequence space into stripes, as for the
//! [`Dropper`](super::filter::Dropper): every reader of a stripe sees the
//! same versions of it. A run of operands at the top of a key's stripe is
//! what that stripe's reader folds, down to the first version below them
//! in the stripe. [`Fold`] does that fold once, for every later reader:
//!
//! - operands over a value in the same stripe become one value (the
//!   value is consumed);
//! - operands over a deletion, or over a version a range tombstone of the
//!   stripe hides, become one value folded onto nothing (the version below
//!   is passed on; the Dropper drops it as shadowed);
//! - operands that end the key's entries in the input, where no older
//!   version of the key exists outside it (`is_bottom_for`), become one
//!   value folded onto nothing;
//! - otherwise (the run ends at a snapshot, or older tables may hold the
//!   key) the operands are combined by `partial_merge` into one operand,
//!   or passed on as they are where the operator cannot combine them.
//!
//! The folded entry takes the sequence number of the newest operand, so
//! each reader finds the same value it would have folded itself. A fold
//! the operator refuses passes the operands on unchanged: reads then
//! report the error.
//!
//! The other [`Rules`] run here too. Before the fold, a version at or
//! below the expiry horizon becomes a deletion at its sequence (every
//! reader, at any snapshot, already sees it as one). After it, the user's
//! compaction filter passes over what the fold passes on ([`Sift`]).

use super::rules::{self, Rules, Sift, Tally};
use crate::error::{corrupt, Result};
use crate::merge::MergeOperator;
use crate::rangedel::Cover;
use crate::types::{self, SeqNo, ValueKind};
use std::sync::Arc;

pub use super::rules::Sink;

/// The operand folding of one flush or compaction; see the module doc.
pub struct Fold<F: FnMut(&[u8]) -> bool> {
    /// True if the rules change nothing: every entry is passed on as it is.
    plain: bool,
    /// `None`: operands are passed on as they are.
    op: Option<Arc<dyn MergeOperator>>,
    /// Versions at or below this have expired (0: none).
    expired_to: SeqNo,
    /// An expired entry's key rewritten as a deletion.
    expired_key: Vec<u8>,
    sift: Sift,
    /// Live snapshot sequence numbers, ascending.
    snapshots: Vec<SeqNo>,
    /// True if no table outside the input holds `user_key`.
    is_bottom_for: F,
    cover: Cover,
    /// The user key of the pending run (while `operands` is not empty).
    key: Vec<u8>,
    stripe: usize,
    /// The pending run: (sequence, operand), newest first.
    operands: Vec<(SeqNo, Vec<u8>)>,
    ikey: Vec<u8>,
    /// The last entry passed on or made was a whole version (a value or a
    /// deletion) of `shadow_key` in `shadow_stripe`: what follows in that
    /// stripe is shadowed (the Dropper drops it), so no run starts there.
    shadowing: bool,
    shadow_key: Vec<u8>,
    shadow_stripe: usize,
    /// What the rules did.
    pub tally: Tally,
}

impl<F: FnMut(&[u8]) -> bool> Fold<F> {
    /// The stage of `rules` (plain rules: a pass-through) under
    /// `snapshots` (any order), `is_bottom_for` and the range tombstones
    /// of `cover`.
    pub fn new(rules: &Rules, mut snapshots: Vec<SeqNo>, is_bottom_for: F, cover: Cover) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        Fold {
            plain: rules.is_plain(),
            op: rules.merge.clone(),
            expired_to: rules.expired_to,
            expired_key: Vec::new(),
            sift: Sift::new(rules.filter.clone(), &snapshots),
            snapshots,
            is_bottom_for,
            cover,
            key: Vec::new(),
            stripe: 0,
            operands: Vec::new(),
            ikey: Vec::new(),
            shadowing: false,
            shadow_key: Vec::new(),
            shadow_stripe: 0,
            tally: Tally::default(),
        }
    }

    fn stripe(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|s| *s < seq)
    }

    /// True if the reader of `seq`'s stripe sees a range tombstone hiding
    /// the version of `key` at `seq`.
    fn hidden(&self, key: &[u8], seq: SeqNo) -> bool {
        !self.cover.is_empty()
            && self
                .cover
                .oldest_above(key, seq)
                .is_some_and(|t| self.stripe(t) == self.stripe(seq))
    }

    /// Takes the entry `(ikey, value)`: passes it to `sink`, or holds it
    /// in a run of operands, or folds it into the run it ends.
    #[inline]
    pub fn push(&mut self, ikey: &[u8], value: &[u8], sink: &mut Sink<'_>) -> Result<()> {
        if self.plain {
            return sink(ikey, value);
        }
        if self.expired_to != 0 {
            let mut key = std::mem::take(&mut self.expired_key);
            let r = if rules::expire_into(ikey, self.expired_to, &mut key)? {
                self.tally.expired += 1;
                self.fold(&key, &[], sink)
            } else {
                self.fold(ikey, value, sink)
            };
            self.expired_key = key;
            return r;
        }
        self.fold(ikey, value, sink)
    }

    /// [`Fold::push`] after expiry.
    fn fold(&mut self, ikey: &[u8], value: &[u8], sink: &mut Sink<'_>) -> Result<()> {
        if self.op.is_none() {
            return self.sift.pass(ikey, value, &mut self.tally, sink);
        }
        let p = types::parse_internal_key(ikey)
            .ok_or_else(|| corrupt(0, "malformed internal key in compaction input"))?;
        if !self.operands.is_empty() {
            let same_key = p.user_key == self.key.as_slice();
            if same_key && self.stripe(p.seq) == self.stripe {
                if self.hidden(p.user_key, p.seq) || p.kind == ValueKind::Delete {
                    // Below the run the stripe's reader sees nothing.
                    self.emit_full(None, sink)?;
                    return self.sift.pass(ikey, value, &mut self.tally, sink);
                }
                match p.kind {
                    ValueKind::Merge => {
                        self.operands.push((p.seq, value.to_vec()));
                        return Ok(());
                    }
                    ValueKind::Value => {
                        if self.emit_full(Some(value), sink)? {
                            self.tally.folded += 1;
                            return Ok(());
                        }
                        // Refused: the value stays below the operands.
                        return self.sift.pass(ikey, value, &mut self.tally, sink);
                    }
                    ValueKind::Delete | ValueKind::RangeDelete => {
                        return Err(corrupt(0, "range tombstone in compaction input"))
                    }
                }
            }
            self.end_run(!same_key, sink)?;
        }
        let stripe = self.stripe(p.seq);
        let shadowed = self.shadowing
            && stripe == self.shadow_stripe
            && p.user_key == self.shadow_key.as_slice();
        if p.kind == ValueKind::Merge && !shadowed && !self.hidden(p.user_key, p.seq) {
            self.key.clear();
            self.key.extend_from_slice(p.user_key);
            self.stripe = stripe;
            self.operands.push((p.seq, value.to_vec()));
            return Ok(());
        }
        if !shadowed {
            self.shadow(p.user_key, stripe, p.kind != ValueKind::Merge);
        }
        self.sift.pass(ikey, value, &mut self.tally, sink)
    }

    /// Records what was passed on last (see `shadowing`).
    fn shadow(&mut self, key: &[u8], stripe: usize, whole: bool) {
        self.shadowing = whole;
        if whole {
            self.shadow_key.clear();
            self.shadow_key.extend_from_slice(key);
            self.shadow_stripe = stripe;
        }
    }

    /// Passes on the pending run, if any; the input ended.
    pub fn finish(&mut self, sink: &mut Sink<'_>) -> Result<()> {
        if self.operands.is_empty() {
            return Ok(());
        }
        self.end_run(true, sink)
    }

    /// The run ended with no version below it in its stripe; `last`: no
    /// older entry of its key follows in the input.
    fn end_run(&mut self, last: bool, sink: &mut Sink<'_>) -> Result<()> {
        if last && (self.is_bottom_for)(&self.key) {
            return self.emit_full(None, sink).map(drop);
        }
        // Combine oldest first.
        let combined = self.op.as_ref().and_then(|op| {
            let mut it = self.operands.iter().rev();
            let mut acc = it.next().map(|(_, v)| v.clone());
            for (_, newer) in it {
                acc = acc.and_then(|a| op.partial_merge(&self.key, &a, newer));
            }
            acc
        });
        self.shadowing = false;
        let mut run = std::mem::take(&mut self.operands);
        let result = match combined {
            Some(v) if run.len() > 1 => {
                self.tally.folded += run.len() as u64 - 1;
                self.emit(run[0].0, ValueKind::Merge, &v, sink)
            }
            _ => run
                .iter()
                .try_for_each(|(seq, v)| self.emit(*seq, ValueKind::Merge, v, sink)),
        };
        run.clear();
        self.operands = run;
        result
    }

    /// Folds the pending run onto `base` into one value and passes it on;
    /// false if the operator refused (the run is passed on unchanged).
    fn emit_full(&mut self, base: Option<&[u8]>, sink: &mut Sink<'_>) -> Result<bool> {
        let mut run = std::mem::take(&mut self.operands);
        let ops: Vec<&[u8]> = run.iter().rev().map(|(_, v)| v.as_slice()).collect();
        let folded = match &self.op {
            Some(op) => op.full_merge(&self.key, base, &ops),
            None => Err(crate::merge::MergeError(String::new())),
        };
        let result = match &folded {
            Ok(v) => {
                self.tally.folded += run.len() as u64 - 1;
                let key = std::mem::take(&mut self.key);
                self.shadow(&key, self.stripe, true);
                self.key = key;
                self.emit(run[0].0, ValueKind::Value, v, sink)
            }
            Err(_) => {
                self.shadowing = false;
                run.iter()
                    .try_for_each(|(seq, v)| self.emit(*seq, ValueKind::Merge, v, sink))
            }
        };
        run.clear();
        self.operands = run;
        result.map(|()| folded.is_ok())
    }

    fn emit(
        &mut self,
        seq: SeqNo,
        kind: ValueKind,
        value: &[u8],
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        self.ikey.clear();
        types::append_internal_key(&mut self.ikey, &self.key, seq, kind as u8);
        let ikey = std::mem::take(&mut self.ikey);
        let r = self.sift.pass(&ikey, value, &mut self.tally, sink);
        self.ikey = ikey;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::{Append, U64Add};
    use crate::rangedel::{Fragments, RangeTombstone};

    type Entry = (&'static [u8], SeqNo, ValueKind, Vec<u8>);
    type Out = (Vec<u8>, SeqNo, ValueKind, Vec<u8>);

    /// What a fold by `op` passes on for `entries`, as (key, seq, kind,
    /// value), and how many operands it folded away.
    fn fold(
        op: Option<Arc<dyn MergeOperator>>,
        snaps: Vec<SeqNo>,
        bottom: bool,
        cover: Cover,
        entries: &[Entry],
    ) -> (Vec<Out>, u64) {
        let rules = Rules {
            merge: op,
            ..Rules::default()
        };
        let mut f = Fold::new(&rules, snaps, |_| bottom, cover);
        let mut out = Vec::new();
        let mut sink = |k: &[u8], v: &[u8]| -> Result<()> {
            let p = types::parse_internal_key(k).expect("key");
            out.push((p.user_key.to_vec(), p.seq, p.kind, v.to_vec()));
            Ok(())
        };
        for (k, seq, kind, v) in entries {
            let ikey = types::internal_key(k, *seq, *kind as u8);
            f.push(&ikey, v, &mut sink).expect("push");
        }
        f.finish(&mut sink).expect("finish");
        (out, f.tally.folded)
    }

    fn app() -> Option<Arc<dyn MergeOperator>> {
        Some(Arc::new(Append::new("|")))
    }

    fn m(k: &'static [u8], seq: SeqNo, v: &str) -> Entry {
        (k, seq, ValueKind::Merge, v.as_bytes().to_vec())
    }

    fn v(k: &'static [u8], seq: SeqNo, v: &str) -> Entry {
        (k, seq, ValueKind::Value, v.as_bytes().to_vec())
    }

    fn out(k: &[u8], seq: SeqNo, kind: ValueKind, v: &str) -> Out {
        (k.to_vec(), seq, kind, v.as_bytes().to_vec())
    }

    #[test]
    fn operands_over_a_value_become_one_value() {
        let e = [
            m(b"a", 9, "c"),
            m(b"a", 8, "b"),
            v(b"a", 7, "x"),
            v(b"a", 5, "old"),
        ];
        let (got, folded) = fold(app(), vec![], false, Cover::none(), &e);
        // The older value is passed on (the Dropper drops it).
        assert_eq!(
            got,
            vec![
                out(b"a", 9, ValueKind::Value, "x|b|c"),
                out(b"a", 5, ValueKind::Value, "old")
            ]
        );
        assert_eq!(folded, 2);
    }

    #[test]
    fn a_snapshot_splits_the_run() {
        let e = [
            m(b"a", 9, "d"),
            m(b"a", 8, "c"),
            m(b"a", 6, "b"),
            v(b"a", 5, "x"),
            m(b"b", 3, "z"),
        ];
        // Snapshot 7: 9 and 8 combine into one operand; 6 folds onto 5.
        let (got, folded) = fold(app(), vec![7], false, Cover::none(), &e);
        assert_eq!(
            got,
            vec![
                out(b"a", 9, ValueKind::Merge, "c|d"),
                out(b"a", 6, ValueKind::Value, "x|b"),
                out(b"b", 3, ValueKind::Merge, "z"),
            ]
        );
        assert_eq!(folded, 2);
        // At the bottom, b's lone operand becomes a value.
        let (got, _) = fold(app(), vec![7], true, Cover::none(), &e);
        assert_eq!(got[2], out(b"b", 3, ValueKind::Value, "z"));
        // An operator that cannot combine leaves the run as it is.
        let (got, _) = fold(Some(Arc::new(NoPartial)), vec![7], false, Cover::none(), &e);
        assert_eq!(got[0].1, 9);
        assert_eq!(got[1], out(b"a", 8, ValueKind::Merge, "c"));
    }

    #[test]
    fn a_deletion_or_a_hiding_tombstone_ends_the_run_with_nothing() {
        let e = [
            m(b"a", 9, "c"),
            (b"a".as_slice(), 8, ValueKind::Delete, vec![]),
            v(b"a", 5, "x"),
        ];
        let (got, _) = fold(app(), vec![], false, Cover::none(), &e);
        assert_eq!(got[0], out(b"a", 9, ValueKind::Value, "c"));
        assert_eq!(got[1].2, ValueKind::Delete);
        let mut cover = Cover::none();
        cover.push(Arc::new(Fragments::build(&[RangeTombstone {
            start: b"a".to_vec(),
            end: b"b".to_vec(),
            seq: 7,
        }])));
        let e = [m(b"a", 9, "c"), m(b"a", 6, "b"), v(b"a", 5, "x")];
        let (got, _) = fold(app(), vec![], false, cover.clone(), &e);
        assert_eq!(got[0], out(b"a", 9, ValueKind::Value, "c"));
        assert_eq!(got[1], out(b"a", 6, ValueKind::Merge, "b"));
        // A snapshot at 6 does not see the tombstone: for it, 6 folds onto 5.
        let (got, _) = fold(app(), vec![6], false, cover, &e);
        assert_eq!(got[0], out(b"a", 9, ValueKind::Merge, "c"));
        assert_eq!(got[1], out(b"a", 6, ValueKind::Value, "x|b"));
    }

    #[test]
    fn operands_below_a_whole_version_are_not_folded() {
        // 7 is shadowed by 8 (same stripe): passed on as it is, for the
        // Dropper to drop; with a snapshot at 7 it is folded onto 5.
        let e = [v(b"a", 8, "x"), m(b"a", 7, "b"), v(b"a", 5, "y")];
        let (got, folded) = fold(app(), vec![], false, Cover::none(), &e);
        assert_eq!(got[1], out(b"a", 7, ValueKind::Merge, "b"));
        assert_eq!(folded, 0);
        let (got, _) = fold(app(), vec![7], false, Cover::none(), &e);
        assert_eq!(got[1], out(b"a", 7, ValueKind::Value, "y|b"));
    }

    #[test]
    fn a_refused_fold_passes_everything_on() {
        let e = [m(b"a", 9, "12345678"), v(b"a", 7, "bad")];
        let (got, folded) = fold(Some(Arc::new(U64Add)), vec![], true, Cover::none(), &e);
        assert_eq!(
            got,
            vec![
                out(b"a", 9, ValueKind::Merge, "12345678"),
                out(b"a", 7, ValueKind::Value, "bad")
            ]
        );
        assert_eq!(folded, 0);
        let (got, _) = fold(None, vec![], true, Cover::none(), &e);
        assert_eq!(got.len(), 2);
    }

    /// Appends, without partial merges.
    struct NoPartial;

    impl MergeOperator for NoPartial {
        fn name(&self) -> &str {
            "no-partial"
        }
        fn full_merge(
            &self,
            key: &[u8],
            base: Option<&[u8]>,
            operands: &[&[u8]],
        ) -> std::result::Result<Vec<u8>, crate::merge::MergeError> {
            Append::new("|").full_merge(key, base, operands)
        }
    }
}
