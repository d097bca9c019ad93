//! Versions: which table files make up each level at a point in time.
//!
//! A [`Version`] is immutable; readers and iterators hold an `Arc` to the one
//! they started with. [`VersionSet`] owns the MANIFEST and installs edits.
//! A table file is deleted when it was removed by an edit *and* the last
//! version, iterator or compaction holding its [`FileMeta`] lets go.

mod edit;
mod level0;
mod set;

pub use edit::{Edit, FileDesc};
pub use level0::Level0;
pub(crate) use set::{check_header, current_manifest};
pub use set::{PendingEdit, TableOpener, VersionSet, Written};

use crate::error::Result;
use crate::io::FileSystem;
use crate::table::Table;
use crate::types::{self, SeqNo, ValueKind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A live table file.
pub struct FileMeta {
    pub desc: FileDesc,
    pub table: Arc<Table>,
    obsolete: AtomicBool,
    path: PathBuf,
    fs: Arc<dyn FileSystem>,
}

impl FileMeta {
    pub(crate) fn new(
        desc: FileDesc,
        table: Arc<Table>,
        path: PathBuf,
        fs: Arc<dyn FileSystem>,
    ) -> Self {
        FileMeta {
            desc,
            table,
            obsolete: AtomicBool::new(false),
            path,
            fs,
        }
    }

    pub fn id(&self) -> u64 {
        self.desc.id
    }

    pub fn size(&self) -> u64 {
        self.desc.size
    }

    pub fn smallest_user_key(&self) -> &[u8] {
        types::user_key(&self.desc.smallest)
    }

    pub fn largest_user_key(&self) -> &[u8] {
        types::user_key(&self.desc.largest)
    }

    /// True if the file's user-key range intersects `[lo, hi]` (`None` = unbounded).
    pub fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        !(lo.is_some_and(|lo| self.largest_user_key() < lo)
            || hi.is_some_and(|hi| self.smallest_user_key() > hi))
    }

    /// Marks the file for deletion once nothing references it.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for FileMeta {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            // A failure leaves an orphan that the next open removes.
            let _ = self.fs.remove_file(&self.path);
        }
    }
}

impl std::fmt::Debug for FileMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileMeta({}, {} B)", self.desc.id, self.desc.size)
    }
}

/// The table files of every level. Level 0 is ordered newest first (its
/// tables overlap); deeper levels are ordered by key and do not overlap.
#[derive(Debug, Clone)]
pub struct Version {
    pub levels: Vec<Vec<Arc<FileMeta>>>,
}

impl Version {
    pub fn new(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); num_levels],
        }
    }

    /// Level 0 behind its read interface.
    pub fn level0(&self) -> &dyn Level0 {
        static NONE: Vec<Arc<FileMeta>> = Vec::new();
        self.levels.first().unwrap_or(&NONE)
    }

    /// Bytes in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels
            .get(level)
            .map_or(0, |l| l.iter().map(|f| f.size()).sum())
    }

    /// Number of files in `level`.
    pub fn level_files(&self, level: usize) -> usize {
        self.levels.get(level).map_or(0, Vec::len)
    }

    /// Files of `level` whose user-key range intersects `[lo, hi]`.
    pub fn overlapping(
        &self,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        self.levels
            .get(level)
            .map(|files| {
                files
                    .iter()
                    .filter(|f| f.overlaps(lo, hi))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The newest version of `user_key` visible at `seq` stored in tables.
    /// `seek` is `types::seek_key(user_key, seq)`.
    pub fn get(&self, user_key: &[u8], seek: &[u8]) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        if let Some(hit) = self.level0().lookup(user_key, seek)? {
            return Ok(Some(hit));
        }
        for files in self.levels.iter().skip(1) {
            // Sorted, disjoint: the only candidate is the first file whose
            // largest key is >= the seek key.
            let i =
                files.partition_point(|f| types::compare_internal(&f.desc.largest, seek).is_lt());
            if let Some(f) = files.get(i) {
                if f.smallest_user_key() <= user_key {
                    if let Some(hit) = f.table.get(seek, user_key)? {
                        return Ok(Some(hit));
                    }
                }
            }
        }
        Ok(None)
    }

    /// True if a table of `level` or a deeper level covers `user_key` (its
    /// key range includes it). Levels from 1 are sorted and disjoint: one
    /// binary search each; level 0 is scanned. Decides whether a tombstone
    /// may still hide an older version below.
    pub fn covers_at_or_below(&self, level: usize, user_key: &[u8]) -> bool {
        self.levels
            .iter()
            .enumerate()
            .skip(level)
            .any(|(l, files)| {
                if l == 0 {
                    files
                        .iter()
                        .any(|f| f.overlaps(Some(user_key), Some(user_key)))
                } else {
                    let i = files.partition_point(|f| f.largest_user_key() < user_key);
                    files
                        .get(i)
                        .is_some_and(|f| f.smallest_user_key() <= user_key)
                }
            })
    }

    /// Total bytes in all levels.
    pub fn total_bytes(&self) -> u64 {
        (0..self.levels.len()).map(|l| self.level_bytes(l)).sum()
    }
}
