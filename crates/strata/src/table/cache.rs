//! The shared cache of decompressed data blocks.

use super::block::Block;
use quick_cache::sync::Cache;
use quick_cache::Weighter;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `(table_id, block_offset)`.
type Key = (u64, u64);

#[derive(Debug, Clone, Copy, Default)]
struct BlockWeighter;

impl Weighter<Key, Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &Key, val: &Arc<Block>) -> u64 {
        val.charge().max(1) as u64
    }
}

/// A byte-bounded cache of decompressed data blocks shared by all tables,
/// keyed by `(table_id, block_offset)`. Capacity 0 disables caching.
pub struct BlockCache {
    cache: Option<Cache<Key, Arc<Block>, BlockWeighter>>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    pub fn new(capacity_bytes: usize) -> Self {
        let cache = (capacity_bytes > 0).then(|| {
            let est_items = (capacity_bytes / 4096).max(16);
            Cache::with_weighter(est_items, capacity_bytes as u64, BlockWeighter)
        });
        BlockCache {
            cache,
            capacity: capacity_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that did not (including every lookup when disabled).
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Bytes currently charged to the cache.
    pub fn usage(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.weight())
    }

    /// Configured capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn get(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self.cache.as_ref().and_then(|c| c.get(&(table_id, offset)));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// True when the block is cached; counts as neither a hit nor a miss
    /// and leaves the block's recency as it was.
    pub(crate) fn contains(&self, table_id: u64, offset: u64) -> bool {
        self.cache
            .as_ref()
            .is_some_and(|c| c.contains_key(&(table_id, offset)))
    }

    pub(crate) fn insert(&self, table_id: u64, offset: u64, block: Arc<Block>) {
        if let Some(c) = &self.cache {
            c.insert((table_id, offset), block);
        }
    }
}

impl fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}
