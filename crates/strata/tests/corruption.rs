//! Damaged files: bytes flipped and files truncated in the WAL, tables, the
//! MANIFEST and CURRENT. Opening and reading everything must give either
//! `Error::Corruption` (at open or on a read) or correct data: all of it, or
//! — only for a damaged WAL in a mode that drops a damaged tail — the state
//! after a prefix of the writes. Never a panic, never a wrong value.

mod common;

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use strata::filename::{self, FileKind};
use strata::io::SequentialFile;
use strata::wal::format as wal_format;
use strata::{Db, Error, Options, WalRecovery};

/// A `std::io::Read` as the engine's sequential file.
struct ReadFile<R>(R);

impl<R: Read + Send> SequentialFile for ReadFile<R> {
    fn read(&mut self, buf: &mut [u8]) -> strata::Result<usize> {
        self.0.read(buf).map_err(|e| Error::io(Path::new("wal"), e))
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One write of a fixture: a put (`Some`) or a delete.
type Op = (Vec<u8>, Option<Vec<u8>>);

fn ops(n: usize) -> Vec<Op> {
    (0..n)
        .map(|i| {
            let k = format!("key{:04}", (i * 17) % 180).into_bytes();
            if i % 11 == 5 {
                (k, None)
            } else {
                let len = if i % 23 == 0 {
                    2500
                } else {
                    10 + (i * 7) % 120
                };
                let mut v = format!("v{i}:").into_bytes();
                v.extend((0..len).map(|x| b'a' + ((x + i) % 26) as u8));
                (k, Some(v))
            }
        })
        .collect()
}

fn apply(m: &mut Model, op: &Op) {
    match &op.1 {
        Some(v) => m.insert(op.0.clone(), v.clone()),
        None => m.remove(&op.0),
    };
}

fn write_ops(db: &Db, ops: &[Op]) {
    for (k, v) in ops {
        match v {
            Some(v) => db.put(k, v).expect("put"),
            None => db.delete(k).expect("delete"),
        }
    }
}

fn files_of(dir: &Path, kind: FileKind) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(filename::parse)
                .is_some_and(|(k, _)| k == kind)
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Copies the database files (not LOCK) of `src` into `dst`.
fn copy_db(src: &Path, dst: &Path) {
    for e in std::fs::read_dir(src).expect("read_dir") {
        let e = e.expect("entry");
        if e.file_name() == "LOCK" {
            continue;
        }
        std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy");
    }
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    Flip { at: u64, mask: u8 },
    Truncate(u64),
}

fn damage(path: &Path, d: Damage) {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open for damage");
    match d {
        Damage::Flip { at, mask } => {
            let mut b = [0u8; 1];
            f.seek(SeekFrom::Start(at)).expect("seek");
            f.read_exact(&mut b).expect("read byte");
            b[0] ^= mask;
            f.seek(SeekFrom::Start(at)).expect("seek");
            f.write_all(&b).expect("write byte");
        }
        Damage::Truncate(len) => f.set_len(len).expect("truncate"),
    }
}

/// Flips at spread-out offsets (with two masks) and truncations at several lengths.
fn damages(len: u64) -> Vec<Damage> {
    let mut at = vec![
        0,
        1,
        7,
        12,
        20,
        len / 5,
        len / 3,
        len / 2,
        2 * len / 3,
        len.saturating_sub(20),
    ];
    at.extend([len.saturating_sub(8), len - 1]);
    at.retain(|&a| a < len);
    at.sort_unstable();
    at.dedup();
    let mut out = Vec::new();
    for (i, &a) in at.iter().enumerate() {
        out.push(Damage::Flip {
            at: a,
            mask: if i % 2 == 0 { 0x01 } else { 0x80 },
        });
    }
    out.push(Damage::Flip {
        at: len / 2 + 3,
        mask: 0xff,
    });
    let mut cut = vec![0, 5, len / 4, len / 2, len - 10, len - 1];
    cut.retain(|&c| c < len);
    cut.dedup();
    out.extend(cut.into_iter().map(Damage::Truncate));
    out
}

/// Every entry via a scan, cross-checked with a point read of every key
/// ever written.
fn read_everything(db: &Db, universe: &[Vec<u8>]) -> strata::Result<Model> {
    let mut m = Model::new();
    for r in db.scan::<&[u8], _>(..)? {
        let (k, v) = r?;
        m.insert(k, v);
    }
    for k in universe {
        let g = db.get(k)?;
        assert_eq!(
            g.as_ref(),
            m.get(k),
            "get and scan disagree on {}",
            String::from_utf8_lossy(k)
        );
    }
    Ok(m)
}

#[derive(Debug, PartialEq)]
enum Outcome {
    /// `Error::Corruption` at open or on a read.
    Corrupt(String),
    /// Opened, and the contents are the state after this many writes.
    Prefix(usize),
}

/// Opens `dir` and reads everything; panics on any outcome other than a
/// corruption error or the contents after some prefix of `ops`.
fn check(dir: &Path, opts: Options, ops: &[Op], ctx: &str) -> Outcome {
    let universe: Vec<Vec<u8>> = {
        let mut u: Vec<_> = ops.iter().map(|o| o.0.clone()).collect();
        u.sort();
        u.dedup();
        u
    };
    let db = match Db::open(dir, opts) {
        Ok(db) => db,
        Err(e @ Error::Corruption { .. }) => return Outcome::Corrupt(e.to_string()),
        Err(e) => panic!("{ctx}: open failed with a non-corruption error: {e}"),
    };
    let got = match read_everything(&db, &universe) {
        Ok(m) => m,
        Err(e @ Error::Corruption { .. }) => return Outcome::Corrupt(e.to_string()),
        Err(e) => panic!("{ctx}: read failed with a non-corruption error: {e}"),
    };
    drop(db);
    let mut m = Model::new();
    let mut found = None;
    if got == m {
        found = Some(0);
    }
    for (i, op) in ops.iter().enumerate() {
        apply(&mut m, op);
        if got == m {
            found = Some(i + 1);
        }
    }
    match found {
        Some(n) => Outcome::Prefix(n),
        None => panic!(
            "{ctx}: opened with contents that are no prefix of the writes ({} keys)",
            got.len()
        ),
    }
}

// ---------------------------------------------------------------- WAL

const WAL_OPS: usize = 400;

/// A database directory whose data is only in its WAL: written with a big
/// write buffer and copied while the database was open.
fn wal_fixture() -> (tempfile::TempDir, Vec<Op>) {
    let ops = ops(WAL_OPS);
    let live = tempfile::tempdir().expect("tempdir");
    let copy = tempfile::tempdir().expect("tempdir");
    {
        let db = common::open(live.path(), wal_opts());
        write_ops(&db, &ops);
        assert_eq!(db.stats().flush_count, 0);
        // Closed: the log is synced and its sync confirmed by a mark
        // (`Writer::sync_final`), so damage anywhere in it is damage to
        // synced records. (A log whose records were never synced may have
        // gaps after a power loss: its damage is a torn tail, see
        // `unsynced_wal_damage_is_a_torn_tail`.)
        db.close().expect("close");
        // Dropped: the log's reserved blocks are cut off.
        drop(db);
        copy_db(live.path(), copy.path());
    }
    assert_eq!(files_of(copy.path(), FileKind::Table).len(), 0);
    assert_eq!(files_of(copy.path(), FileKind::Wal).len(), 1);
    (copy, ops)
}

fn wal_opts() -> Options {
    Options::default()
        .write_buffer_size(64 << 20)
        .background_threads(1)
}

/// Where each record of the fixture's WAL ends: `[0]` the header record,
/// `[i]` the record of write `i` (one record per write: one writer).
fn wal_record_ends(wal: &Path) -> Vec<u64> {
    let file = std::fs::File::open(wal).expect("open wal");
    let mut r = strata::wal::Reader::new(
        Box::new(ReadFile(std::io::BufReader::new(file))),
        wal.to_path_buf(),
        WalRecovery::AbsoluteConsistency,
    )
    .zero_filled_end();
    // A log of this build: format 4, a tagged header record.
    let mut ends = vec![(wal_format::HEADER_SIZE + wal_format::TAGGED_FILE_HEADER_LEN) as u64];
    while r.read_record().expect("pristine wal").is_some() {
        ends.push(r.last_good_offset());
    }
    assert_eq!(ends.len(), WAL_OPS + 1, "one record per write");
    ends
}

/// The prefixes a WAL damaged by `d` may open as, when it opens: the
/// writes whose records lie entirely before the damage, or (for a flip in
/// the zero padding at the end of a block, which no record covers) all.
fn allowed_prefixes(ends: &[u64], d: Damage) -> Vec<usize> {
    let at = match d {
        Damage::Flip { at, .. } => at,
        Damage::Truncate(len) => len,
    };
    if at < ends[0] {
        return vec![0];
    }
    let intact = ends[1..].iter().filter(|&&e| e <= at).count();
    let mut v = vec![intact];
    if let Damage::Flip { .. } = d {
        let block = wal_format::BLOCK_SIZE as u64;
        let end = ends[intact];
        let left = block - end % block;
        if left < wal_format::TAGGED_HEADER_SIZE as u64 && at < end + left {
            v.push(WAL_OPS);
        }
    }
    v
}

fn damaged_copy(src: &Path, kind: FileKind, index: usize, d: Damage) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_db(src, dir.path());
    let files = files_of(dir.path(), kind);
    let f = files.get(index).expect("file of that kind");
    damage(f, d);
    dir
}

#[test]
fn wal_damage_gives_corruption_or_a_prefix() {
    let (fx, ops) = wal_fixture();
    let wal = files_of(fx.path(), FileKind::Wal).remove(0);
    let len = std::fs::metadata(&wal).expect("stat").len();
    assert!(
        len > 32 * 1024,
        "the WAL spans several blocks ({len} bytes)"
    );
    let pristine = tempfile::tempdir().expect("tempdir");
    copy_db(fx.path(), pristine.path());
    assert_eq!(
        check(pristine.path(), wal_opts(), &ops, "undamaged"),
        Outcome::Prefix(WAL_OPS)
    );
    let ends = wal_record_ends(&wal);
    let (mut corrupt, mut prefixes) = (0, 0);
    for d in damages(len) {
        let dir = damaged_copy(fx.path(), FileKind::Wal, 0, d);
        let ctx = format!("WAL {d:?}");
        let out = check(dir.path(), wal_opts(), &ops, &ctx);
        match (&out, d) {
            // Truncation is always a torn tail: the default mode drops it.
            (Outcome::Corrupt(e), Damage::Truncate(_)) => {
                panic!("{ctx}: a truncated WAL must open in the default mode: {e}")
            }
            (Outcome::Corrupt(_), _) => corrupt += 1,
            // Exactly the writes before the damage: dropping a torn tail
            // never drops good records before it, nor keeps a damaged one.
            (Outcome::Prefix(n), _) => {
                let allowed = allowed_prefixes(&ends, d);
                assert!(
                    allowed.contains(n),
                    "{ctx}: opened with {n} writes, expected one of {allowed:?}"
                );
                prefixes += 1;
            }
        }
    }
    assert!(corrupt > 0, "mid-file flips must be reported");
    assert!(prefixes > 0, "torn tails must open");
}

#[test]
fn wal_mid_file_flip_is_corruption_in_default_mode() {
    let (fx, ops) = wal_fixture();
    let len = std::fs::metadata(files_of(fx.path(), FileKind::Wal).remove(0))
        .expect("stat")
        .len();
    // Inside the first record's payload, with many records after it.
    for at in [40, len / 3] {
        let dir = damaged_copy(fx.path(), FileKind::Wal, 0, Damage::Flip { at, mask: 0x10 });
        let out = check(dir.path(), wal_opts(), &ops, &format!("flip at {at}"));
        assert!(matches!(out, Outcome::Corrupt(_)), "flip at {at}: {out:?}");
    }
}

/// A copy of a live database whose writes were handed to the OS but never
/// synced, except (with `synced_tail`) the last two, which were written
/// with `sync = true`.
fn live_wal_fixture(synced_tail: bool) -> (tempfile::TempDir, Vec<Op>) {
    let ops = ops(WAL_OPS);
    let live = tempfile::tempdir().expect("tempdir");
    let copy = tempfile::tempdir().expect("tempdir");
    let db = common::open(live.path(), wal_opts());
    let split = if synced_tail { WAL_OPS - 2 } else { WAL_OPS };
    write_ops(&db, &ops[..split]);
    for (k, v) in &ops[split..] {
        let mut b = strata::WriteBatch::new();
        match v {
            Some(v) => b.put(k, v),
            None => b.delete(k),
        }
        db.write(b, &strata::WriteOptions { sync: true })
            .expect("synced write");
    }
    copy_db(live.path(), copy.path());
    drop(db);
    (copy, ops)
}

#[test]
fn unsynced_wal_damage_is_a_torn_tail() {
    // Pages of a log written since its last sync can reach the disk in any
    // order (and its reserved blocks read as zeros): damage there, even with
    // valid records after it, is a torn tail in the default mode. The same
    // damage before where a sync is known to have completed (the second
    // synced write's mark says where the first one's sync ended) is damage
    // to synced records: `Corruption`.
    for synced_tail in [false, true] {
        let (fx, ops) = live_wal_fixture(synced_tail);
        let wal = files_of(fx.path(), FileKind::Wal).remove(0);
        let ends = wal_record_ends(&wal);
        let len = *ends.last().expect("records");
        for at in [40, len / 3, 2 * len / 3] {
            let d = Damage::Flip { at, mask: 0x10 };
            let dir = damaged_copy(fx.path(), FileKind::Wal, 0, d);
            let ctx = format!("synced tail {synced_tail}, {d:?}");
            let out = check(dir.path(), wal_opts(), &ops, &ctx);
            if synced_tail {
                assert!(matches!(out, Outcome::Corrupt(_)), "{ctx}: {out:?}");
            } else {
                let allowed = allowed_prefixes(&ends, d);
                assert!(
                    matches!(out, Outcome::Prefix(n) if allowed.contains(&n)),
                    "{ctx}: {out:?}, expected one of {allowed:?}"
                );
            }
        }
        // Damage in the last record, written after the last completed
        // sync the log records: a torn tail either way.
        let d = Damage::Flip {
            at: len - 3,
            mask: 0x10,
        };
        let dir = damaged_copy(fx.path(), FileKind::Wal, 0, d);
        let out = check(dir.path(), wal_opts(), &ops, "last record");
        assert_eq!(
            out,
            Outcome::Prefix(WAL_OPS - 1),
            "synced tail {synced_tail}"
        );
    }
}

#[test]
fn absolute_consistency_rejects_a_torn_wal_tail() {
    let (fx, ops) = wal_fixture();
    let wal = files_of(fx.path(), FileKind::Wal).remove(0);
    let ends = wal_record_ends(&wal);
    // The end of the last record (sync marks follow it).
    let len = *ends.last().expect("records");
    for cut in [len - 1, len - 10, len / 2] {
        let d = Damage::Truncate(cut);
        let opts = || wal_opts().wal_recovery(WalRecovery::AbsoluteConsistency);
        let dir = damaged_copy(fx.path(), FileKind::Wal, 0, d);
        let out = check(dir.path(), opts(), &ops, &format!("absolute {d:?}"));
        assert!(
            matches!(&out, Outcome::Corrupt(e) if e.contains(".wal")),
            "absolute {d:?}: {out:?}"
        );
        // The same damage opens with a prefix in the default mode.
        let dir = damaged_copy(fx.path(), FileKind::Wal, 0, d);
        let out = check(dir.path(), wal_opts(), &ops, &format!("default {d:?}"));
        let allowed = allowed_prefixes(&ends, d);
        assert!(
            matches!(out, Outcome::Prefix(n) if n < WAL_OPS && allowed.contains(&n)),
            "default {d:?}: {out:?}, expected one of {allowed:?}"
        );
    }
    // An undamaged log opens in absolute mode.
    let opts = wal_opts().wal_recovery(WalRecovery::AbsoluteConsistency);
    let pristine = tempfile::tempdir().expect("tempdir");
    copy_db(fx.path(), pristine.path());
    assert_eq!(
        check(pristine.path(), opts, &ops, "undamaged absolute"),
        Outcome::Prefix(WAL_OPS)
    );
}

#[test]
fn point_in_time_opens_with_a_prefix() {
    let (fx, ops) = wal_fixture();
    let wal = files_of(fx.path(), FileKind::Wal).remove(0);
    let ends = wal_record_ends(&wal);
    let len = *ends.last().expect("records");
    let opts = || wal_opts().wal_recovery(WalRecovery::PointInTime);
    for d in [
        Damage::Truncate(len / 2),
        Damage::Truncate(len - 1),
        Damage::Flip {
            at: len / 3,
            mask: 0x04,
        },
        Damage::Flip {
            at: 2 * len / 3,
            mask: 0x40,
        },
    ] {
        let dir = damaged_copy(fx.path(), FileKind::Wal, 0, d);
        let out = check(dir.path(), opts(), &ops, &format!("point-in-time {d:?}"));
        // Exactly the writes before the damage.
        let allowed = allowed_prefixes(&ends, d);
        assert!(
            matches!(out, Outcome::Prefix(n) if n < WAL_OPS && n > 0 && allowed.contains(&n)),
            "point-in-time {d:?}: {out:?}, expected one of {allowed:?}"
        );
    }
}

// ------------------------------------------------- tables, MANIFEST, CURRENT

const TABLE_OPS: usize = 600;

fn table_opts() -> Options {
    Options::default()
        .write_buffer_size(1 << 20)
        .block_size(256)
        .background_threads(1)
}

/// A database whose data is in two L0 tables. With `reopened`, it was opened
/// once more so its manifest is a fresh one holding a single snapshot edit;
/// without, the manifest also holds the two flush edits.
fn table_fixture(reopened: bool) -> (tempfile::TempDir, Vec<Op>) {
    let ops = ops(TABLE_OPS);
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = common::open(dir.path(), table_opts());
        write_ops(&db, &ops[..TABLE_OPS / 2]);
        db.flush().expect("flush");
        write_ops(&db, &ops[TABLE_OPS / 2..]);
        db.flush().expect("flush");
    }
    if reopened {
        drop(common::open(dir.path(), table_opts()));
    }
    assert_eq!(files_of(dir.path(), FileKind::Table).len(), 2);
    (dir, ops)
}

/// Applies each damage to the `index`-th file of `kind` and checks the
/// outcome is a corruption error or all of the data. Returns how many
/// damages were reported as corruption.
fn damage_all(fx: &Path, ops: &[Op], kind: FileKind, index: usize, what: &str) -> usize {
    let path = files_of(fx, kind).remove(index);
    let len = std::fs::metadata(&path).expect("stat").len();
    let mut ds = damages(len);
    if len < 64 {
        // Small files (CURRENT): every byte.
        ds = (0..len)
            .flat_map(|at| [0x01u8, 0x80, 0x1b].map(|mask| Damage::Flip { at, mask }))
            .chain((0..len).map(Damage::Truncate))
            .collect();
    }
    let mut corrupt = 0;
    for d in ds {
        let dir = damaged_copy(fx, kind, index, d);
        let ctx = format!("{what} {d:?}");
        match check(dir.path(), table_opts(), ops, &ctx) {
            Outcome::Corrupt(_) => corrupt += 1,
            Outcome::Prefix(n) => assert_eq!(n, ops.len(), "{ctx}: opened with data missing"),
        }
    }
    corrupt
}

#[test]
fn table_damage_is_corruption() {
    let (fx, ops) = table_fixture(true);
    for i in 0..2 {
        let n = damages(
            std::fs::metadata(&files_of(fx.path(), FileKind::Table)[i])
                .expect("stat")
                .len(),
        )
        .len();
        let corrupt = damage_all(fx.path(), &ops, FileKind::Table, i, &format!("table {i}"));
        // Every byte of a table is covered by a checksum or the size check,
        // and everything is read.
        assert_eq!(corrupt, n, "table {i}: some damage went unnoticed");
    }
}

#[test]
fn table_corruption_at_read_time_names_the_file() {
    let (fx, ops) = table_fixture(true);
    let universe: Vec<Vec<u8>> = ops.iter().map(|o| o.0.clone()).collect();
    for i in 0..2 {
        // Offset 10 is in the first data block, which open does not read.
        let dir = damaged_copy(
            fx.path(),
            FileKind::Table,
            i,
            Damage::Flip { at: 10, mask: 0x20 },
        );
        let table = files_of(dir.path(), FileKind::Table).remove(i);
        let name = table
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_owned();
        let db = Db::open(dir.path(), table_opts()).expect("open reads no data block");
        let e = read_everything(&db, &universe).expect_err("damaged data block must be noticed");
        assert!(e.is_corruption(), "{e}");
        assert!(e.to_string().contains(&name), "{e} should name {name}");
    }
}

#[test]
fn manifest_damage_is_corruption() {
    let (fx, ops) = table_fixture(true);
    let corrupt = damage_all(fx.path(), &ops, FileKind::Manifest, 0, "manifest");
    assert!(corrupt > 0);
}

#[test]
fn manifest_with_several_edits_damage_is_corruption() {
    let (fx, ops) = table_fixture(false);
    let corrupt = damage_all(fx.path(), &ops, FileKind::Manifest, 0, "manifest (edits)");
    assert!(corrupt > 0);
}

#[test]
fn current_damage_is_corruption() {
    let (fx, ops) = table_fixture(true);
    let corrupt = damage_all(fx.path(), &ops, FileKind::Current, 0, "CURRENT");
    assert!(corrupt > 0);
    // A missing CURRENT with database files present is corruption too.
    let dir = tempfile::tempdir().expect("tempdir");
    copy_db(fx.path(), dir.path());
    std::fs::remove_file(dir.path().join("CURRENT")).expect("rm");
    assert!(matches!(
        check(dir.path(), table_opts(), &ops, "no CURRENT"),
        Outcome::Corrupt(_)
    ));
}
