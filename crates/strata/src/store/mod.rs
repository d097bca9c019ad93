//! The one engine-neutral door: [`KvStore`], opened by [`crate::open`] with
//! the engine `Options::engine` names (`lsm`, the default, or `kvell`). The C
//! ABI, the CLI, the Redis-protocol server and the benchmark hold a
//! `Box<dyn KvStore>` (or an `Arc`) and nothing engine-specific.
//!
//! What differs between the engines is stated by [`KvStore::semantics`],
//! not hidden: whether a batch is atomic, what `sync` means, whether a scan
//! or a cursor reads one point in time, whether snapshots exist.

mod keyspace;
mod lsm;
mod paged;
mod range;

pub use paged::PagedCursor;
pub use range::ScanRange;
pub(crate) use range::{own_bound, range_is_empty};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::options::WriteOptions;
use crate::stats::StoreStats;
use std::any::Any;

/// What an engine promises, in words a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Semantics {
    /// The engine's short name (`lsm`, `kvell`, or a comparator's).
    pub engine: &'static str,
    /// A multi-key [`WriteBatch`] is applied all or nothing, also across a
    /// crash.
    pub atomic_batches: bool,
    /// [`KvStore::scan`] and [`KvStore::cursor`] read one point in time
    /// (otherwise each entry is its key's latest value when it is read).
    pub snapshot_scans: bool,
    /// [`KvStore::snapshot`] is supported.
    pub snapshots: bool,
    /// [`KvStore::delete_range`] (and a batch's range deletions) are
    /// supported.
    pub range_deletes: bool,
    /// [`KvStore::merge`] (and a batch's merges) are supported: the store
    /// has a merge operator (`Options::merge_operator`).
    pub merges: bool,
    /// What an acknowledged write without `sync` survives.
    pub unsynced: &'static str,
    /// What `WriteOptions::sync` adds.
    pub synced: &'static str,
}

/// A point-in-time read view taken by [`KvStore::snapshot`]; released when
/// dropped. Only the store that made it can read through it.
pub struct StoreSnapshot {
    inner: Box<dyn Any + Send + Sync>,
}

impl StoreSnapshot {
    pub(crate) fn new<T: Any + Send + Sync>(inner: T) -> Self {
        StoreSnapshot {
            inner: Box::new(inner),
        }
    }

    /// The engine's own snapshot, if it is a `T`.
    pub fn downcast<T: Any>(&self) -> Option<&T> {
        self.inner.downcast_ref()
    }
}

/// A positioned cursor over a store (LevelDB's iterator contract): it is
/// valid while it stands on an entry; once it meets an error it is invalid
/// and `status` returns that error.
pub trait Cursor: Send {
    fn valid(&self) -> bool;
    /// The current key (only while `valid`).
    fn key(&self) -> &[u8];
    /// The current value (only while `valid`).
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    /// The first entry with key ≥ `target`.
    fn seek(&mut self, target: &[u8]);
    /// The last entry with key ≤ `target`.
    fn seek_for_prev(&mut self, target: &[u8]);
    fn next(&mut self);
    fn prev(&mut self);
}

/// A key-value store: ordered keys, batches, statistics. See
/// [`KvStore::semantics`] for what each engine guarantees.
pub trait KvStore: Send + Sync {
    /// A short name of the engine and its configuration.
    fn name(&self) -> String;
    /// What this engine guarantees (batches, sync, scans, snapshots).
    fn semantics(&self) -> Semantics;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Deletes every key in `[start, end)`; `NotSupported` where
    /// `semantics().range_deletes` is false.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        let _ = (start, end);
        Err(Error::NotSupported(format!(
            "{} has no range deletion",
            self.semantics().engine
        )))
    }
    /// Merges `operand` into `key` by the store's merge operator
    /// (`crate::merge`); `NotSupported` where `semantics().merges` is
    /// false.
    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let _ = (key, operand);
        Err(Error::NotSupported(format!(
            "{} has no merge operator",
            self.semantics().engine
        )))
    }
    /// Applies a batch: atomically where `semantics().atomic_batches`,
    /// otherwise entry by entry (each key's entries in order). The batched
    /// path: an engine may turn one batch into one I/O batch.
    fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()>;
    /// The values of `keys`, in order: the batched read path (an engine may
    /// turn the keys into one I/O batch).
    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }
    /// The value of `key` at `snap` (or now).
    fn get_at(&self, key: &[u8], snap: Option<&StoreSnapshot>) -> Result<Option<Vec<u8>>> {
        match snap {
            None => self.get(key),
            Some(_) => Err(no_snapshots(self.semantics().engine)),
        }
    }
    /// The entries `range` selects, in its order.
    fn scan(&self, range: ScanRange<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// [`scan`](Self::scan) without the copies: hands each entry's key and
    /// value to `f`, borrowed where the engine allows (valid for that call
    /// only), and returns how many it visited. What the benchmark reads
    /// scans with, as `db_bench` does: a scan's figure is then the engine's,
    /// not that of the allocator behind per-entry copies. By default
    /// through `scan`.
    fn scan_visit(&self, range: ScanRange<'_>, f: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
        let got = self.scan(range)?;
        for (k, v) in &got {
            f(k, v);
        }
        Ok(got.len())
    }
    /// A point-in-time view (`NotSupported` where `semantics().snapshots`
    /// is false).
    fn snapshot(&self) -> Result<StoreSnapshot> {
        Err(no_snapshots(self.semantics().engine))
    }
    /// An unpositioned cursor at `snap` (or now).
    fn cursor(&self, snap: Option<&StoreSnapshot>) -> Result<Box<dyn Cursor>>;
    /// Makes everything written so far durable and part of the on-disk
    /// structure.
    fn flush(&self) -> Result<()>;
    /// Compacts everything the engine can (the LSM: `compact_range(..)`;
    /// KVell keeps no levels: it syncs its slabs).
    fn compact(&self) -> Result<()> {
        self.flush()
    }
    /// Writes to `target`, a directory that must not exist yet, a copy of
    /// the store that opens on its own and holds every write acknowledged
    /// before the call (the LSM: [`Db::checkpoint`](crate::Db::checkpoint),
    /// hard links where the file system allows). `NotSupported` where the
    /// engine has none (KVell).
    fn checkpoint(&self, target: &std::path::Path) -> Result<crate::CheckpointStats> {
        let _ = target;
        Err(Error::NotSupported(format!(
            "the {} engine has no checkpoints",
            self.semantics().engine
        )))
    }
    /// Adds to `store` a backup of every write acknowledged before the
    /// call, copying only the files no earlier backup there holds (the
    /// LSM: [`Db::backup`](crate::Db::backup)). `NotSupported` where the
    /// engine has none (KVell).
    fn backup(&self, store: &crate::BackupStore) -> Result<crate::BackupInfo> {
        let _ = store;
        Err(Error::NotSupported(format!(
            "the {} engine has no backups",
            self.semantics().engine
        )))
    }
    /// The store of keyspace `name` of the same database (`default`: the
    /// database's own), made with `options` (`name=value` pairs of
    /// `Options::KEYSPACE_OPTIONS`) if it has none: its reads and writes
    /// go to that keyspace; snapshots, `flush` of the whole, checkpoints
    /// and statistics stay the database's. `NotSupported` where the engine
    /// has no keyspaces (KVell).
    fn keyspace(&self, name: &str, options: &str) -> Result<Box<dyn KvStore>> {
        let _ = (name, options);
        Err(no_keyspaces(self.semantics().engine))
    }
    /// Drops keyspace `name` of the database ([`Db::drop_keyspace`](crate::Db::drop_keyspace)).
    fn drop_keyspace(&self, name: &str) -> Result<()> {
        let _ = name;
        Err(no_keyspaces(self.semantics().engine))
    }
    /// The names of the database's keyspaces, `default` first.
    fn keyspace_names(&self) -> Result<Vec<String>> {
        Err(no_keyspaces(self.semantics().engine))
    }
    /// The id batch entries of this store's keyspace carry (0: `default`),
    /// for `WriteBatch::put_in` and the like across keyspaces.
    fn keyspace_id(&self) -> Result<u32> {
        Err(no_keyspaces(self.semantics().engine))
    }
    /// Waits until the engine's background work (flushes of full memtables,
    /// compactions) is done; the active memtable stays as it is.
    fn wait_for_compactions(&self) -> Result<()>;
    fn stats(&self) -> StoreStats;
    /// What the open found and did not serve as written, or `None` when it
    /// found everything intact: the LSM's log records a replay left out,
    /// KVell's damaged and torn slots.
    fn recovery_report(&self) -> Option<String> {
        None
    }
    /// Stops background work and makes acknowledged writes durable; later
    /// calls fail with `Closed`.
    fn close(&self) -> Result<()>;
}

fn no_keyspaces(engine: &str) -> Error {
    Error::NotSupported(format!("the {engine} engine has no keyspaces"))
}

fn no_snapshots(engine: &str) -> Error {
    Error::NotSupported(format!("the {engine} engine has no snapshots"))
}
