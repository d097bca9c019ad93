//! Level-0 pieces as the sorted runs a compaction reads: cells of a row
//! ([`Run`]). Executors read, size and retire them without knowing the
//! container's layout.

use crate::edit::Edit;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::l0::matrix::row::RowIter;
use crate::l0::matrix::RowMeta;
use crate::l0::{RowSlice, Rows};
use std::sync::Arc;

/// Cells `[from, to)` of one row, held open while a compaction reads them.
#[derive(Debug, Clone)]
pub struct Run {
    row: Arc<RowMeta>,
    from: u32,
    to: u32,
}

impl Run {
    /// An iterator over the run's entries in key order (unpositioned).
    pub fn iter(&self) -> Box<dyn InternalIterator> {
        Box::new(RowIter::new(self.row.clone(), self.from, self.to))
    }

    /// The run's bytes in its file.
    pub fn bytes(&self) -> u64 {
        self.row.row.bytes_between(self.from, self.to)
    }

    /// Records in `edit` what compacting the run leaves of its row: the
    /// row deleted once its last cell went down, otherwise its new cursor
    /// (which also keeps it in the compacting group).
    pub fn retire(&self, edit: &mut Edit) {
        if self.to >= self.row.row.len() {
            edit.rows_deleted.push(self.row.id());
        } else {
            edit.row_cursors.push((self.row.id(), self.to));
        }
    }
}

impl Rows {
    /// The runs `slices` name, each checked against the container: its row
    /// live and its cells past the row's cursor and inside the row.
    pub fn runs(&self, slices: &[RowSlice]) -> Result<Vec<Run>> {
        slices
            .iter()
            .map(|s| match self.row(s.id) {
                Some(r) if s.from >= r.cursor && s.to <= r.meta.row.len() => Ok(Run {
                    row: r.meta.clone(),
                    from: s.from,
                    to: s.to,
                }),
                _ => Err(Error::InvalidArgument(format!(
                    "plan names level-0 row {} cells {}..{} not in the container",
                    s.id, s.from, s.to
                ))),
            })
            .collect()
    }
}
