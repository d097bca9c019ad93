//! The write path: validation, group commit, WAL, memtable, publication.
//!
//! Writers queue up; the writer at the front becomes the *leader*, takes the
//! queued batches (up to a size limit) as one group, makes room (memtable
//! switch, stalls), appends the group as one WAL record (one `fdatasync` if
//! any member asked for `sync`), inserts it into the memtable, publishes the
//! new last sequence, and hands every member its result. A crash leaves a
//! group entirely in the WAL or not at all, so each batch is atomic.

use super::{Db, Inner, LogState};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::stats::Stats;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest group a leader assembles.
const MAX_GROUP_BYTES: usize = 1 << 20;
/// How long a leader of a synced group waits for the writers of the last
/// synced group to queue up again (see `submit`).
const SYNC_GROUP_WINDOW: Duration = Duration::from_micros(100);

/// How long a writer waiting for a leader watches for its group to end
/// before it sleeps (see `submit`).
const SPIN_LIMIT: Duration = Duration::from_micros(20);
/// Checks of a spin made with a pause instruction before the rest yield
/// the core (to a leader that may share it).
const SPIN_PAUSES: u32 = 64;

/// Spins while `cond()` holds, for at most [`SPIN_LIMIT`]: pause
/// instructions first, then `sched_yield(2)`. Returns whether `cond()`
/// stopped holding. With two writer threads on two cores, a follower that
/// slept on the condition variable for every put would make a wake-up (a
/// system call and a context switch) part of each put
/// (docs/design/2026-11-27-in-memory-tuning-log.md); RocksDB's write
/// thread spins and yields alike before it blocks.
fn spin_while(cond: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    let mut i = 0u32;
    while cond() {
        if i < SPIN_PAUSES {
            std::hint::spin_loop();
            i += 1;
        } else {
            if start.elapsed() >= SPIN_LIMIT {
                return false;
            }
            std::thread::yield_now();
        }
    }
    true
}

struct Pending {
    batch: WriteBatch,
    sync: bool,
    /// Switch this keyspace to a new memtable even if its current one is
    /// not full (flush).
    force_switch: Option<u32>,
    /// Where the leader leaves this writer's result.
    slot: Arc<Slot>,
}

/// A queued writer's result, and where it sleeps until a leader hands it
/// the result or the lead. A leader hands each member of its group the
/// result directly: woken together, the members return without taking the
/// queue's mutex (woken through one condition variable they took it in
/// turn, a chain of wake-ups that cost a group of eight synced writers
/// about as long as its `fdatasync`). One per thread ([`SLOT`]), reused by
/// each of its writes: a thread waits in one write at a time, and `done`
/// is set only after `result` is written. (No `std::thread::Thread` is
/// kept: in a C program's main thread that handle is never freed.)
struct Slot {
    done: AtomicBool,
    result: Mutex<Result<()>>,
    /// A batch the leader handed back uncommitted, and the keyspace whose
    /// stall it waits out before it queues again (see `commit_group`);
    /// `handed_back` says it is there (set before `done`).
    returned: Mutex<Option<(WriteBatch, u32)>>,
    handed_back: AtomicBool,
    /// A wake-up not yet taken: a `wake` before the `sleep` makes the
    /// sleep return at once.
    token: Mutex<bool>,
    cv: Condvar,
}

impl Slot {
    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The result a leader left (call once `is_done`).
    fn take(&self) -> Result<()> {
        std::mem::replace(&mut *self.result.lock(), Ok(()))
    }

    fn finish(&self, result: Result<()>) {
        *self.result.lock() = result;
        self.done.store(true, Ordering::Release);
        self.wake();
    }

    fn wake(&self) {
        *self.token.lock() = true;
        self.cv.notify_one();
    }

    /// Sleeps until woken (at once if a wake-up is pending).
    fn sleep(&self) {
        let mut token = self.token.lock();
        while !*token {
            self.cv.wait(&mut token);
        }
        *token = false;
    }
}

fn new_slot() -> Arc<Slot> {
    Arc::new(Slot {
        done: AtomicBool::new(false),
        result: Mutex::new(Ok(())),
        returned: Mutex::new(None),
        handed_back: AtomicBool::new(false),
        token: Mutex::new(false),
        cv: Condvar::new(),
    })
}

thread_local! {
    static SLOT: Arc<Slot> = new_slot();
}

/// The commit queue: writers waiting for a leader, and how many groups
/// were committed.
#[derive(Default)]
pub(crate) struct Commit {
    pub queue: Mutex<Queue>,
    /// Groups committed so far: writers waiting for a leader watch it
    /// change for a few microseconds before they sleep (`spin_while`).
    pub epoch: AtomicU64,
}

/// Writers waiting for, or being served by, a leader.
#[derive(Default)]
pub(crate) struct Queue {
    pending: VecDeque<Pending>,
    leader_active: bool,
    /// Writers in the last group that synced.
    last_sync_group: usize,
    /// The active leader's group syncs: waiting for it takes an
    /// `fdatasync`, too long to spin for.
    leader_syncs: bool,
}

/// The `force_switch` that switches every keyspace's memtable at one
/// instant (a capture's cut, `Inner::switch_all`).
pub(crate) const SWITCH_ALL: u32 = u32::MAX;

/// The first keyspace `p` writes to (or switches) that has no memtable in
/// `mems` (dropped), if any.
fn missing_keyspace(p: &Pending, mems: &[Option<Arc<MemTable>>]) -> Option<u32> {
    let gone = |id: u32| !matches!(mems.get(id as usize), Some(Some(_)));
    if let Some(f) = p.force_switch.filter(|&f| gone(f)) {
        return Some(f);
    }
    if p.batch.max_keyspace() == 0 {
        return None;
    }
    p.batch
        .iter()
        .flatten()
        .map(|e| e.keyspace)
        .find(|&k| gone(k))
}

/// `p` writes to keyspace `family` (or switches its memtable).
fn writes_to(p: &Pending, family: u32) -> bool {
    if p.force_switch == Some(family) {
        return true;
    }
    if p.batch.max_keyspace() == 0 {
        return family == 0 && !p.batch.is_empty();
    }
    p.batch.iter().flatten().any(|e| e.keyspace == family)
}

impl Db {
    /// Stores `value` under `key`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b, &WriteOptions::default())
    }

    /// Removes `key` (writes a tombstone).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b, &WriteOptions::default())
    }

    /// Deletes every key in `[start, end)` (one range tombstone, whatever
    /// the number of keys): reads at or after it no longer see them, and
    /// compaction drops the versions it hides where no snapshot needs
    /// them. An empty range deletes nothing; `start > end` is
    /// `InvalidArgument`.
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(start, end);
        self.write(b, &WriteOptions::default())
    }

    /// Merges `operand` into `key` ([`WriteBatch::merge`]);
    /// `NotSupported` without a merge operator (`Options::merge_operator`).
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.merge(key, operand);
        self.write(b, &WriteOptions::default())
    }

    /// Applies `batch` atomically: after a crash either all of it is there
    /// or none. A batch with a merge is refused (`NotSupported`) without a
    /// merge operator.
    ///
    /// Entries may go to several keyspaces (`WriteBatch::put_in`, ...):
    /// the batch is one WAL record, all or nothing in every keyspace it
    /// touches. `InvalidArgument` for an entry of a keyspace that is not
    /// live.
    pub fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        self.check_open()?;
        self.inner.write(batch, opts)
    }
}

impl Inner {
    /// [`Db::write`] once the database is known open.
    pub(crate) fn write(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        batch.validate()?;
        if batch.max_keyspace() > 0 {
            self.check_keyspaces(&batch)?;
        } else if batch.has_merges() && self.opts.merge_operator.get().is_none() {
            return Err(crate::Error::NotSupported(
                "a merge needs a merge_operator (none is set)".into(),
            ));
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.submit(batch, opts.sync, None)
    }

    /// Queues `batch` and waits for a leader (perhaps this writer) to
    /// commit it; `force_switch`: also switch that keyspace's memtable
    /// (a flush; it ends its group). A batch the leader hands back because
    /// a keyspace it writes to is stalled waits out the stall here, outside
    /// the queue, and queues again.
    pub(crate) fn submit(
        &self,
        mut batch: WriteBatch,
        sync: bool,
        force_switch: Option<u32>,
    ) -> Result<()> {
        loop {
            match self.submit_once(batch, sync, force_switch)? {
                None => return Ok(()),
                Some((back, family)) => {
                    self.wait_unstalled(family)?;
                    batch = back;
                }
            }
        }
    }

    /// Waits until keyspace `family` can take a memtable switch: a free
    /// memtable slot and no stop. Counted as a stall.
    fn wait_unstalled(&self, family: u32) -> Result<()> {
        let fam = self.live_family(family)?;
        let t = Instant::now();
        Stats::add(&self.stats.stall_count, 1);
        let mut st = self.state.lock();
        loop {
            st.check_usable()?;
            if fam.is_dropped() {
                return Err(super::keyspace::dropped(&fam));
            }
            let tree = st.tree(&fam);
            if !tree.slots_full(&fam.opts) && !tree.hold.stop {
                break;
            }
            self.bg_cv.notify_all();
            self.done_cv.wait_for(&mut st, Duration::from_millis(100));
        }
        Stats::add(&self.stats.stall_micros, t.elapsed().as_micros() as u64);
        Ok(())
    }

    /// One pass of [`submit`](Self::submit): `Some` with the batch handed
    /// back and the stalled keyspace.
    fn submit_once(
        &self,
        batch: WriteBatch,
        sync: bool,
        force_switch: Option<u32>,
    ) -> Result<Option<(WriteBatch, u32)>> {
        // A write from a thread-local destructor, after `SLOT` is gone,
        // gets a slot of its own.
        let slot = SLOT.try_with(Arc::clone).unwrap_or_else(|_| new_slot());
        slot.done.store(false, Ordering::Relaxed);
        let mut q = self.commit.queue.lock();
        q.pending.push_back(Pending {
            batch,
            sync,
            force_switch,
            slot: Arc::clone(&slot),
        });
        let mut spun = false;
        loop {
            if slot.is_done() {
                let returned = if slot.handed_back.swap(false, Ordering::Acquire) {
                    slot.returned.lock().take()
                } else {
                    None
                };
                return slot.take().map(|()| returned);
            }
            if !q.leader_active
                && q.pending
                    .front()
                    .is_some_and(|p| Arc::ptr_eq(&p.slot, &slot))
            {
                break;
            }
            if !spun && !q.leader_syncs {
                // The leader is usually a microsecond or two from done:
                // watch for its group to end before sleeping (a sleep and
                // a wake-up cost more than a whole put). Then look again
                // under the lock.
                spun = true;
                let seen = self.commit.epoch.load(Ordering::Acquire);
                parking_lot::MutexGuard::unlocked(&mut q, || {
                    spin_while(|| {
                        !slot.is_done() && self.commit.epoch.load(Ordering::Acquire) == seen
                    })
                });
                continue;
            }
            // Woken by the leader that ends this writer's group (with the
            // result) or that leaves it at the front of the queue. A
            // wake-up before the sleep makes it return at once, and a stale
            // one only loops.
            parking_lot::MutexGuard::unlocked(&mut q, || slot.sleep());
            spun = false;
        }
        // Leader: take a group.
        q.leader_active = true;
        // A synced group costs one fdatasync whatever its size. When the
        // last one had several writers, they are on their way back (woken,
        // taking the next key): give them a moment to join this group
        // rather than each paying for a sync of its own.
        let want = q.last_sync_group;
        if want > 1 && q.pending.front().is_some_and(|p| p.sync) {
            let deadline = Instant::now() + SYNC_GROUP_WINDOW;
            while q.pending.len() < want && Instant::now() < deadline {
                parking_lot::MutexGuard::unlocked(&mut q, std::thread::yield_now);
            }
        }
        let mut group: Vec<Pending> = Vec::new();
        let mut bytes = 0;
        while let Some(p) = q.pending.front() {
            let size = p.batch.approximate_size();
            if !group.is_empty() && (bytes + size > MAX_GROUP_BYTES || p.force_switch.is_some()) {
                break;
            }
            bytes += size;
            let Some(p) = q.pending.pop_front() else {
                break;
            };
            let stop = p.force_switch.is_some();
            group.push(p);
            if stop {
                break;
            }
        }
        q.leader_syncs = group.iter().any(|p| p.sync);
        drop(q);

        // A panic in the commit (a user's file system, a listener) must not
        // leave the group's writers asleep and `leader_active` set for ever:
        // it becomes the background error (the log may hold part of the
        // group, so nothing may follow it) and every member's answer.
        let mut back: Vec<(Pending, Result<u32>)> = Vec::new();
        let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.commit_group(&mut group, &mut back)
        })) {
            Ok(r) => r,
            Err(p) => {
                let e = crate::error::panicked("a write", p);
                let mut st = self.state.lock();
                self.set_bg_error(&mut st, e.clone());
                drop(st);
                Err(e)
            }
        };

        // Members handed back take their batch back (the leader keeps its
        // own), or their own error; the others get the group's result.
        let mut own_back = Ok(None);
        for (p, family) in back {
            let mine = Arc::ptr_eq(&p.slot, &slot);
            match family {
                Ok(family) if mine => own_back = Ok(Some((p.batch, family))),
                Err(e) if mine => own_back = Err(e),
                Ok(family) => {
                    *p.slot.returned.lock() = Some((p.batch, family));
                    p.slot.handed_back.store(true, Ordering::Release);
                    p.slot.finish(Ok(()));
                }
                Err(e) => p.slot.finish(Err(e)),
            }
        }
        for p in group.iter().filter(|p| !Arc::ptr_eq(&p.slot, &slot)) {
            p.slot.finish(result.clone());
        }
        let mut q = self.commit.queue.lock();
        if group.iter().any(|p| p.sync) {
            q.last_sync_group = group.len();
        }
        q.leader_active = false;
        q.leader_syncs = false;
        let next = q.pending.front().map(|p| Arc::clone(&p.slot));
        self.commit.epoch.fetch_add(1, Ordering::Release);
        drop(q);
        if let Some(wake) = next {
            wake.wake();
        }
        result.and(own_back)
    }

    /// Commits `group`: room in every keyspace it writes to, one WAL
    /// record, the memtables, the new last sequence. Members that write to
    /// a keyspace that is stalled (while the database has more than one)
    /// move to `back` with that keyspace's id, uncommitted, so that the
    /// stall holds back only them; members that write to a keyspace no
    /// longer there move to `back` with their error.
    fn commit_group(
        &self,
        group: &mut Vec<Pending>,
        back: &mut Vec<(Pending, Result<u32>)>,
    ) -> Result<()> {
        let mut log = self.logs.active.lock();
        if group.iter().any(|p| p.force_switch == Some(SWITCH_ALL)) {
            // A capture's cut (`checkpoint.rs`): the members before it in
            // the group commit after it.
            self.switch_all(&mut log)?;
            for p in group.iter_mut() {
                p.force_switch = None;
            }
        }
        if group
            .iter()
            .any(|p| p.batch.max_keyspace() > 0 || p.force_switch.unwrap_or(0) > 0)
        {
            let (keep, gone): (Vec<Pending>, Vec<Pending>) = std::mem::take(group)
                .into_iter()
                .partition(|p| missing_keyspace(p, &log.mems).is_none());
            *group = keep;
            for p in gone {
                let id = missing_keyspace(&p, &log.mems).unwrap_or(0);
                let e = Error::InvalidArgument(format!("keyspace id {id} was dropped"));
                back.push((p, Err(e)));
            }
        }
        let sync = loop {
            if group.is_empty() {
                return Ok(());
            }
            let force_switch = group.iter().find_map(|p| p.force_switch);
            if force_switch.is_none() && group.iter().all(|p| p.batch.is_empty()) {
                // Nothing to write (a barrier): no room to make.
                break false;
            }
            let sync = group.iter().any(|p| p.sync);
            let bytes = group.iter().map(|p| p.batch.approximate_size()).sum();
            self.fit_memtables(&mut log)?;
            let stalled = if group.iter().all(|p| p.batch.max_keyspace() == 0)
                && force_switch.unwrap_or(0) == 0
            {
                // `default` alone: the common case.
                self.make_room(&self.default, &mut log, force_switch.is_some(), bytes)?
            } else {
                self.make_room_in(&mut log, group, force_switch, bytes)?
            };
            let Some(family) = stalled else {
                break sync;
            };
            let (keep, give): (Vec<Pending>, Vec<Pending>) = std::mem::take(group)
                .into_iter()
                .partition(|p| !writes_to(p, family));
            *group = keep;
            if give.is_empty() {
                // Not reached (the stalled keyspace is one the group writes
                // to); never loop on it.
                break group.iter().any(|p| p.sync);
            }
            back.extend(give.into_iter().map(|p| (p, Ok(family))));
        };

        let (first, rest) = match group.as_mut_slice().split_first_mut() {
            Some(x) => x,
            None => return Ok(()),
        };
        let mut merged;
        let batch: &mut WriteBatch = if rest.is_empty() {
            &mut first.batch
        } else {
            merged = first.batch.clone();
            for p in rest.iter() {
                merged.append(&p.batch);
            }
            &mut merged
        };
        if batch.is_empty() {
            return Ok(());
        }
        if sync {
            // Everything before this write must be durable before it is.
            let synced = self.sync_before_current_log(&mut log);
            if let Err(e) = synced {
                let mut st = self.state.lock();
                self.set_bg_error(&mut st, e.clone());
                return Err(e);
            }
        }
        let seq = self.last_seq.load(Ordering::Acquire) + 1;
        if seq + batch.len() as u64 > crate::types::MAX_SEQ {
            return Err(Error::NotSupported(
                "sequence numbers exhausted (2^56 writes)".into(),
            ));
        }
        batch.set_sequence(seq);
        let wal_before = log.writer.len();
        let logged = log.writer.add_record(batch.encoded()).and_then(|()| {
            if sync {
                log.writer.sync_ahead()
            } else {
                log.writer.flush()
            }
        });
        if let Err(e) = logged {
            // The WAL may now hold a partial record: refuse further writes.
            let mut st = self.state.lock();
            self.set_bg_error(&mut st, e.clone());
            return Err(e);
        }
        Stats::add(&self.stats.wal_bytes, log.writer.len() - wal_before);
        Stats::add(&self.stats.write_groups, 1);
        if sync {
            Stats::add(&self.stats.wal_syncs, 1);
        }
        let default = log.mems.first().and_then(Option::as_ref);
        let mut n = 0u64;
        for entry in batch.iter() {
            let e = match entry {
                Ok(e) => e,
                Err(e) => {
                    // Not reached while every member passed `validate`
                    // (and `append` keeps the merge decodable). The record
                    // is in the WAL and part of it in the memtable, under
                    // sequence numbers `last_seq` does not cover: nothing
                    // more may be written.
                    let mut st = self.state.lock();
                    self.set_bg_error(&mut st, e.clone());
                    return Err(e);
                }
            };
            let mem = match e.keyspace {
                0 => default,
                k => log.mems.get(k as usize).and_then(Option::as_ref),
            };
            let Some(mem) = mem else {
                // Not reached: a batch names live keyspaces only (checked
                // in `Db::write`, and a drop waits for the writes queued
                // before it, `keyspace.rs`). As above, nothing more may be
                // written.
                let e = Error::InvalidArgument(format!(
                    "a write to keyspace {} after its drop",
                    e.keyspace
                ));
                let mut st = self.state.lock();
                self.set_bg_error(&mut st, e.clone());
                return Err(e);
            };
            mem.add(seq + n, e.kind, e.key, e.value);
            n += 1;
        }
        self.last_seq.store(seq + n - 1, Ordering::Release);
        // Each keyspace with a ttl written to notes the time of this
        // group's versions.
        if batch.max_keyspace() == 0 {
            if let Some(e) = &self.default.expiry {
                e.note(seq + n - 1);
            }
        } else {
            let families = self.families.read();
            for f in families.iter().flatten() {
                if let Some(e) = &f.expiry {
                    if batch.iter().flatten().any(|x| x.keyspace == f.id) {
                        e.note(seq + n - 1);
                    }
                }
            }
        }
        Stats::add(&self.stats.user_writes, n);
        Stats::add(&self.stats.user_bytes_written, batch.user_bytes());
        Ok(())
    }

    /// [`make_room`](Self::make_room) in every keyspace `group` writes
    /// to (and in `force_switch`'s): the first stalled one, if any.
    fn make_room_in(
        &self,
        log: &mut super::LogState,
        group: &[Pending],
        force_switch: Option<u32>,
        bytes: usize,
    ) -> Result<Option<u32>> {
        let mut touched: Vec<u32> = force_switch.into_iter().collect();
        for p in group {
            if p.batch.max_keyspace() == 0 {
                if !p.batch.is_empty() && !touched.contains(&0) {
                    touched.push(0);
                }
                continue;
            }
            for e in p.batch.iter().flatten() {
                if !touched.contains(&e.keyspace) {
                    touched.push(e.keyspace);
                }
            }
        }
        for id in touched {
            // Present while its memtable is (`commit_group` took out the
            // members of keyspaces that are gone), dropping or not.
            let Some(fam) = self.families.read().get(id as usize).cloned().flatten() else {
                continue;
            };
            if let Some(stalled) = self.make_room(&fam, log, force_switch == Some(id), bytes)? {
                return Ok(Some(stalled));
            }
        }
        Ok(None)
    }
}

impl Inner {
    /// Makes everything before the current log's records durable: the
    /// logs of immutable memtables (`Logs::sync_retired`), then the
    /// directory entry of the current log's file.
    pub(crate) fn sync_before_current_log(&self, log: &mut LogState) -> Result<()> {
        self.logs.sync_retired(&self.stats)?;
        if log.dir_unsynced {
            self.opts.fs.sync_dir(&self.dir)?;
            log.dir_unsynced = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A spin ends as soon as its condition stops holding, and gives up
    /// after its limit when it never does.
    #[test]
    fn spin_while_ends_on_change_or_after_its_limit() {
        let flag = Arc::new(AtomicBool::new(true));
        let f = flag.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_micros(5));
            f.store(false, Ordering::Release);
        });
        let mut changed = false;
        while !changed {
            changed = spin_while(|| flag.load(Ordering::Acquire));
        }
        t.join().expect("join");
        let start = Instant::now();
        assert!(!spin_while(|| true));
        assert!(start.elapsed() >= SPIN_LIMIT);
        assert!(spin_while(|| false));
    }
}
