//! Tests of blocks, tables, the cache and corruption handling.

use super::block::{Block, BlockBuilder, BlockIter};
use super::filter::Bloom;
use super::format::Compression;
use super::format::{decode_stored_block, BlockHandle, Footer, FOOTER_LEN};
use super::properties::decode_properties;
use super::*;
use crate::error::{Error, Result};
use crate::io::{FileSystem, PosixFs, RandomAccessFile, WritableFile};
use crate::iter::InternalIterator;
use crate::types::{internal_key, seek_key, user_key, ValueKind, MAX_SEQ};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::Arc;

// ---------- in-memory files ----------

#[derive(Debug)]
struct MemFile(Vec<u8>);

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.0.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| Error::io("mem", std::io::ErrorKind::UnexpectedEof.into()))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

#[derive(Clone, Default)]
struct VecFile(Arc<Mutex<Vec<u8>>>);

impl WritableFile for VecFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.0.lock().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.lock().len() as u64
    }
}

// ---------- helpers ----------

fn ukey(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value_for(i: usize, seq: u64) -> Vec<u8> {
    let len = (i * 7 + seq as usize) % 50;
    let mut v = format!("v{i}-{seq}-").into_bytes();
    v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
    v
}

/// `n` user keys; key i has versions with seqs (i % 3) + 1 down to 1,
/// alternating deletes for seq 2. Sorted in internal-key order.
fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 0..n {
        let versions = (i % 3) as u64 + 1;
        for seq in (1..=versions).rev() {
            let seq = seq * 10 + i as u64 * 100;
            let kind = if seq.is_multiple_of(20) && i % 2 == 0 {
                ValueKind::Delete
            } else {
                ValueKind::Value
            };
            let v = if kind == ValueKind::Delete {
                Vec::new()
            } else {
                value_for(i, seq)
            };
            out.push((internal_key(&ukey(i), seq, kind as u8), v));
        }
    }
    out
}

fn opts(block_size: usize, compression: Compression) -> TableOptions {
    TableOptions {
        block_size,
        restart_interval: 16,
        bloom_bits_per_key: 10,
        compression,
        block_align: false,
        align_padding: 512,
    }
}

/// The data block handles of a table, from its index.
fn data_handles(t: &Table) -> Vec<BlockHandle> {
    let index = Block::new(t.index_bytes()).expect("index");
    let mut it = BlockIter::new(Arc::new(index));
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push(BlockHandle::decode(it.value()).expect("handle"));
        it.next();
    }
    out
}

#[test]
fn aligned_data_blocks_start_at_page_boundaries_and_fit_their_page() {
    // Entries of 100-130 bytes, a few larger than a page.
    let mut kvs: Vec<(Vec<u8>, Vec<u8>)> = (0..3000)
        .map(|i| {
            let len = if i % 997 == 5 { 9000 } else { 100 + i % 31 };
            (
                internal_key(&ukey(i), 7, ValueKind::Value as u8),
                vec![b'v'; len],
            )
        })
        .collect();
    kvs.sort_by(|a, b| crate::types::compare_internal(&a.0, &b.0));
    let aligned = TableOptions {
        block_align: true,
        ..opts(4096, Compression::None)
    };
    let (bytes, props) = build_mem(&kvs, aligned);
    let t = Arc::new(open_mem(bytes.clone(), true).expect("open"));
    let handles = data_handles(&t);
    assert_eq!(handles.len() as u64, props.data_blocks);
    let trailer = super::format::BLOCK_TRAILER_LEN as u64;
    let within_a_page = |hs: &[BlockHandle]| {
        let small: Vec<_> = hs.iter().filter(|h| h.size + trailer <= 4096).collect();
        let inside = small
            .iter()
            .filter(|h| h.offset / 4096 == (h.offset + h.size + trailer - 1) / 4096)
            .count();
        (inside, small.len())
    };
    assert_eq!(handles[0].offset, 0);
    // A block fitted to the rest of its page after a large one can miss
    // by an entry; every other block that fits a page lies within one.
    let (inside, small) = within_a_page(&handles);
    assert!(
        inside + 8 >= small,
        "{inside} of {small} blocks within a page"
    );
    let mut big = 0;
    for h in &handles {
        if h.size + trailer > 4096 {
            big += 1;
            // A block past a page holds a large entry.
            let block = Block::new(bytes[h.offset as usize..(h.offset + h.size) as usize].to_vec())
                .expect("block");
            let mut it = BlockIter::new(Arc::new(block));
            it.seek_to_first();
            let mut largest = 0;
            while it.valid() {
                largest = largest.max(it.value().len());
                it.next();
            }
            assert_eq!(largest, 9000, "a block of {} bytes", h.size);
        }
    }
    assert_eq!(big, 4, "the four 9,000-byte entries");
    // Padding is at most an eighth of a page, and only before a page.
    let mut padded = 0;
    for w in handles.windows(2) {
        let gap = w[1].offset - (w[0].offset + w[0].size + trailer);
        assert!(
            gap <= 512,
            "{gap} bytes of padding after the block at {}",
            w[0].offset
        );
        if gap > 0 {
            padded += 1;
            assert_eq!(w[1].offset % 4096, 0);
        }
    }
    assert!(
        padded > handles.len() / 2,
        "{padded} of {} blocks padded",
        handles.len()
    );
    // Blocks fill their pages: the table is at most 1/8 larger than unaligned.
    let (plain, _) = build_mem(&kvs, opts(4096, Compression::None));
    assert!(
        bytes.len() * 8 <= plain.len() * 9,
        "{} against {}",
        bytes.len(),
        plain.len()
    );
    // What no checksum covers is checked on its own: the padding is zeros.
    t.verify_padding().expect("zeros between blocks");
    let mut stained = bytes.clone();
    let gap_at = handles
        .windows(2)
        .map(|w| (w[0].offset + w[0].size + trailer) as usize)
        .zip(handles[1..].iter())
        .find(|(end, next)| next.offset as usize > *end)
        .map(|(end, _)| end)
        .expect("a padded gap");
    stained[gap_at] = 1;
    let e = open_mem(stained, true)
        .expect("open")
        .verify_padding()
        .expect_err("a stained gap");
    assert!(
        matches!(e, Error::Corruption { offset, .. } if offset == gap_at as u64),
        "{e}"
    );
    // The table reads back whole, by scans, seeks and gets.
    let mut it = TableIter::new(Arc::clone(&t));
    assert!(collect_forward(&mut it) == kvs);
    check_seeks(&mut TableIter::new(Arc::clone(&t)), &kvs);
    for (k, v) in kvs.iter().step_by(37) {
        let got = t.get(k, user_key(k)).expect("get").expect("found");
        assert_eq!(&got.2[..], &v[..]);
    }
    // The same entries unaligned: blocks are cut past 4 KiB and all but a
    // few straddle two pages or more.
    let t = open_mem(plain, true).expect("open");
    let plain_handles = data_handles(&t);
    let inside = plain_handles
        .iter()
        .filter(|h| h.offset / 4096 == (h.offset + h.size + trailer - 1) / 4096)
        .count();
    assert!(
        inside * 4 < plain_handles.len(),
        "{inside} of {} within a page",
        plain_handles.len()
    );
    // With compression, or blocks that do not fit one page, nothing is aligned.
    let lz4 = TableOptions {
        block_align: true,
        ..opts(4096, Compression::Lz4)
    };
    assert_eq!(lz4.alignment(), None);
    assert_eq!(aligned.alignment(), Some(4096));
    assert_eq!(
        TableOptions {
            block_size: 2048,
            ..aligned
        }
        .alignment(),
        Some(4096)
    );
    assert_eq!(
        TableOptions {
            block_size: 512,
            ..aligned
        }
        .alignment(),
        None
    );
    assert_eq!(
        TableOptions {
            block_size: 16384,
            ..aligned
        }
        .alignment(),
        None
    );
}

/// Entries of about 1 KiB: with the default padding a block takes a
/// fourth entry and straddles two pages; with padding up to an entry's size
/// every block holds three and fits its page.
#[test]
fn padding_up_to_an_entry_fits_blocks_of_large_entries_to_one_page() {
    let mut kvs: Vec<(Vec<u8>, Vec<u8>)> = (0..2000)
        .map(|i| {
            (
                internal_key(&ukey(i), 7, ValueKind::Value as u8),
                vec![b'v'; 1024],
            )
        })
        .collect();
    kvs.sort_by(|a, b| crate::types::compare_internal(&a.0, &b.0));
    let trailer = super::format::BLOCK_TRAILER_LEN as u64;
    let layout = |padding: usize| {
        let o = TableOptions {
            block_align: true,
            align_padding: padding,
            ..opts(4096, Compression::None)
        };
        let (bytes, _) = build_mem(&kvs, o);
        let t = Arc::new(open_mem(bytes.clone(), true).expect("open"));
        let hs = data_handles(&t);
        let inside = hs
            .iter()
            .filter(|h| h.offset / 4096 == (h.offset + h.size + trailer - 1) / 4096)
            .count();
        let most_padding = hs
            .windows(2)
            .map(|w| w[1].offset - (w[0].offset + w[0].size + trailer))
            .max()
            .unwrap_or(0);
        // Whatever the layout, the table reads back whole.
        let mut it = TableIter::new(Arc::clone(&t));
        assert!(collect_forward(&mut it) == kvs);
        for (k, v) in kvs.iter().step_by(41) {
            let got = t.get(k, user_key(k)).expect("get").expect("found");
            assert_eq!(&got.2[..], &v[..]);
        }
        t.verify_padding().expect("zeros between blocks");
        (inside, hs.len(), most_padding, bytes.len())
    };
    let (inside, blocks, _, small_len) = layout(512);
    assert!(
        inside * 4 < blocks,
        "{inside} of {blocks} blocks within a page with 512 bytes of padding"
    );
    let (inside, blocks, padding, len) = layout(1100);
    assert_eq!(inside, blocks, "every block within a page");
    assert!(padding <= 1100, "{padding} bytes of padding");
    // Three entries a page instead of four: about a third larger.
    assert!(len * 3 <= small_len * 4 + 4096, "{len} against {small_len}");
}

fn build_mem(kvs: &[(Vec<u8>, Vec<u8>)], o: TableOptions) -> (Vec<u8>, TableProperties) {
    let f = VecFile::default();
    let mut b = TableBuilder::new(Box::new(f.clone()), o);
    for (k, v) in kvs {
        b.add(k, v).expect("add");
    }
    assert_eq!(b.entries(), kvs.len() as u64);
    let props = b.finish().expect("finish");
    let bytes = f.0.lock().clone();
    assert_eq!(props.file_size, bytes.len() as u64);
    (bytes, props)
}

fn open_mem(bytes: Vec<u8>, verify: bool) -> Result<Table> {
    Table::open(
        Arc::new(MemFile(bytes)),
        PathBuf::from("/mem/000001.sst"),
        1,
        Arc::new(BlockCache::new(1 << 20)),
        verify,
    )
}

fn collect_forward(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("iteration status");
    out
}

fn collect_backward(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().expect("iteration status");
    out.reverse();
    out
}

/// Seeks to every key and between keys, checking the landing entry, and
/// steps both ways from there.
fn check_seeks(it: &mut dyn InternalIterator, kvs: &[(Vec<u8>, Vec<u8>)]) {
    for (i, (k, v)) in kvs.iter().enumerate() {
        it.seek(k);
        assert!(it.valid(), "seek to entry {i}");
        assert_eq!(it.key(), &k[..]);
        assert_eq!(it.value(), &v[..]);
        // Between this key's user key and the next user key.
        let mut between = user_key(k).to_vec();
        between.push(0);
        it.seek(&seek_key(&between, MAX_SEQ));
        let want = kvs.iter().position(|(k2, _)| user_key(k2) > &between[..]);
        match want {
            Some(j) => {
                assert!(it.valid());
                assert_eq!(it.key(), &kvs[j].0[..]);
                it.prev();
                assert!(it.valid());
                assert_eq!(it.key(), &kvs[j - 1].0[..]);
                it.next();
                assert_eq!(it.key(), &kvs[j].0[..]);
            }
            None => assert!(!it.valid()),
        }
    }
    if let Some((first, _)) = kvs.first() {
        it.seek(&seek_key(b"", MAX_SEQ));
        assert_eq!(it.key(), &first[..]);
        it.prev();
        assert!(!it.valid());
    }
    it.seek(&seek_key(b"\xff\xff\xff", MAX_SEQ));
    assert!(!it.valid());
    // seek_for_prev (trait default) lands on the last entry <= target.
    if let Some((last, _)) = kvs.last() {
        it.seek_for_prev(&seek_key(b"\xff\xff", 0));
        assert_eq!(it.key(), &last[..]);
    }
    it.status().expect("status");
}

// ---------- blocks ----------

#[test]
fn block_round_trip_with_restart_intervals() {
    let kvs = entries(400);
    for interval in [1, 2, 16, 1000] {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in &kvs {
            b.add(k, v);
        }
        let est = b.size_estimate();
        let bytes = b.finish().to_vec();
        assert_eq!(est, bytes.len());
        let block = Arc::new(Block::new(bytes).expect("valid block"));
        assert_eq!(block.num_restarts(), kvs.len().div_ceil(interval));
        let mut it = BlockIter::new(Arc::clone(&block));
        assert_eq!(collect_forward(&mut it), kvs, "interval {interval}");
        assert_eq!(collect_backward(&mut it), kvs, "interval {interval}");
        check_seeks(&mut it, &kvs);
    }
}

#[test]
fn empty_block_iterates_nothing() {
    let mut b = BlockBuilder::new(16);
    let block = Arc::new(Block::new(b.finish().to_vec()).expect("valid"));
    let mut it = block.iter();
    it.seek_to_first();
    assert!(!it.valid());
    it.seek_to_last();
    assert!(!it.valid());
    it.seek(b"x");
    assert!(!it.valid());
    assert!(it.status().is_ok());
}

#[test]
fn block_builder_reset_reuses() {
    let mut b = BlockBuilder::new(4);
    b.add(&internal_key(b"a", 1, 1), b"1");
    b.finish();
    b.reset();
    assert!(b.is_empty());
    b.add(&internal_key(b"b", 1, 1), b"2");
    let block = Arc::new(Block::new(b.finish().to_vec()).expect("valid"));
    let mut it = block.iter();
    assert_eq!(
        collect_forward(&mut it),
        vec![(internal_key(b"b", 1, 1), b"2".to_vec())]
    );
}

/// Exercises every iterator operation on possibly-bad input; must not panic
/// or loop forever.
fn poke(it: &mut dyn InternalIterator, rng: &mut StdRng) {
    let mut steps = 0;
    it.seek_to_first();
    while it.valid() && steps < 10_000 {
        it.next();
        steps += 1;
    }
    it.seek_to_last();
    while it.valid() && steps < 20_000 {
        it.prev();
        steps += 1;
    }
    for _ in 0..4 {
        let len = rng.gen_range(0..20);
        let t: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        it.seek(&t);
        let _ = (it.key(), it.value());
        it.next();
        it.prev();
        it.seek_for_prev(&t);
    }
    let _ = it.status();
}

#[test]
fn block_decoder_survives_garbage() {
    let mut rng = StdRng::seed_from_u64(0xb10c);
    // Pure garbage.
    for _ in 0..300 {
        let len = rng.gen_range(0..200);
        let buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if let Ok(b) = Block::new(buf.clone()) {
            poke(&mut BlockIter::new(Arc::new(b)), &mut rng);
        }
        let _ = decode_stored_block(buf.clone(), false);
        let _ = decode_stored_block(buf.clone(), true);
        let _ = Bloom::decode(&buf);
        let _ = decode_properties(&buf);
        let _ = BlockHandle::decode(&buf);
        let _ = Footer::decode(&buf);
    }
    // Mutations of a valid block: most decode to errors, none panic.
    let kvs = entries(60);
    let mut b = BlockBuilder::new(4);
    for (k, v) in &kvs {
        b.add(k, v);
    }
    let good = b.finish().to_vec();
    let mut errors = 0;
    for _ in 0..500 {
        let mut buf = good.clone();
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(0..buf.len());
            buf[at] = rng.gen();
        }
        if rng.gen_bool(0.2) {
            buf.truncate(rng.gen_range(0..buf.len()));
        }
        match Block::new(buf) {
            Ok(b) => {
                let mut it = BlockIter::new(Arc::new(b));
                poke(&mut it, &mut rng);
                if it.status().is_err() {
                    errors += 1;
                }
            }
            Err(e) => {
                assert!(e.is_corruption());
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "no mutation was detected at all");
}

#[test]
fn corrupt_block_entry_reports_offset() {
    let mut b = BlockBuilder::new(16);
    b.add(&internal_key(b"a", 1, 1), b"1");
    b.add(&internal_key(b"ab", 1, 1), b"2");
    let mut bytes = b.finish().to_vec();
    // Second entry starts after 3 header bytes + 9 key bytes + 1 value byte;
    // claim it shares 200 bytes.
    bytes[13] = 200;
    let mut it = BlockIter::new(Arc::new(Block::new(bytes).expect("restarts ok")));
    it.seek_to_first();
    assert!(it.valid());
    it.next();
    assert!(!it.valid());
    match it.status() {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 13),
        other => panic!("expected corruption, got {other:?}"),
    }
}

// ---------- tables ----------

#[test]
fn table_round_trip_all_compressions_on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = PosixFs;
    let kvs = entries(1500);
    for (n, c) in [Compression::None, Compression::Lz4, Compression::Zstd]
        .into_iter()
        .enumerate()
    {
        let path = dir.path().join(format!("{n:06}.sst"));
        let mut b = TableBuilder::new(fs.create(&path).expect("create"), opts(256, c));
        let mut last_est = 0;
        for (k, v) in &kvs {
            b.add(k, v).expect("add");
            if c == Compression::None {
                assert!(b.estimated_size() >= last_est);
            }
            last_est = b.estimated_size();
        }
        let props = b.finish().expect("finish");
        assert_eq!(props.file_size, fs.file_size(&path).expect("size"));
        assert_eq!(props.entries, kvs.len() as u64);
        assert!(props.data_blocks > 50, "{} blocks", props.data_blocks);
        assert_eq!(props.smallest, kvs[0].0);
        assert_eq!(props.largest, kvs[kvs.len() - 1].0);
        let dels = kvs
            .iter()
            .filter(|(k, _)| crate::types::trailer(k) & 0xff == 0)
            .count() as u64;
        assert_eq!(props.deletions, dels);
        assert!(dels > 0);

        for mapped in [false, true] {
            let cache = Arc::new(BlockCache::new(1 << 20));
            let file = if mapped {
                fs.open_mapped(&path).expect("open")
            } else {
                fs.open_random(&path).expect("open")
            };
            assert_eq!(file.mapping().is_some(), mapped);
            let t = Arc::new(
                Table::open(file, path.clone(), n as u64, Arc::clone(&cache), true)
                    .expect("open table"),
            );
            assert_eq!(t.properties(), &props);
            assert_eq!(t.compression(), c);
            assert_eq!(t.path(), path.as_path());
            assert_eq!(t.id(), n as u64);
            assert!(t.pinned_bytes() > 0);
            if c != Compression::None {
                assert!(
                    props.file_size < fs.file_size(&dir.path().join("000000.sst")).expect("size")
                );
            }

            let mut it = TableIter::new(Arc::clone(&t));
            assert_eq!(collect_forward(&mut it), kvs, "{c:?} forward");
            assert_eq!(collect_backward(&mut it), kvs, "{c:?} backward");
            check_seeks(&mut it, &kvs);

            // Point lookups of every version at its own sequence.
            for (k, v) in &kvs {
                let p = crate::types::parse_internal_key(k).expect("valid");
                let got = t
                    .get(&seek_key(p.user_key, p.seq), p.user_key)
                    .expect("get");
                assert_eq!(got, Some((p.seq, p.kind, v.clone())));
            }
            // Absent keys: none found.
            for i in 0..300 {
                let uk = format!("key{i:06}x");
                assert_eq!(
                    t.get(&seek_key(uk.as_bytes(), MAX_SEQ), uk.as_bytes())
                        .expect("get"),
                    None
                );
            }
            if mapped && c == Compression::None {
                // Uncompressed blocks are used in place from the map, never cached.
                assert_eq!(cache.hits() + cache.misses(), 0);
                assert_eq!(cache.usage(), 0);
            } else {
                assert!(cache.hits() > 0 && cache.misses() > 0);
                assert!(cache.usage() > 0);
            }
            assert!(t.bytes_read() > 0);
        }
    }
}

/// A mapped block's checksum is verified on its first point lookup only:
/// a damaged block is reported on every lookup that reads it, while bytes
/// changed under the map after a block was verified are trusted (as a
/// block cache trusts what it loaded).
#[test]
fn mapped_blocks_are_verified_once() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000001.sst");
    let kvs = entries(1500);
    let mut b = TableBuilder::new(
        PosixFs.create(&path).expect("create"),
        opts(256, Compression::None),
    );
    for (k, v) in &kvs {
        b.add(k, v).expect("add");
    }
    b.finish().expect("finish");
    let bytes = std::fs::read(&path).expect("read");
    let at = |needle: &[u8]| {
        bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("value in the file")
    };
    // Damage one value before the table is opened.
    let bad = at(&value_for(200, 20010));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open for write");
    f.write_at(b"V", bad as u64).expect("write");
    let file = PosixFs.open_mapped(&path).expect("open");
    assert!(file.mapping().is_some());
    let t = Table::open(
        file,
        path.clone(),
        1,
        Arc::new(BlockCache::new(1 << 20)),
        true,
    )
    .expect("open table");
    assert!(t.has_fences());
    let lookup = |i: usize, seq: u64| t.get(&seek_key(&ukey(i), seq), &ukey(i));
    for _ in 0..2 {
        assert!(matches!(lookup(200, 20010), Err(Error::Corruption { .. })));
        assert_eq!(
            lookup(900, 90010).expect("get").map(|e| e.2),
            Some(value_for(900, 90010))
        );
    }
    // Block of key 900 verified: a byte changed under the map now is read
    // as it is, without a checksum.
    let good = at(&value_for(900, 90010));
    f.write_at(b"W", good as u64).expect("write");
    let mut changed = value_for(900, 90010);
    changed[0] = b'W';
    assert_eq!(lookup(900, 90010).expect("get").map(|e| e.2), Some(changed));
    // Key 1400's block was not read yet: damage there is still found.
    let later = at(&value_for(1400, 140010));
    f.write_at(b"X", later as u64).expect("write");
    assert!(matches!(
        lookup(1400, 140010),
        Err(Error::Corruption { .. })
    ));
    // A table seek verifies the block it lands on once, too.
    let t = Arc::new(t);
    let seek_value = |i: usize, seq: u64| {
        let mut it = TableIter::new(Arc::clone(&t));
        it.seek(&seek_key(&ukey(i), seq));
        (
            it.valid().then(|| it.value().to_vec()),
            it.status().is_err(),
        )
    };
    assert_eq!(seek_value(600, 60010), (Some(value_for(600, 60010)), false));
    let sought = at(&value_for(600, 60010));
    f.write_at(b"Y", sought as u64).expect("write");
    let mut changed = value_for(600, 60010);
    changed[0] = b'Y';
    assert_eq!(seek_value(600, 60010), (Some(changed), false));
    let unread = at(&value_for(1100, 110010));
    f.write_at(b"Z", unread as u64).expect("write");
    assert_eq!(seek_value(1100, 110010), (None, true));
    // Blocks a scan steps into with `next` are verified once as well.
    let scan = || {
        let mut it = TableIter::new(Arc::clone(&t));
        it.seek(&seek_key(&ukey(300), MAX_SEQ));
        let mut got = Vec::new();
        while it.valid() && got.len() < 100 {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        (got, it.status().is_err())
    };
    let (first, failed) = scan();
    assert!(!failed);
    assert_eq!(first.len(), 100);
    let far = at(&value_for(330, 33010));
    f.write_at(b"Q", far as u64).expect("write");
    let (second, failed) = scan();
    assert!(!failed);
    assert_eq!(second.len(), 100);
    assert_ne!(first, second);
}

#[test]
fn get_respects_snapshots() {
    let mut kvs = Vec::new();
    kvs.push((internal_key(b"a", 5, 1), b"a5".to_vec()));
    for (seq, kind, v) in [(30, 1, "k30"), (20, 0, ""), (10, 1, "k10")] {
        kvs.push((internal_key(b"k", seq, kind), v.as_bytes().to_vec()));
    }
    kvs.push((internal_key(b"z", 1, 1), b"z1".to_vec()));
    let (bytes, props) = build_mem(&kvs, opts(64, Compression::None));
    assert_eq!(props.max_seq, 30);
    assert_eq!(props.deletions, 1);
    let t = open_mem(bytes, true).expect("open");
    let get = |seq| t.get(&seek_key(b"k", seq), b"k").expect("get");
    assert_eq!(get(MAX_SEQ), Some((30, ValueKind::Value, b"k30".to_vec())));
    assert_eq!(get(30), Some((30, ValueKind::Value, b"k30".to_vec())));
    assert_eq!(get(29), Some((20, ValueKind::Delete, Vec::new())));
    assert_eq!(get(20), Some((20, ValueKind::Delete, Vec::new())));
    assert_eq!(get(15), Some((10, ValueKind::Value, b"k10".to_vec())));
    assert_eq!(get(9), None);
    assert_eq!(t.get(&seek_key(b"a", 4), b"a").expect("get"), None);
    assert_eq!(
        t.get(&seek_key(b"z", 4), b"z").expect("get"),
        Some((1, ValueKind::Value, b"z1".to_vec()))
    );
    assert_eq!(t.get(&seek_key(b"zz", 4), b"zz").expect("get"), None);
}

#[test]
fn the_row_cache_answers_lookups_that_see_the_whole_table() {
    let mut kvs = Vec::new();
    for (seq, kind, v) in [(30, 1, "k30"), (20, 0, ""), (10, 1, "k10")] {
        kvs.push((internal_key(b"k", seq, kind), v.as_bytes().to_vec()));
    }
    kvs.push((internal_key(b"z", 25, 0), Vec::new()));
    let (bytes, _) = build_mem(&kvs, opts(64, Compression::None));
    let rows = Arc::new(RowCache::new(1 << 20));
    // No block cache: every lookup the row cache does not answer reads.
    let t = Table::open(
        Arc::new(MemFile(bytes)),
        PathBuf::from("/mem/000001.sst"),
        1,
        Arc::new(BlockCache::new(0)),
        true,
    )
    .expect("open")
    .with_rows(Arc::clone(&rows));
    let get = |key: &[u8], seq| t.get(&seek_key(key, seq), key).expect("get");
    let k30 = Some((30, ValueKind::Value, b"k30".to_vec()));
    assert_eq!(get(b"k", MAX_SEQ), k30);
    assert_eq!((rows.hits(), rows.misses()), (0, 1));
    let read = t.bytes_read();
    assert_eq!(get(b"k", MAX_SEQ), k30);
    assert_eq!(
        get(b"k", 30),
        k30,
        "a snapshot at the table's last sequence"
    );
    assert_eq!(rows.hits(), 2);
    assert_eq!(t.bytes_read(), read, "answered without a block");
    // An older snapshot may see an older entry: not from the cache.
    assert_eq!(get(b"k", 29), Some((20, ValueKind::Delete, Vec::new())));
    assert_eq!(get(b"k", 15), Some((10, ValueKind::Value, b"k10".to_vec())));
    assert_eq!((rows.hits(), rows.misses()), (2, 1));
    assert!(t.bytes_read() > read);
    // Tombstones are cached too; keys the table lacks are not.
    let z = Some((25, ValueKind::Delete, Vec::new()));
    assert_eq!(get(b"z", MAX_SEQ), z);
    assert_eq!(get(b"z", MAX_SEQ), z);
    let absent = || {
        t.get_past_filter(&seek_key(b"m", MAX_SEQ), b"m")
            .expect("get")
    };
    assert_eq!(absent(), None);
    assert_eq!(absent(), None);
    assert_eq!((rows.hits(), rows.misses()), (3, 4));
    // Off: lookups neither read nor fill it.
    rows.resize(0);
    assert_eq!(get(b"k", MAX_SEQ), k30);
    assert_eq!((rows.hits(), rows.misses()), (3, 4));
}

#[test]
fn bloom_miss_does_no_io_and_filter_can_be_off() {
    let kvs = entries(500);
    let (bytes, _) = build_mem(&kvs, opts(256, Compression::None));
    let t = open_mem(bytes, true).expect("open");
    let before = t.bytes_read();
    let mut negatives = 0;
    for i in 0..1000 {
        let uk = format!("absent{i}");
        if !t.may_contain(uk.as_bytes()) {
            negatives += 1;
            assert_eq!(
                t.get(&seek_key(uk.as_bytes(), MAX_SEQ), uk.as_bytes())
                    .expect("get"),
                None
            );
            // Searched alongside the filter, the key is still ruled out
            // by it, before any data block is read.
            assert_eq!(
                t.get_likely(&seek_key(uk.as_bytes(), MAX_SEQ), uk.as_bytes())
                    .expect("get_likely"),
                None
            );
        }
    }
    assert!(negatives > 950, "{negatives}");
    // Only the false positives may have read data blocks.
    assert!(t.bytes_read() - before < 60 * 2000);
    for i in 0..500 {
        assert!(t.may_contain(&ukey(i)));
    }

    let mut o = opts(256, Compression::None);
    o.bloom_bits_per_key = 0;
    let (bytes, _) = build_mem(&kvs, o);
    let t = open_mem(bytes, true).expect("open");
    assert!(t.may_contain(b"absent"));
    assert_eq!(collect_forward(&mut TableIter::new(Arc::new(t))), kvs);
}

#[test]
fn empty_table() {
    let (bytes, props) = build_mem(&[], opts(256, Compression::Lz4));
    assert_eq!(props.entries, 0);
    let t = Arc::new(open_mem(bytes, true).expect("open"));
    assert_eq!(t.get(&seek_key(b"a", 1), b"a").expect("get"), None);
    let mut it = TableIter::new(t);
    assert!(collect_forward(&mut it).is_empty());
    assert!(collect_backward(&mut it).is_empty());
    it.seek(b"anything");
    assert!(!it.valid());
}

#[test]
fn builder_rejects_bad_keys() {
    let mut b = TableBuilder::new(Box::new(VecFile::default()), opts(256, Compression::None));
    b.add(&internal_key(b"b", 5, 1), b"v").expect("first");
    for bad in [
        internal_key(b"b", 5, 1),
        internal_key(b"b", 6, 1),
        internal_key(b"a", 1, 1),
    ] {
        assert!(matches!(b.add(&bad, b"v"), Err(Error::InvalidArgument(_))));
    }
    assert!(matches!(
        b.add(b"short", b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        b.add(&internal_key(b"c", 1, 9), b"v"),
        Err(Error::InvalidArgument(_))
    ));
    b.add(&internal_key(b"b", 4, 1), b"v")
        .expect("older version");
    assert_eq!(b.entries(), 2);
    assert_eq!(b.finish().expect("finish").entries, 2);
}

#[test]
fn block_cache_disabled_and_counting() {
    let kvs = entries(300);
    let (bytes, _) = build_mem(&kvs, opts(256, Compression::None));
    let cache = Arc::new(BlockCache::new(0));
    let t = Arc::new(
        Table::open(
            Arc::new(MemFile(bytes)),
            "/mem/x.sst".into(),
            7,
            Arc::clone(&cache),
            true,
        )
        .expect("open"),
    );
    assert_eq!(collect_forward(&mut TableIter::new(Arc::clone(&t))), kvs);
    assert_eq!(cache.hits(), 0);
    assert!(cache.misses() > 0);
    assert_eq!(cache.usage(), 0);
    let read = t.bytes_read();
    assert_eq!(collect_forward(&mut TableIter::new(Arc::clone(&t))), kvs);
    assert!(t.bytes_read() > read, "no cache: blocks are read again");

    // A tiny cache stays within its capacity.
    let cache = Arc::new(BlockCache::new(4096));
    let (bytes, _) = build_mem(&kvs, opts(256, Compression::None));
    let t = Arc::new(
        Table::open(
            Arc::new(MemFile(bytes)),
            "/mem/y.sst".into(),
            8,
            Arc::clone(&cache),
            true,
        )
        .expect("open"),
    );
    assert_eq!(collect_forward(&mut TableIter::new(t)), kvs);
    assert!(cache.usage() <= 4096, "usage {}", cache.usage());
}

// ---------- corruption ----------

fn expect_corruption_in(e: &Error, path: &Path) {
    match e {
        Error::Corruption { file, .. } => assert_eq!(file, path, "{e}"),
        other => panic!("expected corruption in {}, got {other:?}", path.display()),
    }
}

#[test]
fn flipped_data_byte_is_detected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kvs = entries(400);
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let path = dir.path().join("000009.sst");
        let mut b = TableBuilder::new(PosixFs.create(&path).expect("create"), opts(512, c));
        for (k, v) in &kvs {
            b.add(k, v).expect("add");
        }
        b.finish().expect("finish");
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[20] ^= 0x10; // inside the first data block
        std::fs::write(&path, &bytes).expect("write");

        for mapped in [false, true] {
            let open = || {
                let file = if mapped {
                    PosixFs.open_mapped(&path).expect("open")
                } else {
                    PosixFs.open_random(&path).expect("open")
                };
                Arc::new(
                    Table::open(
                        file,
                        path.clone(),
                        9,
                        Arc::new(BlockCache::new(1 << 20)),
                        true,
                    )
                    .expect("metadata is intact"),
                )
            };
            let t = open();
            let (k0, _) = &kvs[0];
            let e = t.get(k0, user_key(k0)).expect_err("corrupt block");
            expect_corruption_in(&e, &path);
            if let Error::Corruption { offset, .. } = e {
                assert_eq!(offset, 0, "first block starts at 0");
            }
            let mut it = TableIter::new(open());
            it.seek_to_first();
            assert!(!it.valid());
            expect_corruption_in(&it.status().expect_err("corrupt"), &path);
            // Keys in later blocks are still readable.
            let (kl, vl) = &kvs[kvs.len() - 1];
            let p = crate::types::parse_internal_key(kl).expect("valid");
            assert_eq!(
                t.get(kl, user_key(kl)).expect("intact block"),
                Some((p.seq, p.kind, vl.clone()))
            );
            // Backward iteration reaches the bad block and stops with the error.
            let mut it = TableIter::new(open());
            it.seek_to_last();
            let mut n = 0;
            while it.valid() {
                n += 1;
                it.prev();
            }
            assert!(n > 0 && n < kvs.len());
            expect_corruption_in(&it.status().expect_err("corrupt"), &path);

            // Without checksum verification an uncompressed block may decode to
            // other values, but corrupt compressed data still never panics.
            let t = Table::open(
                if mapped {
                    PosixFs.open_mapped(&path).expect("open")
                } else {
                    PosixFs.open_random(&path).expect("open")
                },
                path.clone(),
                10,
                Arc::new(BlockCache::new(1 << 20)),
                false,
            )
            .expect("open");
            // Without checksum verification an uncompressed block may decode to
            // other values: the only promise is a typed error, never a panic.
            // Keys in the intact blocks are still read exactly.
            if let Err(e) = t.get(k0, user_key(k0)) {
                expect_corruption_in(&e, &path);
            }
            assert_eq!(
                t.get(kl, user_key(kl)).expect("intact block, unverified"),
                Some((p.seq, p.kind, vl.clone()))
            );
        }
    }
}

#[test]
fn open_rejects_truncated_or_bad_footer() {
    let kvs = entries(200);
    let (good, _) = build_mem(&kvs, opts(256, Compression::None));
    let path = PathBuf::from("/mem/000001.sst");
    let check = |bytes: Vec<u8>, what: &str| {
        let e = open_mem(bytes, true).expect_err(what);
        expect_corruption_in(&e, &path);
    };
    check(Vec::new(), "empty");
    check(good[..good.len() / 2].to_vec(), "half");
    check(good[..good.len() - 1].to_vec(), "one byte short");
    check(good[1..].to_vec(), "first byte missing");
    let n = good.len();
    let mut bad = good.clone();
    bad[n - 1] ^= 1;
    check(bad, "bad magic");
    let mut bad = good.clone();
    bad[n - FOOTER_LEN + 3] ^= 1;
    check(bad, "footer crc");
    let mut bad = good.clone();
    for b in &mut bad[n - FOOTER_LEN..n - 8] {
        *b = 0xab;
    }
    check(bad, "garbage footer");
    // Corrupt index block (just before the footer): crc catches it.
    let mut bad = good.clone();
    bad[n - FOOTER_LEN - 10] ^= 1;
    check(bad, "index crc");
    // Unknown version with a valid crc: NotSupported.
    let mut f = Footer::decode(&good[n - FOOTER_LEN..]).expect("footer");
    f.version = 2;
    let mut bad = good[..n - FOOTER_LEN].to_vec();
    bad.extend_from_slice(&f.encode());
    assert!(matches!(open_mem(bad, true), Err(Error::NotSupported(_))));
    // Handles pointing outside the file.
    let mut f = Footer::decode(&good[n - FOOTER_LEN..]).expect("footer");
    f.index = BlockHandle::new(u64::MAX - 2, 10);
    let mut bad = good[..n - FOOTER_LEN].to_vec();
    bad.extend_from_slice(&f.encode());
    check(bad, "index handle out of range");
}

#[test]
fn open_survives_random_garbage_and_mutations() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for _ in 0..300 {
        let len = rng.gen_range(0..400);
        let mut buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if rng.gen_bool(0.5) && buf.len() >= 8 {
            // Give it the right magic so the footer is parsed further.
            let n = buf.len();
            buf[n - 8..].copy_from_slice(&format::TABLE_MAGIC.to_le_bytes());
        }
        let e = open_mem(buf, true).expect_err("garbage is no table");
        assert!(
            e.is_corruption() || matches!(e, Error::NotSupported(_)),
            "{e}"
        );
    }
    // Random mutations of a valid table, read without data checksums so the
    // block decoders see the damage.
    let kvs = entries(150);
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let (good, _) = build_mem(&kvs, opts(256, c));
        for _ in 0..100 {
            let mut buf = good.clone();
            for _ in 0..rng.gen_range(1..6) {
                let at = rng.gen_range(0..buf.len());
                buf[at] = rng.gen();
            }
            for verify in [false, true] {
                if let Ok(t) = open_mem(buf.clone(), verify) {
                    let t = Arc::new(t);
                    for (k, v) in kvs.iter().step_by(7) {
                        let p = crate::types::parse_internal_key(k).expect("valid");
                        match t.get(k, p.user_key) {
                            // Verified, a read either fails or is right;
                            // unverified, damage may decode as other data.
                            Ok(got) if verify => assert_eq!(
                                got,
                                Some((p.seq, p.kind, v.clone())),
                                "{c:?}: a verified read of a damaged table answered wrongly"
                            ),
                            Ok(_) => {}
                            Err(e) => assert!(
                                e.is_corruption(),
                                "{c:?} verify {verify}: a damaged block gave {e:?}"
                            ),
                        }
                    }
                    poke(&mut TableIter::new(Arc::clone(&t)), &mut rng);
                    if verify && buf[..buf.len() - FOOTER_LEN] != good[..good.len() - FOOTER_LEN] {
                        // With verification, a changed byte never yields a
                        // different successful full scan.
                        let mut it = TableIter::new(t);
                        let mut got = Vec::new();
                        it.seek_to_first();
                        while it.valid() {
                            got.push((it.key().to_vec(), it.value().to_vec()));
                            it.next();
                        }
                        if it.status().is_ok() {
                            assert_eq!(got, kvs);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn shared_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Table>();
    send_sync::<BlockCache>();
    send::<TableIter>();
    send::<TableBuilder>();

    let kvs = Arc::new(entries(600));
    let (bytes, _) = build_mem(&kvs, opts(256, Compression::Lz4));
    let t = Arc::new(open_mem(bytes, true).expect("open"));
    let threads: Vec<_> = (0..4)
        .map(|n| {
            let (t, kvs) = (Arc::clone(&t), Arc::clone(&kvs));
            std::thread::spawn(move || {
                for (k, v) in kvs.iter().skip(n).step_by(3) {
                    let p = crate::types::parse_internal_key(k).expect("valid");
                    let got = t.get(k, p.user_key).expect("get");
                    assert_eq!(got, Some((p.seq, p.kind, v.clone())));
                }
                assert_eq!(collect_backward(&mut TableIter::new(t)), *kvs);
            })
        })
        .collect();
    for th in threads {
        th.join().expect("thread");
    }
}

/// User keys of several shapes: dense hex keys, keys that are prefixes of
/// one another and differ past the fence's 8 bytes, binary keys, and one
/// key with many versions spanning blocks.
fn key_shapes() -> Vec<Vec<Vec<u8>>> {
    let hex: Vec<Vec<u8>> = (0..600u64)
        .map(|i| format!("{:016x}", i * 3).into_bytes())
        .collect();
    let mut nested = vec![b"ab".to_vec(), b"abc".to_vec()];
    for n in 0..12 {
        let mut k = b"ab".to_vec();
        k.extend(std::iter::repeat_n(0u8, n));
        nested.push(k.clone());
        k.push(1);
        nested.push(k.clone());
        // Equal in the fence's 8 bytes, different after them.
        k.extend_from_slice(b"0123456789");
        nested.push(k.clone());
        k.push(b'x');
        nested.push(k);
    }
    let binary: Vec<Vec<u8>> = (0..300u32)
        .map(|i| {
            let mut k = vec![0xff; (i % 5) as usize];
            k.extend_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
            k
        })
        .collect();
    let single = vec![b"only".to_vec()];
    let mut out = vec![hex, nested, binary, single];
    for keys in &mut out {
        keys.sort();
        keys.dedup();
    }
    out
}

#[test]
fn point_lookups_match_a_model_with_and_without_fences() {
    for keys in key_shapes() {
        // Internal keys: "only" gets 200 versions (it spans blocks), the
        // rest one to three.
        let mut kvs = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let versions = if keys.len() == 1 { 200 } else { i % 3 + 1 };
            for v in (1..=versions as u64).rev() {
                let seq = v * 10;
                let kind = if v == 2 { 0 } else { 1 };
                kvs.push((internal_key(k, seq, kind), value_for(i, seq)));
            }
        }
        for block_size in [64, 512, 4096] {
            let (bytes, _) = build_mem(&kvs, opts(block_size, Compression::None));
            let mut targets: Vec<Vec<u8>> = vec![Vec::new(), vec![0], vec![0xff; 40]];
            for k in &keys {
                targets.push(k.clone());
                let mut longer = k.clone();
                longer.push(0);
                targets.push(longer);
                let mut shorter = k.clone();
                shorter.pop();
                targets.push(shorter);
                let mut bumped = k.clone();
                if let Some(last) = bumped.last_mut() {
                    *last = last.wrapping_add(1);
                }
                targets.push(bumped);
            }
            for fenced in [true, false] {
                let mut t = open_mem(bytes.clone(), true).expect("open");
                assert!(t.has_fences(), "the builder's index gets fences");
                if !fenced {
                    t.drop_fences();
                }
                for u in &targets {
                    for seq in [MAX_SEQ, 25, 20, 10, 9, 0] {
                        let seek = seek_key(u, seq);
                        let want = kvs
                            .iter()
                            .find(|(k, _)| {
                                crate::types::compare_internal(k, &seek) != std::cmp::Ordering::Less
                            })
                            .and_then(|(k, v)| {
                                let p = crate::types::parse_internal_key(k)?;
                                (p.user_key == u.as_slice()).then(|| (p.seq, p.kind, v.clone()))
                            });
                        let got = t.get(&seek, u).expect("get");
                        assert_eq!(
                            got, want,
                            "key {u:x?} seq {seq} block {block_size} fenced {fenced}"
                        );
                        // The filter tested alongside the index search:
                        // `None` only where the filter rules the key out.
                        let likely = t.get_likely(&seek, u).expect("get_likely");
                        if t.may_contain(u) {
                            assert_eq!(likely, Some(want), "likely: key {u:x?} seq {seq}");
                        } else {
                            assert_eq!(likely, None, "filtered: key {u:x?} seq {seq}");
                            assert_eq!(want, None);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn index_of_another_shape_falls_back_to_the_block_search() {
    // An index block with several entries per restart point (not what the
    // builder writes) gets no fences; lookups still work through it.
    let kvs = entries(200);
    let (bytes, _) = build_mem(&kvs, opts(128, Compression::None));
    let t = open_mem(bytes, true).expect("open");
    let index = Block::new(t.index_bytes()).expect("index");
    assert!(index.one_entry_per_restart());
    let mut b = BlockBuilder::new(4);
    let mut it = BlockIter::new(Arc::new(index));
    it.seek_to_first();
    while it.valid() {
        b.add(it.key(), it.value());
        it.next();
    }
    let regrouped = Block::new(b.finish().to_vec()).expect("regrouped");
    assert!(!regrouped.one_entry_per_restart());
    assert!(super::fence::Fences::build(&regrouped, |_| true).is_none());
}

#[test]
fn slow_reads_warm_a_mapped_table_within_the_budget() {
    use super::warm::{Warmer, SLOW_READS_TO_WARM};
    let dir = tempfile::tempdir().expect("tempdir");
    let open = |name: &str, warmer: &Arc<Warmer>| {
        let path = dir.path().join(name);
        let mut b = TableBuilder::new(
            PosixFs.create(&path).expect("create"),
            opts(256, Compression::None),
        );
        for (k, v) in &entries(500) {
            b.add(k, v).expect("add");
        }
        b.finish().expect("finish");
        let file = PosixFs.open_mapped(&path).expect("open");
        let len = file.len();
        let mut t = Table::open(file, path, 1, Arc::new(BlockCache::new(1 << 20)), true)
            .expect("open table");
        t.set_warmer(Arc::clone(warmer));
        (t, len)
    };
    let (t, len) = open("000001.sst", &Warmer::new(0));
    for _ in 0..2 * SLOW_READS_TO_WARM {
        t.note_slow_read();
    }
    assert!(!t.warmed(), "a zero budget warms nothing");

    let warmer = Warmer::new(len + len / 2);
    let (a, _) = open("000002.sst", &warmer);
    let (b, _) = open("000003.sst", &warmer);
    for _ in 0..SLOW_READS_TO_WARM - 1 {
        a.note_slow_read();
    }
    assert!(!a.warmed(), "fewer slow reads than the threshold");
    a.note_slow_read();
    assert!(a.warmed());
    assert_eq!(warmer.left(), len / 2);
    assert_eq!(warmer.warmed(), (1, len));
    // More slow reads soon after: no second request, no second reservation.
    for _ in 0..SLOW_READS_TO_WARM {
        a.note_slow_read();
    }
    assert_eq!(warmer.warmed(), (1, len));
    // The budget has no room for a second table until the first closes.
    for _ in 0..SLOW_READS_TO_WARM {
        b.note_slow_read();
    }
    assert!(!b.warmed());
    drop(a);
    assert_eq!(warmer.left(), len + len / 2);
    for _ in 0..SLOW_READS_TO_WARM {
        b.note_slow_read();
    }
    assert!(b.warmed());
    // Readers crossing the threshold together reserve the table once.
    let racing = Warmer::new(10 * len);
    let (c, _) = open("000004.sst", &racing);
    std::thread::scope(|sc| {
        for _ in 0..8 {
            sc.spawn(|| {
                for _ in 0..SLOW_READS_TO_WARM {
                    c.note_slow_read();
                }
            });
        }
    });
    assert!(c.warmed());
    assert_eq!(racing.warmed().1, len);
    assert_eq!(racing.left(), 9 * len);
    drop(c);
    assert_eq!(racing.left(), 10 * len);
    // Lookups on a warmed table still answer.
    let k = ukey(7);
    let got = b.get(&seek_key(&k, MAX_SEQ), &k).expect("get");
    assert!(got.is_some());
}

/// A file that records what the table asks the OS to read ahead, and
/// what it reads.
#[derive(Debug)]
struct RecordingMap {
    inner: Arc<dyn RandomAccessFile>,
    asked: Mutex<Vec<(u64, u64)>>,
    reads: Mutex<Vec<(u64, usize)>>,
}

impl RandomAccessFile for RecordingMap {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.reads.lock().push((offset, buf.len()));
        self.inner.read_exact_at(offset, buf)
    }
    fn mapping(&self) -> Option<&Arc<crate::io::Mapping>> {
        self.inner.mapping()
    }
    fn prefetch(&self, offset: u64, len: u64) {
        self.asked.lock().push((offset, len));
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

/// A table of 60,000 entries in 4 KiB blocks written in `dir`, opened
/// through `open` behind a [`RecordingMap`] (cleared after the open).
fn recorded_table(
    dir: &std::path::Path,
    open: impl Fn(&std::path::Path) -> Result<Arc<dyn RandomAccessFile>>,
) -> (Arc<RecordingMap>, Arc<Table>) {
    let path = dir.join("000001.sst");
    let mut b = TableBuilder::new(
        PosixFs.create(&path).expect("create"),
        opts(4096, Compression::None),
    );
    for (k, v) in &entries(60_000) {
        b.add(k, v).expect("add");
    }
    b.finish().expect("finish");
    let file = Arc::new(RecordingMap {
        inner: open(&path).expect("open"),
        asked: Mutex::new(Vec::new()),
        reads: Mutex::new(Vec::new()),
    });
    let t = Table::open(
        Arc::clone(&file) as Arc<dyn RandomAccessFile>,
        path,
        1,
        Arc::new(BlockCache::new(1 << 20)),
        true,
    )
    .expect("open table");
    file.asked.lock().clear();
    file.reads.lock().clear();
    (file, Arc::new(t))
}

/// A cursor's first block in a piece of a mapped table that no scan asked
/// for is asked for (with what follows it) before it is touched, so that
/// the touch waits for one short read rather than the kernel's
/// read-around; a later seek into that piece asks for nothing, and the
/// scan goes on asking ahead from the window it started with.
#[test]
fn a_seek_into_an_unasked_piece_asks_before_touching_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, t) = recorded_table(dir.path(), |p| PosixFs.open_mapped(p));
    assert!(file.len() > 4 << 20, "a table of several pieces");
    let seek = |i: usize| {
        let mut it = TableIter::new(Arc::clone(&t));
        it.seek(&seek_key(&ukey(i), MAX_SEQ));
        assert!(it.valid());
        assert_eq!(user_key(it.key()), &ukey(i)[..]);
        it
    };
    let mut it = seek(20_000);
    let first: Vec<(u64, u64)> = file.asked.lock().drain(..).collect();
    assert!(!first.is_empty(), "the first touch is asked for");
    let (from, _) = first[0];
    let total: u64 = first.iter().map(|&(_, n)| n).sum();
    assert_eq!(total, super::readahead::FIRST_ASK, "{first:?}");
    // Another cursor seeking into the same piece asks for nothing.
    drop(seek(20_001));
    assert!(file.asked.lock().is_empty());
    // Scanning on asks for what comes after the first window, never for
    // it again.
    for _ in 0..20_000 {
        it.next();
        assert!(it.valid());
    }
    let later: Vec<(u64, u64)> = file.asked.lock().drain(..).collect();
    assert!(!later.is_empty(), "the scan reads ahead");
    assert!(
        later
            .iter()
            .all(|&(at, _)| at >= from + super::readahead::FIRST_ASK),
        "{later:?}"
    );
}

/// A table read with pread asks the OS for nothing on a seek (a point
/// read reads its block alone), and a scan asks ahead of itself once it
/// reads blocks front to back (the table cache advises such files random,
/// so the kernel reads nothing ahead on its own).
#[test]
fn a_pread_table_asks_ahead_only_for_scans() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, t) = recorded_table(dir.path(), |p| PosixFs.open_random(p));
    assert!(t.mapped_bytes() == 0, "read with pread");
    let mut it = TableIter::new(Arc::clone(&t));
    it.seek(&seek_key(&ukey(20_000), MAX_SEQ));
    assert!(it.valid());
    assert!(file.asked.lock().is_empty(), "a seek asks for nothing");
    for _ in 0..5_000 {
        it.next();
        assert!(it.valid());
    }
    let asked: Vec<(u64, u64)> = file.asked.lock().drain(..).collect();
    assert!(!asked.is_empty(), "the scan reads ahead");
}

/// `prefetch_seek` on a table read with pread asks the OS for exactly the
/// block the seek then reads, and for nothing once that block is in the
/// block cache; on a mapped table it asks for nothing.
#[test]
fn a_seek_prefetch_asks_for_the_block_the_seek_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, t) = recorded_table(dir.path(), |p| PosixFs.open_random(p));
    let target = seek_key(&ukey(20_000), MAX_SEQ);
    t.prefetch_seek(&target);
    let asked: Vec<(u64, u64)> = file.asked.lock().drain(..).collect();
    let mut it = TableIter::new(Arc::clone(&t));
    it.seek(&target);
    assert_eq!(user_key(it.key()), &ukey(20_000)[..]);
    let reads: Vec<(u64, usize)> = file.reads.lock().drain(..).collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(asked, [(reads[0].0, reads[0].1 as u64)]);
    // The seek cached the block: a second prefetch asks for nothing.
    t.prefetch_seek(&target);
    assert!(file.asked.lock().is_empty());
    // A target past every key asks for nothing either.
    t.prefetch_seek(&seek_key(b"zzz", MAX_SEQ));
    assert!(file.asked.lock().is_empty());
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, t) = recorded_table(dir.path(), |p| PosixFs.open_mapped(p));
    t.prefetch_seek(&seek_key(&ukey(30_000), MAX_SEQ));
    assert!(file.asked.lock().is_empty(), "mapped");
}

/// A cursor told how many entries its scan takes (`scan_hint`) asks the
/// OS for, and reads, nothing past the span of those entries beyond the
/// block its seek reached, where an unhinted one reads well past it; it
/// returns the same entries, and a walk past the span reads on in pieces
/// as an unhinted one does.
#[test]
fn a_hinted_scan_reads_no_further_than_its_hint() {
    let all = entries(60_000);
    let from = all
        .iter()
        .position(|(k, _)| user_key(k) == &ukey(20_000)[..])
        .expect("key 20000");
    const HINT: usize = 1_000;
    // The furthest byte asked for or read by a cursor over a new table
    // taking `n` entries from key 20000, past the start of the block its
    // seek read.
    let furthest = |dir: &std::path::Path, hint: Option<usize>, n: usize| {
        let (file, t) = recorded_table(dir, |p| PosixFs.open_random(p));
        let mut it = TableIter::new(Arc::clone(&t));
        if let Some(h) = hint {
            it.scan_hint(h);
        }
        it.seek(&seek_key(&ukey(20_000), MAX_SEQ));
        for (k, v) in &all[from..from + n] {
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
            it.next();
        }
        let reads: Vec<(u64, usize)> = file.reads.lock().drain(..).collect();
        let asked: Vec<(u64, u64)> = file.asked.lock().drain(..).collect();
        let start = reads.first().expect("the seek's block").0;
        let end = reads
            .iter()
            .map(|&(o, n)| o + n as u64)
            .chain(asked.iter().map(|&(o, n)| o + n))
            .max()
            .expect("reads");
        (end - start, it, file)
    };
    let (a, b) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    // A block of 4 KiB with the entry that crossed it and its trailer.
    let block = 4096 + 256;
    let (hinted, mut it, file) = furthest(a.path(), Some(HINT), HINT);
    let span = it.table().span_of(HINT as u64);
    assert!(
        hinted <= block + span + block,
        "hinted: {hinted} bytes past the seek, span {span}"
    );
    let (unhinted, _, _) = furthest(b.path(), None, HINT);
    assert!(
        unhinted >= 2 * span,
        "unhinted: {unhinted} bytes past the seek, span {span}"
    );
    // Past the hint the cursor goes on: the block it crossed into alone,
    // then pieces from the first size on, not a read per block.
    for (k, v) in &all[from + HINT..from + 5 * HINT] {
        assert!(it.valid());
        assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        it.next();
    }
    let reads: Vec<(u64, usize)> = file.reads.lock().drain(..).collect();
    assert!(reads[0].1 as u64 <= block, "{reads:?}");
    assert_eq!(reads[1].1, super::readahead::SCAN_FIRST_PIECE, "{reads:?}");
    assert!(reads.len() <= 6, "{reads:?}");
}

/// A user scan over a table read with pread reads on in pieces (the first
/// `SCAN_FIRST_PIECE`, doubling up to `SCAN_PIECE`) once it has read
/// `PREFETCH_AFTER` adjacent blocks, instead of one `pread` per block, and
/// returns the same entries; its next seek reads one block again.
#[test]
fn a_pread_scan_reads_on_in_pieces() {
    use super::readahead::{SCAN_FIRST_PIECE, SCAN_PIECE};
    let dir = tempfile::tempdir().expect("tempdir");
    let (file, t) = recorded_table(dir.path(), |p| PosixFs.open_random(p));
    assert_eq!(t.mapped_bytes(), 0, "read with pread");
    let all = entries(60_000);
    let from = all
        .iter()
        .position(|(k, _)| user_key(k) == &ukey(20_000)[..])
        .expect("key 20000");
    let mut it = TableIter::new(Arc::clone(&t));
    it.seek(&seek_key(&ukey(20_000), MAX_SEQ));
    for (k, v) in &all[from..from + 10_000] {
        assert!(it.valid());
        assert_eq!(it.key(), &k[..]);
        assert_eq!(it.value(), &v[..]);
        it.next();
    }
    let reads: Vec<(u64, usize)> = file.reads.lock().drain(..).collect();
    let blocks = 10_000 * 45 / 4096;
    assert!(
        reads.len() < blocks / 4,
        "{} reads for ~{blocks} blocks",
        reads.len()
    );
    let pieces: Vec<usize> = reads.iter().map(|r| r.1).filter(|&n| n > 8192).collect();
    assert_eq!(
        pieces[..2],
        [SCAN_FIRST_PIECE, 2 * SCAN_FIRST_PIECE],
        "{reads:?}"
    );
    assert!(pieces.contains(&SCAN_PIECE), "{reads:?}");
    it.seek(&seek_key(&ukey(50_000), MAX_SEQ));
    assert!(it.valid());
    assert_eq!(user_key(it.key()), &ukey(50_000)[..]);
    let reads: Vec<(u64, usize)> = file.reads.lock().drain(..).collect();
    assert!(
        reads.len() == 1 && reads[0].1 < 2 * 4096,
        "a seek reads its block alone: {reads:?}"
    );
}
