//! Concatenation of the sorted, disjoint tables of one level, opening a
//! table iterator only when the cursor reaches that table.
//!
//! A table iterator's error is kept here when the cursor leaves that table,
//! so it is sticky for the level: the iterator stays invalid and `status()`
//! keeps returning it (see `crate::iter::MergeIter`). Opening a table goes through the
//! table cache and may fail (`EMFILE`, a damaged footer): that error is
//! kept the same way; the table is never skipped.

use super::FileMeta;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::table::TableIter;
use crate::types;
use std::sync::Arc;

/// Iterator over a level's tables (ordered by key, non-overlapping).
pub struct LevelIter {
    files: Vec<Arc<FileMeta>>,
    index: usize,
    current: Option<TableIter>,
    sequential: bool,
    /// The scan hint given, passed to every table iterator opened.
    hint: Option<usize>,
    status: Option<Error>,
}

impl LevelIter {
    pub fn new(files: Vec<Arc<FileMeta>>) -> Self {
        LevelIter {
            files,
            index: 0,
            current: None,
            sequential: false,
            hint: None,
            status: None,
        }
    }

    /// A level iterator for one front-to-back pass (compaction input):
    /// its tables are read with readahead, bypassing the block cache.
    pub fn sequential(files: Vec<Arc<FileMeta>>) -> Self {
        let mut it = Self::new(files);
        it.sequential = true;
        it
    }

    /// Opens the table iterator of file `index`; false past the end or
    /// when the table cannot be opened (the error is kept in `status`).
    fn open(&mut self, index: usize) -> bool {
        match self.files.get(index) {
            Some(f) => {
                self.index = index;
                let table = match f.table() {
                    Ok(t) => t,
                    Err(e) => {
                        self.status.get_or_insert(e);
                        self.current = None;
                        return false;
                    }
                };
                let mut it = if self.sequential {
                    TableIter::sequential(table)
                } else {
                    TableIter::new(table)
                };
                if let Some(n) = self.hint {
                    it.scan_hint(n);
                }
                self.current = Some(it);
                true
            }
            None => {
                self.current = None;
                false
            }
        }
    }

    fn cur_valid(&self) -> bool {
        self.status.is_none() && self.current.as_ref().is_some_and(|c| c.valid())
    }

    /// Takes the current table's error, if any; false once an error is held.
    fn cur_ok(&mut self) -> bool {
        if self.status.is_none() {
            if let Some(Err(e)) = self.current.as_ref().map(|c| c.status()) {
                self.status = Some(e);
            }
        }
        self.status.is_none()
    }

    /// Moves forward over exhausted tables.
    fn skip_forward(&mut self) {
        while !self.cur_valid() && self.cur_ok() {
            if !self.open(self.index + 1) {
                return;
            }
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first();
            }
        }
    }

    /// Moves backward over exhausted tables.
    fn skip_backward(&mut self) {
        while !self.cur_valid() && self.cur_ok() {
            if self.index == 0 || self.current.is_none() {
                self.current = None;
                return;
            }
            self.open(self.index - 1);
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last();
            }
        }
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.cur_valid()
    }

    fn seek_to_first(&mut self) {
        if self.status.is_some() {
            return;
        }
        if self.open(0) {
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first();
            }
            self.skip_forward();
        }
    }

    fn seek_to_last(&mut self) {
        if self.status.is_some() {
            return;
        }
        if self.files.is_empty() {
            self.current = None;
            return;
        }
        self.open(self.files.len() - 1);
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last();
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        if self.status.is_some() {
            return;
        }
        let i = self
            .files
            .partition_point(|f| types::compare_internal(&f.desc.largest, target).is_lt());
        if self.open(i) {
            if let Some(c) = self.current.as_mut() {
                c.seek(target);
            }
            self.skip_forward();
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        if self.status.is_some() {
            return;
        }
        // Last file whose smallest key is <= target.
        let i = self
            .files
            .partition_point(|f| types::compare_internal(&f.desc.smallest, target).is_le());
        if i == 0 {
            self.current = None;
            return;
        }
        self.open(i - 1);
        if let Some(c) = self.current.as_mut() {
            c.seek_for_prev(target);
        }
        self.skip_backward();
    }

    fn next(&mut self) {
        if self.status.is_some() {
            return;
        }
        if let Some(c) = self.current.as_mut() {
            c.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if self.status.is_some() {
            return;
        }
        if let Some(c) = self.current.as_mut() {
            c.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.status {
            return Err(e.clone());
        }
        match &self.current {
            Some(c) => c.status(),
            None => Ok(()),
        }
    }

    /// Asks for the first block of the table a seek to `target` lands in
    /// (opening the table through the table cache if it is not open).
    fn prefetch_seek(&mut self, target: &[u8]) {
        if self.status.is_some() || self.sequential {
            return;
        }
        let i = self
            .files
            .partition_point(|f| types::compare_internal(&f.desc.largest, target).is_lt());
        if let Some(f) = self.files.get(i) {
            // An error opening the table is the seek's to report.
            let _ = f.with_table(|t| t.prefetch_seek(target));
        }
    }

    /// Kept for every table iterator opened from now on, and passed to
    /// the open one.
    fn scan_hint(&mut self, entries: usize) {
        self.hint = Some(entries);
        if let Some(c) = self.current.as_mut() {
            c.scan_hint(entries);
        }
    }
}
