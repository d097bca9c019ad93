//! Keyspaces' trees (RocksDB's column families, fjall's partitions): what
//! each keyspace owns, split from what the database shares.
//!
//! A [`Family`] is fixed once made: its id (0 is `default`, never
//! dropped), name, table options, designs and the super-version readers
//! load. Its changing parts, a [`Tree`] (memtables, flush and compaction
//! bookkeeping, what holds its writers back), live in the database's
//! `State` behind the state mutex, indexed by the family's id. Shared by
//! every family: the WAL, the sequence counter, snapshots, the manifest,
//! the caches, the memory budget and the background threads.

use super::{Designs, Hold, SuperVersion};
use crate::compaction::scheduler::InFlight;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table::TableOptions;
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The id of the `default` keyspace, which every database has.
pub(crate) const DEFAULT_ID: u32 = 0;

/// A keyspace's fixed parts; see the module doc.
pub(crate) struct Family {
    pub id: u32,
    pub name: String,
    /// The options of its tree: the database's with the keyspace's own
    /// (`Options::for_keyspace`) over them, adjusted by its designs.
    pub opts: Options,
    pub table_opts: TableOptions,
    /// The designs its options select (`designs.rs`): level 0's container,
    /// the picker, the tracker and the executor.
    pub designs: Designs,
    /// What its reads load, without a lock.
    pub super_version: ArcSwap<SuperVersion>,
    /// Set by `Db::drop_keyspace` before anything else: writes to it fail,
    /// and no flush or compaction of it starts.
    pub dropped: AtomicBool,
    /// Which of its versions have expired (its `ttl_secs` > 0).
    pub expiry: Option<super::ttl::Expiry>,
}

impl Family {
    /// The family `id` named `name`, with tree options `opts`, the
    /// designs they select and `sv` as its first super-version.
    pub fn new(
        id: u32,
        name: &str,
        opts: Options,
        designs: Designs,
        expiry: Option<super::ttl::Expiry>,
        sv: SuperVersion,
    ) -> Self {
        Family {
            expiry,
            id,
            name: name.to_string(),
            table_opts: TableOptions::from(&opts),
            opts,
            designs,
            super_version: ArcSwap::from_pointee(sv),
            dropped: AtomicBool::new(false),
        }
    }

    /// The newest sequence that has expired in it (`ttl_secs`); 0: none.
    pub fn expired_to(&self) -> crate::types::SeqNo {
        self.expiry.as_ref().map_or(0, super::ttl::Expiry::horizon)
    }

    /// `Db::drop_keyspace` began to drop it.
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// Its index in `State::trees` and in the write leader's memtables.
    pub fn index(&self) -> usize {
        self.id as usize
    }
}

/// A keyspace's changing parts, guarded by the state mutex.
pub(crate) struct Tree {
    /// The memtable writers insert into (the write leader's `LogState`
    /// holds the same one).
    pub mem: Arc<MemTable>,
    /// Immutable memtables waiting for flush, oldest first.
    pub imm: Vec<Arc<MemTable>>,
    pub flushing: bool,
    /// The running compactions: their input tables and output ranges.
    pub in_flight: InFlight,
    /// Bytes by which levels exceed their targets, and what holds writers
    /// back: both computed once per super-version
    /// (`Inner::install_super_version`), for the writers' fast path
    /// (`calm`, `paced`) and for `make_room` alike.
    pub compaction_debt: u64,
    pub hold: Hold,
}

impl Tree {
    /// A tree whose active memtable is `mem` and that has nothing else yet.
    pub fn new(mem: Arc<MemTable>) -> Self {
        Tree {
            mem,
            imm: Vec::new(),
            flushing: false,
            in_flight: InFlight::default(),
            compaction_debt: 0,
            hold: Hold::default(),
        }
    }

    /// Every memtable slot is taken (`max_write_buffer_number`): the next
    /// switch would wait for a flush.
    pub fn slots_full(&self, opts: &Options) -> bool {
        self.imm.len() + 1 >= opts.max_write_buffer_number
    }

    /// No background work of its own is under way or waiting: no
    /// immutable memtable, no flush, no compaction.
    pub fn idle(&self) -> bool {
        self.imm.is_empty() && !self.flushing && self.in_flight.is_empty()
    }
}

/// Puts `x` in slot `at` of a vector indexed by keyspace id, growing it
/// with empty slots as needed.
pub(crate) fn set_slot<T>(v: &mut Vec<Option<T>>, at: usize, x: T) {
    if v.len() <= at {
        v.resize_with(at + 1, || None);
    }
    v[at] = Some(x);
}

/// A new memtable for log `log_number` of a keyspace with tree options
/// `opts`: its arena chunks come from the database's `pool` when its
/// memtables have the database's shape (`db`), else from the allocator.
pub(crate) fn new_memtable(
    log_number: u64,
    opts: &Options,
    db: &Options,
    pool: &Arc<crate::memtable::ChunkPool>,
) -> MemTable {
    let same = opts.write_buffer_size == db.write_buffer_size
        && opts.memtable_shard_size == db.memtable_shard_size;
    MemTable::with_options_in(log_number, opts, same.then(|| pool.clone()))
}
