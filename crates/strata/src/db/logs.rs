//! The write-ahead logs of an open database: the active one the write
//! leader appends to, and the logs of immutable memtables until their
//! flush. Lock order: `active` → (the state mutex) → `unsynced` →
//! `synced`.

use crate::error::Result;
use crate::memtable::MemTable;
use crate::stats::Stats;
use crate::types::SeqNo;
use crate::wal;
use parking_lot::Mutex;
use std::sync::Arc;

/// The WAL writer and the memtables it feeds; only the write leader uses it.
pub(crate) struct LogState {
    pub writer: wal::Writer,
    /// Each keyspace's active memtable, indexed by its id (the same ones
    /// as `Tree::mem`); `None` for an id no live keyspace has.
    pub mems: Vec<Option<Arc<MemTable>>>,
    /// The directory entry of `writer`'s file is not durable yet.
    pub dir_unsynced: bool,
}

/// See the module doc.
pub(crate) struct Logs {
    pub active: Mutex<LogState>,
    /// Logs of immutable memtables not yet `fdatasync`ed: synced by a `sync`
    /// write before it is acknowledged (so a synced write is never durable
    /// before the writes that precede it), dropped once flushed.
    unsynced: Mutex<Vec<wal::Writer>>,
    /// Those logs once synced, kept until their memtable is flushed: the
    /// flush drops them on its background thread (dropping a mapped log
    /// unmaps up to 64 MiB, which a synced write should not wait for).
    synced: Mutex<Vec<wal::Writer>>,
    /// Each retired log's last sequence (the last one published when it
    /// was retired: no record of it is newer), until its file goes.
    sealed: Mutex<std::collections::BTreeMap<u64, SeqNo>>,
}

impl Logs {
    /// `active` as the only log.
    pub fn new(active: LogState) -> Self {
        Logs {
            active: Mutex::new(active),
            unsynced: Mutex::new(Vec::new()),
            synced: Mutex::new(Vec::new()),
            sealed: Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    /// Keeps `writer`, the log of a memtable just made immutable, until a
    /// `sync` write syncs it or its flush drops it; `sealed`: the newest
    /// sequence of its records.
    pub fn retire(&self, writer: wal::Writer, sealed: SeqNo) {
        self.sealed.lock().insert(writer.log_number(), sealed);
        self.unsynced.lock().push(writer);
    }

    /// The newest sequence of the retired logs numbered below `n` (0:
    /// none): what the history holds before log `n`, the first a replay
    /// reads once the older ones are deleted.
    pub fn sealed_below(&self, n: u64) -> SeqNo {
        self.sealed
            .lock()
            .range(..n)
            .map(|(_, s)| *s)
            .max()
            .unwrap_or(0)
    }

    /// Syncs the logs of immutable memtables, oldest first (each sync
    /// counted in `stats.wal_syncs`); on an error the rest stay unsynced.
    pub fn sync_retired(&self, stats: &Stats) -> Result<()> {
        let mut logs = self.unsynced.lock();
        while let Some(w) = logs.first_mut() {
            w.sync_final()?;
            Stats::add(&stats.wal_syncs, 1);
            self.synced.lock().push(logs.remove(0));
        }
        Ok(())
    }

    /// How many logs are retired and not yet dropped by a flush.
    pub fn retired_count(&self) -> usize {
        self.unsynced.lock().len() + self.synced.lock().len()
    }

    /// Takes the retired logs numbered below `keep_from` (their memtables
    /// are flushed), synced or not, for the caller to drop outside every
    /// lock.
    pub fn take_flushed(&self, keep_from: u64) -> Vec<wal::Writer> {
        self.sealed.lock().retain(|&n, _| n >= keep_from);
        let mut gone = take_below(&self.unsynced, keep_from);
        gone.extend(take_below(&self.synced, keep_from));
        gone
    }
}

/// The writers of `logs` numbered below `keep_from`, removed from it.
fn take_below(logs: &Mutex<Vec<wal::Writer>>, keep_from: u64) -> Vec<wal::Writer> {
    let mut logs = logs.lock();
    let (keep, gone) = std::mem::take(&mut *logs)
        .into_iter()
        .partition(|w| w.log_number() >= keep_from);
    *logs = keep;
    gone
}
