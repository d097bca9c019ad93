//! One batch of a worker: plan every operation against the index, read the
//! pages the cache lacks, apply the operations to page images, write the
//! changed pages, sync when asked, retire the old slots and answer (the
//! order and its guarantees are in the worker's module doc).

use super::{poison, unit_of, Answer, Loc, Op, Slab, Unit, Worker, MAX_TS};
use crate::error::{Error, Result};
use crate::kvell::format::{self, Class, Kind, PAGE};
use crate::kvell::io::{AlignedBuf, Req, Submitted};
use crate::kvell::oneshot::Tx;
use crate::options::KvellDurability;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;

/// What the plan decided for one operation.
pub(super) enum Act {
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
    /// Runs one batch of requests and answers each.
    pub(super) fn serve(&mut self, batch: Vec<(Vec<Op>, bool, Tx<Answer>)>) {
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
    pub(super) fn execute(
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

    pub(super) fn sync_written(&mut self) -> Result<()> {
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
