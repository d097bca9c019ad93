//! The memtable: concurrent skiplists of internal keys ("shards"), filled
//! one after another and flushed together as one table.
//!
//! Why shards: an insert into one 64 MiB skiplist misses the CPU cache on
//! most of its levels, several times slower than an insert into an 8 MiB
//! shard (why: docs/design/2026-11-29-code-comment-measurements.md
//! §memtable-shards). A memtable therefore fills shards of
//! `Options::memtable_shard_size` in turn: the shard being filled stays
//! cache-sized, while the flush (one merge of all shards) still writes one
//! table of the whole memtable, so level 0 and the write amplification are
//! those of one large memtable. Each shard has a cache-local bloom filter
//! over its user keys ([`shard`]): a point lookup tests one cache line per
//! shard and searches only the shards that may hold the key.
//!
//! Thread-safety: any number of readers run concurrently with one inserter
//! (the group-commit leader; inserts are serialised by a mutex); the
//! skiplists are lock-free for readers, and a new shard is published by a
//! release store of the shard count. Entries are never removed; a full
//! memtable becomes immutable and is flushed to a table.
//!
//! Invariants: every internal key is unique (sequence numbers are unique).
//! Entries arrive in sequence order (the write path and recovery insert in
//! order), so every entry of a shard is newer than every entry of the
//! shards before it and a lookup stops at the newest shard with a visible
//! version. If an entry ever arrives out of order (a recovered log that
//! repeats flushed records), the memtable notes it and lookups then take
//! the newest visible version over all shards.

mod index;
mod iter;
mod shard;
mod skiplist;

pub use index::IndexIter;
pub use iter::MemIter;

use crate::iter::InternalIterator;
use crate::rangedel::{Fragments, RangeTombstone};
use crate::types::{self, SeqNo, ValueKind};
use arc_swap::ArcSwapOption;
use index::SortedIndex;
use parking_lot::Mutex;
use shard::Shard;
pub use skiplist::ChunkPool;
use skiplist::{node_key, node_value, NodePtr, SkipList};
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock};
use xxhash_rust::xxh3::xxh3_64;

/// Shards per memtable at most; the last one takes every entry after that.
pub const MAX_SHARDS: usize = 32;

/// A shard is also sealed after `shard_bytes / SHARD_ENTRY_BYTES` entries.
/// What makes an insert slow is the depth of the list it walks (its cache
/// misses), which grows with the entries, not the bytes: with 16-byte keys
/// and empty values (tombstones, ~40 arena bytes each) an 8 MiB shard holds
/// three times the nodes of one with 100-byte values, and a random insert
/// into it is markedly slower (why:
/// docs/design/2026-11-29-code-comment-measurements.md §memtable-shards). Entries of a
/// 16-byte key and a 100-byte value take ~150 bytes, so those shards are
/// still sealed by bytes; smaller entries get smaller shards (and their
/// filter, sized by bytes, more bits per key).
pub const SHARD_ENTRY_BYTES: usize = 128;

/// Orders a stored internal key against the probe `(user_key, trailer)`.
#[inline]
fn cmp_probe(node: &[u8], user_key: &[u8], trailer: u64) -> Ordering {
    match types::compare_bytes(types::user_key(node), user_key) {
        Ordering::Equal => trailer.cmp(&types::trailer(node)),
        o => o,
    }
}

/// Free bytes at the end of a shard's last chunk under which a shard whose
/// chunks reach its size is sealed (see `MemTable::add`), or the bytes of
/// the entry just added where that is more: the next entry of its size
/// would not fit.
const SEAL_TAIL: usize = 4096;

/// Entries between two publications of a flush's progress.
const PROGRESS_STEP: usize = 4096;

/// A memtable bound to the write-ahead log that holds its entries.
pub struct MemTable {
    /// `shards[..count]` are set; the last of them is being filled.
    shards: Box<[OnceLock<Shard>]>,
    count: AtomicUsize,
    /// Arena bytes after which the shard being filled is sealed.
    shard_bytes: usize,
    /// ...or entries ([`SHARD_ENTRY_BYTES`]).
    shard_entries: usize,
    /// Shards at most (the last one takes the rest).
    max_shards: usize,
    /// Serialises inserts (and with them shard switches).
    inserter: Mutex<()>,
    /// Bytes of sealed shards (arena and filters).
    sealed: AtomicUsize,
    size: AtomicUsize,
    /// Bytes of the sealed shards' arena chunks, and of every shard's
    /// ([`memory_held`](Self::memory_held)).
    sealed_held: AtomicUsize,
    held: AtomicUsize,
    /// The write buffer it fills (`usize::MAX` when none was given): no
    /// shard is opened within an eighth of a shard of it.
    capacity: usize,
    /// What it held when made: its first shard's chunk (see
    /// [`memory_held_when_empty`](Self::memory_held_when_empty)).
    empty_held: usize,
    len: AtomicUsize,
    /// Entries a running [`for_each`](Self::for_each) (a flush) has passed
    /// so far, published every [`PROGRESS_STEP`] entries for write pacing.
    walked: AtomicUsize,
    max_seq: AtomicU64,
    /// False once an entry arrived with a sequence at or below `max_seq`.
    ordered: AtomicBool,
    log_number: u64,
    /// Where the shards' arena chunks come from, if a database shares them.
    pool: Option<Arc<ChunkPool>>,
    /// Whether iterators ask for a [`SortedIndex`] of the sealed shards
    /// (`Options::memtable_index`).
    index_enabled: bool,
    /// The newest index of the sealed shards, if one was built.
    index: ArcSwapOption<SortedIndex>,
    /// True while an index is being built.
    indexing: AtomicBool,
    /// Bytes of the published index.
    index_bytes: AtomicUsize,
    /// The range tombstones this memtable took, in sequence order (kept
    /// apart from the skiplists; a flush hands them to the version).
    range_dels: Mutex<Vec<RangeTombstone>>,
    /// `range_dels.len()`, read without the lock.
    range_count: AtomicUsize,
    /// Bytes the range tombstones hold.
    range_bytes: AtomicUsize,
    /// The fragments of the first `.0` range tombstones, rebuilt by a
    /// reader that finds more.
    range_fragments: ArcSwapOption<(usize, Arc<Fragments>)>,
}

impl MemTable {
    /// An empty memtable whose entries are logged in WAL `log_number`,
    /// filling at most `max_shards` shards (1..=[`MAX_SHARDS`]) of
    /// `shard_bytes` of arena each; the last one takes the rest.
    pub fn new(log_number: u64, shard_bytes: usize, max_shards: usize) -> Self {
        Self::in_pool(log_number, shard_bytes, max_shards, None)
    }

    /// [`MemTable::new`] with arena chunks from (and back to) `pool`.
    pub fn in_pool(
        log_number: u64,
        shard_bytes: usize,
        max_shards: usize,
        pool: Option<Arc<ChunkPool>>,
    ) -> Self {
        let shard_bytes = shard_bytes.max(1);
        let max_shards = max_shards.clamp(1, MAX_SHARDS);
        let shards: Box<[OnceLock<Shard>]> = (0..MAX_SHARDS).map(|_| OnceLock::new()).collect();
        let first = Shard::in_pool(shard_bytes, pool.clone());
        let size = first.filter_bytes();
        let held = first.list.held();
        let _ = shards[0].set(first);
        MemTable {
            shards,
            count: AtomicUsize::new(1),
            shard_bytes,
            shard_entries: (shard_bytes / SHARD_ENTRY_BYTES).max(1),
            max_shards,
            inserter: Mutex::new(()),
            sealed: AtomicUsize::new(0),
            size: AtomicUsize::new(size),
            sealed_held: AtomicUsize::new(0),
            held: AtomicUsize::new(held),
            empty_held: held,
            capacity: usize::MAX,
            len: AtomicUsize::new(0),
            walked: AtomicUsize::new(0),
            max_seq: AtomicU64::new(0),
            ordered: AtomicBool::new(true),
            log_number,
            pool,
            index_enabled: true,
            index: ArcSwapOption::empty(),
            indexing: AtomicBool::new(false),
            index_bytes: AtomicUsize::new(0),
            range_dels: Mutex::new(Vec::new()),
            range_count: AtomicUsize::new(0),
            range_bytes: AtomicUsize::new(0),
            range_fragments: ArcSwapOption::empty(),
        }
    }

    /// An empty memtable for WAL `log_number` shaped by `opts`: shards of
    /// `memtable_shard_size`, but at least 1/32 of `write_buffer_size` (so
    /// the last shard's filter is not overfilled; a group that lands as the
    /// memtable fills may still overfill its last shard's, as no shard is
    /// opened within an eighth of a shard of the write buffer), and one
    /// skiplist when the shard size reaches the write buffer. A shard's filter is 1/64 of
    /// its bytes, so an empty memtable is never full.
    pub fn with_options(log_number: u64, opts: &crate::Options) -> Self {
        Self::with_options_in(log_number, opts, None)
    }

    /// The skiplists a memtable shaped by `opts` fills when its entries are
    /// of ordinary size (small ones fill more, up to [`MAX_SHARDS`]).
    pub fn shards_for(opts: &crate::Options) -> usize {
        let wbs = opts.write_buffer_size;
        if opts.memtable_shard_size >= wbs {
            1
        } else {
            let shard = opts
                .memtable_shard_size
                .max(wbs.div_ceil(MAX_SHARDS))
                .max(1);
            wbs.div_ceil(shard).min(MAX_SHARDS)
        }
    }

    /// [`MemTable::with_options`] with arena chunks from `pool`.
    pub fn with_options_in(
        log_number: u64,
        opts: &crate::Options,
        pool: Option<Arc<ChunkPool>>,
    ) -> Self {
        let wbs = opts.write_buffer_size;
        let mut m = if opts.memtable_shard_size >= wbs {
            Self::in_pool(log_number, wbs, 1, pool)
        } else {
            let shard = opts.memtable_shard_size.max(wbs.div_ceil(MAX_SHARDS));
            Self::in_pool(log_number, shard, MAX_SHARDS, pool)
        };
        m.index_enabled = opts.memtable_index;
        m.capacity = wbs;
        m
    }

    /// The WAL that holds this memtable's entries.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The published shards, oldest first.
    fn shards(&self) -> impl DoubleEndedIterator<Item = &Shard> {
        let n = self.count.load(AtomicOrdering::Acquire);
        self.shards[..n].iter().filter_map(OnceLock::get)
    }

    /// Number of shards (tests and statistics).
    pub fn shard_count(&self) -> usize {
        self.count.load(AtomicOrdering::Acquire)
    }

    /// Inserts one entry. Caller guarantees `seq` is unique. A
    /// `RangeDelete` (key = start, value = end) goes to the range
    /// tombstones (an empty range is dropped).
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        if kind == ValueKind::RangeDelete {
            self.add_range_del(seq, user_key, value);
            return;
        }
        let _guard = self.inserter.lock();
        let n = self.count.load(AtomicOrdering::Relaxed);
        // The newest published shard: shard 0 is set by `new`, and the
        // count moves only after a shard is set, so there always is one.
        // A real check: returning would drop an acknowledged write; the
        // write path turns the panic into the background error.
        let Some(shard) = self.shards[..n].iter().rev().find_map(OnceLock::get) else {
            panic!("a memtable without a shard: the entry would be lost");
        };
        let trailer = types::pack_trailer(seq, kind as u8);
        shard.note(xxh3_64(user_key));
        shard
            .list
            .insert(user_key, &trailer.to_le_bytes(), value, &mut |n| {
                cmp_probe(n, user_key, trailer)
            });
        let active = shard.list.memory() + shard.filter_bytes();
        let sealed = self.sealed.load(AtomicOrdering::Relaxed);
        self.size.store(sealed + active, AtomicOrdering::Relaxed);
        let active_held = shard.list.held();
        let sealed_held = self.sealed_held.load(AtomicOrdering::Relaxed);
        self.held
            .store(sealed_held + active_held, AtomicOrdering::Relaxed);
        let before = self.len.fetch_add(1, AtomicOrdering::Relaxed);
        if before > 0 && seq <= self.max_seq.load(AtomicOrdering::Relaxed) {
            self.ordered.store(false, AtomicOrdering::Release);
        }
        self.max_seq.fetch_max(seq, AtomicOrdering::Relaxed);
        // Sealed by its entries' bytes or count, or once its chunks reach
        // its bytes and the last one is nearly full: the next entry would
        // open a chunk the shard barely uses (its filter, in its first
        // chunk, is not in `memory`).
        let tail = SEAL_TAIL.max(user_key.len() + value.len() + 64);
        let full = shard.list.memory() >= self.shard_bytes
            || shard.list.len() >= self.shard_entries
            || (active_held >= self.shard_bytes && shard.list.tail_free() < tail);
        // Not when the memtable is all but full: a shard opened for its
        // last entries would hold a chunk for them and cost every read a
        // list more.
        let room_left = self.capacity.saturating_sub(sealed + active);
        if full && n < self.max_shards && room_left > self.shard_bytes / 8 {
            let next = Shard::in_pool(self.shard_bytes, self.pool.clone());
            let extra = next.filter_bytes();
            let extra_held = next.list.held();
            if self.shards[n].set(next).is_ok() {
                self.sealed.store(sealed + active, AtomicOrdering::Relaxed);
                self.size
                    .store(sealed + active + extra, AtomicOrdering::Relaxed);
                self.sealed_held
                    .store(sealed_held + active_held, AtomicOrdering::Relaxed);
                self.held.store(
                    sealed_held + active_held + extra_held,
                    AtomicOrdering::Relaxed,
                );
                self.count.store(n + 1, AtomicOrdering::Release);
            }
        }
    }

    /// Takes the range tombstone `[start, end) @ seq`.
    /// An empty range is not kept, but its sequence still counts in
    /// [`max_seq`](Self::max_seq): a flush records that as the history's
    /// end, and recovery expects the next log to go on from there.
    fn add_range_del(&self, seq: SeqNo, start: &[u8], end: &[u8]) {
        self.max_seq.fetch_max(seq, AtomicOrdering::Relaxed);
        if start >= end {
            return;
        }
        let mut list = self.range_dels.lock();
        list.push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
        self.range_count.store(list.len(), AtomicOrdering::Release);
        self.range_bytes.fetch_add(
            start.len() + end.len() + std::mem::size_of::<RangeTombstone>(),
            AtomicOrdering::Relaxed,
        );
    }

    /// The fragments of the range tombstones taken so far; `None` when
    /// there are none (the common case costs one atomic load). Readers
    /// share one build until another tombstone arrives.
    pub fn range_fragments(&self) -> Option<Arc<Fragments>> {
        let n = self.range_count.load(AtomicOrdering::Acquire);
        if n == 0 {
            return None;
        }
        if let Some(cached) = self.range_fragments.load_full() {
            if cached.0 == n {
                return Some(Arc::clone(&cached.1));
            }
        }
        let list = self.range_dels.lock();
        let built = Arc::new(Fragments::build(&list));
        self.range_fragments
            .store(Some(Arc::new((list.len(), Arc::clone(&built)))));
        Some(built)
    }

    /// The range tombstones taken, in sequence order (a flush records them).
    pub fn range_dels(&self) -> Vec<RangeTombstone> {
        self.range_dels.lock().clone()
    }

    /// The newest entry of `user_key` with sequence `<= seq` (range
    /// tombstones are not applied: see [`range_fragments`](Self::range_fragments)).
    pub fn get(&self, user_key: &[u8], seq: SeqNo) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
        if self.len.load(AtomicOrdering::Relaxed) == 0 {
            return None;
        }
        let probe = types::pack_trailer(seq, types::KIND_FOR_SEEK);
        let h = xxh3_64(user_key);
        let ordered = self.ordered.load(AtomicOrdering::Acquire);
        let mut best: Option<(SeqNo, ValueKind, NodePtr)> = None;
        for shard in self.shards().rev() {
            if !shard.may_contain(h) {
                continue;
            }
            let n = shard.list.seek(&mut |k| cmp_probe(k, user_key, probe));
            if n.is_null() {
                continue;
            }
            let Some(p) = types::parse_internal_key(node_key(n)) else {
                continue;
            };
            if p.user_key != user_key {
                continue;
            }
            if best.is_none_or(|b| p.seq > b.0) {
                best = Some((p.seq, p.kind, n));
            }
            if ordered {
                break;
            }
        }
        best.map(|(s, k, n)| (s, k, node_value(n).to_vec()))
    }

    /// The entries of `user_key` with sequence `<= seq`, newest first, down
    /// to the first that is not a merge operand (included), appended to
    /// `out`; true if one was (a merge fold's walk: nothing older is
    /// needed). Found through the sorted index for the shards it covers
    /// (one binary search), one seek per other shard that may hold the
    /// key; only the values returned are copied. Asks for an index as
    /// iterators do.
    pub fn versions(
        this: &Arc<Self>,
        user_key: &[u8],
        seq: SeqNo,
        out: &mut Vec<(SeqNo, ValueKind, Vec<u8>)>,
    ) -> bool {
        if this.len.load(AtomicOrdering::Relaxed) == 0 {
            return false;
        }
        let mut nodes = Vec::new();
        let n = this.shard_count();
        let index = this.index.load_full();
        let covered = index.as_ref().map_or(0, |ix| ix.shards());
        if let Some(ix) = &index {
            ix.entries_of(&types::seek_key(user_key, seq), &mut nodes);
        }
        let probe = types::pack_trailer(seq, types::KIND_FOR_SEEK);
        let h = xxh3_64(user_key);
        for shard in this.shards().skip(covered) {
            if !shard.may_contain(h) {
                continue;
            }
            let mut node = shard.list.seek(&mut |k| cmp_probe(k, user_key, probe));
            while !node.is_null() {
                match types::parse_internal_key(node_key(node)) {
                    Some(p) if p.user_key == user_key => nodes.push(node),
                    _ => break,
                }
                node = shard.list.successor(node);
            }
        }
        let sealed = n.saturating_sub(1);
        if this.index_enabled && sealed >= covered + index::INDEX_AFTER {
            Self::start_index(this, sealed);
        }
        let mut found: Vec<(SeqNo, ValueKind, NodePtr)> = nodes
            .into_iter()
            .filter_map(|n| types::parse_internal_key(node_key(n)).map(|p| (p.seq, p.kind, n)))
            .collect();
        found.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        for (s, kind, node) in found {
            out.push((s, kind, node_value(node).to_vec()));
            if kind != ValueKind::Merge {
                return true;
            }
        }
        false
    }

    /// Calls `f(internal_key, value)` for every entry in order (used by
    /// flush): a merge of the shards. The shards' current nodes are kept
    /// sorted by key, so a step compares the next node with the runner-up
    /// (usually enough: it stays first) or places it by binary search,
    /// instead of comparing every shard's head (up to 32 of them).
    pub fn for_each<E>(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<(), E>) -> Result<(), E> {
        let lists: Vec<&SkipList> = self.shards().map(|s| &s.list).collect();
        let mut heads: Vec<(NodePtr, usize)> = lists
            .iter()
            .enumerate()
            .map(|(i, l)| (l.first(), i))
            .filter(|(n, _)| !n.is_null())
            .collect();
        heads.sort_by(|a, b| types::compare_internal(node_key(a.0), node_key(b.0)));
        self.walked.store(0, AtomicOrdering::Relaxed);
        let mut walked = 0usize;
        while let Some(&(n, i)) = heads.first() {
            f(node_key(n), node_value(n))?;
            walked += 1;
            if walked.is_multiple_of(PROGRESS_STEP) {
                self.walked.store(walked, AtomicOrdering::Relaxed);
            }
            let next = lists[i].successor(n);
            if next.is_null() {
                heads.remove(0);
                continue;
            }
            heads[0] = (next, i);
            let k = node_key(next);
            let Some(second) = heads.get(1) else {
                continue;
            };
            if types::compare_internal(k, node_key(second.0)).is_lt() {
                continue;
            }
            // Heads after the first that order before `next`.
            let before =
                heads[1..].partition_point(|h| types::compare_internal(node_key(h.0), k).is_lt());
            heads[..=before].rotate_left(1);
        }
        self.walked.store(walked, AtomicOrdering::Relaxed);
        Ok(())
    }

    /// Iterators over the shards published now, for a merging iterator (a
    /// shard published later holds only newer sequence numbers): one over
    /// the index of the sealed shards if there is one, and one per shard
    /// it does not cover. Asks for a new index when at least
    /// [`index::INDEX_AFTER`] sealed shards are not covered.
    pub fn add_iterators(this: &Arc<Self>, out: &mut Vec<Box<dyn InternalIterator>>) {
        let n = this.shard_count();
        // Shards are never removed, so an index covers at most `n - 1`.
        let index = this.index.load_full();
        let covered = index.as_ref().map_or(0, |ix| ix.shards());
        if let Some(ix) = index {
            out.push(Box::new(IndexIter::new(this.clone(), ix)));
        }
        for i in covered..n {
            out.push(Box::new(MemIter::new(this.clone(), i)));
        }
        // Every published shard but the newest is sealed.
        let sealed = n.saturating_sub(1);
        if this.index_enabled && sealed >= covered + index::INDEX_AFTER {
            Self::start_index(this, sealed);
        }
    }

    /// Builds an index of shards `0..sealed` on a short-lived thread,
    /// unless one is being built.
    fn start_index(this: &Arc<Self>, sealed: usize) {
        if this.indexing.swap(true, AtomicOrdering::AcqRel) {
            return;
        }
        let mem = Arc::clone(this);
        // A merge of several shards takes milliseconds: not on a reader's
        // path. A failed spawn only leaves the shards unindexed.
        let spawned = crate::sched::spawn("strata-memindex", move || {
            mem.build_index(sealed);
            mem.indexing.store(false, AtomicOrdering::Release);
        });
        if spawned.is_err() {
            this.indexing.store(false, AtomicOrdering::Release);
        }
    }

    /// Builds and publishes the index of shards `0..sealed` (which must
    /// be sealed: shards below the newest published one), unless the
    /// current index covers as many.
    pub(crate) fn build_index(&self, sealed: usize) {
        let sealed = sealed.min(self.shard_count().saturating_sub(1));
        let prev = self.index.load_full();
        if prev.as_ref().is_some_and(|p| p.shards() >= sealed) || sealed == 0 {
            return;
        }
        let ix = SortedIndex::build(self, sealed, prev.as_deref());
        self.index_bytes.store(ix.bytes(), AtomicOrdering::Relaxed);
        self.index.store(Some(Arc::new(ix)));
    }

    /// The skiplist of shard `i` (published), if any.
    fn list(&self, i: usize) -> Option<&SkipList> {
        if i < self.count.load(AtomicOrdering::Acquire) {
            self.shards[i].get().map(|s| &s.list)
        } else {
            None
        }
    }

    /// Approximate bytes used (arenas, filters, the sorted index and the
    /// range tombstones).
    pub fn approximate_size(&self) -> usize {
        self.size.load(AtomicOrdering::Relaxed)
            + self.index_bytes.load(AtomicOrdering::Relaxed)
            + self.range_bytes.load(AtomicOrdering::Relaxed)
    }

    /// The memory it holds: its arena chunks whole (the unused tail of
    /// each shard's last chunk included, which
    /// [`approximate_size`](Self::approximate_size) leaves out), its
    /// sorted index and its range tombstones. What the memory budget
    /// counts; `approximate_size` is what fills a write buffer.
    pub fn memory_held(&self) -> usize {
        self.held.load(AtomicOrdering::Relaxed)
            + self.index_bytes.load(AtomicOrdering::Relaxed)
            + self.range_bytes.load(AtomicOrdering::Relaxed)
    }

    /// What [`memory_held`](Self::memory_held) was when it was made: the
    /// chunk its first shard's filter takes, which the first entries fill
    /// after it.
    pub fn memory_held_when_empty(&self) -> usize {
        self.empty_held
    }

    /// The share of the entries the running (or last) flush has walked,
    /// in [0, 1], to within [`PROGRESS_STEP`] entries.
    pub fn flush_progress(&self) -> f64 {
        let len = self.len();
        if len == 0 {
            return 0.0;
        }
        (self.walked.load(AtomicOrdering::Relaxed) as f64 / len as f64).min(1.0)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    /// True when no entry and no range tombstone was added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.range_count.load(AtomicOrdering::Acquire) == 0
    }

    /// Largest sequence number inserted.
    pub fn max_seq(&self) -> SeqNo {
        self.max_seq.load(AtomicOrdering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::{InternalIterator, MergeIter};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn merged(m: &Arc<MemTable>) -> MergeIter {
        let mut children = Vec::new();
        MemTable::add_iterators(m, &mut children);
        MergeIter::new(children)
    }

    #[test]
    fn get_sees_newest_visible_version() {
        // One shard, and a new shard after (about) every entry.
        for shard_bytes in [64 << 20, 1] {
            let m = MemTable::new(1, shard_bytes, MAX_SHARDS);
            m.add(1, ValueKind::Value, b"k", b"v1");
            m.add(2, ValueKind::Value, b"k", b"v2");
            m.add(3, ValueKind::Delete, b"k", b"");
            m.add(4, ValueKind::Value, b"k2", b"x");
            assert_eq!(m.get(b"k", 0), None);
            assert_eq!(m.get(b"k", 1).map(|e| e.2), Some(b"v1".to_vec()));
            assert_eq!(m.get(b"k", 2).map(|e| e.2), Some(b"v2".to_vec()));
            assert_eq!(m.get(b"k", 3).map(|e| e.1), Some(ValueKind::Delete));
            assert_eq!(m.get(b"j", 9), None);
            assert_eq!(m.get(b"k2", 9).map(|e| e.2), Some(b"x".to_vec()));
            assert_eq!(m.max_seq(), 4);
            assert!(m.approximate_size() > 0);
            assert_eq!(m.shard_count(), if shard_bytes == 1 { 5 } else { 1 });
        }
    }

    /// Small entries seal shards by count before their bytes do, and
    /// everything stays readable across the shards, in order.
    #[test]
    fn small_entries_get_smaller_shards() {
        let shard_bytes = 64 << 10;
        let per_shard = shard_bytes / SHARD_ENTRY_BYTES;
        let m = Arc::new(MemTable::new(1, shard_bytes, MAX_SHARDS));
        let n = per_shard * 4 + 10;
        for i in 0..n {
            m.add(
                i as u64 + 1,
                ValueKind::Delete,
                format!("{i:08}").as_bytes(),
                b"",
            );
        }
        // Tombstones of 8-byte keys take well under SHARD_ENTRY_BYTES of
        // arena each: the byte bound alone would have sealed fewer shards.
        assert!(
            m.approximate_size() < 4 * shard_bytes,
            "{}",
            m.approximate_size()
        );
        assert_eq!(m.shard_count(), 5);
        for i in (0..n).step_by(97) {
            let got = m.get(format!("{i:08}").as_bytes(), n as u64);
            assert_eq!(
                got.map(|e| (e.0, e.1)),
                Some((i as u64 + 1, ValueKind::Delete))
            );
        }
        let mut it = merged(&m);
        it.seek_to_first();
        let mut seen = 0;
        while it.valid() {
            assert_eq!(types::user_key(it.key()), format!("{seen:08}").as_bytes());
            seen += 1;
            it.next();
        }
        assert_eq!(seen, n);
        // Values of ~100 bytes are sealed by bytes, as before.
        let big = MemTable::new(1, shard_bytes, MAX_SHARDS);
        for i in 0..per_shard {
            big.add(
                i as u64 + 1,
                ValueKind::Value,
                format!("{i:08}").as_bytes(),
                &[7; 100],
            );
        }
        assert!(big.shard_count() > 1);
        assert!(big.shard_count() <= per_shard * 150 / shard_bytes + 1);
    }

    #[test]
    fn a_flush_walk_publishes_its_progress() {
        let m = MemTable::new(1, 64 << 10, MAX_SHARDS);
        assert_eq!(m.flush_progress(), 0.0);
        let n = 3 * PROGRESS_STEP + 100;
        for i in 0..n {
            m.add(
                i as u64 + 1,
                ValueKind::Value,
                &(i as u64).to_be_bytes(),
                b"v",
            );
        }
        let mut seen = Vec::new();
        let mut walked = 0usize;
        m.for_each(|_, _| {
            walked += 1;
            seen.push(m.flush_progress());
            Ok::<(), ()>(())
        })
        .expect("walk");
        assert_eq!(walked, n);
        // Published in steps while walking, never ahead of the walk.
        assert!(seen.windows(2).all(|w| w[0] <= w[1]));
        assert!(seen
            .iter()
            .enumerate()
            .all(|(i, &p)| p <= (i + 1) as f64 / n as f64));
        assert!(seen[2 * PROGRESS_STEP] > 0.5);
        assert_eq!(m.flush_progress(), 1.0);
    }

    #[test]
    fn iterator_walks_both_ways_in_internal_order() {
        for shard_bytes in [64 << 20, 2048] {
            let m = Arc::new(MemTable::new(1, shard_bytes, MAX_SHARDS));
            let mut expect = Vec::new();
            for i in 0..200u32 {
                let k = format!("key{:05}", i * 7 % 200);
                m.add(
                    u64::from(i) + 1,
                    ValueKind::Value,
                    k.as_bytes(),
                    &i.to_le_bytes(),
                );
                expect.push(types::internal_key(k.as_bytes(), u64::from(i) + 1, 1));
            }
            assert_eq!(m.shard_count() > 1, shard_bytes == 2048);
            expect.sort_by(|a, b| types::compare_internal(a, b));
            let mut it = merged(&m);
            it.seek_to_first();
            let mut got = Vec::new();
            while it.valid() {
                got.push(it.key().to_vec());
                it.next();
            }
            assert_eq!(got, expect);
            let mut flushed = Vec::new();
            m.for_each(|k, _| {
                flushed.push(k.to_vec());
                Ok::<(), ()>(())
            })
            .expect("walk");
            assert_eq!(flushed, expect);
            it.seek_to_last();
            let mut back = Vec::new();
            while it.valid() {
                back.push(it.key().to_vec());
                it.prev();
            }
            back.reverse();
            assert_eq!(back, expect);
            it.seek(&types::seek_key(b"key00100", u64::MAX >> 8));
            assert!(it.valid());
            assert_eq!(types::user_key(it.key()), b"key00100");
            it.prev();
            assert_eq!(types::user_key(it.key()), b"key00099");
        }
    }

    /// Many versions of few keys across many shards: every read at every
    /// snapshot matches a model, in order and out of order (a recovered log
    /// may repeat older records).
    #[test]
    fn sharded_lookups_match_a_model_at_every_snapshot() {
        for out_of_order in [false, true] {
            let m = MemTable::new(1, 4096, MAX_SHARDS);
            let mut model: BTreeMap<(Vec<u8>, SeqNo), Option<Vec<u8>>> = BTreeMap::new();
            let mut seqs: Vec<SeqNo> = (1..=3000).collect();
            if out_of_order {
                // Reverse every run of 100: later shards hold older entries.
                for c in seqs.chunks_mut(100) {
                    c.reverse();
                }
            }
            for &seq in &seqs {
                let key = format!("k{:03}", (seq * 7919) % 97).into_bytes();
                if seq % 11 == 0 {
                    m.add(seq, ValueKind::Delete, &key, b"");
                    model.insert((key, seq), None);
                } else {
                    let v = format!("v{seq}").into_bytes();
                    m.add(seq, ValueKind::Value, &key, &v);
                    model.insert((key, seq), Some(v));
                }
            }
            assert!(m.shard_count() > 8);
            assert_eq!(m.len(), 3000);
            for snap in (0..=3001).step_by(37) {
                for k in 0..98u64 {
                    let key = format!("k{k:03}").into_bytes();
                    let want = model
                        .range((key.clone(), 0)..=(key.clone(), snap))
                        .next_back()
                        .map(|((_, s), v)| (*s, v.clone()));
                    let got = m
                        .get(&key, snap)
                        .map(|(s, kind, v)| (s, (kind == ValueKind::Value).then_some(v)));
                    assert_eq!(got, want, "key {k} at {snap}, out of order {out_of_order}");
                }
            }
        }
    }

    #[test]
    fn options_shape_the_shards() {
        let o = crate::Options::default();
        let m = MemTable::with_options(1, &o);
        assert_eq!((m.shard_bytes, m.max_shards), (2 << 20, MAX_SHARDS));
        let one = MemTable::with_options(1, &o.clone().memtable_shard_size(64 << 20));
        assert_eq!((one.shard_bytes, one.max_shards), (64 << 20, 1));
        // Past the write buffer, one shard still takes everything.
        for i in 0..100u64 {
            one.add(i + 1, ValueKind::Value, &i.to_be_bytes(), &[0; 1000]);
        }
        let tiny = MemTable::with_options(1, &o.clone().write_buffer_size(4096));
        for i in 0..100u64 {
            tiny.add(i + 1, ValueKind::Value, &i.to_be_bytes(), &[0; 1000]);
        }
        assert_eq!(tiny.shard_count(), 1);
        // Small shards of a large buffer: at least 1/32 of it each.
        let small = MemTable::with_options(1, &o.clone().memtable_shard_size(64 << 10));
        assert_eq!(small.shard_bytes, 2 << 20);
        // An empty memtable is well below its write buffer.
        for wbs in [4096, 64 << 10, 64 << 20] {
            let m = MemTable::with_options(1, &o.clone().write_buffer_size(wbs));
            assert!(m.approximate_size() * 32 <= wbs, "{wbs}");
        }
    }

    #[test]
    fn a_full_shard_table_takes_the_rest() {
        let m = MemTable::new(1, 1, MAX_SHARDS);
        for i in 0..(MAX_SHARDS as u64 + 50) {
            m.add(i + 1, ValueKind::Value, &i.to_be_bytes(), b"v");
        }
        assert_eq!(m.shard_count(), MAX_SHARDS);
        for i in 0..(MAX_SHARDS as u64 + 50) {
            assert_eq!(
                m.get(&i.to_be_bytes(), u64::MAX >> 8).map(|e| e.0),
                Some(i + 1)
            );
        }
    }

    /// Scans and seeks read the same entries whether the sealed shards are
    /// read one skiplist each or through an index of some or all of them,
    /// and the flush's walk (`for_each`) yields them in the same order;
    /// keys share 8-byte prefixes, are shorter than 8 bytes, or end in
    /// zero bytes, and keys have several versions across shards.
    #[test]
    fn versions_walk_index_and_shards_newest_first_to_a_base() {
        let mut m = MemTable::new(1, 4 << 10, MAX_SHARDS);
        m.index_enabled = false;
        let m = Arc::new(m);
        // Key "k" gets a value at 50, then operands; other keys fill shards.
        let mut seq = 0;
        for i in 0..400u32 {
            seq += 1;
            let (kind, key) = match i % 8 {
                0 if seq == 49 => (ValueKind::Value, b"k".to_vec()),
                0 if seq > 49 => (ValueKind::Merge, b"k".to_vec()),
                _ => (ValueKind::Value, format!("x{i:04}").into_bytes()),
            };
            m.add(seq, kind, &key, &seq.to_le_bytes());
        }
        assert!(m.shard_count() > 3, "{}", m.shard_count());
        let want: Vec<SeqNo> = (49..=400).filter(|s| (s - 1) % 8 == 0).rev().collect();
        for indexed in [0, 2, m.shard_count() - 1] {
            if indexed > 0 {
                m.build_index(indexed);
            }
            let mut out = Vec::new();
            assert!(MemTable::versions(&m, b"k", 400, &mut out), "{indexed}");
            let seqs: Vec<SeqNo> = out.iter().map(|e| e.0).collect();
            assert_eq!(seqs, want, "index over {indexed} shards");
            assert_eq!(out.last().map(|e| e.1), Some(ValueKind::Value));
            assert!(out.iter().all(|(s, _, v)| v == &s.to_le_bytes()));
            // Below the value: nothing.
            out.clear();
            assert!(!MemTable::versions(&m, b"k", 48, &mut out));
            assert!(out.is_empty());
        }
    }

    #[test]
    fn the_sorted_index_reads_as_the_shards() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(11);
        let mut m = MemTable::new(1, 4 << 10, MAX_SHARDS);
        // Indexes are built here, in step, not by iterators' threads.
        m.index_enabled = false;
        let m = Arc::new(m);
        let pick = |rng: &mut SmallRng| -> Vec<u8> {
            match rng.gen_range(0..4) {
                0 => format!("prefix00{:03}", rng.gen_range(0..200)).into_bytes(),
                1 => vec![b'a'; rng.gen_range(0..10)],
                2 => {
                    let mut k = vec![b'p', b'r', b'e', b'f', b'i', b'x', b'0', b'0'];
                    k.resize(8 + rng.gen_range(0..3), 0);
                    k
                }
                _ => format!("{:x}", rng.gen_range(0..5000u32)).into_bytes(),
            }
        };
        let mut all: Vec<Vec<u8>> = Vec::new();
        let mut seq = 0;
        let mut targets: Vec<Vec<u8>> = Vec::new();
        for round in 0..6 {
            for _ in 0..300 {
                seq += 1;
                let k = pick(&mut rng);
                let kind = if rng.gen_bool(0.2) {
                    ValueKind::Delete
                } else {
                    ValueKind::Value
                };
                m.add(seq, kind, &k, format!("v{seq}").as_bytes());
                all.push(types::internal_key(&k, seq, kind as u8));
            }
            // Index a growing part of the sealed shards (none in round 0).
            if round > 0 {
                let sealed = m.shard_count() - 1;
                m.build_index(sealed * round / 5);
            }
            let covered = m.index.load_full().map_or(0, |ix| ix.shards());
            assert!(round < 2 || covered > 0, "round {round}: no index");
            all.sort_by(|a, b| types::compare_internal(a, b));
            targets.clear();
            for _ in 0..200 {
                let k = pick(&mut rng);
                targets.push(types::seek_key(&k, rng.gen_range(0..=seq)));
            }
            // The flush's walk yields the same order.
            let mut walked = Vec::new();
            m.for_each(|k, _| {
                walked.push(k.to_vec());
                Ok::<(), ()>(())
            })
            .expect("walk");
            assert!(walked == all, "round {round}: the flush walk's order");
            let mut it = merged(&m);
            // Forward and backward walks.
            it.seek_to_first();
            for want in &all {
                assert!(it.valid());
                assert_eq!(it.key(), want.as_slice());
                it.next();
            }
            assert!(!it.valid());
            it.seek_to_last();
            for want in all.iter().rev() {
                assert_eq!(it.key(), want.as_slice());
                it.prev();
            }
            assert!(!it.valid());
            // Seeks, each followed by a few steps both ways.
            for t in &targets {
                let at = all.partition_point(|k| types::compare_internal(k, t).is_lt());
                it.seek(t);
                assert_eq!(it.valid(), at < all.len());
                for want in all.iter().skip(at).take(3) {
                    assert_eq!(it.key(), want.as_slice());
                    it.next();
                }
                let before = all.partition_point(|k| types::compare_internal(k, t).is_le());
                it.seek_for_prev(t);
                assert_eq!(it.valid(), before > 0);
                for want in all[before.saturating_sub(3)..before].iter().rev() {
                    assert_eq!(it.key(), want.as_slice());
                    it.prev();
                }
            }
        }
        assert!(m.approximate_size() > m.size.load(AtomicOrdering::Relaxed));
    }

    /// The memory a memtable holds counts each shard's arena chunks whole:
    /// with shards far smaller than a chunk, it is a chunk per shard, far
    /// past the bytes its entries use.
    #[test]
    fn memory_held_counts_whole_chunks() {
        const CHUNK: usize = 1 << 20;
        // An empty one holds its first shard's filter.
        let one = MemTable::new(1, 64 << 20, 1);
        assert!(one.memory_held() >= one.approximate_size());
        assert!(one.approximate_size() > 0);
        let m = MemTable::new(1, 4 << 10, MAX_SHARDS);
        for i in 0..2000u64 {
            m.add(
                i + 1,
                ValueKind::Value,
                format!("k{i:05}").as_bytes(),
                &[7; 40],
            );
        }
        let shards = m.shard_count();
        assert!(shards > 4, "{shards} shards");
        assert!(m.memory_held() >= shards * CHUNK);
        assert!(m.approximate_size() < shards * CHUNK / 8);
        // Shards of whole chunks are sealed as their last chunk fills,
        // not after opening one more: a sealed shard holds its size.
        let holds_its_shards = |entries: u64, value: &[u8]| {
            let m = MemTable::new(1, 2 << 20, MAX_SHARDS);
            for i in 0..entries {
                let k = format!("k{:08}", i.wrapping_mul(0x9e37_79b9) % 1_000_000);
                m.add(i + 1, ValueKind::Value, k.as_bytes(), value);
            }
            let shards = m.shard_count();
            assert!(shards >= 3, "{shards} shards");
            assert!(
                m.memory_held() <= shards * (2 << 20) + CHUNK,
                "{} held in {shards} shards of {} B values",
                m.memory_held(),
                value.len()
            );
        };
        holds_its_shards(60_000, &[7; 100]);
        // Entries past the 4 KiB tail seal a shard as well: 16 KiB values
        // leave 12 KiB free in a chunk, which the next one does not fit.
        holds_its_shards(400, &[7; 16 << 10]);
        // Large entries get chunks of their own, counted too.
        let big = MemTable::new(1, 64 << 20, 1);
        let before = big.memory_held();
        big.add(1, ValueKind::Value, b"k", &vec![1; 3 << 20]);
        assert!(big.memory_held() >= before + (3 << 20));
    }

    /// An iterator that finds enough sealed shards unindexed starts a
    /// build, and later iterators use the index.
    #[test]
    fn iterators_ask_for_an_index() {
        let m = Arc::new(MemTable::new(1, 4 << 10, MAX_SHARDS));
        for i in 0..2000u64 {
            m.add(
                i + 1,
                ValueKind::Value,
                format!("{:05}", i * 7919 % 2000).as_bytes(),
                b"v",
            );
        }
        assert!(m.shard_count() > index::INDEX_AFTER + 1);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let mut it = merged(&m);
            it.seek_to_first();
            let mut n = 0;
            while it.valid() {
                n += 1;
                it.next();
            }
            assert_eq!(n, 2000);
            if m.index.load_full().is_some() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no index built");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut out = Vec::new();
        MemTable::add_iterators(&m, &mut out);
        assert_eq!(out.len(), 2, "the index and the newest shard");
    }
}
