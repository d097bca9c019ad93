//! The read path: memtable → immutable memtables → L0 → L1..Ln, at one
//! sequence number. A read takes no engine lock, except the state mutex,
//! briefly, when its charge uses up a table's read allowance or doubles
//! the table's misses since (to wake the threads that pick a
//! read-triggered compaction); never with `read_compaction=false`. With a
//! ttl, each get, iterator and scan also takes the write-times mutex once
//! to read the expiry horizon (`ttl.rs`); an iterator or scan keeps the
//! horizon it began with, so what expires while it is open stays in it.

use super::{Db, SuperVersion};
use crate::error::Result;
use crate::iter::{DbIter, InternalIterator, MergeIter};
use crate::memtable::MemTable;
use crate::merge::MergeOperator;
use crate::stats::Stats;
use crate::types::{self, SeqNo, ValueKind};
use crate::version::LevelIter;
use crate::version::{ReadCharge, Version};
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Iterator seeks per thread between two samples of read-triggered
/// compaction.
const SEEK_SAMPLE_PERIOD: u64 = 8;

thread_local! {
    /// This thread's iterator seeks (read-triggered compaction's sampling).
    static SEEKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Options of one read.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions<'a> {
    /// Read at this snapshot instead of the latest state.
    pub snapshot: Option<&'a super::Snapshot>,
}

/// The reads of one keyspace (`fam`) of an open database: what
/// [`Db`]'s and `Keyspace`'s read methods run once they checked the
/// database is open.
pub(crate) struct Reads<'a> {
    pub inner: &'a Arc<super::Inner>,
    pub fam: &'a super::Family,
}

impl Db {
    /// The value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// The value of `key` under `opts`.
    pub fn get_opt(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        self.reads().get_opt(key.as_ref(), opts)
    }

    /// An unpositioned iterator over the database at `opts`' snapshot (or
    /// now). Position it with `seek_to_first`, `seek_to_last`, `seek` or
    /// `seek_for_prev`.
    pub fn iter(&self, opts: &ReadOptions<'_>) -> Result<DbIter> {
        self.check_open()?;
        Ok(self.reads().iter(opts))
    }

    /// The entries with keys in `range`, in order (reverse it with `.rev()`).
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<Scan> {
        self.scan_opt(range, &ReadOptions::default())
    }

    /// `scan` under `opts`.
    pub fn scan_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        opts: &ReadOptions<'_>,
    ) -> Result<Scan> {
        self.check_open()?;
        Ok(self.reads().scan_opt(range, opts))
    }

    /// The reads of the `default` keyspace.
    fn reads(&self) -> Reads<'_> {
        Reads {
            inner: &self.inner,
            fam: &self.inner.default,
        }
    }
}

impl Reads<'_> {
    /// The value of `key` under `opts`.
    pub fn get_opt(&self, key: &[u8], opts: &ReadOptions<'_>) -> Result<Option<Vec<u8>>> {
        self.inner.stats.user_reads.add(1);
        let sv = self.fam.super_version.load();
        let seq = self.read_seq(opts);
        let expired_to = self.fam.expired_to();
        Ok(match self.newest(&sv, key, seq)? {
            Some((s, ValueKind::Value, v)) if s > expired_to && !sv.hides(key, s, seq) => Some(v),
            Some((s, ValueKind::Merge, v)) if s > expired_to && !sv.hides(key, s, seq) => {
                self.get_folded(&sv, key, (seq, expired_to), (s, v))?
            }
            _ => None,
        })
    }

    /// The newest entry of `key` with a sequence `<= seq` in `sv`: the
    /// memtable, the immutable ones newest first, the stale picker's
    /// shortcut, then the version (range tombstones not applied).
    fn newest(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        if let Some(hit) = sv.mem.get(key, seq) {
            return Ok(Some(hit));
        }
        for m in &sv.imm {
            if let Some(h) = m.get(key, seq) {
                return Ok(Some(h));
            }
        }
        self.newest_in_tables(sv, key, seq)
    }

    /// [`newest`](Self::newest) below the memtables: the stale picker's
    /// shortcut, then the version.
    fn newest_in_tables(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        if let Some(h) = self.shortcut(&sv.version, key, seq)? {
            return Ok(Some(h));
        }
        let inner = &self.inner;
        let mut charge = ReadCharge::new(self.fam.opts.read_compaction);
        let hit = sv.version.get(key, &types::seek_key(key, seq), &mut charge);
        if charge.exhausted {
            // A table reads keep missing: the picker may compact it.
            let _st = inner.state.lock();
            inner.bg_cv.notify_all();
        }
        hit
    }

    /// The value of `key` at `read_seq` when its newest visible version is
    /// the merge operand `first` (sequence, operand): the older versions
    /// are read newest first down to a base (a value; none at a deletion,
    /// a hidden or expired version (at or below `expired_to`) or the key's
    /// end), and the operands folded onto it. The memtables give all their versions of the key in one walk
    /// each ([`MemTable::versions`]); below them each older version is a
    /// lookup of the newest below the last.
    fn get_folded(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        (read_seq, expired_to): (SeqNo, SeqNo),
        first: (SeqNo, Vec<u8>),
    ) -> Result<Option<Vec<u8>>> {
        Stats::add(&self.inner.stats.merge_folds, 1);
        let gone = |s: SeqNo| s <= expired_to || sv.hides(key, s, read_seq);
        let (mut below, operand) = first;
        let mut operands = vec![operand];
        // The memtables' versions below the first operand, newest first
        // (the memtables hold every version newer than any table's).
        let mut in_memory = Vec::new();
        let bound = below.saturating_sub(1);
        if !MemTable::versions(&sv.mem, key, bound, &mut in_memory) {
            for m in &sv.imm {
                if MemTable::versions(m, key, bound, &mut in_memory) {
                    break;
                }
            }
        }
        let mut base = None;
        let mut ended = below == 0;
        for (s, kind, v) in in_memory {
            if s >= below {
                continue;
            }
            if gone(s) {
                ended = true;
                break;
            }
            match kind {
                ValueKind::Merge => {
                    operands.push(v);
                    below = s;
                }
                ValueKind::Value => {
                    base = Some(v);
                    ended = true;
                    break;
                }
                ValueKind::Delete | ValueKind::RangeDelete => {
                    ended = true;
                    break;
                }
            }
        }
        // Every memtable version was read: the rest is in the tables.
        while !ended {
            let Some(bound) = below.checked_sub(1) else {
                break;
            };
            match self.newest_in_tables(sv, key, bound)? {
                Some((s, kind, v)) if !gone(s) => match kind {
                    ValueKind::Value => {
                        base = Some(v);
                        ended = true;
                    }
                    ValueKind::Merge => {
                        operands.push(v);
                        below = s;
                    }
                    ValueKind::Delete | ValueKind::RangeDelete => ended = true,
                },
                _ => ended = true,
            }
        }
        let ops: Vec<&[u8]> = operands.iter().rev().map(Vec::as_slice).collect();
        let op = self.fam.opts.merge_operator.get();
        crate::merge::fold(op, key, base.as_deref(), &ops).map(Some)
    }

    /// The keyspace's merge operator.
    fn merge_op(&self) -> Option<Arc<dyn MergeOperator>> {
        self.fam.opts.merge_operator.get().cloned()
    }

    /// The read shortcut of active compaction: the table the update table
    /// names for `key`, if the reader's `version` holds it and it holds the
    /// named version, visible at `seq`. `None` sends the read down the
    /// normal path. The named version is the newest in any table (the
    /// memtables were searched already), so it is the answer whenever the
    /// reader can see it.
    fn shortcut(
        &self,
        version: &crate::version::Version,
        key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        let inner = &self.inner;
        let Some(entry) = self.fam.designs.tracker.newest(key) else {
            return Ok(None);
        };
        if entry.seq > seq {
            return Ok(None);
        }
        let hit = match version.table_by_id(entry.table) {
            Some(f) => f.with_table(|t| t.get(&types::seek_key(key, seq), key))??,
            None => None,
        };
        match hit {
            Some(h) if h.0 == entry.seq => {
                Stats::add(&inner.stats.shortcut_hits, 1);
                Ok(Some(h))
            }
            _ => {
                Stats::add(&inner.stats.shortcut_misses, 1);
                Ok(None)
            }
        }
    }

    fn read_seq(&self, opts: &ReadOptions<'_>) -> SeqNo {
        match opts.snapshot {
            Some(s) => s.sequence(),
            None => self.inner.last_seq.load(Ordering::Acquire),
        }
    }

    /// An unpositioned iterator over the database at `opts`' snapshot (or
    /// now). Position it with `seek_to_first`, `seek_to_last`, `seek` or
    /// `seek_for_prev`.
    pub fn iter(&self, opts: &ReadOptions<'_>) -> DbIter {
        let sv: Arc<SuperVersion> = self.fam.super_version.load_full();
        let seq = self.read_seq(opts);
        let version = Arc::clone(&sv.version);
        let view = (seq, self.fam.expired_to());
        self.sampled(iter_at(sv, view, self.merge_op()), version)
    }

    /// `it`, a view of `version`, with its seeks sampled for
    /// read-triggered compaction (when on): one seek in
    /// [`SEEK_SAMPLE_PERIOD`] per thread charges `version`'s tables
    /// ([`Version::sample_seek`]). The database is reached (weakly) only to
    /// wake its background threads when a table's allowance runs out.
    fn sampled(&self, it: DbIter, version: Arc<Version>) -> DbIter {
        if !self.fam.opts.read_compaction {
            return it;
        }
        let inner = Arc::downgrade(self.inner);
        it.sample_seeks(Arc::new(move |key: &[u8]| {
            let due = SEEKS
                .try_with(|n| {
                    let k = n.get().wrapping_add(1);
                    n.set(k);
                    k % SEEK_SAMPLE_PERIOD == 0
                })
                .unwrap_or(false);
            if !due || !version.sample_seek(key) {
                return;
            }
            if let Some(inner) = inner.upgrade() {
                if !inner.closed.load(Ordering::Acquire) {
                    let _st = inner.state.lock();
                    inner.bg_cv.notify_all();
                }
            }
        }))
    }

    /// `scan` under `opts`.
    pub fn scan_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        opts: &ReadOptions<'_>,
    ) -> Scan {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        // Both ends read the same view.
        let sv: Arc<SuperVersion> = self.fam.super_version.load_full();
        let seq = (self.read_seq(opts), self.fam.expired_to());
        let (lo, hi) = (own(range.start_bound()), own(range.end_bound()));
        Scan {
            front: self.sampled(
                iter_at(sv.clone(), seq, self.merge_op()).bounded(lo.clone(), hi.clone()),
                Arc::clone(&sv.version),
            ),
            back: None,
            view: (sv, seq, self.merge_op()),
            lo,
            hi,
            started: false,
            done: false,
        }
    }
}

/// An iterator over `sv` at sequence `seq`, versions at or below
/// `expired_to` expired, folding operands with `op`.
fn iter_at(
    sv: Arc<SuperVersion>,
    (seq, expired_to): (SeqNo, SeqNo),
    op: Option<Arc<dyn MergeOperator>>,
) -> DbIter {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    MemTable::add_iterators(&sv.mem, &mut children);
    for m in &sv.imm {
        MemTable::add_iterators(m, &mut children);
    }
    // Level 0's rows (newer), then its tables.
    sv.version.rows.add_iterators(&mut children);
    sv.version.level0().add_iterators(&mut children);
    for files in sv.version.levels.iter().skip(1) {
        if !files.is_empty() {
            children.push(Box::new(LevelIter::new(files.clone())));
        }
    }
    let cover = sv.cover();
    DbIter::new(MergeIter::new(children), seq, cover, op, sv).expiring(expired_to)
}

/// What both ends of a [`Scan`] read: the super-version, the sequence and
/// expiry horizon, and the merge operator.
type View = (
    Arc<SuperVersion>,
    (SeqNo, SeqNo),
    Option<Arc<dyn MergeOperator>>,
);

/// A range scan as a double-ended Rust iterator of `Result<(key, value)>`.
///
/// Each end is a [`DbIter`] over the same view; the back one is made on the
/// first `next_back` (most scans only go forward, and making an iterator
/// opens a cursor on every memtable shard and table it reads). Each end
/// stays on the entry it returned last, which is what the other end checks
/// for the two meeting.
pub struct Scan {
    front: DbIter,
    back: Option<DbIter>,
    /// The view both ends read (sequence, expiry horizon), and the merge
    /// operator.
    view: View,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// The front end was positioned.
    started: bool,
    done: bool,
}

impl Scan {
    fn below_hi(&self, k: &[u8]) -> bool {
        match &self.hi {
            Bound::Included(h) => k <= h.as_slice(),
            Bound::Excluded(h) => k < h.as_slice(),
            Bound::Unbounded => true,
        }
    }

    fn above_lo(&self, k: &[u8]) -> bool {
        match &self.lo {
            Bound::Included(l) => k >= l.as_slice(),
            Bound::Excluded(l) => k > l.as_slice(),
            Bound::Unbounded => true,
        }
    }

    /// The two ends met: a key already returned from the other side (the
    /// entry that side's iterator is still on).
    fn crossed(&self, k: &[u8], from_front: bool) -> bool {
        if from_front {
            self.back
                .as_ref()
                .is_some_and(|b| b.valid() && k >= b.key())
        } else {
            self.started && self.front.valid() && k <= self.front.key()
        }
    }
}

impl Scan {
    /// Moves the front end to the next entry in range: true when it is on
    /// one, false at the end (or where the ends met).
    fn step_front(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        if !self.started {
            self.started = true;
            match &self.lo {
                Bound::Included(l) | Bound::Excluded(l) => self.front.seek(l),
                Bound::Unbounded => self.front.seek_to_first(),
            }
            if let Bound::Excluded(l) = &self.lo {
                if self.front.valid() && self.front.key() == l.as_slice() {
                    self.front.next();
                }
            }
        } else {
            self.front.next();
        }
        if !self.front.valid() {
            self.done = true;
            return self.front.status().map(|()| false);
        }
        let k = self.front.key();
        if !self.below_hi(k) || self.crossed(k, true) {
            self.done = true;
            return Ok(false);
        }
        Ok(true)
    }

    /// [`step_front`](Self::step_front) for the back end, made on first use.
    fn step_back(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        match &mut self.back {
            Some(b) => b.prev(),
            None => {
                let (sv, seq, op) = &self.view;
                let b = self.back.insert(
                    iter_at(Arc::clone(sv), *seq, op.clone())
                        .bounded(self.lo.clone(), self.hi.clone()),
                );
                match &self.hi {
                    Bound::Included(h) | Bound::Excluded(h) => b.seek_for_prev(h),
                    Bound::Unbounded => b.seek_to_last(),
                }
                if let Bound::Excluded(h) = &self.hi {
                    if b.valid() && b.key() == h.as_slice() {
                        b.prev();
                    }
                }
            }
        }
        let Some(back) = self.back.as_ref() else {
            return Ok(false);
        };
        if !back.valid() {
            self.done = true;
            return back.status().map(|()| false);
        }
        let k = back.key();
        if !self.above_lo(k) || self.crossed(k, false) {
            self.done = true;
            return Ok(false);
        }
        Ok(true)
    }

    /// Tells the sources, before the first forward step, that the walk
    /// from the front returns at most `limit` entries
    /// ([`DbIter::scan_hint`]); nothing once the walk started, or for no
    /// limit (`usize::MAX`).
    pub(crate) fn hint_limit(&mut self, limit: usize) {
        if !self.started && limit != usize::MAX {
            self.front.scan_hint(limit);
        }
    }

    /// Hands up to `limit` entries, from the front (or from the back when
    /// `reverse`), to `f` where the iterator holds them, without copies;
    /// returns how many (`KvStore::scan_visit`).
    pub(crate) fn visit(
        mut self,
        limit: usize,
        reverse: bool,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        if !reverse {
            self.hint_limit(limit);
        }
        let mut n = 0;
        while n < limit {
            let on = if reverse {
                self.step_back()?
            } else {
                self.step_front()?
            };
            let it = if reverse {
                self.back.as_ref()
            } else {
                Some(&self.front)
            };
            match it {
                Some(it) if on => f(it.key(), it.value()),
                _ => break,
            }
            n += 1;
        }
        Ok(n)
    }
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step_front() {
            Ok(true) => Some(Ok((self.front.key().to_vec(), self.front.value().to_vec()))),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl DoubleEndedIterator for Scan {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self.step_back() {
            Ok(true) => {
                let b = self.back.as_ref()?;
                Some(Ok((b.key().to_vec(), b.value().to_vec())))
            }
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
