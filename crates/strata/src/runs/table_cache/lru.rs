//! The table cache's list: the held tables, most recently used first, in a
//! slab of nodes, with an index from table id to slot, and the CLOCK
//! eviction that gives a table read through its pin a second chance.

use super::Pin;
use crate::table::Table;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Hashes table ids (distinct, mostly consecutive numbers) with one
/// multiplication instead of SipHash: the table cache sits on every read.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// "No node" in the LRU links.
const NIL: usize = usize::MAX;

struct Node {
    id: u64,
    table: Arc<Table>,
    /// The `FileMeta`'s pin, holding `table` while this node exists.
    pin: Arc<Pin>,
    /// Towards the most recently used end.
    prev: usize,
    /// Towards the least recently used end.
    next: usize,
}

/// A doubly linked list of tables, most recently used first, in a slab of
/// nodes, plus an index from table id to slot.
pub(super) struct Lru {
    index: HashMap<u64, usize, BuildHasherDefault<IdHasher>>,
    slots: Vec<Option<Node>>,
    free: Vec<usize>,
    /// Most recently used.
    head: usize,
    /// Least recently used.
    tail: usize,
    pub(super) mapped_bytes: u64,
    pub(super) pinned_bytes: u64,
}

impl Lru {
    pub(super) fn new() -> Self {
        Lru {
            index: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            mapped_bytes: 0,
            pinned_bytes: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    fn node_mut(&mut self, i: usize) -> Option<&mut Node> {
        self.slots.get_mut(i).and_then(Option::as_mut)
    }

    /// Takes node `i` out of the list (it stays in its slot).
    fn unlink(&mut self, i: usize) {
        let Some((prev, next)) = self.node_mut(i).map(|n| (n.prev, n.next)) else {
            return;
        };
        match self.node_mut(prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.node_mut(next) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    /// Links node `i` in as the most recently used.
    fn push_front(&mut self, i: usize) {
        let head = self.head;
        if let Some(n) = self.node_mut(i) {
            n.prev = NIL;
            n.next = head;
        } else {
            return;
        }
        match self.node_mut(head) {
            Some(h) => h.prev = i,
            None => self.tail = i,
        }
        self.head = i;
    }

    /// The table `id`, marked most recently used (a reader whose pin was
    /// cleared meanwhile, or a second `FileMeta` of the same table).
    pub(super) fn get(&mut self, id: u64) -> Option<Arc<Table>> {
        let i = *self.index.get(&id)?;
        if i != self.head {
            self.unlink(i);
            self.push_front(i);
        }
        self.node_mut(i).map(|n| Arc::clone(&n.table))
    }

    /// Adds `table` (not held yet) as the most recently used, and pins it
    /// in `pin`.
    pub(super) fn insert(&mut self, id: u64, table: Arc<Table>, pin: Arc<Pin>) {
        self.mapped_bytes += table.mapped_bytes();
        self.pinned_bytes += table.pinned_bytes() as u64;
        pin.touched.store(false, Ordering::Relaxed);
        pin.table.store(Some(Arc::clone(&table)));
        let node = Node {
            id,
            table,
            pin,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                if let Some(slot) = self.slots.get_mut(i) {
                    *slot = Some(node);
                }
                i
            }
            None => {
                self.slots.push(Some(node));
                self.slots.len() - 1
            }
        };
        self.index.insert(id, i);
        self.push_front(i);
    }

    /// Removes table `id`.
    pub(super) fn remove(&mut self, id: u64) -> Option<Arc<Table>> {
        let i = self.index.remove(&id)?;
        self.unlink(i);
        let node = self.slots.get_mut(i).and_then(Option::take)?;
        self.free.push(i);
        // Readers holding the pin's table keep it open until they are done.
        node.pin.table.store(None);
        self.mapped_bytes = self.mapped_bytes.saturating_sub(node.table.mapped_bytes());
        self.pinned_bytes = self
            .pinned_bytes
            .saturating_sub(node.table.pinned_bytes() as u64);
        Some(node.table)
    }

    /// Removes the least recently used table not read through its pin
    /// since it was last considered; the ones that were move to the front
    /// with their flag cleared (a second chance). One pass clears every
    /// flag, so at most `len + 1` nodes are looked at.
    pub(super) fn pop_victim(&mut self) -> Option<Arc<Table>> {
        for _ in 0..self.len() {
            let i = self.tail;
            let node = self.slots.get(i).and_then(Option::as_ref)?;
            if !node.pin.touched.swap(false, Ordering::Relaxed) {
                let id = node.id;
                return self.remove(id);
            }
            self.unlink(i);
            self.push_front(i);
        }
        let id = self.slots.get(self.tail).and_then(Option::as_ref)?.id;
        self.remove(id)
    }

    /// Removes every held table.
    pub(super) fn drain(&mut self) -> Vec<Arc<Table>> {
        let ids: Vec<u64> = self.index.keys().copied().collect();
        ids.into_iter().filter_map(|id| self.remove(id)).collect()
    }

    /// Held ids, most recently used first.
    pub(super) fn ids(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len());
        let mut i = self.head;
        while let Some(n) = self.slots.get(i).and_then(Option::as_ref) {
            out.push(n.id);
            i = n.next;
        }
        out
    }
}
