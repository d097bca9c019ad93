//! Range tombstones: `delete_range(start, end)` written at a sequence
//! number, and the fragmented view that answers "which tombstone hides
//! this key" with one binary search.
//!
//! A tombstone `[start, end) @ seq` hides every version of every key in
//! the range whose sequence is below `seq`, from every reader whose
//! snapshot is at or above `seq`. Tombstones live in the memtable that
//! took them until it is flushed, then in the version (the manifest
//! records them), until no table or level-0 row may still hold a version
//! they hide (`Version::retire_range_dels`). Reads apply them to the
//! newest visible version of a key: the key is deleted when a visible
//! tombstone covering it is newer than that version.

use crate::types::SeqNo;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// `[start, end) @ seq`: every version below `seq` of a key in the range
/// is deleted. `start < end`; an empty range is never stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RangeTombstone {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub seq: SeqNo,
}

impl RangeTombstone {
    /// True if the tombstone's range and the user-key range `[lo, hi]`
    /// share a key.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.start.as_slice() <= hi && lo < self.end.as_slice()
    }
}

/// Tombstones cut into disjoint fragments sorted by start key; each
/// fragment lists the sequence numbers of the tombstones covering all of
/// it, newest first. Immutable once built.
#[derive(Debug, Default)]
pub struct Fragments {
    starts: Vec<Vec<u8>>,
    ends: Vec<Vec<u8>>,
    seqs: Vec<Vec<SeqNo>>,
}

impl Fragments {
    /// The fragments of `tombstones` (any order; empty ranges ignored).
    /// O(n log n + output).
    pub fn build(tombstones: &[RangeTombstone]) -> Fragments {
        let mut sorted: Vec<&RangeTombstone> =
            tombstones.iter().filter(|t| t.start < t.end).collect();
        sorted.sort_by(|a, b| a.start.cmp(&b.start));
        let mut bounds: Vec<&[u8]> = sorted
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut out = Fragments::default();
        // Tombstones whose start has been passed: (end, seq).
        let mut active: Vec<(&[u8], SeqNo)> = Vec::new();
        let mut next = 0;
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            active.retain(|(end, _)| *end > lo);
            while let Some(t) = sorted.get(next).filter(|t| t.start.as_slice() <= lo) {
                active.push((t.end.as_slice(), t.seq));
                next += 1;
            }
            if active.is_empty() {
                continue;
            }
            let mut seqs: Vec<SeqNo> = active.iter().map(|(_, s)| *s).collect();
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            // Merge with the previous fragment when it ends here with the
            // same tombstones.
            if let (Some(end), Some(last)) = (out.ends.last_mut(), out.seqs.last()) {
                if end.as_slice() == lo && *last == seqs {
                    *end = hi.to_vec();
                    continue;
                }
            }
            out.starts.push(lo.to_vec());
            out.ends.push(hi.to_vec());
            out.seqs.push(seqs);
        }
        out
    }

    /// True when no key is covered.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Number of fragments.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// The newest sequence of any of its tombstones (0 if none).
    pub fn newest(&self) -> SeqNo {
        self.seqs
            .iter()
            .filter_map(|s| s.first())
            .copied()
            .max()
            .unwrap_or(0)
    }

    /// The sequences covering `key`, newest first (empty if none).
    fn at(&self, key: &[u8]) -> &[SeqNo] {
        self.in_region(self.region(key), key)
    }

    /// The region of `key`: the number of fragments starting at or
    /// before it (a binary search).
    fn region(&self, key: &[u8]) -> usize {
        self.starts.partition_point(|s| s.as_slice() <= key)
    }

    /// True if `key` lies in region `i` (as [`region`](Self::region)
    /// would say), by at most two comparisons.
    fn holds(&self, i: usize, key: &[u8]) -> bool {
        i <= self.starts.len()
            && (i == 0 || self.starts.get(i - 1).is_some_and(|s| s.as_slice() <= key))
            && self.starts.get(i).is_none_or(|s| key < s.as_slice())
    }

    /// The region of `key`, starting from `hint` (the last one found):
    /// checked in place, then its neighbours (a scan moves one at a time),
    /// else searched.
    fn region_from(&self, hint: usize, key: &[u8]) -> usize {
        if self.holds(hint, key) {
            hint
        } else if self.holds(hint + 1, key) {
            hint + 1
        } else if hint > 0 && self.holds(hint - 1, key) {
            hint - 1
        } else {
            self.region(key)
        }
    }

    /// The sequences covering `key` in region `i`, newest first.
    fn in_region(&self, i: usize, key: &[u8]) -> &[SeqNo] {
        match i.checked_sub(1) {
            Some(j) if self.ends.get(j).is_some_and(|e| key < e.as_slice()) => {
                self.seqs.get(j).map_or(&[], Vec::as_slice)
            }
            _ => &[],
        }
    }

    /// The newest tombstone covering `key` that a reader at `read_seq`
    /// sees.
    pub fn newest_visible(&self, key: &[u8], read_seq: SeqNo) -> Option<SeqNo> {
        self.at(key).iter().copied().find(|s| *s <= read_seq)
    }

    /// The oldest tombstone covering `key` that is newer than `seq`.
    pub fn oldest_above(&self, key: &[u8], seq: SeqNo) -> Option<SeqNo> {
        self.at(key).iter().copied().rev().find(|s| *s > seq)
    }

    /// The first fragment end after `key` among fragments covering `key`
    /// (where the covering stops), if `key` is covered.
    pub fn covered_until(&self, key: &[u8]) -> Option<&[u8]> {
        let i = self.starts.partition_point(|s| s.as_slice() <= key);
        let j = i.checked_sub(1)?;
        self.ends
            .get(j)
            .filter(|e| key < e.as_slice())
            .map(Vec::as_slice)
    }
}

/// The tombstones one reader or one compaction applies: the fragments of
/// each source (memtables, the version), searched in turn.
///
/// Each part remembers the region its last lookup found: a scan, in either
/// direction, or a compaction's ordered input then costs two or three key
/// comparisons per entry instead of a binary search.
/// Sub-tasks share a cover across threads: a hint is a relaxed atomic,
/// only ever a place to start (every use checks it).
#[derive(Debug, Default)]
pub struct Cover {
    parts: Vec<Arc<Fragments>>,
    hints: Vec<AtomicUsize>,
}

impl Clone for Cover {
    fn clone(&self) -> Cover {
        Cover {
            parts: self.parts.clone(),
            hints: self.parts.iter().map(|_| AtomicUsize::new(0)).collect(),
        }
    }
}

impl Cover {
    /// Nothing covered.
    pub fn none() -> Cover {
        Cover::default()
    }

    /// The tombstones of one source (none for `None`).
    pub fn of(fragments: Option<Arc<Fragments>>) -> Cover {
        let mut c = Cover::none();
        if let Some(f) = fragments {
            c.push(f);
        }
        c
    }

    /// Adds a source's fragments (skipped when empty).
    pub fn push(&mut self, f: Arc<Fragments>) {
        if !f.is_empty() {
            self.parts.push(f);
            self.hints.push(AtomicUsize::new(0));
        }
    }

    /// Each part's sequences covering `key`, newest first, found from its
    /// hint (which moves to the key's region).
    fn each_at<'s>(&'s self, key: &'s [u8]) -> impl Iterator<Item = &'s [SeqNo]> + 's {
        self.parts.iter().zip(&self.hints).map(move |(f, hint)| {
            let i = f.region_from(hint.load(Relaxed), key);
            hint.store(i, Relaxed);
            f.in_region(i, key)
        })
    }

    /// True when no tombstone applies: readers skip every check.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The newest sequence of any of its tombstones (0 if none).
    pub fn newest(&self) -> SeqNo {
        self.parts.iter().map(|f| f.newest()).max().unwrap_or(0)
    }

    /// The newest tombstone covering `key` visible at `read_seq`.
    pub fn newest_visible(&self, key: &[u8], read_seq: SeqNo) -> Option<SeqNo> {
        self.each_at(key)
            .filter_map(|seqs| seqs.iter().copied().find(|s| *s <= read_seq))
            .max()
    }

    /// True if a reader at `read_seq` sees a tombstone hiding the version
    /// of `key` written at `seq`.
    #[inline]
    pub fn hides(&self, key: &[u8], seq: SeqNo, read_seq: SeqNo) -> bool {
        !self.is_empty() && self.newest_visible(key, read_seq).is_some_and(|t| t > seq)
    }

    /// The oldest tombstone covering `key` newer than `seq` (compaction:
    /// the version is dropped when no snapshot lies between the two).
    pub fn oldest_above(&self, key: &[u8], seq: SeqNo) -> Option<SeqNo> {
        self.each_at(key)
            .filter_map(|seqs| seqs.iter().copied().rev().find(|s| *s > seq))
            .min()
    }
}

/// The range tombstones a version holds, with their fragments.
#[derive(Debug, Default)]
pub struct RangeDels {
    list: Vec<RangeTombstone>,
    fragments: Arc<Fragments>,
}

impl RangeDels {
    /// The set of `list` (sorted by sequence).
    pub fn new(mut list: Vec<RangeTombstone>) -> RangeDels {
        list.sort_by_key(|t| t.seq);
        list.dedup_by_key(|t| t.seq);
        let fragments = Arc::new(Fragments::build(&list));
        RangeDels { list, fragments }
    }

    /// The tombstones, oldest first.
    pub fn list(&self) -> &[RangeTombstone] {
        &self.list
    }

    /// Their fragments.
    pub fn fragments(&self) -> &Arc<Fragments> {
        &self.fragments
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Bytes of keys held (for stats).
    pub fn key_bytes(&self) -> usize {
        self.list
            .iter()
            .map(|t| t.start.len() + t.end.len() + 8)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, e: &str, seq: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: s.as_bytes().to_vec(),
            end: e.as_bytes().to_vec(),
            seq,
        }
    }

    /// The brute-force answer: the newest covering tombstone visible at
    /// `read`.
    fn brute(ts: &[RangeTombstone], key: &[u8], read: SeqNo) -> Option<SeqNo> {
        ts.iter()
            .filter(|t| t.start.as_slice() <= key && key < t.end.as_slice() && t.seq <= read)
            .map(|t| t.seq)
            .max()
    }

    #[test]
    fn overlapping_tombstones_fragment() {
        let ts = vec![t("b", "f", 5), t("d", "h", 9), t("a", "c", 2)];
        let f = Fragments::build(&ts);
        assert_eq!(f.newest_visible(b"a", 10), Some(2));
        assert_eq!(f.newest_visible(b"b", 10), Some(5));
        assert_eq!(f.newest_visible(b"e", 10), Some(9));
        assert_eq!(f.newest_visible(b"e", 8), Some(5));
        assert_eq!(f.newest_visible(b"e", 4), None);
        assert_eq!(f.newest_visible(b"h", 10), None);
        assert_eq!(f.oldest_above(b"e", 4), Some(5));
        assert_eq!(f.oldest_above(b"e", 5), Some(9));
        assert_eq!(f.oldest_above(b"e", 9), None);
        assert_eq!(f.covered_until(b"b"), Some(&b"c"[..]));
        assert_eq!(f.covered_until(b"z"), None);
    }

    #[test]
    fn empty_and_inverted_ranges_cover_nothing() {
        let f = Fragments::build(&[t("b", "b", 3), t("d", "c", 4)]);
        assert!(f.is_empty());
        assert_eq!(f.newest_visible(b"b", 9), None);
        assert!(!Cover::none().hides(b"x", 1, 9));
    }

    #[test]
    fn fragments_agree_with_brute_force() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..200 {
            let n = rng.gen_range(0..12);
            let ts: Vec<RangeTombstone> = (0..n)
                .map(|i| {
                    let a: u8 = rng.gen_range(b'a'..=b'y');
                    let b: u8 = rng.gen_range(a..=b'z');
                    RangeTombstone {
                        start: vec![a],
                        end: vec![b],
                        seq: i * 3 + 1,
                    }
                })
                .collect();
            let f = Fragments::build(&ts);
            let mut cover = Cover::none();
            cover.push(Arc::new(f));
            // Forward, backward and jumping: the hints must never change
            // an answer.
            let order: Vec<u8> = (b'a'..=b'z')
                .chain((b'a'..=b'z').rev())
                .chain((0..30).map(|_| rng.gen_range(b'a'..=b'z')))
                .collect();
            for k in order {
                for read in [0, 5, 17, 100] {
                    assert_eq!(cover.newest_visible(&[k], read), brute(&ts, &[k], read));
                }
            }
        }
    }
}
