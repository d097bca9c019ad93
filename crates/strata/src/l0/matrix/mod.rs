//! MatrixKV's matrix container: level 0 as rows on
//! a fast tier instead of overlapping tables.
//!
//! - A flush writes one **row** ([`row`]): the memtable's entries in order,
//!   each cell with a hint into the next older row (built by a two-cursor
//!   merge with the top row). The row is synced, then named by a manifest
//!   edit, then its WAL goes.
//! - A lookup searches the rows newest first; after a miss in row `i` the
//!   hints of the cells around the key bound the search in row `i+1`.
//!   Consecutive rows form **segments** (`matrix_segment_rows`) with one
//!   bloom filter each, kept in memory: a segment whose filter rejects the
//!   key is skipped whole.
//! - **Column compaction**: once the rows hold 2/3 of `matrix_capacity`,
//!   they become the compacting group (rows flushed later form the
//!   receiving group). Columns are cut along L1 table boundaries to about
//!   `matrix_column_bytes`; each is merged with the L1 tables it meets, in
//!   key order. The per-row cursors (cells compacted) are saved in the same
//!   edit as the L1 tables; a row is deleted once its last cell went down.
//!   Cells before a row's cursor are invisible: every compacting row has
//!   the same boundary (the columns so far), so a key at or before a
//!   compacting row's last compacted cell is in L1 for every older row too.

pub mod column;
pub(crate) mod fast_dir;
pub mod row;

use crate::edit::FileDesc;
use crate::error::Result;
use crate::io::FileSystem;
use crate::iter::InternalIterator;
use crate::types::{self, SeqNo, ValueKind};
use row::{row_name, Row, RowIter, RowSource};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64;

/// Cells `[from, to)` of row `id`: a column compaction's part of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowSlice {
    pub id: u64,
    pub from: u32,
    pub to: u32,
}

/// A live row file: its descriptor and the open row.
pub struct RowMeta {
    pub desc: FileDesc,
    pub row: Row,
    path: PathBuf,
    fs: Arc<dyn FileSystem>,
    obsolete: AtomicBool,
}

impl RowMeta {
    /// Opens and checks row `desc.id` in `dir`.
    pub fn open(desc: FileDesc, fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<Arc<RowMeta>> {
        let path = dir.join(row_name(desc.id));
        let row = Row::open(&**fs, &path)?;
        if row.id != desc.id {
            return Err(crate::error::Error::corruption(
                &path,
                16,
                format!("row file names row {}, expected {}", row.id, desc.id),
            ));
        }
        Ok(Arc::new(RowMeta {
            desc,
            row,
            path,
            fs: fs.clone(),
            obsolete: AtomicBool::new(false),
        }))
    }

    pub fn id(&self) -> u64 {
        self.desc.id
    }

    /// Deletes the file once nothing references the row.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for RowMeta {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            // A failure leaves an orphan that the next open removes.
            let _ = self.fs.remove_file(&self.path);
        }
    }
}

impl std::fmt::Debug for RowMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RowMeta({}, {} B)", self.desc.id, self.desc.size)
    }
}

impl RowSource for Arc<RowMeta> {
    fn row(&self) -> &Row {
        &self.row
    }
}

/// A row within one version: how far column compaction got.
#[derive(Debug, Clone)]
pub struct RowRef {
    pub meta: Arc<RowMeta>,
    /// Cells `[0, cursor)` are in L1.
    pub cursor: u32,
    /// In the compacting group (a column compaction took part of it).
    pub compacting: bool,
}

impl RowRef {
    /// Bytes of the cells not compacted yet.
    pub fn remaining_bytes(&self) -> u64 {
        let r = &self.meta.row;
        r.bytes_between(self.cursor, r.len())
    }
}

/// A bloom filter over the keys of consecutive rows, built in memory.
/// Bits are only ever set, so every version shares one bit array: a
/// version whose rows are all in it sees every key of theirs (the bits of
/// a row are set before the version naming it is installed), and bits of
/// rows it does not have only add false positives. Nothing is copied when
/// a row joins.
#[derive(Debug)]
struct SegmentBloom {
    words: Vec<AtomicU64>,
    bits: u64,
    k: u32,
}

impl SegmentBloom {
    fn new(keys: u64, bits_per_key: usize) -> Self {
        let bits = keys
            .saturating_mul(bits_per_key.max(1) as u64)
            .clamp(64, 1 << 32)
            .div_ceil(64)
            * 64;
        SegmentBloom {
            words: (0..bits / 64).map(|_| AtomicU64::new(0)).collect(),
            bits,
            k: u32::from(crate::table::filter::num_probes(bits_per_key.max(1))),
        }
    }

    #[inline]
    fn probe_pair(uk: &[u8]) -> (u64, u64) {
        let h = xxh3_64(uk);
        (h, h.rotate_left(32) | 1)
    }

    fn add(&self, uk: &[u8]) {
        let (h1, h2) = Self::probe_pair(uk);
        for i in 0..u64::from(self.k) {
            let b = h1.wrapping_add(i.wrapping_mul(h2)) % self.bits;
            if let Some(w) = self.words.get((b / 64) as usize) {
                w.fetch_or(1 << (b % 64), Ordering::Relaxed);
            }
        }
    }

    fn may_contain(&self, uk: &[u8]) -> bool {
        let (h1, h2) = Self::probe_pair(uk);
        (0..u64::from(self.k)).all(|i| {
            let b = h1.wrapping_add(i.wrapping_mul(h2)) % self.bits;
            self.words
                .get((b / 64) as usize)
                .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (b % 64)) != 0)
        })
    }

    fn add_row(&self, row: &Row) {
        let mut last: Option<&[u8]> = None;
        for i in 0..row.len() {
            let uk = row.user_key(i);
            if last != Some(uk) {
                self.add(uk);
                last = Some(uk);
            }
        }
    }
}

/// Consecutive rows sharing one bloom filter.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Row ids, newest first (rows compacted away leave; their keys stay
    /// in the filter).
    ids: Vec<u64>,
    /// Rows ever added: the segment is sealed at `segment_rows`.
    added: usize,
    bloom: Arc<SegmentBloom>,
}

/// What the container counts (shared by every version of one database).
#[derive(Debug, Default)]
pub struct Counters {
    pub lookups: AtomicU64,
    pub comparisons: AtomicU64,
    pub rows_searched: AtomicU64,
    pub segments_skipped: AtomicU64,
    /// Compactions that took row cells, and the cells' bytes.
    pub column_compactions: AtomicU64,
    pub column_bytes: AtomicU64,
}

/// Settings the container takes from the options at open.
#[derive(Debug, Clone)]
pub struct Config {
    pub dir: PathBuf,
    pub segment_rows: usize,
    /// A row's size, about: a segment's filter is sized for
    /// `segment_rows` rows of this many bytes.
    pub row_bytes: u64,
    pub hints: bool,
    pub bits_per_key: usize,
}

/// The matrix container as one version sees it.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Newest first (descending id: one flush at a time takes the numbers).
    pub rows: Vec<RowRef>,
    /// Newest first; their ids, in order, are the rows' ids.
    segments: Vec<Arc<Segment>>,
    pub cfg: Arc<Config>,
    pub counters: Arc<Counters>,
}

impl Default for Matrix {
    fn default() -> Self {
        Matrix::new(
            Arc::new(Config {
                dir: PathBuf::new(),
                segment_rows: 50,
                row_bytes: 64 << 20,
                hints: true,
                bits_per_key: 10,
            }),
            Arc::default(),
        )
    }
}

impl Matrix {
    pub fn new(cfg: Arc<Config>, counters: Arc<Counters>) -> Self {
        Matrix {
            rows: Vec::new(),
            segments: Vec::new(),
            cfg,
            counters,
        }
    }

    /// The empty container of the database in `dir`, with the settings
    /// of `opts` (rows live in `fast_dir`, or in `dir`).
    pub fn for_database(dir: &Path, opts: &crate::options::Options) -> Self {
        let cfg = Config {
            dir: opts.matrix.dir.clone().unwrap_or_else(|| dir.to_path_buf()),
            segment_rows: opts.matrix.segment_rows.max(1),
            row_bytes: opts.write_buffer_size as u64,
            hints: opts.matrix.hints,
            bits_per_key: if opts.bloom_bits_per_key == 0 {
                10
            } else {
                opts.bloom_bits_per_key
            },
        };
        Matrix::new(Arc::new(cfg), Arc::default())
    }

    /// The directory the rows live in.
    pub fn dir(&self) -> &Path {
        &self.cfg.dir
    }

    /// Opens (checksummed) the row `desc` names in [`dir`](Self::dir).
    pub fn open_row(&self, desc: FileDesc, fs: &Arc<dyn FileSystem>) -> Result<Arc<RowMeta>> {
        RowMeta::open(desc, fs, &self.cfg.dir)
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Bytes of the row files.
    pub fn bytes(&self) -> u64 {
        self.rows.iter().map(|r| r.meta.desc.size).sum()
    }

    /// Bytes not compacted yet: what fills the container.
    pub fn remaining_bytes(&self) -> u64 {
        self.rows.iter().map(RowRef::remaining_bytes).sum()
    }

    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Writes the rows' shape and the lookups' counters into `s`.
    pub fn fill_stats(&self, s: &mut crate::stats::RowStats) {
        s.rows = self.rows.len();
        s.bytes = self.bytes();
        s.remaining_bytes = self.remaining_bytes();
        s.segments = self.segments();
        let c = &self.counters;
        s.lookups = c.lookups.load(Ordering::Relaxed);
        s.comparisons = c.comparisons.load(Ordering::Relaxed);
        s.rows_searched = c.rows_searched.load(Ordering::Relaxed);
        s.segments_skipped = c.segments_skipped.load(Ordering::Relaxed);
        s.column_compactions = c.column_compactions.load(Ordering::Relaxed);
        s.column_bytes = c.column_bytes.load(Ordering::Relaxed);
    }

    /// Counts a compaction that took `bytes` of row cells.
    pub fn count_compaction(&self, bytes: u64) {
        self.counters
            .column_compactions
            .fetch_add(1, Ordering::Relaxed);
        self.counters
            .column_bytes
            .fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn row(&self, id: u64) -> Option<&RowRef> {
        self.rows.iter().find(|r| r.meta.id() == id)
    }

    /// Applies one edit's row changes: `added` (opened rows) join on top,
    /// `cursors` move (and put their rows in the compacting group),
    /// `deleted` go (returned, to be marked obsolete once installed).
    pub fn apply(
        &mut self,
        added: Vec<Arc<RowMeta>>,
        cursors: &[(u64, u32)],
        deleted: &[u64],
    ) -> Vec<Arc<RowMeta>> {
        // Added rows first: a manifest's first edit names every row and
        // then the cursors of the compacting ones.
        let mut added = added;
        added.sort_by_key(|m| m.id());
        for meta in added {
            let sealed = self
                .segments
                .first()
                .is_none_or(|s| s.added >= self.cfg.segment_rows);
            let seg = if sealed {
                // Sized for full rows of entries like this row's (a small
                // first row, say a recovered WAL tail, must not undersize it).
                let n = u64::from(meta.row.len()).max(1);
                let entry = (meta.desc.size / n).max(1);
                let per_row = n.max(self.cfg.row_bytes / entry);
                let bloom = SegmentBloom::new(
                    per_row.saturating_mul(self.cfg.segment_rows as u64),
                    self.cfg.bits_per_key,
                );
                bloom.add_row(&meta.row);
                Arc::new(Segment {
                    ids: vec![meta.id()],
                    added: 1,
                    bloom: Arc::new(bloom),
                })
            } else {
                let mut s = (*self.segments.remove(0)).clone();
                s.bloom.add_row(&meta.row);
                s.ids.insert(0, meta.id());
                s.added += 1;
                Arc::new(s)
            };
            self.segments.insert(0, seg);
            self.rows.insert(
                0,
                RowRef {
                    meta,
                    cursor: 0,
                    compacting: false,
                },
            );
        }
        self.rows.sort_by_key(|r| std::cmp::Reverse(r.meta.id()));
        for (id, cursor) in cursors {
            if let Some(r) = self.rows.iter_mut().find(|r| r.meta.id() == *id) {
                r.cursor = (*cursor).min(r.meta.row.len());
                r.compacting = true;
            }
        }
        let mut removed = Vec::new();
        if !deleted.is_empty() {
            self.rows.retain(|r| {
                let gone = deleted.contains(&r.meta.id());
                if gone {
                    removed.push(r.meta.clone());
                }
                !gone
            });
            // A segment keeps its filter (a superset) until it is empty.
            self.segments = self
                .segments
                .iter()
                .filter_map(|s| {
                    if s.ids.iter().any(|id| deleted.contains(id)) {
                        let mut s = (**s).clone();
                        s.ids.retain(|id| !deleted.contains(id));
                        (!s.ids.is_empty()).then(|| Arc::new(s))
                    } else {
                        Some(s.clone())
                    }
                })
                .collect();
        }
        removed
    }

    /// The newest version of `uk` visible at `seq` in the rows, or `None`
    /// (not here, or compacted into L1).
    pub fn lookup(&self, uk: &[u8], seq: SeqNo) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
        if self.rows.is_empty() {
            return None;
        }
        let mut cmps = 0u64;
        let mut searched = 0u64;
        let mut skipped = 0u64;
        let hit = self.search(uk, seq, &mut cmps, &mut searched, &mut skipped);
        let c = &self.counters;
        c.lookups.fetch_add(1, Ordering::Relaxed);
        c.comparisons.fetch_add(cmps, Ordering::Relaxed);
        c.rows_searched.fetch_add(searched, Ordering::Relaxed);
        c.segments_skipped.fetch_add(skipped, Ordering::Relaxed);
        hit
    }

    fn search(
        &self,
        uk: &[u8],
        seq: SeqNo,
        cmps: &mut u64,
        searched: &mut u64,
        skipped: &mut u64,
    ) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
        // The search range the previous row's hints allow in row `.0`.
        let mut narrowed: Option<(u64, u32, u32)> = None;
        let mut at = 0;
        for seg in &self.segments {
            let rows = self.rows.get(at..at + seg.ids.len()).unwrap_or_default();
            at += seg.ids.len();
            if !seg.bloom.may_contain(uk) {
                *skipped += 1;
                narrowed = None;
                continue;
            }
            for r in rows {
                let row = &r.meta.row;
                let n = row.len();
                let (mut lo, mut hi) = (0, n);
                if let Some((id, a, b)) = narrowed.take() {
                    if id == row.id && self.cfg.hints {
                        lo = a.min(n);
                        hi = b.saturating_add(1).min(n);
                    }
                }
                if r.cursor > 0 {
                    if uk <= row.user_key(r.cursor - 1) {
                        // Compacted: L1 has it for this row and every older one.
                        return None;
                    }
                    lo = lo.max(r.cursor);
                    hi = hi.max(lo);
                }
                *searched += 1;
                let p = row.lower_bound(uk, lo, hi, cmps);
                let mut q = p;
                while q < n && row.user_key(q) == uk {
                    let (ikey, value) = row.entry(q);
                    if let Some(k) = types::parse_internal_key(ikey) {
                        if k.seq <= seq {
                            return Some((k.seq, k.kind, value.to_vec()));
                        }
                    }
                    q += 1;
                }
                if row.hint_row != 0 {
                    let a = if p < n && q > p {
                        row.hint(p)
                    } else if p > 0 {
                        row.hint(p - 1)
                    } else {
                        0
                    };
                    let b = if q < n { row.hint(q) } else { u32::MAX };
                    narrowed = Some((row.hint_row, a, b));
                }
            }
        }
        None
    }

    /// Smallest and largest user key over the non-empty slices of `rows`.
    pub fn slices_range(&self, rows: &[RowSlice]) -> Option<(Vec<u8>, Vec<u8>)> {
        let mut lo: Option<&[u8]> = None;
        let mut hi: Option<&[u8]> = None;
        for s in rows {
            let Some(r) = self.row(s.id) else {
                continue;
            };
            let row = &r.meta.row;
            if s.from >= s.to || s.to > row.len() {
                continue;
            }
            let (a, b) = (row.user_key(s.from), row.user_key(s.to - 1));
            lo = Some(lo.map_or(a, |x| x.min(a)));
            hi = Some(hi.map_or(b, |x| x.max(b)));
        }
        Some((lo?.to_vec(), hi?.to_vec()))
    }

    /// Adds one iterator per row over its cells not compacted yet.
    pub fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>) {
        for r in &self.rows {
            out.push(Box::new(RowIter::new(
                r.meta.clone(),
                r.cursor,
                r.meta.row.len(),
            )));
        }
    }

    /// True if a row's not-yet-compacted cells may hold `uk` (its key
    /// range covers it): a tombstone flushed above must stay.
    pub fn covers(&self, uk: &[u8]) -> bool {
        self.rows.iter().any(|r| {
            let row = &r.meta.row;
            r.cursor < row.len()
                && row.user_key(r.cursor) <= uk
                && types::user_key(&r.meta.desc.largest) >= uk
        })
    }
}

#[cfg(test)]
mod tests;
