//! Snapshots: a registered sequence number that compactions must preserve.

use super::{Db, Inner};
use crate::types::SeqNo;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// A consistent read view. While it lives, no compaction drops a version it
/// can see. Release it by dropping it.
pub struct Snapshot {
    seq: SeqNo,
    // Weak, so that a snapshot outliving its `Db` does not keep the
    // directory locked.
    inner: Weak<Inner>,
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let oldest_gone = {
            let mut s = inner.snapshots.lock();
            let oldest = s.keys().next() == Some(&self.seq);
            match s.get_mut(&self.seq) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                Some(_) => {
                    s.remove(&self.seq);
                    oldest
                }
                None => false,
            }
        };
        // The horizon moved up: range tombstones it held back may now be
        // cleared (`picker::range_dels`), so the background threads look.
        if oldest_gone
            && !inner
                .default
                .super_version
                .load()
                .version
                .range_dels
                .is_empty()
        {
            let _st = inner.state.lock();
            inner.bg_cv.notify_all();
        }
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot({})", self.seq)
    }
}

impl Db {
    /// Takes a snapshot of the current state: one point in time in every
    /// keyspace.
    pub fn snapshot(&self) -> Snapshot {
        take(&self.inner)
    }
}

/// A snapshot of the database of `inner` ([`Db::snapshot`]).
pub(crate) fn take(inner: &Arc<Inner>) -> Snapshot {
    let _gate = inner.snapshot_gate.lock();
    let mut s = inner.snapshots.lock();
    // Read the sequence under the lock so a compaction that lists
    // snapshots either sees this one or ran before it existed.
    let seq = inner.last_seq.load(Ordering::Acquire);
    *s.entry(seq).or_insert(0) += 1;
    // Counted once listed: a compaction that read the count before
    // this reads a list with this snapshot in it, or a changed count.
    inner.snapshots_taken.fetch_add(1, Ordering::AcqRel);
    Snapshot {
        seq,
        inner: Arc::downgrade(inner),
    }
}
