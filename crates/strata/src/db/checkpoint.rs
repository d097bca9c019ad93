//! Checkpoints: a consistent copy of a live database that opens on its own
//! ([`Db::checkpoint`]).

use super::Db;
use crate::error::{Error, Result};
use crate::filename::{row_name, table_path};
use std::path::Path;

/// What a checkpoint wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointStats {
    /// Tables and level-0 rows the checkpoint holds.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of `bytes`, those copied because a hard link was refused (another
    /// file system, say); the rest are hard links to the database's files.
    pub copied_bytes: u64,
}

impl Db {
    /// Writes to `target`, a directory that must not exist yet, a copy of
    /// the database that [`Db::open`] opens on its own and that holds
    /// every write acknowledged before the call (and possibly later
    /// ones: a prefix of the history, never a hole). Tables and level-0
    /// rows are hard-linked where the file system allows (tables never
    /// change once written, so a link shares no mutable state), otherwise
    /// copied; a new manifest and `CURRENT` are written, and everything is
    /// synced before it returns. Rows go into `target` itself: open the
    /// copy with the same `l0` design and no `fast_dir`.
    ///
    /// The database serves reads and writes meanwhile; the call flushes
    /// the memtable first and holds no lock while it links. On an error
    /// the database is unchanged and `target` may hold part of a copy
    /// (remove it); `target` existing is `InvalidArgument`.
    pub fn checkpoint(&self, target: impl AsRef<Path>) -> Result<CheckpointStats> {
        let target = target.as_ref();
        self.check_open()?;
        let inner = &self.inner;
        let fs = &*inner.opts.fs;
        if fs.exists(target) {
            return Err(Error::InvalidArgument(format!(
                "checkpoint target {} exists",
                target.display()
            )));
        }
        self.flush()?;
        // One version and the counters that go with it: no edit is half
        // installed while `apply` is held. Holding the version keeps its
        // files from being deleted until they are linked.
        let (version, number, record, row_dir) = {
            let _one_edit = inner.apply.lock();
            let st = inner.state.lock();
            st.check_usable()?;
            let v = st.versions.current();
            let (number, record) = st.versions.checkpoint_record(&v);
            (v, number, record, st.versions.l0_dir().to_path_buf())
        };
        fs.create_dir_all(target)?;
        let mut stats = CheckpointStats::default();
        let tables = version.levels.iter().flatten().map(|f| {
            (
                table_path(&inner.dir, f.id()),
                table_path(target, f.id()),
                f.size(),
            )
        });
        let rows = version.rows.rows.iter().map(|r| {
            let name = row_name(r.meta.id());
            (row_dir.join(&name), target.join(&name), r.meta.desc.size)
        });
        for (from, to, size) in tables.chain(rows) {
            stats.copied_bytes += fs.link_or_copy(&from, &to)?;
            stats.files += 1;
            stats.bytes += size;
        }
        crate::version::write_manifest_and_current(fs, target, number, &record)?;
        fs.sync_dir(target)?;
        Ok(stats)
    }
}
