//! Background work: flushing immutable memtables to L0 tables and running
//! the compactions the picker chooses. `background_threads` threads run
//! this loop; flushes go first because they unblock writers.

use super::{Db, Inner, State};
use crate::compaction::events::{TableCreated, TableReason};
use crate::compaction::executor::{run_linear, Context};
use crate::compaction::filter::Dropper;
use crate::compaction::output::Outputs;
use crate::compaction::{picker, Plan, PlanKind};
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::memtable::MemTable;
use crate::stats::Stats;
use crate::version::{Edit, FileDesc, Version};
use parking_lot::MutexGuard;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The loop of one background thread.
pub(crate) fn run(inner: &Inner) {
    let mut st = inner.state.lock();
    loop {
        if st.shutting_down {
            return;
        }
        if st.bg_error.is_none() {
            if !st.flushing && !st.imm.is_empty() {
                st = flush_one(inner, st);
                continue;
            }
            let pointers = st.compact_pointers(inner.opts.num_levels);
            let version = st.versions.current();
            if let Some(plan) = picker::pick(&version, &inner.opts, &st.busy, &pointers) {
                st = compact(inner, st, plan, version);
                continue;
            }
        }
        inner.bg_cv.wait(&mut st);
    }
}

/// Flushes the oldest immutable memtable. Called and returns with the state locked.
fn flush_one<'a>(inner: &'a Inner, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    let Some(mem) = st.imm.first().cloned() else {
        return st;
    };
    st.flushing = true;
    let version = st.versions.current();
    let snapshots = inner.snapshot_list();
    let started = Instant::now();
    let written =
        MutexGuard::unlocked(&mut st, || write_l0_table(inner, &mem, &version, snapshots));
    let result = match written {
        Ok((descs, keys)) => {
            let bytes: u64 = descs.iter().map(|d| d.size).sum();
            let mut edit = Edit::default();
            for d in descs {
                edit.added.push((0, d));
            }
            // WALs older than the next memtable's are no longer needed. (Only
            // a flush removes memtables, and one runs at a time: `imm[1]` stays
            // the next one while the edit is written.)
            let next_log = st.imm.get(1).unwrap_or(&st.mem).log_number();
            edit.log_number = Some(next_log);
            edit.last_sequence = Some(inner.last_seq.load(Ordering::Acquire));
            let (relocked, applied) = inner.log_and_apply(st, &mut edit);
            st = relocked;
            applied.map(|()| (bytes, edit, keys))
        }
        Err(e) => Err(e),
    };
    st.flushing = false;
    match result {
        Ok((bytes, edit, keys)) => {
            st.imm.remove(0);
            inner.install_super_version(&mut st);
            // Listeners run without the state lock and see the new version.
            let emitted = MutexGuard::unlocked(&mut st, || {
                inner.emit_events(TableReason::Flush, &edit, &keys)
            });
            if let Err(e) = emitted {
                inner.set_bg_error(&mut st, e);
            }
            Stats::add(&inner.stats.flush_count, 1);
            Stats::add(&inner.stats.flush_bytes, bytes);
            Stats::add(
                &inner.stats.flush_micros,
                started.elapsed().as_micros() as u64,
            );
            // Logs below the new log number are flushed: no need to sync
            // them, and their files go. Outside the state mutex: a synced
            // write may hold `unsynced_logs` while it syncs them.
            let keep_from = st.versions.log_number;
            MutexGuard::unlocked(&mut st, || {
                inner
                    .unsynced_logs
                    .lock()
                    .retain(|w| w.log_number() >= keep_from);
                delete_obsolete_wals(inner, keep_from);
            });
        }
        Err(e) => inner.set_bg_error(&mut st, e),
    }
    inner.done_cv.notify_all();
    inner.bg_cv.notify_all();
    st
}

/// Writes a memtable as one L0 table (none if everything was dropped).
pub(crate) fn write_l0_table(
    inner: &Inner,
    mem: &MemTable,
    version: &Version,
    snapshots: Vec<u64>,
) -> Result<(Vec<FileDesc>, Vec<TableKeys>)> {
    let mut next_number = || inner.state.lock().versions.new_file_number();
    let sink = TableSink {
        dir: &inner.dir,
        fs: inner.opts.fs.clone(),
        table_opts: inner.table_opts,
        collect_keys: inner.opts.listeners.iter().any(|l| l.wants_keys()),
        drop_tombstones: true,
    };
    write_memtable_to(&sink, mem, version, &[], snapshots, &mut next_number)
}

/// The user keys of one table.
pub(crate) type TableKeys = Vec<Vec<u8>>;

/// Where and how a memtable is written.
pub(crate) struct TableSink<'a> {
    pub dir: &'a std::path::Path,
    pub fs: Arc<dyn crate::io::FileSystem>,
    pub table_opts: crate::table::TableOptions,
    pub collect_keys: bool,
    /// Tombstones may be dropped when no table of `version` holds their key.
    /// Off during recovery, where earlier chunks of the replay are not in
    /// `version` yet.
    pub drop_tombstones: bool,
}

/// Writes `mem` into one table (no size cut: L0 tables are whole memtables).
/// `unlisted` are tables the caller wrote that `version` does not hold yet
/// (recovery writes several before installing them).
pub(crate) fn write_memtable_to(
    sink: &TableSink<'_>,
    mem: &MemTable,
    version: &Version,
    unlisted: &[FileDesc],
    snapshots: Vec<u64>,
    next_number: &mut dyn FnMut() -> u64,
) -> Result<(Vec<FileDesc>, Vec<TableKeys>)> {
    // Tombstones stay unless no table holds the key at all.
    let is_bottom_for = |uk: &[u8]| {
        sink.drop_tombstones
            && !version.covers_at_or_below(0, uk)
            && unlisted.iter().all(|d| {
                crate::types::user_key(&d.largest) < uk || crate::types::user_key(&d.smallest) > uk
            })
    };
    let mut dropper = Dropper::new(snapshots, is_bottom_for);
    let mut out = Outputs::new(
        sink.dir,
        sink.fs.clone(),
        sink.table_opts,
        u64::MAX,
        next_number,
    )
    .collect_keys(sink.collect_keys);
    let result = mem
        .for_each(|k, v| {
            if dropper.keep(k)? {
                out.add(k, v)?;
            }
            Ok(())
        })
        .and_then(|()| out.finish());
    match result {
        Ok(d) => Ok((d, std::mem::take(&mut out.keys))),
        Err(e) => {
            out.abandon();
            Err(e)
        }
    }
}

/// Runs one compaction plan. Called and returns with the state locked.
fn compact<'a>(
    inner: &'a Inner,
    mut st: MutexGuard<'a, State>,
    plan: Plan,
    version: Arc<Version>,
) -> MutexGuard<'a, State> {
    set_busy(&mut st, &plan, true);
    st.running_compactions += 1;
    let snapshots = inner.snapshot_list();
    let started = Instant::now();
    let result = MutexGuard::unlocked(&mut st, || execute(inner, &plan, &version, snapshots));
    let result = match result {
        Ok((mut edit, outcome)) => {
            let (relocked, applied) = inner.log_and_apply(st, &mut edit);
            st = relocked;
            applied.map(|()| (edit, outcome))
        }
        Err(e) => Err(e),
    };
    set_busy(&mut st, &plan, false);
    st.running_compactions -= 1;
    match result {
        Ok((edit, outcome)) => {
            inner.install_super_version(&mut st);
            let emitted = MutexGuard::unlocked(&mut st, || {
                inner.emit_events(TableReason::Compaction, &edit, &outcome.keys)
            });
            if let Err(e) = emitted {
                inner.set_bg_error(&mut st, e);
            }
            let s = &inner.stats;
            if plan.kind == PlanKind::Move {
                Stats::add(&s.trivial_moves, 1);
            } else {
                Stats::add(&s.compaction_count, 1);
                Stats::add(&s.compaction_bytes_read, outcome.bytes_read);
                Stats::add(&s.compaction_bytes_written, outcome.bytes_written);
                if let Some(c) = s.compaction_written_by_level.get(plan.output_level) {
                    Stats::add(c, outcome.bytes_written);
                }
                if let Some(c) = s.compaction_read_by_level.get(plan.level) {
                    Stats::add(c, outcome.bytes_read);
                }
                Stats::add(&s.compaction_micros, started.elapsed().as_micros() as u64);
            }
        }
        Err(e) => inner.set_bg_error(&mut st, e),
    }
    inner.done_cv.notify_all();
    inner.bg_cv.notify_all();
    st
}

fn set_busy(st: &mut State, plan: &Plan, busy: bool) {
    for l in [plan.level, plan.output_level] {
        if let Some(b) = st.busy.get_mut(l) {
            *b = busy;
        }
    }
}

fn execute(
    inner: &Inner,
    plan: &Plan,
    version: &Version,
    snapshots: Vec<u64>,
) -> Result<(Edit, crate::compaction::executor::Outcome)> {
    let mut next_number = || inner.state.lock().versions.new_file_number();
    let mut ctx = Context {
        dir: &inner.dir,
        fs: inner.opts.fs.clone(),
        table_opts: inner.table_opts,
        snapshots,
        new_file_number: &mut next_number,
        collect_keys: inner.opts.listeners.iter().any(|l| l.wants_keys()),
    };
    run_linear(plan, version, &mut ctx)
}

/// Removes WAL files that every memtable has moved past.
pub(crate) fn delete_obsolete_wals(inner: &Inner, keep_from: u64) {
    if let Ok(names) = inner.opts.fs.list_dir(&inner.dir) {
        for name in names {
            if let Some((FileKind::Wal, n)) = filename::parse(&name) {
                if n < keep_from {
                    let _ = inner.opts.fs.remove_file(&inner.dir.join(name));
                }
            }
        }
    }
}

impl Db {
    /// Writes the memtable to a table and waits until it and every
    /// immutable memtable that existed at the call are flushed. Memtables
    /// switched after the call (writers going on) are not waited for.
    pub fn flush(&self) -> Result<()> {
        self.check_open()?;
        let inner = &self.inner;
        // Every write acknowledged before this call is in a memtable whose
        // log number is at most the active one's now.
        let last_log = inner.state.lock().mem.log_number();
        inner.submit(crate::batch::WriteBatch::new(), false, true)?;
        let mut st = inner.state.lock();
        loop {
            // A background error wins; otherwise no memtable of the call
            // left is success, even while closing.
            if st.bg_error.is_none() && st.imm.iter().all(|m| m.log_number() > last_log) {
                return Ok(());
            }
            st.check_usable()?;
            inner.bg_cv.notify_all();
            inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    /// Waits until background work is done: no immutable memtable waits for
    /// its flush, no compaction runs and the picker finds nothing to do
    /// (RocksDB's `WaitForCompact`). The active memtable is not flushed.
    /// Writers may go on meanwhile; then it returns once they pause long
    /// enough for compaction to catch up.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.check_open()?;
        let inner = &self.inner;
        let idle_busy = vec![false; inner.opts.num_levels];
        let mut st = inner.state.lock();
        loop {
            st.check_usable()?;
            if st.imm.is_empty() && !st.flushing && st.running_compactions == 0 {
                let pointers = st.compact_pointers(inner.opts.num_levels);
                let version = st.versions.current();
                if picker::pick(&version, &inner.opts, &idle_busy, &pointers).is_none() {
                    return Ok(());
                }
            }
            inner.bg_cv.notify_all();
            inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    /// Compacts every table holding keys in `range` down the levels, dropping
    /// overwritten versions and tombstones no snapshot needs.
    pub fn compact_range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<()> {
        self.flush()?;
        let inner = &self.inner;
        let bound = |b: Bound<&K>| match b {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.as_ref().to_vec()),
            Bound::Unbounded => None,
        };
        let lo = bound(range.start_bound());
        let hi = bound(range.end_bound());
        for level in 0..inner.opts.num_levels.saturating_sub(1) {
            let mut st = inner.state.lock();
            // Wait for background compactions touching these levels.
            while st.busy.get(level).copied().unwrap_or(false)
                || st.busy.get(level + 1).copied().unwrap_or(false)
            {
                st.check_usable()?;
                inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
            }
            st.check_usable()?;
            let version = st.versions.current();
            // One plan takes every overlapping table of the level.
            if let Some(plan) =
                picker::pick_range(&version, &inner.opts, level, lo.as_deref(), hi.as_deref())
            {
                compact(inner, st, plan, version).check_usable()?;
            }
        }
        Ok(())
    }
}

impl Inner {
    /// Tells the listeners about an installed edit. `keys` holds the user
    /// keys of the edit's added tables, in order, when they were collected.
    /// A panicking listener is caught: its message becomes the
    /// background error (the thread, and writers waiting on it, go on).
    fn emit_events(&self, reason: TableReason, edit: &Edit, keys: &[TableKeys]) -> Result<()> {
        if self.opts.listeners.is_empty() {
            return Ok(());
        }
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.emit_events_unguarded(reason, edit, keys)
        }))
        .map_err(|p| {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_string());
            crate::error::Error::ListenerPanic(msg)
        })
    }

    fn emit_events_unguarded(&self, reason: TableReason, edit: &Edit, keys: &[TableKeys]) {
        let moved_to = |id: u64| edit.added.iter().find(|(_, d)| d.id == id).map(|(l, _)| *l);
        let moved_from = |id: u64| edit.deleted.iter().find(|(_, d)| *d == id).map(|(l, _)| *l);
        for l in &self.opts.listeners {
            for (level, id) in &edit.deleted {
                match moved_to(*id) {
                    Some(to) => l.on_table_moved(*level, to, *id),
                    None => l.on_table_removed(*level, *id),
                }
            }
            for (i, (level, file)) in edit.added.iter().enumerate() {
                if moved_from(file.id).is_some() {
                    continue;
                }
                let keys = keys.get(i).map_or(&[][..], Vec::as_slice);
                l.on_table_created(&TableCreated {
                    reason,
                    level: *level,
                    file,
                    keys,
                });
            }
        }
    }
}
