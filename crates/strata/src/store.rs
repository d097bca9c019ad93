//! The engine-neutral interface that the benchmark, the server and the C ABI
//! use, so that a second engine (KVell, DESIGN §2.4) can stand in for the LSM
//! `Db` behind every door.

use crate::batch::WriteBatch;
use crate::db::Db;
use crate::error::Result;
use crate::options::WriteOptions;
use crate::stats::StatsSnapshot;
use std::ops::Bound;

/// A key-value store: ordered keys, atomic batches, statistics.
pub trait KvStore: Send + Sync {
    /// A short name of the engine and its configuration.
    fn name(&self) -> String;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Applies a batch atomically.
    fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()>;
    /// Up to `limit` entries in `[start, end]` (per the bounds), ascending, or
    /// descending from the end when `reverse`.
    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Makes everything written so far part of the on-disk structure.
    fn flush(&self) -> Result<()>;
    /// Waits until the engine's background work (flushes of full memtables,
    /// compactions) is done; the active memtable stays as it is.
    fn wait_for_compactions(&self) -> Result<()>;
    fn stats(&self) -> StatsSnapshot;
    /// Stops background work and makes acknowledged writes durable (in the
    /// WAL; the memtable need not be flushed); later calls fail with `Closed`.
    fn close(&self) -> Result<()>;
}

impl KvStore for Db {
    fn name(&self) -> String {
        format!("strata-lsm({})", self.options())
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Db::put(self, key, value)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Db::get(self, key)
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        Db::delete(self, key)
    }
    fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        Db::write(self, batch, opts)
    }
    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let s = Db::scan::<&[u8], _>(self, (start, end))?;
        if reverse {
            s.rev().take(limit).collect()
        } else {
            s.take(limit).collect()
        }
    }
    fn flush(&self) -> Result<()> {
        Db::flush(self)
    }
    fn wait_for_compactions(&self) -> Result<()> {
        Db::wait_for_compactions(self)
    }
    fn stats(&self) -> StatsSnapshot {
        Db::stats(self)
    }
    fn close(&self) -> Result<()> {
        Db::close(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_behind_the_trait() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| crate::Error::io("tempdir", e))?;
        let db = Db::open(dir.path(), crate::Options::default())?;
        let store: &dyn KvStore = &db;
        for k in [b"a", b"b", b"c", b"d"] {
            store.put(k, k)?;
        }
        store.delete(b"b")?;
        assert_eq!(store.get(b"a")?, Some(b"a".to_vec()));
        assert_eq!(store.get(b"b")?, None);
        let fwd = store.scan(Bound::Included(b"a"), Bound::Unbounded, 2, false)?;
        assert_eq!(
            fwd.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
            [b"a".to_vec(), b"c".to_vec()]
        );
        let rev = store.scan(Bound::Unbounded, Bound::Excluded(b"d"), 5, true)?;
        assert_eq!(
            rev.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
            [b"c".to_vec(), b"a".to_vec()]
        );
        store.flush()?;
        assert_eq!(store.stats().user_writes, 5);
        assert!(store.name().starts_with("strata-lsm("));
        store.close()?;
        assert!(matches!(store.get(b"a"), Err(crate::Error::Closed)));
        Ok(())
    }
}
