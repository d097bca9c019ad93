//! `compaction_filter`: compactions remove or rewrite the values a filter
//! names, in every executor and level-0 design; a removed key's older
//! versions in deeper levels stay hidden; flushes do not filter; a value a
//! snapshot can see is never offered; a snapshot taken while a filter
//! runs makes the compaction run again without it; KVell refuses a filter.

mod common;

use common::{all, open, tiny_with, EXECUTORS, MATRIX, STALE};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use strata::compaction_filter::{Decision, FnFilter};
use strata::merge::U64Add;
use strata::{Db, Error, Options, ReadOptions, Snapshot};

fn get_at(db: &Db, key: &[u8], snap: &Snapshot) -> Option<Vec<u8>> {
    db.get_opt(
        key,
        &ReadOptions {
            snapshot: Some(snap),
        },
    )
    .expect("get")
}

fn k(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// Removes values that start with `drop`, rewrites those that start with
/// `old` to `new` plus the rest, keeps the others.
fn rule(_key: &[u8], value: &[u8]) -> Decision {
    if value.starts_with(b"drop") {
        Decision::Remove
    } else if let Some(rest) = value.strip_prefix(b"old") {
        Decision::Change([b"new", rest].concat())
    } else {
        Decision::Keep
    }
}

fn filtered(spec: &str) -> Options {
    tiny_with(spec).compaction_filter(FnFilter::new("test", rule))
}

fn compact(db: &Db) {
    db.compact_range::<&[u8], _>(..).expect("compact");
    db.wait_for_compactions().expect("wait");
}

/// The value of key `i` after round `r` of [`fill`].
fn value(i: u32, r: u32) -> Vec<u8> {
    match (i + r) % 3 {
        0 => format!("drop{i}-{r}"),
        1 => format!("old{i}-{r}"),
        _ => format!("keep{i}-{r}"),
    }
    .into_bytes()
}

/// Three rounds over 300 keys, flushed after each: every key has older
/// versions in the tables below its newest.
fn fill(db: &Db) {
    for r in 0..3 {
        for i in 0..300 {
            db.put(k(i), value(i, r)).expect("put");
        }
        db.flush().expect("flush");
    }
}

/// What the database holds once the filter ran on every key's newest value.
fn expected() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..300)
        .filter_map(|i| {
            let v = value(i, 2);
            match rule(&k(i), &v) {
                Decision::Keep => Some((k(i), v)),
                Decision::Remove => None,
                Decision::Change(n) => Some((k(i), n)),
            }
        })
        .collect()
}

#[test]
fn compactions_remove_and_rewrite_in_every_design() {
    let mut specs = vec![String::new(), MATRIX.to_string(), STALE.to_string()];
    specs.extend(EXECUTORS.iter().map(|e| e.to_string()));
    for spec in specs {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = open(dir.path(), filtered(&spec));
        fill(&db);
        // Flushes do not filter: the newest values are all there.
        assert_eq!(db.get(k(0)).expect("get"), Some(value(0, 2)), "[{spec}]");
        compact(&db);
        assert_eq!(all(&db), expected(), "[{spec}] after compaction");
        let s = db.stats();
        // Compactions during the fill may have filtered older rounds too.
        assert!(s.filter_removed >= 100, "[{spec}] {s}");
        assert!(s.filter_changed >= 100, "[{spec}] {s}");
        // Removed keys stay removed, though deeper levels held older
        // values of them; the deletions go once nothing is below.
        drop(db);
        let db = open(dir.path(), filtered(&spec));
        compact(&db);
        assert_eq!(all(&db), expected(), "[{spec}] after reopen");
        assert_eq!(
            db.stats().filter_changed,
            0,
            "[{spec}] a rewritten value is offered again and kept"
        );
    }
}

#[test]
fn a_snapshot_keeps_what_it_sees() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), filtered(""));
    db.put(k(1), b"drop-seen").expect("put");
    db.put(k(2), b"old-seen").expect("put");
    let snap = db.snapshot();
    db.put(k(3), b"drop-unseen").expect("put");
    db.flush().expect("flush");
    compact(&db);
    // The snapshot sees keys 1 and 2: the filter left them alone.
    for db_view in [Some(&snap), None] {
        let get = |key: &[u8]| match db_view {
            Some(s) => get_at(&db, key, s),
            None => db.get(key).expect("get"),
        };
        assert_eq!(get(&k(1)[..]), Some(b"drop-seen".to_vec()));
        assert_eq!(get(&k(2)[..]), Some(b"old-seen".to_vec()));
    }
    assert_eq!(db.get(k(3)).expect("get"), None);
    assert_eq!(db.stats().filter_removed, 1);
    drop(snap);
    compact(&db);
    assert_eq!(db.get(k(1)).expect("get"), None);
    assert_eq!(db.get(k(2)).expect("get"), Some(b"new-seen".to_vec()));
}

#[test]
fn a_snapshot_taken_while_the_filter_runs_makes_the_compaction_run_again() {
    // The filter's first call waits until the test took a snapshot.
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let handshake = Arc::new(Mutex::new(None));
    let armed = handshake.clone();
    let filter = FnFilter::new("wait-once", move |key, value| {
        let waiting = handshake.lock().expect("lock").take();
        if let Some((entered, go)) = waiting {
            let (entered, go): (mpsc::Sender<()>, mpsc::Receiver<()>) = (entered, go);
            entered.send(()).expect("send");
            go.recv_timeout(common::LIVENESS).expect("go");
        }
        rule(key, value)
    });
    let dir = tempfile::tempdir().expect("tempdir");
    // Each round one level-0 table, and no compaction until the test's
    // own: a background one must not filter the doomed round first.
    let opts = tiny_with("write_buffer_size=1M,level0_file_num_compaction_trigger=16");
    let db = Arc::new(open(dir.path(), opts.compaction_filter(filter)));
    fill(&db);
    // One level-0 table of values the filter removes.
    let doomed = |i: u32| format!("drop-{i}").into_bytes();
    for i in 0..300 {
        db.put(k(i), doomed(i)).expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    assert_eq!(
        db.stats().filter_removed,
        0,
        "a compaction filtered before the test"
    );
    *armed.lock().expect("lock") = Some((entered_tx, go_rx));
    let compacting = {
        let db = db.clone();
        std::thread::spawn(move || compact(&db))
    };
    entered_rx
        .recv_timeout(common::LIVENESS)
        .expect("the filter ran");
    let snap = db.snapshot();
    let before: Vec<_> = (0..300).map(|i| get_at(&db, &k(i), &snap)).collect();
    go_tx.send(()).expect("go");
    compacting.join().expect("compaction thread");
    // The snapshot reads what it read before; so does the current state,
    // since the run that installed had no filter.
    let after: Vec<_> = (0..300).map(|i| get_at(&db, &k(i), &snap)).collect();
    let changed = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    assert_eq!(
        changed, 0,
        "the snapshot saw the filter's work on {changed} keys"
    );
    assert!(before.iter().all(Option::is_some));
    assert_eq!(db.get(k(0)).expect("get"), Some(doomed(0)));
    let s = db.stats();
    assert!(s.filter_reruns >= 1, "{s}");
    drop(snap);
    compact(&db);
    assert_eq!(all(&db), vec![]);
}

#[test]
fn the_filter_sees_folded_merges() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Removes counters that reached 10 or more.
    let filter = FnFilter::new("at-ten", |_: &[u8], v: &[u8]| match U64Add::decode(v) {
        Ok(n) if n >= 10 => Decision::Remove,
        _ => Decision::Keep,
    });
    let db = open(
        dir.path(),
        tiny_with("merge_operator=u64add").compaction_filter(filter),
    );
    for i in 0..20u32 {
        for _ in 0..=i {
            db.merge(k(i), U64Add::encode(1)).expect("merge");
        }
    }
    db.flush().expect("flush");
    compact(&db);
    for i in 0..20u32 {
        let got = db.get(k(i)).expect("get").map(|v| U64Add::decode(&v).ok());
        let want = (i + 1 < 10).then_some(Some(u64::from(i + 1)));
        assert_eq!(got, want, "counter {i}");
    }
}

#[test]
fn kvell_refuses_a_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = filtered("engine=kvell");
    match strata::open(dir.path(), opts) {
        Err(Error::NotSupported(m)) => assert!(m.contains("compaction_filter"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("kvell opened with a compaction filter"),
    }
}
