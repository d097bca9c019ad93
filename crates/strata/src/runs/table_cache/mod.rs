//! The table cache: the open tables of a database, at most `capacity` of
//! them, the least recently used closed first (LevelDB's `TableCache`).
//!
//! Opening a table maps (or opens) its file and reads, verifies and pins its
//! index and filter blocks. A database of thousands of tables cannot keep
//! them all open: descriptors (`EMFILE`), memory maps and pinned bytes would
//! grow with it. So a [`FileMeta`](super::FileMeta) keeps only the table's
//! descriptor and asks this cache for the open [`Table`] on every read; a
//! miss opens it and may close the least recently used one.
//!
//! A held table is also pinned in its `FileMeta` ([`Pin`]), and a read
//! takes it from there without the cache: a lock-free load of the pin
//! ([`arc_swap`]), and a "touched" flag set once. The mutex, the LRU
//! relink and an `Arc` clone on every lookup (a shared cache line written
//! several times per probe) cost a visible share of a two-thread
//! readrandom profile (why: docs/design/2026-11-29-code-comment-measurements.md
//! §table-cache). Eviction is therefore LRU with a second chance (CLOCK): a
//! table read through its pin since it was last considered is moved to
//! the front instead of closed, and its flag cleared.
//!
//! Thread-safety: shared through `Arc`. One mutex guards the LRU list and
//! every change of a pin; it is held for a hash lookup and a relink,
//! never during I/O: a miss opens the table without it, so two readers
//! may open the same table at once (the second to insert uses the first
//! one's table and drops its own). Evicted tables are dropped (unmapped,
//! closed) after the mutex is released.
//!
//! Invariants:
//! - at most `capacity` tables are held (`None`: no limit, every table
//!   stays open once opened);
//! - a pin holds its table exactly while the LRU list has a node for it
//!   (both change under the mutex), so pins hold no more than `capacity`
//!   tables either;
//! - an evicted table stays open while an iterator or a compaction holds
//!   its `Arc<Table>`; it is closed when the last one lets go;
//! - failures are not cached: a table that failed to open (`EMFILE`, say)
//!   is opened again by the next read, which returns the error again;
//! - a table leaves the cache when its `FileMeta` drops (`release`), so
//!   the cache never holds a table no version names.
//!
//! Releasing a table closes it and, when its file left every version,
//! removes the file, on a thread of the cache's own (`strata-purge`),
//! not on the thread that let the last reference go: that is often a
//! reader dropping an old super-version, and unlinking a table of tens of
//! MiB holds that thread up for milliseconds per file on ext4 mounted with
//! `discard` (why: docs/design/2026-11-29-code-comment-measurements.md
//! §table-cache). Dropping the cache waits for the thread's queue.

use crate::error::{Error, Result};
use crate::filename::table_path;
use crate::io::FileSystem;
use crate::options::Options;
use crate::stats::Striped;
use crate::table::warm::Warmer;
use crate::table::{BlockCache, RowCache, Table};
use arc_swap::ArcSwapOption;
use lru::Lru;
use parking_lot::Mutex;
use purge::Purger;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod lru;
mod purge;

/// The figures of a table cache (see [`crate::StatsSnapshot`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCacheStats {
    /// Tables the cache may hold; `None` = no limit.
    pub capacity: Option<usize>,
    /// Tables held open by the cache.
    pub open_tables: usize,
    /// Bytes of table files mapped into memory by held tables.
    pub mapped_bytes: u64,
    /// Index and filter bytes pinned by held tables.
    pub pinned_bytes: u64,
    /// Lookups that found their table open.
    pub hits: u64,
    /// Lookups that opened their table.
    pub misses: u64,
    /// Requests to read a whole table into the page cache (re-warms
    /// included) and the bytes first reserved (`Options::warm_budget`).
    pub warmed_tables: u64,
    pub warmed_bytes: u64,
    /// Tables closed to make room (not counting tables whose file left
    /// every version).
    pub evictions: u64,
    /// Tables are opened mapped (`Options::mmap_reads` and the live tables
    /// fit in the page cache's room); otherwise read with pread(2) through
    /// the block cache.
    pub mapped: bool,
    /// The row cache's capacity (0: off), the bytes it holds, and its hits
    /// and misses.
    pub row_cache_capacity: u64,
    pub row_cache_bytes: u64,
    pub row_cache_hits: u64,
    pub row_cache_misses: u64,
}

/// A `FileMeta`'s hold on its open table: set by the cache when it opens
/// the table for that `FileMeta`, cleared when it closes it. Reads load
/// it without taking the cache's lock.
#[derive(Default)]
pub struct Pin {
    table: ArcSwapOption<Table>,
    /// Read through the pin since the cache last looked (second chance).
    touched: AtomicBool,
}

impl Pin {
    /// The pinned table, if one is pinned, held for as long as the guard
    /// lives (not marked used: see [`touch`](Self::touch)).
    #[inline]
    pub fn load(&self) -> arc_swap::Guard<Option<Arc<Table>>> {
        self.table.load()
    }

    /// The pinned table, if one is pinned, marked used.
    pub fn get(&self) -> Option<Arc<Table>> {
        let table = self.table.load_full()?;
        self.touch();
        Some(table)
    }

    /// Marks the table used: a store only when the flag is clear, so a
    /// table read over and over is a line every reader only reads.
    #[inline]
    pub fn touch(&self) {
        if !self.touched.load(Ordering::Relaxed) {
            self.touched.store(true, Ordering::Relaxed);
        }
    }
}

/// The open tables of one database directory.
pub struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    blocks: Arc<BlockCache>,
    verify_checksums: bool,
    mmap_reads: bool,
    /// Tables are opened mapped: with `mmap_reads`, while the live tables
    /// fit in `room` (see [`fit`](Self::fit)).
    mapped: AtomicBool,
    /// Bytes of tables the page cache can be expected to hold
    /// (`MemoryBudget::page_cache_room`, set at open; `u64::MAX` until
    /// then: every database fits).
    room: AtomicU64,
    /// `Options::direct_reads`: tables read with pread (having outgrown
    /// the room) are read with direct I/O, and `rows` takes half the room.
    direct_reads: bool,
    /// Entries found by point lookups in tables read directly; on only
    /// while they are (see [`fit`](Self::fit)).
    rows: Arc<RowCache>,
    mmap_random: bool,
    /// `Options::mmap_huge` (and not `mmap_random`).
    mmap_huge: bool,
    capacity: Option<usize>,
    warmer: Arc<Warmer>,
    lru: Mutex<Lru>,
    /// Lookups answered by a pin or the list (striped: counted on every
    /// read, by every reader thread).
    hits: Striped,
    misses: AtomicU64,
    evictions: AtomicU64,
    /// Closes released tables and removes obsolete files on a thread of
    /// its own.
    purger: Purger,
}

impl TableCache {
    /// A cache of the tables in `dir`, holding as many as
    /// [`Options::table_cache_capacity`] allows.
    pub fn new(dir: &Path, opts: &Options, blocks: Arc<BlockCache>) -> Self {
        Self::with_capacity(dir, opts, blocks, opts.table_cache_capacity())
    }

    /// Sets the bytes of tables the page cache can be expected to hold
    /// (the memory budget's `page_cache_room`; `u64::MAX` until set); see
    /// [`fit`](Self::fit).
    pub fn set_room(&self, room: u64) {
        self.room.store(room, Ordering::Relaxed);
    }

    /// Chooses how tables are read from the bytes of the live tables
    /// (`Options::mmap_reads` only; without it tables are always read with
    /// pread). While they fit in the page cache's room, tables are mapped:
    /// a block in memory is used in place, with no copy and no block
    /// cache. Once they pass it, tables are read with pread(2) through the
    /// block cache, advised random, and not warmed: under a memory limit a
    /// fault of a mapped table costs more than a read (measured in
    /// docs/design/2026-11-29-read-path-by-fit.md); with `direct_reads`
    /// point reads bypass the page cache and a row cache of half the room
    /// answers lookups of keys read before
    /// (docs/design/2026-11-29-direct-reads.md). Every held table is
    /// closed at the switch and reopened the new way on its next read
    /// (readers holding one finish with it); a table being opened across
    /// the switch may keep the old way until it is closed. They switch back
    /// below 7/8 of the room, so a database at the edge does not flip with
    /// every compaction.
    pub fn fit(&self, live_bytes: u64) {
        if !self.mmap_reads {
            return;
        }
        let room = self.room.load(Ordering::Relaxed);
        let was = self.mapped.load(Ordering::Relaxed);
        let now = if was {
            live_bytes <= room
        } else {
            live_bytes <= room - room / 8
        };
        if now == was {
            return;
        }
        let closed = {
            let mut lru = self.lru.lock();
            self.mapped.store(now, Ordering::Relaxed);
            self.warmer.pause(!now);
            lru.drain()
        };
        // Read directly, the tables' blocks are no longer in the page cache:
        // half the room it would have spent on them holds rows instead.
        let rows = if now || !self.direct_reads {
            0
        } else {
            usize::try_from(room / 2).unwrap_or(usize::MAX)
        };
        self.rows.resize(rows);
        for table in closed {
            self.purger.release((Some(table), None));
        }
    }

    /// A cache holding at most `capacity` tables (`None` = no limit; a
    /// capacity of 0 counts as 1).
    pub fn with_capacity(
        dir: &Path,
        opts: &Options,
        blocks: Arc<BlockCache>,
        capacity: Option<usize>,
    ) -> Self {
        TableCache {
            dir: dir.to_path_buf(),
            fs: opts.fs.clone(),
            blocks,
            verify_checksums: opts.verify_checksums,
            mmap_reads: opts.mmap_reads,
            mapped: AtomicBool::new(opts.mmap_reads),
            mmap_random: opts.mmap_random,
            room: AtomicU64::new(u64::MAX),
            direct_reads: opts.direct_reads,
            rows: Arc::new(RowCache::new(0)),
            mmap_huge: opts.mmap_huge && !opts.mmap_random,
            capacity: capacity.map(|c| c.max(1)),
            warmer: Warmer::new(opts.warm_budget_bytes()),
            lru: Mutex::new(Lru::new()),
            hits: Striped::default(),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            // A removed table's file may be shrunk first, but not with the
            // `offload` executor, whose worker process may still map the
            // inputs of a sub-task it was too slow to finish (the host ran
            // it itself and went on).
            purger: Purger::new(
                opts.fs.clone(),
                !matches!(opts.executor, crate::options::ExecutorKind::Offload(_)),
            ),
        }
    }

    /// The path of table `id`.
    pub fn path(&self, id: u64) -> PathBuf {
        table_path(&self.dir, id)
    }

    /// The file system the tables live on.
    pub fn fs(&self) -> &Arc<dyn FileSystem> {
        &self.fs
    }

    /// Counts a lookup answered by a pin.
    #[inline]
    pub(crate) fn hit(&self) {
        self.hits.add(1);
    }

    /// The open table `id` of `size` bytes, opened now if it is not held
    /// (which may close the least recently used table), and pinned in
    /// `pin` (its `FileMeta`'s). Bytes read from it are added to
    /// `bytes_read`. A reader with the table pinned does not call this.
    pub fn get(
        &self,
        id: u64,
        size: u64,
        bytes_read: &Arc<Striped>,
        pin: &Arc<Pin>,
    ) -> Result<Arc<Table>> {
        let hit = self.lru.lock().get(id);
        if let Some(t) = hit {
            self.hits.add(1);
            return Ok(t);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let table = self.open(id, size, bytes_read)?;
        let table = Arc::new(table);
        let mut evicted = Vec::new();
        let found = {
            let mut lru = self.lru.lock();
            match lru.get(id) {
                // Another reader opened it meanwhile: use theirs.
                Some(t) => Some(t),
                None => {
                    // Room first, so the table opened now is not the one
                    // its second-chance pass closes.
                    if let Some(cap) = self.capacity {
                        while lru.len() >= cap {
                            match lru.pop_victim() {
                                Some(t) => evicted.push(t),
                                None => break,
                            }
                        }
                    }
                    lru.insert(id, Arc::clone(&table), Arc::clone(pin));
                    None
                }
            }
        };
        self.evictions
            .fetch_add(evicted.len() as u64, Ordering::Relaxed);
        // `evicted` and a duplicate `table` are closed here, unlocked.
        Ok(found.unwrap_or(table))
    }

    /// Drops table `id` from the cache (its `FileMeta` is gone; the table
    /// stays open while someone holds it) and, with `remove`, deletes its
    /// file (which no version names any more), both on the purge thread.
    pub fn release(&self, id: u64, remove: bool) {
        let table = self.lru.lock().remove(id);
        let path = remove.then(|| self.path(id));
        if table.is_some() || path.is_some() {
            self.purger.release((table, path));
        }
    }

    /// Returns once every release made before the call is done.
    pub fn purged(&self) {
        self.purger.wait();
    }

    /// Current figures.
    pub fn stats(&self) -> TableCacheStats {
        let (open_tables, mapped_bytes, pinned_bytes) = {
            let lru = self.lru.lock();
            (lru.len(), lru.mapped_bytes, lru.pinned_bytes)
        };
        let (warmed_tables, warmed_bytes) = self.warmer.warmed();
        TableCacheStats {
            capacity: self.capacity,
            open_tables,
            mapped_bytes,
            pinned_bytes,
            hits: self.hits.get(),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            warmed_tables,
            warmed_bytes,
            mapped: self.mapped.load(Ordering::Relaxed),
            row_cache_capacity: self.rows.capacity() as u64,
            row_cache_bytes: self.rows.usage(),
            row_cache_hits: self.rows.hits(),
            row_cache_misses: self.rows.misses(),
        }
    }

    /// Ids of the held tables, most recently used first.
    pub fn ids(&self) -> Vec<u64> {
        self.lru.lock().ids()
    }

    /// Opens table `id`: maps or opens the file, checks its size, reads the
    /// footer, index, filter and properties.
    fn open(&self, id: u64, size: u64, bytes_read: &Arc<Striped>) -> Result<Table> {
        let path = self.path(id);
        let mut huge = false;
        let file = if self.mapped.load(Ordering::Relaxed) {
            let file = self.fs.open_mapped(&path)?;
            if self.mmap_random {
                file.advise_random();
            } else if self.mmap_huge {
                huge = file.advise_huge();
            }
            file
        } else {
            // Point lookups read one block; scans ask for what comes next
            // themselves (`TableIter`), so the kernel's read-ahead after a
            // read only evicts what other reads need.
            let file = if self.mmap_reads && self.direct_reads {
                self.fs.open_direct(&path)?
            } else {
                self.fs.open_random(&path)?
            };
            file.advise_random();
            file
        };
        if file.len() != size {
            return Err(Error::corruption(
                &path,
                file.len(),
                format!("table is {} bytes, manifest says {size}", file.len()),
            ));
        }
        let mut table = Table::open_counted(
            file,
            path,
            id,
            Arc::clone(&self.blocks),
            self.verify_checksums,
            Arc::clone(bytes_read),
        )?;
        // A map in huge pages is not warmed: its faults read 2 MiB pieces
        // (and warming's `WILLNEED` would fill the cache with base pages).
        if !huge {
            table.set_warmer(Arc::clone(&self.warmer));
        }
        // Only tables read with `direct_reads` have a row cache: no other
        // lookup pays for asking one that is off.
        if self.direct_reads && table.mapped_bytes() == 0 {
            table = table.with_rows(Arc::clone(&self.rows));
        }
        Ok(table)
    }
}

impl fmt::Debug for TableCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableCache")
            .field("dir", &self.dir)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::FileDesc;
    use crate::io::{FileSystem, MemFs, PosixFs};
    use crate::iter::InternalIterator;
    use crate::runs::FileMeta;
    use crate::table::{TableBuilder, TableIter, TableOptions};
    use crate::types::{internal_key, seek_key, ValueKind, MAX_SEQ};

    /// Writes table `id` in `dir` holding `key{id}` = `value{id}`.
    fn write_table(fs: &dyn FileSystem, dir: &Path, id: u64) -> FileDesc {
        let path = table_path(dir, id);
        let mut b = TableBuilder::new(fs.create(&path).expect("create"), TableOptions::default());
        let key = internal_key(format!("key{id}").as_bytes(), id, ValueKind::Value as u8);
        b.add(&key, format!("value{id}").as_bytes()).expect("add");
        let props = b.finish().expect("finish");
        FileDesc {
            id,
            size: props.file_size,
            smallest: key.clone(),
            largest: key,
            entries: 1,
            deletions: 0,
            max_seq: id,
            min_seq: 0,
            swept_seq: 0,
        }
    }

    /// An in-memory file system with the directory `/db`.
    fn mem_dir() -> (Arc<dyn FileSystem>, &'static Path) {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).expect("mkdir");
        (fs, dir)
    }

    /// Tables 1..=`n` written in `dir`, each named by a `FileMeta` of `tc`.
    fn metas(fs: &Arc<dyn FileSystem>, dir: &Path, tc: &Arc<TableCache>, n: u64) -> Vec<FileMeta> {
        (1..=n)
            .map(|id| FileMeta::new(write_table(&**fs, dir, id), Arc::clone(tc)))
            .collect()
    }

    fn cache(fs: Arc<dyn FileSystem>, dir: &Path, capacity: Option<usize>) -> Arc<TableCache> {
        let opts = Options::default().fs(fs);
        Arc::new(TableCache::with_capacity(
            dir,
            &opts,
            Arc::new(BlockCache::new(0)),
            capacity,
        ))
    }

    fn value_of(t: &Table, id: u64) -> Option<Vec<u8>> {
        let k = format!("key{id}");
        t.get(&seek_key(k.as_bytes(), MAX_SEQ), k.as_bytes())
            .expect("get")
            .map(|(_, _, v)| v)
    }

    #[test]
    fn evicts_the_least_recently_used_table() {
        let (fs, dir) = mem_dir();
        let tc = cache(fs.clone(), dir, Some(3));
        let metas = metas(&fs, dir, &tc, 5);
        let open = |i: usize| metas.get(i).expect("meta").table().expect("open");
        open(0);
        open(1);
        open(2);
        assert_eq!(tc.ids(), vec![3, 2, 1]);
        open(0); // read through its pin: not relinked, marked used
        assert_eq!(tc.ids(), vec![3, 2, 1]);
        open(3); // table 1 gets a second chance: table 2 is closed
        assert_eq!(tc.ids(), vec![4, 1, 3]);
        open(4);
        assert_eq!(tc.ids(), vec![5, 4, 1]);
        let s = tc.stats();
        assert_eq!((s.open_tables, s.hits, s.misses, s.evictions), (3, 1, 5, 2));
        assert!(s.pinned_bytes > 0);
        assert_eq!(s.mapped_bytes, 0, "MemFs does not map");
        // An evicted table opens again, and evicts the next one.
        let t = open(1);
        assert_eq!(value_of(&t, 2), Some(b"value2".to_vec()));
        assert_eq!(tc.ids(), vec![2, 5, 4]);
        assert_eq!(tc.stats().evictions, 3);
        // Dropping a FileMeta releases its table without counting an eviction.
        drop(metas);
        let s = tc.stats();
        assert_eq!((s.open_tables, s.evictions, s.pinned_bytes), (0, 3, 0));
    }

    /// The metas whose pin holds their table.
    fn pinned(metas: &[FileMeta]) -> Vec<u64> {
        let mut ids: Vec<u64> = metas
            .iter()
            .filter(|m| m.pin.load().is_some())
            .map(FileMeta::id)
            .collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn pins_hold_exactly_the_held_tables_and_reads_give_a_second_chance() {
        let (fs, dir) = mem_dir();
        let tc = cache(fs.clone(), dir, Some(2));
        let metas = metas(&fs, dir, &tc, 4);
        let meta = |i: usize| metas.get(i).expect("meta");
        let read = |i: usize| {
            meta(i)
                .with_table(|t| value_of(t, i as u64 + 1))
                .expect("read")
        };
        assert_eq!(read(0), Some(b"value1".to_vec()));
        assert_eq!(read(1), Some(b"value2".to_vec()));
        assert_eq!(pinned(&metas), vec![1, 2]);
        // Table 1 is the least recently opened, but read since: table 2
        // is closed to open table 3, and its pin let go.
        assert_eq!(read(0), Some(b"value1".to_vec()));
        assert_eq!(read(2), Some(b"value3".to_vec()));
        assert_eq!(pinned(&metas), vec![1, 3]);
        assert_eq!(tc.ids(), vec![3, 1]);
        // Table 1, not read since its second chance, is closed next.
        assert_eq!(read(3), Some(b"value4".to_vec()));
        assert_eq!(pinned(&metas), vec![3, 4]);
        // An evicted table reopens through the cache and is pinned again.
        assert_eq!(read(1), Some(b"value2".to_vec()));
        assert_eq!(pinned(&metas), vec![2, 4]);
        let mut held = tc.ids();
        held.sort_unstable();
        assert_eq!(held, pinned(&metas));
        let s = tc.stats();
        assert_eq!((s.hits, s.misses, s.evictions), (1, 5, 3));
        // A table held by a reader stays readable after its pin lets go
        // (taking it marked it used: it survives the first eviction that
        // reaches it, not the second).
        let t = meta(1).table().expect("held");
        for i in [0, 2] {
            read(i);
            assert!(meta(1).pin.load().is_some());
        }
        read(3);
        assert!(meta(1).pin.load().is_none());
        assert_eq!(value_of(&t, 2), Some(b"value2".to_vec()));
        drop(metas);
        assert_eq!(tc.stats().open_tables, 0);
    }

    #[test]
    fn readers_racing_evictions_read_right_and_stay_within_capacity() {
        let (fs, dir) = mem_dir();
        let tc = cache(fs.clone(), dir, Some(2));
        let metas = metas(&fs, dir, &tc, 6);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let metas = &metas;
                s.spawn(move || {
                    let mut x = t + 1;
                    for n in 0..3000u64 {
                        // A different walk per thread: some tables read
                        // often (kept by their second chance), some rarely.
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let i = if n % 3 == 0 {
                            (x >> 33) % 6
                        } else {
                            (x >> 33) % 2
                        };
                        let m = metas.get(i as usize).expect("meta");
                        let got = if n % 2 == 0 {
                            m.with_table(|t| value_of(t, i + 1)).expect("read")
                        } else {
                            value_of(&m.table().expect("open"), i + 1)
                        };
                        assert_eq!(got, Some(format!("value{}", i + 1).into_bytes()));
                    }
                });
            }
        });
        let s = tc.stats();
        assert!(s.open_tables <= 2, "{s:?}");
        assert_eq!(s.hits + s.misses, 12_000, "{s:?}");
        let mut held = tc.ids();
        held.sort_unstable();
        assert_eq!(held, pinned(&metas));
        drop(metas);
        assert_eq!(tc.stats().open_tables, 0);
    }

    #[test]
    fn unlimited_keeps_every_table_open() {
        let (fs, dir) = mem_dir();
        let tc = cache(fs.clone(), dir, None);
        let metas = metas(&fs, dir, &tc, 50);
        for m in &metas {
            m.table().expect("open");
        }
        let s = tc.stats();
        assert_eq!((s.open_tables, s.evictions, s.capacity), (50, 0, None));
    }

    #[test]
    fn an_evicted_table_stays_readable_through_a_held_arc() {
        let (fs, dir) = mem_dir();
        let tc = cache(fs.clone(), dir, Some(1));
        let a = FileMeta::new(write_table(&*fs, dir, 1), Arc::clone(&tc));
        let b = FileMeta::new(write_table(&*fs, dir, 2), Arc::clone(&tc));
        let held = a.table().expect("open a");
        let mut it = TableIter::new(a.table().expect("a again"));
        b.table().expect("open b"); // evicts a
        assert_eq!(tc.ids(), vec![2]);
        assert_eq!(value_of(&held, 1), Some(b"value1".to_vec()));
        it.seek_to_first();
        assert!(it.valid());
        assert_eq!(it.value(), b"value1");
        it.next();
        assert!(!it.valid());
        it.status().expect("no error");
    }

    /// A table over the removal's piece size (8 MiB) that a reader still
    /// holds when its file goes is unlinked whole, not shrunk: the reader
    /// reads every entry through its map (a shrunk file would fault). One
    /// that nothing holds is removed all the same.
    #[test]
    fn a_large_obsolete_table_still_read_is_unlinked_whole() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFs);
        let dir = tmp.path();
        let tc = cache(fs.clone(), dir, None);
        let value = vec![b'v'; 1024];
        let n = 10_000u64;
        let key = |i: u64| internal_key(format!("k{i:08}").as_bytes(), 1, ValueKind::Value as u8);
        let big = |id: u64| {
            let path = table_path(dir, id);
            let mut b =
                TableBuilder::new(fs.create(&path).expect("create"), TableOptions::default());
            for i in 0..n {
                b.add(&key(i), &value).expect("add");
            }
            let props = b.finish().expect("finish");
            assert!(props.file_size > 8 << 20, "{}", props.file_size);
            let desc = FileDesc {
                id,
                size: props.file_size,
                smallest: key(0),
                largest: key(n - 1),
                entries: n,
                deletions: 0,
                max_seq: 1,
                min_seq: 0,
                swept_seq: 0,
            };
            (path, FileMeta::new(desc, Arc::clone(&tc)))
        };
        let (path, meta) = big(7);
        let mut it = TableIter::new(meta.table().expect("open"));
        it.seek_to_first();
        meta.mark_obsolete();
        drop(meta);
        tc.purged();
        assert!(!fs.exists(&path));
        let mut count = 0;
        while it.valid() {
            assert_eq!(it.value(), &value[..]);
            count += 1;
            it.next();
        }
        it.status().expect("no error");
        assert_eq!(count, n);

        let (path, meta) = big(8);
        meta.table().expect("open");
        meta.mark_obsolete();
        drop(meta);
        tc.purged();
        assert!(!fs.exists(&path));
    }

    #[test]
    fn tables_are_read_with_pread_once_they_outgrow_the_page_cache() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFs);
        let dir = tmp.path();
        let tc = Arc::new(TableCache::with_capacity(
            dir,
            &Options::default().fs(fs.clone()),
            Arc::new(BlockCache::new(1 << 20)),
            None,
        ));
        tc.set_room(1 << 20);
        let metas = metas(&fs, dir, &tc, 3);
        let read = |i: usize| {
            let t = metas[i].table().expect("open");
            assert_eq!(
                value_of(&t, i as u64 + 1),
                Some(format!("value{}", i + 1).into_bytes())
            );
            t
        };
        assert!(read(0).mapped_bytes() > 0, "fits: mapped");
        assert!(tc.stats().mapped);

        tc.fit(2 << 20);
        assert!(!tc.stats().mapped);
        assert!(tc.warmer.paused(), "no table is warmed");
        assert_eq!(
            tc.stats().open_tables,
            0,
            "held tables are closed at the switch"
        );
        assert_eq!(read(0).mapped_bytes(), 0, "reopened with pread");
        assert_eq!(read(1).mapped_bytes(), 0);
        // Buffered, with no row cache.
        assert!(!read(1).reads_direct());
        assert_eq!(tc.rows.capacity(), 0);

        // Back only below 7/8 of the room.
        tc.fit(1 << 20);
        assert!(!tc.stats().mapped);
        tc.fit(800 << 10);
        assert!(tc.stats().mapped && !tc.warmer.paused());
        assert!(read(0).mapped_bytes() > 0 && read(2).mapped_bytes() > 0);
    }

    #[test]
    fn with_direct_reads_tables_past_the_room_bypass_the_page_cache() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFs);
        let dir = tmp.path();
        let tc = Arc::new(TableCache::with_capacity(
            dir,
            &Options::default().fs(fs.clone()).direct_reads(true),
            Arc::new(BlockCache::new(1 << 20)),
            None,
        ));
        tc.set_room(1 << 20);
        let metas = metas(&fs, dir, &tc, 2);
        let read = |i: usize| {
            let t = metas[i].table().expect("open");
            assert_eq!(
                value_of(&t, i as u64 + 1),
                Some(format!("value{}", i + 1).into_bytes())
            );
            t
        };
        assert!(!read(0).reads_direct(), "mapped while they fit");
        tc.fit(2 << 20);
        // Directly where the file system has it (tmpfs has not), and the
        // row cache takes half the room.
        let direct = crate::io::fs_type(dir) != Some(crate::io::TMPFS);
        assert_eq!(read(0).reads_direct(), direct);
        assert_eq!(read(1).mapped_bytes(), 0);
        assert_eq!(tc.rows.capacity(), 1 << 19);
        tc.fit(0);
        assert!(!read(0).reads_direct() && read(0).mapped_bytes() > 0);
        assert_eq!(tc.rows.capacity(), 0);
    }

    #[test]
    fn without_mapped_reads_nothing_switches() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFs);
        let opts = Options::default().mmap_reads(false).fs(fs);
        let tc = TableCache::with_capacity(tmp.path(), &opts, Arc::new(BlockCache::new(0)), None);
        tc.set_room(1 << 20);
        for bytes in [u64::MAX, 0] {
            tc.fit(bytes);
            assert!(!tc.stats().mapped);
        }
    }

    #[test]
    fn an_obsolete_file_is_deleted_after_eviction() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFs);
        let dir = tmp.path();
        let tc = cache(fs.clone(), dir, Some(1));
        let a = Arc::new(FileMeta::new(write_table(&*fs, dir, 1), Arc::clone(&tc)));
        let b = FileMeta::new(write_table(&*fs, dir, 2), Arc::clone(&tc));
        let held = a.table().expect("open a");
        assert!(tc.stats().mapped_bytes > 0, "PosixFs maps tables");
        b.table().expect("open b"); // evicts a, which `held` keeps open
        a.mark_obsolete();
        let reader = Arc::clone(&a); // an iterator's or a compaction's reference
        drop(a);
        assert!(fs.exists(&table_path(dir, 1)), "still referenced");
        drop(reader);
        // Removed by the purge thread, not the thread that let go.
        tc.purged();
        assert!(
            !fs.exists(&table_path(dir, 1)),
            "deleted with its last FileMeta"
        );
        // The open table still reads its (now unlinked) file.
        assert_eq!(value_of(&held, 1), Some(b"value1".to_vec()));
        // An obsolete table that is still cached is erased, then deleted.
        let c = FileMeta::new(write_table(&*fs, dir, 3), Arc::clone(&tc));
        c.table().expect("open c");
        assert_eq!(tc.ids(), vec![3]);
        c.mark_obsolete();
        drop(c);
        assert!(tc.ids().is_empty());
        tc.purged();
        assert!(!fs.exists(&table_path(dir, 3)));
        assert!(fs.exists(&table_path(dir, 2)));
        // Dropping the cache finishes what was queued: the file of an
        // obsolete table released just before is gone when it returns.
        let d = FileMeta::new(write_table(&*fs, dir, 4), Arc::clone(&tc));
        d.table().expect("open d");
        d.mark_obsolete();
        drop((d, b, held, tc));
        assert!(!fs.exists(&table_path(dir, 4)));
    }

    #[test]
    fn open_failures_are_returned_and_not_cached() {
        let (fs, dir) = mem_dir();
        let tc = cache(fs.clone(), dir, Some(4));
        let desc = write_table(&*fs, dir, 1);
        let wrong_size = FileMeta::new(
            FileDesc {
                size: desc.size + 1,
                ..desc.clone()
            },
            Arc::clone(&tc),
        );
        assert!(matches!(wrong_size.table(), Err(Error::Corruption { .. })));
        let missing = FileMeta::new(
            FileDesc {
                id: 7,
                ..desc.clone()
            },
            Arc::clone(&tc),
        );
        let e = missing.table().expect_err("no file");
        assert_eq!(e.io_kind(), Some(std::io::ErrorKind::NotFound));
        assert!(tc.ids().is_empty());
        drop(missing);
        // Once the file is there, the next read opens it.
        let late = write_table(&*fs, dir, 7);
        let ok = FileMeta::new(late, Arc::clone(&tc));
        ok.table().expect("opens now");
        assert_eq!(tc.stats().misses, 3);
    }
}
