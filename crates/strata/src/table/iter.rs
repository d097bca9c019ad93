//! The two-level iterator over a whole table: the index block's entries
//! lead to data blocks, read through the block cache or a sequential
//! buffer.

use super::block::BlockIter;
use super::format::BlockHandle;
use super::readahead::{block_end, Prefetch, Readahead, FIRST_ASK, PREFETCH_AFTER};
use super::reader::Table;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use std::sync::Arc;

/// Bidirectional iterator over a whole table (index iterator + data block
/// iterator). Errors make it invalid and are reported by `status()`.
pub struct TableIter {
    table: Arc<Table>,
    /// Set for sequential scans that bypass the block cache.
    readahead: Option<Readahead>,
    /// A user scan's buffer over a table read with `pread`: set once the
    /// cursor has read [`PREFETCH_AFTER`] adjacent blocks, dropped at its
    /// next seek; the blocks after it are read a [`Readahead::scan`] piece
    /// at a time instead of a `pread` each, and bypass the block cache.
    scan_buf: Option<Readahead>,
    prefetch: Prefetch,
    /// The bytes of this table that the entries the scan reading this
    /// cursor wants span ([`InternalIterator::scan_hint`],
    /// `Table::span_of`).
    hint_span: Option<u64>,
    /// Where the read-ahead asks and scan pieces of the run a seek started
    /// stop: the end of the block the seek reached plus the hint's
    /// entries' span. `u64::MAX` without a hint; once the run took over
    /// the table's saved scan (whose next page is likely read too); and
    /// once the cursor loads a block starting at or past it, where the
    /// walk took more than its hint and reads on as an unhinted run
    /// (asking ahead from its window, in pieces from the first size). A
    /// mapped table's first ask ([`FIRST_ASK`]) is not capped.
    cap: u64,
    index: BlockIter,
    data: Option<BlockIter>,
    data_handle: BlockHandle,
    /// The fence ordinal of the index entry `index` is on, when known (a
    /// table with fences, positioned by a seek and moved one entry at a
    /// time since).
    ordinal: Option<usize>,
    status: Option<Error>,
}

impl TableIter {
    pub fn new(table: Arc<Table>) -> Self {
        let index = BlockIter::new(Arc::clone(&table.index));
        TableIter {
            table,
            readahead: None,
            scan_buf: None,
            prefetch: Prefetch::default(),
            hint_span: None,
            cap: u64::MAX,
            index,
            data: None,
            data_handle: BlockHandle::default(),
            ordinal: None,
            status: None,
        }
    }

    /// An iterator for one front-to-back pass (compaction input): blocks are
    /// read in large chunks and not added to the block cache.
    pub fn sequential(table: Arc<Table>) -> Self {
        let mut it = Self::new(table);
        it.readahead = Some(Readahead::default());
        it
    }

    /// The table being iterated.
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    fn set_error(&mut self, e: Error) {
        if self.status.is_none() {
            self.status = Some(e);
        }
        self.data = None;
    }

    /// Moves any index or data iterator error into `self.status`.
    /// Returns false if there is one.
    fn absorb_errors(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        if let Err(e) = self.index.status() {
            let e = self
                .table
                .block_error(e, self.table.index_handle, self.table.index.compressed);
            self.set_error(e);
            return false;
        }
        if let Some(Err(e)) = self.data.as_ref().map(|d| d.status()) {
            let compressed = self.data.as_ref().is_some_and(|d| d.block().compressed);
            let e = self.table.block_error(e, self.data_handle, compressed);
            self.set_error(e);
            return false;
        }
        true
    }

    /// Points `data` at the block the index iterator is on.
    /// Its fence ordinal is `self.ordinal`, if known; `seeking`: the block
    /// was reached by a seek, not by stepping from the one before.
    fn init_data_block(&mut self, seeking: bool) {
        let ordinal = self.ordinal;
        if !self.index.valid() {
            self.data = None;
            return;
        }
        let handle = match self.table.decode_index_value(self.index.value()) {
            Ok(h) => h,
            Err(e) => return self.set_error(e),
        };
        if self.data.is_some() && handle == self.data_handle {
            return;
        }
        let block = match self.readahead.as_mut() {
            Some(ra) => self.table.data_block_sequential(handle, ra),
            None => {
                if !seeking && handle.offset >= self.cap {
                    // Past the hint's span: this block through the cache,
                    // then asks and pieces as an unhinted run's.
                    self.cap = u64::MAX;
                    self.scan_buf = None;
                }
                self.prefetch_before(handle);
                if seeking {
                    // A seek ends a scan's run (and its buffer), and
                    // searches the block as a lookup does: its lines'
                    // misses overlap instead of coming one by one.
                    self.scan_buf = None;
                    self.cap = self
                        .hint_span
                        .map_or(u64::MAX, |span| block_end(handle).saturating_add(span));
                    self.table.prefetch_mapped(handle);
                }
                match self.scan_buf.as_mut() {
                    Some(ra) if self.prefetch.continues(handle) => {
                        self.table.data_block_sequential(handle, ra)
                    }
                    _ => self.table.data_block_at(handle, ordinal, seeking),
                }
            }
        };
        match block {
            Ok(b) => {
                self.data = Some(BlockIter::new(b));
                self.data_handle = handle;
                self.prefetch_after(handle);
                if !seeking && self.readahead.is_none() && self.prefetch.run >= 2 {
                    self.prefetch_next_lines(ordinal);
                }
            }
            Err(e) => self.set_error(e),
        }
    }

    /// Before loading the block at `h` that starts a new run of a cursor
    /// (a seek, not the next block of its own or the table's saved scan):
    /// if no scan asked for the piece it lies in, ask for [`FIRST_ASK`]
    /// from it first, so that the touch waits for one short read instead
    /// of the kernel's read-around. Pieces once asked for are taken as
    /// cached from then on (a page evicted since faults as before).
    fn prefetch_before(&mut self, h: BlockHandle) {
        if self.prefetch.continues(h) || self.table.was_asked(h.offset) {
            return;
        }
        if self.table.scan.lock().continues(h) {
            return;
        }
        let until = h
            .offset
            .saturating_add(FIRST_ASK)
            .min(self.table.data_limit)
            .max(block_end(h).min(self.table.data_limit));
        self.prefetch = Prefetch::start(h, until);
        self.table.ask(h.offset, until - h.offset);
    }

    /// After loading the block at `h`: once blocks are read front to back,
    /// ask the OS to read the next window of the file in the background.
    /// Each cursor keeps its own progress, and a user scan's is also saved
    /// in the table: a cursor whose first block is where the saved scan
    /// stopped (cursors re-created per page of results) carries on with
    /// its window instead of starting over. Concurrent scans elsewhere in
    /// the table do not disturb one another's progress.
    fn prefetch_after(&mut self, h: BlockHandle) {
        let limit = self.table.data_limit;
        let sequential = self.readahead.is_some();
        if !sequential && !self.prefetch.continues(h) {
            // A new run for this cursor: it may continue the scan an
            // earlier cursor over this table stopped in.
            let saved = *self.table.scan.lock();
            if saved.continues(h) {
                self.prefetch = saved;
                self.cap = u64::MAX;
            }
        }
        let ask = self.prefetch.advance(h, sequential, limit.min(self.cap));
        if !sequential
            && self.scan_buf.is_none()
            && self.prefetch.run >= PREFETCH_AFTER
            && !self.table.is_mapped()
        {
            self.scan_buf = Some(Readahead::scan(self.cap));
        }
        if !sequential && self.prefetch.run > 0 {
            *self.table.scan.lock() = self.prefetch;
        }
        if let Some((from, len)) = ask {
            self.table.ask(from, len);
        }
    }

    /// A forward step of a long walk (two adjacent blocks read before
    /// this one, so that a short scan after a seek pays nothing) just
    /// loaded the block numbered `ordinal` of a mapped table: hints the
    /// CPU to load the next block's lines, so that the walk's first touch
    /// of each block (a new page: a TLB miss and cache misses) is not
    /// waited for (docs/design/2026-12-02-readseq-in-memory.md). Needs
    /// the table's fences to know the next block's place; a hint only,
    /// whatever comes next.
    fn prefetch_next_lines(&self, ordinal: Option<usize>) {
        let next = ordinal
            .and_then(|i| i.checked_add(1))
            .and_then(|i| self.table.fences.as_ref()?.handle(i));
        if let Some(h) = next {
            self.table.prefetch_mapped(h);
        }
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    /// Moves to the next non-empty data block while the current one is
    /// done. Errors are absorbed only once the data iterator is invalid
    /// (an error always makes it so, and the index's status changes only
    /// when the index moves), not at every entry of a scan.
    fn skip_empty_blocks_forward(&mut self) {
        while !self.data_valid() && self.absorb_errors() {
            if !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.next();
            self.ordinal = self.ordinal.map(|i| i + 1);
            self.init_data_block(false);
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
    }

    /// [`skip_empty_blocks_forward`](Self::skip_empty_blocks_forward)
    /// backwards.
    fn skip_empty_blocks_backward(&mut self) {
        while !self.data_valid() && self.absorb_errors() {
            if !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.prev();
            self.ordinal = self.ordinal.and_then(|i| i.checked_sub(1));
            self.init_data_block(false);
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.status.is_none() && self.data_valid()
    }

    fn seek_to_first(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.index.seek_to_first();
        self.ordinal = self.table.fences.as_ref().map(|_| 0);
        self.init_data_block(true);
        if let Some(d) = &mut self.data {
            d.seek_to_first();
        }
        self.skip_empty_blocks_forward();
    }

    fn seek_to_last(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.index.seek_to_last();
        self.ordinal = self
            .table
            .fences
            .as_ref()
            .and_then(|f| f.len().checked_sub(1));
        self.init_data_block(true);
        if let Some(d) = &mut self.data {
            d.seek_to_last();
        }
        self.skip_empty_blocks_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        if self.status.is_some() {
            return;
        }
        self.ordinal = match &self.table.fences {
            Some(f) => {
                let i = f.position(&self.table.index, target);
                self.index.seek_to_restart_entry(i);
                Some(i)
            }
            None => {
                self.index.seek(target);
                None
            }
        };
        self.init_data_block(true);
        if let Some(d) = &mut self.data {
            d.seek(target);
        }
        self.skip_empty_blocks_forward();
    }

    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_empty_blocks_forward();
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_empty_blocks_backward();
    }

    // An error drops the data iterator (`set_error`): with `data` set, the
    // status is clear.
    fn key(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.value(),
            None => &[],
        }
    }

    fn status(&self) -> Result<()> {
        match &self.status {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Asks the OS for the block a seek to `target` reads first
    /// (`Table::prefetch_seek`); nothing for a compaction input.
    fn prefetch_seek(&mut self, target: &[u8]) {
        if self.readahead.is_none() && self.status.is_none() {
            self.table.prefetch_seek(target);
        }
    }

    /// Caps the run each seek starts at the hint's span (see `cap`): its
    /// read-ahead windows and scan pieces stop there; a walk that goes
    /// past it reads on as an unhinted cursor from the block it crossed.
    fn scan_hint(&mut self, entries: usize) {
        self.hint_span = Some(self.table.span_of(entries as u64));
    }
}
