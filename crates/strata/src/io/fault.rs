//! A [`FileSystem`] wrapper that injects I/O errors.
//!
//! [`FaultFs`] forwards every call to an inner file system, counting calls by
//! [`Op`] kind, and fails the calls that a [`Rule`] selects with `EIO` or
//! `ENOSPC` (the inner call is then not made: nothing is written, synced,
//! renamed...). Rules pick the Nth call of a kind, every call from the Nth
//! on (a full disk), or calls at random with a seeded probability; a rule may
//! be limited to paths containing a substring (`".table"`, `"MANIFEST"`).
//! The [`FaultHandle`] (an `Arc`, shared with the file system and every file
//! it opened) switches injection off and on at run time — "space is back".

use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The kinds of operation that can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum Op {
    /// `FileSystem::create`.
    Create,
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::flush`.
    Flush,
    /// `WritableFile::sync`.
    Sync,
    /// `open_random` and `open_sequential`.
    Open,
    /// `read_exact_at` and sequential `read`.
    Read,
    /// `rename`.
    Rename,
    /// `remove_file`.
    Remove,
    /// `sync_dir`.
    SyncDir,
    /// `list_dir`.
    List,
}

impl Op {
    /// Every kind, in declaration order.
    pub const ALL: [Op; 10] = [
        Op::Create,
        Op::Append,
        Op::Flush,
        Op::Sync,
        Op::Open,
        Op::Read,
        Op::Rename,
        Op::Remove,
        Op::SyncDir,
        Op::List,
    ];

    /// Kinds that change the file system (write path).
    pub const WRITES: [Op; 6] = [
        Op::Create,
        Op::Append,
        Op::Flush,
        Op::Sync,
        Op::Rename,
        Op::SyncDir,
    ];
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultError {
    /// `EIO`: the device failed.
    Eio,
    /// `ENOSPC`: no space left on the device.
    NoSpace,
    /// The call panics (a user's file system with a bug): the engine must
    /// turn it into an error, not a hang.
    Panic,
}

impl FaultError {
    fn to_io(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(match self {
            FaultError::Eio | FaultError::Panic => libc::EIO,
            FaultError::NoSpace => libc::ENOSPC,
        })
    }
}

/// Which calls of a kind a rule fails. Call numbers are 1-based and count
/// every call of the kind since the file system was made (see
/// [`FaultHandle::calls`]), including calls the path filter skips.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// Exactly the Nth call.
    At(u64),
    /// The Nth call and every later one.
    From(u64),
    /// The first call from the Nth on that the rule's path filter lets
    /// through, once.
    Once(u64),
    /// The Nth call that the rule's path filter lets through (counted by
    /// the rule from when it was added), once.
    Matching(u64),
    /// Each call with this probability (seeded by the handle).
    Random(f64),
}

/// One fault rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub op: Op,
    pub trigger: Trigger,
    pub error: FaultError,
    /// Only paths containing this substring (all paths when `None`).
    pub path_contains: Option<String>,
    /// A `Once` rule that has fired.
    fired: bool,
    /// Calls the path filter let through (for `Matching`).
    matched: u64,
}

impl Rule {
    /// A rule for `op` with `trigger`, failing with `error`, on all paths.
    pub fn new(op: Op, trigger: Trigger, error: FaultError) -> Self {
        Rule {
            op,
            trigger,
            error,
            path_contains: None,
            fired: false,
            matched: 0,
        }
    }

    /// Limits the rule to paths containing `s`.
    #[must_use]
    pub fn on_paths(mut self, s: &str) -> Self {
        self.path_contains = Some(s.to_string());
        self
    }
}

/// Controls a [`FaultFs`]: its rules, counters and on/off switch.
#[derive(Debug)]
pub struct FaultHandle {
    enabled: AtomicBool,
    calls: [AtomicU64; Op::ALL.len()],
    injected: AtomicU64,
    rules: Mutex<Vec<Rule>>,
    rng: Mutex<u64>,
}

impl FaultHandle {
    fn new(seed: u64) -> Self {
        FaultHandle {
            enabled: AtomicBool::new(true),
            calls: Default::default(),
            injected: AtomicU64::new(0),
            rules: Mutex::new(Vec::new()),
            rng: Mutex::new(seed),
        }
    }

    /// Adds a rule.
    pub fn add(&self, rule: Rule) {
        self.rules.lock().push(rule);
    }

    /// Fails exactly the Nth call of `op` (counted from now).
    pub fn fail_nth(&self, op: Op, n: u64, error: FaultError) {
        self.add(Rule::new(op, Trigger::At(self.calls(op) + n), error));
    }

    /// Fails every call of `op` from the Nth (counted from now) on.
    pub fn fail_from(&self, op: Op, n: u64, error: FaultError) {
        self.add(Rule::new(op, Trigger::From(self.calls(op) + n), error));
    }

    /// Fails calls of `op` at random with probability `p`.
    pub fn fail_randomly(&self, op: Op, p: f64, error: FaultError) {
        self.add(Rule::new(op, Trigger::Random(p), error));
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.rules.lock().clear();
    }

    /// Turns injection on or off (rules are kept; calls are still counted).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Release);
    }

    /// True while injection is on.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Calls of `op` so far.
    pub fn calls(&self, op: Op) -> u64 {
        self.calls
            .get(op as usize)
            .map_or(0, |c| c.load(Ordering::Acquire))
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Acquire)
    }

    /// Counts a call and decides whether it fails.
    fn check(&self, op: Op, path: &Path) -> Result<()> {
        let n = self
            .calls
            .get(op as usize)
            .map_or(0, |c| c.fetch_add(1, Ordering::AcqRel) + 1);
        if !self.enabled() {
            return Ok(());
        }
        let mut rules = self.rules.lock();
        for r in rules.iter_mut() {
            if r.op != op {
                continue;
            }
            if let Some(s) = &r.path_contains {
                if !path.to_string_lossy().contains(s.as_str()) {
                    continue;
                }
            }
            let hit = match r.trigger {
                Trigger::At(at) => n == at,
                Trigger::From(at) => n >= at,
                Trigger::Once(at) => n >= at && !std::mem::replace(&mut r.fired, true),
                Trigger::Matching(k) => {
                    r.matched += 1;
                    r.matched == k
                }
                Trigger::Random(p) => {
                    let x = super::mem::splitmix(&mut self.rng.lock());
                    (x >> 11) as f64 / (1u64 << 53) as f64 <= p
                }
            };
            if hit {
                self.injected.fetch_add(1, Ordering::AcqRel);
                if r.error == FaultError::Panic {
                    let what = format!("injected panic: {op:?} of {}", path.display());
                    drop(rules);
                    panic!("{what}");
                }
                return Err(Error::io(path, r.error.to_io()));
            }
        }
        Ok(())
    }
}

/// The fault-injecting file system.
#[derive(Debug, Clone)]
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    handle: Arc<FaultHandle>,
}

impl FaultFs {
    /// Wraps `inner`; `seed` drives `Trigger::Random`.
    pub fn new(inner: Arc<dyn FileSystem>, seed: u64) -> Self {
        FaultFs {
            inner,
            handle: Arc::new(FaultHandle::new(seed)),
        }
    }

    /// The control handle.
    pub fn handle(&self) -> Arc<FaultHandle> {
        self.handle.clone()
    }

    /// A file `create` made on the inner file system, after the `Create`
    /// rule for `path`, wrapped so its appends, flushes and syncs can fail.
    fn wrap_created(
        &self,
        path: &Path,
        create: impl FnOnce(&dyn FileSystem) -> Result<Box<dyn WritableFile>>,
    ) -> Result<Box<dyn WritableFile>> {
        self.handle.check(Op::Create, path)?;
        Ok(Box::new(FaultWritable {
            inner: create(self.inner.as_ref())?,
            path: path.to_path_buf(),
            handle: self.handle.clone(),
        }))
    }
}

struct FaultWritable {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    handle: Arc<FaultHandle>,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.handle.check(Op::Append, &self.path)?;
        self.inner.append(data)
    }

    fn flush(&mut self) -> Result<()> {
        self.handle.check(Op::Flush, &self.path)?;
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.handle.check(Op::Sync, &self.path)?;
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn preallocate(&mut self, upto: u64) -> Result<()> {
        self.inner.preallocate(upto)
    }

    fn reserve(&mut self, upto: u64) -> Result<()> {
        self.inner.reserve(upto)
    }
}

#[derive(Debug)]
struct FaultRandom {
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    handle: Arc<FaultHandle>,
}

impl RandomAccessFile for FaultRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.handle.check(Op::Read, &self.path)?;
        self.inner.read_exact_at(offset, buf)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

struct FaultSequential {
    inner: Box<dyn SequentialFile>,
    path: PathBuf,
    handle: Arc<FaultHandle>,
}

impl SequentialFile for FaultSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        self.handle.check(Op::Read, &self.path)?;
        self.inner.read(buf)
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.create_dir_all(path)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.wrap_created(path, |fs| fs.create(path))
    }

    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.wrap_created(path, |fs| fs.create_log(path))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.handle.check(Op::Open, path)?;
        Ok(Arc::new(FaultRandom {
            inner: self.inner.open_random(path)?,
            path: path.to_path_buf(),
            handle: self.handle.clone(),
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        self.handle.check(Op::Open, path)?;
        Ok(Box::new(FaultSequential {
            inner: self.inner.open_sequential(path)?,
            path: path.to_path_buf(),
            handle: self.handle.clone(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.handle.check(Op::Rename, to)?;
        self.inner.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.handle.check(Op::Remove, path)?;
        self.inner.remove_file(path)
    }

    fn remove_unused_file(&self, path: &Path) -> Result<()> {
        self.handle.check(Op::Remove, path)?;
        self.inner.remove_unused_file(path)
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        self.handle.check(Op::List, path)?;
        self.inner.list_dir(path)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        self.handle.check(Op::SyncDir, path)?;
        self.inner.sync_dir(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemFs;

    #[test]
    fn nth_from_and_switch() {
        let mem = MemFs::new();
        mem.create_dir_all(Path::new("/d")).unwrap();
        let fs = FaultFs::new(Arc::new(mem), 1);
        let h = fs.handle();
        h.fail_nth(Op::Append, 2, FaultError::Eio);
        let mut f = fs.create(Path::new("/d/a")).unwrap();
        f.append(b"1").unwrap();
        let e = f.append(b"2").unwrap_err();
        assert!(matches!(&e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::EIO)));
        f.append(b"3").unwrap();
        h.fail_from(Op::Sync, 1, FaultError::NoSpace);
        let e = f.sync().unwrap_err();
        assert_eq!(e.io_kind(), Some(std::io::ErrorKind::StorageFull));
        assert!(f.sync().is_err());
        h.set_enabled(false);
        f.sync().unwrap();
        assert_eq!(h.calls(Op::Append), 3);
        assert_eq!(h.calls(Op::Sync), 3);
        assert_eq!(h.injected(), 3);
    }
}
