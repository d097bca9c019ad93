//! The memory budget: how much memory one database's own structures may
//! hold, split into shares, and how much of the page cache is left for
//! its tables.
//!
//! `Options::memory_budget` is resolved once at open (−1, the default: half
//! of the memory this process may use, that is its cgroup's limit where
//! one is set and lower than the machine's memory, otherwise the machine's
//! memory). Half, because the other half is the page cache the tables are
//! read through (mapped or with `pread`) and the application's own memory:
//! an engine that takes all of a container's memory for its caches leaves
//! the kernel nothing to cache the files in and the host nothing to run.
//!
//! The budget is split into shares, each bounding what it sizes:
//! - memtables, half of it: the `max_write_buffer_number` memtables, each
//!   with a 1 MiB arena chunk of slack, and the chunks of a flushed one
//!   kept for the next (a whole write buffer where the share has room for
//!   it, otherwise an eighth of one: larger memtables are worth more than
//!   chunks kept ahead); a larger `write_buffer_size` is lowered at open.
//!   Writers wait on a full set of memtables, as they always do, so the
//!   share is not passed. Each keyspace's write buffer is lowered alike;
//!   together, the keyspaces' memtables are kept within the share by the
//!   write path (`Inner::fit_memtables`). Both it and `stats` count a
//!   memtable's arena chunks whole (`MemTable::memory_held`): a shard's
//!   last chunk is partly used, so a memtable of many small shards holds
//!   more than its entries' bytes.
//! - the block cache, a quarter: a larger `block_cache_size` is lowered.
//! - pinned index and filter blocks and the table cache, a quarter: reported
//!   in `stats` (`pinned_index_filter_bytes`) against this share.
//!
//! The rest of the memory the process may use (`page_cache_room`) is what
//! the tables can count on staying in the page cache. While the live
//! tables fit in it, tables are memory-mapped and may be warmed whole;
//! once they outgrow it, they are read with pread through the block
//! cache, advised random, and none is warmed. With `Options::direct_reads`
//! their point reads bypass the page cache and a row cache (the entries
//! point lookups found) takes half the room, whose pages the kernel no
//! longer needs for them; the other half stays for the pages of logs and
//! tables being written and the memory no share counts (see
//! `TableCache::fit`).

pub use crate::io::memory_limit;
use crate::options::Options;

/// Smallest write buffer the budget lowers `write_buffer_size` to.
const MIN_WRITE_BUFFER: usize = 256 << 10;

/// What a write buffer may hold beyond `write_buffer_size`: its arena's
/// partly filled last chunk.
const CHUNK_SLACK: usize = 1 << 20;

/// Smallest block cache the budget lowers `block_cache_size` to.
const MIN_BLOCK_CACHE: usize = 1 << 20;

/// A resolved memory budget and its shares, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryBudget {
    /// The whole budget; 0 when there is none (`memory_budget = 0`).
    pub total: u64,
    /// Share of the memtables and their arena pool.
    pub memtables: u64,
    /// Share of the block cache.
    pub block_cache: u64,
    /// Share of pinned index and filter blocks and the table cache.
    pub pins: u64,
    /// Bytes of tables the page cache can be expected to hold: the memory
    /// the process may use less the budget (`u64::MAX` when unknown).
    pub page_cache_room: u64,
}

impl MemoryBudget {
    /// Resolves `opts.memory_budget` against the memory this process may
    /// use (`limit`, `None` when unknown).
    pub fn resolve(opts: &Options, limit: Option<u64>) -> MemoryBudget {
        let total = match u64::try_from(opts.memory_budget) {
            Ok(n) => n,
            // −1: half of what the process may use, or none when unknown.
            Err(_) => limit.map_or(0, |m| m / 2),
        };
        let page_cache_room = match limit {
            // With no budget, the engine may take any of it: count on half.
            Some(m) if total == 0 => m / 2,
            Some(m) => m.saturating_sub(total).max(m / 4),
            None => u64::MAX,
        };
        if total == 0 {
            return MemoryBudget {
                page_cache_room,
                ..MemoryBudget::default()
            };
        }
        MemoryBudget {
            total,
            memtables: total / 2,
            block_cache: total / 4,
            pins: total - total / 2 - total / 4,
            page_cache_room,
        }
    }

    /// The budget for `opts` on this machine.
    pub fn for_options(opts: &Options) -> MemoryBudget {
        Self::resolve(opts, memory_limit())
    }

    /// The bytes of arena chunks the memtables' pool may keep when the
    /// memtables' share has no room for a whole write buffer of them beside
    /// the memtables (an eighth of `opts.write_buffer_size`, at least one
    /// chunk); `None` where it has (or there is no budget): the pool then
    /// keeps a whole write buffer.
    pub fn chunk_pool_bytes(&self, opts: &Options) -> Option<usize> {
        let whole = (opts.write_buffer_size.saturating_add(CHUNK_SLACK) as u64)
            .saturating_mul(opts.max_write_buffer_number.saturating_add(1) as u64);
        (self.total != 0 && whole > self.memtables)
            .then(|| (opts.write_buffer_size / 8).max(CHUNK_SLACK))
    }

    /// Lowers the sizes in `opts` that would pass their shares: the write
    /// buffer (so that the memtables, their slack and the chunk pool of
    /// [`chunk_pool_bytes`](Self::chunk_pool_bytes) fit the memtables'
    /// share), the block cache and, for KVell, its page cache
    /// (the memtables' share: it has no memtables). A size within its
    /// share is left as it is; nothing is lowered without a budget.
    pub fn apply(&self, opts: &mut Options) {
        if self.total == 0 {
            return;
        }
        let share = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
        if self.chunk_pool_bytes(opts).is_some() {
            // The memtables and the pool's chunks: an eighth of a write
            // buffer, or one chunk where that is less.
            let n = opts.max_write_buffer_number.max(1);
            let m = share(self.memtables);
            let eighth = (m.saturating_mul(8) / (8 * n + 1)).saturating_sub(CHUNK_SLACK);
            let chunk = (m.saturating_sub(CHUNK_SLACK) / n).saturating_sub(CHUNK_SLACK);
            let wb = eighth.min(chunk).max(MIN_WRITE_BUFFER);
            opts.write_buffer_size = opts.write_buffer_size.min(wb);
        }
        let cache = share(self.block_cache).max(MIN_BLOCK_CACHE);
        opts.block_cache_size = opts.block_cache_size.min(cache);
        opts.kvell.page_cache = opts.kvell.page_cache.min(self.memtables);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_default_is_half_of_the_limit_split_in_shares() {
        let b = MemoryBudget::resolve(&Options::default(), Some(128 * MIB));
        assert_eq!(b.total, 64 * MIB);
        assert_eq!(
            (b.memtables, b.block_cache, b.pins),
            (32 * MIB, 16 * MIB, 16 * MIB)
        );
        assert_eq!(b.page_cache_room, 64 * MIB);
    }

    #[test]
    fn sizes_past_their_share_are_lowered_and_others_kept() {
        let mut o = Options::default();
        MemoryBudget::resolve(&o, Some(128 * MIB)).apply(&mut o);
        // Two memtables, each with a chunk of slack, and an eighth of a
        // write buffer of chunks in 32 MiB.
        assert_eq!(o.write_buffer_size as u64, 32 * MIB * 8 / 17 - MIB);
        let b = MemoryBudget::resolve(&o, Some(128 * MIB));
        assert_eq!(b.chunk_pool_bytes(&o), Some(o.write_buffer_size / 8));
        let pool = b.chunk_pool_bytes(&o).unwrap_or(0) as u64;
        assert!(2 * (o.write_buffer_size as u64 + MIB) + pool <= b.memtables);
        assert_eq!(o.block_cache_size as u64, 16 * MIB);
        let mut small = Options::default()
            .write_buffer_size(4 << 20)
            .block_cache_size(8 << 20);
        MemoryBudget::resolve(&small, Some(128 * MIB)).apply(&mut small);
        assert_eq!(
            (small.write_buffer_size, small.block_cache_size),
            (4 << 20, 8 << 20)
        );
        // Room for a whole write buffer of chunks beside the memtables.
        let b = MemoryBudget::resolve(&small, Some(128 * MIB));
        assert_eq!(b.chunk_pool_bytes(&small), None);
    }

    #[test]
    fn a_small_share_keeps_room_for_the_pools_one_chunk() {
        let mut o = Options::default();
        let b = MemoryBudget::resolve(&o, Some(48 * MIB));
        b.apply(&mut o);
        let pool = b.chunk_pool_bytes(&o).unwrap_or(0) as u64;
        assert_eq!(pool, MIB);
        assert!(2 * (o.write_buffer_size as u64 + MIB) + pool <= b.memtables);
    }

    #[test]
    fn no_budget_lowers_nothing() {
        let mut o = Options::default().memory_budget(0);
        let b = MemoryBudget::resolve(&o, Some(64 * MIB));
        assert_eq!(b.total, 0);
        assert_eq!(b.page_cache_room, 32 * MIB);
        b.apply(&mut o);
        assert_eq!(o.write_buffer_size, Options::default().write_buffer_size);
        let unknown = MemoryBudget::resolve(&Options::default(), None);
        assert_eq!((unknown.total, unknown.page_cache_room), (0, u64::MAX));
    }

    #[test]
    fn an_explicit_budget_leaves_at_least_a_quarter_to_the_page_cache() {
        let o = Options::default().memory_budget(100 * MIB as i64);
        let b = MemoryBudget::resolve(&o, Some(128 * MIB));
        assert_eq!(b.total, 100 * MIB);
        assert_eq!(b.page_cache_room, 32 * MIB);
        let mut tiny = Options::default().memory_budget(MIB as i64);
        MemoryBudget::resolve(&tiny, Some(128 * MIB)).apply(&mut tiny);
        assert_eq!(tiny.write_buffer_size, MIN_WRITE_BUFFER);
        assert_eq!(tiny.block_cache_size, MIN_BLOCK_CACHE);
    }

    #[test]
    fn memory_limit_is_known_on_linux() {
        if cfg!(target_os = "linux") {
            let m = memory_limit().expect("Linux has /proc/meminfo");
            assert!(m > 0);
        }
    }
}
