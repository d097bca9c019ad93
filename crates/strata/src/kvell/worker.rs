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

use super::format::{self, Class, Kind, PAGE};
use super::io::{AlignedBuf, Io, Req, Submitted};
use super::oneshot::Tx;
use crate::error::{Error, Result};
use crate::options::{KvellDurability, KvellOnDamage};
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

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

/// What the plan decided for one operation.
enum Act {
    /// The slot the index names for the key, and the op.
    Get(Option<Loc>, usize),
    Put {
        loc: Loc,
        op: usize,
    },
    Tomb {
        loc: Loc,
        op: usize,
    },
    Nothing,
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

    /// Runs one batch of requests and answers each.
    fn serve(&mut self, batch: Vec<(Vec<Op>, bool, Tx<Answer>)>) {
        let c = &self.shared.counters;
        c.request_batches.fetch_add(1, Relaxed);
        c.requests.fetch_add(batch.len() as u64, Relaxed);
        let writes = |ops: &[Op]| ops.iter().any(|o| !matches!(o, Op::Get(_)));
        let batch = if self.shared.failed.load(Relaxed) {
            // Writes are refused until reopen; reads go on.
            let (refused, reads): (Vec<_>, Vec<_>) =
                batch.into_iter().partition(|(ops, _, _)| writes(ops));
            for (_, _, reply) in refused {
                reply.send(Err(poison()));
            }
            reads
        } else {
            batch
        };
        if batch.is_empty() {
            return;
        }
        let answers = self.run_batch(&batch);
        match answers {
            Ok(per_request) => {
                for ((_, _, reply), a) in batch.into_iter().zip(per_request) {
                    reply.send(a);
                }
            }
            Err(e) => {
                for (_, _, reply) in batch {
                    reply.send(Err(e.clone()));
                }
            }
        }
        self.publish_sizes();
    }

    fn run_batch(&mut self, batch: &[(Vec<Op>, bool, Tx<Answer>)]) -> Result<Vec<Answer>> {
        // 1. Plan every operation in order against the index and the
        // batch's own changes, allocating slots.
        let ops: Vec<&Op> = batch.iter().flat_map(|(o, _, _)| o.iter()).collect();
        let sync =
            batch.iter().any(|(_, s, _)| *s) || self.cfg.durability == KvellDurability::Synced;
        if ops.iter().any(|o| !matches!(o, Op::Get(_))) {
            // A synced batch frees what it replaces at once: older versions
            // still waiting to be erased must go first, or a reuse of a
            // slot it frees could leave one of them the newest on disk.
            self.settle_if_due(sync)?;
        }
        let mut acts = Vec::with_capacity(ops.len());
        let mut retire: Vec<Loc> = Vec::new();
        let mut freed: Vec<Loc> = Vec::new();
        let mut allocated: Vec<Loc> = Vec::new();
        let shared = self.shared.clone();
        {
            let index = shared.index.read();
            let mut overlay: HashMap<&[u8], Option<Loc>> = HashMap::new();
            for (i, op) in ops.iter().enumerate() {
                let key = key_of(op);
                let cur = match overlay.get(key) {
                    Some(l) => *l,
                    None => index.get(key).copied(),
                };
                match op {
                    Op::Get(_) => acts.push(Act::Get(cur, i)),
                    Op::Put(k, v) => {
                        let c = format::class_for(k.len(), v.len());
                        // In place only within a one-page slot: a write
                        // of several pages can tear between them.
                        let one_page = Class::of(c).is_some_and(|cl| cl.pages == 1);
                        let loc = match cur {
                            Some(l) if l.class as usize == c && one_page => l,
                            _ => {
                                let l = match self.alloc(c) {
                                    Ok(l) => l,
                                    Err(e) => {
                                        drop(index);
                                        self.unalloc(&allocated);
                                        return Err(e);
                                    }
                                };
                                allocated.push(l);
                                if let Some(old) = cur {
                                    retire.push(old);
                                }
                                l
                            }
                        };
                        acts.push(Act::Put { loc, op: i });
                        overlay.insert(key, Some(loc));
                    }
                    Op::Delete(_) => {
                        match cur {
                            Some(l) => {
                                acts.push(Act::Tomb { loc: l, op: i });
                                freed.push(l);
                            }
                            None => acts.push(Act::Nothing),
                        }
                        overlay.insert(key, None);
                    }
                }
            }
        }
        // Unsynced, the old slots wait for the next sync pass (erasing them
        // now could reach the disk before their new versions do).
        let defer = !sync;
        let retire_now: &[Loc] = if defer { &[] } else { &retire };
        let values = match self.execute(&ops, &acts, retire_now, sync) {
            Ok(v) => v,
            Err(e) => {
                if !self.shared.failed.load(Relaxed) {
                    // Nothing was written: the new slots are free again.
                    self.unalloc(&allocated);
                }
                return Err(e);
            }
        };
        // 5. Publish: the index, the free lists.
        {
            let mut index = self.shared.index.write();
            for a in &acts {
                match a {
                    Act::Put { loc, op } => {
                        index.insert(key_of(ops[*op]).into(), *loc);
                    }
                    Act::Tomb { op, .. } => {
                        index.remove(key_of(ops[*op]));
                    }
                    _ => {}
                }
            }
        }
        let mut seen = HashSet::new();
        for l in retire.iter().chain(freed.iter()) {
            if seen.insert(*l) {
                if defer {
                    self.pending_bytes += slot_bytes(*l);
                    if retire.contains(l) {
                        self.pending_erase.push(*l);
                    } else {
                        self.pending_free.push(*l);
                    }
                } else if let Some(s) = self.slabs[l.class as usize].as_mut() {
                    s.free.push(l.slot);
                }
            }
        }
        // Split the flat answers back per request.
        let mut out = Vec::with_capacity(batch.len());
        let mut it = values.into_iter();
        for (o, _, _) in batch {
            // Take the request's whole share first: a failed answer must
            // not leave the rest of its share to the next request.
            let share: Vec<_> = it.by_ref().take(o.len()).collect();
            out.push(share.into_iter().collect::<Result<Vec<_>>>());
        }
        Ok(out)
    }

    fn unalloc(&mut self, locs: &[Loc]) {
        for l in locs {
            if let Some(s) = self.slabs[l.class as usize].as_mut() {
                s.free.push(l.slot);
            }
        }
    }

    /// Reads, applies, writes, syncs and retires; returns one value per op.
    fn execute(
        &mut self,
        ops: &[&Op],
        acts: &[Act],
        retire: &[Loc],
        sync: bool,
    ) -> Result<Vec<Result<Option<Vec<u8>>>>> {
        // 2. The units to read: what gets and in-page writes need, unless
        // cached or past the end of the file.
        let mut images: HashMap<Unit, AlignedBuf> = HashMap::new();
        let mut need: Vec<(Unit, usize)> = Vec::new();
        let mut needed: HashSet<Unit> = HashSet::new();
        // `Read`: the whole unit; `Page`: a page image to change one slot
        // of; `Head(n)`: the first `n` bytes of a slot to overwrite (a
        // tombstone, or an erased header): for a whole-page slot, only the
        // pages those bytes cover.
        #[derive(PartialEq)]
        enum Need {
            Read,
            Page,
            Head(usize),
        }
        let mut want =
            |loc: Loc, why: Need, this: &mut Self, images: &mut HashMap<Unit, AlignedBuf>| {
                let (unit, _, class) = unit_of(loc);
                let whole = why == Need::Read;
                let full = class.pages as usize * PAGE;
                let len = match why {
                    Need::Head(n) if class.pages > 1 => {
                        n.div_ceil(PAGE).max(1).saturating_mul(PAGE).min(full)
                    }
                    _ => full,
                };
                if images.contains_key(&unit) || !needed.insert(unit) {
                    return;
                }
                let on_disk = this.slabs[loc.class as usize]
                    .as_ref()
                    .is_some_and(|s| unit.1 < s.pages);
                if let Some(b) = this.cache.get(&unit) {
                    this.shared.counters.cache_hits.fetch_add(1, Relaxed);
                    images.insert(unit, b.copy());
                } else if !on_disk || (!whole && class.pages > 1) {
                    images.insert(unit, AlignedBuf::zeroed(len));
                } else {
                    this.shared.counters.cache_misses.fetch_add(1, Relaxed);
                    need.push((unit, len));
                }
            };
        for a in acts {
            match *a {
                Act::Get(Some(loc), _) => want(loc, Need::Read, self, &mut images),
                Act::Put { loc, .. } => want(loc, Need::Page, self, &mut images),
                Act::Tomb { loc, op } => want(
                    loc,
                    Need::Head(format::SLOT_HEADER + key_of(ops[op]).len()),
                    self,
                    &mut images,
                ),
                _ => {}
            }
        }
        for &loc in retire {
            want(loc, Need::Head(format::SLOT_HEADER), self, &mut images);
        }
        if !need.is_empty() {
            let mut bufs: Vec<(Unit, AlignedBuf)> = need
                .iter()
                .map(|&(u, len)| (u, AlignedBuf::zeroed(len)))
                .collect();
            let mut counts = Submitted::default();
            {
                let (mut reqs, bytes) = unit_reqs(&self.slabs, &mut bufs)?;
                let r = self.io.read(&mut reqs, &mut counts);
                drop(reqs);
                self.count(counts, false, bytes);
                r?;
            }
            for (unit, buf) in bufs {
                self.cache_put(unit, buf.copy());
                images.insert(unit, buf);
            }
        }
        // 3. Apply in order.
        let mut values = Vec::with_capacity(ops.len());
        let mut dirty: Vec<Unit> = Vec::new();
        let mut dirtied: HashSet<Unit> = HashSet::new();
        for a in acts {
            match *a {
                Act::Get(None, _) | Act::Nothing => values.push(Ok(None)),
                Act::Get(Some(loc), op) => {
                    let (unit, off, class) = unit_of(loc);
                    let img = images
                        .get(&unit)
                        .ok_or_else(|| Error::InvalidArgument("page".into()))?;
                    let bytes = &img.as_slice()[off..off + class.slot];
                    let path = self.slabs[loc.class as usize]
                        .as_ref()
                        .map(|s| s.path.clone())
                        .unwrap_or_default();
                    let corrupt = |reason: String| Error::Corruption {
                        file: path.clone(),
                        offset: unit.1 * PAGE as u64 + off as u64,
                        reason,
                    };
                    match format::decode_slot(bytes) {
                        // Kept in place by the open (worker/recover.rs).
                        Ok(s) if s.ts >= MAX_TS => {
                            values.push(Err(corrupt("timestamp out of range".into())))
                        }
                        // The slot must hold the key asked for: a free-list
                        // defect then shows as corruption, not another
                        // key's value.
                        Ok(s) if s.key != key_of(ops[op]) => {
                            values.push(Err(corrupt("the slot holds another key".into())))
                        }
                        Ok(s) if s.kind == Kind::Item => values.push(Ok(Some(s.value.to_vec()))),
                        Ok(_) => values.push(Err(corrupt("the index names a tombstone".into()))),
                        Err(format::Bad::Empty) => {
                            values.push(Err(corrupt("the index names an empty slot".into())))
                        }
                        Err(format::Bad::Damaged(r)) => values.push(Err(corrupt(r.into()))),
                    }
                }
                Act::Put { loc, op } => {
                    let (unit, off, _) = unit_of(loc);
                    if let Op::Put(k, v) = ops[op] {
                        let ts = self.ts;
                        self.ts = next_ts(self.ts)?;
                        let img = images
                            .get_mut(&unit)
                            .ok_or_else(|| Error::InvalidArgument("page".into()))?;
                        format::encode_slot(&mut img.as_mut_slice()[off..], Kind::Item, ts, k, v);
                    }
                    if dirtied.insert(unit) {
                        dirty.push(unit);
                    }
                    values.push(Ok(None));
                }
                Act::Tomb { loc, op } => {
                    let (unit, off, _) = unit_of(loc);
                    let ts = self.ts;
                    self.ts = next_ts(self.ts)?;
                    let img = images
                        .get_mut(&unit)
                        .ok_or_else(|| Error::InvalidArgument("page".into()))?;
                    format::encode_slot(
                        &mut img.as_mut_slice()[off..],
                        Kind::Tombstone,
                        ts,
                        key_of(ops[op]),
                        b"",
                    );
                    if dirtied.insert(unit) {
                        dirty.push(unit);
                    }
                    values.push(Ok(None));
                }
            }
        }
        // 4. Write, sync, then retire old slots of class changes.
        self.write_units(&dirty, &mut images)?;
        if sync && !dirty.is_empty() {
            self.sync_written()?;
        }
        if !retire.is_empty() {
            let mut units = Vec::new();
            let mut seen: HashSet<Unit> = HashSet::new();
            for &loc in retire {
                // The old slot of an item that changed class: free it on
                // disk (its header zeroed) now that the new slot is written.
                let (unit, off, _) = unit_of(loc);
                let img = images
                    .get_mut(&unit)
                    .ok_or_else(|| Error::InvalidArgument("page".into()))?;
                format::erase_slot(&mut img.as_mut_slice()[off..]);
                if seen.insert(unit) {
                    units.push(unit);
                }
            }
            self.write_units(&units, &mut images)?;
            if sync {
                // The erased slots go to the free lists below: their
                // erasure must be durable before any reuse can reach the
                // disk, or a power loss could leave the reuse and the old
                // item, and bring the old value back.
                self.sync_written()?;
            }
        }
        // Keep clean copies of what was written.
        for (unit, img) in images {
            let whole = Class::of(unit.0 as usize).map_or(0, |c| c.pages as usize * PAGE);
            if img.len() != whole {
                // A tombstone's first page of a whole-page slot.
                if let Some(old) = self.cache.pop(&unit) {
                    self.cache_used -= old.len() as u64;
                }
            } else if self.cache.contains(&unit) || dirtied.contains(&unit) {
                self.cache_put(unit, img);
            }
        }
        Ok(values)
    }

    fn write_units(
        &mut self,
        units: &[Unit],
        images: &mut HashMap<Unit, AlignedBuf>,
    ) -> Result<()> {
        if units.is_empty() {
            return Ok(());
        }
        let mut bufs: Vec<(Unit, AlignedBuf)> = units
            .iter()
            .filter_map(|u| images.remove(u).map(|b| (*u, b)))
            .collect();
        let mut counts = Submitted::default();
        let (r, bytes) = {
            let (mut reqs, bytes) = unit_reqs(&self.slabs, &mut bufs)?;
            (self.io.write(&mut reqs, &mut counts), bytes)
        };
        self.count(counts, true, bytes);
        if let Err(e) = r {
            self.shared.failed.store(true, Relaxed);
            return Err(e);
        }
        for (unit, buf) in bufs {
            let c = Class::of(unit.0 as usize).map_or(1, |c| c.pages);
            if let Some(s) = self.slabs[unit.0 as usize].as_mut() {
                s.pages = s.pages.max(unit.1 + u64::from(c));
                s.written = true;
            }
            images.insert(unit, buf);
        }
        Ok(())
    }

    fn sync_written(&mut self) -> Result<()> {
        for slab in self.slabs.iter_mut().flatten() {
            if slab.written {
                if let Err(e) = self.io.sync(&slab.file, &slab.path) {
                    self.shared.failed.store(true, Relaxed);
                    return Err(e);
                }
                slab.written = false;
                self.shared.counters.syncs.fetch_add(1, Relaxed);
            }
        }
        Ok(())
    }

    fn cache_put(&mut self, unit: Unit, buf: AlignedBuf) {
        let len = buf.len() as u64;
        if len > self.cfg.cache_bytes {
            if let Some(old) = self.cache.pop(&unit) {
                self.cache_used -= old.len() as u64;
            }
            return;
        }
        if let Some(old) = self.cache.put(unit, buf) {
            self.cache_used -= old.len() as u64;
        }
        self.cache_used += len;
        while self.cache_used > self.cfg.cache_bytes {
            match self.cache.pop_lru() {
                Some((_, b)) => self.cache_used -= b.len() as u64,
                None => break,
            }
        }
    }
}

/// One I/O request per unit buffer, at the unit's place in its slab, and
/// their total bytes.
fn unit_reqs<'a>(
    slabs: &'a [Option<Slab>],
    bufs: &'a mut [(Unit, AlignedBuf)],
) -> Result<(Vec<Req<'a>>, u64)> {
    let mut reqs = Vec::with_capacity(bufs.len());
    let mut bytes = 0;
    for (unit, buf) in bufs.iter_mut() {
        let slab = slabs[unit.0 as usize]
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument(format!("no slab of class {}", unit.0)))?;
        bytes += buf.len() as u64;
        reqs.push(Req {
            file: &slab.file,
            path: &slab.path,
            offset: unit.1 * PAGE as u64,
            buf,
        });
    }
    Ok((reqs, bytes))
}

/// The error of a write to a worker whose earlier write or sync failed.
fn poison() -> Error {
    Error::Poisoned(Arc::new(Error::InvalidArgument(
        "an earlier slab write or sync of this KVell worker failed; reopen the store".into(),
    )))
}

/// The timestamp after `ts`; an error once the counter is spent (only a
/// store opened over a crafted slot near [`MAX_TS`] can get there).
fn next_ts(ts: u64) -> Result<u64> {
    ts.checked_add(1)
        .filter(|&t| t < u64::MAX)
        .ok_or_else(|| Error::InvalidArgument("this KVell worker's timestamps are spent".into()))
}

/// The bytes a slot takes on disk.
fn slot_bytes(loc: Loc) -> u64 {
    Class::of(loc.class as usize).map_or(PAGE as u64, |c| c.slot as u64)
}

fn key_of(op: &Op) -> &[u8] {
    match op {
        Op::Get(k) | Op::Delete(k) | Op::Put(k, _) => k,
    }
}
