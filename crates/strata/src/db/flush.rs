//! Flushes: an immutable memtable becomes one L0 table. The edit is logged
//! first; then the stale tracker learns where the table's keys now live;
//! only then does the new super-version (without the memtable) reach
//! readers, so a read that misses the memtables always finds the update
//! table at least as new as its version. Flushed WALs are deleted last.

use super::{Db, Family, Inner, State};
use crate::error::Result;
use crate::events::TableReason;
use crate::filename::{self, FileKind};
use crate::l0::{TableKeys, TableSink, Written};
use crate::memtable::MemTable;
use crate::stats::Stats;
use crate::version::{Edit, Version};
use parking_lot::MutexGuard;
use std::time::{Duration, Instant};

/// Flushes the oldest immutable memtable of `fam`. Called and returns with the state
/// locked. A panic in the flush (a user's file system, the tracker) becomes
/// the background error, with `flushing` cleared and the flush's tables no
/// longer busy, so no writer, `flush` or `close` waits for it for ever.
pub(super) fn flush_one<'a>(
    inner: &'a Inner,
    fam: &Family,
    st: MutexGuard<'a, State>,
) -> MutexGuard<'a, State> {
    let announced = std::cell::Cell::new(None);
    let flushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        flush_one_unguarded(inner, fam, st, &announced)
    }));
    match flushed {
        Ok(st) => st,
        Err(p) => {
            inner
                .admission
                .pacer
                .lock()
                .flush_finished(Instant::now(), 0, Duration::ZERO);
            inner.after_panic("a flush", p, |st| {
                let tree = st.tree_mut(fam);
                tree.flushing = false;
                if let Some(ticket) = announced.take() {
                    tree.in_flight.finish(ticket);
                }
            })
        }
    }
}

/// [`flush_one`]'s work; `announced` holds the in-flight ticket of the new
/// tables while the listeners hear of them.
fn flush_one_unguarded<'a>(
    inner: &'a Inner,
    fam: &Family,
    mut st: MutexGuard<'a, State>,
    announced: &std::cell::Cell<Option<u64>>,
) -> MutexGuard<'a, State> {
    let Some(mem) = st.tree(fam).imm.first().cloned() else {
        return st;
    };
    st.tree_mut(fam).flushing = true;
    // A slot of the CPU budget first (`cpu.rs`), outside the mutex: a
    // running compaction gives its own within a few hundred entries. The
    // flush's time (pacing, `flush_micros`) starts once it has one.
    let slot = MutexGuard::unlocked(&mut st, || inner.admission.cpu.flush());
    let version = st.versions.current(fam.id);
    let snapshots = inner.snapshot_list();
    let started = Instant::now();
    // The pacer follows `default`'s flushes (its writers are the paced ones).
    let paced = fam.id == super::family::DEFAULT_ID;
    if paced {
        inner.admission.pacer.lock().flush_started(started);
    }
    let written = MutexGuard::unlocked(&mut st, || {
        let written = write_l0(inner, fam, &mem, &version, snapshots)?;
        // With other keyspaces, the logs this memtable was written to hold
        // their unflushed writes too: durable before the tables that hold
        // later writes of this one, or a power loss could keep this
        // keyspace's later writes and lose another's earlier ones.
        if inner.keyspaces_beside_default() {
            inner.logs.sync_retired(&inner.stats)?;
            inner.opts.fs.sync_dir(&inner.dir)?;
        }
        Ok(written)
    });
    // Given back under the state mutex (see `cpu.rs`); what follows is
    // mostly the manifest's I/O.
    drop(slot);
    let mut announcing = None;
    let result = match written {
        Ok(written) => {
            let bytes: u64 = written
                .descs
                .iter()
                .chain(&written.rows)
                .map(|d| d.size)
                .sum();
            inner.add_tally(&written.tally);
            let mut edit = Edit::default();
            fam.designs.l0.record(&written, &mut edit);
            edit.range_dels_added = mem.range_dels();
            edit.write_times = fam.expiry.as_ref().map(|e| e.times());
            let Written { keys, seqs, .. } = written;
            // WALs older than the next memtable's are no longer needed. (Only
            // a flush removes memtables, and one runs at a time: `imm[1]` stays
            // the next one while the edit is written.)
            let tree = st.tree(fam);
            let next_log = tree.imm.get(1).unwrap_or(&tree.mem).log_number();
            edit.log_number = Some(next_log);
            // Keyspaces with nothing unflushed move their log numbers up to
            // the active log (their next write goes there or later): a
            // keyspace nobody writes keeps no log.
            let active = st.active_log();
            for other in inner.live_families() {
                let t = st.tree(&other);
                let idle = other.id != fam.id
                    && t.imm.is_empty()
                    && !t.flushing
                    && t.mem.is_empty()
                    && st
                        .versions
                        .tree(other.id)
                        .is_some_and(|v| v.log_number < active);
                if idle {
                    edit.others.push(Edit {
                        family: other.id,
                        log_number: Some(active),
                        ..Edit::default()
                    });
                }
            }
            // The newest sequence the tables hold, not the newest handed
            // out: recovery checks that the logs it replays continue the
            // history from here without a hole. Writes after this memtable
            // live in newer logs, whose unsynced tails a power loss may cut
            // while a still newer log survives; a last sequence covering
            // them would hide that hole (a later write recovered, an
            // earlier one lost).
            //
            // The logs below the smallest log number after this edit go;
            // records of them no table holds (a dropped keyspace's) would
            // leave a hole before the first log a replay reads: the last
            // sequence covers them too (their newest, `Logs::sealed_below`),
            // never a record of a log that stays.
            let after = |id: u32, log: u64| {
                if id == fam.id {
                    next_log
                } else if edit.others.iter().any(|o| o.family == id) {
                    active
                } else {
                    log
                }
            };
            let oldest = st
                .versions
                .families()
                .iter()
                .map(|r| after(r.id, r.log_number))
                .min()
                .unwrap_or(next_log);
            edit.last_sequence = Some(mem.max_seq().max(inner.logs.sealed_below(oldest)));
            let (relocked, applied) = inner.log_and_apply(fam, st, &mut edit);
            st = relocked;
            // The new tables are in the version now, and busy until the
            // listeners have heard of them: a compaction that moved one
            // first would be heard of before its creation. (The mutex is
            // released below, for the tracker and the listeners.)
            if applied.is_ok() && !inner.opts.listeners.is_empty() {
                announcing = Some(
                    st.tree_mut(fam)
                        .in_flight
                        .announce_flush(edit.added.iter().map(|(_, d)| d.id)),
                );
                announced.set(announcing);
            }
            if applied.is_ok() && fam.designs.tracker.tracks() {
                // Durable now; readers still see the memtable until the
                // super-version below replaces it.
                MutexGuard::unlocked(&mut st, || {
                    let ids = edit.added.iter().map(|(_, d)| d.id);
                    let ids = ids.chain(edit.rows_added.iter().map(|d| d.id));
                    for (id, (k, s)) in ids.zip(keys.iter().zip(&seqs)) {
                        fam.designs.tracker.on_flush(id, k, s);
                    }
                });
            }
            applied.map(|()| (bytes, edit, keys))
        }
        Err(e) => Err(e),
    };
    st.tree_mut(fam).flushing = false;
    match result {
        Ok((bytes, edit, keys)) => {
            if paced {
                inner.admission.pacer.lock().flush_finished(
                    Instant::now(),
                    mem.approximate_size() as u64,
                    started.elapsed(),
                );
            }
            let flushed = st.tree_mut(fam).imm.remove(0);
            let old_sv = inner.install_super_version(fam, &mut st);
            // Listeners run without the state lock and see the new version.
            // Keys were collected for the tracker too: listeners get them
            // only if one asked.
            let wanted = inner.opts.listeners.iter().any(|l| l.wants_keys());
            let keys: &[TableKeys] = if wanted { &keys } else { &[] };
            let emitted = MutexGuard::unlocked(&mut st, || {
                inner.emit_events(TableReason::Flush, &edit, keys)
            });
            if let Some(ticket) = announcing.take() {
                st.tree_mut(fam).in_flight.finish(ticket);
                announced.set(None);
            }
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
            // write may hold the retired logs while it syncs them.
            let keep_from = st.versions.log_number();
            MutexGuard::unlocked(&mut st, || {
                // Dropped after the locks are released: dropping a mapped
                // log unmaps it, which a synced write waiting for these
                // locks should not sit through.
                drop(inner.logs.take_flushed(keep_from));
                delete_obsolete_wals(inner, keep_from);
                // The memtable's memory (tens of MiB) is returned here,
                // not under the state mutex that every writer takes; so
                // are the tables of the version the flush started from,
                // which a compaction may have replaced meanwhile (this
                // may be their last reference, and unmapping and
                // unlinking them under the mutex would hold every writer;
                // why: docs/design/2026-11-29-code-comment-measurements.md §flush).
                drop((flushed, mem, old_sv, version));
            });
        }
        Err(e) => {
            if paced {
                inner
                    .admission
                    .pacer
                    .lock()
                    .flush_finished(Instant::now(), 0, Duration::ZERO);
            }
            // A keyspace dropped meanwhile leaves; its edit is refused.
            if !fam.is_dropped() {
                inner.set_bg_error(&mut st, e);
            }
            // As above: the starting version may hold replaced tables last.
            MutexGuard::unlocked(&mut st, || drop((mem, version)));
        }
    }
    inner.done_cv.notify_all();
    inner.bg_cv.notify_all();
    st
}

/// Writes a memtable of `fam` into level 0 through its container
/// (`Options::l0`): one table or one level-0 row (none if everything was
/// dropped).
pub(crate) fn write_l0(
    inner: &Inner,
    fam: &Family,
    mem: &MemTable,
    version: &Version,
    snapshots: Vec<u64>,
) -> Result<Written> {
    let mut next_number = || Ok(inner.state.lock().versions.new_file_number());
    let sink = TableSink {
        dir: &inner.dir,
        fs: inner.opts.fs.clone(),
        table_opts: fam.table_opts,
        collect_keys: fam.designs.tracker.tracks()
            || inner.opts.listeners.iter().any(|l| l.wants_keys()),
        drop_tombstones: true,
        // No filter: a flush runs while readers may still take snapshots
        // of the memtable's entries (see `crate::compaction_filter`).
        rules: inner.rules(fam, false),
    };
    fam.designs.l0.write(
        &sink,
        mem,
        version,
        &Edit::default(),
        snapshots,
        &mut next_number,
    )
}

/// Removes WAL files that every memtable has moved past.
pub(crate) fn delete_obsolete_wals(inner: &Inner, keep_from: u64) {
    if let Ok(names) = inner.opts.fs.list_dir(&inner.dir) {
        for name in names {
            if let Some((FileKind::Wal, n)) = filename::parse(&name) {
                if n < keep_from {
                    // Its writer was dropped (and its map unmapped) by
                    // the flush that made it obsolete.
                    let _ = inner.opts.fs.remove_unused_file(&inner.dir.join(name));
                }
            }
        }
    }
}

impl Db {
    /// Writes the memtable to a table and waits until it and every
    /// immutable memtable that existed at the call are flushed. Memtables
    /// switched after the call (writers going on) are not waited for.
    /// Flushes the `default` keyspace (a keyspace's own: `Keyspace::flush`).
    pub fn flush(&self) -> Result<()> {
        self.check_open()?;
        self.inner.flush_family(&self.inner.default)
    }
}

impl Inner {
    /// [`Db::flush`] of keyspace `fam`.
    pub(crate) fn flush_family(&self, fam: &Family) -> Result<()> {
        // Every write acknowledged before this call is in a memtable whose
        // log number is at most the active one's now.
        let last_log = self.state.lock().tree(fam).mem.log_number();
        self.submit(crate::batch::WriteBatch::new(), false, Some(fam.id))?;
        let mut st = self.state.lock();
        loop {
            if fam.is_dropped() {
                return Err(super::keyspace::dropped(fam));
            }
            // A background error wins; otherwise no memtable of the call
            // left is success, even while closing.
            let imm = &st.tree(fam).imm;
            if st.bg_error.is_none() && imm.iter().all(|m| m.log_number() > last_log) {
                return Ok(());
            }
            st.check_usable()?;
            self.bg_cv.notify_all();
            self.done_cv.wait_for(&mut st, Duration::from_millis(50));
        }
    }
}
