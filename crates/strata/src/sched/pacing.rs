//! Write pacing: while every memtable slot is taken (the next switch would
//! have to wait for a flush), writers are slowed so that the active
//! memtable fills no sooner than the running flush is expected to end.
//! Without it they run at full speed into a full memtable and then stop for
//! the rest of the flush: one put then waits hundreds of milliseconds
//! (RocksDB's delayed-write rate addresses the same cliff).
//!
//! The pacer is a token bucket in time: each write group costs
//! `bytes ÷ allowed rate` seconds, where the allowed rate is the room left
//! in the active memtable ÷ the time the flush still needs. Once the flush
//! has walked [`MIN_PROGRESS`] of its memtable, that time is read from its
//! own progress (the time it ran × the share left ÷ the share done, with a
//! margin); before, it is estimated from the rate of recent flushes (its
//! memtable's bytes ÷ that rate, with a margin, minus the time it has run).
//! A writer sleeps once its group's turn is at least [`MIN_SLEEP`] away,
//! never longer than [`MAX_SLEEP`] per group.

use std::time::{Duration, Instant};

use super::bucket::TimeBucket;

/// Assumed flush rate before the first flush is measured, once that flush
/// has run [`FIRST_FLUSH_GRACE`] without showing its progress.
const DEFAULT_FLUSH_RATE: f64 = 32.0 * 1048576.0;
/// Before any flush was measured, writers are not paced while the running
/// flush is younger than this and has not walked [`MIN_PROGRESS`] of its
/// memtable: the default rate is a guess for slow disks, and on a faster
/// disk it runs up a debt in the flush's first milliseconds that the
/// writers then sleep off once the flush shows its pace, one long put at
/// the first flush of every fresh store (why: docs/design/2026-11-29-code-comment-measurements.md
/// §pacing). Unpaced for this long, writers take at most a few MiB of the
/// active memtable's room.
const FIRST_FLUSH_GRACE: f64 = 0.05;
/// The flush is expected to take this much longer than its estimate.
const MARGIN: f64 = 1.25;
/// Sleeps shorter than this are carried over to the next group: short,
/// frequent sleeps keep the latency tail low. A sleep lasts longer than
/// asked (timer slack and the wake-up), and a load paced only once or
/// twice per run has that one sleep as its slowest put, so the minimum is
/// kept small (why: docs/design/2026-11-29-code-comment-measurements.md §pacing).
pub const MIN_SLEEP: Duration = Duration::from_micros(50);
/// The longest a single write group is delayed by pacing.
pub const MAX_SLEEP: Duration = Duration::from_millis(20);
/// The time left to a flush is never taken as less than this.
const MIN_REMAINING: f64 = 0.005;
/// Flushes smaller than this do not update the flush rate.
const MIN_RATE_SAMPLE: u64 = 1 << 20;
/// The share of its entries a flush has walked before its own progress
/// replaces the estimate from earlier flushes.
const MIN_PROGRESS: f64 = 0.02;
/// The share of a flush its walk over the memtable is taken to be at
/// most (the table's sync and the manifest edit come after it).
const MAX_PROGRESS: f64 = 0.9;
/// A late flush is assumed to need this share of its estimate still.
const LATE_SHARE: f64 = 0.25;

/// Pacing state, behind its own mutex (`Inner::admission.pacer`).
#[derive(Debug)]
pub(crate) struct Pacer {
    /// Bytes per second of recent flushes (memtable bytes ÷ flush time),
    /// a moving average; 0 before the first.
    flush_rate: f64,
    /// When the running flush started.
    flush_started: Option<Instant>,
    /// Write groups are admitted up to its instant.
    bucket: TimeBucket,
}

impl Pacer {
    pub fn new() -> Self {
        Pacer {
            flush_rate: 0.0,
            flush_started: None,
            bucket: TimeBucket::new(),
        }
    }

    pub fn flush_started(&mut self, now: Instant) {
        self.flush_started = Some(now);
    }

    /// A flush of a memtable of `bytes` took `took`.
    /// The backlog of the paced period ends with it.
    pub fn flush_finished(&mut self, now: Instant, bytes: u64, took: Duration) {
        self.flush_started = None;
        self.bucket.reset(now);
        let secs = took.as_secs_f64();
        // A small (forced) flush is mostly fixed cost (syncs, the manifest
        // edit): its rate would say little about a full memtable's.
        if bytes < MIN_RATE_SAMPLE || secs <= 0.0 {
            return;
        }
        let rate = bytes as f64 / secs;
        self.flush_rate = if self.flush_rate > 0.0 {
            0.5 * self.flush_rate + 0.5 * rate
        } else {
            rate
        };
    }

    /// Not behind: the bucket starts empty the next time pacing begins.
    pub fn idle(&mut self, now: Instant) {
        self.bucket.reset(now);
    }

    /// How long a group of `bytes` waits, given the `room` left in the
    /// active memtable, the size of the memtable being (or about to be)
    /// flushed and the share of it the flush has walked (`progress`);
    /// `None` when its turn is less than [`MIN_SLEEP`] away.
    pub fn delay(
        &mut self,
        now: Instant,
        bytes: usize,
        room: usize,
        flushing_bytes: usize,
        progress: f64,
    ) -> Option<Duration> {
        let ran = self
            .flush_started
            .map(|t| now.saturating_duration_since(t).as_secs_f64());
        let remaining = match ran {
            // The flush's own pace: what it did in `ran` tells how long the
            // rest takes.
            Some(ran) if progress >= MIN_PROGRESS => {
                // The walk is not the whole flush: the table's sync and the
                // manifest edit follow, so progress counts at most
                // `MAX_PROGRESS`.
                let done = progress.min(MAX_PROGRESS);
                (ran * (1.0 - done) / done * MARGIN).max(MIN_REMAINING)
            }
            Some(ran) if self.flush_rate <= 0.0 && ran < FIRST_FLUSH_GRACE => {
                self.bucket.reset(now);
                return None;
            }
            ran => {
                let rate = if self.flush_rate > 0.0 {
                    self.flush_rate
                } else {
                    DEFAULT_FLUSH_RATE
                };
                let expected = flushing_bytes as f64 / rate * MARGIN;
                // A flush past its estimate (compactions share the cores
                // and the disk) is given at least a quarter of its estimate
                // again, so writers keep a finite rate instead of running
                // into the stop.
                (expected - ran.unwrap_or(0.0))
                    .max(expected * LATE_SHARE)
                    .max(MIN_REMAINING)
            }
        };
        let allowed = (room as f64 / remaining).max(1.0);
        let cost = Duration::from_secs_f64((bytes as f64 / allowed).min(1.0));
        // A writer back later than its turn (a sleep overshoots it) gets
        // no credit for the lateness: crediting it runs writers into the
        // full memtable more often, with longer stalls (why:
        // docs/design/2026-11-29-code-comment-measurements.md §pacing). The lost
        // overshoot is part of the margin.
        // No group is put off past the flush's expected end: by then the
        // memtable it waits for is free, and a backlog would only carry
        // delays into the next period.
        let limit = Duration::from_secs_f64(remaining);
        self.bucket.charge(now, cost, limit, MIN_SLEEP, MAX_SLEEP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_delay_while_writers_are_slower_than_the_flush_needs() {
        let mut p = Pacer::new();
        let t = Instant::now();
        p.flush_started(t);
        p.flush_finished(t, 64 << 20, Duration::from_millis(500)); // 128 MiB/s
        p.flush_started(t);
        // 60 MiB of room, 64 MiB to flush in ~0.6 s: 100 MiB/s allowed;
        // writers putting 100 bytes every 10 µs (10 MB/s) are never held,
        // and no debt builds up.
        for i in 0..100 {
            let now = t + Duration::from_micros(10 * i);
            assert_eq!(p.delay(now, 100, 60 << 20, 64 << 20, 0.0), None);
            assert!(p.bucket.next.saturating_duration_since(now) < Duration::from_micros(2));
        }
    }

    #[test]
    fn writers_are_spread_over_the_time_the_flush_needs() {
        let mut p = Pacer::new();
        let t = Instant::now();
        p.flush_finished(t, 64 << 20, Duration::from_secs(1)); // 64 MiB/s
        p.flush_started(t);
        // 1 MiB of room, a 64 MiB flush just begun (1.25 s expected): each
        // 64 KiB group may take 1/16 of the time, ~78 ms, capped.
        let d = p.delay(t, 64 << 10, 1 << 20, 64 << 20, 0.0);
        assert_eq!(d, Some(MAX_SLEEP));
        // Groups queue behind one another: the total admitted over the
        // expected flush time is about the room.
        let mut p = Pacer::new();
        p.flush_finished(t, 64 << 20, Duration::from_secs(1));
        p.flush_started(t);
        let mut admitted = 0usize;
        while p.bucket.next.saturating_duration_since(t) < Duration::from_millis(1250) {
            p.delay(t, 4096, 1 << 20, 64 << 20, 0.0);
            admitted += 4096;
        }
        assert!(
            ((1 << 20) - 8192..=(1 << 20) + 8192).contains(&admitted),
            "{admitted}"
        );
    }

    #[test]
    fn a_late_flush_slows_writers_without_stopping_them() {
        let mut p = Pacer::new();
        let t = Instant::now();
        p.flush_finished(t, 64 << 20, Duration::from_secs(1));
        p.flush_started(t);
        // Far past its expected end, with room left: the minimum remaining
        // time keeps the rate finite and each delay bounded.
        let later = t + Duration::from_secs(10);
        let d = p.delay(later, 1 << 20, 1 << 20, 64 << 20, 0.0);
        assert!(d.is_some_and(|d| d <= MAX_SLEEP));
    }

    #[test]
    fn a_flush_that_shows_its_progress_is_trusted_over_the_estimate() {
        let t = Instant::now();
        let now = t + Duration::from_millis(50);
        let group = 16 << 10;
        // No flush measured yet, and this one shows no progress after its
        // grace: the default rate (32 MiB/s) says a 64 MiB flush needs
        // 2.5 s, so 16 MiB of room allows ~6.5 MiB/s and a 16 KiB group
        // waits ~2.4 ms.
        let mut p = Pacer::new();
        p.flush_started(t);
        assert!(p.delay(now, group, 16 << 20, 64 << 20, 0.0).is_some());
        // Within the grace the guess holds nobody back, and no debt is
        // left for the groups after it.
        let mut p = Pacer::new();
        p.flush_started(t);
        let early = t + Duration::from_millis(5);
        for _ in 0..100 {
            assert_eq!(p.delay(early, group, 16 << 20, 64 << 20, 0.0), None);
        }
        assert_eq!(p.bucket.next, early);
        // The same flush has walked half its memtable in 50 ms: ~62 ms are
        // left, 256 MiB/s are allowed, a 4 KiB group (16 µs of it) is not
        // held.
        let mut p = Pacer::new();
        p.flush_started(t);
        assert_eq!(p.delay(now, 4 << 10, 16 << 20, 64 << 20, 0.5), None);
        // A flush that has barely started still uses the estimate.
        let mut p = Pacer::new();
        p.flush_started(t);
        assert!(p.delay(now, group, 16 << 20, 64 << 20, 0.01).is_some());
        // A slow flush (10 % in 500 ms: 5.6 s left) holds writers back
        // even when earlier flushes were fast.
        let mut p = Pacer::new();
        p.flush_finished(t, 64 << 20, Duration::from_millis(100));
        p.flush_started(t);
        let later = t + Duration::from_millis(500);
        assert!(p.delay(later, group, 16 << 20, 64 << 20, 0.1).is_some());
    }

    #[test]
    fn no_backlog_past_the_flush_end() {
        let mut p = Pacer::new();
        let t = Instant::now();
        p.flush_finished(t, 64 << 20, Duration::from_secs(1));
        p.flush_started(t);
        for _ in 0..10_000 {
            p.delay(t, 1 << 20, 1 << 20, 64 << 20, 0.0);
        }
        assert!(p.bucket.next <= t + Duration::from_millis(1250));
        // The flush ends: the next paced period starts with no debt.
        p.flush_finished(t, 64 << 20, Duration::from_secs(1));
        assert_eq!(p.bucket.next, t);
    }

    #[test]
    fn idle_empties_the_bucket() {
        let mut p = Pacer::new();
        let t = Instant::now();
        p.flush_started(t);
        let later = t + Duration::from_millis(100);
        assert!(p.delay(later, 1 << 20, 1 << 20, 64 << 20, 0.0).is_some());
        assert!(p.bucket.next > later);
        p.idle(t);
        assert_eq!(p.bucket.next, t);
        p.flush_finished(t, 0, Duration::ZERO);
        assert_eq!(p.flush_rate, 0.0);
        assert!(p.delay(t, 10, 60 << 20, 1 << 20, 0.0).is_none());
    }
}
