//! The background threads: `background_threads` threads run [`run`]:
//! the next WAL (`spare_log.rs`), flushes (they unblock writers,
//! `flush.rs`), then the compaction the picker chooses (`compact.rs`),
//! as far as the CPU budget lets them (`sched::CpuBudget`).
//! Also the event fan-out to listeners.

use super::compact::{compact, pick};
use super::flush::flush_one;
use super::spare_log;
use super::Inner;
use crate::error::Result;
use crate::events::{TableCreated, TableReason};
use crate::l0::TableKeys;
use crate::version::Edit;
use std::sync::Arc;

/// The loop of one background thread (started by `sched::spawn_background`
/// at the background threads' priority, with the database's yield gate).
pub(crate) fn run(inner: &Inner) {
    // Where this thread's next look for a compaction starts, so that every
    // keyspace gets its turn.
    let mut turn = 0usize;
    let mut st = inner.state.lock();
    loop {
        if st.shutting_down {
            return;
        }
        if st.bg_error.is_none() {
            // The next WAL first: it takes about a millisecond, and a
            // switch that finds it being made waits for it (a flush takes
            // hundreds, and the other thread may take it meanwhile).
            if st.spare_log.wanted() {
                st = spare_log::make(inner, st);
                continue;
            }
            let fams = inner.live_families();
            // The flush of the oldest immutable memtable of any keyspace.
            let flush = fams
                .iter()
                .filter(|f| !f.is_dropped())
                .filter_map(|f| {
                    let t = st.tree(f);
                    let oldest = t.imm.first().filter(|_| !t.flushing)?;
                    let log = oldest.log_number();
                    // A capture's cut holds back newer memtables.
                    (log <= st.flush_cut.unwrap_or(u64::MAX)).then_some((log, f))
                })
                .min_by_key(|(log, _)| *log)
                .map(|(_, f)| Arc::clone(f));
            if let Some(fam) = flush {
                st = flush_one(inner, &fam, st);
                continue;
            }
            // A compaction only with a slot of the CPU budget (`cpu.rs`);
            // a thread that finds none waits on `bg_cv`, which is notified
            // after every slot is given back (under the state mutex). And
            // never on the last free thread of several: a flush must find
            // a thread at once, not wait for a whole compaction to end.
            let threads = inner.opts.background_threads;
            let thread_free = threads <= 1 || st.compacting_threads + 1 < threads;
            if thread_free {
                if let Some(slot) = inner.admission.cpu.try_compaction() {
                    let n = fams.len().max(1);
                    let picked = (0..fams.len())
                        .filter_map(|i| fams.get((turn + i) % n))
                        .filter(|f| !f.is_dropped())
                        .find_map(|f| {
                            let plan = pick(inner, f, &st, &st.tree(f).in_flight)?;
                            Some((Arc::clone(f), plan))
                        });
                    if let Some((fam, plan)) = picked {
                        turn = turn.wrapping_add(1);
                        let version = st.versions.current(fam.id);
                        st.compacting_threads += 1;
                        st = compact(inner, &fam, st, plan, version, Some(slot));
                        st.compacting_threads -= 1;
                        continue;
                    }
                }
            }
        }
        inner.bg_cv.wait(&mut st);
    }
}

impl Inner {
    /// Tells the listeners about an installed edit. `keys` holds the user
    /// keys of the edit's added tables, in order, when they were collected.
    /// A panicking listener is caught: its message becomes the
    /// background error (the thread, and writers waiting on it, go on).
    pub(super) fn emit_events(
        &self,
        reason: TableReason,
        edit: &Edit,
        keys: &[TableKeys],
    ) -> Result<()> {
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
