//! Backups of a live database into a [`BackupStore`] ([`Db::backup`]).

use super::Db;
use crate::backup::{BackupInfo, BackupStore, Source};
use crate::error::Result;

impl Db {
    /// Adds to `store` a backup holding every write acknowledged before
    /// the call (and possibly later ones: a prefix of the history, never a
    /// hole), and returns what it holds and copied. The database serves
    /// reads and writes meanwhile: the call flushes the memtable, takes one
    /// version, and copies with no lock held the tables and level-0 rows
    /// that no earlier backup in the store holds (a file's identity is its
    /// number, size and unique id, so a restored database backed up into
    /// the same store shares the files it kept). Restore with
    /// [`BackupStore::restore`]. On an error the store holds the backups it
    /// held before.
    pub fn backup(&self, store: &BackupStore) -> Result<BackupInfo> {
        self.check_open()?;
        let inner = &self.inner;
        let cap = self.capture()?;
        let src = Source {
            fs: &*inner.opts.fs,
            files: cap.files(&inner.dir),
            manifest_number: cap.number,
            manifest: &cap.record,
            last_sequence: cap.last_sequence,
            now_ms: inner.opts.clock.now_ms(),
        };
        // `cap` holds the version, so its files outlive the copying.
        store.add(&src)
    }
}
