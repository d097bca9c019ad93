use super::format::{
    fragment_header, tagged_fragment_header, FragmentType, BLOCK_SIZE, HEADER_SIZE,
    SYNCED_MARK_LEN, TAGGED_FILE_HEADER_LEN, TAGGED_HEADER_SIZE,
};
use super::{Reader, Writer};
use crate::error::{Error, Result};
use crate::io::{FileSystem, PosixFs, WritableFile};
use crate::options::WalRecovery;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};

const ALL_MODES: [WalRecovery; 4] = [
    WalRecovery::TolerateCorruptedTail,
    WalRecovery::AbsoluteConsistency,
    WalRecovery::PointInTime,
    WalRecovery::SkipAnyCorrupted,
];

/// A recognisable payload: record `i` of length `len`.
fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (i.wrapping_mul(31) ^ j.wrapping_mul(7) ^ (j >> 8)) as u8)
        .collect()
}

/// Writes `records` to a new log; returns the path and each record's start offset
/// (the file length before it was added).
fn write_log(dir: &Path, records: &[Vec<u8>]) -> (PathBuf, Vec<u64>) {
    let path = dir.join("000007.log");
    let f = PosixFs.create(&path).expect("create");
    let mut w = Writer::new(f, 7).expect("writer");
    assert_eq!(w.log_number(), 7);
    let mut starts = Vec::new();
    for r in records {
        starts.push(w.len());
        w.add_record(r).expect("add");
    }
    w.sync().expect("sync");
    assert_eq!(w.len(), std::fs::metadata(&path).expect("meta").len());
    (path, starts)
}

/// Reads every record; returns them, the final result (Ok at a clean/tolerated
/// end, the error otherwise) and the reader.
fn read_log(path: &Path, mode: WalRecovery) -> (Vec<Vec<u8>>, Result<()>, Reader) {
    read_log_as(path, mode, true)
}

/// [`read_log`], as a write-ahead log (`zero_filled_end`) or as the manifest.
fn read_log_as(path: &Path, mode: WalRecovery, wal: bool) -> (Vec<Vec<u8>>, Result<()>, Reader) {
    let f = PosixFs.open_sequential(path).expect("open");
    let mut r = Reader::new(f, path.to_path_buf(), mode);
    if wal {
        r = r.zero_filled_end();
    }
    let mut out = Vec::new();
    loop {
        match r.read_record() {
            Ok(Some(rec)) => out.push(rec),
            Ok(None) => return (out, Ok(()), r),
            Err(e) => {
                // Errors are sticky.
                assert!(r.read_record().is_err());
                return (out, Err(e), r);
            }
        }
    }
}

/// Where the first fragment of a record added at file length `off` starts.
fn frag_start(off: u64) -> u64 {
    let left = BLOCK_SIZE as u64 - off % BLOCK_SIZE as u64;
    if left < HEADER_SIZE as u64 {
        off + left
    } else {
        off
    }
}

fn next_block(off: u64) -> u64 {
    (off / BLOCK_SIZE as u64 + 1) * BLOCK_SIZE as u64
}

fn corruption_at(e: &Error) -> (PathBuf, u64, String) {
    match e {
        Error::Corruption {
            file,
            offset,
            reason,
        } => (file.clone(), *offset, reason.clone()),
        other => panic!("expected Corruption, got {other}"),
    }
}

#[test]
fn records_of_awkward_sizes_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = BLOCK_SIZE;
    let mut sizes = vec![0, 1, 7, b - 1, b, b + 1, 100 * 1024, 0, 0, 3 * b + 5];
    // Records that end exactly at, or a few bytes before, a block boundary
    // (exercises the zero trailer and header-only fragments).
    for slack in 0..9 {
        sizes.push(b - 2 * HEADER_SIZE - slack);
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..200 {
        sizes.push(rng.gen_range(0..3000));
    }
    let records: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(i, n))
        .collect();
    let (path, _) = write_log(dir.path(), &records);
    for mode in ALL_MODES {
        let (got, end, r) = read_log(&path, mode);
        end.expect("clean log");
        assert_eq!(got.len(), records.len());
        assert!(got == records, "records differ in mode {mode:?}");
        assert_eq!(r.dropped(), None);
        assert_eq!(r.skipped_records(), 0);
        assert_eq!(r.log_number(), Some(7));
        assert_eq!(
            r.last_good_offset(),
            std::fs::metadata(&path).expect("meta").len()
        );
    }
}

#[test]
fn empty_file_and_header_only_log_are_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, b"").expect("write");
    let (path, _) = write_log(dir.path(), &[]);
    for mode in ALL_MODES {
        for p in [&empty, &path] {
            let (got, end, r) = read_log(p, mode);
            end.expect("valid empty log");
            assert!(got.is_empty());
            assert_eq!(r.dropped(), None);
        }
    }
}

#[test]
fn truncated_last_record_is_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut records: Vec<Vec<u8>> = (0..20).map(|i| payload(i, 500 + i * 37)).collect();
    records.push(payload(99, 100 * 1024)); // spans four blocks
    let (path, starts) = write_log(dir.path(), &records);
    let full = std::fs::read(&path).expect("read");
    let last = frag_start(*starts.last().expect("starts"));
    assert_eq!(
        last,
        *starts.last().expect("starts"),
        "test wants no trailer here"
    );
    let n = records.len() - 1;
    let mut cuts: Vec<u64> = (1..=20).map(|k| last + k).collect();
    cuts.extend((0..40).map(|k| last + 21 + k * 2600));
    cuts.extend([
        next_block(last) - 1,
        next_block(last),
        next_block(last) + 3,
        full.len() as u64 - 1,
    ]);
    for cut in cuts {
        assert!(cut > last && cut < full.len() as u64);
        std::fs::write(&path, &full[..cut as usize]).expect("truncate");
        for mode in [
            WalRecovery::TolerateCorruptedTail,
            WalRecovery::PointInTime,
            WalRecovery::SkipAnyCorrupted,
        ] {
            let (got, end, r) = read_log(&path, mode);
            end.unwrap_or_else(|e| panic!("cut {cut} mode {mode:?}: {e}"));
            assert!(got[..] == records[..n], "cut {cut} mode {mode:?}");
            let (off, reason) = r.dropped().expect("tail reported");
            assert!(
                off >= last && off <= cut,
                "cut {cut}: dropped at {off} ({reason})"
            );
            assert_eq!(r.last_good_offset(), last);
        }
        let (got, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
        assert!(got[..] == records[..n], "cut {cut} absolute");
        let (file, off, _) = corruption_at(&end.expect_err("absolute rejects a torn tail"));
        assert_eq!(file, path);
        assert!(off >= last && off <= cut);
    }
}

#[test]
fn truncated_header_is_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = write_log(dir.path(), &[]);
    let full = std::fs::read(&path).expect("read");
    for cut in 1..full.len() {
        std::fs::write(&path, &full[..cut]).expect("truncate");
        let (got, end, r) = read_log(&path, WalRecovery::TolerateCorruptedTail);
        end.expect("tolerated");
        assert!(got.is_empty());
        assert!(r.dropped().is_some());
        let (_, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
        assert!(end.expect_err("absolute").is_corruption());
    }
}

/// 60 records of ~1 KiB (two blocks' worth) with one byte of record 10 flipped.
fn log_with_flipped_record(dir: &Path) -> (PathBuf, Vec<Vec<u8>>, Vec<u64>, u64) {
    let records: Vec<Vec<u8>> = (0..60).map(|i| payload(i, 1000 + i)).collect();
    let (path, starts) = write_log(dir, &records);
    let mut bytes = std::fs::read(&path).expect("read");
    let bad = frag_start(starts[10]);
    bytes[bad as usize + HEADER_SIZE + 500] ^= 0x40;
    std::fs::write(&path, &bytes).expect("write");
    (path, records, starts, bad)
}

#[test]
fn flipped_byte_mid_file_is_corruption_when_tolerating_the_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, records, _, bad) = log_with_flipped_record(dir.path());
    for mode in [
        WalRecovery::TolerateCorruptedTail,
        WalRecovery::AbsoluteConsistency,
    ] {
        let (got, end, r) = read_log(&path, mode);
        assert!(got[..] == records[..10], "mode {mode:?}");
        let (file, off, reason) = corruption_at(&end.expect_err("mid-file damage"));
        assert_eq!(file, path);
        assert_eq!(off, bad);
        assert!(reason.contains("checksum"), "{reason}");
        assert_eq!(r.last_good_offset(), bad);
    }
}

#[test]
fn flipped_byte_mid_file_stops_in_point_in_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, records, _, bad) = log_with_flipped_record(dir.path());
    let (got, end, r) = read_log(&path, WalRecovery::PointInTime);
    end.expect("point in time stops quietly");
    assert!(got[..] == records[..10]);
    assert_eq!(r.dropped().map(|d| d.0), Some(bad));
    assert_eq!(r.skipped_records(), 0);
}

#[test]
fn flipped_byte_mid_file_is_skipped_in_skip_any_corrupted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, records, starts, bad) = log_with_flipped_record(dir.path());
    let (got, end, r) = read_log(&path, WalRecovery::SkipAnyCorrupted);
    end.expect("skips");
    // The rest of the damaged block is dropped (its lengths cannot be
    // trusted); every record that starts in a later block comes back.
    let resync = next_block(bad);
    let want: Vec<Vec<u8>> = records
        .iter()
        .zip(&starts)
        .enumerate()
        .filter(|(i, (_, &s))| *i < 10 || frag_start(s) >= resync)
        .map(|(_, (r, _))| r.clone())
        .collect();
    assert!(want.len() > 30 && want.len() < 59);
    assert!(
        got == want,
        "got {} records, want {}",
        got.len(),
        want.len()
    );
    assert_eq!(r.skipped_records(), 1);
    assert_eq!(r.dropped().map(|d| d.0), Some(bad));
}

#[test]
fn zero_filled_tail_is_the_end_of_the_log() {
    // What `Writer::sync_ahead` leaves: records, then zeros to the end of
    // the file. In every mode that is a clean end, not damage (a torn tail
    // would stop replay before the next log).
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..10).map(|i| payload(i, 700)).collect();
    let (path, _) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.resize(bytes.len() + 64 * 1024 + 3, 0);
    std::fs::write(&path, &bytes).expect("write");
    for mode in ALL_MODES {
        let (got, end, r) = read_log(&path, mode);
        end.expect("a zero-filled rest is the end");
        assert!(got == records, "{mode:?}");
        assert!(r.dropped().is_none(), "{mode:?}: {:?}", r.dropped());
    }
    // The manifest is never zero-filled: there such a tail is a torn tail
    // (recovery checks what a damaged manifest tail leaves to replay).
    let clean_len = bytes.len() as u64 - 64 * 1024 - 3;
    let (got, end, r) = read_log_as(&path, WalRecovery::TolerateCorruptedTail, false);
    end.expect("tolerated");
    assert!(got == records);
    let (off, reason) = r.dropped().expect("reported");
    assert_eq!(off, clean_len);
    assert!(reason.contains("zero"), "{reason}");
    let (_, end, _) = read_log_as(&path, WalRecovery::AbsoluteConsistency, false);
    assert!(end.expect_err("absolute").is_corruption());
}

#[test]
fn a_long_zeroed_region_before_records_reads_in_linear_time() {
    // 4 MiB of zeros, then a record: damage, found without rescanning the
    // zeros from every position (a rescan from every position would take
    // minutes).
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..3).map(|i| payload(i, 700)).collect();
    let (path, _) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.resize(bytes.len() + (4 << 20), 0);
    let last = payload(7, 100);
    bytes.extend_from_slice(&fragment_header(FragmentType::Full, &last));
    bytes.extend_from_slice(&last);
    std::fs::write(&path, &bytes).expect("write");
    for mode in ALL_MODES {
        let (got, _, _) = read_log(&path, mode);
        assert!(got.starts_with(&records), "{mode:?}");
    }
}

#[test]
fn zero_filled_tail_inside_a_record_is_a_torn_tail() {
    // A record's first fragment, then zeros: the record never completed.
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..3).map(|i| payload(i, 700)).collect();
    let (path, _) = write_log(dir.path(), &records);
    let clean_len = std::fs::metadata(&path).expect("meta").len();
    let mut bytes = std::fs::read(&path).expect("read");
    let first = payload(9, 100);
    bytes.extend_from_slice(&fragment_header(FragmentType::First, &first));
    bytes.extend_from_slice(&first);
    bytes.resize(bytes.len() + 64 * 1024, 0);
    std::fs::write(&path, &bytes).expect("write");
    for mode in [
        WalRecovery::TolerateCorruptedTail,
        WalRecovery::PointInTime,
        WalRecovery::SkipAnyCorrupted,
    ] {
        let (got, end, r) = read_log(&path, mode);
        end.expect("torn tail tolerated");
        assert!(got == records, "{mode:?}");
        let (off, _) = r.dropped().expect("reported");
        assert_eq!(off, clean_len, "{mode:?}");
    }
    let (got, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
    assert!(got == records);
    assert!(end.expect_err("absolute").is_corruption());
}

#[test]
fn sync_ahead_zero_fills_and_the_reader_stops_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000008.log");
    let mut w = Writer::new_wal(PosixFs.create(&path).expect("create"), 8).expect("writer");
    let mut records = Vec::new();
    // Past the first zero-filled MiB, so the region is extended once.
    for i in 0..1500 {
        let r = payload(i, 1000);
        w.add_record(&r).expect("add");
        w.sync_ahead().expect("sync");
        records.push(r);
    }
    let len = w.len();
    let on_disk = std::fs::metadata(&path).expect("meta").len();
    assert!(len > 1 << 20, "{len}");
    assert!(
        on_disk >= len + (256 << 10) && on_disk <= len + (1 << 20),
        "zero-filled ahead of the records: file {on_disk}, records end at {len}"
    );
    let bytes = std::fs::read(&path).expect("read");
    assert!(bytes[len as usize..].iter().all(|&b| b == 0));
    // Dropped without a close, as in a crash: every mode reads every record.
    drop(w);
    for mode in ALL_MODES {
        let (got, end, r) = read_log(&path, mode);
        end.expect("clean end");
        assert!(
            got == records,
            "{mode:?}: {} of {}",
            got.len(),
            records.len()
        );
        assert!(r.dropped().is_none(), "{mode:?}");
    }
}

#[test]
fn zeroed_block_followed_by_records_is_mid_file_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..100).map(|i| payload(i, 1500)).collect();
    let (path, _) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[BLOCK_SIZE..2 * BLOCK_SIZE].fill(0);
    std::fs::write(&path, &bytes).expect("write");
    let (_, end, _) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    let (_, off, _) = corruption_at(&end.expect_err("hole"));
    assert_eq!(off, BLOCK_SIZE as u64);
    let (got_pit, end, _) = read_log(&path, WalRecovery::PointInTime);
    end.expect("pit");
    let (got_skip, end, r) = read_log(&path, WalRecovery::SkipAnyCorrupted);
    end.expect("skip");
    assert!(got_skip.len() > got_pit.len());
    assert_eq!(r.skipped_records(), 1);
    assert_eq!(got_skip.last(), records.last());
    // Whatever comes back is a subsequence of what was written.
    let mut it = records.iter();
    assert!(got_skip.iter().all(|g| it.any(|r| r == g)));
}

#[test]
fn bad_header_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..5).map(|i| payload(i, 100)).collect();
    let (path, _) = write_log(dir.path(), &records);
    let good = std::fs::read(&path).expect("read");

    // A flipped magic byte: the header fails its checksum and records follow.
    let mut bytes = good.clone();
    bytes[HEADER_SIZE] ^= 1;
    std::fs::write(&path, &bytes).expect("write");
    for mode in ALL_MODES {
        let (got, end, _) = read_log(&path, mode);
        assert!(got.is_empty());
        let (file, off, _) = corruption_at(&end.expect_err("bad header"));
        assert_eq!((file, off), (path.clone(), 0));
    }

    // A well-formed header record with the wrong magic, even with nothing after it.
    let mut wrong = Vec::new();
    wrong.extend_from_slice(b"NOTAWAL!");
    wrong.extend_from_slice(&1u32.to_le_bytes());
    wrong.extend_from_slice(&7u64.to_le_bytes());
    let mut bytes = fragment_header(FragmentType::Header, &wrong).to_vec();
    bytes.extend_from_slice(&wrong);
    std::fs::write(&path, &bytes).expect("write");
    for mode in ALL_MODES {
        let (_, end, _) = read_log(&path, mode);
        let (_, _, reason) = corruption_at(&end.expect_err("wrong magic"));
        assert!(reason.contains("magic"), "{reason}");
    }

    // No header: the file starts with an ordinary record.
    let mut bytes = fragment_header(FragmentType::Full, b"hello").to_vec();
    bytes.extend_from_slice(b"hello");
    std::fs::write(&path, &bytes).expect("write");
    for mode in ALL_MODES {
        let (_, end, _) = read_log(&path, mode);
        assert!(end.expect_err("missing header").is_corruption());
    }

    // A newer format version.
    let mut newer = good.clone();
    newer[HEADER_SIZE + 8..HEADER_SIZE + 12]
        .copy_from_slice(&(super::format::WAL_VERSION + 1).to_le_bytes());
    let fixed = fragment_header(FragmentType::Header, &newer[HEADER_SIZE..HEADER_SIZE + 20]);
    newer[..HEADER_SIZE].copy_from_slice(&fixed);
    std::fs::write(&path, &newer).expect("write");
    let (_, end, _) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    assert!(matches!(end, Err(Error::NotSupported(_))));
}

#[test]
fn random_damage_never_panics_or_invents_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xdead_beef);
    let records: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            let n = rng.gen_range(0..20_000);
            payload(i, n)
        })
        .collect();
    let (path, _) = write_log(dir.path(), &records);
    damage_rounds(&path, &records, &mut rng, false);
    // Pure garbage.
    for _ in 0..20 {
        let n = rng.gen_range(0..3 * BLOCK_SIZE);
        let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        std::fs::write(&path, &bytes).expect("write");
        for mode in ALL_MODES {
            let (got, _, _) = read_log(&path, mode);
            assert!(got.is_empty());
        }
    }
}

/// A file whose appends fail after `ok` calls.
struct FailingFile {
    ok: usize,
    len: u64,
}

impl WritableFile for FailingFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.ok == 0 {
            return Err(Error::io("failing", std::io::Error::other("disk on fire")));
        }
        self.ok -= 1;
        self.len += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
}

#[test]
fn writer_refuses_work_after_a_failure_and_needs_an_empty_file() {
    let mut w = Writer::new(Box::new(FailingFile { ok: 3, len: 0 }), 1).expect("header fits");
    w.add_record(b"x")
        .expect_err("second append of the record fails");
    // Sticky, even for calls that would succeed on their own.
    assert!(w.flush().is_err());
    assert!(w.add_record(b"").is_err());
    assert!(Writer::new(Box::new(FailingFile { ok: 9, len: 5 }), 1).is_err());
}

#[test]
fn damage_followed_by_records_in_the_same_block_is_not_a_tail() {
    // A small log that fits in one block: a flipped byte in record 2 must not
    // be mistaken for a torn tail just because no later block exists.
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..10).map(|i| payload(i, 50)).collect();
    let (path, starts) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[starts[2] as usize + HEADER_SIZE + 10] ^= 0xff;
    std::fs::write(&path, &bytes).expect("write");
    let (got, end, _) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    assert!(got[..] == records[..2]);
    let (_, off, _) = corruption_at(&end.expect_err("mid-file"));
    assert_eq!(off, starts[2]);
    let (got, end, r) = read_log(&path, WalRecovery::PointInTime);
    end.expect("pit");
    assert!(got[..] == records[..2]);
    assert_eq!(r.dropped().map(|d| d.0), Some(starts[2]));

    // The same flip in the last record is a torn tail.
    let (path, starts) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[starts[9] as usize + HEADER_SIZE + 10] ^= 0xff;
    std::fs::write(&path, &bytes).expect("write");
    let (got, end, r) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    end.expect("tail");
    assert!(got[..] == records[..9]);
    assert_eq!(r.dropped().map(|d| d.0), Some(starts[9]));
}

#[test]
fn header_bytes_match_the_documented_layout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = write_log(dir.path(), &[payload(0, 40_000)]);
    let b = std::fs::read(&path).expect("read");
    assert_eq!(b.len(), 40_041);
    assert_eq!(&b[4..7], &[20, 0, 5]);
    assert_eq!(&b[7..15], b"STRATWAL");
    assert_eq!(&b[15..19], &2u32.to_le_bytes());
    assert_eq!(&b[19..27], &7u64.to_le_bytes());
    assert_eq!(&b[31..34], &[0xde, 0x7f, 2]); // FIRST, 32734 bytes
    assert_eq!(&b[32772..32775], &[0x62, 0x1c, 4]); // LAST, 7266 bytes
}

#[test]
fn a_format_1_log_is_read_and_its_batches_decoded() {
    use super::format::WAL_MAGIC;
    // A log as WAL format 1 wrote it: header record with version 1, then one
    // batch whose entries carry a keyspace byte (put k=vv, delete x, seq 5).
    let mut header = Vec::new();
    header.extend_from_slice(&WAL_MAGIC.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    header.extend_from_slice(&7u64.to_le_bytes());
    let batch: &[u8] = &[
        5, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, b'k', 2, b'v', b'v', 0, 0, 1, b'x',
    ];
    let mut bytes = Vec::new();
    for (ty, p) in [
        (FragmentType::Header, &header[..]),
        (FragmentType::Full, batch),
    ] {
        bytes.extend_from_slice(&fragment_header(ty, p));
        bytes.extend_from_slice(p);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000007.log");
    std::fs::write(&path, &bytes).expect("write");
    let mut r = Reader::new(
        PosixFs.open_sequential(&path).expect("open"),
        path.clone(),
        WalRecovery::AbsoluteConsistency,
    );
    let rec = r.read_record().expect("read").expect("one record");
    assert_eq!(r.format_version(), 1);
    let b = crate::WriteBatch::decode_format(&rec, r.format_version()).expect("decode");
    let mut want = crate::WriteBatch::new();
    want.put("k", "vv");
    want.delete("x");
    want.set_sequence(5);
    assert_eq!(b, want);
    // The same bytes read as the current format are corruption, not data.
    assert!(crate::WriteBatch::decode(&rec).is_err());
    assert!(r.read_record().expect("end").is_none());
}

/// Writes `records` through a log made by `PosixFs::create_log` (a shared
/// map, its blocks reserved ahead); `sync_every` records also
/// `sync_ahead`. Checks, before the writer is dropped (as in a process
/// crash), that the file is longer than the records and zero past them and
/// that every mode reads every record; returns the path and the records'
/// end.
fn write_mapped_log(dir: &Path, records: &[Vec<u8>], sync_every: usize) -> (PathBuf, u64) {
    let path = dir.join("000009.log");
    let mut w = Writer::new_wal(PosixFs.create_log(&path).expect("create"), 9).expect("writer");
    for (i, r) in records.iter().enumerate() {
        w.add_record(r).expect("add");
        if sync_every > 0 && i % sync_every == 0 {
            w.sync_ahead().expect("sync");
        } else {
            w.flush().expect("flush");
        }
    }
    let len = w.len();
    let bytes = std::fs::read(&path).expect("read");
    assert!(
        bytes.len() as u64 > len,
        "reserved ahead: file {}, records end at {len}",
        bytes.len()
    );
    assert!(bytes[len as usize..].iter().all(|&b| b == 0));
    for mode in ALL_MODES {
        let (got, end, r) = read_log(&path, mode);
        end.expect("clean end");
        assert!(
            got == records,
            "{mode:?}: {} of {}",
            got.len(),
            records.len()
        );
        assert!(r.dropped().is_none(), "{mode:?}");
    }
    drop(w);
    (path, len)
}

#[test]
fn mapped_log_reads_back_and_is_cut_to_its_records_when_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Several 1 MiB reservations, records of every size class (fragments
    // across blocks, reservation steps and pages).
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let records: Vec<Vec<u8>> = (0..3000)
        .map(|i| payload(i, rng.gen_range(0..3000)))
        .collect();
    let (path, len) = write_mapped_log(dir.path(), &records, 0);
    assert!(len > 3 << 20, "{len}");
    assert_eq!(std::fs::metadata(&path).expect("meta").len(), len);
    let (got, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
    end.expect("clean");
    assert!(got == records);
}

#[test]
fn mapped_log_crosses_map_windows() {
    // Past one 64 MiB window: the second is mapped from the append
    // position, mid-block and mid-record.
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..1100).map(|i| payload(i, 61_000 + i)).collect();
    let (path, len) = write_mapped_log(dir.path(), &records, 0);
    assert!(len > 64 << 20, "{len}");
    let (got, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
    end.expect("clean");
    assert!(got == records);
}

#[test]
fn mapped_log_with_synced_writes_reserves_ahead() {
    // `sync_ahead` reserves blocks past the records (they read as zeros)
    // while records are appended, through the map or with pwrite after a
    // sync: the reader stops at the zeros and finds every record.
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..2500).map(|i| payload(i, 1000 + i % 7)).collect();
    let (path, len) = write_mapped_log(dir.path(), &records, 3);
    assert_cut_and_read_back(&path, len, &records);
}

/// A dropped log is cut to its records, and every mode reads them all.
fn assert_cut_and_read_back(path: &Path, len: u64, records: &[Vec<u8>]) {
    assert_eq!(std::fs::metadata(path).expect("meta").len(), len);
    for mode in ALL_MODES {
        let (got, end, _) = read_log(path, mode);
        end.expect("clean");
        assert!(got == records, "{mode:?}");
    }
}

#[test]
fn mapped_log_moves_between_map_and_pwrite_around_syncs() {
    // A sync unmaps the window being written and the next appends use
    // pwrite(2); after enough unsynced appends a new window is mapped at
    // the append position, mid-block: every record must survive each move,
    // with blocks reserved ahead 1 MiB at a time in between.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let records: Vec<Vec<u8>> = (0..4000)
        .map(|i| payload(i, rng.gen_range(0..3000)))
        .collect();
    let (path, len) = write_mapped_log(dir.path(), &records, 97);
    assert!(len > 3 << 20, "{len}");
    assert_cut_and_read_back(&path, len, &records);
}

/// A write-ahead log (format 4): `synced` records each followed by a sync (the second
/// and later syncs' marks say where the one before ended), then `unsynced`
/// records only flushed. Returns the path, each record's (start, end)
/// and the offset the last sync reached.
fn marked_log(dir: &Path, synced: usize, unsynced: usize) -> (PathBuf, Vec<(u64, u64)>, u64) {
    let path = dir.join("000011.log");
    let mut w = Writer::new_wal(PosixFs.create_log(&path).expect("create"), 11).expect("writer");
    let mut spans = Vec::new();
    let mut synced_at = 0;
    for i in 0..synced + unsynced {
        let start = w.len();
        w.add_record(&payload(i, 900)).expect("add");
        spans.push((start, w.len()));
        if i < synced {
            w.sync().expect("sync");
            synced_at = w.len();
        } else {
            w.flush().expect("flush");
        }
    }
    drop(w);
    (path, spans, synced_at)
}

fn zero_page_at(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).expect("read");
    let at = (at as usize) / 4096 * 4096;
    bytes[at..at + 4096].fill(0);
    std::fs::write(path, &bytes).expect("write");
}

#[test]
fn a_gap_after_the_last_sync_is_a_torn_tail_even_with_records_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, spans, synced_at) = marked_log(dir.path(), 20, 40);
    // A page well past the last sync zeroed, as a power loss can leave it
    // when later pages reached the disk first.
    let (gap_start, _) = spans[45];
    assert!(gap_start > synced_at + 4096);
    zero_page_at(&path, gap_start);
    let intact = spans
        .iter()
        .take_while(|&&(_, end)| end <= gap_start / 4096 * 4096)
        .count();
    let (got, end, r) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    end.expect("a torn tail");
    assert_eq!(got.len(), intact);
    assert!(r.dropped().is_some());
    // Without marks (the rule for version-2 logs) it would be mid-file
    // damage; AbsoluteConsistency still refuses it.
    let (_, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
    corruption_at(&end.expect_err("absolute"));
}

#[test]
fn damage_before_a_completed_sync_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, spans, synced_at) = marked_log(dir.path(), 20, 5);
    // Record 3 was synced, and the later marks say that sync completed.
    let (start, _) = spans[3];
    assert!(start + 4096 < synced_at);
    zero_page_at(&path, start + 2000);
    let (got, end, _) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    let (_, off, _) = corruption_at(&end.expect_err("synced records damaged"));
    assert!(off <= start + 2000, "{off}");
    assert!(got.len() < 6, "{}", got.len());
    // The last synced record: nothing was appended after its sync, so no
    // mark says that sync completed, and damage in it is a torn tail (the
    // one case the marks cannot tell, DURABILITY.md).
    let (path, spans, _) = marked_log(dir.path(), 20, 0);
    let (start, end_19) = spans[19];
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[(start + 100) as usize] ^= 0x40;
    std::fs::write(&path, &bytes).expect("write");
    let (got, end, r) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    end.expect("a torn tail");
    assert_eq!(got.len(), 19);
    // (The record starts after the mark of the sync before it.)
    let dropped_at = r.dropped().expect("reported").0;
    let mark = (TAGGED_HEADER_SIZE + SYNCED_MARK_LEN) as u64;
    assert!((start..=start + mark).contains(&dropped_at), "{dropped_at}");
    assert!(end_19 > start);
}

#[test]
fn sync_final_confirms_the_sync_so_any_damage_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000012.log");
    let mut w = Writer::new_wal(PosixFs.create_log(&path).expect("create"), 12).expect("writer");
    for i in 0..30 {
        w.add_record(&payload(i, 700)).expect("add");
        w.flush().expect("flush");
    }
    let last_start = w.len() - 700 - TAGGED_HEADER_SIZE as u64;
    w.sync_final().expect("sync");
    let after = w.len();
    // Nothing appended since: no more marks.
    w.sync_final().expect("again");
    assert_eq!(w.len(), after);
    drop(w);
    for mode in ALL_MODES {
        let (got, end, _) = read_log(&path, mode);
        end.expect("clean");
        assert_eq!(got.len(), 30, "{mode:?}");
    }
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[(last_start + 50) as usize] ^= 0x01;
    std::fs::write(&path, &bytes).expect("write");
    let (got, end, _) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    corruption_at(&end.expect_err("the last record was synced"));
    assert_eq!(got.len(), 29);
}

#[test]
fn a_block_end_too_short_for_a_mark_gets_a_filler() {
    // A mark (19 bytes) due with every room from 0 to 20 bytes left in its
    // block: below 11 the block is zero-padded, from 11 to 18 filled with a
    // short mark, from 19 on the mark fits.
    const HEADER_SIZE: usize = TAGGED_HEADER_SIZE;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000013.log");
    let mut w = Writer::new_wal(PosixFs.create_log(&path).expect("create"), 13).expect("writer");
    let mut records = Vec::new();
    let block = BLOCK_SIZE as u64;
    let mut add = |w: &mut Writer, n: usize| {
        let r = payload(records.len(), n);
        w.add_record(&r).expect("add");
        records.push(r);
    };
    for k in 0..=20u64 {
        let mut left = block - w.len() % block;
        if left < k + HEADER_SIZE as u64 + 50 {
            // Finish this block (what cannot hold a header is padding).
            add(&mut w, left.saturating_sub(HEADER_SIZE as u64) as usize);
            left = block - w.len() % block;
        }
        add(&mut w, (left - k - HEADER_SIZE as u64) as usize);
        assert_eq!(block - w.len() % block, if k == 0 { block } else { k });
        w.sync().expect("sync");
        // The mark goes in front of this record.
        add(&mut w, 10);
    }
    drop(w);
    for mode in ALL_MODES {
        let (got, end, r) = read_log(&path, mode);
        end.expect("clean");
        assert!(got == records, "{mode:?}");
        assert!(r.dropped().is_none(), "{mode:?}");
    }
    // Count the marks by walking the fragments.
    let bytes = std::fs::read(&path).expect("read");
    // After the (untagged) header record.
    let first = super::format::HEADER_SIZE + TAGGED_FILE_HEADER_LEN;
    let (mut full, mut fillers, mut pos) = (0, 0, first);
    while pos + HEADER_SIZE <= bytes.len() {
        let left = BLOCK_SIZE - pos % BLOCK_SIZE;
        if left < HEADER_SIZE {
            pos += left;
            continue;
        }
        let len = usize::from(u16::from_le_bytes([bytes[pos + 4], bytes[pos + 5]]));
        if bytes[pos + 6] == FragmentType::Synced as u8 {
            if len == 8 {
                full += 1;
            } else {
                fillers += 1;
            }
        }
        pos += HEADER_SIZE + len;
    }
    assert_eq!(full, 21, "one mark per sync");
    assert_eq!(fillers, 8, "rooms of 11 to 18 bytes");
}

#[test]
fn a_zeroed_header_page_of_a_never_synced_log_is_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Never synced: the header's page may be the one a power loss lost.
    let (path, spans, _) = marked_log(dir.path(), 0, 30);
    assert!(spans[29].1 > 8192);
    zero_page_at(&path, 0);
    let (got, end, r) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    end.expect("nothing in it was synced");
    assert!(got.is_empty());
    assert_eq!(r.dropped().map(|d| d.0), Some(0));
    let (_, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
    corruption_at(&end.expect_err("absolute"));
    // Synced twice (the second mark says the first sync completed): the
    // header was durable, so zeros there are damage.
    let (path, _, _) = marked_log(dir.path(), 10, 30);
    zero_page_at(&path, 0);
    let (_, end, _) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    corruption_at(&end.expect_err("a synced header damaged"));
}

/// Writes a write-ahead log of `version` (3 or 4) to a plain file at
/// `path`: `records`, with a sync after each index in `synced`. Dropped
/// without a final sync, as in a crash. Returns each record's (start, end).
fn wal_of(path: &Path, version: u32, records: &[Vec<u8>], synced: &[usize]) -> Vec<(u64, u64)> {
    let file = PosixFs.create(path).expect("create");
    let mut w = Writer::new_wal_format(file, 21, version).expect("writer");
    let mut spans = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let start = w.len();
        w.add_record(r).expect("add");
        spans.push((start, w.len()));
        if synced.contains(&i) {
            w.sync().expect("sync");
        } else {
            w.flush().expect("flush");
        }
    }
    spans
}

/// A value holding a mark of `claim` in the untagged shape at byte 100
/// and one with a tag that is not the log's at byte 300.
fn forged_marks(claim: u64) -> Vec<u8> {
    let claim = claim.to_le_bytes();
    let mut forged = payload(99, 20_000);
    let untagged = fragment_header(FragmentType::Synced, &claim);
    forged[100..107].copy_from_slice(&untagged);
    forged[107..115].copy_from_slice(&claim);
    let tagged = tagged_fragment_header(FragmentType::Synced, 0x5eed_1e55, &claim);
    forged[300..311].copy_from_slice(&tagged);
    forged[311..319].copy_from_slice(&claim);
    forged
}

#[test]
fn a_value_shaped_like_a_sync_mark_cannot_make_a_torn_tail_corruption() {
    // Six synced records, then a value holding forged marks; that record
    // is cut (a crash during its copy). A forged mark that says a sync
    // completed past the damage made the torn tail `Corruption`, and the
    // database did not open.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut records: Vec<Vec<u8>> = (0..6).map(|i| payload(i, 300)).collect();
    for version in [3, 4] {
        let hs = if version == 4 {
            TAGGED_HEADER_SIZE
        } else {
            HEADER_SIZE
        };
        // Where the cut record's fragment starts: after the mark of the
        // sync before it (the layout does not depend on the payload).
        records.push(forged_marks(0));
        let path = dir.path().join(format!("v{version}.log"));
        let spans = wal_of(&path, version, &records, &[0, 1, 2, 3, 4, 5]);
        let damage = spans[6].0 + (hs + SYNCED_MARK_LEN) as u64;
        // Format 3 finds marks by their shape: only one that claims more
        // than its own offset can be told from a real one. Format 4 marks
        // carry the log's tag: a claim just past the damage, below the
        // forged marks' own offsets, is refused too.
        let claim = if version == 4 { damage + 1 } else { u64::MAX };
        *records.last_mut().expect("forged") = forged_marks(claim);
        wal_of(&path, version, &records, &[0, 1, 2, 3, 4, 5]);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        file.set_len(damage + 5000).expect("cut");
        drop(file);
        let (got, end, r) = read_log(&path, WalRecovery::TolerateCorruptedTail);
        end.unwrap_or_else(|e| panic!("format {version}: a torn tail, not {e}"));
        assert!(got[..] == records[..6], "format {version}");
        assert_eq!(r.dropped().map(|d| d.0), Some(damage), "format {version}");
        records.pop();
    }
}

#[test]
fn a_damaged_header_of_a_synced_tagged_log_is_corruption() {
    // One block: ten records each synced (so marks say the syncs
    // completed), then one more. The header's length byte damaged: its
    // checksum fails, and the records after it cannot be found from its
    // length; the log's tag, from its first fragment, finds them.
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..11).map(|i| payload(i, 900)).collect();
    let path = dir.path().join("000031.log");
    let synced: Vec<usize> = (0..10).collect();
    wal_of(&path, 4, &records, &synced);
    let mut bytes = std::fs::read(&path).expect("read");
    assert!(bytes.len() < BLOCK_SIZE);
    bytes[4] ^= 0x01;
    std::fs::write(&path, &bytes).expect("write");
    for mode in ALL_MODES {
        let (got, end, _) = read_log(&path, mode);
        assert!(got.is_empty(), "{mode:?}");
        let (_, off, _) = corruption_at(&end.expect_err("synced records after the header"));
        assert_eq!(off, 0, "{mode:?}");
    }
}

#[test]
fn a_damaged_tag_in_the_last_record_is_damage_not_the_end() {
    // The last record synced with `sync` (no mark after it), then a bit of
    // its fragment's tag flipped: with the log's tag the fragment still
    // verifies, so it is a damaged record (a torn tail), not the end.
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..5).map(|i| payload(i, 500)).collect();
    let path = dir.path().join("000032.log");
    let spans = wal_of(&path, 4, &records, &[4]);
    let (last, _) = spans[4];
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[last as usize + 8] ^= 0x20;
    std::fs::write(&path, &bytes).expect("write");
    let (got, end, r) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    end.expect("a torn tail");
    assert!(got[..] == records[..4]);
    assert_eq!(r.dropped().map(|d| d.0), Some(last));
    let (_, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
    corruption_at(&end.expect_err("absolute"));
    // A few stray bytes after the records that do not carry the tag, too
    // short for a fragment header, are no fragment of the log.
    let spans = wal_of(&path, 4, &records, &[4]);
    let mut bytes = std::fs::read(&path).expect("read");
    assert_eq!(bytes.len() as u64, spans[4].1);
    let tag = &bytes[27..31];
    let stray = [0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, !tag[0], !tag[1]];
    bytes.extend_from_slice(&stray);
    std::fs::write(&path, &bytes).expect("write");
    for mode in ALL_MODES {
        let (got, end, r) = read_log(&path, mode);
        end.unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert!(got == records, "{mode:?}");
        assert_eq!(r.dropped(), None, "{mode:?}");
    }
}

#[test]
fn a_long_foreign_region_in_a_tagged_log_reads_in_linear_time() {
    // 8 MiB of zeros between records of the log: each byte is searched
    // once for the next fragment (searching again from every block would
    // take minutes).
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<Vec<u8>> = (0..3).map(|i| payload(i, 700)).collect();
    let path = dir.path().join("000033.log");
    wal_of(&path, 4, &records, &[]);
    let bytes = std::fs::read(&path).expect("read");
    let tag = u32::from_le_bytes(bytes[27..31].try_into().expect("tag"));
    let mut bytes = bytes;
    bytes.resize(bytes.len() + (8 << 20), 0);
    // A fragment of the log after the zeros, at a block start.
    bytes.resize(bytes.len().next_multiple_of(BLOCK_SIZE), 0);
    let last = payload(7, 100);
    bytes.extend_from_slice(&tagged_fragment_header(FragmentType::Full, tag, &last));
    bytes.extend_from_slice(&last);
    std::fs::write(&path, &bytes).expect("write");
    for mode in ALL_MODES {
        let (got, _, _) = read_log(&path, mode);
        assert!(got.starts_with(&records), "{mode:?}");
    }
    let (got, end, r) = read_log(&path, WalRecovery::SkipAnyCorrupted);
    end.expect("skipped");
    assert_eq!(got.last(), Some(&last));
    assert_eq!(r.skipped_records(), 1);
}

#[test]
fn bytes_of_a_files_earlier_life_after_the_records_are_the_end_of_the_log() {
    // A recycled file: a log written over the start of an older, longer
    // one. Its fragments carry its own tag, so the older bytes after them
    // are no record of it.
    let dir = tempfile::tempdir().expect("tempdir");
    let older: Vec<Vec<u8>> = (0..300).map(|i| payload(1000 + i, 1000)).collect();
    let old_path = dir.path().join("old.log");
    let every_tenth: Vec<usize> = (0..300).step_by(10).collect();
    wal_of(&old_path, 4, &older, &every_tenth);
    let old = std::fs::read(&old_path).expect("read");
    let records: Vec<Vec<u8>> = (0..60).map(|i| payload(i, 777)).collect();
    let new_path = dir.path().join("new.log");
    let spans = wal_of(&new_path, 4, &records, &[9, 19, 29, 39, 49]);
    let new = std::fs::read(&new_path).expect("read");
    assert!(old.len() > 4 * new.len());
    let over = |upto: usize| {
        let mut b = new[..upto].to_vec();
        b.extend_from_slice(&old[upto..]);
        b
    };
    let path = dir.path().join("000021.log");

    std::fs::write(&path, over(new.len())).expect("write");
    for mode in ALL_MODES {
        let (got, end, r) = read_log(&path, mode);
        end.unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert!(got == records, "{mode:?}: {} records", got.len());
        assert_eq!(r.dropped(), None, "{mode:?}");
    }

    // The last record cut in its middle, the older bytes after it: a torn
    // tail (nothing said it was synced).
    let (last, _) = spans[59];
    std::fs::write(&path, over(last as usize + 300)).expect("write");
    let (got, end, r) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    end.expect("a torn tail");
    assert!(got[..] == records[..59]);
    assert_eq!(r.dropped().map(|d| d.0), Some(last));
    let (_, end, _) = read_log(&path, WalRecovery::AbsoluteConsistency);
    corruption_at(&end.expect_err("absolute"));

    // A page of the earlier life among records the marks say were synced.
    let mut bytes = over(new.len());
    let (s5, _) = spans[5];
    let page = (s5 as usize + 1000) / 4096 * 4096;
    bytes[page..page + 4096].copy_from_slice(&old[page..page + 4096]);
    std::fs::write(&path, &bytes).expect("write");
    let (got, end, _) = read_log(&path, WalRecovery::TolerateCorruptedTail);
    let (_, off, _) = corruption_at(&end.expect_err("synced records lost"));
    assert!(off <= page as u64 + 4096, "{off}");
    assert!(got.len() <= 7, "{}", got.len());
}

#[test]
fn tagged_fragments_match_the_documented_layout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("000022.log");
    let mut w = Writer::new_wal(PosixFs.create(&path).expect("create"), 22).expect("writer");
    let tag = w.tag().expect("format 4 logs are tagged");
    assert_ne!(tag, 0);
    w.add_record(&payload(0, 40_000)).expect("add");
    w.sync().expect("sync");
    w.add_record(b"abc").expect("add");
    w.flush().expect("flush");
    drop(w);
    let b = std::fs::read(&path).expect("read");
    // The header record, untagged: 7 + 24 bytes.
    assert_eq!(&b[4..7], &[24, 0, 5]);
    assert_eq!(&b[7..15], b"STRATWAL");
    assert_eq!(&b[15..19], &4u32.to_le_bytes());
    assert_eq!(&b[19..27], &22u64.to_le_bytes());
    assert_eq!(&b[27..31], &tag.to_le_bytes());
    // FIRST: 32768 - 31 - 11 = 32726 bytes; its crc covers the tag.
    assert_eq!(&b[35..38], &[0xd6, 0x7f, 2]);
    assert_eq!(&b[38..42], &tag.to_le_bytes());
    let crc = super::format::tagged_fragment_crc(2, tag, &b[42..32768]);
    assert_eq!(&b[31..35], &crc.to_le_bytes());
    assert_ne!(crc, super::format::fragment_crc(2, &b[42..32768]));
    // LAST: 40000 - 32726 = 7274 bytes, from 32768.
    assert_eq!(&b[32772..32775], &[0x6a, 0x1c, 4]);
    assert_eq!(&b[32775..32779], &tag.to_le_bytes());
    // The mark of the sync (it reached 32768 + 11 + 7274), then the record.
    let mark = 32768 + 11 + 7274;
    assert_eq!(&b[mark + 4..mark + 7], &[8, 0, 6]);
    assert_eq!(&b[mark + 7..mark + 11], &tag.to_le_bytes());
    assert_eq!(&b[mark + 11..mark + 19], &(mark as u64).to_le_bytes());
    assert_eq!(&b[mark + 19 + 4..mark + 19 + 7], &[3, 0, 1]);
    assert_eq!(b.len(), mark + 19 + 11 + 3);
    // A new log of the same number gets another tag.
    let again = dir.path().join("again.log");
    let w = Writer::new_wal(PosixFs.create(&again).expect("create"), 22).expect("writer");
    assert_ne!(w.tag(), Some(tag));
}

#[test]
fn random_damage_to_a_tagged_log_never_panics_or_invents_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x7a99);
    let records: Vec<Vec<u8>> = (0..40)
        .map(|i| payload(i, rng.gen_range(0..20_000)))
        .collect();
    let path = dir.path().join("000023.log");
    wal_of(&path, 4, &records, &[3, 11, 20, 31]);
    damage_rounds(&path, &records, &mut rng, true);
}

/// Sixty rounds of random damage to the log at `path` (bytes overwritten,
/// every third round cut, with `zero_tails` every fourth zeroed from a
/// page on, as a reserved tail reads): whatever any mode reads back is an
/// ordered subset of `records`, and nothing panics.
fn damage_rounds(path: &Path, records: &[Vec<u8>], rng: &mut rand::rngs::StdRng, zero_tails: bool) {
    let good = std::fs::read(path).expect("read");
    for round in 0..60 {
        let mut bytes = good.clone();
        for _ in 0..rng.gen_range(1..6) {
            let at = rng.gen_range(0..bytes.len());
            bytes[at] = rng.gen();
        }
        if round % 3 == 0 {
            bytes.truncate(rng.gen_range(0..bytes.len()));
        }
        if zero_tails && round % 4 == 1 {
            let from = rng.gen_range(0..bytes.len().max(1)) / 4096 * 4096;
            let from = from.min(bytes.len());
            bytes[from..].fill(0);
        }
        std::fs::write(path, &bytes).expect("write");
        for mode in ALL_MODES {
            let (got, _, _) = read_log(path, mode);
            let mut it = records.iter();
            assert!(
                got.iter().all(|g| it.any(|r| r == g)),
                "round {round} mode {mode:?}: a record was invented or reordered"
            );
        }
    }
}
