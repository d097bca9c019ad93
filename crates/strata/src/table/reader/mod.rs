//! Opening a table file, point lookups and reading its blocks.

use super::block::{Block, BlockIter};
use super::cache::BlockCache;
use super::fence::Fences;
use super::filter::Bloom;
use super::format::Compression;
use super::format::{BlockHandle, Footer, FOOTER_LEN};
use super::properties::{decode_properties, TableProperties};
use super::readahead::{bit_of, block_end, Prefetch, ASK_PIECE};
use super::rows::RowCache;
use super::warm::{self, TableWarmth, Warmer};
use crate::error::{Error, Result};
use crate::io::RandomAccessFile;
use crate::iter::InternalIterator;
use crate::stats::Striped;
use crate::types::{parse_internal_key, trailer, ValueKind};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

mod blocks;

/// A point lookup's answer: sequence number, kind and value.
type Found = (u64, ValueKind, Vec<u8>);

/// An open table: footer, index block, filter and properties are read,
/// verified and pinned at open; data blocks go through the [`BlockCache`].
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    id: u64,
    cache: Arc<BlockCache>,
    verify_checksums: bool,
    pub(super) index: Arc<Block>,
    /// A search structure over `index` for point lookups (`None` when the
    /// index is not in the shape the builder writes).
    pub(super) fences: Option<Fences>,
    /// One bit per data block (by ordinal, with fences): its checksum was
    /// verified in the memory map once, so point lookups and iterators
    /// trust it from then on, as a block cache trusts a block it verified
    /// when it loaded it.
    verified: Box<[AtomicU64]>,
    pub(super) index_handle: BlockHandle,
    filter: Option<Bloom>,
    props: TableProperties,
    compression: Compression,
    /// End of the region data blocks may occupy (start of the footer).
    pub(super) data_limit: u64,
    /// Stored bytes per entry in the data blocks, on average (rounded
    /// up; at least 1): what a scan of a known number of entries spans.
    entry_bytes: u64,
    /// Bytes read from the file; shared with the table's `FileMeta`, so the
    /// count outlives a table cache eviction.
    bytes_read: Arc<Striped>,
    /// Reads the whole mapped table into the page cache once lookups keep
    /// waiting for the device ([`warm`]); `None`: never.
    warmth: Option<TableWarmth>,
    /// Where the last user scan that read blocks front to back stopped,
    /// and what it asked the OS to read ahead: a new cursor that starts
    /// there carries on with it.
    pub(super) scan: parking_lot::Mutex<Prefetch>,
    /// One bit per [`ASK_PIECE`] of a mapped table's data: a scan asked
    /// the OS to read that piece (empty for tables read with `pread`).
    asked: Box<[AtomicU64]>,
    /// Entries point lookups found here, for the next lookup of the same
    /// key (`Options::direct_reads` only; `None` otherwise).
    rows: Option<Arc<RowCache>>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("entries", &self.props.entries)
            .field("file_size", &self.props.file_size)
            .finish()
    }
}

impl Table {
    /// Opens a table: reads and checks the footer, then the index, filter and
    /// properties blocks (always checksum-verified). `verify_checksums`
    /// applies to data blocks.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        table_id: u64,
        cache: Arc<BlockCache>,
        verify_checksums: bool,
    ) -> Result<Table> {
        let bytes_read = Arc::new(Striped::default());
        Self::open_counted(file, path, table_id, cache, verify_checksums, bytes_read)
    }

    /// [`Table::open`], adding the bytes it reads (then and later) to
    /// `bytes_read`.
    pub fn open_counted(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        table_id: u64,
        cache: Arc<BlockCache>,
        verify_checksums: bool,
        bytes_read: Arc<Striped>,
    ) -> Result<Table> {
        let len = file.len();
        if len < FOOTER_LEN as u64 {
            return Err(Error::corruption(
                &path,
                0,
                format!("file of {len} bytes is too short for a table"),
            ));
        }
        let footer_at = len - FOOTER_LEN as u64;
        let mut fbuf = [0u8; FOOTER_LEN];
        file.read_exact_at(footer_at, &mut fbuf)?;
        bytes_read.add(FOOTER_LEN as u64);
        let footer = Footer::decode(&fbuf).map_err(|e| e.in_file(&path, footer_at))?;
        let mut t = Table {
            file,
            path,
            id: table_id,
            cache,
            verify_checksums,
            index: Arc::new(Block::empty()),
            fences: None,
            verified: Box::new([]),
            index_handle: footer.index,
            filter: None,
            props: TableProperties::default(),
            compression: Compression::None,
            data_limit: footer_at,
            entry_bytes: 1,
            bytes_read,
            warmth: None,
            scan: parking_lot::Mutex::new(Prefetch::default()),
            asked: Box::new([]),
            rows: None,
        };
        if t.file.mapping().is_some() {
            let pieces = footer_at.div_ceil(ASK_PIECE).div_ceil(64);
            t.asked = (0..pieces).map(|_| AtomicU64::new(0)).collect();
        }
        let (index, compressed) = t.read_block(footer.index, true)?;
        let mut index =
            Block::new(index).map_err(|e| t.block_error(e, footer.index, compressed))?;
        index.compressed = compressed;
        t.fences = Fences::build(&index, |h| t.check_handle(h).is_ok());
        if let (Some(f), true) = (&t.fences, t.file.mapping().is_some()) {
            t.verified = (0..f.len().div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect();
        }
        t.index = Arc::new(index);
        if footer.filter.size > 0 {
            let (f, compressed) = t.read_block(footer.filter, true)?;
            t.filter =
                Bloom::decode(&f).map_err(|e| t.block_error(e, footer.filter, compressed))?;
        }
        let (p, compressed) = t.read_block(footer.properties, true)?;
        let (mut props, compression) =
            decode_properties(&p).map_err(|e| t.block_error(e, footer.properties, compressed))?;
        props.file_size = len;
        // The data blocks end where the first of the blocks written after
        // them starts.
        let data_end = [footer.filter, footer.properties, footer.index]
            .iter()
            .filter(|h| h.size > 0)
            .map(|h| h.offset)
            .min()
            .unwrap_or(footer_at);
        t.entry_bytes = data_end.div_ceil(props.entries.max(1)).max(1);
        t.props = props;
        t.compression = compression;
        Ok(t)
    }

    /// Whether point lookups use the index's fences.
    #[cfg(test)]
    pub(crate) fn has_fences(&self) -> bool {
        self.fences.is_some()
    }

    /// Makes point lookups search the index block itself.
    #[cfg(test)]
    pub(crate) fn drop_fences(&mut self) {
        self.fences = None;
    }

    /// The index block's bytes.
    #[cfg(test)]
    pub(crate) fn index_bytes(&self) -> Vec<u8> {
        self.index.bytes().to_vec()
    }

    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// Checks what lies between the data blocks, which no checksum covers:
    /// blocks in file order, not overlapping, and the gaps (the padding of
    /// a table fitted to pages, `Options::block_align`) zeros and shorter
    /// than a page. `Corruption` at the first offending byte.
    pub fn verify_padding(&self) -> Result<()> {
        let mut it = BlockIter::new(Arc::clone(&self.index));
        it.seek_to_first();
        let mut end = 0u64;
        let mut gap = Vec::new();
        while it.valid() {
            let h = BlockHandle::decode(it.value())
                .map_err(|e| self.block_error(e, self.index_handle, self.index.compressed))?;
            if h.offset < end {
                return Err(Error::corruption(
                    &self.path,
                    h.offset,
                    format!("data block overlaps the one before it (which ends at {end})"),
                ));
            }
            let n = usize::try_from(h.offset - end).unwrap_or(usize::MAX);
            if n >= super::builder::ALIGN_PAGE {
                return Err(Error::corruption(
                    &self.path,
                    end,
                    format!("{n} bytes between data blocks"),
                ));
            }
            gap.resize(n, 0);
            self.file.read_exact_at(end, &mut gap)?;
            if let Some(i) = gap.iter().position(|&b| b != 0) {
                return Err(Error::corruption(
                    &self.path,
                    end + i as u64,
                    "a non-zero byte between data blocks",
                ));
            }
            end = block_end(h);
            it.next();
        }
        it.status()
            .map_err(|e| self.block_error(e, self.index_handle, self.index.compressed))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Compression the table was written with (blocks that did not shrink
    /// enough are stored uncompressed regardless).
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Bloom check on a user key; true when the table has no filter.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// Memory pinned by the index block and the filter.
    pub fn pinned_bytes(&self) -> usize {
        self.index.size()
            + self.fences.as_ref().map_or(0, Fences::size)
            + self.filter.as_ref().map_or(0, Bloom::size)
    }

    /// True when something besides this table holds its file or its
    /// file's map (a block read in place, still referenced; the warming
    /// thread's handle).
    pub fn map_shared(&self) -> bool {
        Arc::strong_count(&self.file) > 1
            || self
                .file
                .mapping()
                .is_some_and(|m| Arc::strong_count(m) > 1)
    }

    /// True when the table is read through a memory map.
    pub(super) fn is_mapped(&self) -> bool {
        self.file.mapping().is_some()
    }

    /// Bytes of the file mapped into memory (0 when it is read with pread).
    pub fn mapped_bytes(&self) -> u64 {
        self.file.mapping().map_or(0, |m| m.len() as u64)
    }

    /// Answers point lookups from (and fills) `rows` from now on.
    pub(crate) fn with_rows(mut self, rows: Arc<RowCache>) -> Self {
        self.rows = Some(rows);
        self
    }

    /// True when the table's reads bypass the page cache (direct I/O).
    pub fn reads_direct(&self) -> bool {
        self.file.direct()
    }

    /// Bytes read from the file so far (through every opening of it, when
    /// opened with [`Table::open_counted`]).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.get()
    }

    /// Lets `warmer` read the table into the page cache when point lookups
    /// and seeks keep getting its mapped blocks from the device (see
    /// [`warm`]).
    pub fn set_warmer(&mut self, warmer: Arc<Warmer>) {
        if self.file.mapping().is_some() {
            self.warmth = Some(TableWarmth::new(warmer, self.file.len()));
        }
    }

    /// True once the table was handed to the warmer (and holds its share
    /// of the budget).
    pub fn warmed(&self) -> bool {
        self.warmth.as_ref().is_some_and(TableWarmth::warmed)
    }

    /// Counts a block read that waited for the device (see
    /// [`TableWarmth::note_slow_read`]).
    pub(crate) fn note_slow_read(&self) {
        if let Some(w) = &self.warmth {
            w.note_slow_read(&self.file);
        }
    }

    /// Point lookup: the first entry `>= seek_key`, if its user key is
    /// `user_key`. No I/O when the filter rules the key out.
    pub fn get(
        &self,
        seek_key: &[u8],
        user_key: &[u8],
    ) -> Result<Option<(u64, ValueKind, Vec<u8>)>> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        self.get_past_filter(seek_key, user_key)
    }

    /// [`get`](Self::get) for a key the filter let through
    /// ([`may_contain`](Self::may_contain) was true).
    pub fn get_past_filter(
        &self,
        seek_key: &[u8],
        user_key: &[u8],
    ) -> Result<Option<(u64, ValueKind, Vec<u8>)>> {
        self.get_filtered(seek_key, user_key, None)
            .map(Option::flatten)
    }

    /// [`get`](Self::get) in a table that likely holds the key (the
    /// deepest level, where most keys live): the filter's line is fetched
    /// while the index is searched, and tested before the data block is
    /// read. `None` when the filter rules the key out (the index search
    /// was then done in vain, which a table that rarely holds the key
    /// should not pay: [`get`](Self::get) tests the filter first).
    pub fn get_likely(&self, seek_key: &[u8], user_key: &[u8]) -> Result<Option<Option<Found>>> {
        match &self.filter {
            Some(f) => {
                let h = f.prefetch(user_key);
                self.get_filtered(seek_key, user_key, Some((f, h)))
            }
            None => self.get_past_filter(seek_key, user_key).map(Some),
        }
    }

    /// The lookup: locates the data block, then (with `filter`, the
    /// filter and the key's hash) returns `None` if the filter rules the
    /// key out, then searches the block.
    fn get_filtered(
        &self,
        seek_key: &[u8],
        user_key: &[u8],
        filter: Option<(&Bloom, u64)>,
    ) -> Result<Option<Option<Found>>> {
        // Borrowed blocks and one key buffer per thread: a lookup takes
        // no reference count and allocates only the value it returns.
        thread_local! {
            static KEY: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
        }
        // The row cache holds each key's newest entry here: it answers a
        // lookup whose snapshot sees every entry of the table.
        let rows = self
            .rows
            .as_deref()
            .filter(|r| r.on() && trailer(seek_key) >> 8 >= self.props.max_seq);
        if let Some(found) = rows.and_then(|r| r.get(self.id, user_key)) {
            return Ok(Some(Some(found)));
        }
        let ruled_out = || filter.is_some_and(|(f, h)| !f.may_contain_hash(h));
        let (ordinal, handle, key) = match &self.fences {
            Some(f) => match f.locate(&self.index, seek_key) {
                Some((i, h)) => (Some(i), h, KEY.try_with(|k| k.take()).unwrap_or_default()),
                None => return Ok((!ruled_out()).then_some(None)),
            },
            None => {
                // An index without fences (not in the builder's shape):
                // the filter first, so a key it rules out never meets
                // the index's damage.
                if ruled_out() {
                    return Ok(None);
                }
                let buf = KEY.try_with(|k| k.take()).unwrap_or_default();
                let mut index = BlockIter::with_key_buffer(&*self.index, buf);
                index.seek(seek_key);
                if !index.valid() {
                    return index.status().map(|()| Some(None)).map_err(|e| {
                        self.block_error(e, self.index_handle, self.index.compressed)
                    });
                }
                (
                    None,
                    self.decode_index_value(index.value())?,
                    index.into_key_buffer(),
                )
            }
        };
        if ruled_out() {
            let _ = KEY.try_with(|k| k.set(key));
            return Ok(None);
        }
        self.prefetch_mapped(handle);
        let found = match self.mapped_block_timed(handle, ordinal)? {
            Some(block) => self.find_in(
                BlockIter::with_key_buffer(&block, key),
                handle,
                seek_key,
                user_key,
            ),
            None => {
                let block = self.data_block(handle)?;
                self.find_in(
                    BlockIter::with_key_buffer(&*block, key),
                    handle,
                    seek_key,
                    user_key,
                )
            }
        };
        let (found, key) = found;
        if let (Some(rows), Ok(Some((seq, kind, value)))) = (rows, &found) {
            rows.insert(self.id, user_key, *seq, *kind, value);
        }
        // A lookup from a thread-local destructor keeps its buffer.
        let _ = KEY.try_with(|k| k.set(key));
        found.map(Some)
    }

    /// The first entry `>= seek_key` of `it`'s block, if its user key is
    /// `user_key`; gives the key buffer back.
    fn find_in(
        &self,
        mut it: BlockIter<&Block>,
        handle: BlockHandle,
        seek_key: &[u8],
        user_key: &[u8],
    ) -> (Result<Option<Found>>, Vec<u8>) {
        it.seek(seek_key);
        let found = if !it.valid() {
            it.status()
                .map(|()| None)
                .map_err(|e| self.block_error(e, handle, it.block().compressed))
        } else {
            match parse_internal_key(it.key()) {
                None => Err(Error::corruption(
                    &self.path,
                    handle.offset,
                    "malformed internal key in data block",
                )),
                Some(p) if p.user_key != user_key => Ok(None),
                Some(p) => Ok(Some((p.seq, p.kind, it.value().to_vec()))),
            }
        };
        (found, it.into_key_buffer())
    }

    /// Decodes an index entry's value into a data block handle within bounds.
    pub(super) fn decode_index_value(&self, v: &[u8]) -> Result<BlockHandle> {
        let h = BlockHandle::decode(v)
            .map_err(|e| self.block_error(e, self.index_handle, self.index.compressed))?;
        self.check_handle(h)?;
        Ok(h)
    }

    /// The stored bytes `entries` entries of this table span, on average
    /// (a scan's bound on what it asks to read ahead, not a guarantee).
    pub(super) fn span_of(&self, entries: u64) -> u64 {
        entries.saturating_mul(self.entry_bytes)
    }

    /// True when a scan asked the OS for the piece holding `offset` (or
    /// the table is not mapped, where nothing is asked).
    pub(super) fn was_asked(&self, offset: u64) -> bool {
        bit_of(&self.asked, offset / ASK_PIECE)
            .is_none_or(|(w, m)| w.load(AtomicOrdering::Relaxed) & m != 0)
    }

    /// Asks the OS to read `[from, from + len)` of the mapped file ahead
    /// of a scan, and notes the pieces it covers.
    pub(super) fn ask(&self, from: u64, len: u64) {
        warm::read_ahead(self.file.as_ref(), from, len);
        let end = from.saturating_add(len);
        let mut piece = from / ASK_PIECE;
        while piece * ASK_PIECE < end {
            let Some((w, m)) = bit_of(&self.asked, piece) else {
                break;
            };
            w.fetch_or(m, AtomicOrdering::Relaxed);
            piece += 1;
        }
    }
}
