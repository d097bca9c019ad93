//! Databases written by earlier versions open unchanged.
//!
//! `tests/fixtures/before-range-deletes/` holds two databases written by
//! the `strata` CLI of commit 30379da, the last before range tombstones
//! changed the MANIFEST's table and row descriptors (tags 6 and 7, no
//! `min_seq`) and the table properties (no tag 11):
//!
//! - `tables`: `--opt write_buffer_size=64K,target_file_size=64K,max_bytes_for_level_base=256K
//!   load --count 3000 --key-size 16 --value-size 40 --order random --seed 7`,
//!   then `put tail-1 one`, `put tail-2 two`, `delete tail-1` (the last in
//!   the log only);
//! - `matrix`: `--opt write_buffer_size=64K,target_file_size=64K,l0=matrix,matrix_capacity=256K,matrix_column_bytes=32K
//!   load --count 2000 --key-size 16 --value-size 40 --order random --seed 9`,
//!   then `put tail-3 three` (in the log only).
//!
//! `<name>.scan` is that CLI's `scan --hex` of a copy of each. A test opens
//! a copy with this version, checks every entry, then deletes a range,
//! compacts, and checks the tombstone retires and survives a reopen.

mod common;

use common::all;
use std::path::{Path, PathBuf};
use strata::{Db, Options};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/before-range-deletes")
        .join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read fixture") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The fixture's expected entries, as `key<TAB>value` hex lines.
fn expected(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(fixture(&format!("{name}.scan"))).expect("scan file");
    text.lines().map(str::to_string).collect()
}

fn lines(db: &Db) -> Vec<String> {
    all(db)
        .iter()
        .map(|(k, v)| format!("{}\t{}", hex(k), hex(v)))
        .collect()
}

fn opens_unchanged(name: &str, spec: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    copy_dir(&fixture(name), &dir);
    let mut opts = Options::default();
    opts.apply(spec).expect("options");
    let report = strata::verify::verify_dir(&dir, &opts).expect("verify");
    assert!(report.is_ok(), "{name}: {report}");
    let want = expected(name);
    assert!(want.len() > 1000, "{name}: the fixture holds its data");
    let db = Db::open(&dir, opts.clone()).expect("open an old database");
    assert_eq!(lines(&db), want, "{name}: contents after open");
    // The new feature on old files: descriptors without min_seq (read as
    // 0) keep the tombstone until compaction rewrites or drops them.
    let keys: Vec<Vec<u8>> = all(&db).into_iter().map(|(k, _)| k).collect();
    let (lo, hi) = (keys[100].clone(), keys[900].clone());
    // A snapshot below the tombstone keeps background compactions from
    // retiring it before the count is read.
    let hold = db.snapshot();
    db.delete_range(&lo, &hi).expect("delete_range");
    db.flush().expect("flush");
    assert_eq!(db.stats().range_tombstones, 1, "{name}");
    drop(hold);
    db.compact_range::<&[u8], _>(..).expect("compact");
    assert_eq!(db.stats().range_tombstones, 0, "{name}: retired");
    let left: Vec<String> = want
        .iter()
        .enumerate()
        .filter(|(i, _)| !(100..900).contains(i))
        .map(|(_, l)| l.clone())
        .collect();
    assert_eq!(lines(&db), left, "{name}: after the range deletion");
    db.close().expect("close");
    drop(db);
    let db = Db::open(&dir, opts).expect("reopen");
    assert_eq!(lines(&db), left, "{name}: after a reopen");
}

#[test]
fn a_database_of_tables_written_before_range_deletes_opens_unchanged() {
    opens_unchanged(
        "tables",
        "write_buffer_size=64K,target_file_size=64K,max_bytes_for_level_base=256K",
    );
}

#[test]
fn a_matrix_database_written_before_range_deletes_opens_unchanged() {
    opens_unchanged(
        "matrix",
        "write_buffer_size=64K,target_file_size=64K,l0=matrix,matrix_capacity=256K,matrix_column_bytes=32K",
    );
}

/// Tables written before unique ids (property 12) and level-0 rows are
/// named in a backup store by a hash of their bytes; a backup of an old database
/// restores unchanged, and a second backup copies nothing.
#[test]
fn an_old_database_backs_up_and_restores_unchanged() {
    for (name, spec) in [
        ("tables", "write_buffer_size=64K,target_file_size=64K,max_bytes_for_level_base=256K"),
        ("matrix", "write_buffer_size=64K,target_file_size=64K,l0=matrix,matrix_capacity=256K,matrix_column_bytes=32K"),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("db");
        copy_dir(&fixture(name), &dir);
        let mut opts = Options::default();
        opts.apply(spec).expect("options");
        // No compaction may rewrite the old tables meanwhile.
        opts.apply(
            "max_bytes_for_level_base=1G,level0_file_num_compaction_trigger=1000,\
             level0_slowdown_writes_trigger=1000,level0_stop_writes_trigger=1000",
        )
        .expect("options");
        let db = Db::open(&dir, opts.clone()).expect("open an old database");
        db.wait_for_compactions().expect("settle");
        let store = strata::BackupStore::open(tmp.path().join("store")).expect("store");
        let first = db.backup(&store).expect("backup");
        let again = db.backup(&store).expect("backup");
        assert_eq!(again.copied_bytes, 0, "{name}: {again:?}");
        db.close().expect("close");
        let by_crc = std::fs::read_dir(tmp.path().join("store/shared"))
            .expect("list")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("-x"))
            .count();
        assert!(by_crc > 0, "{name}: old files are named by their hash");
        let target = tmp.path().join("restored");
        store.restore(Some(first.id), &target).expect("restore");
        let copy = Db::open(&target, opts).expect("open the restored copy");
        assert_eq!(lines(&copy), expected(name), "{name}: restored");
    }
}
