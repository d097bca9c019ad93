//! Active compaction (the stale picker): stale versions are dropped only
//! where no snapshot can see them, early compactions reclaim them, and the
//! read shortcut never answers with an older version than a normal read.

mod common;

use common::{open, tiny_with, STALE};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use strata::{Db, ReadOptions};

const KEYS: usize = 200;

fn key(i: usize) -> String {
    format!("key{i:05}")
}

fn value(i: usize, version: u32) -> String {
    format!("v{version}-{i:05}-{}", "x".repeat(80))
}

fn write_all(db: &Db, version: u32) {
    for i in 0..KEYS {
        db.put(key(i), value(i, version)).expect("put");
    }
}

/// Writes version 1 of every key and pushes it to the last level, then
/// version 2 on top: every version-1 entry is stale.
fn stale_bottom(db: &Db, snapshot_between: bool) -> Option<strata::Snapshot> {
    write_all(db, 1);
    db.compact_range::<&[u8], _>(..).expect("compact_range");
    let last = db.stats().levels.len() - 1;
    assert_eq!(
        db.stats().levels[last].files,
        db.stats().levels.iter().map(|l| l.files).sum::<usize>(),
        "version 1 sits in the last level"
    );
    let snap = snapshot_between.then(|| db.snapshot());
    write_all(db, 2);
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    snap
}

#[test]
fn a_version_a_snapshot_sees_is_never_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with(STALE));
    let snap = stale_bottom(&db, true).expect("snapshot");
    let s = db.stats();
    assert!(
        s.stale_compactions > 0,
        "the stale last-level tables were compacted early: {s}"
    );
    assert_eq!(
        s.stale_dropped, 0,
        "nothing dropped under the snapshot: {s}"
    );
    let ro = ReadOptions {
        snapshot: Some(&snap),
    };
    for i in 0..KEYS {
        let at_snap = db.get_opt(key(i), &ro).expect("get");
        assert_eq!(
            at_snap,
            Some(value(i, 1).into_bytes()),
            "snapshot {}",
            key(i)
        );
        let now = db.get(key(i)).expect("get");
        assert_eq!(now, Some(value(i, 2).into_bytes()), "latest {}", key(i));
    }
    // Through an iterator too (no shortcut there).
    let mut it = db.iter(&ro).expect("iter");
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert!(it.value().starts_with(b"v1-"), "iterator at the snapshot");
        n += 1;
        it.next();
    }
    it.status().expect("iter status");
    assert_eq!(n, KEYS);
}

#[test]
fn without_a_snapshot_the_stale_versions_go() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), tiny_with(STALE));
    let last = db.stats().levels.len() - 1;
    stale_bottom(&db, false);
    let s = db.stats();
    assert!(s.stale_compactions > 0, "{s}");
    // Most version-1 entries were dropped by an early rewrite of the last
    // level (the small update table evicts some keys: those stay).
    assert!(
        s.stale_dropped >= KEYS as u64 / 2,
        "stale versions dropped: {}; {s}",
        s.stale_dropped
    );
    assert!(
        s.update_table_entries > 0 && s.update_table_bytes <= 16 * 1024,
        "{s}"
    );
    for i in 0..KEYS {
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i, 2).into_bytes()));
    }
    let s = db.stats();
    assert!(s.shortcut_hits > 0, "reads took the shortcut: {s}");
    // The same history with the leveled picker leaves the last level whole.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let leveled = open(dir2.path(), tiny_with(""));
    stale_bottom(&leveled, false);
    let l = leveled.stats();
    assert_eq!(l.stale_compactions + l.stale_dropped, 0);
    assert!(
        s.levels[last].bytes < l.levels[last].bytes / 2,
        "stale: {} B in the last level, leveled: {} B",
        s.levels[last].bytes,
        l.levels[last].bytes
    );
}

/// A writer overwrites keys with rising counters while background flushes
/// and (early) compactions run; readers check that a get never returns a
/// counter older than the one acknowledged before it started, and that a
/// get at a snapshot (which may take the shortcut) agrees with an iterator
/// at the same snapshot (which never does).
#[test]
fn the_shortcut_never_returns_an_older_version() {
    const N: usize = 300;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(open(dir.path(), tiny_with(STALE)));
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..N).map(|_| AtomicU64::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let val = |c: u64| format!("{c:010}-{}", "y".repeat(60));
    let writer = {
        let (db, acked, done) = (db.clone(), acked.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(1);
            for c in 1..=40_000u64 {
                let i = rng.gen_range(0..N);
                db.put(key(i), val(c)).expect("put");
                acked[i].store(c, Ordering::Release);
            }
            done.store(true, Ordering::Release);
        })
    };
    let counter = |v: &[u8]| -> u64 {
        std::str::from_utf8(&v[..10])
            .ok()
            .and_then(|s| s.parse().ok())
            .expect("counter")
    };
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (db, acked, done) = (db.clone(), acked.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + t);
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < 2_000 {
                    let i = rng.gen_range(0..N);
                    let before = acked[i].load(Ordering::Acquire);
                    let got = db.get(key(i)).expect("get");
                    let c = got.as_deref().map_or(0, counter);
                    assert!(
                        c >= before,
                        "{}: read {c} after {before} was acknowledged",
                        key(i)
                    );
                    if reads.is_multiple_of(16) {
                        let snap = db.snapshot();
                        let ro = ReadOptions {
                            snapshot: Some(&snap),
                        };
                        let by_get = db.get_opt(key(i), &ro).expect("get");
                        let mut it = db.iter(&ro).expect("iter");
                        it.seek(key(i).as_bytes());
                        let by_iter = (it.valid() && it.key() == key(i).as_bytes())
                            .then(|| it.value().to_vec());
                        it.status().expect("iter");
                        assert_eq!(by_get, by_iter, "{} at a snapshot", key(i));
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    writer.join().expect("writer");
    for r in readers {
        r.join().expect("reader");
    }
    let s = db.stats();
    assert!(s.shortcut_hits > 0, "{s}");
    assert!(s.flush_count > 10 && s.compaction_count > 0, "{s}");
    assert!(
        s.stale_dropped > 0,
        "stale versions were dropped meanwhile: {s}"
    );
}
