//! The compaction worker: a process that serves sub-tasks of plans sent
//! by hosts over a Unix socket or TCP, on the tables of a directory both
//! can read.

use super::super::job::Job;
use super::super::{run_bounded, Decision, Env, Mode};
use super::wire::{encode_metrics, Frame, Op, Origin, Reply, Request, RULES};
use super::wire::{METRIC_BYTES_WRITTEN, METRIC_CPU_MICROS, METRIC_FAILURES, METRIC_SUBTASKS};
use crate::error::{Error, Result};
use crate::io::{FileSystem, PosixFs};
use crate::options::Options;
use crate::table::BlockCache;
use crate::version::{FileDesc, FileMeta, TableCache};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The large-value size the worker's decision uses: the paper's device
/// setting (16 KB), lower than the host's because the device's CPU gains
/// less from pipelining.
pub const DEVICE_LARGE_VALUE: u64 = 16 * 1024;

/// Figures a worker keeps.
#[derive(Default)]
struct WorkerStats {
    subtasks: AtomicU64,
    cpu_micros: AtomicU64,
    bytes_written: AtomicU64,
    failures: AtomicU64,
    /// Connections being served.
    connections: AtomicU64,
}

/// Runs one request in this (worker) process.
fn serve_request(req: Request, cfg: &WorkerConfig) -> Result<Reply> {
    if req.rules != RULES {
        return Err(Error::NotSupported(format!(
            "this worker compacts by {RULES:?}, the host by {:?}",
            req.rules
        )));
    }
    if !cfg.allow.is_empty() && !cfg.allow.iter().any(|a| req.dir.starts_with(a)) {
        return Err(Error::InvalidArgument(format!(
            "directory {} is not under an --allow directory",
            req.dir.display()
        )));
    }
    let fs: Arc<dyn FileSystem> = cfg.fs.0.clone();
    let opts = Options::default().fs(fs.clone());
    let cache = Arc::new(TableCache::new(
        &req.dir,
        &opts,
        Arc::new(BlockCache::new(8 << 20)),
    ));
    let metas = |descs: &[FileDesc]| -> Vec<Arc<FileMeta>> {
        descs
            .iter()
            .map(|d| Arc::new(FileMeta::new(d.clone(), cache.clone())))
            .collect()
    };
    let (inputs, next) = (metas(&req.inputs), metas(&req.next));
    if !req.plan.rows.is_empty() {
        return Err(Error::InvalidArgument(
            "a compaction worker does not read level-0 rows".into(),
        ));
    }
    let job = Job {
        plan: &req.plan,
        inputs,
        next,
        rows: Vec::new(),
        deeper: req.deeper,
        grandparents: req.grandparents,
        // Not sent the range tombstones: a worker keeps the versions they
        // hide, and a later compaction on the host drops them.
        cover: crate::rangedel::Cover::none(),
    };
    let env = Env {
        dir: &req.dir,
        fs: &fs,
        table_opts: req.table_opts,
        collect_keys: false,
        // A worker process has no flushes to give way to.
        give_way: &|| {},
        stale: None,
        // Not sent the operator (a user's operator is code): a worker
        // keeps operands as they are, and a later compaction on the host
        // folds them.
        rules: &crate::runs::rules::Rules::default(),
    };
    let mode = match req.mode {
        0 => Mode::Linear,
        1 => Mode::Pipelined,
        _ => Mode::Decide(Decision::new(
            0.0,
            0.0,
            1.0,
            req.threshold,
            DEVICE_LARGE_VALUE,
        )),
    };
    let piece = run_bounded(&job, &env, req.subtask, &mode, true)?;
    Ok(Reply {
        rules: RULES.to_string(),
        descs: piece.descs,
        bytes_written: piece.bytes_written,
        dropped: piece.dropped,
        busy_micros: piece.busy.map(|d| d.as_micros() as u64),
        cpu_micros: piece.cpu.as_micros() as u64,
        pipelined: piece.pipelined,
    })
}

fn answer(stats: &WorkerStats, cfg: &WorkerConfig, f: Frame) -> Frame {
    let reply = |op: Op, payload: Vec<u8>| Frame {
        op,
        origin: Origin::Device,
        flags: 0,
        request_id: f.request_id,
        payload,
    };
    match f.op {
        Op::Compact => match Request::decode(&f.payload).and_then(|r| serve_request(r, cfg)) {
            Ok(r) => {
                stats.subtasks.fetch_add(1, Ordering::Relaxed);
                stats.cpu_micros.fetch_add(r.cpu_micros, Ordering::Relaxed);
                stats
                    .bytes_written
                    .fetch_add(r.bytes_written, Ordering::Relaxed);
                reply(Op::Result, r.encode())
            }
            Err(e) => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                reply(Op::Error, e.to_string().into_bytes())
            }
        },
        Op::MetricsRequest => {
            let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
            reply(
                Op::Metrics,
                encode_metrics(&[
                    (METRIC_SUBTASKS, g(&stats.subtasks)),
                    (METRIC_CPU_MICROS, g(&stats.cpu_micros)),
                    (METRIC_BYTES_WRITTEN, g(&stats.bytes_written)),
                    (METRIC_FAILURES, g(&stats.failures)),
                ]),
            )
        }
        _ => reply(Op::Error, b"unexpected op".to_vec()),
    }
}

/// How a worker runs.
#[derive(Debug, Clone, Default)]
pub struct WorkerConfig {
    /// Wait this long between finishing a sub-task and answering (tests
    /// use it to kill a worker whose outputs are on disk but unreported).
    pub reply_delay: Duration,
    /// Run only on these CPUs (sched_setaffinity), to mimic a weaker
    /// device; empty: anywhere.
    pub cpus: Vec<usize>,
    /// Serve only requests for table directories under one of these
    /// (absolute paths); empty: any directory this user may write.
    pub allow: Vec<PathBuf>,
    /// The file system the worker reads input tables from and writes its
    /// outputs to: the operating system's by default; a worker serving a
    /// host that keeps its files elsewhere (a test's `MemFs`) is given the
    /// host's.
    pub fs: WorkerFs,
}

/// The file system of a [`WorkerConfig`].
#[derive(Clone, Debug)]
pub struct WorkerFs(pub Arc<dyn FileSystem>);

impl Default for WorkerFs {
    fn default() -> Self {
        WorkerFs(Arc::new(PosixFs))
    }
}

/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 64;
/// A connection idle this long is closed.
const IDLE: Duration = Duration::from_secs(600);

/// Serves one connection: frames until the peer closes it or sends garbage.
fn serve_connection<S: Read + Write>(stats: &WorkerStats, cfg: &WorkerConfig, mut s: S) {
    while let Ok(f) = Frame::read_from(&mut s) {
        let a = answer(stats, cfg, f);
        if a.op == Op::Result {
            std::thread::sleep(cfg.reply_delay);
        }
        if s.write_all(&a.encode()).is_err() {
            return;
        }
    }
}

/// Restricts this process to `cpus`.
fn pin(cpus: &[usize]) -> Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus {
        if *c >= libc::CPU_SETSIZE as usize {
            return Err(Error::InvalidArgument(format!("no CPU {c}")));
        }
        // SAFETY: `c` is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(*c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is
    // the calling thread (threads spawned later inherit the mask).
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(Error::io(
            "sched_setaffinity",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Serves `conn` on its own thread, unless [`MAX_CONNECTIONS`] are served.
fn spawn_connection<S: Read + Write + Send + 'static>(
    stats: &Arc<WorkerStats>,
    cfg: &WorkerConfig,
    conn: S,
) {
    if stats.connections.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS as u64 {
        stats.connections.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let (stats2, cfg) = (stats.clone(), cfg.clone());
    let spawned = crate::sched::spawn("strata-worker-conn", move || {
        serve_connection(&stats2, &cfg, conn);
        stats2.connections.fetch_sub(1, Ordering::AcqRel);
    });
    if spawned.is_err() {
        // No thread for it: the connection is closed unserved, as past
        // `MAX_CONNECTIONS`.
        stats.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs a compaction worker on `addr` (`unix:PATH` or `HOST:PORT`) until
/// the process ends: one thread per connection. `ready` is called once
/// the socket listens.
pub fn serve(addr: &str, cfg: &WorkerConfig, ready: impl FnOnce()) -> Result<()> {
    pin(&cfg.cpus)?;
    let stats = Arc::new(WorkerStats::default());
    let io = |e| Error::io("compaction worker", e);
    match addr.strip_prefix("unix:") {
        Some(path) => {
            // A stale socket of an earlier worker goes; anything else stays.
            if std::fs::symlink_metadata(path)
                .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
            {
                let _ = std::fs::remove_file(path);
            }
            let l = std::os::unix::net::UnixListener::bind(path).map_err(io)?;
            ready();
            for conn in l.incoming() {
                let Ok(conn) = conn else { continue };
                if conn.set_read_timeout(Some(IDLE)).is_ok() {
                    spawn_connection(&stats, cfg, conn);
                }
            }
        }
        None => {
            // A request names a directory to write tables into: only this
            // machine may send one.
            let loopback = std::net::ToSocketAddrs::to_socket_addrs(addr)
                .map_err(io)?
                .all(|a| a.ip().is_loopback());
            if !loopback {
                return Err(Error::InvalidArgument(format!(
                    "compaction worker: {addr} is not a loopback address (use unix:PATH or 127.0.0.1:PORT)"
                )));
            }
            let l = std::net::TcpListener::bind(addr).map_err(io)?;
            ready();
            for conn in l.incoming() {
                let Ok(conn) = conn else { continue };
                let _ = conn.set_nodelay(true);
                if conn.set_read_timeout(Some(IDLE)).is_ok() {
                    spawn_connection(&stats, cfg, conn);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::Plan;
    use crate::table::TableOptions;

    /// A request for the whole of a small merge plan, naming `rules`.
    fn request(rules: &str) -> Request {
        use crate::compaction::{Assignment, PlanKind, Trigger};
        let desc = |id: u64| FileDesc {
            id,
            size: 4096,
            smallest: b"a\x01\0\0\0\0\0\0\0".to_vec(),
            largest: b"z\x01\0\0\0\0\0\0\0".to_vec(),
            entries: 10,
            deletions: 0,
            max_seq: 9,
            min_seq: 0,
            swept_seq: 0,
        };
        Request {
            rules: rules.to_string(),
            dir: "/nonexistent/strata-db".into(),
            table_opts: TableOptions::default(),
            plan: Plan {
                kind: PlanKind::Merge,
                level: 0,
                output_level: 1,
                inputs: vec![4],
                next_inputs: vec![],
                target_file_size: 1 << 20,
                bottommost: true,
                compact_pointer: Vec::new(),
                trigger: Trigger::Size,
                rows: Vec::new(),
                assigned: Assignment {
                    snapshots: vec![],
                    splits: vec![],
                    first_file_number: 30,
                    file_numbers: 4,
                },
            },
            subtask: 0,
            inputs: vec![desc(4)],
            next: vec![],
            deeper: vec![],
            grandparents: vec![],
            mode: 0,
            threshold: 0.7,
        }
    }

    #[test]
    fn a_worker_refuses_a_host_that_compacts_by_other_rules() {
        // Before the rules were named, a worker of another build compacted
        // whatever it was sent, by its own rules.
        let stats = WorkerStats::default();
        let cfg = WorkerConfig::default();
        let frame = |req: &Request| Frame {
            op: Op::Compact,
            origin: Origin::Host,
            flags: 0,
            request_id: 3,
            payload: req.encode(),
        };
        let other = request("strata 0.0.1, compaction rules 0");
        assert_eq!(Request::decode(&other.encode()).ok(), Some(other.clone()));
        let a = answer(&stats, &cfg, frame(&other));
        assert_eq!(a.op, Op::Error);
        let msg = String::from_utf8_lossy(&a.payload).to_string();
        assert!(msg.contains("compaction rules 0"), "{msg}");
        // The same request by this build's rules gets past that check (and
        // fails on the missing directory instead).
        let a = answer(&stats, &cfg, frame(&request(RULES)));
        let msg = String::from_utf8_lossy(&a.payload).to_string();
        assert!(!msg.contains("compacts by"), "{msg}");
        assert_eq!(stats.failures.load(Ordering::Relaxed), 2);
    }
}
