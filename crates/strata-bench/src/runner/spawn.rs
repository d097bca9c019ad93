//! One child process per run: started, watched (progress, time limit),
//! its result line read, and its leftovers removed.

use super::ChildCommand;
use crate::child::{RunResult, RunSpec, PROGRESS_PREFIX, RESULT_PREFIX};
use crate::BenchError;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{BufRead, BufReader, IsTerminal};
use std::process::{Command, Stdio};

/// A file name for `s`: its first 40 characters made safe, and a hash of
/// the whole, so that two long names that share a beginning stay apart.
pub(super) fn sanitize(s: &str) -> String {
    let head: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect();
    if head.len() == s.len() && head == s {
        return head;
    }
    // Names live for one bench run (OUT/data is wiped at its start): the
    // standard hasher, fixed within a build, is enough.
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    s.hash(&mut h);
    format!("{head}-{:08x}", h.finish() as u32)
}

pub(super) fn bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(1);
    let style = ProgressStyle::with_template(
        "{prefix} {msg:>14} [{bar:30.cyan/blue}] {pos}/{len} {elapsed}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    pb.set_style(style);
    pb
}

/// The start of the error of a run killed by `Config::time_limit`.
pub const TIME_LIMIT_KILL: &str = "killed by the time limit after";

/// Runs one child and collects its result (an error result if it failed).
pub(super) fn run_child(
    child: &ChildCommand,
    spec: &RunSpec,
    pb: &ProgressBar,
    cap: Option<&crate::limits::MemoryCap>,
    limit: Option<std::time::Duration>,
) -> RunResult {
    let failed = |msg: String| RunResult {
        engine: spec.engine.clone(),
        workload: spec.workload.clone(),
        error: Some(msg),
        ..RunResult::default()
    };
    let json = match serde_json::to_string(spec) {
        Ok(j) => j,
        Err(e) => return failed(e.to_string()),
    };
    let program = &child.program;
    let mut command = Command::new(program);
    if let Some(cap) = cap {
        // The child enters the cgroup itself before anything else: an
        // engine that sizes itself by its cgroup's limit at open (strata's
        // memory budget) must not open before it is in.
        command.env(crate::child::CGROUP_PROCS_ENV, cap.procs());
    }
    let spawned = command
        .args(&child.args)
        .envs(child.env.iter().map(|(k, v)| (k, v)))
        .arg("--spec")
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut proc = match spawned {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot start {}: {e}", program.display())),
    };
    // Into the memory cgroup at once (the child enters it itself too,
    // first thing); a child that cannot be capped does not run uncapped.
    if let Some(cap) = cap {
        if let Err(e) = cap.enter(proc.id()) {
            let _ = proc.kill();
            let _ = proc.wait();
            return failed(format!("memory cap: {e}"));
        }
    }
    // The watchdog kills the child at the limit unless told first that
    // its output ended. It is told before the child is reaped, so the pid
    // it may signal is still this child's (alive or a zombie).
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (done, watchdog) = match limit {
        Some(limit) => {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let pid = proc.id() as libc::pid_t;
            let killed = killed.clone();
            let h = std::thread::spawn(move || {
                if rx.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                    killed.store(true, std::sync::atomic::Ordering::SeqCst);
                    // SAFETY: kill(2) with a pid this process spawned and
                    // has not reaped; no memory is shared with it.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            });
            (Some(tx), Some(h))
        }
        None => (None, None),
    };
    let mut result = None;
    if let Some(out) = proc.stdout.take() {
        let started = std::time::Instant::now();
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix(PROGRESS_PREFIX) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                if let [phase, done, total] = f[..] {
                    let (done, total) =
                        (done.parse().unwrap_or(0u64), total.parse().unwrap_or(0u64));
                    pb.set_length(total.max(1));
                    pb.set_position(done);
                    let secs = started.elapsed().as_secs_f64().max(1e-3);
                    pb.set_message(if phase == "run" {
                        format!("run {:.0}k/s", done as f64 / secs / 1000.0)
                    } else {
                        phase.to_string()
                    });
                }
            } else if let Some(j) = line.strip_prefix(RESULT_PREFIX) {
                result = Some(serde_json::from_str::<RunResult>(j).map_err(|e| e.to_string()));
            }
        }
    }
    if let Some(tx) = done {
        let _ = tx.send(());
    }
    if let Some(h) = watchdog {
        let _ = h.join();
    }
    let status = proc.wait();
    if killed.load(std::sync::atomic::Ordering::SeqCst) && result.is_none() {
        return failed(format!(
            "{TIME_LIMIT_KILL} {:.0} s (load, run, settle and close)",
            limit.map_or(0.0, |l| l.as_secs_f64())
        ));
    }
    match (result, status) {
        (Some(Ok(r)), _) => r,
        (Some(Err(e)), _) => failed(format!("unreadable result: {e}")),
        (None, Ok(s)) => failed(format!("child exited with {s} and no result")),
        (None, Err(e)) => failed(format!("child: {e}")),
    }
}

/// Removes what the child of `spec` leaves behind when it dies (killed by
/// the OOM killer or the time limit, or crashed) before its own cleanup:
/// its directory unless `spec.keep_data`, its tmpfs directories, and an
/// image it was saving and did not finish. Without this a run of 20 GB
/// databases fills the disk with the first dead child.
pub(super) fn remove_leftovers(spec: &RunSpec) {
    if !spec.keep_data && spec.dir.exists() {
        let _ = std::fs::remove_dir_all(&spec.dir);
    }
    crate::child::remove_shm_dirs(&spec.dir);
    if let Some(img) = &spec.save_image {
        if img.exists() && !crate::sys::image_ready(img) {
            let _ = std::fs::remove_dir_all(img);
        }
    }
}

/// Checks and loads the C library behind engine spec `name` (RocksDB or
/// LevelDB, either view); returns the report's line for it, `None` for an
/// engine that loads no library.
pub(super) fn probe_peer(name: &str) -> Result<Option<String>, BenchError> {
    let (base, _) = crate::engine::split_view(name);
    match base {
        #[cfg(feature = "comparators")]
        "rocksdb" => crate::ffi::rocksdb::probe().map(Some),
        #[cfg(feature = "comparators")]
        "leveldb" => crate::ffi::leveldb::probe().map(Some),
        _ => Ok(None),
    }
}
