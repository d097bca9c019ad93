//! A real full disk: strata on a size-limited tmpfs, written until the file
//! system says `ENOSPC`.
//!
//! What must hold (docs/DURABILITY.md, "Full disk"): the failing write gets a
//! typed error whose cause is `StorageFull`; reads keep working; later writes
//! fail with a typed error; nothing acknowledged is lost; once space is freed
//! the database reopens, holds every acknowledged write, and takes writes,
//! flushes and compactions again. The disk fills twice, each time on a path
//! the test names and checks: first in a WAL append (a write buffer larger
//! than the disk, so no table is ever written: the write itself fails with
//! `Io`), then in a compaction writing its tables (the free space left
//! smaller than the tables it must write: `compact_range` fails, and later
//! writes are refused as `Poisoned`).
//!
//! Mounting needs root (or CAP_SYS_ADMIN); where it is not allowed the test
//! says so on stderr and returns, unless `STRATA_REQUIRE_TOOLS=1` (set by
//! `.ci/run`): then a failed mount fails the test, because this is the only
//! test of a real short append followed by `ENOSPC`. The simulated full disk
//! of `faults.rs` covers the rest of the promise everywhere.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use strata::{Db, Error, Options, WriteBatch, WriteOptions};

// The ballast is freed to "bring space back". It is larger than what the
// database holds when the disk fills, because compacting everything needs
// room for the new tables before the old ones go.
const FS_SIZE: &str = "32m";
const BALLAST: usize = 20 << 20;

/// A tmpfs mounted for the length of the test, unmounted on drop.
struct Mount {
    point: PathBuf,
    _parent: tempfile::TempDir,
}

impl Mount {
    fn new() -> Option<Mount> {
        let parent = tempfile::tempdir().expect("tempdir");
        let point = parent.path().join("mnt");
        std::fs::create_dir(&point).expect("mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={FS_SIZE}"), "tmpfs"])
            .arg(&point)
            .output();
        let why = match out {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Some(format!("mount: {e}")),
        };
        if let Some(why) = why {
            common::missing_tool(&format!(
                "a tmpfs cannot be mounted here (needs root and mount(8): {why})"
            ));
            return None;
        }
        Some(Mount {
            point,
            _parent: parent,
        })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.point).status();
    }
}

fn opts() -> Options {
    Options::default()
        .write_buffer_size(512 << 10)
        .target_file_size(512 << 10)
        .max_bytes_for_level_base(2 << 20)
        .level0_file_num_compaction_trigger(2)
}

fn is_full(e: &Error) -> bool {
    let kind = match e {
        Error::Poisoned(inner) => inner.io_kind(),
        other => other.io_kind(),
    };
    kind == Some(std::io::ErrorKind::StorageFull)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(0x9E37_79B9) % 100_000_000).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(1000, b'a' + (i % 26) as u8);
    v
}

fn check(db: &Db, acked: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    for (k, v) in acked {
        match db.get(k) {
            Ok(Some(got)) => assert!(got == *v, "{ctx}: wrong value for {k:?}"),
            Ok(None) => panic!("{ctx}: acknowledged key {k:?} lost"),
            Err(e) => panic!("{ctx}: read of {k:?} failed: {e}"),
        }
    }
}

/// Options under which no table is written before the disk fills: the
/// write buffer is larger than the whole file system.
fn wal_only() -> Options {
    opts().write_buffer_size(64 << 20)
}

/// Writes until a write fails; every 50th write is synced. Requires the
/// failure to be `StorageFull` met by the WAL append of that write (an
/// `Io` error, not a `Poisoned` one from a background failure).
fn fill_until_full(dir: &Path, acked: &mut BTreeMap<Vec<u8>, Vec<u8>>, start: u64) -> u64 {
    let db = Db::open(dir, wal_only()).expect("open");
    let mut i = start;
    let err = loop {
        let (k, v) = (key(i), value(i));
        let r = if i.is_multiple_of(50) {
            let mut b = WriteBatch::new();
            b.put(&k, &v);
            db.write(b, &WriteOptions { sync: true })
        } else {
            db.put(&k, &v)
        };
        match r {
            Ok(()) => {
                acked.insert(k, v);
                i += 1;
            }
            Err(e) => break e,
        }
        assert!(i < start + 1_000_000, "the disk never filled");
    };
    assert!(
        matches!(err, Error::Io { .. }) && is_full(&err),
        "the first failed write did not meet ENOSPC in its WAL append: {err:?}"
    );
    assert_eq!(
        db.stats().flush_count,
        0,
        "a table was written: not the WAL path"
    );
    eprintln!(
        "disk full in a WAL append after {} writes ({} acknowledged in all): {err}",
        i - start,
        acked.len()
    );
    assert!(
        acked.len() > 1000,
        "filled after only {} writes",
        acked.len()
    );
    // Reads keep working; later writes fail with a typed error.
    check(&db, acked, "full, same handle");
    let e = db.put("after", "full").expect_err("a write on a full disk");
    assert!(
        matches!(e, Error::Poisoned(_) | Error::Io { .. }),
        "later write: {e:?}"
    );
    drop(db);
    // Still full: an open either fails cleanly or succeeds; nothing panics.
    if let Err(e) = Db::open(dir, wal_only()) {
        assert!(is_full(&e), "open on a full disk: {e:?}");
    }
    i + 1
}

/// Bytes free to an unprivileged writer on the file system holding `p`.
fn free_bytes(p: &Path) -> u64 {
    let out = Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(p)
        .output()
        .expect("df");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next()
        .expect("df output")
}

/// Bytes of the tables in `dir`.
fn table_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".table"))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

#[test]
fn a_real_full_disk_gives_a_typed_error_and_heals_once_space_is_back() {
    let Some(mount) = Mount::new() else { return };
    let ballast = mount.point.join("ballast");
    std::fs::write(&ballast, vec![7u8; BALLAST]).expect("ballast");
    let dir = mount.point.join("db");
    let mut acked = BTreeMap::new();

    // 1. The WAL meets the full disk.
    let next = fill_until_full(&dir, &mut acked, 0);

    // Free space; everything acknowledged is there, and the database works.
    std::fs::remove_file(&ballast).expect("free space");
    let db = Db::open(&dir, opts()).expect("reopen once space is back");
    check(&db, &acked, "after reopen");
    for i in next..next + 500 {
        db.put(key(i), value(i)).expect("write once space is back");
        acked.insert(key(i), value(i));
    }
    db.flush().expect("flush once space is back");
    db.compact_range::<&[u8], _>(..)
        .expect("compact once space is back");
    check(&db, &acked, "after compaction");

    // 2. A compaction meets it: leave free half of what rewriting every
    // table needs (the new tables are written before the old ones go).
    for i in next + 500..next + 1500 {
        db.put(key(i), value(i)).expect("write");
        acked.insert(key(i), value(i));
    }
    db.flush().expect("flush");
    let tables = table_bytes(&dir);
    let keep_free = tables / 2;
    let fill = free_bytes(&mount.point).saturating_sub(keep_free);
    std::fs::write(&ballast, vec![7u8; fill as usize]).expect("ballast");
    let err = db
        .compact_range::<&[u8], _>(..)
        .expect_err("a compaction of every table into half of their size");
    assert!(
        is_full(&err),
        "the compaction failed, but not for space: {err:?}"
    );
    eprintln!("disk full in a compaction of {tables} table bytes with {keep_free} free: {err}");
    check(&db, &acked, "after the failed compaction, same handle");
    let e = db
        .put("after", "full")
        .expect_err("a write after the failed compaction");
    assert!(
        matches!(e, Error::Poisoned(_) | Error::Io { .. }),
        "later write: {e:?}"
    );
    db.close().ok();
    drop(db);

    std::fs::remove_file(&ballast).expect("free space again");
    let db = Db::open(&dir, opts()).expect("second reopen");
    check(&db, &acked, "after the second reopen");
    db.compact_range::<&[u8], _>(..)
        .expect("compact once space is back again");
    db.put(key(next + 2000), value(next + 2000)).expect("write");
    db.close().expect("close");
    drop(db);
    let report = strata::verify::verify_dir(&dir, &opts()).expect("verify");
    assert!(report.is_ok(), "damaged files after a full disk: {report}");
    drop(mount);
}
