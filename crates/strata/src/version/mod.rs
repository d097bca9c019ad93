//! Versions: which table files make up each level at a point in time.
//!
//! A [`Version`] is immutable; readers and iterators hold an `Arc` to the one
//! they started with. [`VersionSet`] owns the MANIFEST and installs edits.
//! Its tables are [`FileMeta`]s of `crate::runs`.

mod level0;
mod set;

pub use crate::edit::{Edit, FileDesc};
#[cfg(test)]
pub(crate) use crate::runs::probes;
pub use crate::runs::{FileMeta, LevelIter, ReadCharge, TableCache, BYTES_PER_MISS};
pub use level0::Level0;
pub(crate) use set::{check_header, current_manifest, write_manifest_and_current};
pub use set::{FamilyRecord, VersionSet};

use crate::error::Result;
use crate::rangedel::{RangeDels, RangeTombstone};
use crate::types::{self, SeqNo, ValueKind};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The table files of every level. Level 0 is ordered newest first (its
/// tables overlap); deeper levels are ordered by key and do not overlap.
#[derive(Debug, Clone)]
pub struct Version {
    pub levels: Vec<Vec<Arc<FileMeta>>>,
    /// Level 0's rows (`l0=matrix`; empty otherwise). They
    /// are newer than every table of level 0.
    pub rows: crate::l0::Rows,
    /// The range tombstones flushed and not yet retired.
    pub range_dels: Arc<RangeDels>,
    /// Every table by id, built on the first [`Version::table_by_id`]
    /// (only the stale picker asks), reset by [`Version::seal`].
    by_id: OnceLock<HashMap<u64, Arc<FileMeta>>>,
}

impl Version {
    pub fn new(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); num_levels],
            rows: crate::l0::Rows::default(),
            range_dels: Arc::new(RangeDels::default()),
            by_id: OnceLock::new(),
        }
    }

    /// Finishes a version built by changing `levels`: L0 newest first,
    /// deeper levels by smallest key, and the id index dropped (a clone
    /// of a version carries its parent's).
    pub fn seal(&mut self) {
        for (level, files) in self.levels.iter_mut().enumerate() {
            if level == 0 {
                files.sort_by(|a, b| {
                    b.desc
                        .max_seq
                        .cmp(&a.desc.max_seq)
                        .then(b.id().cmp(&a.id()))
                });
            } else {
                files.sort_by(|a, b| types::compare_internal(&a.desc.smallest, &b.desc.smallest));
            }
        }
        self.by_id = OnceLock::new();
    }

    /// The table `id` if this version holds it.
    pub fn table_by_id(&self, id: u64) -> Option<&Arc<FileMeta>> {
        self.by_id
            .get_or_init(|| {
                self.levels
                    .iter()
                    .flatten()
                    .map(|f| (f.id(), f.clone()))
                    .collect()
            })
            .get(&id)
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
    /// `seek` is `types::seek_key(user_key, seq)`. Tables searched in vain
    /// before another are charged to `charge`.
    pub fn get<'a>(
        &'a self,
        user_key: &[u8],
        seek: &[u8],
        charge: &mut ReadCharge<'a>,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        if let Some(hit) = self.rows.lookup(user_key, types::trailer(seek) >> 8) {
            return Ok(Some(hit));
        }
        if let Some(hit) = self.level0().lookup(user_key, seek, charge)? {
            return Ok(Some(hit));
        }
        // The deepest level holding tables: most keys live there.
        let deepest = self.levels.iter().rposition(|files| !files.is_empty());
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            // Sorted, disjoint: the only candidate is the first file whose
            // largest key is >= the seek key.
            let i =
                files.partition_point(|f| types::compare_internal(&f.desc.largest, seek).is_lt());
            if let Some(f) = files.get(i) {
                if f.smallest_user_key() <= user_key {
                    let likely = Some(level) == deepest;
                    if let Some(hit) = charge.search_in(f, seek, user_key, likely)? {
                        return Ok(Some(hit));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Read-triggered compaction's sample of an iterator seek to
    /// `user_key`: when two or more tables cover the key, the first (the
    /// newest) is charged a miss, as a point lookup that found the key
    /// further down would charge it. True when that used up its allowance.
    pub fn sample_seek(&self, user_key: &[u8]) -> bool {
        let l0 = self
            .levels
            .first()
            .into_iter()
            .flatten()
            .filter(|f| f.overlaps(Some(user_key), Some(user_key)));
        let deeper = self.levels.iter().skip(1).filter_map(|files| {
            let i = files.partition_point(|f| f.largest_user_key() < user_key);
            files.get(i).filter(|f| f.smallest_user_key() <= user_key)
        });
        let mut covering = l0.chain(deeper);
        match (covering.next(), covering.next()) {
            (Some(newest), Some(_)) => newest.charge_miss(),
            _ => false,
        }
    }

    /// True if a table of `level` or a deeper level covers `user_key` (its
    /// key range includes it). Levels from 1 are sorted and disjoint: one
    /// binary search each; level 0 is scanned. Decides whether a tombstone
    /// may still hide an older version below.
    pub fn covers_at_or_below(&self, level: usize, user_key: &[u8]) -> bool {
        (level == 0 && self.rows.covers(user_key))
            || self
                .levels
                .iter()
                .enumerate()
                .skip(level)
                .any(|(l, files)| {
                    if l == 0 {
                        files
                            .iter()
                            .any(|f| f.overlaps(Some(user_key), Some(user_key)))
                    } else {
                        let i = files.partition_point(|f| {
                            #[cfg(test)]
                            probes::count();
                            f.largest_user_key() < user_key
                        });
                        files
                            .get(i)
                            .is_some_and(|f| f.smallest_user_key() <= user_key)
                    }
                })
    }

    /// True if a table or level-0 row may still hold a version that `t`
    /// hides: one overlaps `t`'s range, has an entry older than `t`, and
    /// was not written applying `t` (its `swept_seq` is below `t`).
    pub fn may_hide(&self, t: &RangeTombstone) -> bool {
        let older = |d: &crate::edit::FileDesc| {
            d.min_seq < t.seq
                && d.swept_seq < t.seq
                && t.overlaps(types::user_key(&d.smallest), types::user_key(&d.largest))
        };
        if self.rows.rows.iter().any(|r| older(&r.meta.desc)) {
            return true;
        }
        self.levels.iter().enumerate().any(|(level, files)| {
            if level == 0 {
                return files.iter().any(|f| older(&f.desc));
            }
            // Sorted and disjoint: the overlapping tables are a run.
            let i = files.partition_point(|f| f.largest_user_key() < t.start.as_slice());
            files
                .get(i..)
                .unwrap_or_default()
                .iter()
                .take_while(|f| f.smallest_user_key() < t.end.as_slice())
                .any(|f| older(&f.desc))
        })
    }

    /// Applies the range tombstones `added` and `removed` (by sequence),
    /// then retires every tombstone no table or row may still need
    /// ([`may_hide`](Self::may_hide)); returns the sequences retired.
    /// Call after the tables of the same edit are in place.
    pub fn update_range_dels(&mut self, added: &[RangeTombstone], removed: &[SeqNo]) -> Vec<SeqNo> {
        if self.range_dels.is_empty() && added.is_empty() {
            return Vec::new();
        }
        let mut list: Vec<RangeTombstone> = self
            .range_dels
            .list()
            .iter()
            .chain(added)
            .filter(|t| !removed.contains(&t.seq))
            .cloned()
            .collect();
        let mut retired = Vec::new();
        list.retain(|t| {
            let keep = self.may_hide(t);
            if !keep {
                retired.push(t.seq);
            }
            keep
        });
        if !added.is_empty() || !removed.is_empty() || !retired.is_empty() {
            self.range_dels = Arc::new(RangeDels::new(list));
        }
        retired
    }

    /// Total bytes in all levels.
    pub fn total_bytes(&self) -> u64 {
        (0..self.levels.len()).map(|l| self.level_bytes(l)).sum()
    }
}

/// Level 0's view of the version: its rows, each level's tables, and
/// whether any piece may hold a key.
impl crate::l0::Levels for Version {
    fn rows(&self) -> &crate::l0::Rows {
        &self.rows
    }

    fn tables(&self, level: usize) -> &[Arc<FileMeta>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    fn covers(&self, user_key: &[u8]) -> bool {
        self.covers_at_or_below(0, user_key)
    }
}
