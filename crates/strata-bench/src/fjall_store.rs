//! fjall 3 (the pure-Rust LSM from crates.io) as a comparator behind
//! [`strata::KvStore`], built with the `comparators` feature.
//!
//! It runs with fjall's own defaults except what every engine of a run
//! shares: no compression, the run's memtable size and cache
//! size, and its sync policy; with `--own-defaults`, with all of fjall's
//! own defaults but the sync policy (a synced write is the write, then
//! `persist(SyncData)` of the journal, as a fjall user makes a write
//! durable). One keyspace holds the data.

use crate::settings::{EngineSettings, OpenEngine};
use crate::BenchError;
use fjall::config::CompressionPolicy;
use fjall::{
    AbstractTree, CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable,
};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use strata::stats::LevelStats;
use strata::types::ValueKind;
use strata::{
    Cursor, KvStore, ScanRange, Semantics, StatsSnapshot, StoreSnapshot, StoreStats, WriteBatch,
    WriteOptions,
};

/// The fjall release this crate is built against (Cargo.lock pins it).
const VERSION: &str = "3.1";

/// The longest `flush` and `wait_for_compactions` wait for fjall's
/// background work.
const WAIT_LIMIT: Duration = Duration::from_secs(600);

/// fjall levels reported in stats (its default level count).
const LEVELS: usize = 7;

/// An open fjall database and its one keyspace.
pub struct FjallStore {
    db: Database,
    ks: Keyspace,
    /// `persist(SyncData)` after every write.
    sync: bool,
    path: PathBuf,
    closed: AtomicBool,
    name: String,
}

fn err(path: &Path, e: fjall::Error) -> strata::Error {
    strata::Error::io(path, std::io::Error::other(format!("fjall: {e}")))
}

/// The run's compression for data blocks and for large values in the
/// journal (fjall compresses those with LZ4 by default).
fn compression(name: &str) -> Result<CompressionType, BenchError> {
    match name {
        "none" => Ok(CompressionType::None),
        "lz4" => Ok(CompressionType::Lz4),
        other => Err(BenchError::Usage(format!(
            "fjall: compression {other:?} is not supported (none or lz4)"
        ))),
    }
}

/// fjall's memtable size when `max_memtable_size` is not set (3.1's
/// `KeyspaceCreateOptions::default()`; the field is private, so it is
/// stated here, not read back).
pub const OWN_MEMTABLE_SIZE: u64 = 64 << 20;

/// The settings line of an own-defaults run: the cache capacity read back
/// from the open database, the keyspace's public default policies as fjall
/// prints them, the rest as fjall 3.1's defaults are written.
pub fn own_settings(cache_capacity: u64, opts: &KeyspaceCreateOptions, sync: bool) -> String {
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    format!(
        "{} (fjall {VERSION} Config and KeyspaceCreateOptions untouched): memtable={} MiB, cache={} MiB \
         (read back), data blocks {:?}, data block compression {:?} (its lz4 feature, on by default: none \
         on L0-L1, LZ4 below), journal LZ4 for values of 4 KiB and more, filters {:?}, leveled compaction \
         (L0 trigger 4, 64 MiB tables, x10 per level, 7 levels), worker threads min(cores, 4) = {}, sync={sync}",
        crate::settings::OWN_DEFAULTS_PREFIX,
        OWN_MEMTABLE_SIZE >> 20,
        cache_capacity >> 20,
        opts.data_block_size_policy,
        opts.data_block_compression_policy,
        opts.filter_policy,
        workers.min(4)
    )
}

/// Opens (creating) fjall in `dir` with fjall's own defaults
/// (`--own-defaults`): only the sync policy is the run's.
fn open_own(settings: &EngineSettings, dir: &Path) -> Result<OpenEngine, BenchError> {
    let failed = |e: fjall::Error| BenchError::Engine(err(dir, e));
    let db = Database::builder(dir).open().map_err(failed)?;
    let ks = db
        .keyspace("bench", KeyspaceCreateOptions::default)
        .map_err(failed)?;
    let shown = own_settings(
        db.cache_capacity(),
        &KeyspaceCreateOptions::default(),
        settings.sync,
    );
    Ok(wrap(db, ks, settings.sync, dir, shown))
}

/// The store and what the report says about it.
fn wrap(db: Database, ks: Keyspace, sync: bool, dir: &Path, shown: String) -> OpenEngine {
    let version = format!("fjall {VERSION}");
    let store = FjallStore {
        db,
        ks,
        sync,
        path: dir.to_path_buf(),
        closed: AtomicBool::new(false),
        name: format!("{version} ({shown})"),
    };
    OpenEngine {
        store: Box::new(store),
        version,
        settings: shown,
    }
}

/// Opens (creating) fjall in `dir` with the run's shared settings (or with
/// its own defaults when `settings.own_defaults`).
pub fn open(settings: &EngineSettings, dir: &Path) -> Result<OpenEngine, BenchError> {
    if settings.own_defaults {
        return open_own(settings, dir);
    }
    let failed = |e: fjall::Error| BenchError::Engine(err(dir, e));
    let kind = compression(&settings.compression)?;
    let db = Database::builder(dir)
        .cache_size(settings.block_cache_size as u64)
        .journal_compression(kind)
        .open()
        .map_err(failed)?;
    let policy = CompressionPolicy::all(kind);
    let memtable = settings.write_buffer_size as u64;
    let ks = db
        .keyspace("bench", move || {
            KeyspaceCreateOptions::default()
                .max_memtable_size(memtable)
                .data_block_compression_policy(policy.clone())
        })
        .map_err(failed)?;
    let shown = format!(
        "fjall defaults (leveled, 4 KiB blocks, 64 MiB tables, its bloom policy) with compression={} (blocks and journal), memtable={} MiB, cache={} MiB, sync={}",
        settings.compression,
        settings.write_buffer_size >> 20,
        settings.block_cache_size >> 20,
        settings.sync
    );
    Ok(wrap(db, ks, settings.sync, dir, shown))
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A [`Cursor`] over fjall: a forward or backward range iterator from the
/// last positioning call, and the entry it stands on.
struct FjallCursor {
    ks: Keyspace,
    iter: Option<fjall::Iter>,
    forward: bool,
    cur: Option<fjall::KvPair>,
    error: Option<String>,
    path: PathBuf,
}

impl FjallCursor {
    /// Opens a range iterator in direction `forward` and steps onto its first entry.
    fn start(&mut self, range: (Bound<Vec<u8>>, Bound<Vec<u8>>), forward: bool) {
        self.iter = Some(self.ks.range::<Vec<u8>, _>(range));
        self.forward = forward;
        self.step();
    }

    /// Moves onto the iterator's next entry in its direction.
    fn step(&mut self) {
        let next = match self.iter.as_mut() {
            Some(it) if self.forward => it.next(),
            Some(it) => it.next_back(),
            None => None,
        };
        self.cur = match next.map(fjall::Guard::into_inner) {
            Some(Ok(kv)) => Some(kv),
            Some(Err(e)) => {
                self.error.get_or_insert_with(|| e.to_string());
                None
            }
            None => None,
        };
    }
}

impl Cursor for FjallCursor {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |(_, v)| v)
    }
    fn status(&self) -> strata::Result<()> {
        match &self.error {
            Some(e) => Err(strata::Error::io(
                &self.path,
                std::io::Error::other(format!("fjall: {e}")),
            )),
            None => Ok(()),
        }
    }
    fn seek_to_first(&mut self) {
        self.start((Bound::Unbounded, Bound::Unbounded), true);
    }
    fn seek_to_last(&mut self) {
        self.start((Bound::Unbounded, Bound::Unbounded), false);
    }
    fn seek(&mut self, target: &[u8]) {
        self.start((Bound::Included(target.to_vec()), Bound::Unbounded), true);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.start((Bound::Unbounded, Bound::Included(target.to_vec())), false);
    }
    fn next(&mut self) {
        let Some((k, _)) = &self.cur else { return };
        if !self.forward {
            let from = Bound::Excluded(k.to_vec());
            self.start((from, Bound::Unbounded), true);
        } else {
            self.step();
        }
    }
    fn prev(&mut self) {
        let Some((k, _)) = &self.cur else { return };
        if self.forward {
            let to = Bound::Excluded(k.to_vec());
            self.start((Bound::Unbounded, to), false);
        } else {
            self.step();
        }
    }
}

impl FjallStore {
    fn live(&self) -> strata::Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(strata::Error::Closed)
        } else {
            Ok(())
        }
    }

    fn err(&self, e: fjall::Error) -> strata::Error {
        err(&self.path, e)
    }

    /// A flush is queued or being written (a flush being written is no
    /// longer queued, but its memtable is still sealed).
    fn flushing(&self) -> bool {
        self.db.outstanding_flushes() > 0 || self.ks.sealed_memtable_count() > 0
    }

    /// The error of a wait for background work that passed [`WAIT_LIMIT`].
    fn timed_out(&self, what: &str) -> strata::Error {
        strata::Error::io(
            &self.path,
            std::io::Error::other(format!("fjall: {what} after {} s", WAIT_LIMIT.as_secs())),
        )
    }

    /// Makes the journal durable when the run syncs every write.
    fn after_write(&self) -> strata::Result<()> {
        if self.sync {
            self.db
                .persist(PersistMode::SyncData)
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// What idleness looks like: no flush queued, no compaction running,
    /// and the table counts (unchanged across looks means nothing new was
    /// scheduled in between).
    fn activity(&self) -> (bool, Vec<usize>) {
        let busy = self.flushing() || self.db.active_compactions() > 0;
        let mut shape: Vec<usize> = (0..LEVELS)
            .map(|l| self.ks.tree.level_table_count(l).unwrap_or(0))
            .collect();
        shape.push(self.db.compactions_completed());
        (busy, shape)
    }
}

impl KvStore for FjallStore {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn semantics(&self) -> Semantics {
        Semantics {
            engine: "fjall",
            atomic_batches: true,
            // A scan reads through a database snapshot taken at its start.
            snapshot_scans: true,
            snapshots: false,
            range_deletes: false,
            merges: false,
            unsynced: "a process crash (the journal is written to the OS per write)",
            synced: "per-write sync is the run's setting here (persist(SyncData) after each write)",
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> strata::Result<()> {
        self.live()?;
        self.ks.insert(key, value).map_err(|e| self.err(e))?;
        self.after_write()
    }

    fn get(&self, key: &[u8]) -> strata::Result<Option<Vec<u8>>> {
        self.live()?;
        Ok(self
            .ks
            .get(key)
            .map_err(|e| self.err(e))?
            .map(|v| v.to_vec()))
    }

    fn delete(&self, key: &[u8]) -> strata::Result<()> {
        self.live()?;
        self.ks.remove(key).map_err(|e| self.err(e))?;
        self.after_write()
    }

    fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> strata::Result<()> {
        self.live()?;
        if batch.has_range_deletes() || batch.has_merges() {
            return Err(strata::Error::NotSupported(
                "range deletion or merges through the fjall comparator binding".into(),
            ));
        }
        let mut b = self.db.batch();
        for entry in &batch {
            let e = entry?;
            match e.kind {
                ValueKind::Value => b.insert(&self.ks, e.key, e.value),
                ValueKind::Delete => b.remove(&self.ks, e.key),
                // Refused above.
                ValueKind::RangeDelete | ValueKind::Merge => {}
            }
        }
        if self.sync || opts.sync {
            b = b.durability(Some(PersistMode::SyncData));
        }
        b.commit().map_err(|e| self.err(e))
    }

    fn scan(&self, range: ScanRange<'_>) -> strata::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan_visit(range, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
        })?;
        Ok(out)
    }

    fn scan_visit(
        &self,
        range: ScanRange<'_>,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> strata::Result<usize> {
        let ScanRange {
            start,
            end,
            limit,
            reverse,
        } = range;
        self.live()?;
        if limit == 0 {
            return Ok(0);
        }
        let range = (owned(start), owned(end));
        // An empty or inverted range has nothing (fjall's range would panic
        // on some inverted bounds, as BTreeMap's does).
        if let (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) =
            (&range.0, &range.1)
        {
            let empty =
                s > e || (s == e && !matches!(range, (Bound::Included(_), Bound::Included(_))));
            if empty {
                return Ok(0);
            }
        }
        let iter = self.db.snapshot().range::<Vec<u8>, _>(&self.ks, range);
        let mut n = 0;
        // fjall hands out its own slices (no copy is made here).
        let mut visit = |g: fjall::Guard| -> strata::Result<bool> {
            let (k, v) = g.into_inner().map_err(|e| self.err(e))?;
            f(&k, &v);
            n += 1;
            Ok(n < limit)
        };
        if reverse {
            for g in iter.rev() {
                if !visit(g)? {
                    break;
                }
            }
        } else {
            for g in iter {
                if !visit(g)? {
                    break;
                }
            }
        }
        Ok(n)
    }

    /// A cursor over fjall's own range iterators (each positioning call
    /// opens one at the newest data; a snapshot is not taken).
    fn cursor(&self, snap: Option<&StoreSnapshot>) -> strata::Result<Box<dyn Cursor>> {
        self.live()?;
        if snap.is_some() {
            return Err(strata::Error::NotSupported(
                "snapshots on the fjall comparator".into(),
            ));
        }
        Ok(Box::new(FjallCursor {
            ks: self.ks.clone(),
            iter: None,
            forward: true,
            cur: None,
            error: None,
            path: self.path.clone(),
        }))
    }

    fn flush(&self) -> strata::Result<()> {
        self.live()?;
        // Seal the active memtable, then wait (bounded: fjall's own
        // `rotate_memtable_and_wait` waits forever if a flush worker
        // failed) until no flush is queued and every sealed memtable,
        // including those writers sealed before this call, is written.
        self.ks.rotate_memtable().map_err(|e| self.err(e))?;
        let started = Instant::now();
        while self.flushing() {
            self.live()?;
            if started.elapsed() > WAIT_LIMIT {
                return Err(self.timed_out("sealed memtables still unwritten"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| self.err(e))
    }

    fn compact(&self) -> strata::Result<()> {
        self.flush()?;
        self.ks.major_compact().map_err(|e| self.err(e))
    }

    /// fjall cannot block on its background work: poll until four looks in
    /// a row, 50 ms apart, find nothing queued or running and the same
    /// table counts; give up after ten minutes.
    fn wait_for_compactions(&self) -> strata::Result<()> {
        const QUIET_LOOKS: u32 = 4;
        let started = Instant::now();
        let mut last: Option<Vec<usize>> = None;
        let mut quiet = 0;
        // When the idle state the final looks confirm was first seen.
        let mut idle_since = std::time::Instant::now();
        while quiet < QUIET_LOOKS {
            self.live()?;
            match self.activity() {
                (false, shape) if last.as_ref() == Some(&shape) => quiet += 1,
                (false, shape) => {
                    last = Some(shape);
                    quiet = 1;
                    idle_since = std::time::Instant::now();
                }
                (true, _) => {
                    last = None;
                    quiet = 0;
                }
            }
            if started.elapsed() > WAIT_LIMIT {
                return Err(self.timed_out("background work still running"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        crate::sys::note_settle_overshoot(idle_since.elapsed());
        Ok(())
    }

    fn stats(&self) -> StoreStats {
        let mut s = StatsSnapshot::default();
        if !self.closed.load(Ordering::Acquire) {
            for level in 0..LEVELS {
                s.levels.push(LevelStats {
                    files: self.ks.tree.level_table_count(level).unwrap_or(0),
                    ..LevelStats::default()
                });
            }
        }
        let mut out = StoreStats::from_lsm(s);
        out.engine = "fjall";
        out
    }

    /// Marks the store closed; the database closes at drop (fjall persists
    /// its journal then). Like the other engines, the memtable is not
    /// flushed.
    fn close(&self) -> strata::Result<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
}
