//! A live table file as versions hold it ([`FileMeta`]), and what a point
//! lookup charges a table it searched in vain ([`ReadCharge`]).

use super::table_cache::{self, TableCache};
use crate::edit::FileDesc;
use crate::error::Result;
use crate::stats::Striped;
use crate::table::Table;
use crate::types::{self, SeqNo, ValueKind};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

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
    pub(super) pin: Arc<table_cache::Pin>,
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
