//! The matrix container (`l0=matrix`, MatrixKV, seed 000) through the
//! public API: its fast directory's ownership, switching level 0's design
//! on an existing database, manual compaction draining it, and column
//! sizes when the keys run past L1.

mod common;

use common::{all, drain_then_one_row, open, tiny_with, MATRIX};
use strata::{Db, Error};

#[test]
fn a_fast_directory_belongs_to_one_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fast = tmp.path().join("fast");
    let spec = format!("{MATRIX},fast_dir={}", fast.display());
    let a = open(&tmp.path().join("a"), tiny_with(&spec));
    for i in 0..2000 {
        a.put(format!("a{i:05}"), "x".repeat(40)).expect("put");
    }
    a.flush().expect("flush");
    assert!(a.stats().l0_rows.rows > 0);
    // While A is open its lock stops B; once A is closed, A's OWNER does.
    match Db::open(tmp.path().join("b"), tiny_with(&spec)) {
        Err(Error::Locked(_)) => {}
        other => panic!("second database on the same fast_dir: {other:?}"),
    }
    a.close().expect("close");
    drop(a);
    match Db::open(tmp.path().join("b"), tiny_with(&spec)) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("belongs to"), "{m}"),
        other => panic!("second database on the same fast_dir: {other:?}"),
    }
    // A's rows were left alone.
    let a = open(&tmp.path().join("a"), tiny_with(&spec));
    assert_eq!(all(&a).len(), 2000);
}

#[test]
fn level_zero_designs_switch_safely() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    // Tables first, with L0 tables left behind.
    let db = open(&dir, tiny_with("level0_file_num_compaction_trigger=30,level0_slowdown_writes_trigger=40,level0_stop_writes_trigger=50"));
    for i in 0..3000 {
        db.put(format!("k{:05}", (i * 7919) % 3000), format!("t{i}"))
            .expect("put");
    }
    db.flush().expect("flush");
    assert!(db.stats().levels[0].files > 1);
    let expect = all(&db);
    db.close().expect("close");
    drop(db);
    // The matrix container takes over: the old L0 tables drain to L1
    // first, then rows accumulate above.
    let db = open(&dir, tiny_with(MATRIX));
    assert_eq!(all(&db), expect);
    for i in 0..3000 {
        db.put(format!("k{:05}", (i * 104_729) % 3000), format!("m{i}"))
            .expect("put");
    }
    db.wait_for_compactions().expect("wait");
    let s = db.stats();
    assert_eq!(s.levels[0].files, 0, "the old L0 tables drained: {s}");
    assert!(s.l0_rows.column_compactions > 0, "{s}");
    drain_then_one_row(&db);
    let s = db.stats();
    assert_eq!(s.levels[0].files, 0, "{s}");
    assert!(s.l0_rows.rows > 0, "{s}");
    let expect = all(&db);
    db.close().expect("close");
    drop(db);
    // Back to tables: refused while rows hold data...
    match Db::open(&dir, tiny_with("")) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("l0=matrix"), "{m}"),
        other => panic!("tables over a matrix container: {other:?}"),
    }
    // ... until compact_range drained the container.
    let db = open(&dir, tiny_with(MATRIX));
    db.compact_range::<&[u8], _>(..).expect("compact_range");
    assert_eq!(db.stats().l0_rows.rows, 0);
    assert_eq!(all(&db), expect);
    db.close().expect("close");
    drop(db);
    let db = open(&dir, tiny_with(""));
    assert_eq!(all(&db), expect);
}

#[test]
fn columns_stay_near_their_target_when_keys_run_past_l1() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Ever-growing keys: after the first drain, every new key lies past
    // the last L1 table; the columns must still be cut to about 12 KiB.
    let db = open(tmp.path(), tiny_with(MATRIX));
    for i in 0..40_000u32 {
        db.put(format!("t{i:08}"), "v".repeat(60)).expect("put");
    }
    db.wait_for_compactions().expect("wait");
    let s = db.stats();
    let m = &s.l0_rows;
    assert!(m.column_compactions > 20, "{s}");
    let mean = m.column_bytes / m.column_compactions;
    assert!(mean < 3 * 12 * 1024, "mean column {mean} B: {s}");
    assert_eq!(all(&db).len(), 40_000);
}
