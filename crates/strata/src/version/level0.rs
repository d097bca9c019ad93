//! Level 0 tables as the read path sees them.
//!
//! Level 0 receives every flush, so its pieces overlap and are searched
//! newest first. This is the read interface of L0 *tables*; level 0 as a
//! whole is a container chosen at open (`crate::l0`), and its rows are
//! read through `Version::rows`.

use super::LevelIter;
use super::{FileMeta, ReadCharge};
use crate::error::Result;
use crate::iter::{EmptyIter, InternalIterator};
use crate::table::TableIter;
use crate::types::{SeqNo, ValueKind};
use std::sync::Arc;

/// Read access to level 0 within one version.
pub trait Level0: Send + Sync {
    /// The newest entry of `user_key` visible at the sequence in `seek`
    /// (`types::seek_key(user_key, seq)`).
    /// Tables searched in vain before another are charged to `charge`.
    fn lookup<'a>(
        &'a self,
        user_key: &[u8],
        seek: &[u8],
        charge: &mut ReadCharge<'a>,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>>;
    /// Adds iterators covering all of level 0 to `out`. A piece that
    /// cannot be read adds an iterator that is invalid with that error as
    /// its `status()`, never nothing.
    fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>);
}

/// Level 0 as overlapping tables, newest first.
impl Level0 for Vec<Arc<FileMeta>> {
    fn lookup<'a>(
        &'a self,
        user_key: &[u8],
        seek: &[u8],
        charge: &mut ReadCharge<'a>,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        for f in self {
            if f.overlaps(Some(user_key), Some(user_key)) {
                if let Some(hit) = charge.search(f, seek, user_key)? {
                    return Ok(Some(hit));
                }
            }
        }
        Ok(None)
    }

    /// Tables whose user-key ranges are disjoint never hold the same key,
    /// so each chain of such tables (`disjoint_chains`) is read as one
    /// level, one source of the merge instead of one per table (the
    /// tables of an ordered load stay in L0 side by side until the
    /// compaction trigger). A chain of one table is a table iterator.
    fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>) {
        for chain in disjoint_chains(self, |f| (f.smallest_user_key(), f.largest_user_key())) {
            if let [i] = chain[..] {
                let f = &self[i];
                // A table that cannot be opened is an iterator over its error.
                match f.table() {
                    Ok(t) => out.push(Box::new(TableIter::new(t))),
                    Err(e) => out.push(Box::new(EmptyIter(Some(e)))),
                }
            } else {
                let files = chain.iter().map(|&i| Arc::clone(&self[i])).collect();
                out.push(Box::new(LevelIter::new(files)));
            }
        }
    }
}

/// Splits `items` (each with an inclusive user-key range) into the fewest
/// chains whose members' ranges are pairwise disjoint, each chain ordered
/// by key (indices into `items`). Greedy by smallest key: an item joins the
/// first chain whose last range ends strictly before it begins.
fn disjoint_chains<T>(items: &[T], range: impl Fn(&T) -> (&[u8], &[u8])) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| range(&items[a]).0.cmp(range(&items[b]).0));
    let mut chains: Vec<Vec<usize>> = Vec::new();
    for i in order {
        let start = range(&items[i]).0;
        let open = chains
            .iter_mut()
            .find(|c| c.last().is_some_and(|&l| range(&items[l]).1 < start));
        match open {
            Some(c) => c.push(i),
            None => chains.push(vec![i]),
        }
    }
    chains
}

#[cfg(test)]
mod tests {
    use super::disjoint_chains;

    fn chains(ranges: &[(&str, &str)]) -> Vec<Vec<usize>> {
        disjoint_chains(ranges, |r| (r.0.as_bytes(), r.1.as_bytes()))
    }

    #[test]
    fn disjoint_tables_share_a_chain_and_overlapping_ones_do_not() {
        // An ordered load: three tables side by side, listed newest first.
        assert_eq!(
            chains(&[("g", "i"), ("d", "f"), ("a", "c")]),
            vec![vec![2, 1, 0]]
        );
        // Random loads overlap: one chain each.
        assert_eq!(chains(&[("a", "z"), ("b", "y")]), vec![vec![0], vec![1]]);
        // A shared boundary key is an overlap (two versions of "c").
        assert_eq!(chains(&[("c", "e"), ("a", "c")]), vec![vec![1], vec![0]]);
        // Mixed: the wide table alone, the narrow ones together.
        assert_eq!(
            chains(&[("a", "b"), ("a", "z"), ("m", "n"), ("x", "y")]),
            vec![vec![0, 2, 3], vec![1]]
        );
        assert!(chains(&[]).is_empty());
        // Every chain is ordered and disjoint, and every item is in one.
        let ranges = [
            ("k", "m"),
            ("a", "d"),
            ("e", "j"),
            ("c", "f"),
            ("n", "p"),
            ("g", "h"),
        ];
        let got = chains(&ranges);
        let mut seen: Vec<usize> = got.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..ranges.len()).collect::<Vec<_>>());
        for c in &got {
            for w in c.windows(2) {
                assert!(ranges[w[0]].1 < ranges[w[1]].0, "{got:?}");
            }
        }
    }
}
