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
        let mut s = inner.snapshots.lock();
        if let Some(n) = s.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                s.remove(&self.seq);
            }
        }
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Snapshot({})", self.seq)
    }
}

impl Db {
    /// Takes a snapshot of the current state.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = self.inner.snapshots.lock();
        // Read the sequence under the lock so a compaction that lists
        // snapshots either sees this one or ran before it existed.
        let seq = self.inner.last_seq.load(Ordering::Acquire);
        *s.entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            inner: Arc::downgrade(&self.inner),
        }
    }
}
