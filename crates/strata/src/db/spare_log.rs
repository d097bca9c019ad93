//! The next write-ahead log, made ahead of time by a background thread.
//!
//! A memtable switch needs a new WAL. Made by the write leader, its
//! `open(2)`, first reservation and map, and the 1 MiB reservations that
//! follow, one per MiB of records, each waiting on the file system (longer
//! while a flush writes), all land in a put's latency, among the largest
//! of a random load (why: docs/design/2026-11-29-code-comment-measurements.md
//! §spare-log). So a background thread makes the next log after
//! each switch (number, file, header, and blocks reserved for a whole
//! memtable's records where reserving writes nothing, see
//! [`crate::io::WritableFile::reserve`]); the switch takes it, and makes
//! one itself only when none is ready or being made.
//!
//! Recovery replays logs in number order, so logs must be used in number
//! order: a switch that finds a spare being made waits for it rather than
//! make a log of its own (above the spare's number), and a spare below the
//! log in use, should one ever exist, is deleted, never used. A spare left
//! by a crash is an empty log above the manifest's log number: recovery
//! replays nothing from it, takes its number as used, and deletes it with
//! the other replayed logs.

use super::{Inner, State};
use crate::error::Result;
use crate::filename::wal_path;
use crate::stats::Stats;
use crate::wal;
use parking_lot::MutexGuard;

/// Where the next log stands (`State::spare_log`).
#[derive(Default)]
pub(crate) enum Spare {
    /// None made yet: a background thread makes one.
    #[default]
    Wanted,
    /// A background thread is making one.
    Making,
    Ready(wal::Writer),
    /// Making one failed: none is made before the next switch, whose own
    /// attempt reports the error.
    Failed,
}

impl Spare {
    pub fn wanted(&self) -> bool {
        matches!(self, Spare::Wanted)
    }
}

/// Makes the spare log. Called and returns with the state locked.
pub(super) fn make<'a>(inner: &'a Inner, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    st.spare_log = Spare::Making;
    let number = st.versions.new_file_number();
    // A panic (in a user's file system) counts as a failure: `Making` must
    // not stay set, or the next switch would wait for ever.
    let made = MutexGuard::unlocked(&mut st, || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<wal::Writer> {
            let path = wal_path(&inner.dir, number);
            let mut w = wal::Writer::new_wal(inner.opts.create_wal(&path)?, number)?;
            // Room for a full memtable's records and some: WAL records are
            // a little smaller than the memtable entries they become.
            w.reserve(inner.opts.write_buffer_size as u64 + (1 << 20));
            Ok(w)
        }))
        .unwrap_or_else(|p| Err(crate::error::panicked("making the next log", p)))
    });
    // A switch may be waiting for it (`take`).
    inner.done_cv.notify_all();
    match made {
        // Above the log in use (a switch waits for a spare being made
        // rather than making its own log) and not closing: the next log.
        Ok(w) if number > st.active_log() && !st.shutting_down => {
            st.spare_log = Spare::Ready(w);
        }
        Ok(w) => {
            st.spare_log = Spare::Wanted;
            MutexGuard::unlocked(&mut st, || discard(inner, w));
        }
        Err(_) => {
            // Counted, not raised: nothing depends on the spare, and the
            // switch makes its log itself, reporting a failure that lasts.
            // A partly made file would be replayed at the next open.
            st.spare_log = Spare::Failed;
            Stats::add(&inner.stats.wal_spare_failures, 1);
            let path = wal_path(&inner.dir, number);
            MutexGuard::unlocked(&mut st, || {
                let _ = inner.opts.fs.remove_file(&path);
            });
        }
    }
    st
}

/// The spare log for a switch away from log `current`: the ready one, or
/// the one a background thread is making (waited for on `done_cv`, which
/// [`make`] notifies; the caller's log mutex is not one `make` takes);
/// `None` when none is made or being made. Either way a new spare is
/// wanted after this switch. Waiting rather than making another log here
/// keeps every log numbered above the ones used before it: a spare made
/// meanwhile would be below the switch's own log, and a power loss could
/// leave it, unsynced and perhaps damaged, for recovery to replay between
/// two used logs.
pub(super) fn take(
    inner: &Inner,
    st: &mut MutexGuard<'_, State>,
    current: u64,
) -> Option<wal::Writer> {
    while matches!(st.spare_log, Spare::Making) {
        inner.done_cv.wait(st);
    }
    match std::mem::take(&mut st.spare_log) {
        Spare::Ready(w) if w.log_number() > current => Some(w),
        Spare::Ready(w) => {
            // Not reachable (a spare is ready only above the log in use,
            // and only a switch changes that); deleted if it ever is.
            debug_assert!(false, "a spare log below the log in use");
            discard(inner, w);
            None
        }
        _ => None,
    }
}

/// Deletes a spare log that will not be used (at close, or when it is
/// stale). It holds no record: losing it loses nothing, so a failure here
/// only leaves an empty log that the next open deletes.
pub(super) fn discard(inner: &Inner, w: wal::Writer) {
    let path = wal_path(&inner.dir, w.log_number());
    drop(w);
    let _ = inner.opts.fs.remove_file(&path);
}
