//! Concurrent writers and readers on one `Arc<Db>`, with tiny options so
//! memtable switches, flushes and compactions run underneath.
//!
//! Longer run: `STRATA_CONC_BATCHES=20000 cargo test --release --test concurrency`
//! (batches per writer thread; default 600).

#[macro_use]
mod common;

use common::{open, tiny_options};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use strata::io::{FileSystem, WritableFile};
use strata::{Db, ReadOptions, WriteBatch, WriteOptions};

const fn assert_send_sync<T: Send + Sync>() {}
const _: () = assert_send_sync::<Db>();
const _: () = assert_send_sync::<Arc<Db>>();

const WRITERS: usize = 3;
const READERS: usize = 2;
const GROUPS: usize = 12;
const GROUP_KEYS: usize = 6;

fn batches_per_writer() -> u64 {
    std::env::var("STRATA_CONC_BATCHES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600)
}

fn group_key(g: usize, i: usize) -> String {
    format!("g/{g:02}/{i}")
}

fn counter_key(w: usize) -> String {
    format!("w/{w}")
}

/// Value written by writer `w` at its counter `c`: "w:c:" plus padding so
/// that the tiny memtables fill quickly.
fn value(w: usize, c: u64) -> Vec<u8> {
    let mut v = format!("{w}:{c}:").into_bytes();
    v.resize(v.len() + 40 + (c % 50) as usize, b'.');
    v
}

fn parse(v: &[u8]) -> (usize, u64) {
    let s = std::str::from_utf8(v).expect("utf8 value");
    let mut it = s.split(':');
    let w = it.next().and_then(|x| x.parse().ok()).expect("writer id");
    let c = it.next().and_then(|x| x.parse().ok()).expect("counter");
    (w, c)
}

/// One consistent read view: group values (all keys of a group) and the
/// writer counters, either through a snapshot + gets or one iterator.
struct View {
    groups: Vec<Option<Vec<Vec<u8>>>>,
    counters: Vec<u64>,
}

fn read_view(db: &Db, use_iter: bool) -> View {
    let mut groups: Vec<Option<Vec<Vec<u8>>>> = vec![None; GROUPS];
    let mut counters = vec![0u64; WRITERS];
    if use_iter {
        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek_to_first();
        let mut seen: HashMap<String, Vec<u8>> = HashMap::new();
        while it.valid() {
            let k = String::from_utf8(it.key().to_vec()).expect("utf8 key");
            seen.insert(k, it.value().to_vec());
            it.next();
        }
        it.status().expect("iterator status");
        for (g, slot) in groups.iter_mut().enumerate() {
            let vals: Vec<Option<Vec<u8>>> = (0..GROUP_KEYS)
                .map(|i| seen.get(&group_key(g, i)).cloned())
                .collect();
            *slot = collect_group(g, vals);
        }
        for (w, c) in counters.iter_mut().enumerate() {
            if let Some(v) = seen.get(&counter_key(w)) {
                *c = parse(v).1;
            }
        }
    } else {
        let snap = db.snapshot();
        let ro = ReadOptions {
            snapshot: Some(&snap),
        };
        // Read the counters first and the groups after: with a snapshot the
        // order must not matter.
        for (w, c) in counters.iter_mut().enumerate() {
            if let Some(v) = db.get_opt(counter_key(w), &ro).expect("get") {
                *c = parse(&v).1;
            }
        }
        for (g, slot) in groups.iter_mut().enumerate() {
            let vals: Vec<Option<Vec<u8>>> = (0..GROUP_KEYS)
                .map(|i| db.get_opt(group_key(g, i), &ro).expect("get"))
                .collect();
            *slot = collect_group(g, vals);
        }
    }
    View { groups, counters }
}

/// Asserts the keys of a group are all absent or all present and equal.
fn collect_group(g: usize, vals: Vec<Option<Vec<u8>>>) -> Option<Vec<Vec<u8>>> {
    let present = vals.iter().filter(|v| v.is_some()).count();
    if present == 0 {
        return None;
    }
    assert_eq!(
        present, GROUP_KEYS,
        "group {g}: torn batch (some keys missing)"
    );
    let vals: Vec<Vec<u8>> = vals.into_iter().flatten().collect();
    for v in &vals {
        assert!(
            v == &vals[0],
            "group {g}: torn batch: {:?} vs {:?}",
            parse(v),
            parse(&vals[0])
        );
    }
    Some(vals)
}

#[test]
fn readers_never_see_torn_batches_or_counters_going_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(open(dir.path(), tiny_options()));
    let n = batches_per_writer();
    let done = Arc::new(AtomicBool::new(false));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                for c in 1..=n {
                    let g = (w * 7 + c as usize * 5) % GROUPS;
                    let v = value(w, c);
                    let mut b = WriteBatch::new();
                    for i in 0..GROUP_KEYS {
                        b.put(group_key(g, i), &v);
                    }
                    b.put(counter_key(w), &v);
                    db.write(b, &WriteOptions::default()).expect("write");
                }
            })
        })
        .collect();

    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let db = db.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut last = vec![0u64; WRITERS];
                let mut reads = 0u64;
                let mut k = r;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let view = read_view(&db, k % 2 == 0);
                    k += 1;
                    reads += 1;
                    for (w, (&now, &before)) in view.counters.iter().zip(&last).enumerate() {
                        assert!(
                            now >= before,
                            "reader {r}: writer {w}'s counter went back from {before} to {now}"
                        );
                    }
                    // A group written by writer w at counter c is in the same
                    // batch as w's counter key, so the counter is at least c.
                    for (g, vals) in view.groups.iter().enumerate() {
                        if let Some(vals) = vals {
                            let (w, c) = parse(&vals[0]);
                            assert!(
                                c <= view.counters[w],
                                "group {g} holds writer {w} counter {c} but the counter key says {}",
                                view.counters[w]
                            );
                        }
                    }
                    last = view.counters;
                    if finished {
                        return (reads, last);
                    }
                }
            })
        })
        .collect();

    for t in writers {
        t.join().expect("writer thread");
    }
    done.store(true, Ordering::Release);
    for t in readers {
        let (reads, last) = t.join().expect("reader thread");
        assert!(reads > 0);
        // The last read started after every writer finished.
        assert_eq!(last, vec![n; WRITERS]);
    }
    let s = db.stats();
    assert_eq!(s.user_writes, n * WRITERS as u64 * (GROUP_KEYS as u64 + 1));
    assert!(s.flush_count > 0, "tiny options must flush: {s:?}");
}

/// Holds the first WAL sync until released, so writers queue behind its
/// group-commit leader.
#[derive(Debug, Default)]
struct Gate {
    armed: AtomicBool,
    released: Mutex<bool>,
    cv: Condvar,
    entered: AtomicBool,
    /// The held sync fails once released.
    fail: AtomicBool,
}

#[derive(Debug)]
struct GatedFs {
    inner: Arc<dyn FileSystem>,
    gate: Arc<Gate>,
}

struct GatedWal {
    inner: Box<dyn WritableFile>,
    gate: Arc<Gate>,
}

impl WritableFile for GatedWal {
    fn append(&mut self, data: &[u8]) -> strata::Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> strata::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> strata::Result<()> {
        if !self.gate.armed.load(Ordering::Acquire) {
            return self.inner.sync();
        }
        self.gate.entered.store(true, Ordering::Release);
        let mut released = self.gate.released.lock().expect("gate");
        while !*released {
            released = self.gate.cv.wait(released).expect("gate");
        }
        drop(released);
        if self.gate.fail.load(Ordering::Acquire) {
            return Err(strata::Error::Io {
                path: "gated.wal".into(),
                source: Arc::new(std::io::Error::other("injected sync failure")),
            });
        }
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for GatedFs {
    delegate_fs_except_create!(inner);
    fn create(&self, path: &Path) -> strata::Result<Box<dyn WritableFile>> {
        let f = self.inner.create(path)?;
        if path.extension().is_some_and(|e| e == "wal") {
            return Ok(Box::new(GatedWal {
                inner: f,
                gate: self.gate.clone(),
            }));
        }
        Ok(f)
    }
}

/// A database in `dir` whose WAL syncs pass through a [`Gate`].
fn gated_db(dir: &Path) -> (Arc<Db>, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let fs = Arc::new(GatedFs {
        inner: Arc::new(strata::io::PosixFs),
        gate: gate.clone(),
    });
    (Arc::new(open(dir, tiny_options().fs(fs))), gate)
}

#[test]
fn concurrent_sync_puts_are_all_readable() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 25;
    let dir = tempfile::tempdir().expect("tempdir");
    // The first synced write's leader is held in its WAL sync (its group is
    // that one write) while the other threads queue their first writes
    // behind it: once released, the next leader must commit the queued
    // writes as one group. Group commit merging nothing fails the test.
    let (db, gate) = gated_db(dir.path());
    gate.armed.store(true, Ordering::Release);
    let started = Arc::new(AtomicUsize::new(0));
    let writer = |t: usize| {
        let (db, started) = (db.clone(), started.clone());
        std::thread::spawn(move || {
            started.fetch_add(1, Ordering::AcqRel);
            for i in 0..PER_THREAD {
                let mut b = WriteBatch::new();
                b.put(format!("t{t}/{i:03}"), format!("v{t}.{i}"));
                db.write(b, &WriteOptions { sync: true }).expect("sync put");
            }
        })
    };
    let mut threads = vec![writer(0)];
    common::wait_until("the first writer's sync to hold", || {
        gate.entered.load(Ordering::Acquire)
    });
    threads.extend((1..THREADS).map(writer));
    common::wait_until("every writer to start", || {
        started.load(Ordering::Acquire) >= THREADS
    });
    // Give the started writers time to reach the queue (no assertion on
    // time: a slow machine merges fewer of them, and any two suffice).
    std::thread::sleep(std::time::Duration::from_millis(200));
    *gate.released.lock().expect("gate") = true;
    gate.cv.notify_all();
    for t in threads {
        t.join().expect("writer thread");
    }
    let total = (THREADS * PER_THREAD) as u64;
    let s = db.stats();
    assert_eq!(s.user_writes, total);
    // Writers queued behind a leader are committed together: fewer groups
    // than writes, and every group (all its writes ask for sync) is synced.
    assert!(
        s.write_groups < total,
        "no write was group-committed: {s:?}"
    );
    assert!(s.write_groups >= 1, "{s:?}");
    assert!(
        s.wal_syncs >= s.write_groups,
        "a synced group was not synced: {s:?}"
    );
    let check = |db: &Db| {
        for t in 0..THREADS {
            for i in 0..PER_THREAD {
                assert_eq!(
                    db.get(format!("t{t}/{i:03}")).expect("get"),
                    Some(format!("v{t}.{i}").into_bytes()),
                    "t{t}/{i:03}"
                );
            }
        }
        assert_eq!(common::all(db).len(), THREADS * PER_THREAD);
    };
    check(&db);
    let db = Arc::into_inner(db).expect("sole owner");
    drop(db);
    let db = open(dir.path(), tiny_options());
    check(&db);
}

/// A leader's WAL sync fails while seven writers wait behind it: its own
/// write, and every write queued or made after it, gets an error (the
/// database refuses writes once a sync failed), no writer is left
/// waiting, and nothing written before the failure is lost.
#[test]
fn a_failed_group_sync_reaches_every_waiting_writer() {
    const THREADS: usize = 8;
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, gate) = gated_db(dir.path());
    db.write(
        {
            let mut b = WriteBatch::new();
            b.put("before", "1");
            b
        },
        &WriteOptions { sync: true },
    )
    .expect("a synced put before the failure");
    gate.armed.store(true, Ordering::Release);
    gate.fail.store(true, Ordering::Release);
    let writer = |t: usize| {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut b = WriteBatch::new();
            b.put(format!("t{t}"), "v");
            db.write(b, &WriteOptions { sync: true })
        })
    };
    let mut threads = vec![writer(0)];
    common::wait_until("the first writer's sync to hold", || {
        gate.entered.load(Ordering::Acquire)
    });
    threads.extend((1..THREADS).map(writer));
    std::thread::sleep(std::time::Duration::from_millis(100));
    *gate.released.lock().expect("gate") = true;
    gate.cv.notify_all();
    for (t, h) in threads.into_iter().enumerate() {
        let r = h.join().expect("writer thread");
        assert!(
            r.is_err(),
            "writer {t} was acknowledged after a failed sync"
        );
    }
    let mut b = WriteBatch::new();
    b.put("after", "1");
    assert!(db.write(b, &WriteOptions::default()).is_err());
    let db = Arc::into_inner(db).expect("sole owner");
    drop(db);
    let db = open(dir.path(), tiny_options());
    assert_eq!(db.get("before").expect("get"), Some(b"1".to_vec()));
}

/// With two background threads and a CPU budget of two, one thread is kept
/// for flushes: compactions never run two at a time, so a memtable switch
/// finds a thread for its flush at once instead of waiting for a whole
/// compaction (with both threads compacting, writers stalled for one).
#[test]
fn one_background_thread_is_kept_for_flushes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = tiny_options().background_threads(2).background_cpus(2);
    let db = open(dir.path(), opts);
    for i in 0u64..40_000 {
        let k = format!("k{:08}", i.wrapping_mul(2_654_435_761) % 20_000);
        db.put(&k, format!("v{i}")).expect("put");
    }
    db.wait_for_compactions().expect("wait");
    let s = db.stats();
    assert!(s.compaction_count > 0, "no compaction ran: {s}");
    assert_eq!(s.compactions_running_max, 1, "{s}");
    assert!(s.flush_count > 0, "{s}");
}

/// Holds the first compaction that writes into level 2 or deeper inside
/// its event (its outputs stay in flight) until a compaction on another
/// thread announces a table: proof that the two ran at once.
#[derive(Default)]
struct HoldDeep {
    /// 0: nothing held yet; 1: holding; 2: released by another
    /// compaction; 3: gave up after `LIVENESS`.
    state: Mutex<u8>,
    cv: Condvar,
    holder: Mutex<Option<std::thread::ThreadId>>,
}

impl HoldDeep {
    fn state(&self) -> u8 {
        *self.state.lock().expect("state")
    }
}

impl strata::EventListener for HoldDeep {
    fn on_table_created(&self, e: &strata::TableCreated<'_>) {
        if !matches!(e.reason, strata::TableReason::Compaction) {
            return;
        }
        let me = std::thread::current().id();
        let mut st = self.state.lock().expect("state");
        let now = *st;
        match now {
            0 if e.level >= 2 => {
                *st = 1;
                *self.holder.lock().expect("holder") = Some(me);
                let deadline = std::time::Instant::now() + common::LIVENESS;
                while *st == 1 {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        *st = 3;
                        break;
                    }
                    st = self.cv.wait_timeout(st, left).expect("wait").0;
                }
            }
            1 if *self.holder.lock().expect("holder") != Some(me) => {
                *st = 2;
                self.cv.notify_all();
            }
            _ => {}
        }
    }
}

/// With four background threads (and a CPU budget of four, whatever the
/// machine's cores) the scheduler runs compactions side by side (of
/// different levels, or of one level where their tables and output
/// ranges do not meet), under every executor, and the data stays exact.
/// The first compaction into level 2 is held until another one has run
/// beside it, so the overlap does not depend on timing; writes go on
/// until then (they fill level 0, whose compaction meets nothing held).
#[test]
fn compactions_run_side_by_side() {
    for exec in ["linear", "copro:2"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let hold = Arc::new(HoldDeep::default());
        let mut opts = tiny_options()
            .background_threads(4)
            .background_cpus(4)
            .listener(hold.clone());
        opts.apply(&format!("executor={exec}")).expect("options");
        let db = open(dir.path(), opts);
        let mut model = std::collections::BTreeMap::new();
        let mut i = 0u64;
        while hold.state() != 2 {
            assert!(
                hold.state() != 3,
                "[{exec}] the held compaction waited {:?} for another one",
                common::LIVENESS
            );
            assert!(
                i < 2_000_000,
                "[{exec}] after {i} puts no compaction into level 2 was held, or none ran beside it"
            );
            let k = format!("k{:08}", i.wrapping_mul(2_654_435_761) % 20_000).into_bytes();
            let v = format!("v{i}").into_bytes();
            db.put(&k, &v).expect("put");
            model.insert(k, v);
            i += 1;
        }
        db.wait_for_compactions().expect("wait");
        let s = db.stats();
        assert!(s.compactions_running_max >= 2, "[{exec}] {s}");
        let all = common::all(&db);
        let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
        assert!(all == want, "[{exec}] scan differs from the model");
    }
}
