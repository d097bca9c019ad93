//! Making room for a write group: memtable switches (and with them the
//! WAL's), stalls while a keyspace's background work is behind, pacing
//! while a flush must end before the next switch, and the memtables'
//! share of the memory budget across keyspaces.

use super::{Inner, LogState, State};
use crate::error::Result;
use crate::filename::wal_path;
use crate::memtable::MemTable;
use crate::stats::Stats;
use crate::wal;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Logs kept for flushes, per keyspace, past which the oldest memtable of
/// another keyspace is switched (`Inner::switch_memtable`).
const RETAINED_LOGS: usize = 4;

/// What the memtables hold, in bytes (`Inner::memtable_usage`).
#[derive(Default)]
struct MemtableUsage {
    /// What stays held however many memtables are switched and flushed:
    /// each keyspace's empty memtable and the chunk pool's most.
    fixed: u64,
    /// The active memtables, past what they held when empty.
    active: u64,
    /// The immutable memtables.
    immutable: u64,
}

impl MemtableUsage {
    /// The bytes of `share` left to the active and immutable memtables:
    /// the share less the fixed part, and at least a quarter of it.
    fn room(&self, share: u64) -> u64 {
        share.saturating_sub(self.fixed).max(share / 4)
    }

    /// The active and immutable memtables fill the room.
    fn over(&self, share: u64) -> bool {
        self.active + self.immutable >= self.room(share)
    }

    /// A switch is due: the active memtables pass 7/8 of the room, or
    /// half of it with the immutable ones past all of it.
    fn switch_due(&self, share: u64) -> bool {
        let room = self.room(share);
        self.active >= room / 8 * 7 || (self.over(share) && self.active >= room / 2)
    }
}

impl Inner {
    /// Ensures `fam`'s memtable has room for a group of `bytes`, switching
    /// it (and the WAL) when full, pacing writers while a flush must end
    /// before the next switch (`pacing`, `default` only), slowing them to
    /// level 0's drain rate while `fam` asks for it (`slowdown`: up to 100
    /// ms per call), and stalling while `fam`'s background work is too far
    /// behind. Pacing and slowdown sleep with `log` held. A stall in one
    /// keyspace holds back only the groups that write to it.
    pub(super) fn make_room(
        &self,
        fam: &super::Family,
        log: &mut super::LogState,
        mut force_switch: bool,
        bytes: usize,
    ) -> Result<Option<u32>> {
        let is_default = fam.id == super::family::DEFAULT_ID;
        let wbs = fam.opts.write_buffer_size;
        let mem_of = |log: &super::LogState| log.mems.get(fam.index()).cloned().flatten();
        let mem_size = |log: &super::LogState| {
            log.mems
                .get(fam.index())
                .and_then(Option::as_ref)
                .map_or(0, |m| m.approximate_size())
        };
        // The common cases without the state mutex, when the memtable has
        // room: nothing holds writes back (one mutex less per write
        // group), or only pacing does (see `Admission::paced`). The fast
        // paths' flags follow `default`.
        if is_default && !force_switch && mem_size(log) < wbs {
            if self.admission.calm.load(Ordering::Acquire) {
                return Ok(None);
            }
            if let Some(oldest) = self.admission.paced.load_full() {
                if let Some(wait) = self.pace(mem_size(log), Some(&oldest), bytes) {
                    self.pace_sleep(wait);
                }
                return Ok(None);
            }
        }
        let mut allow_delay = !force_switch;
        let mut allow_pace = !force_switch && is_default;
        let mut st = self.state.lock();
        loop {
            st.check_usable()?;
            if allow_pace {
                allow_pace = false;
                let tree = st.tree(fam);
                let oldest = tree.imm.first().filter(|_| tree.slots_full(&fam.opts));
                if let Some(wait) = self.pace(mem_size(log), oldest, bytes) {
                    drop(st);
                    self.pace_sleep(wait);
                    st = self.state.lock();
                    continue;
                }
            }
            if allow_delay && st.tree(fam).hold.slow {
                // Admit this group at the rate compactions drain level 0
                // (`sched::slowdown`), once.
                allow_delay = false;
                Stats::add(&self.stats.slowdown_count, 1);
                let wait = self.admission.slowdown.lock().delay(Instant::now(), bytes);
                if let Some(wait) = wait {
                    drop(st);
                    let t = Instant::now();
                    std::thread::sleep(wait);
                    Stats::add(&self.stats.slowdown_micros, t.elapsed().as_micros() as u64);
                    st = self.state.lock();
                    continue;
                }
            }
            // Never an empty memtable: whatever its filters weigh, it
            // takes at least one group.
            let Some(mem) = mem_of(log) else {
                return Err(super::keyspace::dropped(fam));
            };
            let empty = mem.is_empty();
            let full = !empty && mem.approximate_size() >= wbs;
            if !force_switch && !full {
                return Ok(None);
            }
            if force_switch && empty {
                return Ok(None);
            }
            let tree = st.tree(fam);
            let slots_full = tree.slots_full(&fam.opts);
            let stalled = slots_full || tree.hold.stop;
            if stalled && (!force_switch || slots_full) && self.keyspaces_beside_default() {
                // Hand the writers of this keyspace back: the group's
                // other writers go on (`commit_group`).
                return Ok(Some(fam.id));
            }
            if stalled && !force_switch {
                let t = Instant::now();
                Stats::add(&self.stats.stall_count, 1);
                self.bg_cv.notify_all();
                self.done_cv.wait_for(&mut st, Duration::from_millis(100));
                Stats::add(&self.stats.stall_micros, t.elapsed().as_micros() as u64);
                continue;
            }
            if stalled && slots_full {
                // A forced switch still must not pile up memtables.
                self.bg_cv.notify_all();
                self.done_cv.wait_for(&mut st, Duration::from_millis(100));
                continue;
            }
            self.switch_memtable(fam, &mut st, log)?;
            force_switch = false;
        }
    }

    /// Switches the memtable of every live keyspace, empty ones too, in
    /// this leader's turn, and sets the state's flush cut at the log
    /// before the switches: every write before this instant is in a
    /// memtable at or below the cut, every later one above it. A keyspace
    /// whose memtable slots are full is waited for (its flush is not held
    /// back: the cut is set after the switches).
    pub(super) fn switch_all(&self, log: &mut super::LogState) -> Result<()> {
        let cut = log.writer.log_number();
        for fam in self.live_families() {
            if fam.is_dropped() {
                continue;
            }
            let mut st = self.state.lock();
            loop {
                st.check_usable()?;
                if !st.tree(&fam).slots_full(&fam.opts) {
                    break;
                }
                self.bg_cv.notify_all();
                self.done_cv.wait_for(&mut st, Duration::from_millis(100));
            }
            self.switch_one(&fam, &mut st, log)?;
        }
        self.state.lock().flush_cut = Some(cut);
        Ok(())
    }

    /// What the memtables of the keyspaces not being dropped hold
    /// (`MemTable::memory_held`), from their super-versions (no lock).
    fn memtable_usage(&self) -> MemtableUsage {
        let mut u = MemtableUsage {
            fixed: self.chunks.cap_bytes(),
            ..MemtableUsage::default()
        };
        for f in self.families.read().iter().flatten() {
            if f.is_dropped() {
                continue;
            }
            let sv = f.super_version.load();
            let empty = sv.mem.memory_held_when_empty() as u64;
            u.fixed += empty;
            u.active += (sv.mem.memory_held() as u64).saturating_sub(empty);
            u.immutable += sv.imm.iter().map(|m| m.memory_held() as u64).sum::<u64>();
        }
        u
    }

    /// Keeps the memtables of every keyspace within the memtables' share
    /// of the memory budget (RocksDB's write buffer manager). Each
    /// keyspace's own memtables fit the share (`MemoryBudget::apply`), but
    /// not those of several. What switching and flushing can free is
    /// weighed against the share less what stays held (each keyspace's
    /// empty memtable, the chunk pool's most; at least a quarter of the
    /// share is left to weigh, so keyspaces whose empty memtables pass
    /// the rest pass the share by that much). The largest active
    /// memtable that can be switched is (its flush frees it) while the
    /// active ones pass 7/8 of that room, or half of it with the
    /// immutable ones past all of it; while all of them pass the room
    /// and a flush is due, the group waits for it. A keyspace being
    /// dropped is left out: its memtables go with the drop. Nothing to
    /// do without a budget or with `default` alone (its sizes fit the
    /// share). The caller is the write leader, before it makes room in
    /// the keyspaces its group writes to; the room is passed by at most
    /// the group's bytes and a chunk for each keyspace it writes to.
    pub(super) fn fit_memtables(&self, log: &mut LogState) -> Result<()> {
        let share = self.budget.memtables;
        // Another keyspace has a memtable: the leader's own view, no lock.
        if share == 0 || !log.mems.iter().skip(1).any(Option::is_some) {
            return Ok(());
        }
        let u = self.memtable_usage();
        if !u.over(share) && !u.switch_due(share) {
            return Ok(());
        }
        let mut st = self.state.lock();
        let mut waited = None;
        loop {
            st.check_usable()?;
            let u = self.memtable_usage();
            let fams: Vec<_> = self
                .live_families()
                .into_iter()
                .filter(|f| !f.is_dropped())
                .collect();
            if u.switch_due(share) {
                let largest = fams
                    .iter()
                    .filter(|f| {
                        let t = st.tree(f);
                        !t.mem.is_empty() && !t.slots_full(&f.opts)
                    })
                    .max_by_key(|f| st.tree(f).mem.memory_held());
                if let Some(f) = largest {
                    Stats::add(&self.stats.memtable_budget_switches, 1);
                    self.switch_one(f, &mut st, log)?;
                    continue;
                }
            }
            // Waiting helps only while a flush will free a memtable.
            let flush_due = fams.iter().any(|f| !st.tree(f).imm.is_empty());
            if !u.over(share) || !flush_due {
                break;
            }
            if waited.is_none() {
                waited = Some(Instant::now());
                Stats::add(&self.stats.memtable_budget_stalls, 1);
                Stats::add(&self.stats.stall_count, 1);
            }
            self.bg_cv.notify_all();
            self.done_cv.wait_for(&mut st, Duration::from_millis(100));
        }
        if let Some(t) = waited {
            Stats::add(&self.stats.stall_micros, t.elapsed().as_micros() as u64);
        }
        Ok(())
    }

    /// The database has a live keyspace besides `default` (a stall then
    /// holds back only its own writers).
    pub(crate) fn keyspaces_beside_default(&self) -> bool {
        self.families.read().iter().flatten().nth(1).is_some()
    }

    /// Sleeps a pacing delay, counted.
    fn pace_sleep(&self, wait: Duration) {
        let t = Instant::now();
        std::thread::sleep(wait);
        Stats::add(&self.stats.pace_count, 1);
        Stats::add(&self.stats.pace_micros, t.elapsed().as_micros() as u64);
    }

    /// The pacing delay of a group of `bytes` into a memtable of `used`
    /// bytes: only while every memtable slot is taken (`oldest`: the
    /// memtable being flushed, then), so that the next switch would wait
    /// for a flush.
    fn pace(&self, used: usize, oldest: Option<&Arc<MemTable>>, bytes: usize) -> Option<Duration> {
        let now = Instant::now();
        let Some(oldest) = oldest else {
            self.admission.pacer.lock().idle(now);
            return None;
        };
        let room = self.opts.write_buffer_size.saturating_sub(used);
        if room == 0 {
            // Full: the switch below stops this writer until the flush ends.
            return None;
        }
        let flushing = oldest.approximate_size();
        self.admission
            .pacer
            .lock()
            .delay(now, bytes, room, flushing, oldest.flush_progress())
    }

    /// Starts a new WAL and a new memtable of `fam`; its old memtable
    /// becomes immutable.
    fn switch_one(
        &self,
        fam: &super::Family,
        st: &mut parking_lot::MutexGuard<'_, State>,
        log: &mut super::LogState,
    ) -> Result<()> {
        // A fresh memtable: pacing (if still needed) starts from now.
        self.admission.pacer.lock().idle(Instant::now());
        // The log a background thread made ahead (`spare_log.rs`), or one
        // made here. Any failure here stops writes, as a failed WAL append
        // does: the database refuses writes until it is reopened (RocksDB
        // does the same).
        let made = match super::spare_log::take(self, st, log.writer.log_number()) {
            Some(w) => {
                Stats::add(&self.stats.wal_spares_used, 1);
                Ok(w)
            }
            None => {
                let number = st.versions.new_file_number();
                let path = wal_path(&self.dir, number);
                self.opts
                    .create_wal(&path)
                    .and_then(|file| wal::Writer::new_wal(file, number))
            }
        };
        let writer = match made {
            Ok(w) => w,
            Err(e) => {
                self.set_bg_error(st, e.clone());
                return Err(e);
            }
        };
        let number = writer.log_number();
        // The old log, and the new log's directory entry, are synced later,
        // off the write path: before the next `sync` write is acknowledged
        // (see `Logs`, `dir_unsynced`). A 64 MiB fdatasync here
        // would stall every writer.
        let mem = Arc::new(super::family::new_memtable(
            number,
            &fam.opts,
            &self.opts,
            &self.chunks,
        ));
        let Some(Some(slot)) = log.mems.get_mut(fam.index()) else {
            // The keyspace was dropped; the log stays as the next spare.
            st.spare_log = super::spare_log::Spare::Ready(writer);
            return Err(super::keyspace::dropped(fam));
        };
        let old = std::mem::replace(slot, mem.clone());
        let old_writer = std::mem::replace(&mut log.writer, writer);
        log.dir_unsynced = true;
        // Every record of the old log is published (a switch runs before
        // the leader's append).
        self.logs
            .retire(old_writer, self.last_seq.load(Ordering::Acquire));
        let tree = st.tree_mut(fam);
        tree.mem = mem;
        tree.imm.push(old);
        // The replaced super-version holds only what the new one holds too
        // (the switched memtable is in `imm`): dropping it frees nothing.
        drop(self.install_super_version(fam, st));
        self.bg_cv.notify_all();
        Ok(())
    }

    /// [`switch_one`](Self::switch_one), then, while the logs kept for
    /// flushes pass [`RETAINED_LOGS`] per keyspace, the switch of the
    /// keyspace whose memtable is the oldest (a keyspace written rarely
    /// would otherwise keep every later log: RocksDB's
    /// `max_total_wal_size`). One with an empty memtable needs no switch:
    /// the next flush moves its log number (`flush.rs`).
    fn switch_memtable(
        &self,
        fam: &super::Family,
        st: &mut parking_lot::MutexGuard<'_, State>,
        log: &mut super::LogState,
    ) -> Result<()> {
        self.switch_one(fam, st, log)?;
        let fams = self.live_families();
        if fams.len() < 2 || self.logs.retired_count() <= RETAINED_LOGS * fams.len() {
            return Ok(());
        }
        let oldest = fams
            .iter()
            .filter(|f| f.id != fam.id && !f.is_dropped())
            .filter(|f| {
                let t = st.tree(f);
                !t.mem.is_empty() && !t.slots_full(&f.opts)
            })
            .min_by_key(|f| st.tree(f).mem.log_number());
        match oldest {
            Some(f) if st.tree(f).mem.log_number() < log.writer.log_number() => {
                Stats::add(&self.stats.wal_forced_switches, 1);
                self.switch_one(f, st, log)
            }
            _ => Ok(()),
        }
    }
}
