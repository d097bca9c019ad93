//! A sorted index over a memtable's sealed shards: one array of node
//! pointers in internal-key order, with each user key's first 8 bytes
//! beside its pointer.
//!
//! Why: a scan or seek over a memtable of many shards merges one skiplist
//! iterator per shard, and every step of a skiplist is a dependent cache
//! miss. With 100-byte values an unflushed 47 MiB memtable is 8 shards;
//! a warm full scan of such a database spent about a third of its time
//! in the shards' `key()` loads and the merge's comparisons between them.
//! The index turns the sealed shards into one merge child whose next
//! entry is known in advance (so it is prefetched), and a seek into one
//! binary search that mostly compares the inline prefixes instead of a
//! skiplist descent per shard.
//!
//! The index is built off the reader's path (a short-lived thread, when an
//! iterator finds at least [`INDEX_AFTER`] sealed shards not yet indexed)
//! and published whole; iterators made before it keep using the shards.
//! Sealed shards never change, so an index stays exact for the memtable's
//! life; a later index covers more shards and reuses the earlier one's
//! order.

use super::skiplist::{node_key, node_value, NodePtr};
use super::MemTable;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::types;
use std::cmp::Ordering;
use std::sync::Arc;

/// Sealed shards not yet indexed that make an iterator ask for an index.
pub(super) const INDEX_AFTER: usize = 2;

/// Entries ahead of an iterator's position whose nodes are prefetched.
const PREFETCH_AHEAD: usize = 8;

/// One indexed entry.
#[derive(Clone, Copy)]
struct Entry {
    /// The user key's first 8 bytes, big-endian, zero-padded.
    prefix: u64,
    node: NodePtr,
}

/// The first 8 bytes of `user_key` as a big-endian number (zero-padded):
/// when two prefixes differ, they order their keys.
#[inline]
fn prefix_of(user_key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = user_key.len().min(8);
    b[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(b)
}

/// The sealed shards `0..shards` of a memtable in internal-key order.
pub(super) struct SortedIndex {
    shards: usize,
    entries: Box<[Entry]>,
}

// SAFETY: the node pointers point into the arenas of the memtable that
// built the index; whoever holds an index holds that memtable too (the
// memtable itself, or an `IndexIter` with its `Arc`), and nodes are
// immutable and never move or disappear while the memtable lives.
unsafe impl Send for SortedIndex {}
// SAFETY: see `Send`: the index is read-only after it is built.
unsafe impl Sync for SortedIndex {}

/// Orders two indexed entries by internal key.
#[inline]
fn cmp_entries(a: &Entry, b: &Entry) -> Ordering {
    a.prefix
        .cmp(&b.prefix)
        .then_with(|| types::compare_internal(node_key(a.node), node_key(b.node)))
}

/// Orders an indexed entry against the internal key `target` whose user
/// key's prefix is `prefix`.
#[inline]
fn cmp_target(e: &Entry, prefix: u64, target: &[u8]) -> Ordering {
    e.prefix
        .cmp(&prefix)
        .then_with(|| types::compare_internal(node_key(e.node), target))
}

/// Merges two sorted runs into one.
fn merge_two(a: &[Entry], b: &[Entry]) -> Vec<Entry> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if cmp_entries(&a[i], &b[j]).is_le() {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

impl SortedIndex {
    /// Shards covered (`0..shards`).
    pub(super) fn shards(&self) -> usize {
        self.shards
    }

    /// Bytes the index holds.
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.entries)
    }

    /// The index of `mem`'s shards `0..shards` (all sealed), reusing the
    /// order of `prev` (an index of fewer of them) where given.
    pub(super) fn build(mem: &MemTable, shards: usize, prev: Option<&SortedIndex>) -> Self {
        let from = prev.map_or(0, |p| p.shards.min(shards));
        let mut runs: Vec<Vec<Entry>> = Vec::new();
        if let Some(p) = prev.filter(|p| p.shards <= shards) {
            runs.push(p.entries.to_vec());
        }
        for i in from..shards {
            let Some(list) = mem.list(i) else {
                continue;
            };
            let mut run = Vec::with_capacity(list.len());
            let mut n = list.first();
            while !n.is_null() {
                run.push(Entry {
                    prefix: prefix_of(types::user_key(node_key(n))),
                    node: n,
                });
                n = list.successor(n);
            }
            runs.push(run);
        }
        // Pairwise merges: each pass reads and writes the runs in order.
        while runs.len() > 1 {
            let mut next = Vec::with_capacity(runs.len().div_ceil(2));
            let mut it = runs.into_iter();
            while let Some(a) = it.next() {
                match it.next() {
                    Some(b) => next.push(merge_two(&a, &b)),
                    None => next.push(a),
                }
            }
            runs = next;
        }
        SortedIndex {
            shards,
            entries: runs.pop().unwrap_or_default().into_boxed_slice(),
        }
    }

    /// Position of the first entry >= `target` (an internal key).
    fn lower_bound(&self, target: &[u8]) -> usize {
        let p = prefix_of(types::user_key(target));
        self.entries
            .partition_point(|e| cmp_target(e, p, target) == Ordering::Less)
    }

    /// The nodes of the entries of `target`'s user key from `target` (an
    /// internal seek key) on, in order, appended to `out`.
    pub(super) fn entries_of(&self, target: &[u8], out: &mut Vec<NodePtr>) {
        let user_key = types::user_key(target);
        for e in self.entries.get(self.lower_bound(target)..).unwrap_or(&[]) {
            if types::user_key(node_key(e.node)) != user_key {
                break;
            }
            out.push(e.node);
        }
    }

    /// Position one past the last entry <= `target`.
    fn upper_bound(&self, target: &[u8]) -> usize {
        let p = prefix_of(types::user_key(target));
        self.entries
            .partition_point(|e| cmp_target(e, p, target) != Ordering::Greater)
    }
}

/// Hints the CPU to load the node of entry `i`, if there is one: its
/// header and key (the key follows a tower of up to 12 pointers).
#[inline]
fn prefetch_node(entries: &[Entry], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(e) = entries.get(i) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = e.node.cast::<i8>();
        // SAFETY: a prefetch is a hint that never faults or reads into the
        // program, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (entries, i);
}

/// Iterator over a memtable's [`SortedIndex`]: one merge child standing
/// for the shards the index covers.
pub struct IndexIter {
    /// Keeps the nodes the index points at alive.
    _mem: Arc<MemTable>,
    index: Arc<SortedIndex>,
    /// `entries.len()` when invalid.
    pos: usize,
}

impl IndexIter {
    pub(super) fn new(mem: Arc<MemTable>, index: Arc<SortedIndex>) -> Self {
        let pos = index.entries.len();
        IndexIter {
            _mem: mem,
            index,
            pos,
        }
    }

    fn end(&self) -> usize {
        self.index.entries.len()
    }

    fn node(&self) -> Option<NodePtr> {
        self.index.entries.get(self.pos).map(|e| e.node)
    }
}

impl InternalIterator for IndexIter {
    fn valid(&self) -> bool {
        self.pos < self.end()
    }

    fn seek_to_first(&mut self) {
        self.pos = 0;
        for i in 1..=PREFETCH_AHEAD {
            prefetch_node(&self.index.entries, i);
        }
    }

    fn seek_to_last(&mut self) {
        self.pos = self.end().checked_sub(1).unwrap_or(self.end());
    }

    fn seek(&mut self, target: &[u8]) {
        self.pos = self.index.lower_bound(target);
        for i in 1..=PREFETCH_AHEAD {
            prefetch_node(&self.index.entries, self.pos + i);
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.pos = match self.index.upper_bound(target) {
            0 => self.end(),
            n => n - 1,
        };
    }

    fn next(&mut self) {
        if self.valid() {
            self.pos += 1;
            prefetch_node(&self.index.entries, self.pos + PREFETCH_AHEAD);
        }
    }

    fn prev(&mut self) {
        if self.valid() {
            self.pos = match self.pos.checked_sub(1) {
                Some(p) => {
                    if let Some(ahead) = p.checked_sub(PREFETCH_AHEAD) {
                        prefetch_node(&self.index.entries, ahead);
                    }
                    p
                }
                None => self.end(),
            };
        }
    }

    fn key(&self) -> &[u8] {
        self.node().map_or(&[], node_key)
    }

    fn value(&self) -> &[u8] {
        self.node().map_or(&[], node_value)
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}
