//! Merges several internal iterators into one sorted stream.
//!
//! Children are scanned linearly for the smallest (forward) or largest
//! (reverse) key: the number of children is small (memtables, L0 tables and
//! one iterator per deeper level). Internal keys are unique across children,
//! so no tie-breaking is needed.
//!
//! Errors are sticky: once any child fails (a checksum mismatch, an I/O
//! error), the merge becomes invalid and `status()` returns that error from
//! then on, whatever is called next — a re-seek or a direction change never
//! forgets it. Dropping the failed child and going on would surface older
//! versions of its keys, or resurrect keys it deletes.

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::types::compare_internal;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// The merge of its children; see the module doc.
pub struct MergeIter {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
    /// The first child error met; the merge stays invalid once set.
    status: Option<Error>,
}

impl MergeIter {
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergeIter {
            children,
            current: None,
            direction: Direction::Forward,
            status: None,
        }
    }

    /// After every child moved: takes the first child error, if any.
    fn absorb_all(&mut self) {
        if self.status.is_none() {
            for c in &self.children {
                if let Err(e) = c.status() {
                    self.status = Some(e);
                    break;
                }
            }
        }
        if self.status.is_some() {
            self.current = None;
        }
    }

    /// After only child `i` moved: takes its error, if any.
    fn absorb(&mut self, i: usize) -> bool {
        if self.status.is_none() && !self.children[i].valid() {
            if let Err(e) = self.children[i].status() {
                self.status = Some(e);
            }
        }
        if self.status.is_some() {
            self.current = None;
            return false;
        }
        true
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                best = match best {
                    Some(b) if compare_internal(self.children[b].key(), c.key()).is_le() => Some(b),
                    _ => Some(i),
                };
            }
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                best = match best {
                    Some(b) if compare_internal(self.children[b].key(), c.key()).is_ge() => Some(b),
                    _ => Some(i),
                };
            }
        }
        self.current = best;
    }
}

impl InternalIterator for MergeIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        if self.status.is_some() {
            return;
        }
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        self.absorb_all();
    }

    fn seek_to_last(&mut self) {
        if self.status.is_some() {
            return;
        }
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest();
        self.absorb_all();
    }

    fn seek(&mut self, target: &[u8]) {
        if self.status.is_some() {
            return;
        }
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        self.absorb_all();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        if self.status.is_some() {
            return;
        }
        for c in &mut self.children {
            c.seek_for_prev(target);
        }
        self.direction = Direction::Reverse;
        self.find_largest();
        self.absorb_all();
    }

    fn next(&mut self) {
        let Some(cur) = self.current else { return };
        if self.direction != Direction::Forward {
            // Every other child is positioned before key(); move each to the
            // first entry after it.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key);
                    if c.valid() && compare_internal(c.key(), &key).is_eq() {
                        c.next();
                    }
                }
            }
            self.direction = Direction::Forward;
            self.absorb_all();
            if self.status.is_some() {
                return;
            }
        }
        self.children[cur].next();
        if self.absorb(cur) {
            self.find_smallest();
        }
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
        if self.direction != Direction::Reverse {
            // Every other child is positioned after key(); move each to the
            // last entry before it.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key);
                    if c.valid() {
                        c.prev();
                    } else {
                        c.seek_to_last();
                    }
                }
            }
            self.direction = Direction::Reverse;
            self.absorb_all();
            if self.status.is_some() {
                return;
            }
        }
        self.children[cur].prev();
        if self.absorb(cur) {
            self.find_largest();
        }
    }

    fn key(&self) -> &[u8] {
        match self.current {
            Some(c) => self.children[c].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current {
            Some(c) => self.children[c].value(),
            None => &[],
        }
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.status {
            return Err(e.clone());
        }
        for c in &self.children {
            c.status()?;
        }
        Ok(())
    }
}
