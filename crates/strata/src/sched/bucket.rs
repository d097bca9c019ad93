//! A token bucket in time, shared by the flush pacer (`pacing.rs`) and the
//! level-0 slowdown (`slowdown.rs`): each write group is charged a cost in
//! time and admitted at the bucket's next free instant.

use std::time::{Duration, Instant};

/// The instant up to which write groups are admitted.
#[derive(Debug)]
pub(super) struct TimeBucket {
    /// The next group's turn; in the past when the bucket is empty.
    pub(super) next: Instant,
}

impl TimeBucket {
    /// An empty bucket.
    pub fn new() -> Self {
        TimeBucket {
            next: Instant::now(),
        }
    }

    /// Empties the bucket: the next group's turn is `now`.
    pub fn reset(&mut self, now: Instant) {
        self.next = now;
    }

    /// Charges a group `cost` at `now` and returns how long it waits:
    /// `None` when its turn is less than `min_sleep` away (the cost is
    /// carried over), else at most `max_sleep`. The group's turn starts at
    /// the later of the bucket's and `now`: a writer back later than its
    /// turn gets no credit for the time it was away. The bucket runs at
    /// most `limit` ahead of `now`; cost past that is forgiven.
    pub fn charge(
        &mut self,
        now: Instant,
        cost: Duration,
        limit: Duration,
        min_sleep: Duration,
        max_sleep: Duration,
    ) -> Option<Duration> {
        let start = self.next.max(now);
        self.next = (start + cost).min(now + limit);
        let wait = self.next.saturating_duration_since(now).min(max_sleep);
        (wait >= min_sleep).then_some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_accumulate_up_to_the_limit_and_sleeps_are_clamped() {
        let mut b = TimeBucket::new();
        let t = b.next;
        let ms = Duration::from_millis;
        // Below the least sleep: carried over.
        assert_eq!(b.charge(t, ms(1), ms(100), ms(2), ms(10)), None);
        assert_eq!(b.charge(t, ms(1), ms(100), ms(2), ms(10)), Some(ms(2)));
        // Past the longest sleep: the wait is clamped, the cost kept.
        assert_eq!(b.charge(t, ms(20), ms(100), ms(2), ms(10)), Some(ms(10)));
        assert_eq!(b.next, t + ms(22));
        // Past the limit: forgiven.
        b.charge(t, ms(500), ms(100), ms(2), ms(10));
        assert_eq!(b.next, t + ms(100));
        // Back late: no credit for the time away.
        let late = t + ms(1000);
        assert_eq!(b.charge(late, ms(3), ms(100), ms(2), ms(10)), Some(ms(3)));
        b.reset(late);
        assert_eq!(b.next, late);
    }
}
