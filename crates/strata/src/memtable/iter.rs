//! A bidirectional iterator over a memtable.
//!
//! It holds the memtable alive through an `Arc` and points at a skiplist
//! node; nodes never move or disappear while the memtable lives. `prev`
//! re-searches the list for the predecessor (O(log n)), as LevelDB does.

use super::skiplist::{node_key, node_value, NodePtr};
use super::MemTable;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::types;
use std::sync::Arc;

/// Iterator over one memtable; see the module doc.
pub struct MemIter {
    mem: Arc<MemTable>,
    node: NodePtr,
}

// SAFETY: `node` points into the arena of `mem`, which this iterator keeps
// alive; the node's bytes are immutable and its links atomic, so moving the
// iterator to another thread is sound.
unsafe impl Send for MemIter {}

impl MemIter {
    pub fn new(mem: Arc<MemTable>) -> Self {
        MemIter {
            mem,
            node: std::ptr::null(),
        }
    }
}

impl InternalIterator for MemIter {
    fn valid(&self) -> bool {
        !self.node.is_null()
    }

    fn seek_to_first(&mut self) {
        self.node = self.mem.list.first();
    }

    fn seek_to_last(&mut self) {
        self.node = self.mem.list.last();
    }

    fn seek(&mut self, target: &[u8]) {
        self.node = self.mem.seek_node(target);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // Last node <= target.
        self.node = self.mem.list.seek_lt(&mut |k| {
            if types::compare_internal(k, target).is_le() {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        });
    }

    fn next(&mut self) {
        if self.valid() {
            self.node = self.mem.list.successor(self.node);
        }
    }

    fn prev(&mut self) {
        if self.valid() {
            let cur = node_key(self.node);
            self.node = self
                .mem
                .list
                .seek_lt(&mut |k| types::compare_internal(k, cur));
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
