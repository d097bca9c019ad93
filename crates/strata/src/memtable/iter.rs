//! A bidirectional iterator over one shard of a memtable (a merging
//! iterator combines the shards: `MemTable::add_iterators`).
//!
//! It holds the memtable alive through an `Arc` and points at a skiplist
//! node; nodes never move or disappear while the memtable lives. `prev`
//! re-searches the list for the predecessor (O(log n)), as LevelDB does.

use super::skiplist::{node_key, node_value, NodePtr, SkipList};
use super::MemTable;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::types;
use std::sync::Arc;

/// Iterator over one shard of a memtable; see the module doc.
pub struct MemIter {
    mem: Arc<MemTable>,
    shard: usize,
    node: NodePtr,
}

// SAFETY: `node` points into the arena of `mem`, which this iterator keeps
// alive; the node's bytes are immutable and its links atomic, so moving the
// iterator to another thread is sound.
unsafe impl Send for MemIter {}

impl MemIter {
    /// An iterator over shard `shard` of `mem` (none if it has no such
    /// shard: the iterator is then always invalid).
    pub fn new(mem: Arc<MemTable>, shard: usize) -> Self {
        MemIter {
            mem,
            shard,
            node: std::ptr::null(),
        }
    }

    fn list(&self) -> Option<&SkipList> {
        self.mem.list(self.shard)
    }
}

impl InternalIterator for MemIter {
    fn valid(&self) -> bool {
        !self.node.is_null()
    }

    fn seek_to_first(&mut self) {
        self.node = self.list().map_or(std::ptr::null(), SkipList::first);
    }

    fn seek_to_last(&mut self) {
        self.node = self.list().map_or(std::ptr::null(), SkipList::last);
    }

    fn seek(&mut self, target: &[u8]) {
        self.node = self.list().map_or(std::ptr::null(), |l| {
            l.seek(&mut |k| types::compare_internal(k, target))
        });
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // Last node <= target.
        self.node = self.list().map_or(std::ptr::null(), |l| {
            l.seek_lt(&mut |k| {
                if types::compare_internal(k, target).is_le() {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Greater
                }
            })
        });
    }

    fn next(&mut self) {
        if let (true, Some(l)) = (self.valid(), self.list()) {
            self.node = l.successor(self.node);
        }
    }

    fn prev(&mut self) {
        if let (true, Some(l)) = (self.valid(), self.list()) {
            let cur = node_key(self.node);
            self.node = l.seek_lt(&mut |k| types::compare_internal(k, cur));
        }
    }

    fn key(&self) -> &[u8] {
        if self.valid() {
            node_key(self.node)
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if self.valid() {
            node_value(self.node)
        } else {
            &[]
        }
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}
