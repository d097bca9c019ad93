//! Checkpoints (`Db::checkpoint`, `KvStore::checkpoint`): a copy of a live
//! database that opens on its own and holds every write acknowledged
//! before the call, in every design; hard links on one file system; the
//! source untouched by a failed checkpoint; the copy durable once the call
//! returns.

mod common;

use common::{all, history, tiny_with, Model, EXECUTORS, MATRIX, STALE};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use strata::io::fault::{FaultError, FaultFs, Op, Rule, Trigger};
use strata::io::{CrashKind, FileSystem, MemFs};
use strata::{Db, Error, Options};

/// Every design the model test runs: level 0 as tables or rows, both
/// pickers, every in-process executor.
fn designs() -> Vec<String> {
    let mut d = vec![String::new(), STALE.to_string(), MATRIX.to_string()];
    d.extend(EXECUTORS.iter().map(|s| s.to_string()));
    d
}

fn open(dir: &Path, opts: Options) -> Db {
    Db::open(dir, opts).unwrap_or_else(|e| panic!("open {}: {e}", dir.display()))
}

fn model(ops: &[common::HistOp]) -> Model {
    let mut m = Model::new();
    for op in ops {
        op.apply(&mut m);
    }
    m
}

#[test]
fn a_checkpoint_holds_every_acknowledged_write_in_every_design() {
    for (i, spec) in designs().iter().enumerate() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (src, ck) = (tmp.path().join("db"), tmp.path().join("ck"));
        let ops = history(40 + i as u64, 1_200, 400, 0.0);
        let db = open(&src, tiny_with(spec));
        for op in &ops[..700] {
            op.write(&db).expect("write");
        }
        let stats = db.checkpoint(&ck).expect("checkpoint");
        assert!(stats.files > 0 && stats.bytes > 0, "[{spec}] {stats:?}");
        assert_eq!(
            stats.copied_bytes, 0,
            "[{spec}] one file system: links only"
        );
        // A table of the copy is the same file as the source's.
        let linked = std::fs::read_dir(&ck)
            .expect("list")
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".table"))
            .map(|e| e.file_name());
        if let Some(name) = linked {
            let ino = |d: &Path| std::fs::metadata(d.join(&name)).expect("stat").ino();
            assert_eq!(ino(&src), ino(&ck), "[{spec}] {name:?} is a hard link");
        }
        // The source goes on: its compactions delete files the copy links.
        for op in &ops[700..] {
            op.write(&db).expect("write");
        }
        db.compact_range::<&[u8], _>(..).expect("compact");
        assert_eq!(
            all(&db),
            model(&ops).into_iter().collect::<Vec<_>>(),
            "[{spec}] source"
        );
        db.close().expect("close");
        let copy = open(&ck, tiny_with(spec));
        assert_eq!(
            all(&copy),
            model(&ops[..700]).into_iter().collect::<Vec<_>>(),
            "[{spec}] the copy holds the first 700 writes and nothing after"
        );
        // The copy is a database of its own: it takes writes.
        copy.put(b"after", b"x").expect("put");
        copy.close().expect("close");
    }
}

/// Rows on a fast tier of their own go into the copy's directory: the
/// copy opens with the same `l0` and no `fast_dir`.
#[test]
fn rows_in_a_fast_dir_go_into_the_copy() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (src, ck, fast) = (
        tmp.path().join("db"),
        tmp.path().join("ck"),
        tmp.path().join("fast"),
    );
    let spec = format!("{MATRIX},fast_dir={}", fast.display());
    let ops = history(9, 600, 200, 0.0);
    let db = open(&src, tiny_with(&spec));
    // Most of the history drained by hand, then a tail far below the
    // container's trigger: its rows stay whatever the compactor's timing.
    let (head, tail) = ops.split_at(ops.len() - 20);
    for op in head {
        op.write(&db).expect("write");
    }
    db.compact_range::<&[u8], _>(..).expect("compact_range");
    for op in tail {
        op.write(&db).expect("write");
    }
    db.flush().expect("flush");
    assert!(db.stats().l0_rows.rows > 0, "the container holds rows");
    db.checkpoint(&ck).expect("checkpoint");
    db.close().expect("close");
    drop(db);
    let copy = open(&ck, tiny_with(MATRIX));
    assert!(copy.stats().l0_rows.rows > 0, "the copy holds the rows");
    assert_eq!(all(&copy), model(&ops).into_iter().collect::<Vec<_>>());
}

/// With a writer going on, the copy is a prefix of its writes that holds
/// every one acknowledged before the call.
#[test]
fn a_checkpoint_under_concurrent_writes_is_a_prefix_with_every_earlier_write() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    for spec in ["", MATRIX] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ck = tmp.path().join("ck");
        let db = Arc::new(open(&tmp.path().join("db"), tiny_with(spec)));
        let (acked, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let writer = {
            let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) || i < 3_000 {
                    db.put(format!("k{i:08}").as_bytes(), [b'v'; 40])
                        .expect("put");
                    i += 1;
                    acked.store(i, Ordering::Release);
                }
            })
        };
        while acked.load(Ordering::Acquire) < 1_500 {
            std::thread::yield_now();
        }
        let before = acked.load(Ordering::Acquire);
        db.checkpoint(&ck).expect("checkpoint");
        stop.store(true, Ordering::Relaxed);
        writer.join().expect("writer");
        let copy = open(&ck, tiny_with(spec));
        let keys: Vec<Vec<u8>> = all(&copy).into_iter().map(|(k, _)| k).collect();
        let n = keys.len() as u64;
        assert!(
            n >= before,
            "[{spec}] {n} keys, {before} acknowledged before"
        );
        let prefix: Vec<Vec<u8>> = (0..n).map(|i| format!("k{i:08}").into_bytes()).collect();
        assert_eq!(keys, prefix, "[{spec}] the copy is a prefix of the writes");
    }
}

#[test]
fn a_checkpoint_inside_the_database_directory_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    let db = open(&dir, tiny_with(""));
    db.put(b"k", b"v").expect("put");
    match db.checkpoint(dir.join("ck.tmp")) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("inside"), "{m}"),
        other => panic!("checkpoint inside the database gave {other:?}"),
    }
    assert!(!dir.join("ck.tmp").exists());
    db.close().expect("close");
    drop(db);
    let db = open(&dir, tiny_with(""));
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
}

#[test]
fn a_checkpoint_into_an_existing_directory_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = open(&tmp.path().join("db"), tiny_with(""));
    db.put(b"k", b"v").expect("put");
    let target = tmp.path().join("there");
    std::fs::create_dir(&target).expect("mkdir");
    match db.checkpoint(&target) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("exists"), "{m}"),
        other => panic!("checkpoint into an existing directory gave {other:?}"),
    }
    assert_eq!(std::fs::read_dir(&target).expect("list").count(), 0);
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
}

/// A checkpoint that fails partway (a copy's file cannot be created)
/// returns the error and leaves the database serving, writable and whole
/// across a reopen.
#[test]
fn a_failed_checkpoint_leaves_the_database_whole() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()), 7);
    let handle = fault.handle();
    let opts = || tiny_with("").fs(Arc::new(fault.clone()));
    let ops = history(77, 600, 200, 0.1);
    let db = open(Path::new("/db"), opts());
    for op in &ops[..400] {
        op.write(&db).expect("write");
    }
    db.flush().expect("flush");
    // The copy is made by `create` on MemFs (no hard links there): fail
    // the second file created under the target.
    handle.add(Rule::new(Op::Create, Trigger::Matching(2), FaultError::Eio).on_paths("/ck/"));
    let before = handle.injected();
    match db.checkpoint("/ck") {
        Err(e) => assert!(e.io_kind().is_some(), "an I/O error, got {e}"),
        Ok(s) => panic!("the checkpoint succeeded despite the fault: {s:?}"),
    }
    assert_eq!(handle.injected(), before + 1, "the fault fired");
    for op in &ops[400..] {
        op.write(&db).expect("the database still takes writes");
    }
    assert_eq!(all(&db), model(&ops).into_iter().collect::<Vec<_>>());
    db.close().expect("close");
    drop(db);
    let db = open(Path::new("/db"), opts());
    assert_eq!(all(&db), model(&ops).into_iter().collect::<Vec<_>>());
    // A second checkpoint into a fresh directory works.
    db.checkpoint("/ck2").expect("checkpoint");
    db.close().expect("close");
    let copy = open(Path::new("/ck2"), opts());
    assert_eq!(all(&copy), model(&ops).into_iter().collect::<Vec<_>>());
}

/// Once `checkpoint` returns, the copy survives a power loss, in both
/// level-0 designs (rows are copied into the target too).
#[test]
fn a_checkpoint_survives_a_power_loss() {
    for spec in ["", MATRIX] {
        let fs = MemFs::new();
        let opts = || tiny_with(spec).fs(Arc::new(fs.clone()));
        let ops = history(5, 500, 150, 0.0);
        let db = open(Path::new("/db"), opts());
        for op in &ops {
            op.write(&db).expect("write");
        }
        let stats = db.checkpoint("/ck").expect("checkpoint");
        assert!(stats.copied_bytes > 0, "[{spec}] MemFs copies: {stats:?}");
        let lost = fs.crash_clone(CrashKind::PowerLoss);
        drop(db);
        assert!(lost.exists(Path::new("/ck/CURRENT")), "[{spec}]");
        let copy = open(
            Path::new("/ck"),
            tiny_with(spec).fs(Arc::new(lost) as Arc<dyn FileSystem>),
        );
        assert_eq!(
            all(&copy),
            model(&ops).into_iter().collect::<Vec<_>>(),
            "[{spec}] the copy after a power loss"
        );
    }
}

#[test]
fn kvell_says_it_has_no_checkpoints() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut opts = Options::default();
    opts.apply("engine=kvell,kvell_workers=1").expect("options");
    let store = strata::open(tmp.path().join("kv"), opts).expect("open");
    store.put(b"k", b"v").expect("put");
    match store.checkpoint(&tmp.path().join("ck")) {
        Err(Error::NotSupported(m)) => assert!(m.contains("kvell"), "{m}"),
        other => panic!("kvell checkpoint gave {other:?}"),
    }
    assert!(!tmp.path().join("ck").exists());
}
