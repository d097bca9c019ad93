//! Harnesses for every decoder of untrusted bytes, shared by the fuzz
//! targets (`fuzz/`) and the seed-corpus replay test
//! (`tests/fuzz_corpus.rs`). Each function decodes `data` and exercises
//! what it decoded; the decoders must return (with whatever error) and
//! never panic. Each returns how many items it decoded, so callers can see
//! progress. The harnesses themselves are test code: the round-trip ones
//! (`edit`, `plan`) fail with `assert_eq!` when a decoded value does not
//! re-encode to itself, in release builds too (not `debug_assert!`), which
//! is the crash report a fuzzer and the corpus replay need.

use crate::batch::WriteBatch;
use crate::compaction::Plan;
pub use crate::edit::{Edit, FileDesc};
use crate::error::{Error, Result};
use crate::io::{Mapping, RandomAccessFile, SequentialFile};
use crate::iter::InternalIterator;
use crate::options::WalRecovery;
pub use crate::rangedel::RangeTombstone;
use crate::table::block::{Block, BlockIter};
use crate::table::{BlockCache, Table, TableIter};
use std::path::PathBuf;
use std::sync::Arc;

/// `buf.len()` bytes of `data` from `offset`, or an I/O error past the end.
fn read_at(data: &[u8], offset: u64, buf: &mut [u8]) -> Result<()> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let src = start
        .checked_add(buf.len())
        .and_then(|end| data.get(start..end))
        .ok_or_else(|| {
            Error::io(
                "fuzz",
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )
        })?;
    buf.copy_from_slice(src);
    Ok(())
}

/// An in-memory file for the decoders.
#[derive(Debug)]
struct Bytes(Vec<u8>, usize);

impl SequentialFile for Bytes {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let rest = self.0.get(self.1..).unwrap_or(&[]);
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.1 += n;
        Ok(n)
    }
}

impl RandomAccessFile for Bytes {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        read_at(&self.0, offset, buf)
    }

    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

/// WAL records, in every recovery mode; each record is decoded as a batch.
pub fn wal(data: &[u8]) -> usize {
    let mut n = 0;
    for mode in [
        WalRecovery::TolerateCorruptedTail,
        WalRecovery::AbsoluteConsistency,
        WalRecovery::PointInTime,
        WalRecovery::SkipAnyCorrupted,
    ] {
        let file = Box::new(Bytes(data.to_vec(), 0));
        let mut r = crate::wal::Reader::new(file, PathBuf::from("fuzz.wal"), mode);
        // Logs are read both ways: as a WAL (a zero-filled rest is the end)
        // and as the manifest (it is damage); the first byte picks.
        if data.first().is_some_and(|b| b & 1 == 1) {
            r = r.zero_filled_end();
        }
        while let Ok(Some(rec)) = r.read_record() {
            n += 1 + batch(&rec);
            if n > 100_000 {
                break;
            }
        }
        let _ = (r.last_good_offset(), r.dropped(), r.skipped_records());
    }
    n
}

/// `WriteBatch::decode` and iteration of the entries, and the same input
/// read as a WAL-format-1 batch (`decode_format(_, 1)`).
pub fn batch(data: &[u8]) -> usize {
    let legacy = WriteBatch::decode_format(data, 1).map_or(0, |b| entries(&b));
    WriteBatch::decode(data).map_or(0, |b| entries(&b)) + legacy
}

fn entries(b: &WriteBatch) -> usize {
    let mut n = 0;
    for e in b.iter() {
        match e {
            Ok(e) => n += 1 + usize::from(e.key.is_empty()),
            Err(_) => break,
        }
    }
    let _ = (b.sequence(), b.len(), b.approximate_size());
    n
}

/// An in-memory file behind a read-only anonymous memory map, so the
/// table's mapped read path (blocks used in place) meets the input too.
#[derive(Debug)]
struct MappedBytes(Arc<Mapping>);

impl MappedBytes {
    fn new(data: &[u8]) -> Option<MappedBytes> {
        if data.is_empty() {
            return None;
        }
        let mut m = memmap2::MmapMut::map_anon(data.len()).ok()?;
        m.copy_from_slice(data);
        Some(MappedBytes(Arc::new(Mapping::new(
            m.make_read_only().ok()?,
        ))))
    }
}

impl RandomAccessFile for MappedBytes {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        read_at(&self.0, offset, buf)
    }

    fn mapping(&self) -> Option<&Arc<Mapping>> {
        Some(&self.0)
    }

    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

/// A table file: `Table::open`, a full scan both ways, and point lookups;
/// read with copies, then through a memory map with and without checksums.
pub fn table(data: &[u8]) -> usize {
    let mut n = table_with(Arc::new(Bytes(data.to_vec(), 0)), true);
    if let Some(m) = MappedBytes::new(data) {
        let m: Arc<dyn RandomAccessFile> = Arc::new(m);
        n += table_with(m.clone(), true);
        n += table_with(m, false);
    }
    n
}

fn table_with(file: Arc<dyn RandomAccessFile>, verify: bool) -> usize {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let Ok(t) = Table::open(file, PathBuf::from("fuzz.table"), 1, cache, verify) else {
        return 0;
    };
    let t = Arc::new(t);
    let mut it = TableIter::new(t.clone());
    let mut keys = Vec::new();
    it.seek_to_first();
    while it.valid() && keys.len() < 10_000 {
        keys.push(it.key().to_vec());
        it.next();
    }
    let _ = it.status();
    it.seek_to_last();
    let mut back = 0;
    while it.valid() && back < 10_000 {
        back += 1;
        it.prev();
    }
    for k in keys.iter().take(64) {
        let uk = crate::types::user_key(k);
        let _ = t.get(k, uk);
        it.seek(k);
    }
    keys.len() + back
}

/// One block: `Block::new` and iteration, seeks included.
pub fn block(data: &[u8]) -> usize {
    let Ok(b) = Block::new(data.to_vec()) else {
        return 0;
    };
    let mut it = BlockIter::new(Arc::new(b));
    let mut n = 0;
    it.seek_to_first();
    while it.valid() && n < 10_000 {
        n += 1;
        let k = it.key().to_vec();
        it.next();
        if n % 7 == 0 {
            it.seek(&k);
            it.next();
        }
    }
    it.seek_to_last();
    while it.valid() && n < 20_000 {
        n += 1;
        it.prev();
    }
    let _ = it.status();
    n
}

/// `version::Edit::decode` (a manifest record); re-encoding must round-trip.
pub fn edit(data: &[u8]) -> usize {
    let Ok(e) = Edit::decode(data) else {
        return 0;
    };
    match Edit::decode(&e.encode()) {
        Ok(again) => assert_eq!(again, e, "an edit must round-trip"),
        Err(err) => panic!("an edit that decoded must re-decode: {err}; {e:?}"),
    }
    e.added.len() + e.deleted.len() + 1
}

/// `compaction::Plan::decode`; re-encoding must round-trip.
pub fn plan(data: &[u8]) -> usize {
    let Ok(p) = Plan::decode(data) else {
        return 0;
    };
    match Plan::decode(&p.encode()) {
        Ok(again) => assert_eq!(again, p, "a plan must round-trip"),
        Err(err) => panic!("a plan that decoded must re-decode: {err}; {p:?}"),
    }
    p.inputs.len() + p.next_inputs.len() + 1
}

/// The compaction worker protocol: a whole frame, and the input read as
/// each payload kind (request, reply, metrics); what decodes must
/// re-encode to itself.
pub fn worker(data: &[u8]) -> usize {
    use crate::compaction::executor::offload::{
        decode_metrics, encode_metrics, Frame, Reply, Request,
    };
    let mut n = 0;
    if let Ok(f) = Frame::decode(data) {
        assert_eq!(
            Frame::decode(&f.encode()).ok(),
            Some(f.clone()),
            "a frame must round-trip"
        );
        n += 1 + worker(&f.payload);
    }
    if let Ok(r) = Request::decode(data) {
        assert_eq!(
            Request::decode(&r.encode()).ok(),
            Some(r.clone()),
            "a request must round-trip"
        );
        n += 1;
    }
    if let Ok(r) = Reply::decode(data) {
        assert_eq!(
            Reply::decode(&r.encode()).ok(),
            Some(r),
            "a reply must round-trip"
        );
        n += 1;
    }
    if let Ok(m) = decode_metrics(data) {
        assert_eq!(
            decode_metrics(&encode_metrics(&m)).ok(),
            Some(m),
            "metrics must round-trip"
        );
        n += 1;
    }
    n
}

/// A harness: decodes its input, returns how many items it decoded.
pub type Harness = fn(&[u8]) -> usize;

/// Every harness by name (the fuzz target names).
pub const TARGETS: [(&str, Harness); 11] = [
    ("wal", wal),
    ("batch", batch),
    ("table", table),
    ("block", block),
    ("edit", edit),
    ("plan", plan),
    ("worker", worker),
    ("row", row),
    ("slab", slab),
    ("options", options),
    ("backup", backup),
];

/// `Options::apply` on `data` as text (invalid UTF-8 replaced): it returns,
/// with whatever error, and never panics, and so does `validate` on what
/// it accepted. Options it accepts print as a list that applies back to
/// options printing the same.
pub fn options(data: &[u8]) -> usize {
    let spec = String::from_utf8_lossy(data);
    let mut o = crate::Options::default();
    if o.apply(&spec).is_err() {
        return 0;
    }
    let _ = o.validate();
    let printed = o.to_string();
    let mut again = crate::Options::default();
    if let Err(e) = again.apply(&printed) {
        panic!("options print as {printed:?}, which does not apply: {e}");
    }
    assert_eq!(
        again.to_string(),
        printed,
        "options do not print back to themselves"
    );
    1
}

/// A backup store's meta file (`backup/meta.rs`, FORMAT §14): it decodes
/// or fails with an error, and what decodes re-encodes to a file that
/// decodes the same.
pub fn backup(data: &[u8]) -> usize {
    let Ok(m) = crate::backup::Meta::decode(data) else {
        return 0;
    };
    let again = crate::backup::Meta::decode(&m.encode());
    assert_eq!(again.as_ref().ok(), Some(&m), "a decoded meta re-encodes");
    m.files.len() + 1
}

/// `l0`'s row file format: a row that opens is
/// walked forward and backward, and each key is found by the searches.
pub fn row(data: &[u8]) -> usize {
    use crate::iter::InternalIterator;
    use crate::l0::{Row, RowIter};
    let Ok(r) = Row::from_vec(data.to_vec()) else {
        return 0;
    };
    let mut cmps = 0;
    for i in 0..r.len() {
        let uk = r.user_key(i).to_vec();
        let at = r.lower_bound(&uk, 0, r.len(), &mut cmps);
        assert!(
            at <= i && r.user_key(at) == uk.as_slice(),
            "lower bound of cell {i}"
        );
        assert!(
            r.upper_bound(&uk, 0, r.len()) > i,
            "upper bound of cell {i}"
        );
        let _ = r.hint(i);
    }
    let mut it = RowIter::new(&r, 0, r.len());
    let mut n = 0;
    it.seek_to_first();
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, r.len() as usize, "forward walk");
    it.seek_to_last();
    while it.valid() {
        n -= 1;
        it.prev();
    }
    assert_eq!(n, 0, "backward walk");
    r.len() as usize + 1
}

/// KVell's page decoder (`kvell::format`): the first byte picks the size
/// class, the rest is a page (or a whole multi-page slot). Every slot that
/// decodes re-encodes to the same bytes; the header and meta decoders run
/// on the same bytes.
pub fn slab(data: &[u8]) -> usize {
    use crate::kvell::format::{self, Class};
    let Some((&c, page)) = data.split_first() else {
        return 0;
    };
    let class = c as usize % format::classes();
    let path = std::path::Path::new("fuzz");
    let _ = format::check_header(page, path, 0, 1, class as u32);
    let _ = format::decode_meta(page, path);
    let Some(geom) = Class::of(class) else {
        return 0;
    };
    let mut n = 0;
    for (i, r) in format::decode_page(page, class) {
        let Ok(s) = r else { continue };
        let start = i * geom.slot;
        let len = format::SLOT_HEADER + s.key.len() + s.value.len();
        let mut again = vec![0u8; len];
        format::encode_slot(&mut again, s.kind, s.ts, s.key, s.value);
        assert_eq!(
            again.as_slice(),
            &page[start..start + len],
            "slot {i} re-encodes"
        );
        n += 1;
    }
    n + 1
}
