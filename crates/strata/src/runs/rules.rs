//! What a flush or compaction does to entries besides dropping them:
//! [`Rules`] (the merge operator, the user's compaction filter, the
//! expiry horizon) and [`Sift`], the filter's pass over the entries a
//! [`Fold`](super::fold::Fold) passes on.

use crate::compaction_filter::{CompactionFilter, Decision};
use crate::error::{corrupt, Result};
use crate::merge::MergeOperator;
use crate::types::{self, SeqNo, ValueKind};
use std::sync::Arc;

/// The rules of one flush or compaction. The default changes nothing.
#[derive(Clone, Default)]
pub struct Rules {
    /// Operands fold by this ([`Fold`](super::fold::Fold)); `None` keeps
    /// them as they are.
    pub merge: Option<Arc<dyn MergeOperator>>,
    /// The user's filter ([`crate::compaction_filter`]); `None` keeps
    /// every entry.
    pub filter: Option<Arc<dyn CompactionFilter>>,
    /// Versions at or below this sequence have expired (`ttl_secs`): they
    /// are written as deletions at their sequence. 0: none.
    pub expired_to: SeqNo,
}

impl Rules {
    /// True if the rules change nothing: entries pass through untouched.
    pub fn is_plain(&self) -> bool {
        self.merge.is_none() && self.filter.is_none() && self.expired_to == 0
    }
}

/// Counts of what the rules did to one flush or compaction.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Merge operands folded away (inputs less the entries made from them).
    pub folded: u64,
    /// Values the filter removed (written as deletions).
    pub filter_removed: u64,
    /// Values the filter rewrote.
    pub filter_changed: u64,
    /// Versions written as deletions because they expired.
    pub expired: u64,
}

impl Tally {
    /// Adds `o` to this tally.
    pub fn add(&mut self, o: &Tally) {
        self.folded += o.folded;
        self.filter_removed += o.filter_removed;
        self.filter_changed += o.filter_changed;
        self.expired += o.expired;
    }
}

/// Receives the entries a stage passes on (internal key, value).
pub type Sink<'s> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 's;

/// The filter's pass: offers the filter each value that is the first
/// entry of its key in the input and newer than every snapshot, and
/// passes on what it decides; everything else passes unchanged.
pub struct Sift {
    filter: Option<Arc<dyn CompactionFilter>>,
    /// The newest live snapshot: entries at or below it are kept as they are.
    newest_snapshot: Option<SeqNo>,
    last_key: Vec<u8>,
    has_last: bool,
    ikey: Vec<u8>,
}

impl Sift {
    /// The pass of `filter` (`None`: a pass-through) under `snapshots`.
    pub fn new(filter: Option<Arc<dyn CompactionFilter>>, snapshots: &[SeqNo]) -> Self {
        Sift {
            filter,
            newest_snapshot: snapshots.iter().copied().max(),
            last_key: Vec::new(),
            has_last: false,
            ikey: Vec::new(),
        }
    }

    /// Passes `(ikey, value)` on to `sink`, as the filter decides.
    #[inline]
    pub fn pass(
        &mut self,
        ikey: &[u8],
        value: &[u8],
        tally: &mut Tally,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        let Some(filter) = &self.filter else {
            return sink(ikey, value);
        };
        let p = types::parse_internal_key(ikey)
            .ok_or_else(|| corrupt(0, "malformed internal key in compaction input"))?;
        let first = !self.has_last || self.last_key.as_slice() != p.user_key;
        if first {
            self.last_key.clear();
            self.last_key.extend_from_slice(p.user_key);
            self.has_last = true;
        }
        if !first || p.kind != ValueKind::Value || self.newest_snapshot.is_some_and(|s| p.seq <= s)
        {
            return sink(ikey, value);
        }
        match filter.filter(p.user_key, value) {
            Decision::Keep => sink(ikey, value),
            Decision::Change(v) => {
                tally.filter_changed += 1;
                sink(ikey, &v)
            }
            Decision::Remove => {
                tally.filter_removed += 1;
                self.ikey.clear();
                types::append_internal_key(
                    &mut self.ikey,
                    p.user_key,
                    p.seq,
                    ValueKind::Delete as u8,
                );
                let ikey = std::mem::take(&mut self.ikey);
                let r = sink(&ikey, &[]);
                self.ikey = ikey;
                r
            }
        }
    }
}

/// `ikey` as a deletion at its sequence, written into `out`, if it is a
/// value or operand at or below `expired_to`; false otherwise.
#[inline]
pub fn expire_into(ikey: &[u8], expired_to: SeqNo, out: &mut Vec<u8>) -> Result<bool> {
    let p = types::parse_internal_key(ikey)
        .ok_or_else(|| corrupt(0, "malformed internal key in compaction input"))?;
    if p.seq > expired_to || p.kind == ValueKind::Delete {
        return Ok(false);
    }
    out.clear();
    types::append_internal_key(out, p.user_key, p.seq, ValueKind::Delete as u8);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction_filter::FnFilter;

    type Out = (Vec<u8>, SeqNo, ValueKind, Vec<u8>);

    /// What a `Sift` removing `x…` and rewriting `y…` to `new` passes on
    /// for `entries` under `snapshots`, with its tally.
    fn sift(
        snapshots: &[SeqNo],
        entries: &[(&[u8], SeqNo, ValueKind, &[u8])],
    ) -> (Vec<Out>, Tally) {
        let f = FnFilter::new("t", |_: &[u8], v: &[u8]| match v.first() {
            Some(b'x') => Decision::Remove,
            Some(b'y') => Decision::Change(b"new".to_vec()),
            _ => Decision::Keep,
        });
        let mut s = Sift::new(Some(Arc::new(f)), snapshots);
        let mut tally = Tally::default();
        let mut out = Vec::new();
        for (k, seq, kind, v) in entries {
            let ikey = types::internal_key(k, *seq, *kind as u8);
            s.pass(&ikey, v, &mut tally, &mut |k: &[u8], v: &[u8]| {
                let p = types::parse_internal_key(k).expect("key");
                out.push((p.user_key.to_vec(), p.seq, p.kind, v.to_vec()));
                Ok(())
            })
            .expect("pass");
        }
        (out, tally)
    }

    fn o(k: &[u8], seq: SeqNo, kind: ValueKind, v: &[u8]) -> Out {
        (k.to_vec(), seq, kind, v.to_vec())
    }

    #[test]
    fn only_the_newest_value_above_every_snapshot_is_offered() {
        use ValueKind::{Delete, Merge, Value};
        let (got, tally) = sift(
            &[5],
            &[
                (b"a", 9, Value, b"x1"), // newest, above 5: removed
                (b"a", 7, Value, b"x2"), // not the newest: kept
                (b"b", 8, Value, b"y1"), // rewritten
                (b"c", 4, Value, b"x3"), // a snapshot sees it: kept
                (b"d", 9, Delete, b""),  // not a value
                (b"d", 8, Value, b"x4"), // below the deletion: kept
                (b"e", 9, Merge, b"x5"), // an operand: kept
            ],
        );
        assert_eq!(
            got,
            vec![
                o(b"a", 9, Delete, b""),
                o(b"a", 7, Value, b"x2"),
                o(b"b", 8, Value, b"new"),
                o(b"c", 4, Value, b"x3"),
                o(b"d", 9, Delete, b""),
                o(b"d", 8, Value, b"x4"),
                o(b"e", 9, Merge, b"x5"),
            ]
        );
        assert_eq!((tally.filter_removed, tally.filter_changed), (1, 1));
        // Without snapshots every key's newest value is offered.
        let (got, _) = sift(&[], &[(b"c", 4, Value, b"x3")]);
        assert_eq!(got, vec![o(b"c", 4, Delete, b"")]);
    }
}
