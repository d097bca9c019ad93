//! A real failed thread start: `Db::open` on a thread whose pids cgroup
//! lets it start exactly one more thread. The first background thread
//! starts, the second gets `EAGAIN` from the kernel; the open must fail
//! with a typed I/O error *and* release the directory's LOCK (the started
//! thread is stopped and joined, so nothing keeps the database alive), so
//! that a later open in the same process succeeds and finds the data.
//!
//! Before the fix the started thread held the database (and its LOCK)
//! forever, and the second open failed with "locked".
//!
//! Root ignores `RLIMIT_NPROC`, so the limit is a cgroup v1 `pids`
//! controller, which limits a single thread (`tasks` takes a thread id).
//! Where there is none (cgroup v2 only) or it cannot be written (not
//! root), the test says so and returns, unless `STRATA_REQUIRE_TOOLS=1`
//! (set by `.ci/run`): then it fails. `db::tests::failed_thread_start_*`
//! covers the same path everywhere with an injected spawn failure.

mod common;

use std::path::{Path, PathBuf};
use strata::{Db, Options};

const PIDS_ROOT: &str = "/sys/fs/cgroup/pids";

/// This thread's id, from `/proc/thread-self` (a link to `PID/task/TID`).
fn thread_id() -> String {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    link.file_name()
        .expect("a thread id")
        .to_string_lossy()
        .into_owned()
}

/// This thread's pids cgroup (relative to [`PIDS_ROOT`]).
fn own_pids_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/thread-self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "pids")
            .then(|| path.trim_start_matches('/').to_string())
    })
}

/// The calling thread in a fresh pids cgroup allowing `max` tasks; on
/// drop it moves back and the cgroup is removed.
struct ThreadLimit {
    dir: PathBuf,
    home: PathBuf,
    tid: String,
}

impl ThreadLimit {
    fn new(max: usize) -> Result<ThreadLimit, String> {
        let own = own_pids_cgroup().ok_or("no cgroup v1 pids controller for this thread")?;
        let home = Path::new(PIDS_ROOT).join(own);
        let dir = home.join(format!("strata-thread-limit-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let tid = thread_id();
        let limit = ThreadLimit { dir, home, tid };
        std::fs::write(limit.dir.join("pids.max"), max.to_string())
            .map_err(|e| format!("pids.max: {e}"))?;
        std::fs::write(limit.dir.join("tasks"), &limit.tid)
            .map_err(|e| format!("moving thread {} into the cgroup: {e}", limit.tid))?;
        Ok(limit)
    }

    /// Tasks now in the cgroup.
    fn tasks(&self) -> usize {
        std::fs::read_to_string(self.dir.join("tasks"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for ThreadLimit {
    fn drop(&mut self) {
        let _ = std::fs::write(self.home.join("tasks"), &self.tid);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn open_whose_second_thread_cannot_start_fails_and_releases_the_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options::default().background_threads(2);
    {
        let db = Db::open(dir.path(), opts.clone()).expect("open");
        db.put("kept", "yes").expect("put");
        db.close().expect("close");
    }

    let path = dir.path().to_path_buf();
    let o = opts.clone();
    // A thread of its own: the cgroup must hold only it (the test
    // harness's threads stay out), and it leaves the cgroup before exit.
    let outcome = std::thread::spawn(move || {
        // This thread plus one: the first background thread starts, the
        // second does not.
        let limit = ThreadLimit::new(2)?;
        assert_eq!(limit.tasks(), 1, "only this thread is limited");
        let opened = Db::open(&path, o);
        // Every thread the failed open started was joined.
        let left = limit.tasks();
        drop(limit);
        Ok::<_, String>((opened.map(drop), left))
    })
    .join()
    .expect("the limited thread panicked");

    let (opened, left) = match outcome {
        Ok(x) => x,
        Err(why) => {
            common::missing_tool(&format!("a writable cgroup v1 pids controller ({why})"));
            return;
        }
    };
    let err = opened.expect_err("open succeeded although a background thread could not start");
    assert_eq!(
        err.io_kind(),
        Some(std::io::ErrorKind::WouldBlock),
        "the kernel's EAGAIN from the thread start, typed: {err}"
    );
    let db = Db::open(dir.path(), opts).expect("a later open: the LOCK was released");
    assert_eq!(left, 1, "the started background thread was joined");
    assert_eq!(db.get("kept").expect("get").as_deref(), Some(&b"yes"[..]));
    db.put("after", "1").expect("writes work");
    db.close().expect("close");
}
