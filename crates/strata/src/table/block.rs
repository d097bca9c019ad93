//! Prefix-compressed blocks of sorted entries with restart points
//! (LevelDB style), shared by data blocks and the index block.
//!
//! ```text
//! entry*  u32 restart[num_restarts]  u32 num_restarts
//! entry = varint shared | varint non_shared | varint value_len | key[shared..] | value
//! ```
//! Entries at a restart point store their full key (`shared == 0`).

use crate::coding::{get_u32, put_u32, put_varint, Reader};
use crate::error::{corrupt, Error, Result};
use crate::io::Mapping;
use crate::iter::InternalIterator;
use crate::types::compare_internal;
use std::cmp::Ordering;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// Builds one block. Keys must be added in increasing order.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
    entries: usize,
    finished: bool,
}

impl BlockBuilder {
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval: restart_interval.max(1),
            last_key: Vec::new(),
            entries: 0,
            finished: false,
        }
    }

    /// Appends an entry; `key` must sort after the previous one.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        assert!(!self.finished, "add after finish without reset");
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        let delta = key.get(shared..).unwrap_or(&[]);
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, delta.len() as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(delta);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(delta);
        self.counter += 1;
        self.entries += 1;
    }

    /// Appends the restart array and returns the finished block bytes.
    /// Call [`reset`](Self::reset) before reusing the builder.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &r in &self.restarts {
                put_u32(&mut self.buf, r);
            }
            put_u32(&mut self.buf, self.restarts.len() as u32);
            self.finished = true;
        }
        &self.buf
    }

    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.entries = 0;
        self.finished = false;
    }

    /// Size of the block if it were finished now.
    pub fn size_estimate(&self) -> usize {
        if self.finished {
            self.buf.len()
        } else {
            self.buf.len() + 4 * self.restarts.len() + 4
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub fn entries(&self) -> usize {
        self.entries
    }

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }
}

/// The bytes of a block: its own buffer (read, or decompressed), or a range
/// of a memory-mapped table used in place.
#[derive(Debug)]
pub enum BlockBytes {
    Owned(Vec<u8>),
    Mapped {
        map: Arc<Mapping>,
        start: usize,
        end: usize,
    },
}

impl std::ops::Deref for BlockBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            BlockBytes::Owned(v) => v,
            BlockBytes::Mapped { map, start, end } => map.get(*start..*end).unwrap_or(&[]),
        }
    }
}

impl From<Vec<u8>> for BlockBytes {
    fn from(v: Vec<u8>) -> Self {
        BlockBytes::Owned(v)
    }
}

/// A parsed, immutable block (decompressed bytes plus the validated restart
/// array). Shared through `Arc` between the cache and iterators.
#[derive(Debug)]
pub struct Block {
    data: BlockBytes,
    restarts_offset: usize,
    num_restarts: usize,
    /// True if the block was stored compressed (its in-block offsets are not
    /// file offsets).
    pub(crate) compressed: bool,
}

impl Block {
    /// Validates the restart array. Offsets in errors are relative to the block.
    pub fn new(data: impl Into<BlockBytes>) -> Result<Block> {
        let data = data.into();
        let len = data.len();
        let num = get_u32(&data, len.wrapping_sub(4))
            .filter(|_| len >= 4)
            .ok_or_else(|| corrupt(0, format!("block of {len} bytes is too short")))?
            as usize;
        let restarts_len = num
            .checked_mul(4)
            .and_then(|n| n.checked_add(4))
            .filter(|&n| n <= len)
            .ok_or_else(|| {
                corrupt(
                    len.saturating_sub(4) as u64,
                    format!("bad restart count {num}"),
                )
            })?;
        if num == 0 {
            return Err(corrupt(
                len.saturating_sub(4) as u64,
                "block has no restart points",
            ));
        }
        let restarts_offset = len - restarts_len;
        let mut prev: Option<usize> = None;
        for i in 0..num {
            let at = restarts_offset + 4 * i;
            let r = get_u32(&data, at).ok_or_else(|| corrupt(at as u64, "short restart array"))?
                as usize;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restarts_offset,
            };
            if !ok {
                return Err(corrupt(at as u64, format!("bad restart point {r}")));
            }
            prev = Some(r);
        }
        Ok(Block {
            data,
            restarts_offset,
            num_restarts: num,
            compressed: false,
        })
    }

    /// A block with no entries.
    pub fn empty() -> Block {
        Block {
            data: BlockBytes::Owned(vec![0, 0, 0, 0, 1, 0, 0, 0]),
            restarts_offset: 0,
            num_restarts: 1,
            compressed: false,
        }
    }

    /// The block's bytes, restart array included.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Bytes of the block contents.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// Approximate memory charged to the cache for this block.
    pub fn charge(&self) -> usize {
        let own = match &self.data {
            BlockBytes::Owned(v) => v.capacity(),
            BlockBytes::Mapped { .. } => 0,
        };
        own + std::mem::size_of::<Block>()
    }

    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    fn restart_point(&self, i: usize) -> usize {
        get_u32(&self.data, self.restarts_offset + 4 * i).map_or(0, |v| v as usize)
    }

    /// Key and value of the entry at restart point `i`, which stores its
    /// full key; `None` past the last restart point or when it does not
    /// decode.
    pub fn restart_entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        if i >= self.num_restarts {
            return None;
        }
        let e = decode_entry(self, self.restart_point(i))?;
        if e.shared != 0 {
            return None;
        }
        Some((self.data.get(e.delta)?, self.data.get(e.value)?))
    }

    /// True when every entry is at a restart point (an index block): then
    /// [`restart_entry`](Self::restart_entry) `i` is entry `i`.
    pub fn one_entry_per_restart(&self) -> bool {
        (0..self.num_restarts).all(|i| {
            let end = if i + 1 < self.num_restarts {
                self.restart_point(i + 1)
            } else {
                self.restarts_offset
            };
            decode_entry(self, self.restart_point(i)).is_some_and(|e| e.next == end)
        })
    }

    /// Iterator over this block.
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter::new(Arc::clone(self))
    }
}

/// A decoded entry header: bytes shared with the previous key, the key delta
/// and value ranges, and the offset of the next entry.
struct Entry {
    shared: usize,
    delta: Range<usize>,
    value: Range<usize>,
    next: usize,
}

fn decode_entry(block: &Block, off: usize) -> Option<Entry> {
    let region = block.data.get(..block.restarts_offset)?;
    let rest = region.get(off..)?;
    // Most entries' three lengths are below 128, one byte each: decode
    // them at once (LevelDB's fast path), else varint by varint.
    let (shared, non_shared, value_len, head) = match rest {
        [a, b, c, ..] if (a | b | c) < 0x80 => {
            (usize::from(*a), usize::from(*b), usize::from(*c), 3)
        }
        _ => {
            let mut r = Reader::new(rest);
            let shared = usize::try_from(r.varint()?).ok()?;
            let non_shared = usize::try_from(r.varint()?).ok()?;
            let value_len = usize::try_from(r.varint()?).ok()?;
            (shared, non_shared, value_len, r.pos())
        }
    };
    let ks = off.checked_add(head)?;
    let vs = ks.checked_add(non_shared)?;
    let ve = vs.checked_add(value_len)?;
    if ve > region.len() {
        return None;
    }
    Some(Entry {
        shared,
        delta: ks..vs,
        value: vs..ve,
        next: ve,
    })
}

/// Bidirectional cursor over one block, ordered by [`compare_internal`].
/// Bad data makes it invalid and is reported by `status()` (offsets relative
/// to the block). It holds the block shared (`Arc`, the default) or, for a
/// point lookup that ends before the block goes, borrowed (`&Block`).
#[derive(Debug)]
pub struct BlockIter<B: Deref<Target = Block> = Arc<Block>> {
    block: B,
    /// Offset of the current entry; `restarts_offset` when invalid.
    current: usize,
    /// Offset of the entry after the current one.
    next_off: usize,
    /// Restart block containing `current`.
    restart_index: usize,
    key: Vec<u8>,
    value: Range<usize>,
    status: Option<Error>,
}

impl<B: Deref<Target = Block>> BlockIter<B> {
    pub fn new(block: B) -> Self {
        Self::with_key_buffer(block, Vec::new())
    }

    /// An iterator that builds its keys in `key` (cleared), so a caller
    /// walking several blocks in turn allocates once; see
    /// [`into_key_buffer`](Self::into_key_buffer).
    pub fn with_key_buffer(block: B, mut key: Vec<u8>) -> Self {
        key.clear();
        let end = block.restarts_offset;
        let n = block.num_restarts;
        BlockIter {
            block,
            current: end,
            next_off: end,
            restart_index: n,
            key,
            value: 0..0,
            status: None,
        }
    }

    /// The key buffer, for the next [`with_key_buffer`](Self::with_key_buffer).
    pub fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    /// Positions at entry `i` of a block with one entry per restart point
    /// (see [`Block::one_entry_per_restart`]); invalid past the last.
    pub fn seek_to_restart_entry(&mut self, i: usize) {
        if self.status.is_some() {
            return;
        }
        if i >= self.block.num_restarts {
            self.invalidate();
            return;
        }
        self.seek_to_restart_point(i);
        self.parse_next_key();
    }

    /// The block this iterator walks.
    pub fn block(&self) -> &B {
        &self.block
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_offset;
        self.restart_index = self.block.num_restarts;
        self.key.clear();
        self.value = 0..0;
    }

    fn fail(&mut self, off: usize, reason: impl Into<String>) {
        if self.status.is_none() {
            self.status = Some(corrupt(off as u64, reason));
        }
        self.invalidate();
    }

    fn seek_to_restart_point(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        let off = self.block.restart_point(i);
        self.next_off = off;
        self.value = off..off;
    }

    /// Decodes the entry at `next_off`; false at the end or on corruption.
    fn parse_next_key(&mut self) -> bool {
        self.current = self.next_off;
        if self.current >= self.block.restarts_offset {
            self.invalidate();
            return false;
        }
        let Some(e) = decode_entry(&self.block, self.current) else {
            self.fail(self.current, "truncated or malformed block entry");
            return false;
        };
        if e.shared > self.key.len() {
            let cur = self.current;
            self.fail(
                cur,
                format!(
                    "entry shares {} bytes of a {}-byte key",
                    e.shared,
                    self.key.len()
                ),
            );
            return false;
        }
        self.key.truncate(e.shared);
        self.key
            .extend_from_slice(self.block.data.get(e.delta).unwrap_or(&[]));
        self.value = e.value;
        self.next_off = e.next;
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1) < self.current
        {
            self.restart_index += 1;
        }
        true
    }

    /// Full key stored at restart point `i` (must have `shared == 0`).
    fn restart_key(&self, i: usize) -> std::result::Result<&[u8], usize> {
        let off = self.block.restart_point(i);
        match decode_entry(&self.block, off) {
            Some(e) if e.shared == 0 => self.block.data.get(e.delta).ok_or(off),
            _ => Err(off),
        }
    }
}

impl<B: Deref<Target = Block> + Send> InternalIterator for BlockIter<B> {
    fn valid(&self) -> bool {
        self.status.is_none() && self.current < self.block.restarts_offset
    }

    fn seek_to_first(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.seek_to_restart_point(0);
        self.parse_next_key();
    }

    fn seek_to_last(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.seek_to_restart_point(self.block.num_restarts - 1);
        while self.parse_next_key() && self.next_off < self.block.restarts_offset {}
    }

    fn seek(&mut self, target: &[u8]) {
        if self.status.is_some() {
            return;
        }
        // Last restart point whose key is < target.
        let (mut left, mut right) = (0usize, self.block.num_restarts - 1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            match self.restart_key(mid) {
                Ok(k) => {
                    if compare_internal(k, target) == Ordering::Less {
                        left = mid;
                    } else {
                        right = mid - 1;
                    }
                }
                Err(off) => {
                    self.fail(off, "bad entry at restart point");
                    return;
                }
            }
        }
        self.seek_to_restart_point(left);
        while self.parse_next_key() {
            if compare_internal(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn next(&mut self) {
        if self.valid() {
            self.parse_next_key();
        }
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        let original = self.current;
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart_point(self.restart_index);
        while self.parse_next_key() && self.next_off < original {}
    }

    fn key(&self) -> &[u8] {
        if self.valid() {
            &self.key
        } else {
            &[]
        }
    }

    fn value(&self) -> &[u8] {
        if self.valid() {
            self.block.data.get(self.value.clone()).unwrap_or(&[])
        } else {
            &[]
        }
    }

    fn status(&self) -> Result<()> {
        match &self.status {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
