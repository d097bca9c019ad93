//! An in-memory search structure over a table's index block, built at open,
//! so that a point lookup finds its data block without walking the index.
//!
//! Every separator of the index (the last internal key of each data block)
//! shares the common prefix of the first and the last separator's user
//! keys. After that prefix, the next 8 bytes of a user key (zero-padded,
//! big-endian) form its *fence*, a `u64` whose order never contradicts the
//! keys' order. A lookup binary-searches the dense array of fences (a few
//! cache lines, instead of one index entry per step), and compares full
//! keys only among the separators whose fence equals the target's, which
//! for most key sets is none or one. The data block handles are decoded
//! once, here, too.

use super::block::Block;
use super::format::BlockHandle;
use crate::types::{compare_internal, user_key};
use std::cmp::Ordering;

/// Fences and block handles of one index block.
#[derive(Debug)]
pub struct Fences {
    /// Prefix every separator's user key starts with.
    common: Vec<u8>,
    fences: Vec<u64>,
    handles: Vec<BlockHandle>,
}

/// The 8 bytes of `key` after `skip`, zero-padded, big-endian.
#[inline]
fn fence(key: &[u8], skip: usize) -> u64 {
    let tail = key.get(skip..).unwrap_or_default();
    let mut b = [0u8; 8];
    for (d, s) in b.iter_mut().zip(tail) {
        *d = *s;
    }
    u64::from_be_bytes(b)
}

/// Equal fences stepped over one by one before a binary search.
const EQUAL_STEPS: usize = 8;

/// Fences searched before the rest of the range is prefetched: 512 bytes,
/// eight cache lines.
const PREFETCH_SPAN: usize = 64;

/// The first index whose fence is `>= f` (`fences.len()` if none). A
/// binary search whose last steps each miss the cache on a large table:
/// once the range is down to [`PREFETCH_SPAN`] fences, all of its lines are
/// requested at once, so those steps wait for one miss instead of several
/// in a row; so are the lines of `handles` (the block handles, one per
/// fence) in that range, which the lookup reads next. The first steps
/// touch the same few lines on every lookup and stay cached.
#[inline]
fn lower_bound<T>(fences: &[u64], f: u64, handles: &[T]) -> usize {
    let (mut lo, mut len) = (0usize, fences.len());
    let mut prefetched = false;
    while len > 0 {
        if !prefetched && len <= PREFETCH_SPAN {
            if let Some(range) = fences.get(lo..lo + len) {
                super::prefetch::prefetch_lines(range);
            }
            if let Some(range) = handles.get(lo..lo + len) {
                super::prefetch::prefetch_lines(range);
            }
            prefetched = true;
        }
        let half = len / 2;
        // `lo + half < lo + len <= fences.len()`.
        if fences.get(lo + half).is_some_and(|&x| x < f) {
            lo += half + 1;
            len -= half + 1;
        } else {
            len = half;
        }
    }
    lo
}

impl Fences {
    /// Builds the fences of `index`, each handle checked by `valid`. `None`
    /// when the index does not have one restart point per entry (what the
    /// builder writes) or anything in it does not decode: the caller then
    /// searches the index block itself, which reports the damage.
    pub fn build(index: &Block, valid: impl Fn(BlockHandle) -> bool) -> Option<Fences> {
        let n = index.num_restarts();
        let mut keys: Vec<&[u8]> = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            let (k, v) = index.restart_entry(i)?;
            let h = BlockHandle::decode(v).ok()?;
            if !valid(h) || k.len() < crate::types::TRAILER_LEN {
                return None;
            }
            if let Some(prev) = keys.last() {
                if compare_internal(prev, k) != Ordering::Less {
                    return None;
                }
            }
            keys.push(k);
            handles.push(h);
        }
        if !index.one_entry_per_restart() {
            return None;
        }
        let (first, last) = (user_key(keys.first()?), user_key(keys.last()?));
        let cp = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let fences = keys.iter().map(|k| fence(user_key(k), cp)).collect();
        Some(Fences {
            common: first.get(..cp)?.to_vec(),
            fences,
            handles,
        })
    }

    /// Memory held.
    pub fn size(&self) -> usize {
        self.common.len()
            + self.fences.len() * std::mem::size_of::<u64>()
            + self.handles.len() * std::mem::size_of::<BlockHandle>()
    }

    /// The ordinal and handle of the first data block whose separator is
    /// `>= target` (an internal key), `None` past the last block. `index`
    /// is the block the fences were built from.
    pub fn locate(&self, index: &Block, target: &[u8]) -> Option<(usize, BlockHandle)> {
        let i = self.position(index, target);
        self.handles.get(i).map(|h| (i, *h))
    }

    /// The handle of data block `i`.
    pub fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    /// Number of data blocks.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// The index entry (= restart point) of the first separator `>=
    /// target`; the number of entries when there is none.
    pub fn position(&self, index: &Block, target: &[u8]) -> usize {
        let t = user_key(target);
        let head = t.get(..self.common.len()).unwrap_or(t);
        let (lo, hi) = match head.cmp(&self.common) {
            Ordering::Less => (0, 0),
            Ordering::Greater => (self.fences.len(), self.fences.len()),
            Ordering::Equal => {
                let f = fence(t, self.common.len());
                let lo = lower_bound(&self.fences, f, &self.handles);
                // Equal fences are adjacent and usually few: step over a
                // handful from `lo`, binary-search past a longer run.
                let rest = self.fences.get(lo..).unwrap_or_default();
                let near = rest
                    .iter()
                    .take(EQUAL_STEPS)
                    .take_while(|&&x| x == f)
                    .count();
                let hi = if near < EQUAL_STEPS {
                    lo + near
                } else {
                    lo + rest.partition_point(|&x| x == f)
                };
                (lo, hi)
            }
        };
        // Among equal fences, the first separator `>= target` by full key
        // (the fences were built from these entries, so they decode).
        let (mut a, mut b) = (lo, hi);
        while a < b {
            let mid = a + (b - a) / 2;
            let at_least = index
                .restart_entry(mid)
                .is_none_or(|(k, _)| compare_internal(k, target) != Ordering::Less);
            if at_least {
                b = mid;
            } else {
                a = mid + 1;
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_bound_agrees_with_partition_point() {
        // Sizes around the prefetch span, with runs of equal fences.
        for n in [0usize, 1, 2, 63, 64, 65, 127, 128, 1000, 4097] {
            let fences: Vec<u64> = (0..n as u64).map(|i| (i / 3) * 2).collect();
            let top = fences.last().copied().unwrap_or(0) + 2;
            for f in 0..=top {
                assert_eq!(
                    lower_bound(&fences, f, &fences),
                    fences.partition_point(|&x| x < f),
                    "n {n}, fence {f}"
                );
            }
        }
    }
}
