//! A counter striped over cache lines for hot paths many threads share.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Slots of a [`Striped`] counter (a power of two).
const STRIPES: usize = 4;

/// One slot of a [`Striped`] counter, alone on its cache lines (two: the
/// adjacent-line prefetcher pairs them).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot(AtomicU64);

/// A counter that threads add to on a shared hot path (every point lookup):
/// each thread adds to its own slot, so two readers do not pass one cache
/// line back and forth; a read sums the slots.
#[derive(Debug, Default)]
pub struct Striped([Slot; STRIPES]);

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Relaxed) & (STRIPES - 1);
}

impl Striped {
    #[inline]
    pub fn add(&self, v: u64) {
        // Stripe 0 for a thread whose locals are gone (a destructor).
        let i = STRIPE.try_with(|s| *s).unwrap_or(0) & (STRIPES - 1);
        self.0[i].0.fetch_add(v, Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Relaxed)).sum()
    }
}
