//! Starting threads: every thread the engine starts outside tests starts
//! here, named, at the priority and with the yield gate of its kind.
//!
//! - [`spawn`]: a thread at the caller's priority (a KVell worker, a
//!   compaction worker's connection, a memtable's index builder).
//! - [`spawn_background`]: a thread `nice` below the caller whose yield
//!   points ([`crate::sched::yield_point`]) offer its core while `gate` is true
//!   (flushes and compactions, the chunk filler, the purge, the WAL's page
//!   filler).
//! - [`spawn_scoped`]: a thread of a scope (a compaction's sub-tasks and
//!   pipeline stages) that inherits the calling thread's gate and, on
//!   Linux, its nice value.
//!
//! A thread that cannot start is an `io::Error` for the caller to handle
//! (run the work itself, or fail the open): none of these panics.

use super::yielding::{background_gate, enter_background};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::{JoinHandle, Scope, ScopedJoinHandle};

/// Starts a thread named `name` running `f`.
pub(crate) fn spawn<T, F>(name: impl Into<String>, f: F) -> std::io::Result<JoinHandle<T>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    std::thread::Builder::new().name(name.into()).spawn(f)
}

/// Starts a background thread named `name`: `nice` added to its nice
/// value ([`lower_priority`]), and, with a `gate`, its yield points offer
/// its core while the gate is true.
pub(crate) fn spawn_background<T, F>(
    name: impl Into<String>,
    nice: i32,
    gate: Option<Arc<AtomicBool>>,
    f: F,
) -> std::io::Result<JoinHandle<T>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    spawn(name, move || {
        lower_priority(nice);
        if let Some(g) = gate {
            enter_background(g);
        }
        f()
    })
}

/// Starts a thread of the scope `s` running `f`, with the calling thread's
/// yield gate (if it has one); its nice value is inherited on Linux.
pub(crate) fn spawn_scoped<'scope, 'env, T, F>(
    s: &'scope Scope<'scope, 'env>,
    f: F,
) -> std::io::Result<ScopedJoinHandle<'scope, T>>
where
    T: Send + 'scope,
    F: FnOnce() -> T + Send + 'scope,
{
    let gate = background_gate();
    std::thread::Builder::new().spawn_scoped(s, move || {
        if let Some(g) = gate {
            enter_background(g);
        }
        f()
    })
}

/// Runs `f` with a scope for [`spawn_scoped`]: every thread started in it
/// is joined before this returns.
pub(crate) fn scope<'env, T, F>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    std::thread::scope(f)
}

/// Adds `nice` to this thread's nice value (`Options::background_nice`;
/// the WAL's page filler).
/// On Linux a thread's nice value is its own, and threads it starts
/// (executors' workers) inherit it. A failure leaves the priority as it
/// was: it is a hint, not a guarantee.
pub(crate) fn lower_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    if nice > 0 {
        // SAFETY: `gettid` has no preconditions. `getpriority` and
        // `setpriority` with `PRIO_PROCESS` and this thread's id read and
        // change only this thread's nice value; errno is cleared first
        // because -1 is also a valid nice value.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            *libc::__errno_location() = 0;
            let now = libc::getpriority(libc::PRIO_PROCESS, tid);
            if now == -1 && *libc::__errno_location() != 0 {
                return;
            }
            libc::setpriority(libc::PRIO_PROCESS, tid, (now + nice).min(19));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// A scoped thread carries its starter's gate; a plain thread has none.
    #[test]
    fn scoped_threads_inherit_the_gate_and_plain_ones_do_not() {
        let gate = Arc::new(AtomicBool::new(true));
        let g = gate.clone();
        let seen = spawn_background("strata-test-bg", 0, Some(g), || {
            let outer = background_gate().expect("a gate");
            let inner = scope(|s| {
                spawn_scoped(s, || background_gate().is_some())
                    .expect("scoped")
                    .join()
                    .expect("join")
            });
            let plain = spawn("strata-test-plain", || background_gate().is_none())
                .expect("plain")
                .join()
                .expect("join");
            outer.store(false, Ordering::Relaxed);
            (inner, plain)
        })
        .expect("spawn")
        .join()
        .expect("join");
        assert_eq!(seen, (true, true));
        assert!(!gate.load(Ordering::Relaxed));
    }
}
