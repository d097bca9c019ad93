//! A worker's open: the scan of its slabs that rebuilds the index, and what
//! becomes of the slots that lost or do not decode.
//!
//! Every slot below a slab's `next` ends in exactly one place: the index,
//! a free list, or held out of both. The newest intact version of each key
//! wins; the versions it supersedes are erased (their headers zeroed, after
//! what recovery keeps is synced), so an older version can never come back
//! once a newer slot is reused.
//!
//! A slot that does not decode (bad magic, lengths or checksum, or a
//! timestamp no write counter reaches) is sorted by what its header still
//! names. The named kind, timestamp and key are hints (the checksum failed,
//! so any of them may be the damaged part); a key this worker does not own
//! is not taken as one.
//! - **Torn**: the winning intact version of its key is an item, or a
//!   tombstone newer than it; or a damaged version of the key is newer than
//!   it; or it is itself a tombstone. An item's old slot is erased only once
//!   its new version is durable (under `written`, at the next sync pass), so
//!   an intact item beside a damaged newer one means that one was a write in
//!   flight, or under `written` one not yet flushed: what a crash leaves of a
//!   write or of an erasure. The intact version decides the key; the slot is
//!   erased and freed (`torn_slots`).
//! - **Newest**: an item newer than the winning intact version of its key,
//!   or with none. It is kept in place and indexed, so the key reads as
//!   `Corruption` (and a scan over it fails) until it is written or deleted:
//!   for damage to the medium, the same answer as before the restart.
//! - **Nameless**: its header names no key of this worker. It is kept in
//!   place, out of the free lists.
//!
//! Newest and nameless slots stay on disk, so every open counts them again
//! (`damaged_slots`), lists them in its report, and `strata verify` finds
//! them. `kvell_on_damage=refuse` fails the open on them instead (this
//! worker then writes nothing, and every damaged slot stays as it is);
//! `reclaim` erases and frees them, and the keys they held become absent.
//! Limit: a crash during the first write of a key (or the first after its
//! delete) whose slot spans pages can tear that slot (on a drive without
//! atomic 4 KiB writes, any first write), and no record tells it from an
//! acknowledged item damaged later: the key then reads as `Corruption` too,
//! although its write was never acknowledged.

use super::{unit_of, Loc, Slab, Worker, MAX_TS};
use crate::error::{Error, Result};
use crate::kvell::format::{self, Bad, Class, Kind, PAGE};
use crate::kvell::io::{AlignedBuf, Req, Submitted};
use crate::kvell::scan;
use crate::options::KvellOnDamage;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// Lines of the open's report one worker keeps (its counts stay exact).
pub const REPORT_LINES: usize = 64;

/// A slot the scan could not take as a version of a key.
struct Damaged {
    loc: Loc,
    /// The kind, timestamp and key its header names, if it names one.
    named: Option<(Kind, u64, Box<[u8]>)>,
    reason: &'static str,
}

/// What becomes of a damaged slot (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Torn,
    Newest,
    Nameless,
}

/// The intact winner of each key: its timestamp, kind and slot.
type Best = HashMap<Box<[u8]>, (u64, Kind, Loc)>;

/// The fate of each slot of `damaged` (in its order), given the intact
/// winners `best`.
fn fates(damaged: &[Damaged], best: &Best) -> Vec<Fate> {
    // Per key, the damaged slot with the highest timestamp.
    let mut newest: HashMap<&[u8], (u64, usize)> = HashMap::new();
    for (i, d) in damaged.iter().enumerate() {
        if let Some((_, ts, key)) = &d.named {
            let e = newest.entry(&**key).or_insert((*ts, i));
            if *ts > e.0 {
                *e = (*ts, i);
            }
        }
    }
    damaged
        .iter()
        .enumerate()
        .map(|(i, d)| match &d.named {
            None => Fate::Nameless,
            Some((kind, ts, key)) => {
                let newest_damaged = newest.get(&**key).is_some_and(|&(_, j)| j == i);
                let explained = match best.get(&**key) {
                    Some((_, Kind::Item, _)) => true,
                    Some((t, Kind::Tombstone, _)) => t >= ts,
                    None => false,
                };
                if *kind == Kind::Item && newest_damaged && !explained {
                    Fate::Newest
                } else {
                    Fate::Torn
                }
            }
        })
        .collect()
}

/// Up to 64 bytes of `key`, escaped for a report line.
fn show(key: &[u8]) -> String {
    let shown = &key[..key.len().min(64)];
    let more = if key.len() > 64 { "…" } else { "" };
    format!("\"{}\"{more}", shown.escape_ascii())
}

/// What the open's report says became of a damaged slot that names `key`.
fn fate_text(fate: Fate, reclaim: bool, key: Option<&[u8]>) -> String {
    let key = key.map_or_else(|| "?".to_string(), show);
    match (fate, reclaim) {
        (Fate::Torn, _) => format!(
            "explained by an intact version of key {key} (a write or an erasure a crash cut short): erased"
        ),
        (Fate::Newest, false) => format!(
            "the newest version of key {key}: it reads as Corruption until written or deleted"
        ),
        (Fate::Nameless, false) => "names no key: kept in place, out of use".into(),
        (Fate::Newest, true) => format!("reclaimed (kvell_on_damage=reclaim): key {key} is absent"),
        (Fate::Nameless, true) => "reclaimed (kvell_on_damage=reclaim)".into(),
    }
}

impl Worker {
    /// Scans every slab of this worker and rebuilds the index (see the
    /// module doc for what becomes of each slot). Superseded versions and
    /// torn slots are erased only after every slab is synced, so what the
    /// open keeps is durable before what it drops is gone. Under
    /// `kvell_on_damage=refuse` a kept damaged slot fails the open before
    /// anything is written.
    pub(super) fn recover(&mut self) -> Result<()> {
        let start = Instant::now();
        let mut best: Best = HashMap::new();
        let mut erase: Vec<Loc> = Vec::new();
        let mut damaged: Vec<Damaged> = Vec::new();
        let mut scanned = 0u64;
        let (id, workers) = (u64::from(self.cfg.id), u64::from(self.cfg.workers.max(1)));
        let owns = |key: &[u8]| xxhash_rust::xxh3::xxh3_64(key) % workers == id;
        for c in 0..format::classes() {
            let path = self.cfg.dir.join(format::slab_name(self.cfg.id, c as u32));
            if !path.exists() {
                continue;
            }
            let file = self.open_file(&path, false)?;
            let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
            let class = Class::of(c).ok_or_else(|| Error::InvalidArgument("class".into()))?;
            scan::check_header(&file, &path, len, self.cfg.id, self.cfg.workers, c as u32)?;
            let mut free = Vec::new();
            let shape = scan::scan_slab(&file, &path, len, class, |slot, bytes, decoded| {
                let loc = Loc {
                    class: c as u8,
                    slot,
                };
                match decoded {
                    // A timestamp this close to the end cannot come from a
                    // counter that starts at 1 and counts writes: a crafted
                    // or corrupt slot, which would win every recovery.
                    Ok(s) if s.ts >= MAX_TS => damaged.push(Damaged {
                        loc,
                        named: Some((s.kind, s.ts, s.key.into())),
                        reason: "timestamp out of range",
                    }),
                    Ok(s) => {
                        self.ts = self.ts.max(s.ts + 1);
                        match best.get_mut(s.key) {
                            Some(b) if b.0 >= s.ts => {
                                if s.kind == Kind::Item {
                                    erase.push(loc);
                                }
                                free.push(slot);
                            }
                            Some(b) => {
                                let old = std::mem::replace(b, (s.ts, s.kind, loc));
                                if old.1 == Kind::Item {
                                    erase.push(old.2);
                                }
                                if old.2.class as usize == c {
                                    free.push(old.2.slot);
                                } else if let Some(o) = self.slabs[old.2.class as usize].as_mut() {
                                    o.free.push(old.2.slot);
                                }
                            }
                            None => {
                                best.insert(s.key.into(), (s.ts, s.kind, loc));
                            }
                        }
                    }
                    Err(Bad::Empty) => free.push(slot),
                    Err(Bad::Damaged(reason)) => damaged.push(Damaged {
                        loc,
                        // A key that is not this worker's cannot be what
                        // the slot held: its bytes are the damaged part.
                        named: format::named_by_header(bytes)
                            .filter(|(_, _, key)| owns(key))
                            .map(|(k, t, key)| (k, t, key.into())),
                        reason,
                    }),
                }
            })?;
            scanned += shape.bytes;
            let (data_pages, slots) = (shape.data_pages, shape.slots);
            self.slabs[c] = Some(Slab {
                file,
                path,
                pages: 1 + data_pages,
                next: slots,
                free,
                written: false,
            });
        }
        let fates = fates(&damaged, &best);
        // Winning tombstones and dropped slots of any class: freed below.
        let mut late: Vec<Loc> = Vec::new();
        let mut index = BTreeMap::new();
        for (key, (_, kind, loc)) in best {
            match kind {
                Kind::Item => {
                    index.insert(key, loc);
                }
                Kind::Tombstone => late.push(loc),
            }
        }
        let reclaim = self.cfg.on_damage == KvellOnDamage::Reclaim;
        let (mut kept, mut torn, mut reclaimed) = (0u64, 0u64, 0u64);
        let mut report = Vec::new();
        let mut refusal: Option<Error> = None;
        for (d, fate) in damaged.into_iter().zip(fates) {
            let (unit, off, _) = unit_of(d.loc);
            let offset = unit.1 * PAGE as u64 + off as u64;
            let keep = fate != Fate::Torn && !reclaim;
            let refuse = keep && self.cfg.on_damage == KvellOnDamage::Refuse && refusal.is_none();
            // Lines are written only while the report has room (or for the
            // refusal): a store with many damaged slots costs no more.
            if report.len() < REPORT_LINES || refuse {
                let path = self.slabs[d.loc.class as usize]
                    .as_ref()
                    .map(|s| s.path.clone())
                    .unwrap_or_default();
                let what = fate_text(fate, reclaim, d.named.as_ref().map(|n| &*n.2));
                if refuse {
                    refusal = Some(Error::Corruption {
                        file: path.clone(),
                        offset,
                        reason: format!(
                            "slot {}: {}; {what} (kvell_on_damage=refuse)",
                            d.loc.slot, d.reason
                        ),
                    });
                }
                if report.len() < REPORT_LINES {
                    report.push(format!(
                        "{} offset {offset} (slot {}): {}; {what}",
                        path.display(),
                        d.loc.slot,
                        d.reason
                    ));
                }
            }
            if !keep {
                if fate == Fate::Torn {
                    torn += 1;
                } else {
                    reclaimed += 1;
                }
                erase.push(d.loc);
                late.push(d.loc);
            } else {
                kept += 1;
                if let (Fate::Newest, Some((_, ts, k))) = (fate, d.named) {
                    if ts < MAX_TS {
                        self.ts = self.ts.max(ts + 1);
                    }
                    index.insert(k, d.loc);
                }
            }
        }
        if let Some(e) = refusal {
            return Err(e);
        }
        for loc in late {
            if let Some(s) = self.slabs[loc.class as usize].as_mut() {
                s.free.push(loc.slot);
            }
        }
        // What recovery keeps must be durable before what it drops is
        // erased: a winning slot written just before a process crash may
        // still sit in the page cache (or the drive's), and its loser's
        // erasure must not reach the disk without it. This also makes
        // everything the store serves from now on durable.
        for slab in self.slabs.iter().flatten() {
            self.io.sync(&slab.file, &slab.path)?;
        }
        self.erase_slots(&erase)?;
        self.damage_report = report;
        let c = &self.shared.counters;
        c.recovered_items.store(index.len() as u64, Relaxed);
        c.recovery_bytes.store(scanned, Relaxed);
        c.damaged_slots.store(kept, Relaxed);
        c.torn_slots.store(torn, Relaxed);
        c.reclaimed_slots.store(reclaimed, Relaxed);
        *self.shared.index.write() = index;
        self.publish_sizes();
        c.recovery_micros
            .store(start.elapsed().as_micros() as u64, Relaxed);
        Ok(())
    }

    /// Zeroes the headers of `locs` on disk and syncs.
    fn erase_slots(&mut self, locs: &[Loc]) -> Result<()> {
        if locs.is_empty() {
            return Ok(());
        }
        let mut pages: HashMap<(u8, u64), AlignedBuf> = HashMap::new();
        for &loc in locs {
            let (unit, off, _) = unit_of(loc);
            let slab = match self.slabs[loc.class as usize].as_ref() {
                Some(s) => s,
                None => continue,
            };
            let buf = match pages.get_mut(&unit) {
                Some(b) => b,
                None => {
                    let mut b = AlignedBuf::zeroed(PAGE);
                    crate::kvell::io::read_zero_filled(
                        &slab.file,
                        b.as_mut_slice(),
                        unit.1 * PAGE as u64,
                    )
                    .map_err(|e| Error::io(&slab.path, e))?;
                    pages.entry(unit).or_insert(b)
                }
            };
            format::erase_slot(&mut buf.as_mut_slice()[off..]);
        }
        let mut touched = HashSet::new();
        let mut counts = Submitted::default();
        let mut reqs = Vec::new();
        for ((class, page), buf) in pages.iter_mut() {
            if let Some(slab) = self.slabs[*class as usize].as_ref() {
                reqs.push(Req {
                    file: &slab.file,
                    path: &slab.path,
                    offset: page * PAGE as u64,
                    buf,
                });
                touched.insert(*class);
            }
        }
        self.io.write(&mut reqs, &mut counts)?;
        drop(reqs);
        for class in touched {
            if let Some(slab) = self.slabs[class as usize].as_ref() {
                self.io.sync(&slab.file, &slab.path)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(slot: u32) -> Loc {
        Loc { class: 0, slot }
    }

    fn damaged(slot: u32, kind: Kind, ts: u64, key: &[u8]) -> Damaged {
        Damaged {
            loc: loc(slot),
            named: Some((kind, ts, key.into())),
            reason: "slot checksum mismatch",
        }
    }

    #[test]
    fn an_intact_item_explains_a_damaged_version_of_its_key() {
        let mut best = Best::new();
        best.insert(b"k".as_slice().into(), (5, Kind::Item, loc(0)));
        // Newer (a write in flight) or older (an erasure torn): torn both.
        let d = [
            damaged(1, Kind::Item, 9, b"k"),
            damaged(2, Kind::Item, 3, b"k"),
        ];
        assert_eq!(fates(&d, &best), [Fate::Torn, Fate::Torn]);
    }

    #[test]
    fn a_damaged_item_newer_than_every_intact_version_is_its_keys_newest() {
        let mut best = Best::new();
        best.insert(b"t".as_slice().into(), (5, Kind::Tombstone, loc(0)));
        let d = [
            // Put after a delete, damaged: the key reads as Corruption.
            damaged(1, Kind::Item, 9, b"t"),
            // Older than the tombstone: the delete decides.
            damaged(2, Kind::Item, 3, b"t"),
            // No intact version at all; two damaged ones: the newer counts.
            damaged(3, Kind::Item, 4, b"n"),
            damaged(4, Kind::Item, 6, b"n"),
            // A damaged tombstone newest: the key is absent either way.
            damaged(5, Kind::Item, 7, b"d"),
            damaged(6, Kind::Tombstone, 8, b"d"),
            Damaged {
                loc: loc(7),
                named: None,
                reason: "bad slot magic",
            },
        ];
        assert_eq!(
            fates(&d, &best),
            [
                Fate::Newest,
                Fate::Torn,
                Fate::Torn,
                Fate::Newest,
                Fate::Torn,
                Fate::Torn,
                Fate::Nameless
            ]
        );
    }
}
