//! Cuts a sorted stream of kept entries into table files.
//!
//! A new table starts near the target size (exactly there for flushes and
//! the last level; see below for the others), but never between two
//! versions of the same user key, so that deeper levels hold each user key
//! in exactly one table.
//!
//! With [`Outputs::align_to`] (compactions into a level that has a level
//! below it), a table past about half the target is also cut where the keys
//! leave a table of the level below (a *grandparent*); while a grandparent
//! end lies ahead, a table may grow to twice the target to reach it; and any
//! table is cut once it spans more than [`MAX_GRANDPARENT_OVERLAP`] targets
//! of grandparent bytes. Output tables then end where the tables below end,
//! so a later compaction of one of them into the level below rewrites about
//! one grandparent instead of two or three, and leaves no small fragment.
//! (RocksDB 7.8 sizes its outputs between half and twice the target for the
//! same reason.)

use crate::edit::FileDesc;
use crate::error::Result;
use crate::filename::table_path;
use crate::io::FileSystem;
use crate::table::{TableBuilder, TableOptions};
use crate::types::{self, SeqNo, ValueKind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Hands out the file numbers of output tables; `Err` when none is left
/// (a sub-task in a worker process has only its reserved range).
pub type NumberSource<'a> = dyn FnMut() -> Result<u64> + 'a;

/// A [`NumberSource`] another thread may use.
pub type SendNumberSource<'a> = dyn FnMut() -> Result<u64> + Send + 'a;

/// Grandparent bytes, in target sizes, one output table may span.
pub const MAX_GRANDPARENT_OVERLAP: u64 = 10;

/// The table files written by one flush or compaction.
pub struct Outputs<'a> {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    table_opts: TableOptions,
    target_size: u64,
    new_file_number: &'a mut NumberSource<'a>,
    current: Option<(u64, TableBuilder)>,
    last_user_key: Vec<u8>,
    collect_keys: bool,
    current_keys: Vec<Vec<u8>>,
    current_seqs: Vec<SeqNo>,
    pub finished: Vec<FileDesc>,
    /// With `collect_keys`, the distinct user keys of each finished table.
    pub keys: Vec<Vec<Vec<u8>>>,
    /// With `collect_keys`, the sequence number of the newest version of
    /// each of those keys (`keys[i][j]`'s is `seqs[i][j]`), 0 where that
    /// version is a merge operand ([`tracked_seq`]).
    pub seqs: Vec<Vec<SeqNo>>,
    pub bytes_written: u64,
    /// Largest user key and size of each table of the level below the
    /// output level, in key order (empty: no alignment).
    grandparents: Vec<(Vec<u8>, u64)>,
    /// First grandparent not entirely below the last key added.
    grandparent: usize,
    /// Bytes of the grandparents the current table's keys went past.
    grandparent_overlap: u64,
    /// Grandparent ends the current table's keys went past.
    boundaries_crossed: u64,
}

/// What a flush reports to the stale tracker of the newest version of a
/// key, the entry `ikey`: its sequence number, or 0 for a merge operand
/// (not a whole value: the tracker forgets the key, and keeps every older
/// version of it).
pub fn tracked_seq(ikey: &[u8]) -> SeqNo {
    match types::parse_internal_key(ikey) {
        Some(p) if p.kind != ValueKind::Merge => p.seq,
        _ => 0,
    }
}

impl<'a> Outputs<'a> {
    pub fn new(
        dir: &Path,
        fs: Arc<dyn FileSystem>,
        table_opts: TableOptions,
        target_size: u64,
        new_file_number: &'a mut NumberSource<'a>,
    ) -> Self {
        Outputs {
            dir: dir.to_path_buf(),
            fs,
            table_opts,
            target_size,
            new_file_number,
            current: None,
            last_user_key: Vec::new(),
            collect_keys: false,
            current_keys: Vec::new(),
            current_seqs: Vec::new(),
            finished: Vec::new(),
            keys: Vec::new(),
            seqs: Vec::new(),
            bytes_written: 0,
            grandparents: Vec::new(),
            grandparent: 0,
            grandparent_overlap: 0,
            boundaries_crossed: 0,
        }
    }

    /// Aligns output tables to `grandparents`: (largest user key, size) of
    /// each table of the level below the output level, in key order.
    pub fn align_to(mut self, grandparents: Vec<(Vec<u8>, u64)>) -> Self {
        self.grandparents = grandparents;
        self
    }

    /// Also records the user keys of every table (for event listeners).
    pub fn collect_keys(mut self, on: bool) -> Self {
        self.collect_keys = on;
        self
    }

    /// Appends one entry; entries must arrive in internal-key order.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let uk = types::user_key(ikey);
        let new_key = self.current.is_none() || uk != self.last_user_key.as_slice();
        // This key lies past the end of a grandparent the current table reached.
        let mut at_boundary = false;
        if new_key {
            while let Some((largest, size)) = self.grandparents.get(self.grandparent) {
                if largest.as_slice() >= uk {
                    break;
                }
                if self.current.is_some() {
                    at_boundary = true;
                    self.grandparent_overlap += size;
                    self.boundaries_crossed += 1;
                }
                self.grandparent += 1;
            }
        }
        let cut = match &self.current {
            Some((_, b)) if new_key => {
                let size = b.estimated_size();
                size >= self.max_size()
                    || (at_boundary && size >= self.boundary_cut_size())
                    || self.grandparent_overlap
                        > self.target_size.saturating_mul(MAX_GRANDPARENT_OVERLAP)
            }
            _ => false,
        };
        if cut {
            self.finish_current()?;
        }
        if self.current.is_none() {
            let id = (self.new_file_number)()?;
            let file = self.fs.create(&table_path(&self.dir, id))?;
            self.current = Some((id, TableBuilder::new(file, self.table_opts)));
        }
        if let Some((_, b)) = self.current.as_mut() {
            if self.collect_keys && (b.entries() == 0 || uk != self.last_user_key.as_slice()) {
                self.current_keys.push(uk.to_vec());
                self.current_seqs.push(tracked_seq(ikey));
            }
            b.add(ikey, value)?;
        }
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(uk);
        Ok(())
    }

    /// Size at which a table ends wherever it is: the target, or twice it
    /// while a grandparent end lies ahead, so the table can reach it rather
    /// than leave a fragment that straddles the grandparent.
    fn max_size(&self) -> u64 {
        if self.grandparent < self.grandparents.len() {
            self.target_size.saturating_mul(2)
        } else {
            self.target_size
        }
    }

    /// Size from which a table ends at a grandparent end: 55 % of the target
    /// at the first end its keys pass, 5 % more at each further one, at most
    /// 90 %. A table that passes many small grandparents early still grows
    /// towards the target before it is cut.
    fn boundary_cut_size(&self) -> u64 {
        let percent = (50 + 5 * self.boundaries_crossed).min(90);
        self.target_size.saturating_mul(percent) / 100
    }

    fn finish_current(&mut self) -> Result<()> {
        self.grandparent_overlap = 0;
        self.boundaries_crossed = 0;
        if let Some((id, b)) = self.current.take() {
            let props = match b.finish() {
                Ok(p) => p,
                Err(e) => {
                    // Not in `finished`: `abandon` would not see it.
                    let _ = self.fs.remove_file(&table_path(&self.dir, id));
                    return Err(e);
                }
            };
            self.bytes_written += props.file_size;
            self.keys.push(std::mem::take(&mut self.current_keys));
            self.seqs.push(std::mem::take(&mut self.current_seqs));
            self.finished.push(FileDesc {
                id,
                size: props.file_size,
                smallest: props.smallest,
                largest: props.largest,
                entries: props.entries,
                deletions: props.deletions,
                max_seq: props.max_seq,
                min_seq: props.min_seq,
                swept_seq: 0,
            });
        }
        Ok(())
    }

    /// The file number of the table being written, if one is open.
    pub fn current_id(&self) -> Option<u64> {
        self.current.as_ref().map(|(id, _)| *id)
    }

    /// Finishes the last table and returns the descriptors of all outputs.
    /// The caller syncs the directory before the manifest names them.
    pub fn finish(&mut self) -> Result<Vec<FileDesc>> {
        self.finish_current()?;
        self.fs.sync_dir(&self.dir)?;
        Ok(self.finished.clone())
    }

    /// Removes every file written so far (after a failure).
    pub fn abandon(mut self) {
        if let Some((id, _)) = self.current.take() {
            let _ = self.fs.remove_file(&table_path(&self.dir, id));
        }
        for f in &self.finished {
            let _ = self.fs.remove_file(&table_path(&self.dir, f.id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::mem::MemFs;
    use crate::types::{internal_key, ValueKind};

    /// A table whose `finish` fails is removed, not left behind.
    #[test]
    fn failed_finish_leaves_no_file() {
        use crate::io::fault::{FaultError, FaultFs, Op, Rule, Trigger};
        let mem = MemFs::new();
        let faulty = FaultFs::new(Arc::new(mem.clone()), 1);
        faulty
            .handle()
            .add(Rule::new(Op::Sync, Trigger::From(1), FaultError::NoSpace).on_paths(".table"));
        let fs: Arc<dyn FileSystem> = Arc::new(faulty);
        fs.create_dir_all(Path::new("/db")).expect("dir");
        let mut n = 0;
        let mut next = || {
            n += 1;
            Ok(n)
        };
        let opts = TableOptions::default();
        let mut out = Outputs::new(Path::new("/db"), fs.clone(), opts, 1 << 20, &mut next);
        out.add(&internal_key(b"k", 1, ValueKind::Value as u8), b"v")
            .expect("add");
        assert!(out.finish().is_err(), "the sync fault fired");
        out.abandon();
        let left: Vec<String> = mem
            .list_dir(Path::new("/db"))
            .expect("list")
            .into_iter()
            .filter(|f| f.ends_with(".table"))
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    /// Writes keys k000..k099 (100 B values) and returns each output's
    /// last user key.
    fn cut(grandparents: Vec<(Vec<u8>, u64)>, target: u64) -> Vec<String> {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let mut n = 0;
        let mut next = || {
            n += 1;
            Ok(n)
        };
        let opts = TableOptions {
            block_size: 256,
            ..TableOptions::default()
        };
        let mut out = Outputs::new(Path::new("/db"), fs.clone(), opts, target, &mut next)
            .align_to(grandparents);
        fs.create_dir_all(Path::new("/db")).expect("dir");
        for i in 0..100 {
            let k = format!("k{i:03}");
            out.add(
                &internal_key(k.as_bytes(), 1, ValueKind::Value as u8),
                &[0u8; 100],
            )
            .expect("add");
        }
        out.finish()
            .expect("finish")
            .iter()
            .map(|d| String::from_utf8_lossy(types::user_key(&d.largest)).into_owned())
            .collect()
    }

    #[test]
    fn outputs_past_half_the_target_end_where_a_grandparent_ends() {
        // 100 entries of ~110 B; a target of ~4 KiB holds ~35 of them.
        let target = 4096;
        let plain = cut(Vec::new(), target);
        assert_eq!(plain.len(), 3, "{plain:?}");
        // Grandparents end at k009, k029 and k059: k009 comes before half the
        // target, so the first cut is at k029, then k059; past the last one
        // the target alone cuts (35 entries).
        let gp = |k: &str| (k.as_bytes().to_vec(), target);
        let ends = cut(vec![gp("k009"), gp("k029"), gp("k059")], target);
        assert_eq!(ends, ["k029", "k059", "k094", "k099"]);
    }

    #[test]
    fn an_output_grows_past_the_target_to_reach_a_grandparent_end() {
        let target = 4096;
        let gp = |k: &str| (k.as_bytes().to_vec(), target);
        // The target is reached near k036, but a grandparent ends at k059
        // (about 1.6 targets in): the table runs on to it. Past the last
        // grandparent the target alone cuts again.
        let ends = cut(vec![gp("k004"), gp("k059")], target);
        assert_eq!(ends, ["k059", "k094", "k099"]);
        // A grandparent end beyond twice the target is not waited for.
        let ends = cut(vec![gp("k004"), gp("k099")], target);
        assert_eq!(ends.len(), 2, "{ends:?}");
        let first: u32 = ends[0][1..].parse().expect("key number");
        assert!((60..80).contains(&first), "{ends:?}");
    }

    #[test]
    fn the_share_of_the_target_that_allows_a_cut_rises_with_each_end_passed() {
        let target = 4096;
        // A grandparent ends every 5 keys. A flat half-target rule would cut
        // at the first end past ~18 entries (k019); passing one end after
        // another raises the bar, so the first table runs further.
        let gps: Vec<(Vec<u8>, u64)> = (0..20)
            .map(|i| (format!("k{:03}", i * 5 + 4).into_bytes(), target))
            .collect();
        let ends = cut(gps, target);
        let first: u32 = ends[0][1..].parse().expect("key number");
        assert!(first > 19 && first % 5 == 4, "{ends:?}");
    }

    #[test]
    fn an_output_spanning_too_many_grandparent_bytes_is_cut() {
        // Each grandparent covers one key and is as large as the target:
        // after more than MAX_GRANDPARENT_OVERLAP of them the table ends,
        // however small it is.
        let target = 1 << 20;
        let gps: Vec<(Vec<u8>, u64)> = (0..100)
            .map(|i| (format!("k{i:03}").into_bytes(), target))
            .collect();
        let ends = cut(gps, target);
        assert_eq!(ends.first().map(String::as_str), Some("k010"));
        assert_eq!(ends.len(), 10);
    }
}
