//! `merge`: operands fold onto the version below them in reads, flushes and
//! compactions, in every level-0 design, across snapshots, range deletions
//! and reopens; a database without an operator refuses merges, and a read
//! that meets operands it cannot fold says so.

mod common;

use common::{all, open, tiny_with, MATRIX};
use strata::merge::U64Add;
use strata::{Db, Error, KvStore, Options, ReadOptions, WriteBatch, WriteOptions};

fn k(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn n(v: Option<Vec<u8>>) -> Option<u64> {
    v.map(|v| U64Add::decode(&v).expect("8 bytes"))
}

const DESIGNS: [&str; 2] = ["", MATRIX];

fn counters(design: &str) -> Options {
    tiny_with(&format!("{design},merge_operator=u64add"))
}

#[test]
fn counters_sum_across_flushes_and_compactions() {
    for design in DESIGNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), counters(design));
        db.put(k(0), U64Add::encode(100)).expect("put");
        for round in 0..20u64 {
            for i in 0..50 {
                db.merge(k(i), U64Add::encode(round + 1)).expect("merge");
            }
            if round % 4 == 3 {
                db.flush().expect("flush");
            }
        }
        let check = |db: &Db, ctx: &str| {
            // 1 + 2 + ... + 20 = 210.
            assert_eq!(n(db.get(k(0)).expect("get")), Some(310), "{ctx}");
            assert_eq!(n(db.get(k(49)).expect("get")), Some(210), "{ctx}");
            assert_eq!(db.get(k(50)).expect("get"), None, "{ctx}");
            let scan = all(db);
            assert_eq!(scan.len(), 50, "{ctx}");
            assert!(scan[1..]
                .iter()
                .all(|(_, v)| n(Some(v.clone())) == Some(210)));
            let back: Vec<_> = db
                .scan::<&[u8], _>(..)
                .expect("scan")
                .rev()
                .collect::<Result<_, _>>()
                .expect("reverse scan");
            assert_eq!(back.into_iter().rev().collect::<Vec<_>>(), scan, "{ctx}");
        };
        check(&db, &format!("[{design}] before compaction"));
        db.compact_range::<&[u8], _>(..).expect("compact");
        db.wait_for_compactions().expect("wait");
        check(&db, &format!("[{design}] after compaction"));
        let s = db.stats();
        assert!(s.merge_folds > 0, "[{design}] gets folded: {s}");
        // 20 operands per key fold into one value once compacted.
        assert!(
            s.merge_operands_folded >= 50 * 18,
            "[{design}] operands folded: {}",
            s.merge_operands_folded
        );
        drop(db);
        let db = open(dir.path(), counters(design));
        check(&db, &format!("[{design}] after reopen"));
    }
}

#[test]
fn snapshots_see_the_sum_of_their_time() {
    for design in DESIGNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), counters(design));
        let mut snaps = Vec::new();
        for round in 1..=30u64 {
            for i in 0..20 {
                db.merge(k(i), U64Add::encode(1)).expect("merge");
            }
            if round % 5 == 0 {
                snaps.push((db.snapshot(), round));
                db.flush().expect("flush");
            }
        }
        db.compact_range::<&[u8], _>(..).expect("compact");
        db.wait_for_compactions().expect("wait");
        for (s, round) in &snaps {
            let ro = ReadOptions { snapshot: Some(s) };
            for i in [0, 7, 19] {
                assert_eq!(
                    n(db.get_opt(k(i), &ro).expect("get")),
                    Some(*round),
                    "[{design}] snapshot at round {round}"
                );
            }
            let scan: Vec<_> = db
                .scan_opt::<&[u8], _>(.., &ro)
                .expect("scan")
                .collect::<Result<_, _>>()
                .expect("scan");
            assert!(scan.iter().all(|(_, v)| n(Some(v.clone())) == Some(*round)));
        }
        assert_eq!(n(db.get(k(3)).expect("get")), Some(30));
        // Operands between two snapshots were combined (partial merges),
        // though no value lies below them.
        assert!(db.stats().merge_operands_folded > 0, "[{design}]");
    }
}

#[test]
fn deletions_and_range_deletions_cut_the_history() {
    for design in DESIGNS {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), counters(design));
        for i in 0..10 {
            db.put(k(i), U64Add::encode(1000)).expect("put");
            db.merge(k(i), U64Add::encode(1)).expect("merge");
        }
        db.flush().expect("flush");
        db.delete(k(0)).expect("delete");
        db.delete_range(k(5), k(8)).expect("delete_range");
        for i in 0..10 {
            db.merge(k(i), U64Add::encode(2)).expect("merge");
        }
        let check = |db: &Db, ctx: &str| {
            for i in 0..10 {
                let want = if i == 0 || (5..8).contains(&i) {
                    2
                } else {
                    1003
                };
                assert_eq!(n(db.get(k(i)).expect("get")), Some(want), "{ctx} key {i}");
            }
            let scan = all(db);
            let sums: Vec<u64> = scan
                .iter()
                .map(|(_, v)| n(Some(v.clone())).unwrap())
                .collect();
            assert_eq!(
                sums,
                vec![2, 1003, 1003, 1003, 1003, 2, 2, 2, 1003, 1003],
                "{ctx}"
            );
        };
        check(&db, &format!("[{design}] in memtables"));
        db.flush().expect("flush");
        check(&db, &format!("[{design}] flushed"));
        db.compact_range::<&[u8], _>(..).expect("compact");
        db.wait_for_compactions().expect("wait");
        check(&db, &format!("[{design}] compacted"));
    }
}

#[test]
fn batches_mix_merges_with_puts_and_deletes_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with("merge_operator=append:+"));
    let mut b = WriteBatch::new();
    b.merge(k(1), "a");
    b.put(k(1), "x");
    b.merge(k(1), "b");
    b.merge(k(1), "c");
    b.merge(k(2), "a");
    b.delete(k(2));
    b.merge(k(2), "z");
    db.write(b, &WriteOptions::default()).expect("write");
    assert_eq!(db.get(k(1)).expect("get"), Some(b"x+b+c".to_vec()));
    assert_eq!(db.get(k(2)).expect("get"), Some(b"z".to_vec()));
    db.flush().expect("flush");
    assert_eq!(db.get(k(1)).expect("get"), Some(b"x+b+c".to_vec()));
    assert_eq!(db.get(k(2)).expect("get"), Some(b"z".to_vec()));
}

#[test]
fn without_an_operator_merges_are_refused_and_operands_fail_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = open(dir.path(), tiny_with("merge_operator=none"));
        assert!(matches!(db.merge(k(1), "x"), Err(Error::NotSupported(_))));
        let mut b = WriteBatch::new();
        b.put(k(2), "v");
        b.merge(k(1), "x");
        assert!(matches!(
            db.write(b, &WriteOptions::default()),
            Err(Error::NotSupported(_))
        ));
        // Refused whole: the put did not happen either.
        assert_eq!(db.get(k(2)).expect("get"), None);
        assert!(!KvStore::semantics(&db).merges);
    }
    {
        let db = open(dir.path(), tiny_with("merge_operator=max"));
        assert!(KvStore::semantics(&db).merges);
        db.put(k(1), "b").expect("put");
        db.merge(k(1), "a").expect("merge");
        db.merge(k(1), "c").expect("merge");
        db.put(k(2), "plain").expect("put");
        assert_eq!(db.get(k(1)).expect("get"), Some(b"c".to_vec()));
    }
    // Opened without the operator: the operand cannot be read, the rest can.
    let db = open(dir.path(), tiny_with("merge_operator=none"));
    assert!(matches!(db.get(k(1)), Err(Error::Merge(_))));
    assert_eq!(db.get(k(2)).expect("get"), Some(b"plain".to_vec()));
    let scan: Result<Vec<_>, _> = db.scan::<&[u8], _>(..).expect("scan").collect();
    assert!(matches!(scan, Err(Error::Merge(_))), "{scan:?}");
    // Flushes and compactions keep operands they cannot fold.
    db.flush().expect("flush");
    db.compact_range::<&[u8], _>(..).expect("compact");
    drop(db);
    let db = open(dir.path(), tiny_with("merge_operator=max"));
    assert_eq!(db.get(k(1)).expect("get"), Some(b"c".to_vec()));
}

#[test]
fn an_operand_the_operator_refuses_fails_reads_and_survives_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), counters(""));
    db.put(k(1), "not a number").expect("put");
    db.merge(k(1), U64Add::encode(5)).expect("merge");
    db.merge(k(2), U64Add::encode(5)).expect("merge");
    match db.get(k(1)) {
        Err(Error::Merge(m)) => assert!(m.contains("12 bytes"), "{m}"),
        other => panic!("{other:?}"),
    }
    db.flush().expect("flush");
    db.compact_range::<&[u8], _>(..).expect("compact");
    db.wait_for_compactions().expect("wait");
    assert!(matches!(db.get(k(1)), Err(Error::Merge(_))));
    assert_eq!(n(db.get(k(2)).expect("get")), Some(5));
    // A put repairs the key.
    db.put(k(1), U64Add::encode(1)).expect("put");
    db.merge(k(1), U64Add::encode(1)).expect("merge");
    assert_eq!(n(db.get(k(1)).expect("get")), Some(2));
}

#[test]
fn kvell_refuses_merges_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = Options::default();
    o.apply("engine=kvell,kvell_workers=2,merge_operator=u64add")
        .expect("options");
    let store = strata::open(dir.path(), o).expect("open kvell");
    assert!(!store.semantics().merges);
    assert!(matches!(
        store.merge(b"a", b"x"),
        Err(Error::NotSupported(_))
    ));
    let mut b = WriteBatch::new();
    b.put("b", "v");
    b.merge("a", U64Add::encode(1));
    assert!(matches!(
        store.write(b, &WriteOptions::default()),
        Err(Error::NotSupported(_))
    ));
    assert_eq!(store.get(b"b").expect("get"), None);
}
