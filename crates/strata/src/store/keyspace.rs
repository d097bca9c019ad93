//! A keyspace of the LSM engine ([`Keyspace`]) behind [`KvStore`]: what
//! `KvStore::keyspace` hands out (the C ABI's keyspace handles, the CLI's
//! `--keyspace`).

use super::lsm::{collect, snapshot_of, LSM_SEMANTICS};
use super::{Cursor, KvStore, ScanRange, Semantics, StoreSnapshot};
use crate::batch::WriteBatch;
use crate::db::{Keyspace, ReadOptions};
use crate::error::{Error, Result};
use crate::options::WriteOptions;
use crate::stats::StoreStats;

impl KvStore for Keyspace {
    fn name(&self) -> String {
        format!(
            "strata-lsm keyspace {}({})",
            Keyspace::name(self),
            self.options()
        )
    }
    fn semantics(&self) -> Semantics {
        Semantics {
            merges: self.options().merge_operator.get().is_some(),
            ..LSM_SEMANTICS
        }
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Keyspace::put(self, key, value)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Keyspace::get(self, key)
    }
    fn get_at(&self, key: &[u8], snap: Option<&StoreSnapshot>) -> Result<Option<Vec<u8>>> {
        let snapshot = snapshot_of(snap)?;
        Keyspace::get_opt(self, key, &ReadOptions { snapshot })
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        Keyspace::delete(self, key)
    }
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        Keyspace::delete_range(self, start, end)
    }
    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        Keyspace::merge(self, key, operand)
    }
    /// The batch's entries of `default` go to this keyspace.
    fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        Keyspace::write_batch(self, batch, opts)
    }
    fn scan(&self, range: ScanRange<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let ScanRange {
            start,
            end,
            limit,
            reverse,
        } = range;
        collect(
            Keyspace::scan::<&[u8], _>(self, (start, end))?,
            limit,
            reverse,
        )
    }
    fn scan_visit(&self, range: ScanRange<'_>, f: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
        Keyspace::scan::<&[u8], _>(self, (range.start, range.end))?.visit(
            range.limit,
            range.reverse,
            f,
        )
    }
    fn snapshot(&self) -> Result<StoreSnapshot> {
        Ok(StoreSnapshot::new(Keyspace::snapshot(self)?))
    }
    fn cursor(&self, snap: Option<&StoreSnapshot>) -> Result<Box<dyn Cursor>> {
        let snapshot = snapshot_of(snap)?;
        Ok(Box::new(Keyspace::iter(self, &ReadOptions { snapshot })?))
    }
    fn flush(&self) -> Result<()> {
        Keyspace::flush(self)
    }
    fn compact(&self) -> Result<()> {
        Keyspace::compact_range::<&[u8], _>(self, ..)
    }
    fn keyspace(&self, name: &str, options: &str) -> Result<Box<dyn KvStore>> {
        Ok(Box::new(self.sibling(name, options)?))
    }
    fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.drop_sibling(name)
    }
    fn keyspace_names(&self) -> Result<Vec<String>> {
        Ok(self.sibling_names())
    }
    fn keyspace_id(&self) -> Result<u32> {
        Ok(self.id())
    }
    fn wait_for_compactions(&self) -> Result<()> {
        Keyspace::wait_for_compactions(self)
    }
    /// The database's statistics.
    fn stats(&self) -> StoreStats {
        StoreStats::from_lsm(self.db_stats())
    }
    /// A keyspace's store closes nothing (the database's store closes the
    /// database); later calls work until the database is closed.
    fn close(&self) -> Result<()> {
        Ok(())
    }
    fn checkpoint(&self, _target: &std::path::Path) -> Result<crate::CheckpointStats> {
        Err(Error::NotSupported(
            "checkpoint the database's store, not a keyspace's".into(),
        ))
    }
    fn backup(&self, _store: &crate::BackupStore) -> Result<crate::BackupInfo> {
        Err(Error::NotSupported(
            "back up the database's store, not a keyspace's".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Bound;

    /// A keyspace behind the trait: its own data, the database's snapshots,
    /// batches whose default entries land in it, and siblings.
    #[test]
    fn a_keyspace_behind_the_trait() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let db: Box<dyn KvStore> = crate::open(dir.path(), crate::Options::default())?;
        let ks = db.keyspace("users", "compression=lz4")?;
        assert_eq!(db.keyspace_names()?, ["default", "users"]);
        assert_eq!(ks.keyspace_id()?, 1);
        ks.put(b"a", b"1")?;
        db.put(b"a", b"0")?;
        let snap = ks.snapshot()?;
        // Through the keyspace's store, a batch's default entries are its.
        let mut b = WriteBatch::new();
        b.put(b"b", b"2");
        ks.write(b, &WriteOptions::default())?;
        // Through the database's, a batch spans keyspaces.
        let mut b = WriteBatch::new();
        b.put(b"b", b"0");
        b.put_in(&ks.keyspace_id()?, b"c", b"3");
        db.write(b, &WriteOptions::default())?;
        assert_eq!(ks.get(b"a")?, Some(b"1".to_vec()));
        assert_eq!(db.get(b"b")?, Some(b"0".to_vec()));
        assert_eq!(ks.get(b"c")?, Some(b"3".to_vec()));
        assert_eq!(ks.get_at(b"b", Some(&snap))?, None);
        let all = ks.scan(ScanRange::new(Bound::Unbounded, Bound::Unbounded).limit(10))?;
        assert_eq!(all.len(), 3);
        ks.flush()?;
        ks.compact()?;
        assert_eq!(ks.get(b"b")?, Some(b"2".to_vec()));
        let again = ks.keyspace("users", "")?;
        assert_eq!(again.get(b"a")?, Some(b"1".to_vec()));
        assert!(matches!(
            ks.checkpoint(dir.path()),
            Err(Error::NotSupported(_))
        ));
        drop(snap);
        db.drop_keyspace("users")?;
        assert!(matches!(ks.get(b"a"), Err(Error::InvalidArgument(_))));
        db.close()?;
        Ok(())
    }
}
