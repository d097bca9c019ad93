//! How a table's blocks are fetched: used in place from its memory map,
//! from the block cache, or read from the file (and cached), with every
//! handle checked against the file's data and every block's checksum
//! verified as `verify_checksums` asks.

use super::Table;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::table::block::{Block, BlockBytes, BlockIter};
use crate::table::format::{
    check_block_trailer, decode_stored_block, BlockHandle, Compression, BLOCK_TRAILER_LEN,
};
use crate::table::readahead::{bit_of, Readahead};
use crate::table::warm;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

impl Table {
    /// [`mapped_block_at`](Self::mapped_block_at) for a lookup or a user
    /// scan, telling a block that came from the device (the first touch of
    /// its trailer faulted and waited) to [`note_slow_read`].
    #[inline]
    pub(super) fn mapped_block_timed(
        &self,
        h: BlockHandle,
        ordinal: Option<usize>,
    ) -> Result<Option<Block>> {
        if self.warmth.is_none() {
            return self.mapped_block_at(h, ordinal);
        }
        let t0 = warm::ticks();
        let block = self.mapped_block_at(h, ordinal);
        if warm::ticks().wrapping_sub(t0) >= warm::SLOW_TICKS {
            self.note_slow_read();
        }
        block
    }

    pub(super) fn check_handle(&self, h: BlockHandle) -> Result<()> {
        match h.end_with_trailer() {
            Some(end) if end <= self.data_limit => Ok(()),
            _ => Err(Error::corruption(
                &self.path,
                h.offset,
                format!(
                    "block handle ({}, {}) outside the file's {} data bytes",
                    h.offset, h.size, self.data_limit
                ),
            )),
        }
    }

    /// Reads, verifies and decompresses a block.
    pub(super) fn read_block(&self, h: BlockHandle, verify: bool) -> Result<(Vec<u8>, bool)> {
        self.check_handle(h)?;
        let n = usize::try_from(h.size + BLOCK_TRAILER_LEN as u64)
            .map_err(|_| Error::corruption(&self.path, h.offset, "block too large"))?;
        let mut buf = vec![0u8; n];
        if n > 2 * PAGE {
            // An index or filter spanning many pages: one request for all
            // of them rather than a fault per page under `MADV_RANDOM`.
            self.file.prefetch(h.offset, n as u64);
        }
        self.file.read_exact_at(h.offset, &mut buf)?;
        self.bytes_read.add(n as u64);
        decode_stored_block(buf, verify).map_err(|e| e.in_file(&self.path, h.offset))
    }

    /// A data block through `readahead` (sequential scans that should not
    /// fill the block cache, such as compaction inputs): one large read
    /// serves many blocks.
    pub(in crate::table) fn data_block_sequential(
        &self,
        h: BlockHandle,
        ra: &mut Readahead,
    ) -> Result<Arc<Block>> {
        if let Some(block) = self.mapped_block(h)? {
            return Ok(block);
        }
        self.check_handle(h)?;
        let n = usize::try_from(h.size + BLOCK_TRAILER_LEN as u64)
            .map_err(|_| Error::corruption(&self.path, h.offset, "block too large"))?;
        let start = h
            .offset
            .checked_sub(ra.offset)
            .and_then(|s| usize::try_from(s).ok())
            .filter(|s| s.checked_add(n).is_some_and(|end| end <= ra.buf.len()));
        let start = match start {
            Some(s) => s,
            None => {
                let len = (ra.next_piece() as u64)
                    .min(self.data_limit.min(ra.end).saturating_sub(h.offset))
                    .max(n as u64);
                ra.buf.resize(len as usize, 0);
                // A mapped file advised random faults page by page: ask
                // for the whole range first (for a pread file, a
                // `WILLNEED` of the range the read then waits for).
                self.file.prefetch(h.offset, len);
                self.file.read_sequential_at(h.offset, &mut ra.buf)?;
                self.bytes_read.add(len);
                ra.offset = h.offset;
                0
            }
        };
        let stored = ra
            .buf
            .get(start..start + n)
            .ok_or_else(|| Error::corruption(&self.path, h.offset, "block outside readahead"))?
            .to_vec();
        let (data, compressed) = decode_stored_block(stored, self.verify_checksums)
            .map_err(|e| e.in_file(&self.path, h.offset))?;
        let mut block = Block::new(data).map_err(|e| self.block_error(e, h, compressed))?;
        block.compressed = compressed;
        Ok(Arc::new(block))
    }

    /// An uncompressed data block used in place from the table's memory
    /// map (checked like a read one, never cached: the page cache keeps
    /// it); `None` when the table is not mapped or the block is compressed.
    pub(super) fn mapped_block(&self, h: BlockHandle) -> Result<Option<Arc<Block>>> {
        Ok(self.mapped_block_at(h, None)?.map(Arc::new))
    }

    /// [`mapped_block`](Self::mapped_block) without the `Arc`, for the
    /// data block numbered `ordinal`, if known: its checksum is verified
    /// on its first use only (`verified`).
    pub(super) fn mapped_block_at(
        &self,
        h: BlockHandle,
        ordinal: Option<usize>,
    ) -> Result<Option<Block>> {
        let Some(map) = self.file.mapping() else {
            return Ok(None);
        };
        self.check_handle(h)?;
        let start = usize::try_from(h.offset).ok();
        let stored = start.and_then(|s| {
            let end = s
                .checked_add(usize::try_from(h.size).ok()?)?
                .checked_add(BLOCK_TRAILER_LEN)?;
            map.get(s..end).map(|b| (s, b))
        });
        let Some((start, stored)) = stored else {
            return Err(Error::corruption(
                &self.path,
                h.offset,
                "block outside the mapped file",
            ));
        };
        // Compressed blocks are decompressed once and cached: leave them to
        // the caller before paying for a checksum.
        if stored.get(stored.len() - BLOCK_TRAILER_LEN) != Some(&(Compression::None as u8)) {
            return Ok(None);
        }
        // The ordinal counts only if it names this very block.
        let ordinal =
            ordinal.filter(|&i| self.fences.as_ref().and_then(|f| f.handle(i)) == Some(h));
        let bit = ordinal.and_then(|i| bit_of(&self.verified, i as u64));
        let known = bit.is_some_and(|(w, m)| w.load(AtomicOrdering::Relaxed) & m != 0);
        let verify = self.verify_checksums && !known;
        let (n, _) =
            check_block_trailer(stored, verify).map_err(|e| e.in_file(&self.path, h.offset))?;
        if let (true, Some((w, m))) = (verify, bit) {
            w.fetch_or(m, AtomicOrdering::Relaxed);
        }
        self.bytes_read.add(stored.len() as u64);
        let bytes = BlockBytes::Mapped {
            map: Arc::clone(map),
            start,
            end: start + n,
        };
        Block::new(bytes)
            .map(Some)
            .map_err(|e| self.block_error(e, h, false))
    }

    /// A data block from the memory map, the cache, or read from the file
    /// and cached.
    pub(super) fn data_block(&self, h: BlockHandle) -> Result<Arc<Block>> {
        self.data_block_at(h, None, false)
    }

    /// [`data_block`](Self::data_block) for the data block numbered
    /// `ordinal`, if known (a mapped block's checksum is then verified on
    /// its first use only). `timed`: a mapped block that came from the
    /// device counts toward warming the table (a seek; a scan moving on
    /// to the next block has its own read-ahead instead).
    pub(in crate::table) fn data_block_at(
        &self,
        h: BlockHandle,
        ordinal: Option<usize>,
        timed: bool,
    ) -> Result<Arc<Block>> {
        let mapped = if timed {
            self.mapped_block_timed(h, ordinal)?
        } else {
            self.mapped_block_at(h, ordinal)?
        };
        if let Some(b) = mapped {
            return Ok(Arc::new(b));
        }
        if let Some(b) = self.cache.get(self.id, h.offset) {
            return Ok(b);
        }
        let (data, compressed) = self.read_block(h, self.verify_checksums)?;
        let mut block = Block::new(data).map_err(|e| self.block_error(e, h, compressed))?;
        block.compressed = compressed;
        let block = Arc::new(block);
        self.cache.insert(self.id, h.offset, Arc::clone(&block));
        Ok(block)
    }

    /// Starts loading the cache lines of the mapped block at `h` (its
    /// trailer and restart array first, which are read first), so that the
    /// lookup's dependent loads through the block overlap instead of
    /// missing one after another. Nothing happens for unmapped files or a
    /// handle outside the map; a prefetch never faults.
    #[inline]
    pub(in crate::table) fn prefetch_mapped(&self, h: BlockHandle) {
        let Some(map) = self.file.mapping() else {
            return;
        };
        let (Ok(start), Ok(size)) = (usize::try_from(h.offset), usize::try_from(h.size)) else {
            return;
        };
        let end = start.saturating_add(size).saturating_add(BLOCK_TRAILER_LEN);
        // A large block (one big value) gets its tail and first lines only,
        // not thousands of prefetches that would evict the caches.
        let head_end = end.min(start.saturating_add(PREFETCH_BLOCK_BYTES));
        if let (Some(head), Some(tail)) = (
            map.get(start..head_end),
            map.get(end.saturating_sub(1)..end),
        ) {
            crate::table::prefetch::prefetch_lines(tail);
            crate::table::prefetch::prefetch_lines(head);
        }
    }

    /// Asks the OS to start reading the data block a seek to `target` (an
    /// internal key) reads first, and returns at once: the seeks of the
    /// levels a scan merges then wait for their reads together rather than
    /// one after another. Only for a table read with buffered `pread`
    /// whose block is not in the block cache; a mapped table (its pages
    /// are expected resident) or one read with `O_DIRECT` (the page cache
    /// would not serve it) asks for nothing. Errors are left to the seek.
    pub(crate) fn prefetch_seek(&self, target: &[u8]) {
        if self.is_mapped() || self.file.direct() {
            return;
        }
        let h = match &self.fences {
            Some(f) => match f.locate(&self.index, target) {
                Some((_, h)) => h,
                None => return,
            },
            None => {
                let mut index = BlockIter::new(&*self.index);
                index.seek(target);
                if !index.valid() {
                    return;
                }
                match self.decode_index_value(index.value()) {
                    Ok(h) => h,
                    Err(_) => return,
                }
            }
        };
        // Fences hold only checked handles, and `decode_index_value`
        // checks the one it returns.
        if self.cache.contains(self.id, h.offset) {
            return;
        }
        self.file
            .prefetch(h.offset, h.size + BLOCK_TRAILER_LEN as u64);
    }

    /// Names this table's file in an error found inside the block at `h`.
    /// In-block offsets of a compressed block are not file offsets, so those
    /// errors point at the block and mention the in-block offset.
    pub(in crate::table) fn block_error(
        &self,
        e: Error,
        h: BlockHandle,
        compressed: bool,
    ) -> Error {
        match e {
            Error::Corruption {
                file,
                offset,
                reason,
            } if compressed && file.as_os_str().is_empty() => Error::corruption(
                &self.path,
                h.offset,
                format!("{reason} (at byte {offset} of the decompressed block)"),
            ),
            e => e.in_file(&self.path, h.offset),
        }
    }
}

/// Bytes of a data block a point lookup prefetches from its start (a
/// default block and its trailer).
const PREFETCH_BLOCK_BYTES: usize = 4096 + BLOCK_TRAILER_LEN;

/// The OS page size assumed by prefetch decisions.
const PAGE: usize = 4096;
