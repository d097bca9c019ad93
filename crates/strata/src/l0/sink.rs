//! The flush sink: where and how a memtable is written into level 0 as
//! tables (`Tables`, and the matrix container's overflow), and what a
//! flush wrote.

use super::Levels;
use crate::edit::FileDesc;
use crate::error::Result;
use crate::memtable::MemTable;
use crate::rangedel::Cover;
use crate::runs::filter::Dropper;
use crate::runs::fold::Fold;
use crate::runs::output::Outputs;
use crate::types::SeqNo;
use std::sync::Arc;

/// What a flush wrote: the L0 tables or matrix rows, and with key
/// collection on, each piece's distinct user keys and their newest
/// sequence numbers (tables first, then rows).
#[derive(Default)]
pub(crate) struct Written {
    pub descs: Vec<FileDesc>,
    pub rows: Vec<FileDesc>,
    pub keys: Vec<TableKeys>,
    pub seqs: Vec<Vec<SeqNo>>,
    /// What the rules did.
    pub tally: crate::runs::rules::Tally,
}

/// The user keys of one table.
pub(crate) type TableKeys = Vec<Vec<u8>>;

/// Where and how a memtable is written.
pub(crate) struct TableSink<'a> {
    pub dir: &'a std::path::Path,
    pub fs: Arc<dyn crate::io::FileSystem>,
    pub table_opts: crate::table::TableOptions,
    pub collect_keys: bool,
    /// Tombstones may be dropped when no table of `version` holds their key.
    /// Off during recovery, where earlier chunks of the replay are not in
    /// `version` yet.
    pub drop_tombstones: bool,
    /// What the flush does to entries besides dropping them ([`Fold`]).
    pub rules: crate::runs::rules::Rules,
}

/// True if no table or row of `version`, and none of `unlisted` (pieces the
/// caller wrote that `version` does not hold yet), may hold `uk`: a flushed
/// tombstone of it hides nothing.
pub(crate) fn nothing_below(version: &dyn Levels, unlisted: &[FileDesc], uk: &[u8]) -> bool {
    !version.covers(uk)
        && unlisted.iter().all(|d| {
            crate::types::user_key(&d.largest) < uk || crate::types::user_key(&d.smallest) > uk
        })
}

/// Writes `mem` into one table (no size cut: L0 tables are whole memtables).
/// `unlisted` are tables the caller wrote that `version` does not hold yet
/// (recovery writes several before installing them).
pub(crate) fn write_memtable_to(
    sink: &TableSink<'_>,
    mem: &MemTable,
    version: &dyn Levels,
    unlisted: &[FileDesc],
    snapshots: Vec<u64>,
    next_number: &mut dyn FnMut() -> Result<u64>,
) -> Result<Written> {
    // Tombstones stay unless no table holds the key at all.
    let is_bottom_for = |uk: &[u8]| sink.drop_tombstones && nothing_below(version, unlisted, uk);
    let cover = Cover::of(mem.range_fragments());
    let mut fold = Fold::new(&sink.rules, snapshots.clone(), is_bottom_for, cover.clone());
    let mut dropper = Dropper::new(snapshots, is_bottom_for, cover);
    let mut out = Outputs::new(
        sink.dir,
        sink.fs.clone(),
        sink.table_opts,
        u64::MAX,
        next_number,
    )
    .collect_keys(sink.collect_keys);
    let mut keep = |k: &[u8], v: &[u8]| -> Result<()> {
        if dropper.keep(k)? {
            out.add(k, v)?;
        }
        Ok(())
    };
    let result = mem
        .for_each(|k, v| fold.push(k, v, &mut keep))
        .and_then(|()| fold.finish(&mut keep))
        .and_then(|()| out.finish());
    match result {
        Ok(mut descs) => Ok(Written {
            descs: {
                for d in &mut descs {
                    d.swept_seq = dropper.swept();
                }
                descs
            },
            rows: Vec::new(),
            keys: std::mem::take(&mut out.keys),
            seqs: std::mem::take(&mut out.seqs),
            tally: fold.tally,
        }),
        Err(e) => {
            out.abandon();
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FileSystem, MemFs};
    use crate::table::{BlockCache, TableOptions};
    use crate::types::{internal_key, ValueKind};
    use crate::version::{probes, FileMeta, TableCache, Version};
    use crate::Options;
    use std::path::Path;

    /// The check "may this tombstone go?" examines O(log tables) per sorted
    /// level, not every table of every level: 500 tombstones over 4,000 L1
    /// tables make at most 500 × 2 × 13 table comparisons.
    #[test]
    fn the_tombstone_check_is_a_binary_search_per_level() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).expect("dir");
        let opts = Options::default().fs(fs.clone());
        let cache = Arc::new(TableCache::new(dir, &opts, Arc::new(BlockCache::new(0))));
        let mut v = Version::new(7);
        const TABLES: u64 = 4000;
        for i in 0..TABLES {
            let k = |c: char| format!("k{i:06}{c}").into_bytes();
            let d = FileDesc {
                id: i + 10,
                size: 1000,
                smallest: internal_key(&k('a'), 5, ValueKind::Value as u8),
                largest: internal_key(&k('m'), 5, ValueKind::Value as u8),
                entries: 10,
                ..FileDesc::default()
            };
            v.levels[1].push(Arc::new(FileMeta::new(d, cache.clone())));
        }
        v.seal();
        let mem = MemTable::new(1, 8 << 20, 1);
        // Half the tombstones fall inside a table's range (kept), half
        // between two tables (dropped).
        for i in 0..500u64 {
            let c = if i % 2 == 0 { 'c' } else { 'z' };
            let key = format!("k{:06}{c}", i * 7);
            mem.add(100 + i, ValueKind::Delete, key.as_bytes(), b"");
        }
        let sink = TableSink {
            dir,
            fs: fs.clone(),
            table_opts: TableOptions::from(&opts),
            collect_keys: true,
            drop_tombstones: true,
            rules: Default::default(),
        };
        let mut n = 1000;
        let mut next = || {
            n += 1;
            Ok(n)
        };
        probes::take();
        let written =
            write_memtable_to(&sink, &mem, &v, &[], Vec::new(), &mut next).expect("flush");
        let examined = probes::take();
        assert_eq!(
            written.keys.iter().map(Vec::len).sum::<usize>(),
            250,
            "the covered tombstones stay, the others go"
        );
        assert!(
            examined <= 500 * 2 * 13,
            "{examined} table comparisons for 500 tombstones over {TABLES} tables"
        );
    }
}
