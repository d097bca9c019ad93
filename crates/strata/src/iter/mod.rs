//! Iterators over internal keys, and the user-facing [`DbIter`] built on them.
//!
//! Every source (memtable, block, table, level, merge) implements
//! [`InternalIterator`]: a cursor in internal-key order that moves both ways.
//! Errors do not travel through `next`/`prev`: an iterator that hits one
//! becomes invalid and reports it from `status()`.

/// A bidirectional cursor over `(internal key, value)` entries in
/// [`crate::types::compare_internal`] order.
///
/// `key()` and `value()` may only be called while `valid()`; implementations
/// return an empty slice otherwise rather than panicking.
pub trait InternalIterator: Send {
    /// True while positioned on an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self);
    /// Moves to the last entry.
    fn seek_to_last(&mut self);
    /// Moves to the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]);
    /// Moves to the last entry whose internal key is `<= target`.
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if !self.valid() {
            self.seek_to_last();
        }
        while self.valid() && crate::types::compare_internal(self.key(), target).is_gt() {
            self.prev();
        }
    }
    /// Advances; requires `valid()`.
    fn next(&mut self);
    /// Steps back; requires `valid()`.
    fn prev(&mut self);
    /// The current internal key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
    /// The current internal key, or `None` when not valid: `valid()` and
    /// `key()` in one call (one dynamic dispatch for a merge's step).
    #[inline]
    fn current_key(&self) -> Option<&[u8]> {
        if self.valid() {
            Some(self.key())
        } else {
            None
        }
    }
    /// The first error met, if any.
    fn status(&self) -> crate::error::Result<()>;
    /// Tells the iterator that the walk reading it forward from each seek
    /// returns about `entries` entries (a scan's limit, in user keys): a
    /// source that reads ahead of its cursor may ask the device for no
    /// more than that many entries span at first. A hint, not a bound: a
    /// walk takes more from a source where it steps over versions,
    /// deletions or expired entries, and reading past the hint stays
    /// correct. Wrappers forward it; the default ignores it.
    fn scan_hint(&mut self, _entries: usize) {}
    /// Before a `seek(target)`: asks the OS to start reading what that
    /// seek will read from a device, where the source knows it, and
    /// returns without waiting. A merge asks all its sources before it
    /// seeks any, so that their reads overlap. Moves nothing; the default
    /// does nothing.
    fn prefetch_seek(&mut self, _target: &[u8]) {}
}

/// An iterator over nothing, or over an error.
pub struct EmptyIter(pub Option<crate::error::Error>);

impl InternalIterator for EmptyIter {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> crate::error::Result<()> {
        match &self.0 {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

mod db_iter;
mod merge;

pub use db_iter::DbIter;
pub use merge::MergeIter;
