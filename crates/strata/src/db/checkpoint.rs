//! Checkpoints: a consistent copy of a live database that opens on its own
//! ([`Db::checkpoint`]).

use super::Db;
use crate::backup::{Kind, SourceFile};
use crate::error::{Error, Result};
use crate::filename::{row_name, table_path};
use crate::version::Version;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
        crate::io::create_dir_durable(fs, target)?;
        let cap = self.capture()?;
        let mut stats = CheckpointStats::default();
        for f in cap.files(&inner.dir) {
            let to = match f.kind {
                Kind::Table => table_path(target, f.number),
                Kind::Row => target.join(row_name(f.number)),
            };
            stats.copied_bytes += fs.link_or_copy(&f.path, &to)?;
            stats.files += 1;
            stats.bytes += f.size;
        }
        // Syncs `target` (the files' entries) after writing CURRENT.
        crate::version::write_manifest_and_current(fs, target, cap.number, &cap.record)?;
        Ok(stats)
    }
}

/// One version of a flushed database and the manifest that opens its
/// files on their own. Holding it keeps those files from being deleted.
pub(super) struct Capture {
    /// Every live keyspace's version.
    versions: Vec<Arc<Version>>,
    /// The manifest's number and its snapshot record.
    pub number: u64,
    pub record: Vec<u8>,
    pub last_sequence: u64,
    row_dir: PathBuf,
}

impl Capture {
    /// The tables and level-0 rows of the version, where they are.
    pub fn files(&self, dir: &Path) -> Vec<SourceFile> {
        let mut files = Vec::new();
        for v in &self.versions {
            files.extend(v.levels.iter().flatten().map(|f| SourceFile {
                kind: Kind::Table,
                number: f.id(),
                size: f.size(),
                path: table_path(dir, f.id()),
            }));
            files.extend(v.rows.rows.iter().map(|r| SourceFile {
                kind: Kind::Row,
                number: r.meta.id(),
                size: r.meta.desc.size,
                path: self.row_dir.join(row_name(r.meta.id())),
            }));
        }
        files
    }
}

impl Db {
    /// Flushes the memtables, then takes the current versions and the
    /// counters that go with them (`install` changes both under the state
    /// mutex). With several keyspaces the flush is one cut of all of them
    /// (`Inner::switch_all`): every keyspace's memtables up to one instant
    /// are flushed and none after it, so a batch across keyspaces is in
    /// the copy whole or not at all.
    pub(super) fn capture(&self) -> Result<Capture> {
        let inner = &self.inner;
        if !inner.keyspaces_beside_default() {
            self.flush()?;
            let st = inner.state.lock();
            st.check_usable()?;
            return Ok(Capture::of(&st));
        }
        // One capture at a time, and no keyspace made or dropped meanwhile.
        let _one = inner.keyspace_ops.lock();
        /// Lifts the cut however the capture ends.
        struct Lift<'a>(&'a super::Inner);
        impl Drop for Lift<'_> {
            fn drop(&mut self) {
                self.0.state.lock().flush_cut = None;
                self.0.bg_cv.notify_all();
            }
        }
        let _lift = Lift(inner);
        inner.submit(
            crate::batch::WriteBatch::new(),
            false,
            Some(super::write::SWITCH_ALL),
        )?;
        let mut st = inner.state.lock();
        loop {
            st.check_usable()?;
            let cut = st.flush_cut.unwrap_or(0);
            let flushed = st
                .live_trees()
                .all(|t| t.imm.first().is_none_or(|m| m.log_number() > cut));
            if flushed {
                return Ok(Capture::of(&st));
            }
            inner.bg_cv.notify_all();
            inner
                .done_cv
                .wait_for(&mut st, std::time::Duration::from_millis(50));
        }
    }
}

impl Capture {
    /// The current versions of `st` and the manifest record that opens them.
    fn of(st: &super::State) -> Capture {
        let (number, record) = st.versions.checkpoint_record();
        Capture {
            number,
            record,
            last_sequence: st.versions.last_sequence,
            row_dir: st.versions.l0_dir().to_path_buf(),
            versions: st.versions.all_current(),
        }
    }
}
