//! The user-facing iterator: user keys at one snapshot, newest visible
//! version only, tombstones hidden (point tombstones, and versions a
//! visible range tombstone of its [`Cover`] hides), both directions.
//!
//! Forward, the inner iterator sits on the entry that yields the current
//! key/value. Reverse, the inner iterator sits *before* all entries of the
//! current user key, whose key and value are kept in `saved_*`.
//!
//! Errors: once the merged source fails (a damaged block, an I/O error), the
//! iterator is invalid and `status()` returns the error; every later call
//! leaves it so (the merge's error is sticky). It never yields an older
//! version because a newer one could not be read.

use super::InternalIterator;
use crate::error::Result;
use crate::rangedel::Cover;
use crate::types::{self, SeqNo, ValueKind};
use std::any::Any;
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
    inner: Box<dyn InternalIterator>,
    seq: SeqNo,
    /// The range tombstones of the view.
    cover: Cover,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
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
        inner: Box<dyn InternalIterator>,
        seq: SeqNo,
        cover: Cover,
        pin: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        DbIter {
            inner,
            seq,
            cover,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            _pin: pin,
            on_seek: None,
        }
    }

    /// Calls `sampler` with the target of every `seek`.
    pub(crate) fn sample_seeks(mut self, sampler: SeekSampler) -> Self {
        self.on_seek = Some(sampler);
        self
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
        match self.direction {
            Direction::Forward => types::user_key(self.inner.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value (empty when not valid).
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward => self.inner.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The first error met (I/O or corruption); an iterator that met one is invalid.
    pub fn status(&self) -> Result<()> {
        self.inner.status()
    }

    /// Moves to the first key.
    pub fn seek_to_first(&mut self) {
        self.direction = Direction::Forward;
        self.inner.seek_to_first();
        self.find_next_user_entry(false);
    }

    /// Moves to the last key.
    pub fn seek_to_last(&mut self) {
        self.direction = Direction::Reverse;
        self.inner.seek_to_last();
        self.find_prev_user_entry();
    }

    /// Moves to the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.direction = Direction::Forward;
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
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(types::user_key(self.inner.key()));
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
            // Walk back past every entry of the current user key.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(types::user_key(self.inner.key()));
            loop {
                self.inner.prev();
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
        self.saved_key.clear();
        self.saved_value.clear();
    }

    /// What the visible entry `p` means to this reader: a value a range
    /// tombstone hides reads as a deletion.
    #[inline]
    fn effective(&self, p: types::ParsedKey<'_>) -> ValueKind {
        if p.kind == ValueKind::Value && self.cover.hides(p.user_key, p.seq, self.seq) {
            ValueKind::Delete
        } else {
            p.kind
        }
    }

    /// Forward: skips invisible entries, shadowed versions and deleted keys.
    /// With `skipping`, entries of user keys `<= saved_key` are hidden.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        while self.inner.valid() {
            if let Some(p) = types::parse_internal_key(self.inner.key()) {
                if p.seq <= self.seq {
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

    /// Reverse: collects the newest visible version of the previous user key.
    fn find_prev_user_entry(&mut self) {
        let mut kind = ValueKind::Delete;
        while self.inner.valid() {
            if let Some(p) = types::parse_internal_key(self.inner.key()) {
                if p.seq <= self.seq {
                    if kind == ValueKind::Value && p.user_key < self.saved_key.as_slice() {
                        // Passed the entries of the key we collected.
                        break;
                    }
                    kind = self.effective(p);
                    match kind {
                        ValueKind::Delete | ValueKind::RangeDelete => {
                            self.saved_key.clear();
                            self.saved_value.clear();
                        }
                        ValueKind::Value => {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                            self.saved_value.clear();
                            self.saved_value.extend_from_slice(self.inner.value());
                        }
                    }
                }
            }
            self.inner.prev();
        }
        if kind != ValueKind::Value || self.inner.status().is_err() {
            self.invalidate();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
        }
    }
}
