//! A panic inside the engine's work — here a file system that panics once,
//! as a user's `FileSystem` with a bug would — becomes an error every
//! caller sees (the database is poisoned), or, for the spare log, a counted
//! failure; no writer, `flush`, `compact_range` or `close` waits for ever.
//! Each test checks that its panic fired.

mod common;

use common::tiny_options;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;
use strata::io::fault::{Op, Rule, Trigger};
use strata::io::{FaultError, FaultFs, FaultHandle, MemFs};
use strata::{Db, Error, WriteBatch, WriteOptions};

/// Runs `f` on a thread of its own and returns its result; fails the test
/// if `f` has not returned within a minute (a hang) or panicked.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(v) => v,
        Err(RecvTimeoutError::Timeout) => panic!("{what} hung"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what} panicked through to its caller"),
    }
}

fn open(seed: u64) -> (Arc<Db>, Arc<FaultHandle>) {
    let f = FaultFs::new(Arc::new(MemFs::new()), seed);
    let h = f.handle();
    let db = Db::open("/db", tiny_options().fs(Arc::new(f))).expect("open");
    (Arc::new(db), h)
}

/// Panics at the next call of `op` on a path containing `path`, once.
fn arm(h: &FaultHandle, op: Op, path: &str) {
    h.add(Rule::new(op, Trigger::Once(h.calls(op) + 1), FaultError::Panic).on_paths(path));
}

fn is_poisoned<T: std::fmt::Debug>(r: &strata::Result<T>) -> bool {
    matches!(r, Err(Error::Poisoned(_)))
}

/// The write leader panics while syncing the log: the writers of its group
/// and every later one get an error; before, `leader_active` stayed set and
/// every later writer slept for ever.
#[test]
fn a_panic_in_a_write_poisons_instead_of_hanging() {
    let (db, h) = open(1);
    db.put("a", "1").expect("put");
    arm(&h, Op::Sync, ".wal");
    let d = db.clone();
    let r = within("the panicking write", move || {
        let mut b = WriteBatch::new();
        b.put("b", "2");
        d.write(b, &WriteOptions { sync: true })
    });
    assert_eq!(h.injected(), 1, "the panic was not injected");
    assert!(r.is_err(), "{r:?}");
    let d = db.clone();
    let r = within("a later write", move || d.put("c", "3"));
    assert!(is_poisoned(&r), "{r:?}");
    assert_eq!(db.get("a").expect("get"), Some(b"1".to_vec()));
    let d = db.clone();
    let _ = within("close", move || d.close());
}

/// A flush panics creating its table: writers stalled behind it and `flush`
/// get the error, and `close` returns; before, `flushing` stayed set.
#[test]
fn a_panic_in_a_flush_poisons_instead_of_hanging() {
    let (db, h) = open(2);
    arm(&h, Op::Create, ".table");
    let d = db.clone();
    let r = within("writes and a flush", move || {
        for i in 0..20_000u32 {
            d.put(format!("k{i:06}"), [7u8; 100])?;
        }
        d.flush()
    });
    assert_eq!(h.injected(), 1, "the panic was not injected");
    assert!(is_poisoned(&r), "{r:?}");
    let d = db.clone();
    let _ = within("close", move || d.close());
}

/// A manual compaction panics logging its edit (outside the executor,
/// whose own panics were already caught): `compact_range` gets the error,
/// the plan leaves `in_flight`, and `close` returns.
#[test]
fn a_panic_in_a_compaction_poisons_instead_of_hanging() {
    let (db, h) = open(3);
    for i in 0..3_000u32 {
        db.put(format!("k{i:06}"), [9u8; 100]).expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    arm(&h, Op::Sync, "MANIFEST");
    let d = db.clone();
    let r = within("compact_range", move || d.compact_range::<&[u8], _>(..));
    assert_eq!(h.injected(), 1, "the panic was not injected");
    assert!(r.is_err(), "{r:?}");
    let d = db.clone();
    let r = within("a later write", move || d.put("x", "y"));
    assert!(is_poisoned(&r), "{r:?}");
    assert_eq!(db.get("k000007").expect("get"), Some(vec![9u8; 100]));
    let d = db.clone();
    let _ = within("close", move || d.close());
}

/// Creating a log panics. Made ahead of time by a background thread, it is
/// a counted failure, as an error there is (the switch makes its own log);
/// before, the spare stayed `Making` and the next switch waited for ever,
/// holding the log mutex. When the switch itself made the log (no spare
/// was ready), it is the write's panic: an error, then `Poisoned`.
#[test]
fn a_panic_creating_a_log_never_hangs() {
    let (db, h) = open(4);
    arm(&h, Op::Create, ".wal");
    let d = db.clone();
    let r = within("writes across several memtable switches", move || {
        for i in 0..20_000u32 {
            d.put(format!("k{i:06}"), [5u8; 100])?;
        }
        d.flush()
    });
    assert_eq!(h.injected(), 1, "the panic was not injected");
    match r {
        Ok(()) => {
            assert!(db.stats().wal_spare_failures >= 1);
            assert_eq!(db.get("k000123").expect("get"), Some(vec![5u8; 100]));
        }
        Err(e) => {
            assert!(e.to_string().contains("panicked"), "{e}");
            let d = db.clone();
            let r = within("a later write", move || d.put("x", "y"));
            assert!(is_poisoned(&r), "{r:?}");
        }
    }
    let d = db.clone();
    let _ = within("close", move || d.close());
}
