//! The offload executor when its compaction worker fails the host: a
//! worker that cannot be reached, one slower than `offload_timeout_ms`
//! (answering late, or still writing its tables when the host gives up),
//! and one that lies about what it wrote (a descriptor's properties, a
//! table number it was not given, a table it hides, a reply that does not
//! decode). Each time the host must run the sub-task itself, install
//! nothing the worker claimed, leave no table behind once reopened, and
//! lose nothing. (The worker killed mid-compaction is in strata-cli's
//! tests; power loss under offload is in `powerloss.rs`.)

#[macro_use]
mod common;

use common::{all, open, start_worker, tiny_with};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata::compaction::executor::offload::{
    worker_metrics, Frame, Op, Reply, WorkerConfig, WorkerFs, METRIC_FAILURES, METRIC_SUBTASKS,
};
use strata::io::{FileSystem, PosixFs, WritableFile};
use strata::{Db, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(addr: &str, timeout_ms: u64) -> Options {
    tiny_with(&format!(
        "executor=offload:{addr},offload_timeout_ms={timeout_ms}"
    ))
}

/// `n` puts (a delete every 7th) into `db` and `model`.
fn write(db: &Db, model: &mut Model, n: u64) {
    for i in 0..n {
        let k = format!("key{:05}", (i * 7919) % 3000).into_bytes();
        if i % 7 == 0 {
            db.delete(&k).expect("delete");
            model.remove(&k);
        } else {
            let v = format!("v{i}-{}", "y".repeat((i % 40) as usize)).into_bytes();
            db.put(&k, &v).expect("put");
            model.insert(k, v);
        }
    }
}

fn check(db: &Db, model: &Model, what: &str) {
    let got: Model = all(db).into_iter().collect();
    assert!(
        &got == model,
        "{what}: scan differs from the model ({} vs {} entries)",
        got.len(),
        model.len()
    );
    for (k, v) in model {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "{what}: get");
    }
}

/// Table files in `dir` the open database's version does not name.
fn orphans(db: &Db, dir: &Path) -> usize {
    let live: usize = db.stats().levels.iter().map(|l| l.files).sum();
    let on_disk = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".table"))
        .count();
    on_disk.saturating_sub(live)
}

/// Waits until the worker at `addr` has answered (or failed) `requests`
/// requests: after that it writes nothing more.
fn wait_worker_idle(addr: &str, requests: u64) {
    common::wait_until("the worker to finish every request", || {
        worker_metrics(addr, Duration::from_secs(5)).is_ok_and(|m| {
            let get = |k: u8| m.iter().find(|(n, _)| *n == k).map_or(0, |(_, v)| *v);
            get(METRIC_SUBTASKS) + get(METRIC_FAILURES) >= requests
        })
    });
}

/// Writes a history under `opts`, then checks the data and that no
/// sub-task was taken from the worker (`fallbacks > 0`, nothing
/// offloaded); once the worker at `worker` (if any) has finished every
/// request, reopens the database without the offload executor and checks
/// the data again and that no orphan table is left. Returns the
/// statistics before the reopen, and `count` read with them.
fn run_failing(
    dir: &Path,
    opts: Options,
    what: &str,
    count: &AtomicU64,
    worker: Option<&str>,
) -> (strata::StatsSnapshot, u64) {
    let db = open(dir, opts);
    let mut model = Model::new();
    write(&db, &mut model, 6000);
    db.wait_for_compactions().expect("wait");
    check(&db, &model, what);
    let s = db.stats();
    let counted = count.load(Ordering::SeqCst);
    assert!(s.compaction_count > 0, "{what}: {s}");
    assert!(s.compaction_offload_fallbacks > 0, "{what}: {s}");
    assert_eq!(s.compaction_offloaded_subtasks, 0, "{what}: {s}");
    db.close().expect("close");
    drop(db);
    if let Some(addr) = worker {
        wait_worker_idle(addr, s.compaction_offload_fallbacks);
    }
    let db = open(dir, tiny_with(""));
    check(&db, &model, &format!("{what}, reopened"));
    db.wait_for_compactions().expect("wait");
    assert_eq!(
        orphans(&db, dir),
        0,
        "{what}: orphan tables after the reopen"
    );
    (s, counted)
}

#[test]
fn an_unreachable_worker_means_compacting_here() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let nobody = format!("unix:{}", tmp.path().join("nobody.sock").display());
    let dir = tmp.path().join("db");
    run_failing(
        &dir,
        options(&nobody, 2000),
        "unreachable",
        &AtomicU64::new(0),
        None,
    );
}

#[test]
fn a_worker_answering_after_the_timeout_is_not_waited_for() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The worker finishes each sub-task and holds its answer for 2 s; the
    // host gives up after 150 ms, removes what the worker wrote and runs
    // the sub-task itself under fresh numbers.
    let addr = start_worker(
        tmp.path(),
        WorkerConfig {
            reply_delay: Duration::from_secs(2),
            ..Default::default()
        },
    );
    let dir = tmp.path().join("db");
    run_failing(
        &dir,
        options(&addr, 150),
        "late answers",
        &AtomicU64::new(0),
        Some(&addr),
    );
}

/// A file system that takes `delay` before creating each table file (a
/// worker on a slow device), then passes every call on.
#[derive(Debug)]
struct SlowTables {
    inner: PosixFs,
    delay: Duration,
    created: AtomicU64,
}

impl FileSystem for SlowTables {
    fn create(&self, path: &Path) -> strata::Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "table") {
            std::thread::sleep(self.delay);
            self.created.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.create(path)
    }
    delegate_fs_except_create!(inner);
}

#[test]
fn a_worker_still_writing_when_the_host_gives_up_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Each table the worker creates waits 400 ms first: the host (200 ms)
    // has given up, removed the reserved numbers' files and run the
    // sub-task itself by the time the worker writes its tables, which are
    // then nobody's: the next open removes them.
    let slow = Arc::new(SlowTables {
        inner: PosixFs,
        delay: Duration::from_millis(400),
        created: AtomicU64::new(0),
    });
    let addr = start_worker(
        tmp.path(),
        WorkerConfig {
            fs: WorkerFs(slow.clone()),
            ..Default::default()
        },
    );
    let dir = tmp.path().join("db");
    let opts = options(&addr, 200);
    let db = open(&dir, opts.clone());
    let mut model = Model::new();
    write(&db, &mut model, 6000);
    db.wait_for_compactions().expect("wait");
    check(&db, &model, "slow writer");
    let s = db.stats();
    assert!(s.compaction_offload_fallbacks > 0, "{s}");
    assert_eq!(s.compaction_offloaded_subtasks, 0, "{s}");
    // Let the worker finish every sub-task the host gave up on: their
    // tables are on disk and named by no version.
    wait_worker_idle(&addr, s.compaction_offload_fallbacks);
    assert!(slow.created.load(Ordering::Relaxed) > 0);
    assert!(orphans(&db, &dir) > 0, "the late tables are on disk");
    db.close().expect("close");
    drop(db);
    let db = open(&dir, tiny_with(""));
    check(&db, &model, "slow writer, reopened");
    db.wait_for_compactions().expect("wait");
    assert_eq!(orphans(&db, &dir), 0, "orphan tables after the reopen");
}

/// How a lying worker changes its answers.
#[derive(Debug, Clone, Copy)]
enum Lie {
    /// A descriptor's entry count differs from its table's.
    Entries,
    /// An output under a number the host did not reserve.
    Number,
    /// One output left out of the reply (its table stays on disk): the
    /// descriptors and sizes agree, but entries are missing.
    HiddenTable,
    /// A result whose payload does not decode.
    Garbage,
}

/// Rewrites a worker's result frame as `lie` says.
fn tamper(mut f: Frame, lie: Lie) -> Frame {
    if let Lie::Garbage = lie {
        f.payload = vec![0x5a; 40];
        return f;
    }
    let mut r = Reply::decode(&f.payload).expect("the worker's reply decodes");
    match (lie, r.descs.is_empty()) {
        // A sub-task whose entries were all dropped has no output to lie
        // about: it claims one more dropped entry instead.
        (_, true) => r.dropped += 1,
        (Lie::Entries, false) => r.descs[0].entries += 1,
        (Lie::Number, false) => r.descs[0].id += 1_000_000,
        (Lie::HiddenTable, false) => {
            let d = r.descs.pop().expect("an output");
            r.bytes_written -= d.size;
        }
        (Lie::Garbage, false) => unreachable!("handled above"),
    }
    f.payload = r.encode();
    f
}

/// Serves `listen` by passing each frame to the worker at `upstream` and
/// rewriting every result as `lie` says; counts the results rewritten.
fn start_liar(listen: &Path, upstream: &str, lie: Lie) -> Arc<AtomicU64> {
    let lies = Arc::new(AtomicU64::new(0));
    let l = UnixListener::bind(listen).expect("bind");
    let upstream = upstream.strip_prefix("unix:").expect("unix").to_string();
    let counted = lies.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            let (upstream, lies) = (upstream.clone(), counted.clone());
            std::thread::spawn(move || {
                let Ok(mut up) = UnixStream::connect(&upstream) else {
                    return;
                };
                while let Ok(f) = Frame::read_from(&mut conn) {
                    if up.write_all(&f.encode()).is_err() {
                        return;
                    }
                    let Ok(mut answer) = Frame::read_from(&mut up) else {
                        return;
                    };
                    if f.op == Op::Compact && answer.op == Op::Result {
                        answer = tamper(answer, lie);
                        lies.fetch_add(1, Ordering::Relaxed);
                    }
                    if conn.write_all(&answer.encode()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    lies
}

#[test]
fn a_worker_that_lies_about_its_tables_is_caught_before_they_are_installed() {
    for lie in [Lie::Entries, Lie::Number, Lie::HiddenTable, Lie::Garbage] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let honest = start_worker(tmp.path(), WorkerConfig::default());
        let listen = tmp.path().join("liar.sock");
        let lies = start_liar(&listen, &honest, lie);
        let addr = format!("unix:{}", listen.display());
        let dir = tmp.path().join("db");
        let (s, told) = run_failing(
            &dir,
            options(&addr, 20_000),
            &format!("{lie:?}"),
            &lies,
            Some(&honest),
        );
        assert!(told > 0, "{lie:?}: the worker was asked and lied");
        assert_eq!(
            s.compaction_offload_fallbacks, told,
            "{lie:?}: every lie sent the sub-task back to the host: {s}"
        );
    }
}
