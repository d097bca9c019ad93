//! Keyspaces at run time: [`Db::create_keyspace`], [`Db::keyspace`],
//! [`Db::drop_keyspace`], and the [`Keyspace`] handle that reads and
//! writes one of them. Each keyspace is a tree of its own (`family.rs`);
//! all share the WAL, the sequence counter and snapshots, so a
//! [`WriteBatch`] with entries in several keyspaces (`put_in`, ...) is
//! atomic across a crash and one snapshot is one point in time in all.

use super::read::{ReadOptions, Reads, Scan};
use super::{Db, Designs, Family, Inner, SuperVersion, Tree};
use crate::batch::{KeyspaceRef, WriteBatch};
use crate::error::{Error, Result};
use crate::iter::DbIter;
use crate::options::{Options, WriteOptions};
use crate::version::Edit;
use std::ops::RangeBounds;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME: usize = 255;

/// The error of an operation on a dropped keyspace.
pub(crate) fn dropped(fam: &Family) -> Error {
    Error::InvalidArgument(format!("keyspace {:?} was dropped", fam.name))
}

/// A handle on one keyspace of an open database. Cheap to clone; it keeps
/// the database's memory (not its directory lock) until dropped, and its
/// operations return `Closed` once the database is closed and
/// `InvalidArgument` once the keyspace is dropped.
#[derive(Clone)]
pub struct Keyspace {
    inner: Arc<Inner>,
    fam: Arc<Family>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keyspace({:?}, id {})", self.fam.name, self.fam.id)
    }
}

impl KeyspaceRef for Keyspace {
    fn keyspace_id(&self) -> u32 {
        self.fam.id
    }
}

impl Keyspace {
    /// Its name (`default` for the database's own).
    pub fn name(&self) -> &str {
        &self.fam.name
    }

    /// Its id in the database (0: `default`); what its batch entries carry.
    pub fn id(&self) -> u32 {
        self.fam.id
    }

    /// The options of its tree: the database's, with the keyspace's own
    /// over them.
    pub fn options(&self) -> &Options {
        &self.fam.opts
    }

    /// `Closed` or `InvalidArgument` (dropped) when it cannot be used.
    fn check(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.fam.is_dropped() {
            return Err(dropped(&self.fam));
        }
        Ok(())
    }

    fn reads(&self) -> Reads<'_> {
        Reads {
            inner: &self.inner,
            fam: &self.fam,
        }
    }

    /// Stores `value` under `key` in this keyspace.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_in(self, key, value);
        self.write(b)
    }

    /// Removes `key` from this keyspace.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_in(self, key);
        self.write(b)
    }

    /// Deletes every key in `[start, end)` of this keyspace
    /// ([`Db::delete_range`]).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range_in(self, start, end);
        self.write(b)
    }

    /// Merges `operand` into `key` with this keyspace's merge operator
    /// (`NotSupported` without one).
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let mut b = WriteBatch::new();
        b.merge_in(self, key, operand);
        self.write(b)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.check()?;
        self.inner.write(batch, &WriteOptions::default())
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// The value of `key` under `opts` (a snapshot of the database is one
    /// in every keyspace).
    pub fn get_opt(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Vec<u8>>> {
        self.check()?;
        self.reads().get_opt(key.as_ref(), opts)
    }

    /// An unpositioned iterator over this keyspace ([`Db::iter`]).
    pub fn iter(&self, opts: &ReadOptions<'_>) -> Result<DbIter> {
        self.check()?;
        Ok(self.reads().iter(opts))
    }

    /// The entries of this keyspace with keys in `range`, in order.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<Scan> {
        self.scan_opt(range, &ReadOptions::default())
    }

    /// `scan` under `opts`.
    pub fn scan_opt<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        opts: &ReadOptions<'_>,
    ) -> Result<Scan> {
        self.check()?;
        Ok(self.reads().scan_opt(range, opts))
    }

    /// Writes this keyspace's memtable to a table and waits for it
    /// ([`Db::flush`]).
    pub fn flush(&self) -> Result<()> {
        self.check()?;
        self.inner.flush_family(&self.fam)
    }

    /// Compacts this keyspace's tables holding keys in `range`
    /// ([`Db::compact_range`]).
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.check()?;
        self.inner.compact_range_in(&self.fam, range)
    }

    /// A snapshot of the database: one point in time in every keyspace
    /// ([`Db::snapshot`]).
    pub fn snapshot(&self) -> Result<super::Snapshot> {
        self.check()?;
        Ok(super::snapshot::take(&self.inner))
    }

    /// The database's statistics ([`Db::stats`]).
    pub fn db_stats(&self) -> crate::stats::StatsSnapshot {
        self.inner.stats_snapshot()
    }

    /// Waits for the database's background work ([`Db::wait_for_compactions`]).
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.check()?;
        self.inner.wait_for_compactions()
    }

    /// Writes `batch` ([`Db::write`]): its entries of `default` go to this
    /// keyspace, those of other keyspaces where they name.
    pub fn write_batch(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        self.check()?;
        let batch = batch.moved_to(self.fam.id)?;
        self.inner.write(batch, opts)
    }

    /// A sibling keyspace's handle, made with `options` if missing
    /// ([`Db::keyspace`], [`Db::create_keyspace`]).
    pub fn sibling(&self, name: &str, options: &str) -> Result<Keyspace> {
        self.check()?;
        match self.inner.keyspace(name) {
            Some(k) => Ok(k),
            None => self.inner.create_keyspace(name, options),
        }
    }

    /// Drops a keyspace of the database ([`Db::drop_keyspace`]).
    pub fn drop_sibling(&self, name: &str) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.inner.drop_keyspace(name)
    }

    /// The names of the database's live keyspaces.
    pub fn sibling_names(&self) -> Vec<String> {
        self.inner.keyspace_names()
    }

    /// The tables of each of its levels and their bytes, level 0 first.
    pub fn level_shape(&self) -> Vec<(usize, u64)> {
        let sv = self.fam.super_version.load();
        sv.version
            .levels
            .iter()
            .map(|l| (l.len(), l.iter().map(|f| f.size()).sum()))
            .collect()
    }
}

impl Db {
    /// The handle of keyspace `name` (`default` is always there), or
    /// `None` when the database has none of that name.
    pub fn keyspace(&self, name: &str) -> Result<Option<Keyspace>> {
        self.check_open()?;
        Ok(self.inner.keyspace(name))
    }

    /// The names of the live keyspaces, `default` first.
    pub fn keyspace_names(&self) -> Vec<String> {
        self.inner.keyspace_names()
    }

    /// Makes keyspace `name` with `options` (`name=value` pairs, comma
    /// separated, of [`Options::KEYSPACE_OPTIONS`] over the database's) and
    /// returns its handle. The manifest records it (name, options) before
    /// this returns: it is there at every later open, with those options.
    /// `InvalidArgument` for a name that is empty, longer than
    /// [`MAX_KEYSPACE_NAME`] or taken, or for options a keyspace may not
    /// set.
    pub fn create_keyspace(&self, name: &str, options: &str) -> Result<Keyspace> {
        self.check_open()?;
        self.inner.create_keyspace(name, options)
    }

    /// Drops keyspace `name`: its data is gone for every reader (its
    /// handles return `InvalidArgument`), the manifest records the drop
    /// durably before this returns, and its tables and rows are deleted
    /// once no reader holds them (an open after a crash deletes what is
    /// left). Writes to it queued before the call are committed first.
    /// `InvalidArgument` for `default` or a name no live keyspace has.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.check_open()?;
        self.inner.drop_keyspace(name)
    }
}

impl Inner {
    /// The handle of keyspace `name` (`default` is always there), or
    /// `None` when the database has none of that name.
    pub(crate) fn keyspace(self: &Arc<Self>, name: &str) -> Option<Keyspace> {
        let fam = self.live_families().into_iter().find(|f| f.name == name);
        fam.map(|fam| Keyspace {
            inner: self.clone(),
            fam,
        })
    }

    /// The names of the live keyspaces, `default` first.
    pub(crate) fn keyspace_names(&self) -> Vec<String> {
        self.live_families()
            .iter()
            .map(|f| f.name.clone())
            .collect()
    }

    /// Makes keyspace `name` with `options` (`name=value` pairs, comma
    /// separated, of [`Options::KEYSPACE_OPTIONS`] over the database's) and
    /// returns its handle. The manifest records it (name, options) before
    /// this returns: it is there at every later open, with those options.
    /// `InvalidArgument` for a name that is empty, longer than
    /// [`MAX_KEYSPACE_NAME`] or taken, or for options a keyspace may not
    /// set.
    pub(crate) fn create_keyspace(self: &Arc<Self>, name: &str, options: &str) -> Result<Keyspace> {
        let inner = self;
        if name.is_empty() || name.len() > MAX_KEYSPACE_NAME {
            return Err(Error::InvalidArgument(format!(
                "a keyspace name has 1 to {MAX_KEYSPACE_NAME} bytes, not {}",
                name.len()
            )));
        }
        let mut opts = inner.opts.for_keyspace(options)?;
        // Its own write buffer fits the memtables' share, as `default`'s.
        inner.budget.apply(&mut opts);
        let designs = Designs::resolve(&mut opts);
        let _one = inner.keyspace_ops.lock();
        if inner.live_families().iter().any(|f| f.name == name) {
            return Err(Error::InvalidArgument(format!("keyspace {name:?} exists")));
        }
        let st = inner.state.lock();
        st.check_usable()?;
        let id = st.versions.next_family_id();
        if id > crate::batch::MAX_KEYSPACE {
            return Err(Error::InvalidArgument(
                "every keyspace id was used (drop and reopen to reuse none; ids are not reused)"
                    .into(),
            ));
        }
        // Its writes go into logs from the active one on: its first
        // memtable starts there (a switch meanwhile only makes it start
        // before its first write's log, which replays more, never less).
        let first_log = st.active_log();
        let mem = Arc::new(super::family::new_memtable(
            first_log,
            &opts,
            &inner.opts,
            &inner.chunks,
        ));
        // Its time to live: it holds no version yet.
        let expiry = (opts.ttl_secs > 0).then(|| {
            super::ttl::Expiry::new(
                opts.ttl_secs,
                opts.clock.clone(),
                Vec::new(),
                inner.last_seq.load(Ordering::Acquire),
            )
        });
        let fam = Arc::new(Family::new(
            id,
            name,
            opts,
            designs,
            expiry,
            SuperVersion {
                mem: mem.clone(),
                imm: Vec::new(),
                version: Arc::new(crate::version::Version::new(inner.opts.num_levels)),
            },
        ));
        let mut edit = Edit {
            created: Some((name.to_string(), options.trim().to_string())),
            log_number: Some(first_log),
            ..Edit::default()
        };
        let (mut st, applied) = inner.log_and_apply(&fam, st, &mut edit);
        if let Err(e) = applied {
            // The manifest may be one `CURRENT` no longer names (a new one
            // is started here): nothing more may be written to it.
            inner.set_bg_error(&mut st, e.clone());
            return Err(e);
        }
        drop(st);
        let mut log = inner.logs.active.lock();
        let at = fam.index();
        super::family::set_slot(&mut log.mems, at, mem.clone());
        let mut st = inner.state.lock();
        super::family::set_slot(&mut st.trees, at, Tree::new(mem));
        drop(inner.install_super_version(&fam, &mut st));
        super::family::set_slot(&mut inner.families.write(), at, fam.clone());
        drop(st);
        drop(log);
        Ok(Keyspace {
            inner: inner.clone(),
            fam,
        })
    }

    /// Drops keyspace `name`: its data is gone for every reader (its
    /// handles return `InvalidArgument`), the manifest records the drop
    /// durably before this returns, and its tables and rows are deleted
    /// once no reader holds them (an open after a crash deletes what is
    /// left). Writes to it queued before the call are committed first.
    /// `InvalidArgument` for `default` or a name no live keyspace has.
    pub(crate) fn drop_keyspace(&self, name: &str) -> Result<()> {
        let inner = self;
        if name == "default" {
            return Err(Error::InvalidArgument(
                "the default keyspace cannot be dropped".into(),
            ));
        }
        let _one = inner.keyspace_ops.lock();
        let Some(fam) = inner.live_families().into_iter().find(|f| f.name == name) else {
            return Err(Error::InvalidArgument(format!("no keyspace {name:?}")));
        };
        // New writes to it fail from here on, background work leaves it,
        // and the writes queued before this pass (the commit queue is in
        // order).
        fam.dropped.store(true, Ordering::Release);
        let undo = |e: Error| {
            fam.dropped.store(false, Ordering::Release);
            e
        };
        inner.submit(WriteBatch::new(), false, None).map_err(undo)?;
        let mut st = inner.state.lock();
        loop {
            st.check_usable().map_err(undo)?;
            let t = st.tree(&fam);
            if !t.flushing && t.in_flight.is_empty() {
                break;
            }
            inner.done_cv.wait_for(&mut st, Duration::from_millis(50));
        }
        // Its records in the logs below the others' smallest log number
        // are in no table: the last sequence covers them (see `flush.rs`).
        let oldest = st
            .versions
            .families()
            .iter()
            .filter(|r| r.id != fam.id)
            .map(|r| r.log_number)
            .min()
            .unwrap_or(0);
        let mut edit = Edit {
            dropped: true,
            last_sequence: Some(inner.logs.sealed_below(oldest)),
            ..Edit::default()
        };
        let (mut st, applied) = inner.log_and_apply(&fam, st, &mut edit);
        if let Err(e) = applied {
            // As in `create_keyspace`: the manifest may be unnamed now.
            inner.set_bg_error(&mut st, e.clone());
            return Err(e);
        }
        drop(st);
        // Its memtable leaves the leader's list (a write validated before
        // the drop and queued after it may have reached it meanwhile: the
        // replay of its log leaves out a dropped keyspace's entries).
        let mut log = inner.logs.active.lock();
        let mut st = inner.state.lock();
        if let Some(slot) = log.mems.get_mut(fam.index()) {
            *slot = None;
        }
        let tree = st.trees.get_mut(fam.index()).and_then(Option::take);
        if let Some(slot) = inner.families.write().get_mut(fam.index()) {
            *slot = None;
        }
        drop(st);
        drop(log);
        // Its memtables and version go with the last reader; a handle kept
        // past the drop holds an empty view.
        let empty = SuperVersion {
            mem: Arc::new(crate::memtable::MemTable::with_options(0, &fam.opts)),
            imm: Vec::new(),
            version: Arc::new(crate::version::Version::new(inner.opts.num_levels)),
        };
        drop(fam.super_version.swap(Arc::new(empty)));
        drop(tree);
        inner.bg_cv.notify_all();
        Ok(())
    }

    /// The live keyspace `id`; `InvalidArgument` if it has none (dropped).
    pub(crate) fn live_family(&self, id: u32) -> Result<Arc<Family>> {
        match self.families.read().get(id as usize) {
            Some(Some(f)) if !f.is_dropped() => Ok(f.clone()),
            _ => Err(Error::InvalidArgument(format!(
                "keyspace id {id} is not a live keyspace of this database"
            ))),
        }
    }

    /// Checks that every entry of `batch` names a live keyspace whose
    /// options allow it (a merge needs the keyspace's merge operator).
    pub(crate) fn check_keyspaces(&self, batch: &WriteBatch) -> Result<()> {
        let families = self.families.read();
        for e in batch.iter() {
            let e = e?;
            let fam = match families.get(e.keyspace as usize) {
                Some(Some(f)) if !f.is_dropped() => f,
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "write batch entry for keyspace id {}, which is not a live keyspace",
                        e.keyspace
                    )))
                }
            };
            if e.kind == crate::types::ValueKind::Merge && fam.opts.merge_operator.get().is_none() {
                return Err(Error::NotSupported(format!(
                    "a merge into keyspace {:?} needs a merge_operator (none is set)",
                    fam.name
                )));
            }
        }
        Ok(())
    }
}
