//! A real full disk: strata on a size-limited tmpfs, written until the file
//! system says `ENOSPC`.
//!
//! What must hold (docs/DURABILITY.md, "Full disk"): the failing write gets a
//! typed error whose cause is `StorageFull`; reads keep working; later writes
//! fail with a typed error; nothing acknowledged is lost; once space is freed
//! the database reopens, holds every acknowledged write, and takes writes,
//! flushes and compactions again.
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

fn fill_until_full(dir: &Path, acked: &mut BTreeMap<Vec<u8>, Vec<u8>>, start: u64) -> u64 {
    let db = Db::open(dir, opts()).expect("open");
    let mut i = start;
    let err = loop {
        let (k, v) = (key(i), value(i));
        // Every 50th write is synced, so both paths meet the full disk.
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
    assert!(is_full(&err), "first failed write: {err:?}");
    eprintln!(
        "disk full after {} writes ({} acknowledged in all): {err}",
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
    if let Err(e) = Db::open(dir, opts()) {
        assert!(is_full(&e), "open on a full disk: {e:?}");
    }
    i + 1
}

#[test]
fn a_real_full_disk_gives_a_typed_error_and_heals_once_space_is_back() {
    let Some(mount) = Mount::new() else { return };
    let ballast = mount.point.join("ballast");
    std::fs::write(&ballast, vec![7u8; BALLAST]).expect("ballast");
    let dir = mount.point.join("db");
    let mut acked = BTreeMap::new();

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
    db.close().expect("close");
    drop(db);
    let report = strata::verify::verify_dir(&dir, &opts()).expect("verify");
    assert!(report.is_ok(), "damaged files after a full disk: {report}");

    // Fill it again: the second full disk is no different from the first.
    std::fs::write(&ballast, vec![7u8; 8 << 20]).expect("ballast again");
    let next = fill_until_full(&dir, &mut acked, next + 1000);
    std::fs::remove_file(&ballast).expect("free space again");
    let db = Db::open(&dir, opts()).expect("second reopen");
    check(&db, &acked, "after the second reopen");
    db.put(key(next), value(next)).expect("write");
    db.close().expect("close");
    drop(mount);
}
