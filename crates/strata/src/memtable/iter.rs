//! A bidirectional iterator over a memtable.
//!
//! It holds the memtable alive through an `Arc` and remembers the current
//! entry by copying it, re-finding neighbours through the skiplist's bound
//! searches (O(log n) per step), which keeps it free of self-references.

use super::{MemKey, MemTable};
use crate::error::Result;
use crate::iter::InternalIterator;
use std::ops::Bound;
use std::sync::Arc;

/// Iterator over one memtable; see the module doc.
pub struct MemIter {
    mem: Arc<MemTable>,
    key: MemKey,
    value: Vec<u8>,
    valid: bool,
}

impl MemIter {
    pub fn new(mem: Arc<MemTable>) -> Self {
        MemIter {
            mem,
            key: MemKey(Box::default()),
            value: Vec::new(),
            valid: false,
        }
    }

    fn set(&mut self, e: Option<crossbeam_skiplist::map::Entry<'_, MemKey, Box<[u8]>>>) {
        match e {
            Some(e) => {
                self.key = e.key().clone();
                self.value.clear();
                self.value.extend_from_slice(e.value());
                self.valid = true;
            }
            None => self.valid = false,
        }
    }
}

impl InternalIterator for MemIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) {
        let mem = self.mem.clone();
        self.set(mem.map.front());
    }

    fn seek_to_last(&mut self) {
        let mem = self.mem.clone();
        self.set(mem.map.back());
    }

    fn seek(&mut self, target: &[u8]) {
        let mem = self.mem.clone();
        let t = MemKey(target.into());
        self.set(mem.map.lower_bound(Bound::Included(&t)));
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        let mem = self.mem.clone();
        let t = MemKey(target.into());
        self.set(mem.map.upper_bound(Bound::Included(&t)));
    }

    fn next(&mut self) {
        if self.valid {
            let mem = self.mem.clone();
            let e = mem.map.lower_bound(Bound::Excluded(&self.key));
            self.set(e);
        }
    }

    fn prev(&mut self) {
        if self.valid {
            let mem = self.mem.clone();
            let e = mem.map.upper_bound(Bound::Excluded(&self.key));
            self.set(e);
        }
    }

    fn key(&self) -> &[u8] {
        if self.valid {
            &self.key.0
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if self.valid {
            &self.value
        } else {
            &[]
        }
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}
