//! The database: its public API (`Db`), the metadata behind one mutex
//! (`State`) and what readers take without it (`SuperVersion`); the state
//! every handle and thread shares is `Inner` (`inner.rs`).
//!
//! Thread-safety: `Db` is `Send + Sync`. Writers go through group commit
//! (`write.rs`): one leader at a time appends to the WAL and the memtable.
//! Readers take the current [`SuperVersion`] from an `ArcSwap` (no lock) and
//! read at the last *published* sequence number, so they never see part of
//! a batch. Metadata (version set, immutable memtables, background work)
//! lives in `State` behind one mutex that no read takes.

mod admission;
mod background;
mod backup;
mod checkpoint;
mod compact;
mod designs;
mod family;
pub(crate) mod flush;
mod inner;
mod keyspace;
mod logs;
pub(crate) use admission::{Admission, Hold};
pub(crate) use designs::Designs;
pub(crate) use family::{Family, Tree};
pub(crate) use inner::Inner;
pub(crate) use logs::{LogState, Logs};
mod read;
mod recovery;
mod room;
mod snapshot;
mod spare_log;
mod ttl;
mod write;

pub use checkpoint::CheckpointStats;
pub use keyspace::{Keyspace, MAX_KEYSPACE_NAME};
pub use read::{ReadOptions, Scan};
pub use snapshot::Snapshot;

use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::StatsSnapshot;
use crate::types::SeqNo;
use crate::version::{Version, VersionSet};

use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

/// What a read needs: the memtables and the version, taken together.
pub struct SuperVersion {
    pub mem: Arc<MemTable>,
    /// Immutable memtables, newest first.
    pub imm: Vec<Arc<MemTable>>,
    pub version: Arc<Version>,
}

impl SuperVersion {
    /// The range tombstones of the view: the memtables' and the version's.
    pub fn cover(&self) -> crate::rangedel::Cover {
        let mut c = crate::rangedel::Cover::of(self.mem.range_fragments());
        for m in &self.imm {
            if let Some(f) = m.range_fragments() {
                c.push(f);
            }
        }
        if !self.version.range_dels.is_empty() {
            c.push(Arc::clone(self.version.range_dels.fragments()));
        }
        c
    }

    /// True if a reader at `read_seq` sees a range tombstone hiding the
    /// version of `key` written at `seq`. Without range tombstones: one
    /// atomic load per memtable and one length check.
    pub fn hides(&self, key: &[u8], seq: SeqNo, read_seq: SeqNo) -> bool {
        let hides = |f: &crate::rangedel::Fragments| {
            f.newest_visible(key, read_seq).is_some_and(|t| t > seq)
        };
        self.mem.range_fragments().is_some_and(|f| hides(&f))
            || self
                .imm
                .iter()
                .any(|m| m.range_fragments().is_some_and(|f| hides(&f)))
            || (!self.version.range_dels.is_empty() && hides(self.version.range_dels.fragments()))
    }
}

/// Metadata guarded by `Inner::state`.
pub(crate) struct State {
    pub versions: VersionSet,
    /// Each keyspace's changing parts, indexed by its id (`family.rs`);
    /// `None` for an id no live keyspace has.
    pub trees: Vec<Option<Tree>>,
    /// What [`State::tree`] gives for a keyspace that is no longer live
    /// (a handle kept past its drop): an empty tree nothing writes to.
    pub gone: Tree,
    pub bg_error: Option<Error>,
    pub shutting_down: bool,
    /// The next WAL, made ahead of the switch that needs it.
    pub spare_log: spare_log::Spare,
    /// Background threads running a compaction: with more than one
    /// thread, one is always left free for flushes (`background.rs`).
    pub compacting_threads: usize,
    /// While a capture (checkpoint, backup) gathers a consistent cut of
    /// several keyspaces: only memtables at or below this log are flushed
    /// (`Inner::switch_all`, `checkpoint.rs`).
    pub flush_cut: Option<u64>,
}

impl State {
    /// The changing parts of `fam` (the empty `gone` once it is dropped).
    pub fn tree(&self, fam: &Family) -> &Tree {
        match self.trees.get(fam.index()) {
            Some(Some(t)) => t,
            _ => &self.gone,
        }
    }

    /// The changing parts of `fam`, to change.
    pub fn tree_mut(&mut self, fam: &Family) -> &mut Tree {
        match self.trees.get_mut(fam.index()) {
            Some(Some(t)) => t,
            _ => &mut self.gone,
        }
    }

    /// Every live keyspace's tree.
    pub fn live_trees(&self) -> impl Iterator<Item = &Tree> {
        self.trees.iter().flatten()
    }

    /// The number of the WAL writers append to: every switch starts a new
    /// one, whose number the switched keyspace's new memtable takes.
    pub fn active_log(&self) -> u64 {
        self.live_trees()
            .map(|t| t.mem.log_number())
            .max()
            .unwrap_or(0)
    }

    /// `Err` once a background error poisoned the database (`Poisoned`) or
    /// it is closing (`Closed`): what writers and waiters check before going
    /// on (`flush` first returns `Ok` if nothing is left to flush).
    pub fn check_usable(&self) -> Result<()> {
        if let Some(e) = &self.bg_error {
            return Err(Error::Poisoned(Arc::new(e.clone())));
        }
        if self.shutting_down {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// `fam`'s round-robin compaction pointer of every level, as the
    /// picker takes them.
    pub fn compact_pointers(&self, fam: &Family, num_levels: usize) -> Vec<Vec<u8>> {
        (0..num_levels)
            .map(|l| self.versions.compact_pointer(fam.id, l).to_vec())
            .collect()
    }
}

/// An open database. See the crate docs and `docs/ARCHITECTURE.md`.
pub struct Db {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database in `path`.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let inner = Arc::new(recovery::open(path.as_ref(), opts)?);
        Self::start(inner, &mut |i, inner| {
            let nice = inner.opts.background_nice;
            let gate = Some(inner.admission.yielding.clone());
            crate::sched::spawn_background(format!("strata-bg-{i}"), nice, gate, move || {
                background::run(&inner)
            })
        })
    }

    /// Starts the background threads with `spawn`. If one cannot start, the
    /// started ones are stopped and joined, so the last `Arc<Inner>` (and
    /// with it the directory's LOCK) is released before the error returns.
    fn start(
        inner: Arc<Inner>,
        spawn: &mut dyn FnMut(usize, Arc<Inner>) -> std::io::Result<JoinHandle<()>>,
    ) -> Result<Db> {
        let mut threads = Vec::new();
        // The memtables' chunk filler. Without it (no thread to be had)
        // writers make their own chunks: slower at times, not wrong.
        let pool = inner.chunks.clone();
        let nice = inner.opts.background_nice;
        if let Ok(t) = crate::sched::spawn_background("strata-mem", nice, None, move || {
            pool.fill_until_stopped()
        }) {
            threads.push(t);
        }
        for i in 0..inner.opts.background_threads {
            match spawn(i, inner.clone()) {
                Ok(t) => threads.push(t),
                Err(e) => {
                    inner.state.lock().shutting_down = true;
                    inner.admission.end_fast_paths();
                    inner.bg_cv.notify_all();
                    inner.chunks.stop();
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(Error::io(&inner.dir, e));
                }
            }
        }
        let db = Db {
            inner,
            threads: Mutex::new(threads),
        };
        // Work left from before (too many L0 tables, say) starts at once.
        db.inner.bg_cv.notify_all();
        Ok(db)
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options it was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Stops background work and syncs the WALs (flushing the memtable
    /// first with `flush_on_close`). Called by `drop`; calling it first lets
    /// the caller see an error.
    pub fn close(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let flushed =
            if self.inner.opts.flush_on_close && self.inner.state.lock().bg_error.is_none() {
                self.inner.live_families().iter().try_for_each(|f| {
                    match self.inner.flush_family(f) {
                        // Dropped meanwhile: nothing of it to keep.
                        Err(_) if f.is_dropped() => Ok(()),
                        r => r,
                    }
                })
            } else {
                Ok(())
            };
        self.inner.closed.store(true, Ordering::Release);
        {
            let mut st = self.inner.state.lock();
            st.shutting_down = true;
            self.inner.admission.end_fast_paths();
            self.inner.bg_cv.notify_all();
            self.inner.done_cv.notify_all();
            // A compaction may run in a caller's thread (`compact_range`):
            // nothing may change the directory once close returns.
            while !st
                .live_trees()
                .all(|t| t.in_flight.is_empty() && !t.flushing)
            {
                self.inner
                    .done_cv
                    .wait_for(&mut st, std::time::Duration::from_millis(50));
            }
        }
        self.inner.chunks.stop();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // Tables released so far are closed and the replaced ones' files
        // removed (`TableCache::release` hands both to a purger thread)
        // before close returns: nothing changes the directory after it.
        self.inner.tables.purged();
        // The write times of what stays in the logs (`ttl_secs`), each
        // keyspace's with a ttl in one record.
        let mut timed_parts: Vec<crate::version::Edit> = self
            .inner
            .live_families()
            .iter()
            .filter_map(|f| {
                Some(crate::version::Edit {
                    family: f.id,
                    write_times: Some(f.expiry.as_ref()?.times()),
                    ..Default::default()
                })
            })
            .collect();
        let timed = if timed_parts.is_empty() || self.inner.state.lock().bg_error.is_some() {
            Ok(())
        } else {
            let mut edit = match timed_parts.first() {
                Some(p) if p.family == 0 => timed_parts.remove(0),
                _ => crate::version::Edit::default(),
            };
            edit.others = timed_parts;
            let st = self.inner.state.lock();
            self.inner
                .log_and_apply(&self.inner.default, st, &mut edit)
                .1
        };
        let spare = std::mem::take(&mut self.inner.state.lock().spare_log);
        if let spare_log::Spare::Ready(w) = spare {
            spare_log::discard(&self.inner, w);
        }
        // Make the logs durable even if the flush failed: older logs first,
        // so that a power loss never keeps a newer log without an older one.
        let synced = {
            let mut log = self.inner.logs.active.lock();
            self.inner
                .sync_before_current_log(&mut log)
                .and_then(|()| log.writer.sync_final())
        };
        // Nothing changes the directory from here on.
        self.inner.locks.lock().clear();
        flushed.and(timed).and(synced)
    }

    /// What the open's log replay left out, or `None` when it replayed
    /// every log to its end: where it stopped (log, offset) and why (a torn
    /// tail after a crash, damage, a gap in the history), and the logs after
    /// it that it did not replay; or the damaged regions `SkipAnyCorrupted`
    /// skipped. Writes acknowledged with `sync` are never among what is left
    /// out. The counts are in [`Db::stats`] too (`recovery_*`).
    pub fn recovery_report(&self) -> Option<&str> {
        self.inner.recovery_report.as_deref()
    }

    /// A copy of the statistics and the current shape of the tree.
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.stats_snapshot()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Db({})", self.inner.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemFs;
    use std::collections::BTreeMap;

    /// The background threads run `background_nice` above the nice value
    /// of the thread that opened the database (read from /proc).
    #[cfg(target_os = "linux")]
    #[test]
    fn background_threads_are_niced() {
        fn nice_of(stat: &str) -> i32 {
            // Fields after the parenthesised name: state is field 3, nice 19.
            let rest = &stat[stat.rfind(')').expect("stat") + 2..];
            rest.split(' ')
                .nth(16)
                .expect("nice")
                .parse()
                .expect("number")
        }
        let me = std::fs::read_to_string("/proc/thread-self/stat").expect("own stat");
        let base = nice_of(&me);
        let dir = tempfile::tempdir().expect("tempdir");
        for (nice, name) in [(7, "strata-bg-0"), (0, "strata-bg-1"), (7, "strata-mem")] {
            let opts = Options::default()
                .background_nice(nice)
                .background_threads(2);
            let db = Db::open(dir.path(), opts).expect("open");
            let mut seen = 0;
            for _ in 0..100 {
                seen = 0;
                for task in std::fs::read_dir("/proc/self/task").expect("tasks") {
                    let path = task.expect("task").path();
                    let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
                    if comm.trim() == name {
                        let stat = std::fs::read_to_string(path.join("stat")).expect("stat");
                        if nice_of(&stat) == (base + nice).min(19) {
                            seen += 1;
                        }
                    }
                }
                if seen > 0 {
                    break;
                }
                // The thread sets its priority as it starts.
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            // Other tests' databases may run threads of the same name
            // (at the default nice 10, or just started at the base).
            assert!(seen >= 1, "{name} at nice {base} + {nice}");
            db.close().expect("close");
        }
        assert!(Options::default().background_nice(20).validate().is_err());
        assert!(Options::default().background_nice(-1).validate().is_err());
    }

    /// A background thread that cannot start: the others are stopped, the
    /// open fails with an I/O error, and the LOCK is released.
    #[test]
    fn failed_thread_start_releases_the_lock() {
        let fs = Arc::new(MemFs::new());
        let opts = Options::default().fs(fs.clone()).background_threads(3);
        let inner = Arc::new(recovery::open(Path::new("/db"), opts.clone()).expect("recover"));
        let mut started = 0;
        let r = Db::start(inner, &mut |i, inner| {
            if i == 2 {
                return Err(std::io::Error::other("no threads left"));
            }
            started += 1;
            std::thread::Builder::new().spawn(move || background::run(&inner))
        });
        assert_eq!(started, 2);
        match r {
            Err(e) => assert!(e.io_kind().is_some(), "{e}"),
            Ok(_) => panic!("open succeeded without its threads"),
        }
        let db = Db::open("/db", opts).expect("the LOCK was released");
        db.put("k", "v").expect("put");
    }

    /// With `direct_reads`, tables past the page cache's room answer point
    /// lookups from the row cache: at the latest state and at older snapshots, across flushes
    /// and compactions, every get matches a model, and the cache answered
    /// some of them.
    #[test]
    fn row_cache_lookups_match_a_model_at_every_snapshot() {
        use rand::{Rng, SeedableRng};
        let fs = Arc::new(MemFs::new());
        let opts = Options::default()
            .fs(fs)
            .write_buffer_size(32 << 10)
            .block_cache_size(1 << 20)
            .memory_budget(0)
            .direct_reads(true);
        let db = Db::open("/db", opts).expect("open");
        // The tables (30-60 KB live) are past a room of 16 KiB: direct
        // reads (`MemFs` reads them as it reads any file) and a row cache
        // of 8 KiB, a few dozen rows.
        db.inner.tables.set_room(16 << 10);
        db.inner.tables.fit(u64::MAX);
        assert!(db.stats().memory.row_cache_capacity > 0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut model: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        let mut snaps: Vec<(Snapshot, BTreeMap<u32, Vec<u8>>)> = Vec::new();
        let key = |k: u32| format!("key{k:05}");
        let check = |db: &Db, snap: Option<&Snapshot>, m: &BTreeMap<u32, Vec<u8>>, k: u32| {
            let got = db
                .get_opt(key(k), &ReadOptions { snapshot: snap })
                .expect("get");
            assert_eq!(
                got.as_ref(),
                m.get(&k),
                "{} at {:?}",
                key(k),
                snap.map(|s| s.sequence())
            );
        };
        for op in 0..6000u32 {
            let k = rng.gen_range(0..300);
            if rng.gen_bool(0.2) {
                db.delete(key(k)).expect("delete");
                model.remove(&k);
            } else {
                let v = format!("v{op}-{}", "x".repeat(rng.gen_range(0..200))).into_bytes();
                db.put(key(k), &v).expect("put");
                model.insert(k, v);
            }
            if op % 700 == 0 {
                db.flush().expect("flush");
            }
            if op % 2500 == 0 {
                db.compact_range::<&[u8], _>(..).expect("compact");
            }
            if op % 400 == 0 {
                if snaps.len() == 4 {
                    snaps.remove(0);
                }
                snaps.push((db.snapshot(), model.clone()));
            }
            // Hot keys, read again and again: the row cache's business.
            for _ in 0..3 {
                let k = rng.gen_range(0..300).min(rng.gen_range(0..300));
                check(&db, None, &model, k);
                let (snap, m) = &snaps[rng.gen_range(0..snaps.len())];
                check(&db, Some(snap), m, k);
            }
        }
        db.flush().expect("flush");
        for k in 0..300 {
            check(&db, None, &model, k);
            for (snap, m) in &snaps {
                check(&db, Some(snap), m, k);
            }
        }
        let s = db.stats();
        assert!(
            s.row_cache_hits > 1000,
            "{} row cache hits",
            s.row_cache_hits
        );
        assert!(!s.tables_mapped);
    }
}
