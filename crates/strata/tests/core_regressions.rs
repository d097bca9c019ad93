//! Regression tests for defects found by review of the core (issue 13):
//! file-number reuse after recovery, holes in the history across WALs,
//! `flush` waiting for memtables switched after the call, and the smaller
//! ones (listener panics, `close` during `compact_range`, sequence ranges).

mod common;

use common::{HistOp, Model};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata::io::fault::{Op, Rule, Trigger};
use strata::io::{
    CrashKind, FaultError, FaultFs, FileLock, FileSystem, MemFs, RandomAccessFile, SequentialFile,
    WritableFile,
};
use strata::{Db, Options, WalRecovery, WriteOptions};

const DIR: &str = "/db";

/// A file system that holds every table creation while its gate is
/// closed: flushes (and compactions) wait, memtable switches go on. With a
/// delay, each table creation is slowed instead.
#[derive(Debug)]
struct GateFs {
    inner: MemFs,
    closed: Mutex<bool>,
    cv: Condvar,
    delay: Duration,
}

impl GateFs {
    fn new(inner: MemFs) -> Arc<Self> {
        Arc::new(GateFs {
            inner,
            closed: Mutex::new(true),
            cv: Condvar::new(),
            delay: Duration::ZERO,
        })
    }

    fn slow(inner: MemFs, delay: Duration) -> Arc<Self> {
        Arc::new(GateFs {
            inner,
            closed: Mutex::new(false),
            cv: Condvar::new(),
            delay,
        })
    }

    fn open_gate(&self) {
        *self.closed.lock() = false;
        self.cv.notify_all();
    }
}

impl FileSystem for GateFs {
    fn create_dir_all(&self, path: &Path) -> strata::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> strata::Result<Box<dyn WritableFile>> {
        if path.to_string_lossy().ends_with(".table") {
            let mut closed = self.closed.lock();
            while *closed {
                self.cv.wait(&mut closed);
            }
            drop(closed);
            std::thread::sleep(self.delay);
        }
        self.inner.create(path)
    }
    fn open_random(&self, path: &Path) -> strata::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random(path)
    }
    fn open_sequential(&self, path: &Path) -> strata::Result<Box<dyn SequentialFile>> {
        self.inner.open_sequential(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> strata::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> strata::Result<()> {
        self.inner.remove_file(path)
    }
    fn list_dir(&self, path: &Path) -> strata::Result<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> strata::Result<u64> {
        self.inner.file_size(path)
    }
    fn sync_dir(&self, path: &Path) -> strata::Result<()> {
        self.inner.sync_dir(path)
    }
    fn lock(&self, path: &Path) -> strata::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value{i:05}-{}", "v".repeat(90)).into_bytes()
}

fn wals(fs: &dyn FileSystem) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs
        .list_dir(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .map(|n| Path::new(DIR).join(n))
        .collect();
    v.sort();
    v
}

/// Writes single puts `from..` until the database has `logs` WALs (its
/// flushes are held by the gate). Returns the next index.
fn fill_logs(db: &Db, fs: &dyn FileSystem, from: usize, logs: usize) -> usize {
    let mut i = from;
    while wals(fs).len() < logs {
        db.put(key(i), value(i)).expect("put");
        i += 1;
        assert!(i < from + 10_000, "no memtable switch");
    }
    i
}

fn state(db: &Db) -> Model {
    common::all(db).into_iter().collect()
}

/// Item 2: recovery marks every file number on disk as used, so the log it
/// creates never takes (and truncates) the number of a log it replayed
/// before the manifest names the new log.
#[test]
fn recovery_never_reuses_the_number_of_a_replayed_log() {
    let mem = MemFs::new();
    let gate = GateFs::new(mem.clone());
    let opts = Options::default()
        .fs(gate.clone())
        .write_buffer_size(4096)
        .max_write_buffer_number(4);
    let db = Db::open(DIR, opts).expect("open");
    // Two switches while the first flush is held: two WALs the manifest
    // never named.
    let n = fill_logs(&db, &*gate, 0, 3);
    db.write(
        {
            let mut b = strata::WriteBatch::new();
            b.put(b"synced", b"yes");
            b
        },
        &WriteOptions { sync: true },
    )
    .expect("synced write");
    let crashed = mem.power_loss();
    gate.open_gate();
    drop(db);

    // Recovery writes one or more tables, then creates its log: try
    // several memtable sizes so that the log number lands on each replayed
    // log in turn.
    for wbs in [4096, 6 << 10, 8 << 10, 12 << 10, 16 << 10, 1 << 20] {
        let fs = crashed.crash_clone(CrashKind::Process);
        let f = FaultFs::new(Arc::new(fs.clone()), 1);
        f.handle()
            .add(Rule::new(Op::Create, Trigger::From(1), FaultError::Eio).on_paths("MANIFEST"));
        let opts = |fs: Arc<dyn FileSystem>| Options::default().fs(fs).write_buffer_size(wbs);
        let e = Db::open(DIR, opts(Arc::new(f))).expect_err("open with no manifest creation");
        assert!(e.io_kind().is_some(), "wbs {wbs}: {e}");
        let db = Db::open(DIR, opts(Arc::new(fs))).expect("reopen");
        assert_eq!(
            db.get(b"synced").expect("get").as_deref(),
            Some(&b"yes"[..]),
            "wbs {wbs}: the synced write is gone"
        );
        for i in 0..n {
            assert_eq!(
                db.get(key(i)).expect("get"),
                Some(value(i)),
                "wbs {wbs}: key {i}"
            );
        }
    }
}

/// Item 3: an older log whose unsynced tail was lost exactly at a record
/// boundary must not be followed by a newer log: the history would have a
/// hole (later writes present, earlier ones gone).
#[test]
fn a_log_cut_at_a_record_boundary_ends_the_history() {
    let mem = MemFs::new();
    let gate = GateFs::new(mem.clone());
    let opts = Options::default()
        .fs(gate.clone())
        .write_buffer_size(4096)
        .max_write_buffer_number(4);
    let db = Db::open(DIR, opts).expect("open");
    let n = fill_logs(&db, &*gate, 0, 2);
    // A few more puts into the newer log.
    for i in n..n + 10 {
        db.put(key(i), value(i)).expect("put");
    }
    let n = n + 10;
    let crashed = mem.crash_clone(CrashKind::Process);
    gate.open_gate();
    drop(db);

    let logs = wals(&crashed);
    assert_eq!(logs.len(), 2, "{logs:?}");
    // Record boundaries of the older log.
    let older = &logs[0];
    let mut r = strata::wal::Reader::new(
        crashed.open_sequential(older).expect("open log"),
        older.clone(),
        WalRecovery::AbsoluteConsistency,
    );
    let mut ends = Vec::new();
    while r.read_record().expect("read").is_some() {
        ends.push(r.last_good_offset());
    }
    assert!(ends.len() > 12, "older log holds {} records", ends.len());
    let keep = 10; // records (one put each)
    let cut = ends[keep - 1] as usize;
    let data = crashed.read_file(older).expect("read log");
    let mut w = crashed.create(older).expect("rewrite log");
    w.append(&data[..cut]).expect("append");
    w.sync().expect("sync");
    drop(w);
    crashed.sync_dir(Path::new(DIR)).expect("sync dir");

    let history: Vec<HistOp> = (0..n)
        .map(|i| HistOp {
            entries: vec![(key(i), Some(value(i)))],
            sync: false,
        })
        .collect();
    for mode in [WalRecovery::TolerateCorruptedTail, WalRecovery::PointInTime] {
        let fs = crashed.crash_clone(CrashKind::Process);
        let db =
            Db::open(DIR, Options::default().fs(Arc::new(fs)).wal_recovery(mode)).expect("open");
        let got = state(&db);
        assert_eq!(
            common::matching_prefix(&history, 0, &got),
            Some(keep),
            "{mode:?}: not the prefix before the cut: {}",
            common::prefix_diff(&history, &got)
        );
    }
    let fs = crashed.crash_clone(CrashKind::Process);
    let e = Db::open(
        DIR,
        Options::default()
            .fs(Arc::new(fs))
            .wal_recovery(WalRecovery::AbsoluteConsistency),
    )
    .expect_err("absolute consistency refuses a gap");
    assert!(e.is_corruption(), "{e}");
}

/// Item 4: `flush` waits for the memtables that existed at the call, not
/// for every memtable writers switch meanwhile.
#[test]
fn flush_returns_while_writers_saturate() {
    // Flushes slower than the writers fill memtables: an immutable
    // memtable is always waiting.
    let fs = GateFs::slow(MemFs::new(), Duration::from_millis(20));
    let db = Arc::new(
        Db::open(
            DIR,
            Options::default()
                .fs(fs)
                .write_buffer_size(4096)
                .max_write_buffer_number(3),
        )
        .expect("open"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    db.put(format!("t{t}-{i:08}"), value(i)).expect("put");
                    i += 1;
                }
                i
            })
        })
        .collect();
    // Let the writers get going.
    while db.stats().flush_count < 3 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let db = db.clone();
        std::thread::spawn(move || {
            for _ in 0..3 {
                let r = db.flush();
                let _ = tx.send(r);
            }
        });
    }
    // A liveness guard, not a timing assertion: the old code never returned
    // while the writers ran.
    let mut done = 0;
    while done < 3 {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(r) => {
                r.expect("flush");
                done += 1;
            }
            Err(_) => break,
        }
    }
    let returned_while_writing = done == 3 && !stop.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let written: usize = writers.into_iter().map(|w| w.join().expect("writer")).sum();
    assert!(
        returned_while_writing,
        "flush returned {done} of 3 times while the writers ran"
    );
    assert!(written > 0);
}
