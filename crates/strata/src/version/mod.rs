//! Versions: which table files make up each level at a point in time.
//!
//! A [`Version`] is immutable; readers and iterators hold an `Arc` to the one
//! they started with. [`VersionSet`] owns the MANIFEST and installs edits.
//! A table file is deleted when it was removed by an edit *and* the last
//! version, iterator or compaction holding its [`FileMeta`] lets go. A
//! `FileMeta` does not keep its table open: the shared [`TableCache`] does,
//! for at most `max_open_files` tables at a time.

mod level0;
mod level_iter;
mod set;
mod table_cache;

pub use crate::edit::{Edit, FileDesc};
pub use level0::Level0;
pub use level_iter::LevelIter;
pub(crate) use set::{check_header, current_manifest};
pub use set::{PendingEdit, VersionSet, Written};
pub use table_cache::{TableCache, TableCacheStats};

use crate::error::Result;
use crate::stats::Striped;
use crate::table::Table;
use crate::types::{self, SeqNo, ValueKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

/// Test instrument: how many table ranges this thread compared with a key
/// (`FileMeta::overlaps` calls and binary-search steps).
#[cfg(test)]
pub(crate) mod probes {
    use std::cell::Cell;
    thread_local! {
        static PROBES: Cell<u64> = const { Cell::new(0) };
    }
    pub fn count() {
        PROBES.with(|c| c.set(c.get() + 1));
    }
    /// The count so far, reset to zero.
    pub fn take() -> u64 {
        PROBES.with(|c| c.replace(0))
    }
}

/// A live table file: its descriptor, and the cache that opens it.
pub struct FileMeta {
    pub desc: FileDesc,
    tables: Arc<TableCache>,
    /// The open table while the cache holds it (reads skip the cache).
    pin: Arc<table_cache::Pin>,
    /// Bytes read from the file, over every time the cache opened it.
    bytes_read: Arc<Striped>,
    obsolete: AtomicBool,
    /// Point lookups that may still search this table in vain before it is
    /// worth compacting (read-triggered compaction); see
    /// [`charge_miss`](Self::charge_miss).
    read_allowance: AtomicI64,
}

/// Bytes of compaction input worth one lookup that searched a table in
/// vain (LevelDB's estimate: one seek ≈ 16 KiB of table). A table's
/// allowance is its own size at this rate; a read-triggered plan also
/// needs its misses to pay for every byte it reads, the next level's
/// overlap included (`compaction::picker::leveled::pick_by_reads`).
pub const BYTES_PER_MISS: u64 = 16 << 10;
/// The fewest misses a table is allowed.
const MIN_MISSES: u64 = 100;

/// The tables one point lookup read without finding its key: each one
/// followed by the read of another is charged a miss
/// ([`FileMeta::charge_miss`]). A table its bloom filter rules out costs
/// no block read and is not charged.
#[derive(Debug, Default)]
pub struct ReadCharge<'a> {
    /// Charges are made (`Options::read_compaction`).
    enabled: bool,
    pending: Option<&'a FileMeta>,
    /// A table's allowance ran out during this lookup.
    pub exhausted: bool,
}

impl<'a> ReadCharge<'a> {
    /// A lookup's charges; none are made unless `enabled`.
    pub fn new(enabled: bool) -> Self {
        ReadCharge {
            enabled,
            ..ReadCharge::default()
        }
    }

    /// `f`'s entry for the lookup (`Table::get`), charging the previous
    /// table read in vain if `f` is read too.
    pub fn search(
        &mut self,
        f: &'a FileMeta,
        seek: &[u8],
        user_key: &[u8],
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        self.search_in(f, seek, user_key, false)
    }

    /// [`search`](Self::search); `likely`: `f` probably holds the key (it
    /// is in the deepest level), so its filter is tested alongside the
    /// index search ([`Table::get_likely`]) instead of before it.
    pub fn search_in(
        &mut self,
        f: &'a FileMeta,
        seek: &[u8],
        user_key: &[u8],
        likely: bool,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        let searched = f.with_table(|t| {
            if likely {
                t.get_likely(seek, user_key)
            } else if !t.may_contain(user_key) {
                Ok(None)
            } else {
                t.get_past_filter(seek, user_key).map(Some)
            }
        })??;
        let Some(hit) = searched else {
            return Ok(None);
        };
        if let Some(prev) = self.pending.take() {
            self.exhausted |= prev.charge_miss();
        }
        if hit.is_none() && self.enabled {
            self.pending = Some(f);
        }
        Ok(hit)
    }
}

impl FileMeta {
    /// A table file named by `desc`; nothing is opened yet.
    pub fn new(desc: FileDesc, tables: Arc<TableCache>) -> Self {
        FileMeta {
            tables,
            pin: Arc::default(),
            bytes_read: Arc::new(Striped::default()),
            obsolete: AtomicBool::new(false),
            read_allowance: AtomicI64::new(Self::allowance(desc.size)),
            desc,
        }
    }

    /// The misses a table of `size` bytes is allowed before a picker looks
    /// at it.
    fn allowance(size: u64) -> i64 {
        i64::try_from((size / BYTES_PER_MISS).max(MIN_MISSES)).unwrap_or(i64::MAX)
    }

    /// Charges one lookup that searched this table without finding its key
    /// before searching another. True for the charge that used up the
    /// table's allowance and for each one that doubles the misses since
    /// (2, 4, 8, ... allowances): a picker may then compact the table, when
    /// its misses pay for the plan ([`read_misses`](Self::read_misses)).
    pub fn charge_miss(&self) -> bool {
        let allowance = Self::allowance(self.desc.size);
        let left = self.read_allowance.fetch_sub(1, Ordering::Relaxed) - 1;
        let misses = allowance.saturating_sub(left);
        misses >= allowance
            && misses % allowance == 0
            && (misses / allowance).unsigned_abs().is_power_of_two()
    }

    /// True once lookups used up the table's allowance of misses.
    pub fn read_exhausted(&self) -> bool {
        self.read_allowance.load(Ordering::Relaxed) <= 0
    }

    /// Lookups charged to this table so far.
    pub fn read_misses(&self) -> u64 {
        let left = self.read_allowance.load(Ordering::Relaxed);
        u64::try_from(Self::allowance(self.desc.size).saturating_sub(left)).unwrap_or(0)
    }

    /// A live table file named by `desc`, opened once through the table
    /// cache to check it (size, footer, index, filter, properties).
    pub fn open(desc: FileDesc, tables: &Arc<TableCache>) -> Result<Arc<FileMeta>> {
        let meta = Arc::new(FileMeta::new(desc, Arc::clone(tables)));
        meta.table()?;
        Ok(meta)
    }

    /// The open table, from the table cache (opened now on a miss, which
    /// may fail: `Io` such as `EMFILE`, or `Corruption`). The `Arc` keeps
    /// it open even if the cache evicts it meanwhile.
    pub fn table(&self) -> Result<Arc<Table>> {
        if let Some(t) = self.pin.get() {
            self.tables.hit();
            return Ok(t);
        }
        self.tables
            .get(self.desc.id, self.desc.size, &self.bytes_read, &self.pin)
    }

    /// Runs `f` on the open table: the one pinned here when the cache
    /// holds it (no lock, no reference count written), else the cache's
    /// (opened now on a miss, as [`table`](Self::table)). For reads that
    /// do not keep the table: point lookups.
    #[inline]
    pub fn with_table<R>(&self, f: impl FnOnce(&Table) -> R) -> Result<R> {
        let pinned = self.pin.load();
        if let Some(t) = pinned.as_deref() {
            self.pin.touch();
            self.tables.hit();
            return Ok(f(t));
        }
        drop(pinned);
        let table = self.table()?;
        Ok(f(&table))
    }

    /// Bytes read from the table file so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.get()
    }

    pub fn id(&self) -> u64 {
        self.desc.id
    }

    pub fn size(&self) -> u64 {
        self.desc.size
    }

    pub fn smallest_user_key(&self) -> &[u8] {
        types::user_key(&self.desc.smallest)
    }

    pub fn largest_user_key(&self) -> &[u8] {
        types::user_key(&self.desc.largest)
    }

    /// True if the file's user-key range intersects `[lo, hi]` (`None` = unbounded).
    pub fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        #[cfg(test)]
        probes::count();
        !(lo.is_some_and(|lo| self.largest_user_key() < lo)
            || hi.is_some_and(|hi| self.smallest_user_key() > hi))
    }

    /// Marks the file for deletion once nothing references it.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for FileMeta {
    fn drop(&mut self) {
        // No version names the file any more (or it was never installed):
        // close it once its last reader lets go.
        // Closed, and removed if obsolete, off this thread (see
        // `TableCache::release`).
        self.tables
            .release(self.desc.id, self.obsolete.load(Ordering::Acquire));
    }
}

impl std::fmt::Debug for FileMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileMeta({}, {} B)", self.desc.id, self.desc.size)
    }
}

/// The table files of every level. Level 0 is ordered newest first (its
/// tables overlap); deeper levels are ordered by key and do not overlap.
#[derive(Debug, Clone)]
pub struct Version {
    pub levels: Vec<Vec<Arc<FileMeta>>>,
    /// The matrix container's rows (`l0=matrix`; empty otherwise). They
    /// are newer than every table of level 0.
    pub matrix: crate::l0::matrix::Matrix,
    /// Every table by id, built on the first [`Version::table_by_id`]
    /// (only the stale picker asks), reset by [`Version::seal`].
    by_id: OnceLock<HashMap<u64, Arc<FileMeta>>>,
}

impl Version {
    pub fn new(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); num_levels],
            matrix: crate::l0::matrix::Matrix::default(),
            by_id: OnceLock::new(),
        }
    }

    /// Finishes a version built by changing `levels`: L0 newest first,
    /// deeper levels by smallest key, and the id index dropped (a clone
    /// of a version carries its parent's).
    pub fn seal(&mut self) {
        for (level, files) in self.levels.iter_mut().enumerate() {
            if level == 0 {
                files.sort_by(|a, b| {
                    b.desc
                        .max_seq
                        .cmp(&a.desc.max_seq)
                        .then(b.id().cmp(&a.id()))
                });
            } else {
                files.sort_by(|a, b| types::compare_internal(&a.desc.smallest, &b.desc.smallest));
            }
        }
        self.by_id = OnceLock::new();
    }

    /// The table `id` if this version holds it.
    pub fn table_by_id(&self, id: u64) -> Option<&Arc<FileMeta>> {
        self.by_id
            .get_or_init(|| {
                self.levels
                    .iter()
                    .flatten()
                    .map(|f| (f.id(), f.clone()))
                    .collect()
            })
            .get(&id)
    }

    /// Level 0 behind its read interface.
    pub fn level0(&self) -> &dyn Level0 {
        static NONE: Vec<Arc<FileMeta>> = Vec::new();
        self.levels.first().unwrap_or(&NONE)
    }

    /// Bytes in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels
            .get(level)
            .map_or(0, |l| l.iter().map(|f| f.size()).sum())
    }

    /// Number of files in `level`.
    pub fn level_files(&self, level: usize) -> usize {
        self.levels.get(level).map_or(0, Vec::len)
    }

    /// Files of `level` whose user-key range intersects `[lo, hi]`.
    pub fn overlapping(
        &self,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        self.levels
            .get(level)
            .map(|files| {
                files
                    .iter()
                    .filter(|f| f.overlaps(lo, hi))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The newest version of `user_key` visible at `seq` stored in tables.
    /// `seek` is `types::seek_key(user_key, seq)`. Tables searched in vain
    /// before another are charged to `charge`.
    pub fn get<'a>(
        &'a self,
        user_key: &[u8],
        seek: &[u8],
        charge: &mut ReadCharge<'a>,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        if let Some(hit) = self.matrix.lookup(user_key, types::trailer(seek) >> 8) {
            return Ok(Some(hit));
        }
        if let Some(hit) = self.level0().lookup(user_key, seek, charge)? {
            return Ok(Some(hit));
        }
        // The deepest level holding tables: most keys live there.
        let deepest = self.levels.iter().rposition(|files| !files.is_empty());
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            // Sorted, disjoint: the only candidate is the first file whose
            // largest key is >= the seek key.
            let i =
                files.partition_point(|f| types::compare_internal(&f.desc.largest, seek).is_lt());
            if let Some(f) = files.get(i) {
                if f.smallest_user_key() <= user_key {
                    let likely = Some(level) == deepest;
                    if let Some(hit) = charge.search_in(f, seek, user_key, likely)? {
                        return Ok(Some(hit));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Read-triggered compaction's sample of an iterator seek to
    /// `user_key`: when two or more tables cover the key, the first (the
    /// newest) is charged a miss, as a point lookup that found the key
    /// further down would charge it. True when that used up its allowance.
    pub fn sample_seek(&self, user_key: &[u8]) -> bool {
        let l0 = self
            .levels
            .first()
            .into_iter()
            .flatten()
            .filter(|f| f.overlaps(Some(user_key), Some(user_key)));
        let deeper = self.levels.iter().skip(1).filter_map(|files| {
            let i = files.partition_point(|f| f.largest_user_key() < user_key);
            files.get(i).filter(|f| f.smallest_user_key() <= user_key)
        });
        let mut covering = l0.chain(deeper);
        match (covering.next(), covering.next()) {
            (Some(newest), Some(_)) => newest.charge_miss(),
            _ => false,
        }
    }

    /// True if a table of `level` or a deeper level covers `user_key` (its
    /// key range includes it). Levels from 1 are sorted and disjoint: one
    /// binary search each; level 0 is scanned. Decides whether a tombstone
    /// may still hide an older version below.
    pub fn covers_at_or_below(&self, level: usize, user_key: &[u8]) -> bool {
        (level == 0 && self.matrix.covers(user_key))
            || self
                .levels
                .iter()
                .enumerate()
                .skip(level)
                .any(|(l, files)| {
                    if l == 0 {
                        files
                            .iter()
                            .any(|f| f.overlaps(Some(user_key), Some(user_key)))
                    } else {
                        let i = files.partition_point(|f| {
                            #[cfg(test)]
                            probes::count();
                            f.largest_user_key() < user_key
                        });
                        files
                            .get(i)
                            .is_some_and(|f| f.smallest_user_key() <= user_key)
                    }
                })
    }

    /// Total bytes in all levels.
    pub fn total_bytes(&self) -> u64 {
        (0..self.levels.len()).map(|l| self.level_bytes(l)).sum()
    }
}
