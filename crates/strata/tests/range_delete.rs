//! `delete_range`: what it hides, from whom, and across flushes,
//! compactions and reopens, in every level-0 design; compaction drops what
//! it hides and the tombstone retires once nothing is left to hide.

mod common;

use common::{all, open, tiny_with, MATRIX};
use strata::{Db, ReadOptions, WriteBatch, WriteOptions};

fn k(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn fill(db: &Db, n: u32, tag: &str) {
    for i in 0..n {
        db.put(k(i), format!("{tag}{i}")).expect("put");
    }
}

fn keys(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<u8>> {
    entries.iter().map(|e| e.0.clone()).collect()
}

fn snapshot_scan(db: &Db, s: &strata::Snapshot) -> Vec<(Vec<u8>, Vec<u8>)> {
    let ro = ReadOptions { snapshot: Some(s) };
    db.scan_opt::<&[u8], _>(.., &ro)
        .expect("scan")
        .collect::<Result<Vec<_>, _>>()
        .expect("scan entries")
}

const DESIGNS: [&str; 2] = ["", MATRIX];

#[test]
fn hides_the_range_from_later_reads_only() {
    for design in DESIGNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), tiny_with(design));
        fill(&db, 300, "a");
        let before = db.snapshot();
        db.delete_range(k(100), k(200)).expect("delete_range");
        // Written after the tombstone: visible.
        db.put(k(150), "new").expect("put");
        let check = |db: &Db, ctx: &str| {
            assert_eq!(db.get(k(99)).expect("get"), Some(b"a99".to_vec()), "{ctx}");
            assert_eq!(db.get(k(100)).expect("get"), None, "{ctx}");
            assert_eq!(db.get(k(199)).expect("get"), None, "{ctx}");
            assert_eq!(
                db.get(k(200)).expect("get"),
                Some(b"a200".to_vec()),
                "{ctx}"
            );
            assert_eq!(db.get(k(150)).expect("get"), Some(b"new".to_vec()), "{ctx}");
            let got = keys(&all(db));
            let mut want: Vec<Vec<u8>> = (0..100).chain(200..300).map(k).collect();
            want.push(k(150));
            want.sort();
            assert_eq!(got, want, "{ctx}: scan");
            let back: Vec<Vec<u8>> = db
                .scan::<&[u8], _>(..)
                .expect("scan")
                .rev()
                .map(|e| e.expect("entry").0)
                .collect();
            assert_eq!(
                back,
                want.iter().rev().cloned().collect::<Vec<_>>(),
                "{ctx}: reverse"
            );
        };
        check(&db, &format!("[{design}] memtable"));
        let snap = snapshot_scan(&db, &before);
        assert_eq!(snap.len(), 300, "[{design}] the snapshot sees all");
        db.flush().expect("flush");
        check(&db, &format!("[{design}] flushed"));
        assert_eq!(
            snapshot_scan(&db, &before).len(),
            300,
            "[{design}] flushed snapshot"
        );
        db.compact_range::<&[u8], _>(..).expect("compact");
        check(&db, &format!("[{design}] compacted"));
        assert_eq!(
            snapshot_scan(&db, &before).len(),
            300,
            "[{design}] compacted snapshot"
        );
        drop(before);
        db.close().expect("close");
        drop(db);
        let db = open(dir.path(), tiny_with(design));
        check(&db, &format!("[{design}] reopened"));
    }
}

#[test]
fn a_batch_orders_puts_around_its_range_deletion() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with(""));
    let mut b = WriteBatch::new();
    b.put(k(1), "old");
    b.put(k(2), "old");
    b.delete_range(k(0), k(5));
    b.put(k(2), "new");
    db.write(b, &WriteOptions::default()).expect("write");
    assert_eq!(db.get(k(1)).expect("get"), None);
    assert_eq!(db.get(k(2)).expect("get"), Some(b"new".to_vec()));
}

#[test]
fn inverted_range_is_refused_and_empty_range_deletes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with(""));
    fill(&db, 10, "a");
    let e = db.delete_range(k(5), k(2)).expect_err("inverted");
    assert!(matches!(e, strata::Error::InvalidArgument(_)), "{e}");
    db.delete_range(k(3), k(3)).expect("empty");
    assert_eq!(all(&db).len(), 10);
}

#[test]
fn kvell_refuses_range_deletion() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = strata::Options::default();
    o.apply("engine=kvell").expect("options");
    let store = strata::open(dir.path(), o).expect("open kvell");
    assert!(!store.semantics().range_deletes);
    store.put(b"a", b"1").expect("put");
    let e = store.delete_range(b"a", b"b").expect_err("kvell");
    assert!(matches!(e, strata::Error::NotSupported(_)), "{e}");
    let mut b = WriteBatch::new();
    b.put(b"c", b"2");
    b.delete_range(b"a", b"b");
    let e = store
        .write(b, &WriteOptions::default())
        .expect_err("kvell batch");
    assert!(matches!(e, strata::Error::NotSupported(_)), "{e}");
    // Nothing of the refused batch was applied.
    assert_eq!(store.get(b"c").expect("get"), None);
    assert_eq!(store.get(b"a").expect("get"), Some(b"1".to_vec()));
}

/// An empty range written last in a memtable still ends the history its
/// flush records: the next log continues from it, and a reopen replays
/// the writes after it (the model test found this).
#[test]
fn an_empty_range_keeps_the_history_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with(""));
    db.put(k(1), "a").expect("put");
    db.delete_range(k(3), k(3)).expect("empty range");
    db.flush().expect("flush");
    db.put(k(2), "b").expect("put");
    db.close().expect("close");
    drop(db);
    let db = open(dir.path(), tiny_with(""));
    assert_eq!(db.get(k(2)).expect("get"), Some(b"b".to_vec()));
    assert!(db.recovery_report().is_none(), "{:?}", db.recovery_report());
}

/// Compaction drops what a tombstone hides once no snapshot needs it, and
/// the tombstone retires when no table may still hold a version it hides.
#[test]
fn compaction_drops_hidden_versions_and_retires_the_tombstone() {
    for design in DESIGNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), tiny_with(design));
        fill(&db, 2000, "value-");
        db.flush().expect("flush");
        db.compact_range::<&[u8], _>(..).expect("compact");
        let before = db.stats();
        // A snapshot below the tombstone keeps background compactions from
        // retiring it before the count is read.
        let hold = db.snapshot();
        db.delete_range(k(0), k(1900)).expect("delete_range");
        db.flush().expect("flush");
        assert_eq!(db.stats().range_tombstones, 1, "[{design}] flushed");
        drop(hold);
        db.compact_range::<&[u8], _>(..).expect("compact");
        let after = db.stats();
        assert_eq!(after.range_tombstones, 0, "[{design}] retired");
        assert!(
            after.range_dropped_tables > 0,
            "[{design}] tables wholly hidden are deleted unread"
        );
        let live = |s: &strata::StatsSnapshot| s.levels.iter().map(|l| l.bytes).sum::<u64>();
        assert!(
            live(&after) * 5 < live(&before),
            "[{design}] {} bytes left of {}",
            live(&after),
            live(&before)
        );
        assert_eq!(keys(&all(&db)), (1900..2000).map(k).collect::<Vec<_>>());
        db.close().expect("close");
        drop(db);
        let db = open(dir.path(), tiny_with(design));
        assert_eq!(all(&db).len(), 100, "[{design}] reopened");
    }
}

/// A snapshot older than the tombstone keeps what it hides: compaction
/// keeps those versions and the tombstone stays until it is released.
#[test]
fn an_older_snapshot_keeps_the_hidden_versions_until_released() {
    for design in DESIGNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), tiny_with(design));
        fill(&db, 1000, "v");
        db.flush().expect("flush");
        db.compact_range::<&[u8], _>(..).expect("compact");
        let snap = db.snapshot();
        db.delete_range(k(100), k(900)).expect("delete_range");
        db.compact_range::<&[u8], _>(..).expect("compact");
        assert_eq!(
            db.stats().range_tombstones,
            1,
            "[{design}] kept for the snapshot"
        );
        assert_eq!(snapshot_scan(&db, &snap).len(), 1000, "[{design}] snapshot");
        assert_eq!(all(&db).len(), 200, "[{design}] latest");
        drop(snap);
        db.compact_range::<&[u8], _>(..).expect("compact");
        assert_eq!(
            db.stats().range_tombstones,
            0,
            "[{design}] retired once released"
        );
        assert_eq!(all(&db).len(), 200, "[{design}] latest after");
    }
}

/// Background compaction clears the tombstone too (no manual compaction):
/// the picker's last resort.
#[test]
fn background_compaction_retires_tombstones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with(""));
    fill(&db, 2000, "value-");
    db.flush().expect("flush");
    db.compact_range::<&[u8], _>(..).expect("compact");
    db.delete_range(k(500), k(1500)).expect("delete_range");
    db.flush().expect("flush");
    common::wait_until("the tombstone retires", || {
        db.wait_for_compactions().expect("wait");
        db.stats().range_tombstones == 0
    });
    assert_eq!(all(&db).len(), 1000);
}

/// Hidden versions in level 0 alone (below its compaction trigger) still
/// go: the picker merges level 0 down, and the tombstone retires.
#[test]
fn a_tombstone_over_level_0_alone_retires_in_the_background() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with(""));
    fill(&db, 200, "v");
    db.flush().expect("flush");
    db.delete_range(k(50), k(150)).expect("delete_range");
    db.flush().expect("flush");
    common::wait_until("the tombstone retires", || {
        db.wait_for_compactions().expect("wait");
        db.stats().range_tombstones == 0
    });
    assert_eq!(all(&db).len(), 100);
}

/// Releasing the snapshot that held a tombstone back wakes the background
/// threads: the tombstone retires without any further write.
#[test]
fn releasing_the_oldest_snapshot_lets_the_background_clear_a_tombstone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with(""));
    fill(&db, 2000, "value-");
    db.flush().expect("flush");
    db.compact_range::<&[u8], _>(..).expect("compact");
    let snap = db.snapshot();
    db.delete_range(k(500), k(1500)).expect("delete_range");
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    assert_eq!(db.stats().range_tombstones, 1, "held by the snapshot");
    drop(snap);
    common::wait_until("the tombstone retires", || db.stats().range_tombstones == 0);
    assert_eq!(all(&db).len(), 1000);
}
