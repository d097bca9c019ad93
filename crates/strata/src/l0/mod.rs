//! Level 0 as a container, chosen once at open from `Options::l0`
//! ([`design`]): where a flushed memtable goes (the flush and recovery
//! sink), which compactions leave level 0, how it holds writers back, and
//! which databases it can open. Lookups and iterators go through the
//! version, which holds both kinds of pieces (`Version::levels[0]` tables,
//! `Version::matrix` rows; the container in use fills only its own, and
//! rows are always newer than tables).
//!
//! - [`Tables`]: LevelDB's L0: one table per flush, L0→L1 compactions of
//!   all overlapping tables, stalls by table count.
//! - [`Matrix`]: MatrixKV's container ([`crate::l0::matrix`]): one row per
//!   flush on the fast tier, column compactions, stalls by bytes.

pub(crate) mod matrix;
mod sink;

pub(crate) use sink::{nothing_below, write_memtable_to, TableKeys, TableSink, Written};

use crate::compaction::filter::Dropper;
use crate::compaction::picker::{self, PickEnv, Picker};
use crate::compaction::Plan;
use crate::error::{Error, Result};
use crate::io::{FileLock, FileSystem};
use crate::l0::matrix::row::{Row, RowWriter};
use crate::memtable::MemTable;
use crate::options::{L0Kind, Options};
use crate::stats::MatrixStats;
use crate::types::SeqNo;
use crate::version::{Edit, FileDesc, Version};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
        version: &Version,
        earlier: &Edit,
        snapshots: Vec<SeqNo>,
        next_number: &mut dyn FnMut() -> Result<u64>,
    ) -> Result<Written>;

    /// Records the pieces of `written` in `edit`.
    fn record(&self, written: &Written, edit: &mut Edit);

    /// The next compaction: level 0's own plans, or `levels`' choice.
    fn pick(&self, env: &PickEnv<'_>, levels: &dyn Picker) -> Option<Plan>;

    /// A manual compaction of all of level 0 into L1, if it holds anything.
    fn pick_all(&self, v: &Version, opts: &Options) -> Option<Plan>;

    /// Level 0's part of the write stall.
    fn pressure(&self, v: &Version, opts: &Options) -> Pressure;

    /// Refuses a database whose level 0 this container cannot drain.
    fn check_open(&self, v: &Version) -> Result<()>;

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

    /// At open, removes level-0 files in `own` that `v` does not name (a
    /// flush or recovery that failed before its edit); any container
    /// removes rows a version does not name.
    fn remove_unnamed(&self, fs: &dyn FileSystem, own: &Path, v: &Version) -> Result<()> {
        matrix::fast_dir::remove_unnamed_rows(fs, own, &v.matrix)
    }

    /// Opens (checksummed) the rows `edit` adds and returns the rows of
    /// the current version (`current`, asked only then) with them stacked
    /// on top (their segment filters updated), for the version the edit
    /// makes; `None` when the edit adds none.
    fn open_added(
        &self,
        edit: &Edit,
        current: &dyn Fn() -> Arc<Version>,
        fs: &Arc<dyn FileSystem>,
    ) -> Result<Option<matrix::Matrix>> {
        if edit.rows_added.is_empty() {
            return Ok(None);
        }
        let mut m = current().matrix.clone();
        let rows = edit
            .rows_added
            .iter()
            .map(|d| matrix::RowMeta::open(d.clone(), fs, &m.cfg.dir))
            .collect::<Result<Vec<_>>>()?;
        m.apply(rows, &[], &[]);
        Ok(Some(m))
    }

    /// Level 0's figures for a statistics snapshot (the rows' shape and
    /// the lookups' counters; zeros without rows).
    fn fill_stats(&self, v: &Version, s: &mut MatrixStats) {
        v.matrix.fill_stats(s);
    }
}

/// The container `opts.l0` names; also raises L1's target to the matrix
/// container's capacity (the thesis: L1 ≈ the container, ×10 per level).
pub fn design(opts: &mut Options) -> Box<dyn L0Container> {
    match opts.l0 {
        L0Kind::Tables => Box::new(Tables),
        L0Kind::Matrix => {
            opts.max_bytes_for_level_base = opts.max_bytes_for_level_base.max(opts.matrix_capacity);
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
        version: &Version,
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

    fn pick(&self, env: &PickEnv<'_>, levels: &dyn Picker) -> Option<Plan> {
        levels.pick(env)
    }

    fn pick_all(&self, v: &Version, opts: &Options) -> Option<Plan> {
        picker::pick_range(v, opts, 0, None, None)
    }

    fn pressure(&self, v: &Version, opts: &Options) -> Pressure {
        let files = v.level_files(0);
        Pressure {
            slow: files >= opts.level0_slowdown_writes_trigger,
            stop: files >= opts.level0_stop_writes_trigger,
        }
    }

    fn check_open(&self, v: &Version) -> Result<()> {
        if v.matrix.is_empty() {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "the database holds {} matrix container rows: open it with l0=matrix \
             (compact_range drains the container)",
            v.matrix.rows.len()
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
        version: &Version,
        earlier: &Edit,
        snapshots: Vec<SeqNo>,
        next_number: &mut dyn FnMut() -> Result<u64>,
    ) -> Result<Written> {
        let dir = version.matrix.cfg.dir.clone();
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
            .or_else(|| version.matrix.rows.first().map(|r| &r.meta.row));
        let is_bottom_for =
            |uk: &[u8]| sink.drop_tombstones && nothing_below(version, &earlier.rows_added, uk);
        write_row(sink, dir, mem, top, snapshots, is_bottom_for, next_number)
    }

    fn record(&self, written: &Written, edit: &mut Edit) {
        edit.rows_added.extend(written.rows.iter().cloned());
    }

    fn pick(&self, env: &PickEnv<'_>, levels: &dyn Picker) -> Option<Plan> {
        let v = env.version;
        // Tables left in L0 (the database ran with l0=tables before) go
        // first: rows are newer and may not reach L1 ahead of them.
        if v.level_files(0) > 0 && !env.in_flight.l0_busy() {
            if let Some(p) = picker::pick_range(v, env.opts, 0, None, None)
                .map(|mut p| {
                    p.trigger = crate::compaction::Trigger::Size;
                    p
                })
                .and_then(|p| env.admit(p))
            {
                return Some(p);
            }
        }
        crate::l0::matrix::column::pick_column(v, env.opts, env.in_flight)
            .and_then(|p| env.admit(p))
            .or_else(|| levels.pick(env))
    }

    fn pick_all(&self, v: &Version, opts: &Options) -> Option<Plan> {
        if v.level_files(0) > 0 {
            return picker::pick_range(v, opts, 0, None, None);
        }
        crate::l0::matrix::column::pick_all(v, opts)
    }

    fn pressure(&self, v: &Version, opts: &Options) -> Pressure {
        let held = v.matrix.remaining_bytes();
        Pressure {
            slow: held.saturating_mul(6) >= opts.matrix_capacity.saturating_mul(5),
            stop: held >= opts.matrix_capacity,
        }
    }

    fn check_open(&self, _v: &Version) -> Result<()> {
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
    is_bottom_for: impl FnMut(&[u8]) -> bool,
    next_number: &mut dyn FnMut() -> Result<u64>,
) -> Result<Written> {
    let mut dropper = Dropper::new(snapshots, is_bottom_for);
    let id = next_number()?;
    let mut w = RowWriter::create(&*sink.fs, &dir, id, top)?;
    let path = w.path().to_path_buf();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut seqs: Vec<SeqNo> = Vec::new();
    let filled = mem.for_each(|k, v| {
        if dropper.keep(k)? {
            w.add(k, v)?;
            if sink.collect_keys {
                let uk = crate::types::user_key(k);
                if keys.last().map(Vec::as_slice) != Some(uk) {
                    keys.push(uk.to_vec());
                    seqs.push(crate::types::trailer(k) >> 8);
                }
            }
        }
        Ok(())
    });
    let written = filled.and_then(|()| {
        if w.entries() == 0 {
            return Ok(None);
        }
        let (smallest, largest) = (w.smallest.clone(), w.largest.clone());
        let (entries, deletions, max_seq) = (w.entries(), w.deletions, w.max_seq);
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
