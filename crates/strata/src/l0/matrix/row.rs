//! One row of the matrix container: a flushed memtable as one file on the
//! fast tier, with a cross-row hint per cell (FORMAT.md §12).
//!
//! ```text
//! row    := header entry* cell* footer
//! header := u64 magic "STRATARW" | u32 version(1) | u32 flags(0)
//!           | u64 row id | u64 hint row id (0: none)            32 bytes
//! entry  := varint(klen) internal_key varint(vlen) value
//! cell   := u32 entry offset | u32 hint                           8 bytes
//! footer := u64 cells offset | u32 cells | u32 masked crc32c(bytes before footer)
//!           | u64 magic                                           24 bytes
//! ```
//!
//! Entries are in internal-key order (user key ascending, newest version
//! first). The hint of cell `i` is the index of the first cell of the hint
//! row whose user key is ≥ cell `i`'s user key (the hint row's cell count
//! when there is none): the two-cursor merge at flush time builds them, and
//! a lookup that misses in this row searches the hint row only between the
//! hints of the cells around the key. Integers are little-endian.

use crate::coding::{get_u32, get_u64, put_u32, put_u64, put_varint};
use crate::error::{Error, Result};
use crate::io::{FileSystem, Mapping, WritableFile};
use crate::iter::InternalIterator;
use crate::types::{self, compare_internal};
use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const ROW_MAGIC: u64 = 0x5354_5241_5441_5257; // "STRATARW"
/// Version 1 (an unmasked checksum) never left development; it is refused.
pub const ROW_VERSION: u32 = 2;
pub const HEADER_LEN: usize = 32;
pub const FOOTER_LEN: usize = 24;
const CELL_LEN: usize = 8;
/// Written in chunks of this size while a row is built.
const CHUNK: usize = 1 << 20;

pub use crate::filename::{parse_row_name, row_name};

/// Builds a row file from entries in internal-key order.
pub struct RowWriter<'a> {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    buf: Vec<u8>,
    crc: u32,
    len: u64,
    cells: Vec<(u32, u32)>,
    /// The row the hints point into, and the merge cursor in it.
    older: Option<&'a Row>,
    cursor: u32,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub deletions: u64,
    pub max_seq: u64,
    /// Smallest sequence written (`u64::MAX` while empty).
    pub min_seq: u64,
}

impl<'a> RowWriter<'a> {
    /// Creates the file of row `id` in `dir`; hints point into `older`.
    pub fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        id: u64,
        older: Option<&'a Row>,
    ) -> Result<RowWriter<'a>> {
        let path = dir.join(row_name(id));
        let file = fs.create(&path)?;
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        put_u64(&mut buf, ROW_MAGIC);
        put_u32(&mut buf, ROW_VERSION);
        put_u32(&mut buf, 0);
        put_u64(&mut buf, id);
        put_u64(&mut buf, older.map_or(0, |o| o.id));
        Ok(RowWriter {
            file,
            path,
            buf,
            crc: 0,
            len: 0,
            cells: Vec::new(),
            older,
            cursor: 0,
            smallest: Vec::new(),
            largest: Vec::new(),
            deletions: 0,
            max_seq: 0,
            min_seq: u64::MAX,
        })
    }

    fn offset(&self) -> u64 {
        self.len + self.buf.len() as u64
    }

    fn spill(&mut self) -> Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, &self.buf);
        self.file.append(&self.buf)?;
        self.len += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Appends one entry (in internal-key order).
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let offset = u32::try_from(self.offset())
            .map_err(|_| Error::InvalidArgument("a matrix row is limited to 4 GiB".into()))?;
        let uk = types::user_key(ikey);
        // The hint: first cell of the older row with user key >= uk. User
        // keys only grow along this row, so the cursor only moves forward.
        let hint = match self.older {
            Some(o) => {
                let n = o.len();
                while self.cursor < n && o.user_key(self.cursor) < uk {
                    self.cursor += 1;
                }
                self.cursor
            }
            None => 0,
        };
        if self.cells.is_empty() {
            self.smallest = ikey.to_vec();
        }
        if let Some(p) = types::parse_internal_key(ikey) {
            self.max_seq = self.max_seq.max(p.seq);
            self.min_seq = self.min_seq.min(p.seq);
            if p.kind == types::ValueKind::Delete {
                self.deletions += 1;
            }
        }
        self.largest.clear();
        self.largest.extend_from_slice(ikey);
        self.cells.push((offset, hint));
        put_varint(&mut self.buf, ikey.len() as u64);
        self.buf.extend_from_slice(ikey);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(value);
        if self.buf.len() >= CHUNK {
            self.spill()?;
        }
        Ok(())
    }

    pub fn entries(&self) -> u64 {
        self.cells.len() as u64
    }

    /// Writes the cells and the footer and syncs the file; returns its size.
    pub fn finish(mut self) -> Result<u64> {
        let cells_offset = self.offset();
        let cells = std::mem::take(&mut self.cells);
        for (off, hint) in &cells {
            put_u32(&mut self.buf, *off);
            put_u32(&mut self.buf, *hint);
            if self.buf.len() >= CHUNK {
                self.spill()?;
            }
        }
        self.spill()?;
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        put_u64(&mut footer, cells_offset);
        put_u32(&mut footer, cells.len() as u32);
        put_u32(&mut footer, crate::coding::mask_crc(self.crc));
        put_u64(&mut footer, ROW_MAGIC);
        self.file.append(&footer)?;
        self.file.sync()?;
        Ok(self.len + footer.len() as u64)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The bytes of a whole row: mapped, or read into memory where the file
/// system cannot map (`MemFs`).
enum Bytes {
    Mapped(Arc<Mapping>),
    Owned(Vec<u8>),
}

/// An open, verified row.
pub struct Row {
    pub id: u64,
    /// The row the hints point into (0: none).
    pub hint_row: u64,
    bytes: Bytes,
    cells_offset: usize,
    n: u32,
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Row({}, {} cells)", self.id, self.n)
    }
}

impl Row {
    /// Opens row file `path` and checks its magic, version, checksum and
    /// every cell's bounds and order; damage is `Corruption`.
    pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<Row> {
        let file = fs.open_mapped(path)?;
        let bytes = match file.mapping() {
            Some(m) => Bytes::Mapped(m.clone()),
            None => {
                let len = usize::try_from(file.len())
                    .map_err(|_| Error::corruption(path, 0, "row larger than memory"))?;
                let mut v = vec![0; len];
                file.read_exact_at(0, &mut v)?;
                Bytes::Owned(v)
            }
        };
        Row::decode(bytes, path)
    }

    /// Decodes a row from its bytes (the fuzz target's entry).
    pub fn from_vec(buf: Vec<u8>) -> Result<Row> {
        Row::decode(Bytes::Owned(buf), Path::new("<row>"))
    }

    fn decode(bytes: Bytes, path: &Path) -> Result<Row> {
        let b: &[u8] = match &bytes {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        };
        let bad = |at: usize, why: &str| Error::corruption(path, at as u64, format!("row: {why}"));
        if b.len() < HEADER_LEN + FOOTER_LEN {
            return Err(bad(0, "shorter than header and footer"));
        }
        let foot = b.len() - FOOTER_LEN;
        if get_u64(b, 0) != Some(ROW_MAGIC) || get_u64(b, foot + 16) != Some(ROW_MAGIC) {
            return Err(bad(0, "bad magic"));
        }
        let version = get_u32(b, 8).unwrap_or(0);
        if version != ROW_VERSION {
            return Err(Error::NotSupported(format!(
                "{}: row format version {version}",
                path.display()
            )));
        }
        let crc = crate::coding::unmask_crc(get_u32(b, foot + 12).unwrap_or(0));
        if crc32c::crc32c(b.get(..foot).unwrap_or_default()) != crc {
            return Err(bad(foot, "checksum mismatch"));
        }
        let id = get_u64(b, 16).unwrap_or(0);
        let hint_row = get_u64(b, 24).unwrap_or(0);
        let cells_offset = get_u64(b, foot).unwrap_or(u64::MAX);
        let n = get_u32(b, foot + 8).unwrap_or(0);
        let cells_offset = usize::try_from(cells_offset).unwrap_or(usize::MAX);
        if cells_offset < HEADER_LEN
            || cells_offset > foot
            || (foot - cells_offset) != n as usize * CELL_LEN
        {
            return Err(bad(foot, "cell array out of bounds"));
        }
        let row = Row {
            id,
            hint_row,
            bytes,
            cells_offset,
            n,
        };
        row.check(path)?;
        Ok(row)
    }

    /// Every entry lies inside the data area and parses; internal keys
    /// ascend. Run once at open so that later reads never meet bad bounds.
    fn check(&self, path: &Path) -> Result<()> {
        let mut prev: Option<&[u8]> = None;
        let mut end = HEADER_LEN;
        for i in 0..self.n {
            let off = self.cell(i).0 as usize;
            let bad =
                |why: &str| Error::corruption(path, off as u64, format!("row cell {i}: {why}"));
            if off != end {
                return Err(bad("entry not where the previous one ended"));
            }
            let (k, v, next) = self
                .parse_entry(off)
                .ok_or_else(|| bad("entry out of bounds"))?;
            if types::parse_internal_key(k).is_none() {
                return Err(bad("malformed internal key"));
            }
            if prev.is_some_and(|p| compare_internal(p, k) != Ordering::Less) {
                return Err(bad("keys out of order"));
            }
            let _ = v;
            prev = Some(k);
            end = next;
        }
        if end != self.cells_offset {
            return Err(Error::corruption(
                path,
                end as u64,
                "row: data area does not end at the cells",
            ));
        }
        Ok(())
    }

    fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    /// (ikey, value, end offset) of the entry at `off`.
    fn parse_entry(&self, off: usize) -> Option<(&[u8], &[u8], usize)> {
        let b = self.bytes().get(off..self.cells_offset)?;
        let (klen, a) = crate::coding::get_varint(b)?;
        let kend = a.checked_add(usize::try_from(klen).ok()?)?;
        let k = b.get(a..kend)?;
        let (vlen, c) = crate::coding::get_varint(b.get(kend..)?)?;
        let vstart = kend + c;
        let vend = vstart.checked_add(usize::try_from(vlen).ok()?)?;
        let v = b.get(vstart..vend)?;
        Some((k, v, off + vend))
    }

    /// Number of cells.
    pub fn len(&self) -> u32 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// (entry offset, hint) of cell `i`.
    #[inline]
    fn cell(&self, i: u32) -> (u32, u32) {
        let at = self.cells_offset + i as usize * CELL_LEN;
        (
            get_u32(self.bytes(), at).unwrap_or(0),
            get_u32(self.bytes(), at + 4).unwrap_or(0),
        )
    }

    /// The hint of cell `i`.
    #[inline]
    pub fn hint(&self, i: u32) -> u32 {
        self.cell(i).1
    }

    /// Internal key and value of cell `i` (checked at open).
    #[inline]
    pub fn entry(&self, i: u32) -> (&[u8], &[u8]) {
        self.parse_entry(self.cell(i).0 as usize)
            .map(|(k, v, _)| (k, v))
            .unwrap_or_default()
    }

    #[inline]
    pub fn ikey(&self, i: u32) -> &[u8] {
        self.entry(i).0
    }

    #[inline]
    pub fn user_key(&self, i: u32) -> &[u8] {
        types::user_key(self.ikey(i))
    }

    /// Offset where cell `i`'s entry starts (`len()`: the end of the data).
    pub fn data_offset(&self, i: u32) -> u64 {
        if i >= self.n {
            self.cells_offset as u64
        } else {
            u64::from(self.cell(i).0)
        }
    }

    /// Bytes of the entries of cells `[from, to)`.
    pub fn bytes_between(&self, from: u32, to: u32) -> u64 {
        self.data_offset(to).saturating_sub(self.data_offset(from))
    }

    /// First cell from `from` whose entry starts at or after byte `offset`
    /// (`len()` if none): where a share of the row's bytes ends.
    pub fn cell_at_offset(&self, offset: u64, from: u32) -> u32 {
        let (mut lo, mut hi) = (from.min(self.n), self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.data_offset(mid) < offset {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// First cell in `[lo, hi)` whose user key is ≥ `uk` (`hi` if none);
    /// adds the key comparisons made to `cmps`.
    pub fn lower_bound(&self, uk: &[u8], mut lo: u32, mut hi: u32, cmps: &mut u64) -> u32 {
        hi = hi.min(self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            *cmps += 1;
            if self.user_key(mid) < uk {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// First cell in `[lo, hi)` whose user key is > `uk`.
    pub fn upper_bound(&self, uk: &[u8], mut lo: u32, mut hi: u32) -> u32 {
        hi = hi.min(self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.user_key(mid) <= uk {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// First cell in `[lo, hi)` whose internal key is ≥ `target`.
    fn seek(&self, target: &[u8], mut lo: u32, mut hi: u32) -> u32 {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if compare_internal(self.ikey(mid), target) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Something that holds an open row.
pub trait RowSource: Send {
    fn row(&self) -> &Row;
}

impl RowSource for &Row {
    fn row(&self) -> &Row {
        self
    }
}

/// The cells `[from, to)` of a row, in order.
pub struct RowIter<R: RowSource> {
    row: R,
    from: u32,
    to: u32,
    /// `to` when not positioned on a cell.
    pos: u32,
}

impl<R: RowSource> RowIter<R> {
    pub fn new(row: R, from: u32, to: u32) -> Self {
        let to = to.min(row.row().len());
        let from = from.min(to);
        RowIter {
            row,
            from,
            to,
            pos: to,
        }
    }
}

impl<R: RowSource> InternalIterator for RowIter<R> {
    fn valid(&self) -> bool {
        self.pos < self.to
    }

    fn seek_to_first(&mut self) {
        self.pos = self.from;
    }

    fn seek_to_last(&mut self) {
        self.pos = if self.to > self.from {
            self.to - 1
        } else {
            self.to
        };
    }

    fn seek(&mut self, target: &[u8]) {
        self.pos = self.row.row().seek(target, self.from, self.to);
    }

    fn next(&mut self) {
        if self.pos < self.to {
            self.pos += 1;
        }
    }

    fn prev(&mut self) {
        self.pos = if self.pos > self.from && self.pos < self.to {
            self.pos - 1
        } else {
            self.to
        };
    }

    fn key(&self) -> &[u8] {
        self.row.row().ikey(self.pos)
    }

    fn value(&self) -> &[u8] {
        self.row.row().entry(self.pos).1
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemFs;
    use crate::types::{internal_key, ValueKind};

    fn write(fs: &MemFs, id: u64, keys: &[&str], older: Option<&Row>) -> Row {
        let dir = Path::new("/fast");
        fs.create_dir_all(dir).expect("dir");
        let mut w = RowWriter::create(fs, dir, id, older).expect("create");
        for (i, k) in keys.iter().enumerate() {
            let ik = internal_key(k.as_bytes(), 100 + i as u64, ValueKind::Value as u8);
            w.add(&ik, format!("v-{k}").as_bytes()).expect("add");
        }
        w.finish().expect("finish");
        Row::open(fs, &dir.join(row_name(id))).expect("open")
    }

    #[test]
    fn hints_point_at_the_lower_bound_in_the_older_row() {
        let fs = MemFs::new();
        let old = write(&fs, 1, &["b", "d", "f", "h"], None);
        let new = write(&fs, 2, &["a", "d", "e", "z"], Some(&old));
        assert_eq!(new.hint_row, 1);
        let hints: Vec<u32> = (0..new.len()).map(|i| new.hint(i)).collect();
        assert_eq!(hints, [0, 1, 2, 4]);
        assert_eq!(new.entry(2), (&internal_key(b"e", 102, 1)[..], &b"v-e"[..]));
        let mut it = RowIter::new(&new, 1, 3);
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push(types::user_key(it.key()).to_vec());
            it.next();
        }
        assert_eq!(seen, [b"d".to_vec(), b"e".to_vec()]);
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let fs = MemFs::new();
        let row = write(&fs, 7, &["k1", "k2", "k3"], None);
        let path = Path::new("/fast").join(row_name(7));
        let good = crate::io::read_all(&fs, &path).expect("read");
        assert_eq!(row.len(), 3);
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            assert!(Row::from_vec(bad).is_err(), "flip at {i} went unnoticed");
        }
        for cut in 0..good.len() {
            assert!(Row::from_vec(good[..cut].to_vec()).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(parse_row_name(&row_name(42)), Some(42));
        assert_eq!(parse_row_name("000042.sst"), None);
        assert_eq!(parse_row_name(".row"), None);
    }
}
