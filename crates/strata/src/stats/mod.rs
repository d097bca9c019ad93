//! Engine statistics: counters updated with relaxed atomics on
//! the hot paths, read as a consistent-enough [`StatsSnapshot`].

mod counters;
mod snapshot;
mod store;
mod striped;

pub use counters::{Stats, StatsSnapshot};
pub use snapshot::{LevelStats, MemoryStats, RowStats};
pub use store::{EngineStats, KvellStats, StoreStats};
pub use striped::Striped;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Maximum number of levels tracked per level.
pub const MAX_LEVELS: usize = 32;

impl Stats {
    #[inline]
    pub fn add(counter: &AtomicU64, v: u64) {
        counter.fetch_add(v, Relaxed);
    }
}

/// Bytes as MiB, for the reports.
fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}
