//! Closing released tables and removing obsolete files, on a thread of the
//! table cache's own (`strata-purge`), not on the thread that let the last
//! reference go (often a reader dropping an old super-version; see the
//! table cache's module doc). The thread starts with the first release;
//! without it (it could not start) releases run on the caller's thread.
//! Dropping the purger waits for the releases queued before.

use crate::io::FileSystem;
use crate::table::Table;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A released table to close, and its file to remove if obsolete.
pub(super) type Purge = (Option<Arc<Table>>, Option<PathBuf>);

/// Work for the purge thread: a release, or a caller waiting until the
/// releases before it are done.
enum PurgeJob {
    Release(Purge),
    Barrier(Sender<()>),
}

/// The purge thread, once started.
struct Running {
    jobs: Sender<PurgeJob>,
    thread: JoinHandle<()>,
}

/// Runs releases in order, on its thread.
pub(super) struct Purger {
    fs: Arc<dyn FileSystem>,
    /// Whether a removed table's file may be shrunk first
    /// (`remove_unused_file`).
    shrink: bool,
    running: Mutex<Option<Running>>,
}

impl Purger {
    pub(super) fn new(fs: Arc<dyn FileSystem>, shrink: bool) -> Self {
        Purger {
            fs,
            shrink,
            running: Mutex::new(None),
        }
    }

    /// Queues `job`: the table is closed (if this was its last reference)
    /// and the file removed, in the order of the calls.
    pub(super) fn release(&self, job: Purge) {
        let mut running = self.running.lock();
        if running.is_none() {
            let (jobs, rx) = channel();
            let fs = Arc::clone(&self.fs);
            let shrink = self.shrink;
            // Its removals offer the core between pieces
            // (`sched::yield_point`), whatever the database's state:
            // nothing waits for them.
            let gate = Some(Arc::new(AtomicBool::new(true)));
            let spawned = crate::sched::spawn_background("strata-purge", 0, gate, move || {
                rx.into_iter().for_each(|job| run(fs.as_ref(), job, shrink))
            });
            if let Ok(thread) = spawned {
                *running = Some(Running { jobs, thread });
            }
        }
        // Without the thread (it could not start), here and now.
        let job = PurgeJob::Release(job);
        let job = match running.as_ref() {
            Some(p) => match p.jobs.send(job) {
                Ok(()) => return,
                Err(unsent) => unsent.0,
            },
            None => job,
        };
        drop(running);
        run(self.fs.as_ref(), job, self.shrink);
    }

    /// Returns once every release queued before the call is done.
    pub(super) fn wait(&self) {
        let (tx, rx) = channel();
        let sent = match self.running.lock().as_ref() {
            Some(p) => p.jobs.send(PurgeJob::Barrier(tx)).is_ok(),
            None => false,
        };
        if sent {
            let _ = rx.recv();
        }
    }
}

impl Drop for Purger {
    fn drop(&mut self) {
        // Closing the database: the releases queued so far are done
        // before it returns (its files are gone, its maps unmapped).
        if let Some(Running { jobs, thread }) = self.running.get_mut().take() {
            drop(jobs);
            let _ = thread.join();
        }
    }
}

fn run(fs: &dyn FileSystem, job: PurgeJob, shrink: bool) {
    match job {
        PurgeJob::Release((table, path)) => {
            // Unmapped first (if this was the last reference), then
            // removed; a failed removal leaves an orphan that the next
            // open removes.
            // The last reference, its map held by nothing else: unmapped
            // here, so the file may be shrunk before it goes
            // (`remove_unused_file`). Otherwise something may still read
            // the map and the file is only unlinked. A path without a
            // table (closed earlier by the cache) is only unlinked too: the
            // cache cannot tell who else opened it.
            let unused = table
                .is_some_and(|t| shrink && Arc::into_inner(t).is_some_and(|t| !t.map_shared()));
            if let Some(path) = path {
                let _ = if unused {
                    fs.remove_unused_file(&path)
                } else {
                    fs.remove_file(&path)
                };
            }
        }
        PurgeJob::Barrier(done) => {
            let _ = done.send(());
        }
    }
}
