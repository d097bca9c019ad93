//! The user-facing iterator: user keys at one snapshot, newest visible
//! version only, tombstones hidden (point tombstones, and versions a
//! visible range tombstone of its [`Cover`] hides), merge operands folded
//! onto the version below them, both directions.
//!
//! Forward, the inner iterator sits on the entry that yields the current
//! value, and `saved_key` holds its user key; for a folded value
//! (`folded`), the inner iterator is after the operands it read, with the
//! key and value kept in `saved_*`. Reverse, the inner iterator
//! sits *before* all entries of the current user key, whose key and value
//! are kept in `saved_*`.
//!
//! Errors: once the merged source fails (a damaged block, an I/O error) or
//! a fold fails (no operator, or the operator refused), the iterator is
//! invalid and `status()` returns the error; every later call leaves it so.
//! It never yields an older version because a newer one could not be read.

use super::merge::MergeIter;
use super::InternalIterator;
use crate::error::{Error, Result};
use crate::merge::MergeOperator;
use crate::rangedel::Cover;
use crate::types::{self, SeqNo, ValueKind};
use std::any::Any;
use std::ops::Bound;
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// An ordered, bidirectional cursor over the database at one snapshot.
///
/// Usage: position with `seek*`, then read `key()`/`value()` while `valid()`,
/// moving with `next()`/`prev()`; check `status()` when it becomes invalid.
/// The view does not change while it is open, whatever compactions run.
pub struct DbIter {
    /// The merge of the view's sources, held directly so that the calls a
    /// step makes on it are static.
    inner: MergeIter,
    seq: SeqNo,
    /// Versions at or below this have expired: they read as deletions.
    expired_to: SeqNo,
    /// The range tombstones of the view.
    cover: Cover,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    /// The merge operator (`None`: an operand fails the iterator).
    op: Option<Arc<dyn MergeOperator>>,
    /// Forward, positioned on a folded value held in `saved_*`; the inner
    /// iterator is past the operands.
    folded: bool,
    /// Operands of the key being collected (newest first forward, oldest
    /// first reverse).
    operands: Vec<Vec<u8>>,
    /// The first fold that failed; sticky.
    error: Option<Error>,
    /// Keys outside these bounds are never read as entries (a scan's
    /// range): forward stops past `hi`, reverse before `lo`.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    // Keeps memtables and table files of the view alive.
    _pin: Arc<dyn Any + Send + Sync>,
    /// Told the user key of every `seek` (read-triggered compaction's
    /// sample of where iterators land).
    on_seek: Option<SeekSampler>,
}

/// A callback told the target of each [`DbIter::seek`].
pub type SeekSampler = Arc<dyn Fn(&[u8]) + Send + Sync>;

impl DbIter {
    /// A cursor over `inner` at `seq`, hiding what `cover`'s tombstones
    /// delete; `pin` keeps the view's sources alive.
    pub(crate) fn new(
        inner: MergeIter,
        seq: SeqNo,
        cover: Cover,
        op: Option<Arc<dyn MergeOperator>>,
        pin: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        DbIter {
            inner,
            seq,
            expired_to: 0,
            cover,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            op,
            folded: false,
            operands: Vec::new(),
            error: None,
            lo: Bound::Unbounded,
            hi: Bound::Unbounded,
            _pin: pin,
            on_seek: None,
        }
    }

    /// Keeps the cursor within `[lo, hi]` (each bound as given): entries of
    /// keys outside are skipped or end the walk, so a key past the range
    /// is never folded. Positioning stays the caller's.
    pub(crate) fn bounded(mut self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Self {
        self.lo = lo;
        self.hi = hi;
        self
    }

    #[inline]
    fn below_hi(&self, k: &[u8]) -> bool {
        match &self.hi {
            Bound::Unbounded => true,
            Bound::Included(h) => k <= h.as_slice(),
            Bound::Excluded(h) => k < h.as_slice(),
        }
    }

    #[inline]
    fn above_lo(&self, k: &[u8]) -> bool {
        match &self.lo {
            Bound::Unbounded => true,
            Bound::Included(l) => k >= l.as_slice(),
            Bound::Excluded(l) => k > l.as_slice(),
        }
    }

    /// Reads every version at or below `expired_to` as a deletion (time
    /// to live).
    pub(crate) fn expiring(mut self, expired_to: SeqNo) -> Self {
        self.expired_to = expired_to;
        self
    }

    /// Calls `sampler` with the target of every `seek`.
    pub(crate) fn sample_seeks(mut self, sampler: SeekSampler) -> Self {
        self.on_seek = Some(sampler);
        self
    }

    /// Tells the sources that the walk forward from a seek returns at most
    /// `entries` keys ([`InternalIterator::scan_hint`]). A source gives
    /// more entries than that where the walk steps over versions,
    /// deletions (its own or a newer source's) or expired entries; a table
    /// cursor that passes its hint's span reads on as an unhinted one.
    pub(crate) fn scan_hint(&mut self, entries: usize) {
        self.inner.scan_hint(entries);
    }

    /// True while positioned on a key (never once an error was met).
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key (empty when not valid).
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        &self.saved_key
    }

    /// The current value (empty when not valid).
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward if !self.folded => self.inner.value(),
            _ => &self.saved_value,
        }
    }

    /// The first error met (I/O, corruption, a failed merge); an iterator
    /// that met one is invalid.
    pub fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => self.inner.status(),
        }
    }

    /// Moves to the first key.
    pub fn seek_to_first(&mut self) {
        self.direction = Direction::Forward;
        self.folded = false;
        self.inner.seek_to_first();
        self.find_next_user_entry(false);
    }

    /// Moves to the last key.
    pub fn seek_to_last(&mut self) {
        self.direction = Direction::Reverse;
        self.folded = false;
        self.inner.seek_to_last();
        self.find_prev_user_entry();
    }

    /// Moves to the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.direction = Direction::Forward;
        self.folded = false;
        self.saved_value.clear();
        if let Some(f) = &self.on_seek {
            f(target);
        }
        let k = types::seek_key(target, self.seq);
        self.inner.seek(&k);
        self.find_next_user_entry(false);
    }

    /// Moves to the last key `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.direction = Direction::Reverse;
        self.folded = false;
        // (target, 0, Delete) is the last possible internal key of `target`.
        let k = types::internal_key(target, 0, ValueKind::Delete as u8);
        self.inner.seek_for_prev(&k);
        self.find_prev_user_entry();
    }

    /// Moves to the next key; requires `valid()`.
    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The inner iterator is just before the entries of key(): step
            // into them; `saved_key` already holds the key to skip past.
            if self.inner.valid() {
                self.inner.next();
            } else {
                self.inner.seek_to_first();
            }
            if !self.inner.valid() {
                self.invalidate();
                return;
            }
        } else if self.folded {
            // The inner iterator is past the operands already; `saved_key`
            // holds the key to skip past.
            self.folded = false;
            if !self.inner.valid() {
                self.invalidate();
                return;
            }
        } else {
            // `saved_key` holds the current key, the one to skip past.
            self.inner.next();
            if !self.inner.valid() {
                self.invalidate();
                return;
            }
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous key; requires `valid()`.
    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            // Walk back past every entry of the current user key (a folded
            // value left the inner iterator after some of them, or past the
            // end).
            // `saved_key` holds the current key (folded or not).
            let mut from_end = self.folded && !self.inner.valid();
            self.folded = false;
            loop {
                if from_end {
                    from_end = false;
                    self.inner.seek_to_last();
                } else {
                    self.inner.prev();
                }
                if !self.inner.valid() {
                    self.invalidate();
                    return;
                }
                if types::user_key(self.inner.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }

    fn invalidate(&mut self) {
        self.valid = false;
        self.folded = false;
        self.saved_key.clear();
        self.saved_value.clear();
    }

    /// Stops the iterator on a failed fold.
    fn fail(&mut self, e: Error) {
        self.error.get_or_insert(e);
        self.invalidate();
    }

    /// What the visible entry `p` means to this reader: a value or operand
    /// a range tombstone hides, or that expired, reads as a deletion.
    #[inline]
    fn effective(&self, p: types::ParsedKey<'_>) -> ValueKind {
        if p.kind != ValueKind::Delete
            && (p.seq <= self.expired_to || self.cover.hides(p.user_key, p.seq, self.seq))
        {
            ValueKind::Delete
        } else {
            p.kind
        }
    }

    /// Forward, on the newest visible entry of a key, an operand: reads
    /// the older versions of the key down to a base (a value, or a deletion
    /// or the key's end: none), folds, and holds the result in `saved_*`.
    /// Leaves the inner iterator on the first entry not read.
    fn fold_forward(&mut self) {
        let key = types::user_key(self.inner.key()).to_vec();
        self.operands.clear();
        self.operands.push(self.inner.value().to_vec());
        let mut base: Option<Vec<u8>> = None;
        self.inner.next();
        while self.inner.valid() {
            let Some(p) = types::parse_internal_key(self.inner.key()) else {
                self.inner.next();
                continue;
            };
            if p.user_key != key.as_slice() {
                break;
            }
            match self.effective(p) {
                ValueKind::Merge => self.operands.push(self.inner.value().to_vec()),
                ValueKind::Value => {
                    base = Some(self.inner.value().to_vec());
                    break;
                }
                ValueKind::Delete | ValueKind::RangeDelete => break,
            }
            self.inner.next();
        }
        if let Err(e) = self.inner.status() {
            // The older versions could not all be read.
            self.fail(e);
            return;
        }
        let ops: Vec<&[u8]> = self.operands.iter().rev().map(Vec::as_slice).collect();
        match crate::merge::fold(self.op.as_ref(), &key, base.as_deref(), &ops) {
            Ok(v) => {
                self.saved_key = key;
                self.saved_value = v;
                self.folded = true;
                self.valid = true;
            }
            Err(e) => self.fail(e),
        }
    }

    /// Forward: skips invisible entries, shadowed versions and deleted keys.
    /// With `skipping`, entries of user keys `<= saved_key` are hidden.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        if self.error.is_some() {
            self.invalidate();
            return;
        }
        while self.inner.valid() {
            if let Some(p) = types::parse_internal_key(self.inner.key()) {
                if !self.below_hi(p.user_key) {
                    break;
                }
                if p.seq <= self.seq && self.above_lo(p.user_key) {
                    match self.effective(p) {
                        ValueKind::Delete | ValueKind::RangeDelete => {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                            skipping = true;
                        }
                        ValueKind::Value => {
                            if !(skipping && p.user_key <= self.saved_key.as_slice()) {
                                self.valid = true;
                                self.saved_key.clear();
                                self.saved_key.extend_from_slice(p.user_key);
                                return;
                            }
                        }
                        ValueKind::Merge => {
                            if !(skipping && p.user_key <= self.saved_key.as_slice()) {
                                self.fold_forward();
                                return;
                            }
                        }
                    }
                }
            }
            self.inner.next();
        }
        self.invalidate();
    }

    /// Reverse: collects the newest visible version of the previous user key
    /// (its entries come oldest first: a value or deletion resets it, an
    /// operand is kept to fold onto what came before).
    fn find_prev_user_entry(&mut self) {
        if self.error.is_some() {
            self.invalidate();
            return;
        }
        let mut kind = ValueKind::Delete;
        // With operands collected: whether `saved_value` holds their base.
        let mut has_base = false;
        self.operands.clear();
        while self.inner.valid() {
            if let Some(p) = types::parse_internal_key(self.inner.key()) {
                if !self.above_lo(p.user_key) {
                    break;
                }
                if p.seq <= self.seq && self.below_hi(p.user_key) {
                    if kind != ValueKind::Delete && p.user_key < self.saved_key.as_slice() {
                        // Passed the entries of the key we collected.
                        break;
                    }
                    let now = self.effective(p);
                    match now {
                        ValueKind::Delete | ValueKind::RangeDelete => {
                            self.saved_key.clear();
                            self.saved_value.clear();
                            self.operands.clear();
                        }
                        ValueKind::Value => {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                            self.saved_value.clear();
                            self.saved_value.extend_from_slice(self.inner.value());
                            self.operands.clear();
                        }
                        ValueKind::Merge => {
                            if kind != ValueKind::Merge {
                                has_base = kind == ValueKind::Value;
                                self.saved_key.clear();
                                self.saved_key.extend_from_slice(p.user_key);
                            }
                            self.operands.push(self.inner.value().to_vec());
                        }
                    }
                    kind = now;
                }
            }
            self.inner.prev();
        }
        if kind == ValueKind::Delete
            || kind == ValueKind::RangeDelete
            || self.inner.status().is_err()
        {
            self.invalidate();
            self.direction = Direction::Forward;
            return;
        }
        if kind == ValueKind::Merge {
            let ops: Vec<&[u8]> = self.operands.iter().map(Vec::as_slice).collect();
            let base = has_base.then_some(self.saved_value.as_slice());
            match crate::merge::fold(self.op.as_ref(), &self.saved_key, base, &ops) {
                Ok(v) => self.saved_value = v,
                Err(e) => {
                    self.fail(e);
                    self.direction = Direction::Forward;
                    return;
                }
            }
        }
        self.valid = true;
    }
}
