//! Iterator error semantics (DURABILITY.md, "Iterator errors"): once any
//! source of a read fails, a `DbIter` is invalid and `status()` holds the
//! error; a `Scan` yields `Err` and then ends. No walk — forward, backward,
//! or across a direction change or re-seek — may show an older version of a
//! key, a deleted key, or skip a key because the table holding the newest
//! version could not be read.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata::io::fault::{Op, Rule, Trigger};
use strata::io::{FaultError, FaultFs, FaultHandle, FileSystem, MemFs};
use strata::{Db, DbIter, Options, ReadOptions};

const DIR: &str = "/db";
const N: usize = 200;
/// The length of the L0 table's values: long enough that a forward walk
/// of `N` steps outruns the pieces a scan reads ahead of itself (32 KiB
/// first), so faults armed mid-walk meet a read.
const NEW_LEN: usize = 400;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn opts(fs: Arc<dyn FileSystem>) -> Options {
    Options::default()
        .fs(fs)
        .block_size(256)
        // No block cache: every block a cursor needs is read from the file.
        .block_cache_size(0)
        .write_buffer_size(1 << 20)
}

fn tables(mem: &MemFs) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = mem
        .list_dir(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".table"))
        .map(|n| Path::new(DIR).join(n))
        .collect();
    v.sort();
    v
}

/// Builds: L1 holds every key with an "old" value; a newer L0 table holds a
/// "new" value for every even key and a tombstone for every odd key. Returns
/// the file system and the path of the L0 table.
fn fixture() -> (MemFs, PathBuf) {
    let mem = MemFs::new();
    let db = Db::open(DIR, opts(Arc::new(mem.clone()))).expect("open");
    for i in 0..N {
        db.put(key(i), format!("old{i:04}-{}", "o".repeat(40)))
            .expect("put");
    }
    db.compact_range::<&[u8], _>(..).expect("compact");
    let before = tables(&mem);
    for i in 0..N {
        if i.is_multiple_of(2) {
            db.put(key(i), format!("new{i:04}-{}", "n".repeat(NEW_LEN)))
                .expect("put");
        } else {
            db.delete(key(i)).expect("delete");
        }
    }
    db.flush().expect("flush");
    db.close().expect("close");
    let after = tables(&mem);
    let new: Vec<_> = after.iter().filter(|p| !before.contains(p)).collect();
    assert_eq!(new.len(), 1, "one new L0 table: {before:?} -> {after:?}");
    assert!(!before.is_empty(), "L1 holds tables");
    (mem, new[0].clone())
}

/// What a correct read of key `i` may return.
fn expected(i: usize) -> Option<Vec<u8>> {
    i.is_multiple_of(2)
        .then(|| format!("new{i:04}-{}", "n".repeat(NEW_LEN)).into_bytes())
}

fn index_of(k: &[u8]) -> usize {
    std::str::from_utf8(&k[3..])
        .expect("utf8")
        .parse()
        .expect("index")
}

/// Checks the iterator's current position: either a right (newest, live)
/// entry, or invalid with an error held. Returns true if it met an error.
fn check_position(it: &DbIter, ctx: &str) -> bool {
    if it.valid() {
        let i = index_of(it.key());
        assert_eq!(
            Some(it.value().to_vec()),
            expected(i),
            "{ctx}: key{i:04} shows a stale or deleted version"
        );
        assert!(it.status().is_ok(), "{ctx}: valid with an error held");
        false
    } else {
        it.status().is_err()
    }
}

fn faulty(mem: &MemFs) -> (Arc<dyn FileSystem>, Arc<FaultHandle>) {
    let f = FaultFs::new(Arc::new(mem.clone()), 7);
    let h = f.handle();
    (Arc::new(f), h)
}

fn fail_reads_of(h: &FaultHandle, path: &Path) {
    let name = path.file_name().and_then(|n| n.to_str()).expect("name");
    h.add(Rule::new(Op::Read, Trigger::From(1), FaultError::Eio).on_paths(name));
}

#[test]
fn damaged_newest_table_is_an_error_for_get_scan_and_iter() {
    let (mem, l0) = fixture();
    // Damage the first data block of the L0 table, which holds key0000.
    mem.corrupt(&l0, 10, |b| b ^ 0x5a).expect("corrupt");
    let db = Db::open(DIR, opts(Arc::new(mem.clone()))).expect("reopen");

    let e = db
        .get(key(0))
        .expect_err("get of a key in the damaged block");
    assert!(e.is_corruption(), "{e}");

    // Forward scan: the first item is the error, then the scan ends.
    let mut s = db.scan(key(0)..).expect("scan");
    match s.next() {
        Some(Err(e)) => assert!(e.is_corruption(), "{e}"),
        other => panic!("forward scan over a damaged newest table gave {other:?}"),
    }
    assert!(s.next().is_none(), "a scan ends after its error");

    // Backward scan ending at key0000.
    let mut s = db.scan(..=key(0)).expect("scan").rev();
    match s.next() {
        Some(Err(e)) => assert!(e.is_corruption(), "{e}"),
        other => panic!("backward scan over a damaged newest table gave {other:?}"),
    }
    assert!(s.next().is_none(), "a scan ends after its error");

    // Cursor: seek, then every other positioning call keeps the error.
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek(&key(0));
    assert!(
        !it.valid(),
        "valid on {:?}",
        String::from_utf8_lossy(it.key())
    );
    assert!(it.status().is_err());
    it.seek_to_last();
    assert!(
        !it.valid() && it.status().is_err(),
        "re-seek forgot the error"
    );
    it.seek_for_prev(&key(N - 1));
    assert!(
        !it.valid() && it.status().is_err(),
        "re-seek forgot the error"
    );
    it.seek_to_first();
    assert!(
        !it.valid() && it.status().is_err(),
        "re-seek forgot the error"
    );
}

/// Walks `steps` steps with `step`, enabling read faults on the L0 table
/// after `arm_after` steps; returns whether an error was met. Every position
/// is checked for stale data.
fn walk(
    db: &Db,
    h: &FaultHandle,
    l0: &Path,
    start: &Start,
    step: &Step,
    arm_after: usize,
    ctx: &str,
) -> bool {
    h.clear();
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    start(&mut it);
    assert!(!check_position(&it, ctx) && it.valid(), "{ctx}: start");
    for n in 0..N {
        if n == arm_after {
            fail_reads_of(h, l0);
        }
        step(&mut it, n);
        if check_position(&it, &format!("{ctx} step {n}")) {
            // Sticky: nothing brings it back.
            it.next();
            it.prev();
            assert!(
                !it.valid() && it.status().is_err(),
                "{ctx}: error forgotten"
            );
            it.seek(&key(0));
            assert!(
                !it.valid() && it.status().is_err(),
                "{ctx}: error forgotten"
            );
            h.clear();
            return true;
        }
        if !it.valid() {
            break;
        }
    }
    h.clear();
    false
}

type Start = dyn Fn(&mut DbIter);
type Step = dyn Fn(&mut DbIter, usize);

#[test]
fn read_errors_mid_walk_never_show_stale_data() {
    let (mem, l0) = fixture();
    let (fs, h) = faulty(&mem);
    let db = Db::open(DIR, opts(fs)).expect("reopen");
    let seek_mid = |it: &mut DbIter| it.seek(&key(N / 2));
    let first = |it: &mut DbIter| it.seek_to_first();
    let last = |it: &mut DbIter| it.seek_to_last();
    let fwd = |it: &mut DbIter, _: usize| it.next();
    let back = |it: &mut DbIter, _: usize| it.prev();
    let zigzag = |it: &mut DbIter, n: usize| {
        if n % 3 == 2 {
            it.prev()
        } else {
            it.next()
        }
    };
    let zagzig = |it: &mut DbIter, n: usize| {
        if n % 3 == 2 {
            it.next()
        } else {
            it.prev()
        }
    };
    let cases: [(&str, &Start, &Step); 5] = [
        ("forward", &first, &fwd),
        ("backward", &last, &back),
        ("forward then back", &seek_mid, &back),
        ("backward then forward", &last, &zagzig),
        ("zigzag", &seek_mid, &zigzag),
    ];
    for (name, start, step) in cases {
        for arm_after in [0, 1, 5, 20] {
            let ctx = format!("{name}, faults after {arm_after} steps");
            let met = walk(&db, &h, &l0, start, step, arm_after, &ctx);
            assert!(met, "{ctx}: the walk never met the injected error");
        }
    }

    // A direction change alone: positioned on key(N/2) forward, the L0
    // cursor re-seeks on prev() and must fail, not fall back to L1.
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek(&key(N / 2));
    assert!(it.valid());
    fail_reads_of(&h, &l0);
    it.prev();
    assert!(
        !check_position(&it, "direction change") || !it.valid(),
        "direction change"
    );
    h.clear();
}

#[test]
fn scan_stops_at_a_read_error() {
    let (mem, l0) = fixture();
    let (fs, h) = faulty(&mem);
    let db = Db::open(DIR, opts(fs)).expect("reopen");
    for rev in [false, true] {
        let mut s = db.scan::<&[u8], _>(..).expect("scan");
        let mut got = 0;
        let mut err = false;
        loop {
            let item = if rev { s.next_back() } else { s.next() };
            match item {
                None => break,
                Some(Ok((k, v))) => {
                    assert!(!err, "an item after the error");
                    assert_eq!(Some(v), expected(index_of(&k)), "stale entry");
                    got += 1;
                    if got == 10 {
                        fail_reads_of(&h, &l0);
                    }
                }
                Some(Err(_)) => err = true,
            }
        }
        assert!(err, "rev={rev}: the scan ended without the error");
        h.clear();
    }
}
