//! The write slowdown: while level 0 asks writers to slow down (or the
//! compaction debt passed its soft limit), write groups are admitted at
//! the rate compactions have lately drained level 0, less a margin, so
//! that level 0 stops growing and writers keep a rate instead of idling a
//! core. LevelDB delays each write 1 ms instead, about 1 MB/s with 1 KiB
//! values, which leaves the writer's core idle while a single compaction
//! runs on the other; RocksDB holds writers to a delayed-write rate of
//! 16 MiB/s unless told otherwise.
//!
//! The drain rate is measured: each finished compaction out of level 0
//! reports the level-0 bytes it took and when it started; the time it is
//! charged is the time since the previous one ended (level 0's
//! compactions take turns with the deeper levels' on the same threads),
//! but no less than its own running time (two keyspaces' merges may end
//! together) and at most twice it (a level 0 left idle is not slow to
//! drain). Recent drains are averaged. Before the first, the rate is
//! [`DEFAULT_RATE`]. One bucket serves every keyspace, and the rate is
//! level 0's even when the slowdown was asked for by compaction debt in
//! deeper levels.
//!
//! Like the flush pacer (`pacing.rs`) it is a token bucket in time: each
//! group costs `bytes ÷ allowed rate`; a writer sleeps once its group's
//! turn is at least [`MIN_SLEEP`] away, at most [`MAX_SLEEP`] at a time.
//! A group's whole cost stays in the bucket, which may run up to
//! [`MAX_DEBT`] ahead: a large batch is paid for by the groups after it.
//! A writer away longer than its turn gets no credit, so a slowdown that
//! begins after a calm spell longer than the debt left (at most
//! [`MAX_DEBT`]) starts with an empty bucket.

use std::time::{Duration, Instant};

use super::bucket::TimeBucket;

/// The rate before any drain was measured (RocksDB's default
/// delayed-write rate).
pub const DEFAULT_RATE: f64 = 16.0 * 1048576.0;
/// The slowest rate writers are held to, whatever the drains measured.
pub const MIN_RATE: f64 = 1048576.0;
/// Writers are admitted at this share of the drain rate: level 0 then
/// shrinks back below the trigger instead of hovering at it.
pub const DRAIN_SHARE: f64 = 0.8;
/// Sleeps shorter than this are carried over to the next group: the
/// longer it is, the fewer groups sleep (why 1 ms and not 200 µs:
/// docs/design/2026-12-01-write-slowdown.md).
pub const MIN_SLEEP: Duration = Duration::from_millis(1);
/// The longest one group sleeps: the writer then rechecks whether writes
/// are still slowed (or stopped) and whether its memtable is full.
pub const MAX_SLEEP: Duration = Duration::from_millis(100);
/// The furthest the bucket runs ahead of now: cost past it (a batch of
/// more than a second's worth of bytes) is forgiven.
pub const MAX_DEBT: Duration = Duration::from_secs(1);
/// A drain is charged at most this many times its own running time.
const MAX_CHARGE: u32 = 2;

/// Slowdown state, behind its own mutex (`Inner::admission.slowdown`).
#[derive(Debug)]
pub(crate) struct Slowdown {
    /// Level-0 bytes per second of recent drains, a moving average; 0
    /// before the first.
    drain_rate: f64,
    /// When the last drain of level 0 ended.
    last_drain: Option<Instant>,
    /// Write groups are admitted up to its instant.
    bucket: TimeBucket,
}

impl Slowdown {
    pub fn new() -> Self {
        Slowdown {
            drain_rate: 0.0,
            last_drain: None,
            bucket: TimeBucket::new(),
        }
    }

    /// A compaction that `started` took `bytes` out of level 0 and ended
    /// at `now`.
    pub fn drained(&mut self, now: Instant, started: Instant, bytes: u64) {
        let own = now.saturating_duration_since(started);
        let since = self
            .last_drain
            .map_or(own, |t| now.saturating_duration_since(t));
        self.last_drain = Some(now);
        let secs = since.clamp(own, own * MAX_CHARGE).as_secs_f64();
        if bytes == 0 || secs <= 0.0 {
            return;
        }
        let rate = bytes as f64 / secs;
        self.drain_rate = if self.drain_rate > 0.0 {
            0.5 * self.drain_rate + 0.5 * rate
        } else {
            rate
        };
    }

    /// The rate slowed writers are admitted at, in bytes per second.
    pub fn allowed_rate(&self) -> f64 {
        if self.drain_rate > 0.0 {
            (self.drain_rate * DRAIN_SHARE).max(MIN_RATE)
        } else {
            DEFAULT_RATE
        }
    }

    /// Charges a slowed group of `bytes` at `now` and returns how long it
    /// waits: `None` when its turn is less than [`MIN_SLEEP`] away (the
    /// cost is carried over), else at most [`MAX_SLEEP`] (the rest is
    /// carried over).
    pub fn delay(&mut self, now: Instant, bytes: usize) -> Option<Duration> {
        // At most MAX_DEBT: finite and small whatever `bytes` is.
        let secs = (bytes as f64 / self.allowed_rate()).min(MAX_DEBT.as_secs_f64());
        let cost = Duration::from_secs_f64(secs);
        self.bucket
            .charge(now, cost, MAX_DEBT, MIN_SLEEP, MAX_SLEEP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(got: f64, want: f64) {
        assert!((got - want).abs() < 1.0, "{got} against {want}");
    }

    #[test]
    fn before_any_drain_writers_get_the_default_rate() {
        let mut s = Slowdown::new();
        assert_eq!(s.allowed_rate(), DEFAULT_RATE);
        let t = Instant::now();
        // 16 MiB/s: a 1 KiB group costs ~61 µs, carried over until the
        // bucket is MIN_SLEEP ahead; that group sleeps.
        let cost = Duration::from_secs_f64(1024.0 / DEFAULT_RATE);
        let free = ((MIN_SLEEP.as_nanos() - 1) / cost.as_nanos()) as usize;
        for _ in 0..free {
            assert_eq!(s.delay(t, 1024), None);
        }
        let d = s.delay(t, 1024).expect("the group past MIN_SLEEP sleeps");
        assert!(d >= MIN_SLEEP && d < MIN_SLEEP + cost, "{d:?}");
    }

    #[test]
    fn the_rate_follows_the_drains() {
        let t = Instant::now();
        let mut s = Slowdown::new();
        // 100 MiB out of level 0 by a compaction of 1 s, the first: 100
        // MiB/s, writers get 80.
        s.drained(t + Duration::from_secs(1), t, 100 << 20);
        assert_close(s.allowed_rate(), 80.0 * 1048576.0);
        // The next drain: 100 MiB by a compaction of 1 s that ended 4 s
        // after the first (deeper levels took the threads in between):
        // charged 2 s, 50 MiB/s; averaged, 75; writers get 60.
        let start = t + Duration::from_secs(4);
        s.drained(t + Duration::from_secs(5), start, 100 << 20);
        assert_close(s.allowed_rate(), 60.0 * 1048576.0);
        // A drain long after the last one is charged twice its own time.
        let mut s = Slowdown::new();
        s.drained(t + Duration::from_secs(1), t, 1 << 20);
        let late = t + Duration::from_secs(1000);
        s.drained(late + Duration::from_secs(1), late, 100 << 20);
        assert_close(
            s.allowed_rate(),
            (0.5 * 1.0 + 0.5 * 50.0) * 1048576.0 * DRAIN_SHARE,
        );
    }

    #[test]
    fn a_slow_drain_keeps_a_floor() {
        let t = Instant::now();
        let mut s = Slowdown::new();
        s.drained(t + Duration::from_secs(10), t, 1024);
        assert_eq!(s.allowed_rate(), MIN_RATE);
        // An empty drain (a plan that dropped nothing) changes nothing.
        let mut s = Slowdown::new();
        s.drained(t + Duration::from_secs(1), t, 0);
        assert_eq!(s.allowed_rate(), DEFAULT_RATE);
    }

    #[test]
    fn groups_are_spread_at_the_allowed_rate() {
        // The bucket starts at `new`'s instant: `t` is not before it.
        let mut s = Slowdown::new();
        let t = Instant::now();
        // 10 MiB in 1 s: 8 MiB/s allowed.
        s.drained(t + Duration::from_secs(1), t, 10 << 20);
        // Groups charged at one instant: after 0.8 MiB the next turn is
        // 100 ms away, the longest sleep.
        let mut admitted = 0usize;
        while s.bucket.next.saturating_duration_since(t) < MAX_SLEEP {
            s.delay(t, 4096);
            admitted += 4096;
        }
        let expected = (8 << 20) / 10;
        assert!(admitted.abs_diff(expected) <= 8192, "{admitted}");
        // A 4 MiB batch costs 0.5 s: it sleeps 100 ms and the rest stays
        // in the bucket, 0.6 s ahead.
        assert_eq!(s.delay(t, 4 << 20), Some(MAX_SLEEP));
        let ahead = s.bucket.next.saturating_duration_since(t);
        assert!(
            ahead.abs_diff(Duration::from_millis(600)) < Duration::from_millis(2),
            "{ahead:?}"
        );
        // So a small group 300 ms later still waits its whole longest
        // sleep: the batch is paid for by the groups after it.
        let later = t + Duration::from_millis(300);
        assert_eq!(s.delay(later, 4096), Some(MAX_SLEEP));
        // A batch of several seconds' bytes leaves at most MAX_DEBT.
        s.delay(later, 1 << 30);
        assert_eq!(s.bucket.next.saturating_duration_since(later), MAX_DEBT);
        // Back after the bucket's turn: no credit for the time away. The
        // bucket starts from now, so 16 KiB (~2 ms) makes a sleep.
        let calm = later + Duration::from_secs(5);
        assert!(s.delay(calm, 16 << 10).is_some());
        assert!(s.bucket.next > calm);
    }

    #[test]
    fn merges_ending_together_are_charged_their_own_time() {
        let t = Instant::now();
        let mut s = Slowdown::new();
        // Two keyspaces' merges of 1 s each, ending 1 ms apart: the second
        // is charged its 1 s, not the 1 ms since the first ended.
        s.drained(t + Duration::from_secs(1), t, 10 << 20);
        let t2 = t + Duration::from_millis(1);
        s.drained(t2 + Duration::from_secs(1), t2, 10 << 20);
        assert_close(s.allowed_rate(), 8.0 * 1048576.0);
    }
}
