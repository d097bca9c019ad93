//! The LSM engine ([`Db`]) behind [`KvStore`].

use super::{Cursor, KvStore, ScanRange, Semantics, StoreSnapshot};
use crate::batch::WriteBatch;
use crate::db::{Db, ReadOptions, Snapshot};
use crate::error::{Error, Result};
use crate::iter::DbIter;
use crate::options::WriteOptions;
use crate::stats::StoreStats;

/// Entries a [`KvStore::scan`] reserves room for before reading.
const SCAN_RESERVE: usize = 256;

/// What the LSM engine promises (`merges`: with a merge operator, see
/// `semantics`).
pub const LSM_SEMANTICS: Semantics = Semantics {
    engine: "lsm",
    atomic_batches: true,
    snapshot_scans: true,
    snapshots: true,
    range_deletes: true,
    merges: false,
    unsynced: "a process crash: the write is in the WAL's file (not yet fsynced); a power loss may lose the newest writes, never a part of a batch",
    synced: "a power loss: the WAL is fdatasynced before the write is acknowledged",
};

/// Up to `limit` entries of `s`, from the back when `reverse`.
pub(super) fn collect(
    mut s: crate::db::Scan,
    limit: usize,
    reverse: bool,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    // Room for a page of results up front (a scan's size is unknown to
    // `collect`, which would grow the vector several times).
    let mut out = Vec::with_capacity(limit.min(SCAN_RESERVE));
    if reverse {
        for e in s.rev().take(limit) {
            out.push(e?);
        }
    } else {
        s.hint_limit(limit);
        for e in s.take(limit) {
            out.push(e?);
        }
    }
    Ok(out)
}

pub(super) fn snapshot_of(snap: Option<&StoreSnapshot>) -> Result<Option<&Snapshot>> {
    snap.map(|s| {
        s.downcast::<Snapshot>()
            .ok_or_else(|| Error::InvalidArgument("a snapshot of another engine's store".into()))
    })
    .transpose()
}

impl KvStore for Db {
    fn name(&self) -> String {
        format!("strata-lsm({})", self.options())
    }
    fn semantics(&self) -> Semantics {
        Semantics {
            merges: self.options().merge_operator.get().is_some(),
            ..LSM_SEMANTICS
        }
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Db::put(self, key, value)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Db::get(self, key)
    }
    fn get_at(&self, key: &[u8], snap: Option<&StoreSnapshot>) -> Result<Option<Vec<u8>>> {
        let snapshot = snapshot_of(snap)?;
        Db::get_opt(self, key, &ReadOptions { snapshot })
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        Db::delete(self, key)
    }
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        Db::delete_range(self, start, end)
    }
    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        Db::merge(self, key, operand)
    }
    fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        Db::write(self, batch, opts)
    }
    fn scan(&self, range: ScanRange<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let ScanRange {
            start,
            end,
            limit,
            reverse,
        } = range;
        collect(Db::scan::<&[u8], _>(self, (start, end))?, limit, reverse)
    }
    fn scan_visit(&self, range: ScanRange<'_>, f: &mut dyn FnMut(&[u8], &[u8])) -> Result<usize> {
        // The same scan as `scan`, its entries read in place.
        Db::scan::<&[u8], _>(self, (range.start, range.end))?.visit(range.limit, range.reverse, f)
    }
    fn snapshot(&self) -> Result<StoreSnapshot> {
        // A closed database has no view to pin.
        self.check_open()?;
        Ok(StoreSnapshot::new(Db::snapshot(self)))
    }
    fn cursor(&self, snap: Option<&StoreSnapshot>) -> Result<Box<dyn Cursor>> {
        let snapshot = snapshot_of(snap)?;
        Ok(Box::new(Db::iter(self, &ReadOptions { snapshot })?))
    }
    fn flush(&self) -> Result<()> {
        Db::flush(self)
    }
    fn checkpoint(&self, target: &std::path::Path) -> Result<crate::CheckpointStats> {
        Db::checkpoint(self, target)
    }
    fn backup(&self, store: &crate::BackupStore) -> Result<crate::BackupInfo> {
        Db::backup(self, store)
    }
    fn compact(&self) -> Result<()> {
        Db::compact_range::<&[u8], _>(self, ..)
    }
    fn wait_for_compactions(&self) -> Result<()> {
        Db::wait_for_compactions(self)
    }
    fn keyspace(&self, name: &str, options: &str) -> Result<Box<dyn KvStore>> {
        let ks = match Db::keyspace(self, name)? {
            Some(ks) => ks,
            None => Db::create_keyspace(self, name, options)?,
        };
        Ok(Box::new(ks))
    }
    fn drop_keyspace(&self, name: &str) -> Result<()> {
        Db::drop_keyspace(self, name)
    }
    fn keyspace_names(&self) -> Result<Vec<String>> {
        self.check_open()?;
        Ok(Db::keyspace_names(self))
    }
    fn keyspace_id(&self) -> Result<u32> {
        Ok(0)
    }
    fn stats(&self) -> StoreStats {
        StoreStats::from_lsm(Db::stats(self))
    }
    fn recovery_report(&self) -> Option<String> {
        Db::recovery_report(self).map(str::to_string)
    }
    fn close(&self) -> Result<()> {
        Db::close(self)
    }
}

impl Cursor for DbIter {
    fn valid(&self) -> bool {
        DbIter::valid(self)
    }
    fn key(&self) -> &[u8] {
        DbIter::key(self)
    }
    fn value(&self) -> &[u8] {
        DbIter::value(self)
    }
    fn status(&self) -> Result<()> {
        DbIter::status(self)
    }
    fn seek_to_first(&mut self) {
        DbIter::seek_to_first(self)
    }
    fn seek_to_last(&mut self) {
        DbIter::seek_to_last(self)
    }
    fn seek(&mut self, target: &[u8]) {
        DbIter::seek(self, target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        DbIter::seek_for_prev(self, target)
    }
    fn next(&mut self) {
        DbIter::next(self)
    }
    fn prev(&mut self) {
        DbIter::prev(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Bound;

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
        let fwd = store.scan(ScanRange::new(Bound::Included(b"a"), Bound::Unbounded).limit(2))?;
        assert_eq!(
            fwd.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
            [b"a".to_vec(), b"c".to_vec()]
        );
        let rev = store.scan(
            ScanRange::new(Bound::Unbounded, Bound::Excluded(b"d"))
                .limit(5)
                .reverse(true),
        )?;
        assert_eq!(
            rev.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
            [b"c".to_vec(), b"a".to_vec()]
        );
        store.flush()?;
        assert_eq!(store.stats().user_writes, 5);
        assert!(store.stats().lsm().is_some());
        assert!(store.name().starts_with("strata-lsm("));
        store.close()?;
        assert!(matches!(store.get(b"a"), Err(crate::Error::Closed)));
        Ok(())
    }
}
