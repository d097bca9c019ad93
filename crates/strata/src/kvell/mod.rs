//! KVell: a second engine behind [`KvStore`].
//!
//! W worker threads share nothing: each owns the keys that hash to it, with
//! one slab file per size class (slots in 4 KiB pages, items unsorted), an
//! in-memory ordered index, free lists, an LRU page cache bounded in bytes
//! and its own I/O ring (io_uring, or pread/pwrite where the kernel refuses
//! it). There is no log: a write is acknowledged when its page write
//! completed (`kvell_durability=written`, the paper's) or after the batch's
//! `fdatasync` (`synced`). Open scans every slab and keeps the newest slot
//! of each key. See `worker` for how a batch runs and why a crash leaves
//! every item at its old or new value.

pub mod format;
pub mod io;
mod oneshot;
pub mod scan;
pub mod verify;
mod worker;

#[cfg(test)]
mod tests;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::io::FileLock;
use crate::options::{KvellDurability, Options, WriteOptions};
use crate::stats::{EngineStats, KvellStats, StoreStats};
use crate::store::{Cursor, KvStore, PagedCursor, ScanRange, Semantics};
use crate::types::ValueKind;
use oneshot::Tx;
use parking_lot::Mutex;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use worker::{Msg, Op};

/// Entries a cursor fetches at a time.
const CURSOR_PAGE: usize = 128;

const WRITTEN: Semantics = Semantics {
    engine: "kvell",
    atomic_batches: false,
    snapshot_scans: false,
    snapshots: false,
    range_deletes: false,
    merges: false,
    unsynced: "a process crash: acknowledged when the page write completed (O_DIRECT where the file system allows it); after a power loss each key holds its value as of the last flush() or a later one it was given. Exceptions, both reported by the open and by verify: an in-place update of a one-page item torn by a power loss on a drive without atomic 4 KiB writes loses that item (it reads as Corruption), and a crash that tears the first write of a key (or the first after its delete) of an item over 4072 B (on such a drive, of any item) leaves the key reading as Corruption until it is written or deleted",
    synced: "a power loss for the writes of this call: their slab files are fdatasynced before they are acknowledged; a multi-key batch is not atomic (each key is written on its own)",
};

const SYNCED: Semantics = Semantics {
    engine: "kvell",
    atomic_batches: false,
    snapshot_scans: false,
    snapshots: false,
    range_deletes: false,
    merges: false,
    unsynced: "a power loss: every I/O batch is fdatasynced before its writes are acknowledged. Exceptions for writes in flight at the crash, both reported by the open and by verify: an in-place update of a one-page item torn on a drive without atomic 4 KiB writes loses that item (it reads as Corruption; its new value was not acknowledged), and a torn first write of a key (or the first after its delete) of an item over 4072 B (on such a drive, of any item) leaves the key reading as Corruption until it is written or deleted",
    synced: "nothing more: every write is synced already",
};

struct WorkerHandle {
    // std's channel: sending from a C program's thread leaves no
    // per-thread allocation behind (crossbeam's waker keeps one).
    tx: std::sync::mpsc::Sender<Msg>,
    shared: Arc<worker::Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    dir: PathBuf,
    workers: Vec<WorkerHandle>,
    closed: AtomicBool,
    /// Held for the whole of `close`.
    closing: Mutex<()>,
    lock: Mutex<Option<Box<dyn FileLock>>>,
    durability: KvellDurability,
    io_backend: &'static str,
    describe: String,
    /// What the open found damaged or torn (`Kvell::recovery_report`).
    recovery_report: Option<String>,
    user_writes: AtomicU64,
    user_reads: AtomicU64,
    user_bytes: AtomicU64,
}

/// A KVell store. Cloning is cheap and shares the store.
#[derive(Clone)]
pub struct Kvell {
    inner: Arc<Inner>,
}

impl Kvell {
    /// Opens (by default creating) the KVell store in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Kvell> {
        let (choice, batch) = (opts.kvell.io, opts.kvell.batch);
        Kvell::open_with_io(dir, opts, &move || io::backend(choice, batch))
    }

    /// `open` with each worker's I/O backend made by `make_io` (the
    /// power-loss tests record writes through it).
    #[doc(hidden)]
    pub fn open_with_io(
        dir: impl AsRef<Path>,
        opts: Options,
        make_io: &io::MakeIo,
    ) -> Result<Kvell> {
        let dir = dir.as_ref().to_path_buf();
        opts.validate()?;
        if dir.join(crate::filename::CURRENT).exists() {
            return Err(Error::InvalidArgument(format!(
                "{} holds an LSM database; open it with engine=lsm",
                dir.display()
            )));
        }
        let meta = dir.join(format::META_FILE);
        if !meta.exists() && !opts.create_if_missing {
            return Err(Error::NotFound(dir));
        }
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let lock =
            crate::io::FileSystem::lock(&crate::io::PosixFs, &dir.join(crate::filename::LOCK))?;
        // Decided under the lock: another process may have created the
        // store between the check above and the lock.
        let exists = meta.exists();
        if exists && opts.error_if_exists {
            return Err(Error::AlreadyExists(dir));
        }
        if !exists && !opts.create_if_missing {
            return Err(Error::NotFound(dir));
        }
        let workers = if exists {
            let b = std::fs::read(&meta).map_err(|e| Error::io(&meta, e))?;
            format::decode_meta(&b, &meta)?
        } else {
            let w = match opts.kvell.workers {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                n => n,
            }
            .clamp(1, 256) as u32;
            // Written whole, synced, then named: a crash leaves no half file.
            crate::io::write_atomic(
                &crate::io::PosixFs,
                &dir,
                format::META_FILE,
                &format::encode_meta(w),
            )?;
            w
        };
        // Every slab file must belong to a worker of this store.
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("slab-") && name.ends_with(".kv.tmp") {
                // A slab whose creation a crash interrupted: never used.
                std::fs::remove_file(entry.path()).map_err(|e| Error::io(entry.path(), e))?;
                continue;
            }
            if let Some((w, c)) = format::parse_slab_name(&name) {
                if w >= workers || c as usize >= format::classes() {
                    return Err(Error::Corruption {
                        file: entry.path(),
                        offset: 0,
                        reason: format!(
                            "slab of worker {w}, class {c}: this store has {workers} workers"
                        ),
                    });
                }
            }
        }
        // The page cache within the memory budget's share.
        let page_cache = {
            let mut sized = opts.clone();
            crate::budget::MemoryBudget::for_options(&opts).apply(&mut sized);
            sized.kvell.page_cache
        };
        let per_worker_cache = page_cache / u64::from(workers);
        // Open every worker (each scans its own slabs) in parallel. Every
        // thread started is joined before `open` returns, an error included:
        // none may go on rewriting pages after the LOCK is released.
        let mut opened = Vec::new();
        let mut first_err = None;
        for id in 0..workers {
            let cfg = worker::Config {
                dir: dir.clone(),
                id,
                workers,
                durability: opts.kvell.durability,
                direct: opts.kvell.direct,
                batch: opts.kvell.batch,
                cache_bytes: per_worker_cache,
                on_damage: opts.kvell.on_damage,
            };
            let io = match make_io() {
                Ok(io) => io,
                Err(e) => {
                    first_err = Some(e);
                    break;
                }
            };
            let shared = Arc::new(worker::Shared::default());
            let s2 = shared.clone();
            match crate::sched::spawn(format!("kvell-open-{id}"), move || {
                worker::Worker::open(cfg, io, s2)
            }) {
                Ok(h) => opened.push((shared, h)),
                Err(e) => {
                    first_err = Some(Error::io(&dir, e));
                    break;
                }
            }
        }
        let mut ready = Vec::new();
        for (shared, h) in opened {
            match h.join() {
                Ok(Ok(w)) => ready.push((shared, w)),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(Error::InvalidArgument(
                        "a KVell worker panicked while opening".into(),
                    ));
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let recovery_report = damage_report(&ready);
        let io_backend = ready.first().map_or("pread", |(_, w)| w.io_name());
        let direct = ready.iter().all(|(_, w)| w.direct());
        let mut handles = Vec::new();
        for (id, (shared, w)) in ready.into_iter().enumerate() {
            let (tx, rx) = std::sync::mpsc::channel();
            let thread = match crate::sched::spawn(format!("kvell-{id}"), move || w.run(rx)) {
                Ok(t) => t,
                Err(e) => {
                    // Stop the workers already running (each syncs and
                    // ends when its channel closes) before the LOCK goes.
                    for h in handles {
                        let WorkerHandle { tx, thread, .. } = h;
                        drop(tx);
                        if let Some(t) = thread.into_inner() {
                            let _ = t.join();
                        }
                    }
                    return Err(Error::io(&dir, e));
                }
            };
            handles.push(WorkerHandle {
                tx,
                shared,
                thread: Mutex::new(Some(thread)),
            });
        }
        let describe = format!(
            "workers={workers},kvell_page_cache={},kvell_durability={},io={io_backend},direct={direct},kvell_batch={}",
            opts.kvell.page_cache,
            opts.kvell.durability.name(),
            opts.kvell.batch
        );
        Ok(Kvell {
            inner: Arc::new(Inner {
                dir,
                workers: handles,
                closed: AtomicBool::new(false),
                closing: Mutex::new(()),
                lock: Mutex::new(Some(lock)),
                durability: opts.kvell.durability,
                io_backend,
                describe,
                recovery_report,
                user_writes: AtomicU64::new(0),
                user_reads: AtomicU64::new(0),
                user_bytes: AtomicU64::new(0),
            }),
        })
    }

    /// The directory of the store.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// What the open found damaged or torn, a line per slot (at most
    /// [`worker::REPORT_LINES`] per worker; the counts are exact), or
    /// `None` when every slot decoded. The counts are in `stats()` too
    /// (`damaged_slots`, `torn_slots`, `reclaimed_slots`).
    pub fn recovery_report(&self) -> Option<&str> {
        self.inner.recovery_report.as_deref()
    }
}

/// The open's report over every worker: counts, then each worker's lines.
fn damage_report(ready: &[(Arc<worker::Shared>, worker::Worker)]) -> Option<String> {
    let sum = |f: fn(&worker::Counters) -> &AtomicU64| -> u64 {
        ready
            .iter()
            .map(|(s, _)| f(&s.counters).load(Relaxed))
            .sum()
    };
    let (kept, torn, reclaimed) = (
        sum(|c| &c.damaged_slots),
        sum(|c| &c.torn_slots),
        sum(|c| &c.reclaimed_slots),
    );
    if kept + torn + reclaimed == 0 {
        return None;
    }
    let mut out = format!(
        "{kept} damaged slots kept in place, {torn} torn slots erased, {reclaimed} damaged slots reclaimed"
    );
    let mut listed = 0u64;
    for (_, w) in ready {
        for line in w.damage_report() {
            out.push('\n');
            out.push_str(line);
            listed += 1;
        }
    }
    if listed < kept + torn + reclaimed {
        out.push_str(&format!(
            "\n(the first {} slots of each worker are listed)",
            worker::REPORT_LINES
        ));
    }
    Some(out)
}

impl Inner {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    fn worker_of(&self, key: &[u8]) -> usize {
        (xxhash_rust::xxh3::xxh3_64(key) % self.workers.len() as u64) as usize
    }

    /// Sends each worker its operations (all before waiting, so the workers
    /// run in parallel) and returns the answers per worker.
    fn run(&self, per_worker: Vec<Vec<Op>>, sync: bool) -> Result<Vec<Vec<Option<Vec<u8>>>>> {
        self.check_open()?;
        let mut waits = Vec::new();
        for (w, ops) in per_worker.into_iter().enumerate() {
            waits.push(if ops.is_empty() {
                None
            } else {
                Some(self.send(w, ops, sync)?)
            });
        }
        let mut out = Vec::with_capacity(waits.len());
        let mut first_err = None;
        for w in waits {
            match w.map_or(Ok(Vec::new()), wait) {
                Ok(v) => out.push(v),
                Err(e) => {
                    first_err.get_or_insert(e);
                    out.push(Vec::new());
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Queues `ops` on worker `w`; the answer comes through the receiver.
    fn send(&self, w: usize, ops: Vec<Op>, sync: bool) -> Result<oneshot::Rx<worker::Answer>> {
        let (tx, rx) = oneshot::channel();
        self.workers[w]
            .tx
            .send(Msg::Ops {
                ops,
                sync,
                reply: tx,
            })
            .map_err(|_| Error::Closed)?;
        Ok(rx)
    }

    /// One operation on its key's worker.
    fn one(&self, op: Op, sync: bool) -> Result<Option<Vec<u8>>> {
        let w = self.worker_of(match &op {
            Op::Get(k) | Op::Delete(k) | Op::Put(k, _) => k,
        });
        self.check_open()?;
        let mut out = wait(self.send(w, vec![op], sync)?)?;
        Ok(out.pop().flatten())
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let n = self.workers.len();
        let mut per: Vec<Vec<Op>> = (0..n).map(|_| Vec::new()).collect();
        let mut route = Vec::with_capacity(keys.len());
        for k in keys {
            let w = self.worker_of(k);
            route.push(w);
            per[w].push(Op::Get(k.to_vec()));
        }
        self.user_reads.fetch_add(keys.len() as u64, Relaxed);
        let answers = self.run(per, false)?;
        let mut its: Vec<_> = answers.into_iter().map(|v| v.into_iter()).collect();
        Ok(route.into_iter().map(|w| its[w].next().flatten()).collect())
    }

    /// Up to `limit` entries in the range: the workers' indexes are walked
    /// one after the other (each under its read lock), merged, and the
    /// items read in one batch per worker. Keys deleted in between are
    /// skipped and the walk goes on past them.
    fn scan(&self, range: ScanRange<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let ScanRange {
            start,
            end,
            limit,
            reverse,
        } = range;
        self.check_open()?;
        let mut out = Vec::new();
        let mut lo = crate::store::own_bound(start);
        let mut hi = crate::store::own_bound(end);
        while out.len() < limit {
            if crate::store::range_is_empty(as_ref(&lo), as_ref(&hi)) {
                break;
            }
            let want = limit - out.len();
            let mut keys: Vec<Vec<u8>> = Vec::new();
            for w in &self.workers {
                let index = w.shared.index.read();
                let range = index.range::<[u8], _>((as_ref(&lo), as_ref(&hi)));
                if reverse {
                    keys.extend(range.rev().take(want).map(|(k, _)| k.to_vec()));
                } else {
                    keys.extend(range.take(want).map(|(k, _)| k.to_vec()));
                }
            }
            if keys.is_empty() {
                break;
            }
            keys.sort_unstable();
            if reverse {
                keys.reverse();
            }
            keys.truncate(want);
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let values = self.multi_get(&refs)?;
            let last = keys.last().cloned();
            for (k, v) in keys.into_iter().zip(values) {
                if let Some(v) = v {
                    out.push((k, v));
                }
            }
            match last {
                Some(k) if reverse => hi = Bound::Excluded(k),
                Some(k) => lo = Bound::Excluded(k),
                None => break,
            }
        }
        Ok(out)
    }

    fn each_worker(&self, make: impl Fn(Tx<Result<()>>) -> Msg) -> Result<()> {
        // A worker that has stopped (a close raced this call) did not do
        // what was asked: that is `Closed`, never `Ok`.
        let mut waits = Vec::new();
        let mut first = Ok(());
        for w in &self.workers {
            let (tx, rx) = oneshot::channel();
            match w.tx.send(make(tx)) {
                Ok(()) => waits.push(rx),
                Err(_) => {
                    if first.is_ok() {
                        first = Err(Error::Closed);
                    }
                }
            }
        }
        for rx in waits {
            let r = rx.recv().unwrap_or(Err(Error::Closed));
            if let Err(e) = r {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }

    fn close(&self) -> Result<()> {
        // A second close waits for the first to finish its syncs.
        let _closing = self.closing.lock();
        if self.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return Ok(());
        }
        let r = self.each_worker(Msg::Stop);
        for w in &self.workers {
            if let Some(t) = w.thread.lock().take() {
                let _ = t.join();
            }
        }
        self.lock.lock().take();
        r
    }
}

/// A worker's answer; a reply dropped unanswered means the worker stopped.
fn wait(rx: oneshot::Rx<worker::Answer>) -> Result<Vec<Option<Vec<u8>>>> {
    rx.recv().unwrap_or(Err(Error::Closed))
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl KvStore for Kvell {
    fn name(&self) -> String {
        format!("strata-kvell({})", self.inner.describe)
    }

    fn semantics(&self) -> Semantics {
        match self.inner.durability {
            KvellDurability::Written => WRITTEN,
            KvellDurability::Synced => SYNCED,
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        format::check_sizes(key.len(), value.len())?;
        self.inner
            .one(Op::Put(key.to_vec(), value.to_vec()), false)?;
        self.inner.user_writes.fetch_add(1, Relaxed);
        self.inner
            .user_bytes
            .fetch_add((key.len() + value.len()) as u64, Relaxed);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        format::check_sizes(key.len(), 0)?;
        self.inner.user_reads.fetch_add(1, Relaxed);
        self.inner.one(Op::Get(key.to_vec()), false)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        format::check_sizes(key.len(), 0)?;
        self.inner.one(Op::Delete(key.to_vec()), false)?;
        self.inner.user_writes.fetch_add(1, Relaxed);
        self.inner.user_bytes.fetch_add(key.len() as u64, Relaxed);
        Ok(())
    }

    /// Not atomic: each worker applies its keys' entries in order, as one
    /// I/O batch; a crash can leave some keys of the batch written. A batch
    /// with a range deletion is refused whole (`NotSupported`): KVell's
    /// index is a hash per worker, with no ordered range to delete. So is a
    /// batch with a merge: KVell keeps one version per key and no operator.
    fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        batch.validate()?;
        if batch.has_range_deletes() {
            return Err(Error::NotSupported("kvell has no range deletion".into()));
        }
        if batch.has_merges() {
            return Err(Error::NotSupported("kvell has no merge operator".into()));
        }
        if batch.max_keyspace() > 0 {
            return Err(Error::NotSupported("kvell has no keyspaces".into()));
        }
        let n = self.inner.workers.len();
        let mut per: Vec<Vec<Op>> = (0..n).map(|_| Vec::new()).collect();
        let mut count = 0u64;
        for e in batch.iter() {
            let e = e?;
            let w = self.inner.worker_of(e.key);
            per[w].push(match e.kind {
                ValueKind::Value => Op::Put(e.key.to_vec(), e.value.to_vec()),
                ValueKind::Delete => Op::Delete(e.key.to_vec()),
                ValueKind::RangeDelete | ValueKind::Merge => {
                    return Err(Error::NotSupported(
                        "kvell has no range deletion or merge".into(),
                    ))
                }
            });
            count += 1;
        }
        if count == 0 {
            return self.inner.check_open();
        }
        self.inner.run(per, opts.sync)?;
        self.inner.user_writes.fetch_add(count, Relaxed);
        self.inner.user_bytes.fetch_add(batch.user_bytes(), Relaxed);
        Ok(())
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        for k in keys {
            format::check_sizes(k.len(), 0)?;
        }
        self.inner.multi_get(keys)
    }

    fn scan(&self, range: ScanRange<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan(range)
    }

    fn cursor(&self, snap: Option<&crate::store::StoreSnapshot>) -> Result<Box<dyn Cursor>> {
        self.inner.check_open()?;
        if snap.is_some() {
            return Err(Error::NotSupported(
                "the kvell engine has no snapshots".into(),
            ));
        }
        let inner = self.inner.clone();
        Ok(Box::new(PagedCursor::new(
            Box::new(move |range| inner.scan(range)),
            CURSOR_PAGE,
        )))
    }

    /// Makes every acknowledged write durable: fdatasync of every slab.
    fn flush(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.each_worker(Msg::Sync)
    }

    /// KVell has no background work.
    fn wait_for_compactions(&self) -> Result<()> {
        self.inner.check_open()
    }

    fn stats(&self) -> StoreStats {
        let i = &self.inner;
        let mut k = KvellStats {
            workers: i.workers.len(),
            io_backend: i.io_backend,
            // A worker's first slab may be made after the open, on a file
            // system that refuses O_DIRECT.
            direct_io: !i.workers.iter().any(|w| w.shared.buffered.load(Relaxed)),
            durability: i.durability.name(),
            ..KvellStats::default()
        };
        for w in &i.workers {
            let c = &w.shared.counters;
            let l = |a: &AtomicU64| a.load(Relaxed);
            k.items_per_worker.push(w.shared.index.read().len() as u64);
            k.slab_bytes += l(&c.slab_bytes);
            k.free_slots += l(&c.free_slots);
            k.page_cache_hits += l(&c.cache_hits);
            k.page_cache_misses += l(&c.cache_misses);
            k.page_cache_bytes += l(&c.cache_bytes);
            k.reads += l(&c.reads);
            k.writes += l(&c.writes);
            k.read_bytes += l(&c.read_bytes);
            k.write_bytes += l(&c.write_bytes);
            k.syncs += l(&c.syncs);
            k.batches += l(&c.batches);
            k.batched_ios += l(&c.batched_ios);
            k.max_batch = k.max_batch.max(l(&c.max_batch));
            k.request_batches += l(&c.request_batches);
            k.requests += l(&c.requests);
            k.recovery_micros = k.recovery_micros.max(l(&c.recovery_micros));
            k.recovered_items += l(&c.recovered_items);
            k.recovery_bytes += l(&c.recovery_bytes);
            k.damaged_slots += l(&c.damaged_slots);
            k.torn_slots += l(&c.torn_slots);
            k.reclaimed_slots += l(&c.reclaimed_slots);
        }
        StoreStats {
            engine: "kvell",
            user_writes: i.user_writes.load(Relaxed),
            user_reads: i.user_reads.load(Relaxed),
            user_bytes_written: i.user_bytes.load(Relaxed),
            disk_bytes_written: k.write_bytes,
            disk_bytes_read: k.read_bytes,
            cache_hits: k.page_cache_hits,
            cache_misses: k.page_cache_misses,
            cache_bytes: k.page_cache_bytes,
            detail: EngineStats::Kvell(Box::new(k)),
        }
    }

    fn recovery_report(&self) -> Option<String> {
        Kvell::recovery_report(self).map(str::to_string)
    }

    fn close(&self) -> Result<()> {
        self.inner.close()
    }
}
