//! Writes a table file from entries added in order.

use super::block::BlockBuilder;
use super::filter::BloomBuilder;
use super::format::Compression;
use super::format::{
    compress_block, put_block_trailer, BlockHandle, Footer, BLOCK_TRAILER_LEN, FORMAT_VERSION,
};
use super::properties::{encode_properties, TableProperties};
use crate::error::{Error, Result};
use crate::io::WritableFile;
use crate::types::{compare_internal, parse_internal_key, user_key, ValueKind};
use std::cmp::Ordering;

/// Knobs of the table format (a subset of `Options`, which converts into
/// them; the default is that of the default options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// Uncompressed data block size at which a block is cut.
    pub block_size: usize,
    /// Entries between restart points in data blocks.
    pub restart_interval: usize,
    /// Bloom filter bits per key; 0 writes no filter.
    pub bloom_bits_per_key: usize,
    pub compression: Compression,
    /// Start data blocks at page boundaries and fit them to their pages
    /// (`Options::block_align`); only without compression.
    pub block_align: bool,
    /// Aligned, the most zeros a block leaves before the next page
    /// (`Options::block_align_padding`): a block is cut early, before an
    /// entry that would take it and its trailer past its room, only once
    /// no more than this is left of the room, and the rest of a page is
    /// padded only when it is no more than this.
    pub align_padding: usize,
}

/// The page size data blocks are aligned to ([`TableOptions::block_align`]).
pub const ALIGN_PAGE: usize = 4096;

/// What one more entry may add to a block beyond its key and value: three
/// varints (shared and unshared key length, value length) and a restart
/// point.
const ENTRY_OVERHEAD: usize = 3 * 5 + 4;

/// Zeros that pad a table between aligned data blocks.
const PADDING: [u8; ALIGN_PAGE] = [0; ALIGN_PAGE];

impl TableOptions {
    /// The page data blocks are fitted to, when they are aligned: without
    /// compression, and for block sizes from half a page to a page (a
    /// block that fits one page; smaller blocks seldom straddle a page,
    /// larger ones always need several).
    pub fn alignment(&self) -> Option<usize> {
        (self.block_align
            && self.compression == Compression::None
            && (ALIGN_PAGE / 2..=ALIGN_PAGE).contains(&self.block_size))
        .then_some(ALIGN_PAGE)
    }
}

/// Streams sorted entries into a table file.
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    opts: TableOptions,
    /// `opts.alignment()`.
    align: Option<usize>,
    /// Aligned: the bytes (trailer included) the block being built should
    /// fit, set when its first entry arrives: the block size from a page
    /// start (or after padding to one), else what is left of the page the
    /// block starts in, so that a table that lost its alignment (after a
    /// block larger than a page) finds it again.
    room: usize,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: BloomBuilder,
    props: TableProperties,
    last_key: Vec<u8>,
    offset: u64,
    scratch: Vec<u8>,
    handle_buf: Vec<u8>,
    /// First write error; the builder refuses further work after it.
    error: Option<Error>,
}

/// Writes `raw` (compressed with `c` if that saves >= 12.5 %) plus its
/// trailer at `*offset`; returns its handle.
fn write_block(
    file: &mut dyn WritableFile,
    offset: &mut u64,
    raw: &[u8],
    c: Compression,
    scratch: &mut Vec<u8>,
) -> Result<BlockHandle> {
    let (body, ctype): (&[u8], u8) = if compress_block(raw, c, scratch) {
        (scratch.as_slice(), c as u8)
    } else {
        (raw, Compression::None as u8)
    };
    let mut trailer = Vec::with_capacity(5);
    put_block_trailer(&mut trailer, body, ctype);
    file.append(body)?;
    file.append(&trailer)?;
    let handle = BlockHandle::new(*offset, body.len() as u64);
    *offset += (body.len() + trailer.len()) as u64;
    Ok(handle)
}

/// A fresh table id: nonzero, drawn from the process's random hash keys
/// (seeded by the OS), a per-process counter and the clock.
fn unique_id() -> u64 {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = DRAWN.fetch_add(1, Ordering::Relaxed);
    std::collections::hash_map::RandomState::new().hash_one((n, now, std::process::id())) | 1
}

impl TableBuilder {
    pub fn new(file: Box<dyn WritableFile>, opts: TableOptions) -> Self {
        let offset = file.len();
        TableBuilder {
            file,
            opts,
            align: opts.alignment(),
            room: opts.block_size,
            data_block: BlockBuilder::new(opts.restart_interval),
            index_block: BlockBuilder::new(1),
            filter: BloomBuilder::new(),
            props: TableProperties {
                format_version: FORMAT_VERSION,
                unique_id: unique_id(),
                ..TableProperties::default()
            },
            last_key: Vec::new(),
            offset,
            scratch: Vec::new(),
            handle_buf: Vec::new(),
            error: None,
        }
    }

    /// Adds an entry. Keys must be valid internal keys in strictly increasing
    /// [`compare_internal`] order, else `InvalidArgument` (nothing is added).
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let Some(parsed) = parse_internal_key(ikey) else {
            return Err(Error::InvalidArgument(format!(
                "table key of {} bytes is not a valid internal key",
                ikey.len()
            )));
        };
        let first = self.props.entries == 0;
        if !first && compare_internal(ikey, &self.last_key) != Ordering::Greater {
            return Err(Error::InvalidArgument(
                "table keys must be added in strictly increasing order".into(),
            ));
        }
        if self.opts.bloom_bits_per_key > 0
            && (first || user_key(&self.last_key) != parsed.user_key)
        {
            self.filter.add(parsed.user_key);
        }
        if first {
            self.props.smallest = ikey.to_vec();
        }
        self.props.entries += 1;
        if parsed.kind == ValueKind::Delete {
            self.props.deletions += 1;
        }
        self.props.raw_key_bytes += ikey.len() as u64;
        self.props.raw_value_bytes += value.len() as u64;
        self.props.max_seq = self.props.max_seq.max(parsed.seq);
        self.props.min_seq = if first {
            parsed.seq
        } else {
            self.props.min_seq.min(parsed.seq)
        };
        // Aligned, a block that nearly fills its room is cut before the
        // entry that would take it and its trailer past the room, so that
        // it fits its page (a less full block takes the entry and may need
        // two pages, as unaligned).
        if let Some(page) = self.align {
            if !self.data_block.is_empty() {
                let size = self.data_block.size_estimate() + BLOCK_TRAILER_LEN;
                let room = self.room;
                if size + ikey.len() + value.len() + ENTRY_OVERHEAD > room
                    && size + self.opts.align_padding >= room
                {
                    self.flush_data_block()?;
                }
            }
            if self.data_block.is_empty() {
                let rest = page - (self.offset % page as u64) as usize;
                self.room = if rest <= self.opts.align_padding {
                    self.opts.block_size
                } else {
                    rest.min(self.opts.block_size)
                };
            }
        }
        self.data_block.add(ikey, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        if self.data_block.size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let raw = self.data_block.finish();
        let mut res = Ok(());
        if let Some(page) = self.align {
            // A block that fits a page but not the rest of this one starts
            // on the next, when that rest is small (`align_padding`). A
            // compressed block is never aligned (`alignment`).
            let rest = page - (self.offset % page as u64) as usize;
            let len = raw.len() + BLOCK_TRAILER_LEN;
            if len <= page && len > rest && rest <= self.opts.align_padding {
                res = self.file.append(&PADDING[..rest]);
                self.offset += rest as u64;
            }
        }
        let res = res.and_then(|()| {
            write_block(
                self.file.as_mut(),
                &mut self.offset,
                raw,
                self.opts.compression,
                &mut self.scratch,
            )
        });
        let handle = match res {
            Ok(h) => h,
            Err(e) => {
                self.error = Some(e.clone());
                return Err(e);
            }
        };
        // The block's last key separates it from the next block.
        self.handle_buf.clear();
        handle.encode_to(&mut self.handle_buf);
        self.index_block.add(&self.last_key, &self.handle_buf);
        self.data_block.reset();
        self.props.data_blocks += 1;
        crate::sched::yield_point();
        Ok(())
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.props.entries
    }

    /// Bytes written so far plus the pending data block.
    pub fn estimated_size(&self) -> u64 {
        let pending = if self.data_block.is_empty() {
            0
        } else {
            self.data_block.size_estimate()
        };
        self.offset + pending as u64
    }

    /// Writes the last data block, filter, properties, index and footer, then
    /// flushes and syncs the file. Returns the table's properties.
    pub fn finish(mut self) -> Result<TableProperties> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.flush_data_block()?;
        self.props.largest = self.last_key.clone();
        let file = self.file.as_mut();
        let filter_bytes = self.filter.finish(self.opts.bloom_bits_per_key);
        let filter = if filter_bytes.is_empty() {
            BlockHandle::default()
        } else {
            write_block(
                file,
                &mut self.offset,
                &filter_bytes,
                Compression::None,
                &mut self.scratch,
            )?
        };
        let props_bytes = encode_properties(&self.props, self.opts.compression);
        let properties = write_block(
            file,
            &mut self.offset,
            &props_bytes,
            Compression::None,
            &mut self.scratch,
        )?;
        let index_raw = self.index_block.finish();
        let index = write_block(
            file,
            &mut self.offset,
            index_raw,
            Compression::None,
            &mut self.scratch,
        )?;
        let footer = Footer {
            filter,
            index,
            properties,
            version: FORMAT_VERSION,
        };
        file.append(&footer.encode())?;
        self.offset += footer.encode().len() as u64;
        file.flush()?;
        file.sync()?;
        self.props.file_size = self.offset;
        Ok(self.props)
    }
}
