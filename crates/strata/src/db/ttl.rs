//! Time to live (`Options::ttl_secs`): which versions have expired.
//!
//! Entries carry no time. Instead the database keeps *write times*:
//! pairs (sequence, ms), both ascending, each saying that every version at
//! or below the sequence was written by then. A write notes (its last
//! sequence, now) as it is published; notes less than a bucket (1/512 of
//! the ttl) after the bucket's first start no new pair but move the last
//! one up, so a version's time is late by less than a bucket, never early
//! (past 4,096 pairs, neighbours merge: later still).
//! At time `now` the *horizon* is the sequence of the newest pair written
//! by `now - ttl`: every version at or below it has expired, for every
//! reader at every snapshot. Pairs older than the horizon's are dropped.
//!
//! Each flush records the list in its version edit (`Edit::write_times`),
//! and so does `close`, so the times of everything in tables and logs
//! survive a restart. Versions replayed from the logs after the last
//! recorded pair (a crash) count as written when the database opened; a
//! recorded pair past the last version recovered (unsynced writes lost)
//! is lowered to it. A clock that steps back holds expiry where it was
//! (times never run backwards within the list, and the horizon never
//! falls), never forward.

use crate::clock::Clock;
use crate::types::SeqNo;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Buckets per ttl: the precision of a version's time.
const BUCKETS: u64 = 512;
/// Most pairs kept (each open adds one): past it, neighbours merge, the
/// later of two kept, which only makes times later.
const MAX_PAIRS: usize = 4096;

/// The expiry state of a database with a ttl.
pub(crate) struct Expiry {
    ttl_ms: u64,
    bucket_ms: u64,
    clock: Arc<dyn Clock>,
    times: Mutex<Times>,
    /// The horizon as last computed, and the clock reading (ms) before
    /// which it cannot change: reads take it from here without the lock
    /// (`valid_until` 0: not known). Stored under `times`, horizon first.
    cached: AtomicU64,
    valid_until: AtomicU64,
}

struct Times {
    /// (sequence, ms), both ascending.
    pairs: Vec<(SeqNo, u64)>,
    /// When the last pair's bucket began; `None`: the last pair is not
    /// open to more notes (it was recorded before the open).
    bucket_start: Option<u64>,
    /// The highest horizon returned so far: the horizon never moves back
    /// in one process, even when the clock does.
    floor: SeqNo,
}

impl Expiry {
    /// The expiry of `ttl_secs` (> 0) by `clock`, from the write times a
    /// manifest recorded, with every version up to `last_seq` written by
    /// now at the latest.
    pub(crate) fn new(
        ttl_secs: u64,
        clock: Arc<dyn Clock>,
        recorded: Vec<(SeqNo, u64)>,
        last_seq: SeqNo,
    ) -> Expiry {
        let ttl_ms = ttl_secs.saturating_mul(1000);
        let e = Expiry {
            ttl_ms,
            bucket_ms: (ttl_ms / BUCKETS).max(1),
            clock,
            times: Mutex::new(Times {
                pairs: recorded,
                bucket_start: None,
                floor: 0,
            }),
            cached: AtomicU64::new(0),
            valid_until: AtomicU64::new(0),
        };
        {
            let mut t = e.times.lock();
            t.pairs = lowered(&t.pairs, last_seq);
            // A new bucket: the replayed versions are not pooled with
            // what was recorded before the restart.
            let now = e.now(&t);
            if t.pairs.last().is_none_or(|p| p.0 < last_seq) {
                t.pairs.push((last_seq, now));
                t.bucket_start = Some(now);
                if t.pairs.len() > MAX_PAIRS {
                    coarsen(&mut t.pairs);
                }
            }
        }
        e
    }

    /// The clock, never behind the newest pair.
    fn now(&self, t: &Times) -> u64 {
        let now = self.clock.now_ms();
        t.pairs.last().map_or(now, |p| now.max(p.1))
    }

    /// Notes that every version up to `seq` was written by now.
    pub(crate) fn note(&self, seq: SeqNo) {
        let mut t = self.times.lock();
        let now = self.now(&t);
        // A time at or past the published horizon's end (the clock stepped
        // back and forth since): make the next read compute it again.
        if now >= self.valid_until.load(Ordering::Acquire) {
            self.valid_until.store(0, Ordering::Release);
        }
        let open = t
            .bucket_start
            .is_some_and(|start| now < start.saturating_add(self.bucket_ms));
        match t.pairs.last_mut() {
            Some(last) if open => *last = (last.0.max(seq), now),
            _ => {
                t.pairs.push((seq, now));
                t.bucket_start = Some(now);
                if t.pairs.len() > MAX_PAIRS {
                    coarsen(&mut t.pairs);
                }
            }
        }
    }

    /// The newest sequence that has expired now (0: none). Never lower
    /// than an earlier answer (a clock that steps back holds expiry where
    /// it was). Without the lock while the clock is before the moment the
    /// horizon last computed can next change.
    pub(crate) fn horizon(&self) -> SeqNo {
        if self.clock.now_ms() < self.valid_until.load(Ordering::Acquire) {
            return self.cached.load(Ordering::Acquire);
        }
        let mut t = self.times.lock();
        self.advance(&mut t)
    }

    /// Computes the horizon, drops the pairs below its own, and publishes
    /// it with the moment it can next change: when the pair after the
    /// horizon's is a ttl old (a pair noted later is no older than now).
    fn advance(&self, t: &mut Times) -> SeqNo {
        let now = self.now(t);
        let cutoff = now.checked_sub(self.ttl_ms);
        let n = cutoff.map_or(0, |c| t.pairs.partition_point(|p| p.1 <= c));
        if n > 0 {
            t.pairs.drain(..n - 1);
            t.floor = t.floor.max(t.pairs[0].0);
        }
        let next = t.pairs.get(usize::from(n > 0)).map_or(now, |p| p.1);
        self.cached.store(t.floor, Ordering::Release);
        self.valid_until
            .store(next.saturating_add(self.ttl_ms), Ordering::Release);
        t.floor
    }

    /// The write times to record in a flush's edit.
    pub(crate) fn times(&self) -> Vec<(SeqNo, u64)> {
        let mut t = self.times.lock();
        self.advance(&mut t);
        t.pairs.clone()
    }
}

/// `pairs` as a database whose last recovered sequence is `last_seq`
/// must keep them: versions past `last_seq` were lost (unsynced writes),
/// and their sequences will be used again by versions written later, so
/// pairs above it are lowered to it; then made ascending and capped.
/// Recovery records the result (whether or not a ttl is set), so no later
/// open or checkpoint dates a reused sequence by a lost version's time.
pub(crate) fn lowered(pairs: &[(SeqNo, u64)], last_seq: SeqNo) -> Vec<(SeqNo, u64)> {
    let mut out: Vec<(SeqNo, u64)> = pairs.iter().map(|&(s, t)| (s.min(last_seq), t)).collect();
    normalize(&mut out);
    while out.len() > MAX_PAIRS {
        coarsen(&mut out);
    }
    out
}

/// Halves `pairs`, keeping the later pair of each two.
fn coarsen(pairs: &mut Vec<(SeqNo, u64)>) {
    *pairs = pairs.chunks(2).filter_map(|c| c.last().copied()).collect();
}

/// Makes `pairs` ascending in both fields: a pair whose sequence is not
/// above the one before it is merged into it (the later time kept).
fn normalize(pairs: &mut Vec<(SeqNo, u64)>) {
    let mut out: Vec<(SeqNo, u64)> = Vec::with_capacity(pairs.len());
    for &(s, t) in pairs.iter() {
        match out.last_mut() {
            Some(last) if s <= last.0 || t < last.1 => *last = (last.0.max(s), last.1.max(t)),
            _ => out.push((s, t)),
        }
    }
    *pairs = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn expiry(ttl_secs: u64, clock: &Arc<ManualClock>) -> Expiry {
        Expiry::new(ttl_secs, clock.clone(), Vec::new(), 0)
    }

    #[test]
    fn versions_expire_a_ttl_after_their_write_never_before() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let e = expiry(10, &clock);
        e.note(5); // seqs 1..=5 at t0
        clock.advance(4_000);
        e.note(9); // 6..=9 at t0 + 4 s
        clock.advance(5_999);
        assert_eq!(e.horizon(), 0, "9.999 s after the first writes");
        clock.advance(1);
        assert_eq!(e.horizon(), 5);
        clock.advance(3_999);
        assert_eq!(e.horizon(), 5);
        clock.advance(1);
        assert_eq!(e.horizon(), 9);
        // Old pairs are dropped: the horizon's pair is the first.
        assert_eq!(e.times()[0].0, 9);
    }

    /// The horizon read without the lock changes exactly when a version
    /// noted after it was computed expires.
    #[test]
    fn the_published_horizon_moves_when_the_next_version_expires() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let e = expiry(10, &clock);
        e.note(5);
        clock.advance(10_000);
        assert_eq!(e.horizon(), 5, "no later pair: valid for a ttl from now");
        e.note(7);
        clock.advance(9_999);
        assert_eq!(e.horizon(), 5);
        clock.advance(1);
        assert_eq!(e.horizon(), 7);
        clock.advance(100_000);
        assert_eq!(e.horizon(), 7);
        e.note(8);
        clock.advance(9_999);
        assert_eq!(e.horizon(), 7);
        clock.advance(1);
        assert_eq!(e.horizon(), 8);
    }

    /// A clock that steps back never brings expired versions back.
    #[test]
    fn the_horizon_holds_when_the_clock_steps_back() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let e = expiry(10, &clock);
        e.note(5);
        clock.advance(4_000);
        e.note(9);
        clock.advance(6_000);
        assert_eq!(e.horizon(), 5);
        clock.set(1_000_000);
        assert_eq!(e.horizon(), 5, "the clock went back 10 s");
        clock.set(1_014_000);
        assert_eq!(e.horizon(), 9);
    }

    #[test]
    fn a_bucket_pools_writes_and_takes_its_last_time() {
        let clock = Arc::new(ManualClock::new(0));
        let e = expiry(512, &clock); // 1 s buckets
        e.note(1);
        clock.advance(1_000);
        e.note(2); // a new bucket at 1 s
        clock.advance(500);
        e.note(3); // pooled: (3, 1.5 s)
        assert_eq!(e.times(), vec![(1, 0), (3, 1_500)]);
        // Version 2 counts as written at 1.5 s: late, never early.
        clock.advance(512_000 - 1);
        assert_eq!(e.horizon(), 1);
        clock.advance(1);
        assert_eq!(e.horizon(), 3);
    }

    #[test]
    fn recorded_times_survive_and_replayed_versions_count_from_the_open() {
        let clock = Arc::new(ManualClock::new(50_000));
        let e = Expiry::new(10, clock.clone(), vec![(7, 30_000), (12, 45_000)], 20);
        assert_eq!(e.horizon(), 7, "written by 30 s, now 50 s");
        clock.advance(5_000);
        assert_eq!(e.horizon(), 12);
        clock.advance(4_999);
        assert_eq!(e.horizon(), 12);
        clock.advance(1);
        assert_eq!(e.horizon(), 20);
    }

    #[test]
    fn the_list_stays_bounded_and_only_gets_later() {
        let clock = Arc::new(ManualClock::new(0));
        let e = expiry(100_000, &clock);
        for i in 1..=3 * MAX_PAIRS as u64 {
            clock.advance(1_000_000);
            e.note(i);
        }
        let times = e.times();
        assert!(times.len() <= MAX_PAIRS, "{}", times.len());
        // Every pair still dates its sequence no earlier than its write.
        for (s, t) in times {
            assert!(t >= s * 1_000_000, "seq {s} dated {t}");
        }
        let many: Vec<(SeqNo, u64)> = (0..100_000).map(|i| (i, i)).collect();
        assert!(lowered(&many, u64::MAX).len() <= MAX_PAIRS);
    }

    #[test]
    fn times_of_lost_versions_do_not_date_their_successors() {
        // Recorded up to 30, but only 20 survived a crash: 21.. are
        // written again from now on.
        let clock = Arc::new(ManualClock::new(100_000));
        let e = Expiry::new(10, clock.clone(), vec![(10, 50_000), (30, 60_000)], 20);
        assert_eq!(e.horizon(), 20, "everything that survived is old");
        e.note(25);
        clock.advance(9_999);
        assert_eq!(e.horizon(), 20, "25 was written now, not at 60 s");
        clock.advance(1);
        assert_eq!(e.horizon(), 25);
    }
}
