//! The state every handle, writer and background thread of one database
//! shares (`Inner`), and its methods that are not one path's own: the
//! keyspaces' list, super-version and version-edit installs, the
//! compaction rules' inputs, snapshots, the background error, and the
//! stats snapshot.

use super::{family, write, Admission, Family, Hold, Logs, State, SuperVersion};
use crate::error::{Error, Result};
use crate::io::FileLock;
use crate::options::Options;
use crate::stats::{LevelStats, Stats, StatsSnapshot};
use crate::table::BlockCache;
use crate::types::SeqNo;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The shared state behind a [`Db`](super::Db) and its keyspaces.
pub(crate) struct Inner {
    pub dir: PathBuf,
    pub opts: Options,
    pub cache: Arc<BlockCache>,
    /// Arena chunks of flushed memtables, for the next ones.
    pub chunks: Arc<crate::memtable::ChunkPool>,
    pub state: Mutex<State>,
    /// Wakes background threads.
    pub bg_cv: Condvar,
    /// Signalled when background work finishes (stalled writers, `flush`).
    pub done_cv: Condvar,
    /// Last sequence number visible to readers.
    pub last_seq: AtomicU64,
    /// The active WAL and the logs of immutable memtables (`logs.rs`).
    pub logs: Logs,
    /// The write leader's queue (`write.rs`).
    pub commit: write::Commit,
    pub snapshots: Mutex<BTreeMap<SeqNo, usize>>,
    /// Held by `Db::snapshot` while it takes a snapshot, and by a
    /// compaction whose filter changed entries from its check that no
    /// snapshot was taken since it began (`snapshots_taken`) until its
    /// outputs are installed (`compact.rs`), so no snapshot sees a key both
    /// before and after the filter. Lock order: taken with no other engine
    /// lock held, before `apply` and `state`; `snapshots` is taken under it.
    pub snapshot_gate: Mutex<()>,
    /// Snapshots taken so far (raised under `snapshot_gate`; read without
    /// it when a compaction begins).
    pub snapshots_taken: AtomicU64,
    /// Held for a whole version edit (`Inner::log_and_apply`): one edit at a
    /// time goes to the manifest, while the state mutex is free for writers.
    /// Lock order: `apply` before `state`.
    pub apply: Mutex<()>,
    /// The open tables (shared with the version set): edits open their
    /// new tables through it outside the state mutex; `stats` reads it.
    pub tables: Arc<crate::version::TableCache>,
    /// The memory budget resolved at open (`opts` holds the sizes it
    /// lowered).
    pub budget: crate::budget::MemoryBudget,
    /// The `default` keyspace's tree (`family.rs`).
    pub default: Arc<Family>,
    /// Every live keyspace, indexed by id (`default` at 0); `None` for an
    /// id no live keyspace has. Lock order: taken last (after `state`);
    /// no other lock is taken while it is held.
    pub families: parking_lot::RwLock<Vec<Option<Arc<Family>>>>,
    /// Held by `create_keyspace` and `drop_keyspace`: one at a time.
    pub keyspace_ops: Mutex<()>,
    pub stats: Stats,
    pub closed: AtomicBool,
    /// What writers and background threads read without the state mutex:
    /// whether anything holds writes back, the pacer, the CPU budget
    /// (`admission.rs`; set with every super-version).
    pub admission: Admission,
    /// What the open's log replay left out, if anything (see
    /// [`Db::recovery_report`]).
    pub recovery_report: Option<String>,
    /// The directory's LOCK and level 0's own directory's (`fast_dir`,
    /// when it is another one): released by `close`, so a handle kept
    /// past it (a `Keyspace`) does not keep the directory locked.
    pub(super) locks: Mutex<Vec<Box<dyn FileLock>>>,
}

impl Inner {
    /// [`Db::stats`].
    pub(crate) fn stats_snapshot(&self) -> StatsSnapshot {
        let inner = self;
        let mut s = StatsSnapshot::from_counters(&inner.stats);
        let sv = inner.default.super_version.load();
        s.memtable_bytes = sv.mem.approximate_size() as u64;
        s.immutable_memtables = sv.imm.len();
        s.last_sequence = inner.last_seq.load(Ordering::Acquire);
        s.block_cache_hits = inner.cache.hits();
        s.block_cache_misses = inner.cache.misses();
        s.block_cache_usage = inner.cache.usage();
        let mut read = 0u64;
        for (level, files) in sv.version.levels.iter().enumerate() {
            for f in files {
                read += f.bytes_read();
            }
            let by_level = |a: &[AtomicU64; crate::stats::MAX_LEVELS]| {
                a.get(level).map_or(0, |c| c.load(Ordering::Relaxed))
            };
            s.levels.push(LevelStats {
                files: files.len(),
                bytes: files.iter().map(|f| f.size()).sum(),
                compaction_bytes_written: by_level(&inner.stats.compaction_written_by_level),
                compaction_bytes_read: by_level(&inner.stats.compaction_read_by_level),
            });
        }
        s.manifest_bytes = inner.state.lock().versions.manifest_bytes_written;
        s.slowdown_rate = inner.admission.slowdown.lock().allowed_rate() as u64;
        (s.arena_chunks_made_ahead, s.arena_chunk_misses) = inner.chunks.counts();
        let usage = inner.default.designs.tracker.usage();
        s.update_table_entries = usage.entries;
        s.update_table_bytes = usage.bytes;
        let tables = inner.tables.stats();
        s.open_tables = tables.open_tables;
        s.mapped_table_bytes = tables.mapped_bytes;
        s.pinned_index_filter_bytes = tables.pinned_bytes;
        s.table_cache_hits = tables.hits;
        s.table_cache_misses = tables.misses;
        s.table_cache_evictions = tables.evictions;
        s.warmed_tables = tables.warmed_tables;
        s.warmed_table_bytes = tables.warmed_bytes;
        s.tables_mapped = tables.mapped;
        s.row_cache_hits = tables.row_cache_hits;
        s.row_cache_misses = tables.row_cache_misses;
        s.memory = crate::stats::MemoryStats {
            budget: inner.budget.total,
            memtables_share: inner.budget.memtables,
            block_cache_share: inner.budget.block_cache,
            pins_share: inner.budget.pins,
            page_cache_room: inner.budget.page_cache_room,
            write_buffer_size: inner.opts.write_buffer_size as u64,
            block_cache_capacity: inner.opts.block_cache_size as u64,
            // Every keyspace's memtables.
            memtables: inner
                .live_families()
                .iter()
                .map(|f| {
                    let sv = f.super_version.load();
                    sv.imm
                        .iter()
                        .chain(std::iter::once(&sv.mem))
                        .map(|m| m.memory_held() as u64)
                        .sum::<u64>()
                })
                .sum::<u64>()
                + inner.chunks.held_bytes(),
            block_cache: s.block_cache_usage,
            pins: s.pinned_index_filter_bytes,
            row_cache_capacity: tables.row_cache_capacity,
            row_cache: tables.row_cache_bytes,
        };
        s.table_bytes_read = read;
        inner
            .default
            .designs
            .l0
            .fill_stats(&*sv.version, &mut s.l0_rows);
        s.range_tombstones = sv.version.range_dels.list().len() as u64;
        s.range_tombstone_bytes = sv.version.range_dels.key_bytes() as u64;
        s
    }
}

impl Inner {
    /// Every live keyspace, `default` first.
    pub(crate) fn live_families(&self) -> Vec<Arc<Family>> {
        self.families.read().iter().flatten().cloned().collect()
    }

    /// Publishes a new super version of `fam` from the state (call with the state locked).
    ///
    /// Returns the super-version it replaced. Callers drop it with the
    /// state mutex released: it may hold the last reference to a flushed
    /// memtable (tens of MiB to free) or to compacted tables (unmapped,
    /// closed and deleted on drop), work that every writer would
    /// otherwise wait for.
    #[must_use = "drop the old super-version outside the state mutex"]
    pub(crate) fn install_super_version(&self, fam: &Family, st: &mut State) -> Arc<SuperVersion> {
        let version = st.versions.current(fam.id);
        let opts = &fam.opts;
        let usable = st.bg_error.is_none() && !st.shutting_down;
        let tree = st.tree_mut(fam);
        let mut imm = tree.imm.clone();
        imm.reverse();
        tree.compaction_debt = crate::compaction::picker::compaction_debt(&version, opts);
        let l0 = fam.designs.l0.pressure(&*version, opts);
        tree.hold = Hold::of(l0, tree.compaction_debt, tree.slots_full(opts), opts);
        // The writers' fast paths follow `default`; a write to another
        // keyspace checks its tree's hold under the state mutex.
        if fam.id == family::DEFAULT_ID {
            self.admission.publish(tree.hold, usable, tree.imm.first());
        }
        fam.super_version.swap(Arc::new(SuperVersion {
            mem: tree.mem.clone(),
            imm,
            version,
        }))
    }

    /// Logs `edit` (of keyspace `fam`) to the manifest and installs the new version. Called
    /// with the state locked; returns with it locked again. The slow parts —
    /// opening the added tables, the manifest append and its sync — run
    /// with the state mutex released (writers and readers go on); the
    /// `apply` mutex keeps edits in order, so the version an edit was built
    /// on is still current when it is installed.
    pub(crate) fn log_and_apply<'a>(
        &'a self,
        fam: &Family,
        st: parking_lot::MutexGuard<'a, State>,
        edit: &mut crate::version::Edit,
    ) -> (parking_lot::MutexGuard<'a, State>, Result<()>) {
        // The edit's tree fields are `fam`'s.
        edit.family = fam.id;
        drop(st);
        let one_edit = self.apply.lock();
        let mut opened = Vec::new();
        for (_, d) in &edit.added {
            // A table that moved is already open in the version.
            if !edit.deleted.iter().any(|(_, id)| *id == d.id) {
                match crate::version::FileMeta::open(d.clone(), &self.tables) {
                    Ok(m) => opened.push(m),
                    Err(e) => return (self.state.lock(), Err(e)),
                }
            }
        }
        // New level-0 pieces beyond tables are opened here, without the
        // state mutex: the current version cannot change meanwhile (every
        // edit holds `apply`).
        let current = || {
            let v = self.state.lock().versions.current(fam.id);
            v.rows.clone()
        };
        let with_rows = match fam.designs.l0.open_added(edit, &current, &self.opts.fs) {
            Ok(m) => m,
            Err(e) => return (self.state.lock(), Err(e)),
        };
        let mut st = self.state.lock();
        let mut pending = match st.versions.prepare(edit, opened, with_rows) {
            Ok(p) => p,
            Err(e) => return (st, Err(e)),
        };
        let written = parking_lot::MutexGuard::unlocked(&mut st, || pending.write());
        let installed = st.versions.install(pending, written).map(|_| ());
        drop(one_edit);
        (st, installed)
    }

    /// The rules flushes and compactions of `fam` write by: its merge operator (none
    /// with a ttl, see below), the compaction filter (with `filter`) and the
    /// expiry horizon. With a ttl each version expires on its own, but a
    /// folded entry takes its newest operand's sequence (and so its time):
    /// folding would keep an older version's part alive past its expiry.
    /// Operands are kept as they are instead, until they expire.
    pub(crate) fn rules(&self, fam: &Family, filter: bool) -> crate::runs::rules::Rules {
        crate::runs::rules::Rules {
            merge: match fam.expiry {
                Some(_) => None,
                None => fam.opts.merge_operator.get().cloned(),
            },
            filter: filter
                .then(|| self.opts.compaction_filter.get().cloned())
                .flatten(),
            expired_to: fam.expired_to(),
        }
    }

    /// Counts what the rules of a flush or compaction did.
    pub(crate) fn add_tally(&self, t: &crate::runs::rules::Tally) {
        let s = &self.stats;
        Stats::add(&s.merge_operands_folded, t.folded);
        Stats::add(&s.filter_removed, t.filter_removed);
        Stats::add(&s.filter_changed, t.filter_changed);
        Stats::add(&s.expired_versions, t.expired);
    }

    /// Live snapshot sequence numbers.
    pub(crate) fn snapshot_list(&self) -> Vec<SeqNo> {
        self.snapshots.lock().keys().copied().collect()
    }

    /// The oldest sequence a reader may read at: the oldest live
    /// snapshot's, else the last published. (The published sequence is
    /// read first: a snapshot taken after it holds one at least as high.)
    pub(crate) fn horizon(&self) -> SeqNo {
        let published = self.last_seq.load(Ordering::Acquire);
        self.snapshot_list().into_iter().fold(published, SeqNo::min)
    }

    /// Records a background failure: writes stop until reopen.
    /// After background work (a flush, a compaction) panicked and its guards
    /// were dropped by the unwinding: locks the state, lets `tidy` release
    /// what the work had claimed, poisons the database with the panic
    /// (`what` panicked) and wakes every waiter. Returns the state locked.
    pub(crate) fn after_panic(
        &self,
        what: &str,
        payload: Box<dyn std::any::Any + Send>,
        tidy: impl FnOnce(&mut State),
    ) -> parking_lot::MutexGuard<'_, State> {
        let mut st = self.state.lock();
        tidy(&mut st);
        self.set_bg_error(&mut st, crate::error::panicked(what, payload));
        self.done_cv.notify_all();
        self.bg_cv.notify_all();
        st
    }

    pub(crate) fn set_bg_error(&self, st: &mut State, e: Error) {
        if st.bg_error.is_none() {
            st.bg_error = Some(e);
            self.admission.end_fast_paths();
        }
        self.done_cv.notify_all();
    }
}
