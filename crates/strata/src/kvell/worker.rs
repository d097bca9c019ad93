//! A KVell worker: the thread that owns one key partition — its slab files,
//! free lists, page cache and I/O ring — and serves requests in batches.
//!
//! One wake-up takes up to `kvell_batch` queued operations and runs them as
//! one batch: plan every operation against the index (allocating slots),
//! read the pages it needs that the cache lacks (one submission per
//! `kvell_batch` reads), apply the operations in order to page images,
//! write the changed pages (one submission per `kvell_batch` writes), sync
//! when asked, then write the tombstones that retire the old slots of items
//! that changed size class, publish the index changes and answer.
//!
//! An update of an item in a slot of one page (items up to 4072 bytes) is
//! written in place: a drive writes a page atomically. An item that changes
//! class, or one whose slot spans several pages (a write of which can tear
//! between its pages), is written to a new slot first, and its old slot is
//! erased only after the new one is durable as far as the mode promises:
//! under `synced`, once the new slot is synced (before the answer); under
//! `written`, the erasure waits, with the old slot held out of the free
//! lists, until the next pass that syncs every slab (`flush`, `close`, a
//! synced write, or [`PENDING_SLOTS`] waiting), so a process crash or a
//! power loss leaves the old or the new version, never neither. Deletes
//! tombstone the item's slot in place; under `written` the tombstoned slot
//! is reused only after that pass too, so the tombstone outlives every older
//! version it hides. Every slot has its own crc32c, and a page write
//! rewrites the other slots of the page with the bytes they had, so a torn
//! page can only lose the slot being written.

use super::format::{self, Class, PAGE};
use super::io::{AlignedBuf, Io, Req, Submitted};
use super::oneshot::Tx;
use crate::error::{Error, Result};
use crate::options::{KvellDurability, KvellOnDamage};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

mod batch;
mod recover;
pub use recover::REPORT_LINES;

/// Slots a `written`-mode worker may hold back (old versions waiting to be
/// erased, tombstoned slots waiting to be reused) before it runs a sync
/// pass on its own; a pass also runs once they span [`PENDING_BYTES`].
pub const PENDING_SLOTS: usize = 1024;
/// Bytes of held-back slots that start a sync pass.
pub const PENDING_BYTES: u64 = 64 << 20;

/// Timestamps at or past this are refused as damaged at open (a per-worker
/// write counter would need centuries of writes to reach it), so the counter
/// never wraps.
pub const MAX_TS: u64 = u64::MAX - (1 << 40);

/// Where an item lives: its size class and slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Loc {
    pub class: u8,
    pub slot: u32,
}

/// One operation of a request.
pub enum Op {
    Get(Vec<u8>),
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// A request's answer: one value per operation (`None` for writes).
pub type Answer = Result<Vec<Option<Vec<u8>>>>;

/// What a worker is sent.
pub enum Msg {
    Ops {
        ops: Vec<Op>,
        sync: bool,
        reply: Tx<Answer>,
    },
    /// fdatasync every slab file.
    Sync(Tx<Result<()>>),
    /// Sync and stop.
    Stop(Tx<Result<()>>),
}

/// Counters a worker updates and `stats` reads.
#[derive(Default)]
pub struct Counters {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub read_bytes: AtomicU64,
    pub write_bytes: AtomicU64,
    pub syncs: AtomicU64,
    pub batches: AtomicU64,
    pub batched_ios: AtomicU64,
    pub max_batch: AtomicU64,
    pub request_batches: AtomicU64,
    pub requests: AtomicU64,
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub cache_bytes: AtomicU64,
    pub slab_bytes: AtomicU64,
    pub free_slots: AtomicU64,
    pub recovery_micros: AtomicU64,
    pub recovered_items: AtomicU64,
    pub recovery_bytes: AtomicU64,
    /// Damaged slots the open kept in place (`worker/recover.rs`).
    pub damaged_slots: AtomicU64,
    /// Slots a crash tore that the open erased.
    pub torn_slots: AtomicU64,
    /// Damaged slots `kvell_on_damage=reclaim` erased.
    pub reclaimed_slots: AtomicU64,
}

/// The part of a worker other threads read: its index (scans walk it) and
/// its counters.
#[derive(Default)]
pub struct Shared {
    pub index: RwLock<BTreeMap<Box<[u8]>, Loc>>,
    pub counters: Counters,
    /// A write failed: the slabs may hold a partial batch, so the worker
    /// refuses writes until the store is reopened.
    pub failed: AtomicBool,
    /// This worker's slab files are opened without O_DIRECT: it was not
    /// asked for, or the file system refused it (then from that slab on).
    pub buffered: AtomicBool,
}

/// A worker's fixed settings.
#[derive(Clone)]
pub struct Config {
    pub dir: PathBuf,
    pub id: u32,
    pub workers: u32,
    pub durability: KvellDurability,
    pub direct: bool,
    pub batch: usize,
    pub cache_bytes: u64,
    pub on_damage: KvellOnDamage,
}

struct Slab {
    file: File,
    path: PathBuf,
    /// Pages in the file, the header page included.
    pages: u64,
    /// Slots ever handed out (the next new slot).
    next: u32,
    free: Vec<u32>,
    written: bool,
}

/// A unit of I/O: a page of a class sharing pages, or a whole slot of a
/// class of whole pages. Keyed by the class and its first page.
type Unit = (u8, u64);

/// The worker's state.
pub struct Worker {
    cfg: Config,
    slabs: Vec<Option<Slab>>,
    shared: Arc<Shared>,
    cache: lru::LruCache<Unit, AlignedBuf>,
    cache_used: u64,
    io: Box<dyn Io>,
    ts: u64,
    /// `written` mode: old slots of moved items, to be erased once the
    /// slabs holding their new versions are synced, then freed.
    pending_erase: Vec<Loc>,
    /// `written` mode: tombstoned slots, to be freed after that same pass.
    pending_free: Vec<Loc>,
    /// Bytes of the slots in both lists.
    pending_bytes: u64,
    /// What the open found damaged or torn, a line each (at most
    /// [`REPORT_LINES`]).
    damage_report: Vec<String>,
}

fn unit_of(loc: Loc) -> (Unit, usize, Class) {
    let class = Class::of(loc.class as usize).unwrap_or(Class {
        slot: PAGE,
        per_page: 1,
        pages: 1,
    });
    let (page, off) = class.locate(loc.slot);
    ((loc.class, page), off, class)
}

impl Worker {
    /// Opens the worker's slabs and rebuilds its index from them.
    pub fn open(cfg: Config, io: Box<dyn Io>, shared: Arc<Shared>) -> Result<Worker> {
        shared.buffered.store(!cfg.direct, Relaxed);
        let mut w = Worker {
            slabs: (0..format::classes()).map(|_| None).collect(),
            shared,
            cache: lru::LruCache::unbounded(),
            cache_used: 0,
            io,
            ts: 1,
            cfg,
            pending_erase: Vec::new(),
            pending_free: Vec::new(),
            pending_bytes: 0,
            damage_report: Vec::new(),
        };
        w.recover()?;
        Ok(w)
    }

    /// Whether the slab files are open with O_DIRECT.
    pub fn direct(&self) -> bool {
        !self.shared.buffered.load(Relaxed)
    }

    pub fn io_name(&self) -> &'static str {
        self.io.name()
    }

    /// The open's lines on damaged and torn slots (empty when it found none).
    pub fn damage_report(&self) -> &[String] {
        &self.damage_report
    }

    fn open_file(&mut self, path: &Path, create: bool) -> Result<File> {
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(create);
        if self.direct() {
            let mut d = o.clone();
            d.custom_flags(libc::O_DIRECT);
            match d.open(path) {
                Ok(f) => return Ok(f),
                // tmpfs and some others refuse O_DIRECT: use the page cache.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    self.shared.buffered.store(true, Relaxed)
                }
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        o.open(path).map_err(|e| Error::io(path, e))
    }

    fn publish_sizes(&self) {
        let (bytes, free) = self.slabs.iter().flatten().fold((0, 0), |(b, f), s| {
            (b + s.pages * PAGE as u64, f + s.free.len() as u64)
        });
        let c = &self.shared.counters;
        c.slab_bytes.store(bytes, Relaxed);
        c.free_slots.store(free, Relaxed);
        c.cache_bytes.store(self.cache_used, Relaxed);
    }

    /// The slab of class `c`, created on first use: its header page is
    /// written and synced under a temporary name, which is then renamed and
    /// the directory synced, so a crash never leaves a slab without a header
    /// (a leftover `.tmp` is removed at open).
    fn slab(&mut self, c: usize) -> Result<&mut Slab> {
        if self.slabs[c].is_none() {
            let path = self.cfg.dir.join(format::slab_name(self.cfg.id, c as u32));
            let tmp = path.with_extension("kv.tmp");
            let file = self.open_file(&tmp, true)?;
            let mut header = AlignedBuf::zeroed(PAGE);
            format::encode_header(
                header.as_mut_slice(),
                self.cfg.id,
                self.cfg.workers,
                c as u32,
            );
            let mut counts = Submitted::default();
            self.io.write(
                &mut [Req {
                    file: &file,
                    path: &tmp,
                    offset: 0,
                    buf: &mut header,
                }],
                &mut counts,
            )?;
            self.io.sync(&file, &tmp)?;
            std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
            crate::io::FileSystem::sync_dir(&crate::io::PosixFs, &self.cfg.dir)?;
            self.slabs[c] = Some(Slab {
                file,
                path,
                pages: 1,
                next: 0,
                free: Vec::new(),
                written: false,
            });
        }
        self.slabs[c]
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("class".into()))
    }

    fn alloc(&mut self, c: usize) -> Result<Loc> {
        let slab = self.slab(c)?;
        let slot = match slab.free.pop() {
            Some(s) => s,
            None => {
                let s = slab.next;
                slab.next = s.checked_add(1).ok_or_else(|| {
                    Error::InvalidArgument("a slab of this worker is full (2^32 slots)".into())
                })?;
                s
            }
        };
        Ok(Loc {
            class: c as u8,
            slot,
        })
    }

    /// Serves requests until told to stop.
    pub fn run(mut self, rx: Receiver<Msg>) {
        let mut pending: Option<Msg> = None;
        loop {
            let first = match pending.take() {
                Some(m) => m,
                None => match rx.recv() {
                    Ok(m) => m,
                    Err(_) => {
                        let _ = self.sync_all();
                        return;
                    }
                },
            };
            let mut batch = Vec::new();
            let mut ops = 0;
            let mut control = None;
            match first {
                Msg::Ops {
                    ops: o,
                    sync,
                    reply,
                } => {
                    ops += o.len();
                    batch.push((o, sync, reply));
                }
                m => control = Some(m),
            }
            while control.is_none() && ops < self.cfg.batch {
                match rx.try_recv() {
                    Ok(Msg::Ops {
                        ops: o,
                        sync,
                        reply,
                    }) => {
                        ops += o.len();
                        batch.push((o, sync, reply));
                    }
                    Ok(m) => pending = Some(m),
                    Err(_) => break,
                }
                if pending.is_some() {
                    break;
                }
            }
            if !batch.is_empty() {
                self.serve(batch);
            }
            let control = control.or_else(|| match pending.take() {
                Some(m @ (Msg::Sync(_) | Msg::Stop(_))) => Some(m),
                other => {
                    pending = other;
                    None
                }
            });
            match control {
                Some(Msg::Sync(reply)) => {
                    reply.send(self.sync_all());
                }
                Some(Msg::Stop(reply)) => {
                    reply.send(self.sync_all());
                    return;
                }
                _ => {}
            }
        }
    }

    /// Syncs every slab, then settles the held-back slots. A failed sync
    /// poisons the worker (the kernel may have dropped the dirty pages, so
    /// a later sync could succeed over lost writes) and the other slabs are
    /// still synced; the first error is returned. A poisoned worker never
    /// settles (its newer versions may be lost: the next open sorts the
    /// versions out) and answers with the poison.
    fn sync_all(&mut self) -> Result<()> {
        let poisoned = self.shared.failed.load(Relaxed);
        let mut first: Option<Error> = None;
        for slab in self.slabs.iter_mut().flatten() {
            match self.io.sync(&slab.file, &slab.path) {
                Ok(()) => {
                    slab.written = false;
                    self.shared.counters.syncs.fetch_add(1, Relaxed);
                }
                Err(e) => {
                    self.shared.failed.store(true, Relaxed);
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(e) => Err(e),
            None if poisoned => Err(poison()),
            None => self.settle_pending(),
        }
    }

    /// Erases the held-back old slots and frees them and the held-back
    /// tombstoned ones. Requires every slab that holds a newer version of
    /// them to be synced (the caller has just synced them all).
    fn settle_pending(&mut self) -> Result<()> {
        if self.pending_erase.is_empty() && self.pending_free.is_empty() {
            return Ok(());
        }
        let erase = std::mem::take(&mut self.pending_erase);
        if !erase.is_empty() {
            // The erasures, written and synced like a synced batch's
            // retirements (through the page cache, so no cached image
            // keeps the old header).
            if let Err(e) = self.execute(&[], &[], &erase, true) {
                self.pending_erase = erase;
                return Err(e);
            }
        }
        let free = std::mem::take(&mut self.pending_free);
        for l in erase.iter().chain(free.iter()) {
            if let Some(s) = self.slabs[l.class as usize].as_mut() {
                s.free.push(l.slot);
            }
        }
        self.pending_bytes = 0;
        Ok(())
    }

    /// Syncs the written slabs and settles the held-back slots, if there
    /// are any and `now` or they pass [`PENDING_SLOTS`] or
    /// [`PENDING_BYTES`].
    fn settle_if_due(&mut self, now: bool) -> Result<()> {
        let held = self.pending_erase.len() + self.pending_free.len();
        if held == 0 || (!now && held < PENDING_SLOTS && self.pending_bytes < PENDING_BYTES) {
            return Ok(());
        }
        self.sync_written()?;
        self.settle_pending()
    }

    fn count(&self, s: Submitted, write: bool, bytes: u64) {
        let c = &self.shared.counters;
        c.batches.fetch_add(s.batches, Relaxed);
        c.batched_ios.fetch_add(s.ios, Relaxed);
        c.max_batch.fetch_max(s.max_batch, Relaxed);
        if write {
            c.writes.fetch_add(s.ios, Relaxed);
            c.write_bytes.fetch_add(bytes, Relaxed);
        } else {
            c.reads.fetch_add(s.ios, Relaxed);
            c.read_bytes.fetch_add(bytes, Relaxed);
        }
    }
}

/// The error of a write to a worker whose earlier write or sync failed.
fn poison() -> Error {
    Error::Poisoned(Arc::new(Error::InvalidArgument(
        "an earlier slab write or sync of this KVell worker failed; reopen the store".into(),
    )))
}
