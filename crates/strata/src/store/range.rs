//! What a scan selects ([`ScanRange`]), and the bound helpers the engines
//! share.

use std::ops::Bound;

/// The entries a [`KvStore::scan`](super::KvStore::scan) returns: keys
/// between `start` and `end` (per the bounds), at most `limit` of them,
/// ascending, or descending from the end when `reverse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanRange<'a> {
    pub start: Bound<&'a [u8]>,
    pub end: Bound<&'a [u8]>,
    pub limit: usize,
    pub reverse: bool,
}

impl<'a> ScanRange<'a> {
    /// Every key, ascending, without a limit.
    pub fn all() -> Self {
        ScanRange::new(Bound::Unbounded, Bound::Unbounded)
    }

    /// The keys between `start` and `end`, ascending, without a limit.
    pub fn new(start: Bound<&'a [u8]>, end: Bound<&'a [u8]>) -> Self {
        ScanRange {
            start,
            end,
            limit: usize::MAX,
            reverse: false,
        }
    }

    /// At most `limit` entries.
    pub fn limit(self, limit: usize) -> Self {
        ScanRange { limit, ..self }
    }

    /// Descending from the end when `reverse`.
    pub fn reverse(self, reverse: bool) -> Self {
        ScanRange { reverse, ..self }
    }

    /// True when no key lies between the bounds.
    pub fn is_empty(&self) -> bool {
        range_is_empty(self.start, self.end)
    }
}

/// Copies a bound's key.
pub(crate) fn own_bound(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// True when no key lies between `lo` and `hi` (a start above the end, or
/// one key excluded at either end), which `BTreeMap::range` would panic on.
pub(crate) fn range_is_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}
