//! `ttl_secs`: a version written longer ago than the ttl is gone for
//! every read (gets, scans both ways, snapshots, merges) at once, by a
//! clock the test moves; flushes and compactions write expired versions
//! as deletions and drop them; the write times survive a reopen; KVell
//! refuses a ttl.

mod common;

use common::{all, open, tiny_with, MATRIX};
use std::sync::Arc;
use strata::clock::ManualClock;
use strata::merge::U64Add;
use strata::{Db, Error, Options, ReadOptions};

fn k(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

const START: u64 = 1_700_000_000_000;

fn ttl_opts(spec: &str, clock: &Arc<ManualClock>) -> Options {
    let mut o = tiny_with(&format!("{spec},ttl_secs=10,merge_operator=u64add"));
    o.clock = clock.clone();
    o
}

fn compact(db: &Db) {
    db.compact_range::<&[u8], _>(..).expect("compact");
    db.wait_for_compactions().expect("wait");
}

fn keys(db: &Db) -> Vec<Vec<u8>> {
    all(db).into_iter().map(|(k, _)| k).collect()
}

fn rev_keys(db: &Db) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .rev()
        .map(|r| r.expect("entry").0)
        .collect();
    v.reverse();
    v
}

#[test]
fn versions_expire_for_every_read_and_compaction_removes_them() {
    for spec in ["", MATRIX] {
        let clock = Arc::new(ManualClock::new(START));
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), ttl_opts(spec, &clock));
        // 0..100 at t0, flushed; 100..200 at t0 + 6 s, in the memtable.
        for i in 0..100 {
            db.put(k(i), b"old").expect("put");
        }
        db.flush().expect("flush");
        clock.advance(6_000);
        for i in 100..200 {
            db.put(k(i), b"new").expect("put");
        }
        // Key 0 rewritten later: its newest version lives on.
        db.put(k(0), b"renewed").expect("put");
        let snap = db.snapshot();
        clock.advance(3_999);
        assert_eq!(keys(&db).len(), 200, "[{spec}] 9.999 s: nothing expired");
        clock.advance(1);
        // 10 s after the first writes: 1..100 are gone everywhere.
        let want: Vec<Vec<u8>> = std::iter::once(k(0)).chain((100..200).map(k)).collect();
        assert_eq!(db.get(k(1)).expect("get"), None, "[{spec}]");
        assert_eq!(db.get(k(0)).expect("get"), Some(b"renewed".to_vec()));
        assert_eq!(keys(&db), want, "[{spec}] forward");
        assert_eq!(rev_keys(&db), want, "[{spec}] reverse");
        let at = ReadOptions {
            snapshot: Some(&snap),
        };
        assert_eq!(
            db.get_opt(k(1), &at).expect("get"),
            None,
            "[{spec}] a snapshot too"
        );
        drop(snap);
        compact(&db);
        assert_eq!(keys(&db), want, "[{spec}] after compaction");
        let s = db.stats();
        assert!(s.expired_versions >= 99, "[{spec}] {s}");
        // The write times survive a reopen: 100..200 expire at t0 + 16 s.
        drop(db);
        let db = open(dir.path(), ttl_opts(spec, &clock));
        assert_eq!(keys(&db), want, "[{spec}] after reopen");
        clock.advance(6_000);
        assert_eq!(keys(&db), Vec::<Vec<u8>>::new(), "[{spec}] all expired");
    }
}

#[test]
fn operands_over_an_expired_version_fold_onto_nothing() {
    let clock = Arc::new(ManualClock::new(START));
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), ttl_opts("", &clock));
    db.put(k(1), U64Add::encode(100)).expect("put");
    db.merge(k(2), U64Add::encode(100)).expect("merge");
    clock.advance(8_000);
    db.merge(k(1), U64Add::encode(1)).expect("merge");
    db.merge(k(2), U64Add::encode(1)).expect("merge");
    let n = |db: &Db, i| {
        db.get(k(i))
            .expect("get")
            .map(|v| U64Add::decode(&v).expect("u64"))
    };
    assert_eq!((n(&db, 1), n(&db, 2)), (Some(101), Some(101)));
    clock.advance(2_000);
    // The older versions expired: the new operands fold onto nothing.
    assert_eq!((n(&db, 1), n(&db, 2)), (Some(1), Some(1)));
    assert_eq!(all(&db).len(), 2);
    compact(&db);
    assert_eq!((n(&db, 1), n(&db, 2)), (Some(1), Some(1)));
    clock.advance(8_000);
    assert_eq!((n(&db, 1), n(&db, 2)), (None, None));
}

#[test]
fn compactions_do_not_fold_an_operand_onto_a_base_that_expires_first() {
    let clock = Arc::new(ManualClock::new(START));
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), ttl_opts("", &clock));
    db.put(k(1), U64Add::encode(100)).expect("put");
    clock.advance(8_000);
    db.merge(k(1), U64Add::encode(1)).expect("merge");
    clock.advance(1_000);
    // Nothing expired yet: a fold here would date 100 + 1 at 8 s.
    compact(&db);
    let n = |db: &Db| {
        db.get(k(1))
            .expect("get")
            .map(|v| U64Add::decode(&v).expect("u64"))
    };
    assert_eq!(n(&db), Some(101));
    clock.advance(1_000);
    assert_eq!(
        n(&db),
        Some(1),
        "the base expired at 10 s, the operand lives"
    );
    compact(&db);
    assert_eq!(n(&db), Some(1));
}

#[test]
fn without_a_ttl_nothing_expires_and_kvell_refuses_one() {
    let clock = Arc::new(ManualClock::new(START));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = tiny_with("");
    o.clock = clock.clone();
    let db = open(dir.path(), o);
    db.put(k(1), b"v").expect("put");
    clock.advance(10_000_000);
    compact(&db);
    assert_eq!(db.get(k(1)).expect("get"), Some(b"v".to_vec()));
    drop(db);
    let dir = tempfile::tempdir().expect("tempdir");
    match strata::open(dir.path(), tiny_with("engine=kvell,ttl_secs=5")) {
        Err(Error::NotSupported(m)) => assert!(m.contains("ttl"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("kvell opened with a ttl"),
    }
}

#[test]
fn write_times_of_unflushed_versions_survive_a_close() {
    let clock = Arc::new(ManualClock::new(START));
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), ttl_opts("", &clock));
    db.put(k(1), b"a").expect("put");
    clock.advance(5_000);
    db.put(k(2), b"b").expect("put");
    db.close().expect("close");
    drop(db);
    clock.advance(3_000);
    let db = open(dir.path(), ttl_opts("", &clock));
    db.put(k(3), b"c").expect("put");
    clock.advance(2_000);
    assert_eq!(keys(&db), vec![k(2), k(3)], "10 s after k1, 5 s after k2");
    clock.advance(5_000);
    assert_eq!(keys(&db), vec![k(3)]);
}

/// Tables of the sorted levels whose every entry has expired are deleted
/// without being read (`expired_dropped_tables`); what was written since
/// stays, in both level-0 designs.
#[test]
fn wholly_expired_tables_are_dropped_unread() {
    for spec in ["", MATRIX] {
        let clock = Arc::new(ManualClock::new(START));
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), ttl_opts(spec, &clock));
        for i in 0..2_000 {
            db.put(k(i), [b'o'; 64]).expect("put");
        }
        compact(&db);
        let before = db.stats();
        let deep = before
            .levels
            .iter()
            .skip(1)
            .map(|l| l.files as u64)
            .sum::<u64>();
        assert!(deep > 0, "[{spec}] the old data lies in sorted levels");
        assert_eq!(before.expired_dropped_tables, 0, "[{spec}]");
        let read_before = before.compaction_bytes_read;
        clock.advance(10_000);
        // A fresh write and a flush wake the background threads.
        db.put(b"fresh", b"v").expect("put");
        db.flush().expect("flush");
        db.wait_for_compactions().expect("wait");
        let after = db.stats();
        assert!(
            after.expired_dropped_tables >= deep,
            "[{spec}] {} of {deep} tables dropped",
            after.expired_dropped_tables
        );
        assert_eq!(
            after.compaction_bytes_read, read_before,
            "[{spec}] dropped unread"
        );
        assert_eq!(keys(&db), vec![b"fresh".to_vec()], "[{spec}]");
        db.close().expect("close");
        drop(db);
        let db = open(dir.path(), ttl_opts(spec, &clock));
        assert_eq!(
            keys(&db),
            vec![b"fresh".to_vec()],
            "[{spec}] after a reopen"
        );
    }
}

/// An expired deletion is not dropped while an older version of its key
/// lies deeper: reopened without a ttl (expired versions readable again),
/// the deleted key stays deleted.
#[test]
fn an_expired_deletion_over_an_older_version_is_not_dropped() {
    let clock = Arc::new(ManualClock::new(START));
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = "level0_file_num_compaction_trigger=1";
    let db = open(dir.path(), ttl_opts(spec, &clock));
    for i in 0..100 {
        db.put(k(i), b"v1").expect("put");
    }
    compact(&db);
    // The deletion lands in L1, over the bottom table holding k50.
    clock.advance(1_000);
    db.delete(k(50)).expect("delete");
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    // A newer key inside the bottom table's range keeps it from being
    // wholly expired.
    clock.advance(7_000);
    let mut fresh = k(75);
    fresh.push(b'x');
    db.put(&fresh, b"new").expect("put");
    db.compact_range(fresh.as_slice()..=fresh.as_slice())
        .expect("compact");
    db.wait_for_compactions().expect("wait");
    // 11.5 s: the deletion and every v1 have expired, `fresh` has not.
    clock.advance(3_500);
    db.put(b"wake", b"w").expect("put");
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    assert_eq!(db.get(k(50)).expect("get"), None);
    db.close().expect("close");
    drop(db);
    let mut plain = tiny_with(spec);
    plain.clock = clock.clone();
    plain.apply("merge_operator=u64add").expect("options");
    let db = open(dir.path(), plain);
    assert_eq!(
        db.get(k(50)).expect("get"),
        None,
        "the deleted key came back once expired versions were readable again"
    );
    assert_eq!(db.get(&fresh).expect("get"), Some(b"new".to_vec()));
}
