//! Level 0 tables as the read path sees them.
//!
//! Level 0 receives every flush, so its pieces overlap and are searched
//! newest first. This is the read interface of L0 *tables*; level 0 as a
//! whole is a container chosen at open (`crate::l0`), and the matrix
//! container's rows are read through `Version::matrix`.

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
    /// Number of flushed pieces (tables or rows): drives stalls and the picker.
    fn pieces(&self) -> usize;
    /// Bytes held.
    fn bytes(&self) -> u64;
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

    fn add_iterators(&self, out: &mut Vec<Box<dyn InternalIterator>>) {
        for f in self {
            // A table that cannot be opened is an iterator over its error.
            match f.table() {
                Ok(t) => out.push(Box::new(TableIter::new(t))),
                Err(e) => out.push(Box::new(EmptyIter(Some(e)))),
            }
        }
    }

    fn pieces(&self) -> usize {
        self.len()
    }

    fn bytes(&self) -> u64 {
        self.iter().map(|f| f.size()).sum()
    }
}
