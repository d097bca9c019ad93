//! The write slowdown and stop triggers (docs/ARCHITECTURE.md, "Make
//! room"): L0 tables at `level0_slowdown_writes_trigger` admit each write
//! group at the slowdown's rate (`sched/slowdown.rs`: 16 MiB/s before any
//! compaction drained level 0); L0 tables at `level0_stop_writes_trigger`, as many memtables
//! as `max_write_buffer_number`, or compaction debt at
//! `hard_pending_compaction_bytes_limit` stop a writer whose memtable is
//! full until background work catches up; debt at
//! `soft_pending_compaction_bytes_limit` slows writers like the L0
//! slowdown.
//!
//! A memtable waiting for its flush while writers fill the last free one
//! paces them (`pace_count`).
//!
//! The single background thread is held inside a flush event, so no flush
//! or compaction can relieve the pressure: what happens is decided by the
//! triggers alone, and checked on the `slowdown_count` and `stall_count`
//! counters (never on time). A helper thread releases the background thread
//! once it sees the writer stalled, or once the writer finished without
//! stalling (then the test fails).

mod common;

use common::{open, HoldFlush, ReleaseOnDrop};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use strata::{Db, Options, StatsSnapshot};

/// 8 KiB memtables and one background thread; the triggers are set per test.
fn base() -> Options {
    Options::default()
        .write_buffer_size(8 * 1024)
        .background_threads(1)
}

fn put_n(db: &Db, from: usize, n: usize) {
    for i in from..from + n {
        db.put(format!("key{i:06}"), [b'v'; 100]).expect("put");
    }
}

/// What the helper saw when it released the background thread.
struct Seen {
    stalled: Option<StatsSnapshot>,
}

/// Opens with `opts`, makes `hold_at` flushes (the last one holds the
/// background thread), then returns the database, the gate (released when
/// dropped) and how many keys were written.
fn held(dir: &std::path::Path, opts: Options, hold_at: usize) -> (Db, ReleaseOnDrop, usize) {
    let gate = HoldFlush::new(hold_at);
    let db = open(dir, opts.listener(gate.clone()));
    let mut next = 0;
    for _ in 0..hold_at {
        put_n(&db, next, 20);
        next += 20;
        db.flush().expect("flush");
    }
    gate.wait_entered();
    (db, ReleaseOnDrop(gate), next)
}

/// Writes three memtables' worth of keys from `next` while a helper waits
/// for a stall (then records the stats and releases the gate) or for the
/// writes to finish without one (then releases the gate too).
fn write_through(db: &Arc<Db>, gate: &Arc<HoldFlush>, next: usize) -> Seen {
    let done = Arc::new(AtomicBool::new(false));
    let helper = {
        let (db, gate, done) = (db.clone(), gate.clone(), done.clone());
        std::thread::spawn(move || loop {
            let s = db.stats();
            if s.stall_count > 0 {
                gate.release();
                return Seen { stalled: Some(s) };
            }
            if done.load(Ordering::Acquire) {
                gate.release();
                return Seen { stalled: None };
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        })
    };
    put_n(db, next, 250);
    done.store(true, Ordering::Release);
    let seen = helper.join().expect("helper");
    // Everything written is there once the pressure is gone.
    for i in 0..next + 250 {
        assert!(
            db.get(format!("key{i:06}")).expect("get").is_some(),
            "key{i:06} lost"
        );
    }
    seen
}

#[test]
fn l0_slowdown_delays_each_write_and_l0_stop_stalls_a_full_memtable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = base()
        .max_write_buffer_number(4)
        .level0_file_num_compaction_trigger(2)
        .level0_slowdown_writes_trigger(2)
        .level0_stop_writes_trigger(2);
    let (db, gate, next) = held(dir.path(), opts, 2);
    // Below the trigger (one L0 table during the first writes) and the
    // forced switches of `flush`: no delay.
    let s = db.stats();
    assert_eq!(s.slowdown_count, 0, "delayed below the trigger: {s:?}");
    assert_eq!(s.levels[0].files, 2);
    // Two L0 tables: each write (its own group) is slowed once. A small
    // group's cost at the slowdown's rate (a few µs) is carried over, not
    // slept; a 64 KiB group's (about 4 ms at 16 MiB/s) is slept.
    put_n(&db, next, 3);
    let s = db.stats();
    assert_eq!(s.slowdown_count, 3, "one slowdown per write group: {s:?}");
    assert_eq!(s.slowdown_micros, 0, "small groups slept: {s:?}");
    db.put("big", vec![b'b'; 64 << 10]).expect("put");
    let s = db.stats();
    assert_eq!(s.slowdown_count, 4, "{s:?}");
    assert!(s.slowdown_micros > 0, "a 64 KiB group did not sleep: {s:?}");
    assert_eq!(s.stall_count, 0, "the memtable was not full yet: {s:?}");
    let db = Arc::new(db);
    let seen = write_through(&db, &gate.0, next + 3);
    let s = seen
        .stalled
        .expect("two L0 tables and a full memtable must stop the writer");
    assert_eq!(s.levels[0].files, 2, "stalled on L0: {s:?}");
    assert_eq!(s.immutable_memtables, 0, "not on the memtable count: {s:?}");
}

#[test]
fn too_many_memtables_stall_the_writer_without_slowing_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Defaults: 2 memtables, L0 triggers 4 / 20 / 36.
    let (db, gate, next) = held(dir.path(), base(), 1);
    let db = Arc::new(db);
    let seen = write_through(&db, &gate.0, next);
    let s = seen
        .stalled
        .expect("a full memtable with one waiting for its flush must stop the writer");
    assert_eq!(s.immutable_memtables, 1, "{s:?}");
    assert_eq!(s.levels[0].files, 1, "{s:?}");
    assert_eq!(s.slowdown_count, 0, "below every slowdown trigger: {s:?}");
}

#[test]
fn a_pending_flush_paces_writers_before_their_memtable_fills() {
    // Write pacing (docs/ARCHITECTURE.md, "Pacing"): with every memtable
    // slot taken, writes into the last free memtable are spread over the
    // time the flush is expected to need, instead of running into a full
    // memtable at full speed.
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, gate, next) = held(dir.path(), base(), 1);
    assert_eq!(db.stats().pace_count, 0, "paced with a free slot");
    let db = Arc::new(db);
    let seen = write_through(&db, &gate.0, next);
    let s = seen
        .stalled
        .expect("a full memtable with one waiting for its flush must stop the writer");
    assert!(
        s.pace_count > 0,
        "writes into the last free memtable were not paced: {s:?}"
    );
    assert_eq!(s.slowdown_count, 0, "{s:?}");
}

#[test]
fn pending_compaction_bytes_slow_down_and_stop_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Two L0 tables reach the compaction trigger, so their bytes are
    // compaction debt, above both (tiny) limits; the L0 count triggers are
    // far away.
    let mut opts = base()
        .max_write_buffer_number(4)
        .level0_file_num_compaction_trigger(2);
    opts.soft_pending_compaction_bytes_limit = 1;
    opts.hard_pending_compaction_bytes_limit = 1;
    let (db, gate, next) = held(dir.path(), opts, 2);
    assert_eq!(db.stats().slowdown_count, 0);
    put_n(&db, next, 2);
    assert_eq!(
        db.stats().slowdown_count,
        2,
        "the soft limit slows each write"
    );
    let db = Arc::new(db);
    let seen = write_through(&db, &gate.0, next + 2);
    let s = seen
        .stalled
        .expect("debt over the hard limit and a full memtable must stop the writer");
    assert_eq!(s.levels[0].files, 2, "{s:?}");
    assert_eq!(s.immutable_memtables, 0, "{s:?}");
}

#[test]
fn without_pressure_nothing_is_delayed_or_stopped() {
    // The control: the same writes with the background thread free.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), base());
    put_n(&db, 0, 300);
    db.flush().expect("flush");
    let s = db.stats();
    assert!(s.flush_count >= 2, "{s:?}");
    assert_eq!(s.slowdown_count, 0, "{s:?}");
}

#[test]
fn a_merge_out_of_level_0_sets_the_slowdown_rate() {
    // The rate slowed writers are admitted at follows the merges that
    // drain level 0 (`sched/slowdown.rs`): 16 MiB/s until the first.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(
        dir.path(),
        Options::default()
            .write_buffer_size(8 * 1024)
            .level0_file_num_compaction_trigger(2),
    );
    assert_eq!(db.stats().slowdown_rate, 16 << 20, "before any drain");
    // Overlapping keys in every table: level 0 is merged, not moved.
    for _ in 0..4 {
        put_n(&db, 0, 50);
        db.flush().expect("flush");
    }
    db.wait_for_compactions().expect("compactions");
    let s = db.stats();
    assert!(s.compaction_count > 0, "no merge ran: {s:?}");
    assert_ne!(s.slowdown_rate, 16 << 20, "no drain was measured: {s:?}");
    assert!(s.slowdown_rate >= 1 << 20, "below the floor: {s:?}");
}
