//! RocksDB and LevelDB through their C APIs (`rocksdb/c.h`, `leveldb/c.h`),
//! with our own declarations of the few calls we use, resolved from
//! libraries loaded at run time ([`dl`]) after a check that they are
//! release builds ([`build_check`]).
//!
//! Both C APIs have the same shape for the calls a benchmark needs (open,
//! put, get, delete, batches, iterators, properties, `*_free`), so one safe
//! wrapper, [`CStore`], drives either through a table of function pointers.
//! Rules kept by every call:
//! - errors come back through a `char** errptr` that the library allocates;
//!   it is turned into a [`FfiError`] and freed with the library's `*_free`;
//! - every buffer the library returns (`get`, `property_value`) is copied and
//!   freed with the library's `*_free`;
//! - pointers into an iterator's key/value are copied before the iterator moves;
//! - nothing panics while a C frame is on the stack (no callbacks are passed).

pub mod build_check;
pub mod dl;
pub mod leveldb;
pub mod rocksdb;

mod api;

pub use api::{
    read_property, Api, Backup, Checkpoint, ErrPtr, FfiError, Handle, PinnedGet, PropertyReader,
};

use std::ffi::{c_char, CString};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use strata::stats::LevelStats;
use strata::types::ValueKind;
use strata::{
    Cursor, KvStore, ScanRange, Semantics, StatsSnapshot, StoreSnapshot, StoreStats, WriteBatch,
    WriteOptions,
};

/// Finishes opening a RocksDB or LevelDB database: turns a set `err` or a
/// NULL `db` into an error (destroying `owned`), or wraps everything in a
/// [`CStore`].
///
/// # Safety
/// `err` as for [`Api::check`]; the handles as for [`CStore::new`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn finish_open(
    api: &'static Api,
    err: *mut c_char,
    db: Handle,
    ro: Handle,
    wo: Handle,
    owned: Vec<Owned>,
    dir: &Path,
    version: String,
    settings: String,
    write_buffer_size: usize,
    s: &crate::settings::EngineSettings,
) -> Result<crate::engine::OpenEngine, crate::BenchError> {
    // SAFETY: guaranteed by the caller.
    let opened = unsafe { api.check(err) }.and_then(|()| {
        if db.is_null() {
            Err(FfiError::Null {
                engine: api.engine,
                call: "open",
            })
        } else {
            Ok(())
        }
    });
    if let Err(e) = opened {
        for o in owned {
            // SAFETY: each object was created by the caller and is destroyed once.
            unsafe { (o.destroy)(o.handle) };
        }
        return Err(e.into());
    }
    let name = format!("{version} ({settings})");
    // SAFETY: guaranteed by the caller; `db` is open and non-null.
    let mut store = unsafe { CStore::new(api, db, ro, wo, owned, dir, name) };
    store.quiet_looks = (api.quiet_looks)(write_buffer_size);
    store.merges = s.counters && api.batch_merge.is_some();
    store.settle_limit = std::time::Duration::from_secs(s.settle_limit_secs);
    Ok(crate::engine::OpenEngine {
        store: Box::new(store),
        version,
        settings,
    })
}

/// Objects that must live as long as the database and be destroyed after it.
pub struct Owned {
    pub handle: Handle,
    pub destroy: unsafe extern "C" fn(Handle),
}

/// An open RocksDB or LevelDB database.
pub struct CStore {
    api: &'static Api,
    db: Handle,
    read_opts: Handle,
    write_opts: Handle,
    /// Destroyed (in order) after the database is closed.
    owned: Vec<Owned>,
    path: PathBuf,
    closed: AtomicBool,
    name: String,
    /// See [`Api::quiet_looks`].
    quiet_looks: u32,
    /// How long `wait_for_compactions` waits before it gives up
    /// (`EngineSettings::settle_limit_secs`).
    settle_limit: std::time::Duration,
    /// Cursors alive (each holds an iterator of `db`).
    cursors: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Opened with a merge operator (RocksDB's `uint64add`, for the
    /// counter workloads).
    merges: bool,
}

/// A [`Cursor`] over a library iterator; counts itself in its store's
/// `cursors` while alive (`iter` is `None` only inside `drop`).
struct CCursor {
    iter: Option<Iter<'static>>,
    open: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    path: PathBuf,
}

impl CCursor {
    /// The live iterator, valid or not.
    fn it(&self) -> Option<&Iter<'static>> {
        self.iter.as_ref()
    }
    fn it_mut(&mut self) -> Option<&mut Iter<'static>> {
        self.iter.as_mut()
    }
}

// SAFETY: RocksDB's and LevelDB's iterators may be used from any one
// thread at a time (not concurrently); a Cursor is used through `&mut`.
unsafe impl Send for CCursor {}

impl Drop for CCursor {
    fn drop(&mut self) {
        // The iterator goes first: only then may the store close.
        drop(self.iter.take());
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Cursor for CCursor {
    fn valid(&self) -> bool {
        self.it().is_some_and(Iter::valid)
    }
    /// Empty unless valid (the libraries' `key` reads freed memory then).
    fn key(&self) -> &[u8] {
        match self.it() {
            Some(it) if it.valid() => it.key(),
            _ => &[],
        }
    }
    fn value(&self) -> &[u8] {
        match self.it() {
            Some(it) if it.valid() => it.value(),
            _ => &[],
        }
    }
    fn status(&self) -> strata::Result<()> {
        match self.it() {
            Some(it) => it.status().map_err(|e| e.into_strata(&self.path)),
            None => Ok(()),
        }
    }
    fn seek_to_first(&mut self) {
        if let Some(it) = self.it_mut() {
            it.first();
        }
    }
    fn seek_to_last(&mut self) {
        if let Some(it) = self.it_mut() {
            it.last();
        }
    }
    fn seek(&mut self, target: &[u8]) {
        if let Some(it) = self.it_mut() {
            it.seek(target);
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        // Neither C API used here has it: the first key at or after the
        // target, stepped back when past it.
        let Some(it) = self.it_mut() else { return };
        it.seek(target);
        if !it.valid() {
            it.last();
        } else if it.key() > target {
            it.prev();
        }
    }
    fn next(&mut self) {
        if let Some(it) = self.it_mut().filter(|it| it.valid()) {
            it.next();
        }
    }
    fn prev(&mut self) {
        if let Some(it) = self.it_mut().filter(|it| it.valid()) {
            it.prev();
        }
    }
}

// SAFETY: RocksDB's and LevelDB's `DB` objects are documented thread-safe
// for concurrent reads and writes; the read/write option objects are only
// read after open. Closing happens in `Drop`, which has exclusive access.
unsafe impl Send for CStore {}
// SAFETY: as above.
unsafe impl Sync for CStore {}

fn ptr(b: &[u8]) -> *const c_char {
    b.as_ptr().cast()
}

/// The `len` bytes at `p` (NULL or 0: empty), borrowed for `'a`.
///
/// # Safety
/// `p` must point to `len` readable bytes when `len > 0`, which stay valid
/// and unchanged for `'a`.
unsafe fn borrowed<'a>(p: *const c_char, len: usize) -> &'a [u8] {
    if p.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
}

/// Copies `len` bytes at `p` (NULL with len 0 is an empty vector).
///
/// # Safety
/// `p` must point to `len` readable bytes when `len > 0`.
pub(crate) unsafe fn copy(p: *const c_char, len: usize) -> Vec<u8> {
    // SAFETY: guaranteed by the caller.
    unsafe { borrowed(p, len) }.to_vec()
}

impl CStore {
    /// Wraps an open database.
    ///
    /// # Safety
    /// `db`, `read_opts` and `write_opts` must be live objects of `api`'s
    /// library; ownership of them and of `owned` passes to the store.
    pub unsafe fn new(
        api: &'static Api,
        db: Handle,
        read_opts: Handle,
        write_opts: Handle,
        owned: Vec<Owned>,
        path: &Path,
        name: String,
    ) -> Self {
        CStore {
            api,
            db,
            read_opts,
            write_opts,
            owned,
            path: path.to_path_buf(),
            closed: AtomicBool::new(false),
            name,
            quiet_looks: 2,
            settle_limit: std::time::Duration::from_secs(crate::settings::SETTLE_LIMIT_SECS),
            cursors: std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            merges: false,
        }
    }

    /// The level shape, read from the library's properties.
    fn lsm_stats(&self) -> StatsSnapshot {
        let mut s = StatsSnapshot::default();
        if self.closed.load(Ordering::Acquire) {
            return s;
        }
        for level in 0..7 {
            let name = self.api.files_at_level.replace("{}", &level.to_string());
            let files = self
                .property(&name)
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            s.levels.push(LevelStats {
                files,
                ..LevelStats::default()
            });
        }
        s
    }

    fn live(&self) -> strata::Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(strata::Error::Closed)
        } else {
            Ok(())
        }
    }

    fn err(&self, e: FfiError) -> strata::Error {
        e.into_strata(&self.path)
    }

    /// A property of the database as text, if the library knows it.
    pub fn property(&self, name: &str) -> Option<String> {
        // SAFETY: db is open (not yet dropped) and of this store's library.
        unsafe { read_property(self.api, self.db, name) }
    }

    fn in_bound(key: &[u8], b: Bound<&[u8]>, upper: bool) -> bool {
        match (b, upper) {
            (Bound::Unbounded, _) => true,
            (Bound::Included(e), true) => key <= e,
            (Bound::Excluded(e), true) => key < e,
            (Bound::Included(s), false) => key >= s,
            (Bound::Excluded(s), false) => key > s,
        }
    }
}

/// An iterator that is destroyed when dropped.
struct Iter<'a> {
    api: &'a Api,
    it: Handle,
}

impl Iter<'_> {
    fn valid(&self) -> bool {
        // SAFETY: `it` is a live iterator of this library.
        unsafe { (self.api.iter_valid)(self.it) != 0 }
    }
    /// The current key, borrowed: the library's bytes stay valid until the
    /// iterator moves, which takes `&mut self`, so the borrow ends first.
    fn key(&self) -> &[u8] {
        let mut len = 0usize;
        // SAFETY: the iterator is valid (checked by callers); the returned
        // pointer stays valid until the iterator moves or is destroyed,
        // both of which need the `&mut` this borrow keeps out.
        unsafe { borrowed((self.api.iter_key)(self.it, &mut len), len) }
    }
    fn value(&self) -> &[u8] {
        let mut len = 0usize;
        // SAFETY: as for `key`.
        unsafe { borrowed((self.api.iter_value)(self.it, &mut len), len) }
    }
    fn seek(&mut self, k: &[u8]) {
        // SAFETY: the key bytes outlive the call; the library copies them.
        unsafe { (self.api.iter_seek)(self.it, ptr(k), k.len()) }
    }
    fn first(&mut self) {
        // SAFETY: live iterator.
        unsafe { (self.api.iter_seek_to_first)(self.it) }
    }
    fn last(&mut self) {
        // SAFETY: live iterator.
        unsafe { (self.api.iter_seek_to_last)(self.it) }
    }
    fn next(&mut self) {
        // SAFETY: live iterator, valid (checked by callers).
        unsafe { (self.api.iter_next)(self.it) }
    }
    fn prev(&mut self) {
        // SAFETY: live iterator, valid (checked by callers).
        unsafe { (self.api.iter_prev)(self.it) }
    }
    fn status(&self) -> Result<(), FfiError> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: live iterator; err receives NULL or a malloc'ed message.
        unsafe {
            (self.api.iter_get_error)(self.it, &mut err);
            self.api.check(err)
        }
    }
}

impl Drop for Iter<'_> {
    fn drop(&mut self) {
        // SAFETY: created by create_iterator, destroyed once, before the db.
        unsafe { (self.api.iter_destroy)(self.it) }
    }
}

impl KvStore for CStore {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn put(&self, key: &[u8], value: &[u8]) -> strata::Result<()> {
        self.live()?;
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: db and write options are live; key/value outlive the call.
        unsafe {
            (self.api.put)(
                self.db,
                self.write_opts,
                ptr(key),
                key.len(),
                ptr(value),
                value.len(),
                &mut err,
            );
            self.api.check(err)
        }
        .map_err(|e| self.err(e))
    }

    fn get(&self, key: &[u8]) -> strata::Result<Option<Vec<u8>>> {
        self.live()?;
        if let Some(pinned) = self.api.pinned_get {
            // SAFETY: db and read options are live objects of this library.
            return unsafe { pinned(self.api, self.db, self.read_opts, key) }
                .map_err(|e| self.err(e));
        }
        let mut err: *mut c_char = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: db and read options are live; key outlives the call.
        let p = unsafe {
            (self.api.get)(
                self.db,
                self.read_opts,
                ptr(key),
                key.len(),
                &mut len,
                &mut err,
            )
        };
        // SAFETY: err is NULL or a message of this library.
        unsafe { self.api.check(err) }.map_err(|e| self.err(e))?;
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: p points to len bytes allocated by the library; copied,
        // then freed exactly once.
        let v = unsafe { copy(p, len) };
        // SAFETY: as above.
        unsafe { (self.api.free)(p.cast()) };
        Ok(Some(v))
    }

    fn delete(&self, key: &[u8]) -> strata::Result<()> {
        self.live()?;
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: db and write options are live; key outlives the call.
        unsafe {
            (self.api.delete)(self.db, self.write_opts, ptr(key), key.len(), &mut err);
            self.api.check(err)
        }
        .map_err(|e| self.err(e))
    }

    /// One merge (`rocksdb_merge`); `NotSupported` without a merge
    /// operator (LevelDB, or a run that does not count).
    fn merge(&self, key: &[u8], operand: &[u8]) -> strata::Result<()> {
        self.live()?;
        let Some(merge) = self.api.merge.filter(|_| self.merges) else {
            return Err(strata::Error::NotSupported(format!(
                "{} has no merge operator here",
                self.api.engine
            )));
        };
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: db and write options are live; key/operand outlive the call.
        unsafe {
            merge(
                self.db,
                self.write_opts,
                ptr(key),
                key.len(),
                ptr(operand),
                operand.len(),
                &mut err,
            );
            self.api.check(err)
        }
        .map_err(|e| self.err(e))
    }

    /// One range deletion, as a batch of one (RocksDB's `DeleteRange`
    /// through its C API's batch call); `NotSupported` on LevelDB.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> strata::Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(start, end);
        self.write(b, &WriteOptions::default())
    }

    fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> strata::Result<()> {
        self.live()?;
        if opts.sync {
            return Err(strata::Error::NotSupported(
                "per-batch sync on a comparator: set the engine's sync setting".into(),
            ));
        }
        if batch.has_range_deletes() && self.api.batch_delete_range.is_none() {
            return Err(strata::Error::NotSupported(format!(
                "{} has no range deletion",
                self.api.engine
            )));
        }
        if batch.has_merges() && !self.merges {
            return Err(strata::Error::NotSupported(format!(
                "{} has no merge operator here",
                self.api.engine
            )));
        }
        // SAFETY: a fresh batch, destroyed below on every path.
        let b = unsafe { (self.api.batch_create)() };
        if b.is_null() {
            return Err(self.err(FfiError::Null {
                engine: self.api.engine,
                call: "writebatch_create",
            }));
        }
        let mut result = Ok(());
        for entry in &batch {
            match entry {
                Ok(e) => match e.kind {
                    // SAFETY: b is live; key/value bytes are copied by the library.
                    ValueKind::Value => unsafe {
                        (self.api.batch_put)(
                            b,
                            ptr(e.key),
                            e.key.len(),
                            ptr(e.value),
                            e.value.len(),
                        )
                    },
                    // SAFETY: as above.
                    ValueKind::Delete => unsafe {
                        (self.api.batch_delete)(b, ptr(e.key), e.key.len())
                    },
                    ValueKind::Merge => match self.api.batch_merge {
                        // SAFETY: as above.
                        Some(f) => unsafe {
                            f(b, ptr(e.key), e.key.len(), ptr(e.value), e.value.len())
                        },
                        // Refused above.
                        None => continue,
                    },
                    ValueKind::RangeDelete => {
                        if let Some(f) = self.api.batch_delete_range {
                            // SAFETY: as above.
                            unsafe { f(b, ptr(e.key), e.key.len(), ptr(e.value), e.value.len()) }
                        }
                    }
                },
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            let mut err: *mut c_char = std::ptr::null_mut();
            // SAFETY: db, write options and batch are live.
            result = unsafe {
                (self.api.write)(self.db, self.write_opts, b, &mut err);
                self.api.check(err)
            }
            .map_err(|e| self.err(e));
        }
        // SAFETY: created above, destroyed once.
        unsafe { (self.api.batch_destroy)(b) };
        result
    }

    fn scan(&self, range: ScanRange<'_>) -> strata::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan_visit(range, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
        })?;
        Ok(out)
    }

    fn scan_visit(
        &self,
        range: ScanRange<'_>,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> strata::Result<usize> {
        let ScanRange {
            start,
            end,
            limit,
            reverse,
        } = range;
        self.live()?;
        // SAFETY: db and read options are live.
        let it = unsafe { (self.api.create_iterator)(self.db, self.read_opts) };
        if it.is_null() {
            return Err(self.err(FfiError::Null {
                engine: self.api.engine,
                call: "create_iterator",
            }));
        }
        let mut it = Iter { api: self.api, it };
        let mut n = 0;
        if !reverse {
            match start {
                Bound::Unbounded => it.first(),
                Bound::Included(k) => it.seek(k),
                Bound::Excluded(k) => {
                    it.seek(k);
                    if it.valid() && it.key() == k {
                        it.next();
                    }
                }
            }
            while n < limit && it.valid() {
                if !Self::in_bound(it.key(), end, true) {
                    break;
                }
                f(it.key(), it.value());
                n += 1;
                it.next();
            }
        } else {
            match end {
                Bound::Unbounded => it.last(),
                Bound::Included(k) | Bound::Excluded(k) => {
                    it.seek(k);
                    if !it.valid() {
                        it.last();
                    } else if !(matches!(end, Bound::Included(_)) && it.key() == k) {
                        it.prev();
                    }
                }
            }
            while n < limit && it.valid() {
                if !Self::in_bound(it.key(), start, false) {
                    break;
                }
                f(it.key(), it.value());
                n += 1;
                it.prev();
            }
        }
        it.status().map_err(|e| self.err(e))?;
        Ok(n)
    }

    fn flush(&self) -> strata::Result<()> {
        self.live()?;
        // SAFETY: db is live.
        unsafe { (self.api.flush)(self.api, self.db) }.map_err(|e| self.err(e))
    }

    /// A checkpoint by the library's own call (RocksDB's `Checkpoint`:
    /// the memtable flushed first, tables hard-linked where the file system
    /// allows); `NotSupported` where it has none (LevelDB, a RocksDB library
    /// without the calls). The library does not say what it linked or
    /// copied: the figures returned are zero.
    fn checkpoint(&self, target: &Path) -> strata::Result<strata::CheckpointStats> {
        self.live()?;
        let Some(checkpoint) = self.api.checkpoint else {
            return Err(strata::Error::NotSupported(format!(
                "{} has no checkpoint",
                self.api.engine
            )));
        };
        // SAFETY: db is live and of this store's library.
        unsafe { checkpoint(self.api, self.db, target) }.map_err(|e| self.err(e))?;
        Ok(strata::CheckpointStats::default())
    }

    /// A backup by the library's own engine (RocksDB's `BackupEngine`, the
    /// memtable flushed first); `NotSupported` where it has none (LevelDB,
    /// a RocksDB library without the calls). `store` only names the place:
    /// the library's engine keeps its backups in a subdirectory of
    /// `store.dir()` named after the library (`rocksdb`), which it creates
    /// and owns; the strata store's own `LOCK`, `shared/` and `meta/`
    /// beside it stay empty (the two formats never share a directory).
    /// The library does not say what it copied: the backup is numbered 1
    /// and its other figures are zero.
    fn backup(&self, store: &strata::BackupStore) -> strata::Result<strata::BackupInfo> {
        self.live()?;
        let Some(backup) = self.api.backup else {
            return Err(strata::Error::NotSupported(format!(
                "{} has no backup",
                self.api.engine
            )));
        };
        let target = store.dir().join(self.api.engine);
        // SAFETY: db is live and of this store's library.
        unsafe { backup(self.api, self.db, target.as_path()) }.map_err(|e| self.err(e))?;
        Ok(strata::BackupInfo {
            id: 1,
            created_ms: 0,
            last_sequence: 0,
            files: 0,
            bytes: 0,
            copied_bytes: 0,
        })
    }

    fn wait_for_compactions(&self) -> strata::Result<()> {
        // Neither C API offers a wait for background work (RocksDB's
        // `WaitForCompact` is not in its C API), so poll until `quiet_looks` looks in a row find
        // the same idle state; give up after `settle_limit`.
        let started = std::time::Instant::now();
        let mut last: Option<String> = None;
        let mut quiet = 0;
        // When the idle state the final looks confirm was first seen.
        let mut idle_since = std::time::Instant::now();
        while quiet < self.quiet_looks {
            self.live()?;
            let failed = |m: String| {
                self.err(FfiError::Engine {
                    engine: self.api.engine,
                    message: m,
                })
            };
            match (self.api.idle)(&|name| self.property(name)).map_err(failed)? {
                Some(state) if last.as_ref() == Some(&state) => quiet += 1,
                Some(state) => {
                    last = Some(state);
                    quiet = 1;
                    idle_since = std::time::Instant::now();
                }
                None => {
                    last = None;
                    quiet = 0;
                }
            }
            if started.elapsed() > self.settle_limit {
                return Err(failed(format!(
                    "background work still running after {} s",
                    self.settle_limit.as_secs()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        crate::sys::note_settle_overshoot(idle_since.elapsed());
        Ok(())
    }

    fn semantics(&self) -> Semantics {
        Semantics {
            engine: self.api.engine,
            atomic_batches: true,
            snapshot_scans: true,
            snapshots: false,
            range_deletes: self.api.batch_delete_range.is_some(),
            merges: self.merges,
            unsynced: "a process crash (the library's WAL, not synced per write)",
            synced: "per-write sync is the engine's setting here, not the call's",
        }
    }

    /// A cursor over the library's own iterator (at the newest data; a
    /// snapshot is not taken). The database is not closed while one lives.
    fn cursor(&self, snap: Option<&StoreSnapshot>) -> strata::Result<Box<dyn Cursor>> {
        self.live()?;
        if snap.is_some() {
            return Err(strata::Error::NotSupported(format!(
                "snapshots on the {} comparator",
                self.api.engine
            )));
        }
        // SAFETY: db and read options are live objects of this library.
        let it = unsafe { (self.api.create_iterator)(self.db, self.read_opts) };
        if it.is_null() {
            return Err(self.err(FfiError::Null {
                engine: self.api.engine,
                call: "create_iterator",
            }));
        }
        self.cursors.fetch_add(1, Ordering::AcqRel);
        Ok(Box::new(CCursor {
            iter: Some(Iter { api: self.api, it }),
            open: std::sync::Arc::clone(&self.cursors),
            path: self.path.clone(),
        }))
    }

    fn stats(&self) -> StoreStats {
        let mut out = StoreStats::from_lsm(self.lsm_stats());
        out.engine = self.api.engine;
        out
    }

    /// Marks the store closed; the library's close runs at drop. Like
    /// strata's default close, the memtable is not flushed: with the WAL on,
    /// neither RocksDB nor LevelDB flushes it at close.
    fn close(&self) -> strata::Result<()> {
        if self.cursors.load(Ordering::Acquire) > 0 {
            return Err(strata::Error::InvalidArgument(format!(
                "{}: close with cursors still open",
                self.api.engine
            )));
        }
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
}

impl Drop for CStore {
    fn drop(&mut self) {
        if self.cursors.load(Ordering::Acquire) > 0 {
            // Closing under a live iterator would free what it reads: the
            // database is left open (leaked) instead.
            return;
        }
        // SAFETY: `&mut self`: no other user; every object was created by
        // this library, is destroyed once, the database first.
        unsafe {
            (self.api.close)(self.db);
            for o in self.owned.drain(..) {
                (o.destroy)(o.handle);
            }
        }
    }
}

/// The directory as a C string.
pub fn c_path(engine: &'static str, dir: &Path) -> Result<CString, FfiError> {
    CString::new(dir.to_string_lossy().as_bytes()).map_err(|_| FfiError::Nul {
        engine,
        what: dir.display().to_string(),
    })
}
