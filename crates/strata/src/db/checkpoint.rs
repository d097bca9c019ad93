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
    /// copied; a new manifest and `CURRENT` are written, and the files,
    /// `target` and the new directory entries above it are synced before
    /// it returns. Rows go into `target` itself: open the copy with the
    /// same `l0` design and no `fast_dir`.
    ///
    /// The database serves reads and writes meanwhile; the call flushes
    /// the memtable first and holds no lock while it links. On an error
    /// the database's contents are unchanged and `target` may hold part of
    /// a copy (remove it). `InvalidArgument`: `target` exists, or lies in
    /// the database's directory or its `fast_dir`. Two checkpoints racing
    /// for one new `target` may both get past the check; one then fails.
    pub fn checkpoint(&self, target: impl AsRef<Path>) -> Result<CheckpointStats> {
        let target = target.as_ref();
        self.check_open()?;
        let inner = &self.inner;
        let fs = &*inner.opts.fs;
        let row_dir = inner.state.lock().versions.l0_dir().to_path_buf();
        let bad = |why: &str| {
            Err(Error::InvalidArgument(format!(
                "checkpoint target {}: {why}",
                target.display()
            )))
        };
        if fs.exists(target) {
            return bad("exists");
        }
        if target.starts_with(&inner.dir) || target.starts_with(&row_dir) {
            return bad("inside the database's directory (the next open would take it for debris)");
        }
        make_dir_durable(fs, target)?;
        self.flush()?;
        // One version and the counters that go with it: `install` changes
        // both under the state mutex. Holding the version keeps its files
        // from being deleted until they are linked.
        let (version, number, record) = {
            let st = inner.state.lock();
            st.check_usable()?;
            let v = st.versions.current();
            let (number, record) = st.versions.checkpoint_record(&v);
            (v, number, record)
        };
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
        // Syncs `target` (the files' entries) after writing CURRENT.
        crate::version::write_manifest_and_current(fs, target, number, &record)?;
        Ok(stats)
    }
}

/// Creates `dir` and every missing parent, and syncs the parent of each
/// directory it created, so their entries survive a power loss.
fn make_dir_durable(fs: &dyn crate::io::FileSystem, dir: &Path) -> Result<()> {
    let mut created: Vec<&Path> = Vec::new();
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_os_str().is_empty() && !fs.exists(p)) {
        created.push(p);
        d = p.parent();
    }
    fs.create_dir_all(dir)?;
    for p in created {
        if let Some(parent) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
    }
    Ok(())
}
