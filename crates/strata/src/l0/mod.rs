//! Level 0 as a container, chosen once at open from `Options::l0`
//! ([`design`]): where a flushed memtable goes (the flush and recovery
//! sink), which compactions leave level 0, how it holds writers back, and
//! which databases it can open. Lookups and iterators go through the
//! version, which holds both kinds of pieces (level 0's tables and the
//! [`Rows`]; the container in use fills only its own, and rows are always
//! newer than tables). Level 0 sees the version through [`Levels`], and
//! names the compactions it wants as [`L0Pick`]s that `compaction` turns
//! into plans, so it sits below both.
//!
//! - [`Tables`]: LevelDB's L0: one table per flush, L0→L1 compactions of
//!   all overlapping tables, stalls by table count.
//! - [`Matrix`]: MatrixKV's container ([`crate::l0::matrix`]): one row per
//!   flush on the fast tier, column compactions, stalls by bytes.

pub(crate) mod matrix;
mod run;
mod sink;

pub(crate) use matrix::row::{Row, RowIter};
pub use matrix::{Matrix as Rows, RowMeta, RowSlice};
pub use run::Run;
pub(crate) use sink::{nothing_below, write_memtable_to, TableKeys, TableSink, Written};

use crate::edit::{Edit, FileDesc};
use crate::error::{Error, Result};
use crate::io::{FileLock, FileSystem};
use crate::l0::matrix::row::RowWriter;
use crate::memtable::MemTable;
use crate::options::{L0Kind, Options};
use crate::rangedel::Cover;
use crate::runs::filter::Dropper;
use crate::runs::fold::Fold;
use crate::runs::FileMeta;
use crate::stats::RowStats;
use crate::types::SeqNo;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What level 0 reads of the version it belongs to (`Version` implements
/// it).
pub trait Levels {
    /// The container's rows (empty unless `l0=matrix`).
    fn rows(&self) -> &Rows;
    /// The tables of `level` (level 0 newest first, deeper levels by key;
    /// empty past the last level).
    fn tables(&self, level: usize) -> &[Arc<FileMeta>];
    /// True if some table or row of the version may hold `user_key`.
    fn covers(&self, user_key: &[u8]) -> bool;
}

/// A compaction out of level 0 that the container asks for; `compaction`
/// makes the plan (the L1 tables it meets, whether it is bottommost).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L0Pick {
    /// Every L0 table into L1.
    Tables,
    /// Cells of rows into L1 (a column compaction).
    Rows(Vec<RowSlice>),
}

/// Whether writers must slow down or stop for level 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    pub slow: bool,
    pub stop: bool,
}

/// Level 0's storage. See the module doc.
pub trait L0Container: Send + Sync {
    /// Writes `mem` as level-0 pieces (none if everything was dropped).
    /// `earlier`: pieces this recovery wrote that `version` lacks.
    fn write(
        &self,
        sink: &TableSink<'_>,
        mem: &MemTable,
        version: &dyn Levels,
        earlier: &Edit,
        snapshots: Vec<SeqNo>,
        next_number: &mut dyn FnMut() -> Result<u64>,
    ) -> Result<Written>;

    /// Records the pieces of `written` in `edit`.
    fn record(&self, written: &Written, edit: &mut Edit);

    /// Level 0's own compactions that are due, in the order to try them
    /// (`l0_busy`: an L0 compaction runs); when none is admitted the level
    /// picker chooses. Empty when level 0 leaves by the level picker.
    fn picks(&self, v: &dyn Levels, opts: &Options, l0_busy: bool) -> Vec<L0Pick>;

    /// A manual compaction of all of level 0 into L1, if it holds anything.
    fn pick_all(&self, v: &dyn Levels, opts: &Options) -> Option<L0Pick>;

    /// Level 0's part of the write stall.
    fn pressure(&self, v: &dyn Levels, opts: &Options) -> Pressure;

    /// Refuses a database whose level 0 this container cannot drain.
    fn check_open(&self, v: &dyn Levels) -> Result<()>;

    /// Claims `own`, the container's own directory, when it is not the
    /// database directory `dir`: the lock held while the database is open
    /// (`None`: nothing to claim).
    fn claim_dir(
        &self,
        _fs: &dyn FileSystem,
        _dir: &Path,
        _own: &Path,
    ) -> Result<Option<Box<dyn FileLock>>> {
        Ok(None)
    }

    /// At open, removes level-0 files in `own` that no version of `live`
    /// (one per keyspace) names (a flush or recovery that failed before its
    /// edit, a dropped keyspace's); any container removes rows no version
    /// names.
    fn remove_unnamed(&self, fs: &dyn FileSystem, own: &Path, live: &[&dyn Levels]) -> Result<()> {
        let rows: Vec<&Rows> = live.iter().map(|v| v.rows()).collect();
        matrix::fast_dir::remove_unnamed_rows(fs, own, &rows)
    }

    /// Opens (checksummed) the rows `edit` adds and returns the current
    /// version's rows (`current`, asked only then) with them stacked
    /// on top (their segment filters updated), for the version the edit
    /// makes; `None` when the edit adds none.
    fn open_added(
        &self,
        edit: &Edit,
        current: &dyn Fn() -> Rows,
        fs: &Arc<dyn FileSystem>,
    ) -> Result<Option<Rows>> {
        if edit.rows_added.is_empty() {
            return Ok(None);
        }
        let mut m = current();
        let rows = edit
            .rows_added
            .iter()
            .map(|d| m.open_row(d.clone(), fs))
            .collect::<Result<Vec<_>>>()?;
        m.apply(rows, &[], &[]);
        Ok(Some(m))
    }

    /// Level 0's figures for a statistics snapshot (the rows' shape and
    /// the lookups' counters; zeros without rows).
    fn fill_stats(&self, v: &dyn Levels, s: &mut RowStats) {
        v.rows().fill_stats(s);
    }
}

/// The container `opts.l0` names; also raises L1's target to the matrix
/// container's capacity (the thesis: L1 ≈ the container, ×10 per level).
pub fn design(opts: &mut Options) -> Box<dyn L0Container> {
    match opts.l0 {
        L0Kind::Tables => Box::new(Tables),
        L0Kind::Matrix => {
            opts.max_bytes_for_level_base = opts.max_bytes_for_level_base.max(opts.matrix.capacity);
            Box::new(Matrix)
        }
    }
}

/// Overlapping tables (LevelDB's level 0).
pub struct Tables;

impl L0Container for Tables {
    fn write(
        &self,
        sink: &TableSink<'_>,
        mem: &MemTable,
        version: &dyn Levels,
        earlier: &Edit,
        snapshots: Vec<SeqNo>,
        next_number: &mut dyn FnMut() -> Result<u64>,
    ) -> Result<Written> {
        let unlisted: Vec<FileDesc> = earlier.added.iter().map(|(_, d)| d.clone()).collect();
        write_memtable_to(sink, mem, version, &unlisted, snapshots, next_number)
    }

    fn record(&self, written: &Written, edit: &mut Edit) {
        edit.added
            .extend(written.descs.iter().map(|d| (0, d.clone())));
    }

    fn picks(&self, _v: &dyn Levels, _opts: &Options, _l0_busy: bool) -> Vec<L0Pick> {
        Vec::new()
    }

    fn pick_all(&self, v: &dyn Levels, _opts: &Options) -> Option<L0Pick> {
        (!v.tables(0).is_empty()).then_some(L0Pick::Tables)
    }

    fn pressure(&self, v: &dyn Levels, opts: &Options) -> Pressure {
        let files = v.tables(0).len();
        Pressure {
            slow: files >= opts.level0_slowdown_writes_trigger,
            stop: files >= opts.level0_stop_writes_trigger,
        }
    }

    fn check_open(&self, v: &dyn Levels) -> Result<()> {
        if v.rows().is_empty() {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "the database holds {} matrix container rows: open it with l0=matrix \
             (compact_range drains the container)",
            v.rows().rows.len()
        )))
    }
}

/// MatrixKV's container (`crate::l0::matrix`).
pub struct Matrix;

impl L0Container for Matrix {
    fn write(
        &self,
        sink: &TableSink<'_>,
        mem: &MemTable,
        version: &dyn Levels,
        earlier: &Edit,
        snapshots: Vec<SeqNo>,
        next_number: &mut dyn FnMut() -> Result<u64>,
    ) -> Result<Written> {
        let dir = version.rows().dir().to_path_buf();
        // Hints point into the top row: the last one this recovery wrote,
        // or the version's newest.
        let earlier_top = match earlier.rows_added.last() {
            Some(d) => Some(Row::open(
                &*sink.fs,
                &dir.join(crate::filename::row_name(d.id)),
            )?),
            None => None,
        };
        let top = earlier_top
            .as_ref()
            .or_else(|| version.rows().rows.first().map(|r| &r.meta.row));
        let is_bottom_for =
            |uk: &[u8]| sink.drop_tombstones && nothing_below(version, &earlier.rows_added, uk);
        write_row(sink, dir, mem, top, snapshots, is_bottom_for, next_number)
    }

    fn record(&self, written: &Written, edit: &mut Edit) {
        edit.rows_added.extend(written.rows.iter().cloned());
    }

    /// Tables left in L0 (the database ran with l0=tables before) go
    /// first: rows are newer and may not reach L1 ahead of them.
    fn picks(&self, v: &dyn Levels, opts: &Options, l0_busy: bool) -> Vec<L0Pick> {
        if l0_busy {
            return Vec::new();
        }
        if !v.tables(0).is_empty() {
            return vec![L0Pick::Tables];
        }
        matrix::column::pick_column(v, opts)
            .map(L0Pick::Rows)
            .into_iter()
            .collect()
    }

    fn pick_all(&self, v: &dyn Levels, _opts: &Options) -> Option<L0Pick> {
        if !v.tables(0).is_empty() {
            return Some(L0Pick::Tables);
        }
        matrix::column::pick_all(v).map(L0Pick::Rows)
    }

    fn pressure(&self, v: &dyn Levels, opts: &Options) -> Pressure {
        let held = v.rows().remaining_bytes();
        Pressure {
            slow: held.saturating_mul(6) >= opts.matrix.capacity.saturating_mul(5),
            stop: held >= opts.matrix.capacity,
        }
    }

    fn check_open(&self, _v: &dyn Levels) -> Result<()> {
        Ok(())
    }

    fn claim_dir(
        &self,
        fs: &dyn FileSystem,
        dir: &Path,
        own: &Path,
    ) -> Result<Option<Box<dyn FileLock>>> {
        if own == dir {
            return Ok(None);
        }
        matrix::fast_dir::claim(fs, dir, own).map(Some)
    }
}

/// Writes `mem` as one row in `dir` with hints into `top` (no row if
/// everything was dropped).
fn write_row(
    sink: &TableSink<'_>,
    dir: PathBuf,
    mem: &MemTable,
    top: Option<&Row>,
    snapshots: Vec<SeqNo>,
    is_bottom_for: impl FnMut(&[u8]) -> bool + Copy,
    next_number: &mut dyn FnMut() -> Result<u64>,
) -> Result<Written> {
    let cover = Cover::of(mem.range_fragments());
    let mut fold = Fold::new(&sink.rules, snapshots.clone(), is_bottom_for, cover.clone());
    let mut dropper = Dropper::new(snapshots, is_bottom_for, cover);
    let id = next_number()?;
    let mut w = RowWriter::create(&*sink.fs, &dir, id, top)?;
    let path = w.path().to_path_buf();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut seqs: Vec<SeqNo> = Vec::new();
    let mut keep = |k: &[u8], v: &[u8]| -> Result<()> {
        if dropper.keep(k)? {
            w.add(k, v)?;
            if sink.collect_keys {
                let uk = crate::types::user_key(k);
                if keys.last().map(Vec::as_slice) != Some(uk) {
                    keys.push(uk.to_vec());
                    seqs.push(crate::runs::output::tracked_seq(k));
                }
            }
        }
        Ok(())
    };
    let filled = mem
        .for_each(|k, v| fold.push(k, v, &mut keep))
        .and_then(|()| fold.finish(&mut keep));
    let written = filled.and_then(|()| {
        if w.entries() == 0 {
            return Ok(None);
        }
        let (smallest, largest) = (w.smallest.clone(), w.largest.clone());
        let (entries, deletions, max_seq, min_seq) =
            (w.entries(), w.deletions, w.max_seq, w.min_seq);
        let size = w.finish()?;
        sink.fs.sync_dir(&dir)?;
        Ok(Some(FileDesc {
            id,
            size,
            smallest,
            largest,
            entries,
            deletions,
            max_seq,
            min_seq,
            swept_seq: dropper.swept(),
        }))
    });
    match written {
        Ok(Some(desc)) => {
            let (keys, seqs) = if sink.collect_keys {
                (vec![keys], vec![seqs])
            } else {
                Default::default()
            };
            Ok(Written {
                descs: Vec::new(),
                rows: vec![desc],
                keys,
                seqs,
                tally: fold.tally,
            })
        }
        Ok(None) => {
            let _ = sink.fs.remove_file(&path);
            Ok(Written::default())
        }
        Err(e) => {
            let _ = sink.fs.remove_file(&path);
            Err(e)
        }
    }
}
