//! Basic API behaviour of `Db`.

mod common;

use common::{all, open, tiny_options};
use strata::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

#[test]
fn put_get_delete_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = open(dir.path(), Options::default());
        db.put(b"a", b"1").expect("put");
        db.put(b"b", b"2").expect("put");
        db.put(b"", b"empty key").expect("put empty key");
        db.delete(b"b").expect("delete");
        assert_eq!(db.get(b"a").expect("get"), Some(b"1".to_vec()));
        assert_eq!(db.get(b"b").expect("get"), None);
        assert_eq!(db.get(b"").expect("get"), Some(b"empty key".to_vec()));
        assert_eq!(db.get(b"zz").expect("get"), None);
    }
    let db = open(dir.path(), Options::default());
    assert_eq!(db.get(b"a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(db.get(b"b").expect("get"), None);
    assert_eq!(all(&db).len(), 2);
}

#[test]
fn oversized_key_or_value_is_rejected_and_nothing_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), Options::default());
    let big_key = vec![7u8; 64 * 1024 + 1];
    assert!(matches!(
        db.put(&big_key, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    let ok_key = vec![7u8; 64 * 1024];
    db.put(&ok_key, b"v").expect("64 KiB key is allowed");
    let mut b = WriteBatch::new();
    b.put(b"x", b"1");
    b.put(&big_key, b"2");
    assert!(matches!(
        db.write(b, &WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(
        db.get(b"x").expect("get"),
        None,
        "a rejected batch writes nothing"
    );
}

#[test]
fn second_open_is_locked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _db = open(dir.path(), Options::default());
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked(_))
    ));
}

#[test]
fn create_if_missing_and_error_if_exists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("db");
    assert!(matches!(
        Db::open(&p, Options::default().create_if_missing(false)),
        Err(Error::NotFound(_))
    ));
    drop(open(&p, Options::default()));
    assert!(matches!(
        Db::open(&p, Options::default().error_if_exists(true)),
        Err(Error::AlreadyExists(_))
    ));
}

#[test]
fn snapshot_keeps_its_view_through_flush_and_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_options());
    for i in 0..500u32 {
        db.put(format!("k{i:04}"), b"old").expect("put");
    }
    let snap = db.snapshot();
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    for i in 0..500u32 {
        if i % 2 == 0 {
            db.delete(format!("k{i:04}")).expect("delete");
        } else {
            db.put(format!("k{i:04}"), b"new").expect("put");
        }
    }
    db.flush().expect("flush");
    db.compact_range::<&[u8], _>(..).expect("compact");
    let ro = ReadOptions {
        snapshot: Some(&snap),
    };
    for i in 0..500u32 {
        assert_eq!(
            db.get_opt(format!("k{i:04}"), &ro).expect("get"),
            Some(b"old".to_vec())
        );
    }
    // The iterator created before the overwrites still sees the old state.
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.value(), b"old");
        n += 1;
        it.next();
    }
    it.status().expect("iterator status");
    assert_eq!(n, 500);
    assert_eq!(all(&db).len(), 250);
}

#[test]
fn scan_ranges_and_reverse() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_options());
    for i in 0..100u32 {
        db.put(format!("{i:03}"), i.to_le_bytes()).expect("put");
    }
    let keys = |r: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<String> {
        r.into_iter()
            .map(|(k, _)| String::from_utf8(k).unwrap_or_default())
            .collect()
    };
    let fwd: Vec<_> = db
        .scan("010".as_bytes().."015".as_bytes())
        .expect("scan")
        .map(|r| r.expect("entry"))
        .collect();
    assert_eq!(keys(fwd), ["010", "011", "012", "013", "014"]);
    let rev: Vec<_> = db
        .scan("010".as_bytes()..="015".as_bytes())
        .expect("scan")
        .rev()
        .map(|r| r.expect("entry"))
        .collect();
    assert_eq!(keys(rev), ["015", "014", "013", "012", "011", "010"]);
    let mut s = db.scan::<&[u8], _>(..).expect("scan");
    assert_eq!(s.next().map(|r| r.expect("e").0), Some(b"000".to_vec()));
    assert_eq!(
        s.next_back().map(|r| r.expect("e").0),
        Some(b"099".to_vec())
    );
    assert_eq!(s.count(), 98);
}

/// A scan read from both ends in a random interleaving returns each entry
/// of its range once, in order from each end, and stops where the ends
/// meet: over tables and the memtable, with overwritten and deleted keys,
/// for every kind of bound.
#[test]
fn scans_read_from_both_ends_meet_once() {
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use std::ops::Bound;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_options());
    let mut model = BTreeMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    for round in 0..3 {
        for _ in 0..300 {
            let k = format!("{:03}", rng.gen_range(0..200)).into_bytes();
            if rng.gen_bool(0.2) {
                db.delete(&k).expect("delete");
                model.remove(&k);
            } else {
                let v = format!("v{round}-{}", rng.gen::<u16>()).into_bytes();
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
        }
        if round < 2 {
            db.flush().expect("flush");
        }
    }
    let bound = |rng: &mut rand::rngs::StdRng| -> Bound<Vec<u8>> {
        let k = format!("{:03}", rng.gen_range(0..210)).into_bytes();
        match rng.gen_range(0..3) {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        }
    };
    for _ in 0..200 {
        let (lo, hi) = (bound(&mut rng), bound(&mut rng));
        let empty = match (&lo, &hi) {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a > b || (a == b && !matches!((&lo, &hi), (Bound::Included(_), Bound::Included(_))))
            }
            _ => false,
        };
        let want: Vec<(Vec<u8>, Vec<u8>)> = if empty {
            Vec::new()
        } else {
            model
                .range((lo.clone(), hi.clone()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let mut s = db.scan((lo.clone(), hi.clone())).expect("scan");
        // Writes after the scan began are not in it, at either end (the
        // back end's iterator is made later, on the same view).
        for k in ["000", "100", "150", "199", "205"] {
            db.put(k, "later").expect("put");
        }
        db.delete(
            model
                .keys()
                .nth(model.len() / 2)
                .cloned()
                .unwrap_or_default(),
        )
        .expect("delete");
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let item = if rng.gen_bool(0.5) {
                s.next().map(|r| (true, r))
            } else {
                s.next_back().map(|r| (false, r))
            };
            match item {
                Some((true, r)) => front.push(r.expect("entry")),
                Some((false, r)) => back.push(r.expect("entry")),
                None => break,
            }
        }
        assert!(
            s.next().is_none() && s.next_back().is_none(),
            "ended scan goes on"
        );
        back.reverse();
        front.extend(back);
        assert_eq!(front, want, "range {lo:?} .. {hi:?}");
        // Undo the later writes in the model's terms: write the model back.
        for k in ["000", "100", "150", "199", "205"] {
            match model.get(k.as_bytes()) {
                Some(v) => db.put(k, v).expect("put"),
                None => db.delete(k).expect("delete"),
            }
        }
        if let Some((k, v)) = model.iter().nth(model.len() / 2) {
            db.put(k, v).expect("put");
        }
    }
}

#[test]
fn stats_report_writes_flushes_and_amplification() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_options());
    for i in 0..2000u32 {
        db.put(format!("key{:06}", (i * 7919) % 2000), [1u8; 100])
            .expect("put");
    }
    db.flush().expect("flush");
    let s = db.stats();
    assert_eq!(s.user_writes, 2000);
    assert!(s.flush_count > 0);
    assert!(s.wal_bytes > s.user_bytes_written);
    assert!(s.write_amplification() > 1.0);
    assert!(s.levels.iter().map(|l| l.files).sum::<usize>() > 0);
    assert!(s.to_json().contains("\"write_amplification\""));
}

#[test]
fn a_snapshot_outliving_its_db_does_not_keep_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), Options::default());
    db.put(b"k", b"v").expect("put");
    let snap = db.snapshot();
    drop(db);
    let db = open(dir.path(), Options::default());
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
    drop(snap);
}

#[test]
fn wait_for_compactions_leaves_every_level_within_its_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = tiny_options();
    let db = open(dir.path(), opts.clone());
    for i in 0..20_000u32 {
        db.put(format!("key{:06}", (i * 7919) % 20_000), [7u8; 100])
            .expect("put");
    }
    db.wait_for_compactions().expect("wait");
    let s = db.stats();
    assert_eq!(s.immutable_memtables, 0);
    assert!(s.compaction_count > 0, "{s:?}");
    assert!(
        s.levels[0].files < opts.level0_file_num_compaction_trigger,
        "L0 still due: {:?}",
        s.levels
    );
    let mut target = opts.max_bytes_for_level_base;
    for (level, l) in s
        .levels
        .iter()
        .enumerate()
        .take(opts.num_levels - 1)
        .skip(1)
    {
        assert!(
            l.bytes <= target,
            "L{level} over its target: {:?}",
            s.levels
        );
        target *= opts.max_bytes_for_level_multiplier;
    }
    assert_eq!(all(&db).len(), 20_000);
    db.close().expect("close");
    assert!(matches!(db.wait_for_compactions(), Err(Error::Closed)));
}

#[test]
fn disjoint_level0_tables_read_as_one_level() {
    // Ordered flushes leave key-disjoint tables side by side in L0 (the
    // compaction trigger is out of reach); one later table overlaps them
    // all. Reads merge the disjoint ones as one level: every read must
    // still see the newest version of every key, both ways.
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = tiny_options()
        .level0_file_num_compaction_trigger(100)
        .level0_slowdown_writes_trigger(200)
        .level0_stop_writes_trigger(300);
    let db = open(dir.path(), opts);
    let key = |i: usize| format!("key{i:05}").into_bytes();
    let mut model = common::Model::new();
    for round in 0..5 {
        for i in round * 60..(round + 1) * 60 {
            let v = format!("v{i}-{round}").into_bytes();
            db.put(key(i), &v).expect("put");
            model.insert(key(i), v);
        }
        db.flush().expect("flush");
    }
    for i in (0..300).step_by(37) {
        let v = format!("new{i}").into_bytes();
        db.put(key(i), &v).expect("put");
        model.insert(key(i), v);
    }
    db.delete(key(61)).expect("delete");
    model.remove(&key(61));
    db.flush().expect("flush");
    let l0 = db.stats().levels[0].files;
    assert!(
        l0 >= 6,
        "L0 holds the disjoint tables and the overlapping one: {l0}"
    );

    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(all(&db), want);
    let back: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan::<&[u8], _>(..)
        .expect("scan")
        .rev()
        .collect::<Result<_, _>>()
        .expect("reverse scan");
    assert_eq!(back, want.iter().rev().cloned().collect::<Vec<_>>());
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    for probe in [0usize, 59, 60, 61, 119, 150, 240, 299, 300] {
        let target = key(probe);
        it.seek(&target);
        let next = model.range(target.clone()..).next();
        assert_eq!(it.valid(), next.is_some(), "seek {probe}");
        if let Some((k, v)) = next {
            assert_eq!(
                (it.key(), it.value()),
                (k.as_slice(), v.as_slice()),
                "seek {probe}"
            );
            // One step back and forth across a table boundary.
            it.prev();
            let prev = model.range(..target.clone()).next_back();
            assert_eq!(it.valid(), prev.is_some(), "prev after seek {probe}");
            if let Some((pk, _)) = prev {
                assert_eq!(it.key(), pk.as_slice(), "prev after seek {probe}");
            }
            it.next();
            if prev.is_none() {
                it.seek(&target);
            }
            assert_eq!(it.key(), k.as_slice(), "next after prev {probe}");
        }
        it.seek_for_prev(&target);
        let at_or_before = model.range(..=target.clone()).next_back();
        assert_eq!(it.valid(), at_or_before.is_some(), "seek_for_prev {probe}");
        if let Some((k, _)) = at_or_before {
            assert_eq!(it.key(), k.as_slice(), "seek_for_prev {probe}");
        }
    }
    it.status().expect("no error");
    for i in 0..300 {
        assert_eq!(
            db.get(key(i)).expect("get"),
            model.get(&key(i)).cloned(),
            "get {i}"
        );
    }
}

/// A scan with a limit reads less of a table read with pread than the
/// same walk without one: the limit reaches the table cursors
/// (`InternalIterator::scan_hint`), which then read no further ahead than
/// the limit's entries span.
#[test]
fn a_limited_scan_reads_no_further_ahead_than_its_limit() {
    use std::ops::Bound;
    use strata::{KvStore, ScanRange};
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        mmap_reads: false,
        ..Options::default()
    };
    let key = |i: u32| format!("key{i:06}").into_bytes();
    {
        let db = open(dir.path(), opts.clone());
        for i in 0..20_000u32 {
            db.put(key(i), [b'v'; 200]).expect("put");
        }
        db.flush().expect("flush");
        // Below level 0, read through a level's iterator.
        db.compact_range::<Vec<u8>, _>(..).expect("compact");
        assert_eq!(db.stats().levels[0].files, 0);
    }
    const LIMIT: usize = 700;
    let from = key(5_000);
    // Bytes the tables read for LIMIT entries from `from`, from a cold
    // open; the entries must be the LIMIT keys from there on.
    let read_for = |limited: bool| {
        let db = open(dir.path(), opts.clone());
        let before = db.stats().table_bytes_read;
        let mut got = Vec::new();
        if limited {
            let range = ScanRange::new(Bound::Included(&from[..]), Bound::Unbounded).limit(LIMIT);
            KvStore::scan_visit(&db, range, &mut |k, _| got.push(k.to_vec())).expect("scan");
        } else {
            for kv in db.scan(from.clone()..).expect("scan").take(LIMIT) {
                got.push(kv.expect("entry").0);
            }
        }
        let want: Vec<Vec<u8>> = (5_000..5_000 + LIMIT as u32).map(key).collect();
        assert_eq!(got, want);
        db.stats().table_bytes_read - before
    };
    let (limited, unlimited) = (read_for(true), read_for(false));
    // LIMIT entries span about 150-160 KB (an entry's key, value and
    // framing take 216-230 B of a block); the walk without a limit reads
    // on in doubling pieces past them.
    let span = LIMIT as u64 * 230;
    assert!(
        limited <= span + 3 * 4096 && unlimited >= limited * 4 / 3,
        "limited {limited} B, unlimited {unlimited} B, span {span} B"
    );
}
