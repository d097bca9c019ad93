//! Opening a database: lock, load the manifest, replay the WALs, write what
//! they held to L0 tables, start a fresh WAL and manifest, and remove files
//! no version needs.

use super::{Admission, Family, Inner, LogState, Logs, State, Tree};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, wal_path, FileKind, CURRENT, LOCK};
use crate::l0::TableSink;
use crate::memtable::MemTable;
use crate::options::{Options, WalRecovery};
use crate::stats::Stats;
use crate::table::BlockCache;
use crate::types::MAX_SEQ;
use crate::version::{Edit, VersionSet};
use crate::wal;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// What the replay gathers for one keyspace: its record, options and
/// designs (`None`: `default`'s, resolved first), the version the replay
/// writes over, the memtable it fills and the edit its level-0 pieces go
/// into.
struct Replay {
    record: crate::version::FamilyRecord,
    opts: Options,
    designs: Option<super::Designs>,
    version: Arc<crate::version::Version>,
    mem: MemTable,
    edit: Edit,
}

pub(crate) fn open(dir: &Path, mut opts: Options) -> Result<Inner> {
    let designs = super::Designs::resolve(&mut opts);
    let l0 = &designs.l0;
    let budget = crate::budget::MemoryBudget::for_options(&opts);
    budget.apply(&mut opts);
    let fs = opts.fs.clone();
    if !fs.exists(dir) {
        if !opts.create_if_missing {
            return Err(Error::NotFound(dir.to_path_buf()));
        }
        fs.create_dir_all(dir)?;
    }
    if !opts.create_if_missing && !fs.exists(&dir.join(CURRENT)) {
        // Checked before locking so that a wrong path is left untouched.
        return Err(Error::NotFound(dir.to_path_buf()));
    }
    let lock = fs.lock(&dir.join(LOCK))?;
    let cache = Arc::new(BlockCache::new(opts.block_cache_size));
    let mut versions = VersionSet::new(dir, &opts, cache.clone());
    versions.table_cache().set_room(budget.page_cache_room);
    let names = fs.list_dir(dir)?;
    let fast_dir = versions.l0_dir().to_path_buf();
    let fast_lock = l0.claim_dir(&*fs, dir, &fast_dir)?;
    // Row files on the fast tier (when it is another directory).
    let row_names: Vec<String> = if fast_dir != dir && fs.exists(&fast_dir) {
        fs.list_dir(&fast_dir)?
    } else {
        Vec::new()
    };
    if fs.exists(&dir.join(CURRENT)) {
        if opts.error_if_exists {
            return Err(Error::AlreadyExists(dir.to_path_buf()));
        }
        versions.recover()?;
    } else {
        let ours = names.iter().any(|n| {
            matches!(
                filename::parse(n),
                Some((
                    FileKind::Table | FileKind::Wal | FileKind::Manifest | FileKind::Row,
                    _
                ))
            )
        });
        if ours && !interrupted_creation(&*fs, dir, &names)? {
            return Err(Error::corruption(
                dir.join(CURRENT),
                0,
                "database files present but CURRENT is missing",
            ));
        }
        if !opts.create_if_missing {
            return Err(Error::NotFound(dir.to_path_buf()));
        }
    }

    // Every file number on disk is taken, whether the manifest knows it or
    // not: the log created after the replay must never reuse (and truncate)
    // a log that was just replayed but is not yet covered by a manifest.
    for name in &names {
        if let Some((FileKind::Table | FileKind::Wal | FileKind::Manifest | FileKind::Temp, n)) =
            filename::parse(name)
        {
            versions.mark_file_number_used(n);
        }
    }
    for name in names.iter().chain(&row_names) {
        if let Some(n) = filename::parse_row_name(name) {
            versions.mark_file_number_used(n);
        }
    }
    // Every keyspace the manifest records, `default` first, each with its
    // options and designs and what its replay gathers.
    let records = versions.families();
    let slots = records.last().map_or(1, |r| r.id as usize + 1);
    let mut replays: Vec<Option<Replay>> = (0..slots).map(|_| None).collect();
    for r in records {
        let (fam_opts, fam_designs) = if r.id == 0 {
            (opts.clone(), None)
        } else {
            let mut o = opts.for_keyspace(&r.options).map_err(|e| {
                Error::InvalidArgument(format!(
                    "keyspace {:?}'s options ({:?}) do not fit the options the database is \
                     opened with: {e}",
                    r.name, r.options
                ))
            })?;
            budget.apply(&mut o);
            let d = super::Designs::resolve(&mut o);
            (o, Some(d))
        };
        let version = versions.current(r.id);
        fam_designs
            .as_ref()
            .map_or(&designs.l0, |d| &d.l0)
            .check_open(&*version)?;
        if let Some(slot) = replays.get_mut(r.id as usize) {
            *slot = Some(Replay {
                mem: MemTable::with_options(0, &fam_opts),
                edit: Edit {
                    family: r.id,
                    ..Edit::default()
                },
                record: r,
                opts: fam_opts,
                designs: fam_designs,
                version,
            });
        }
    }

    // Replay every WAL the manifest does not cover, oldest first.
    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| match filename::parse(n) {
            Some((FileKind::Wal, n)) if n >= versions.log_number() => Some(n),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    let mut max_seq = versions.last_sequence;
    // Recovered data goes straight to level 0 (tables or rows). A
    // tombstone must stay while a piece written earlier in this replay may
    // hold an older version.
    let write_out = |r: &mut Replay, versions: &mut VersionSet| -> Result<()> {
        let l0 = r.designs.as_ref().map_or(&designs.l0, |d| &d.l0);
        let sink = TableSink {
            dir,
            fs: fs.clone(),
            table_opts: crate::table::TableOptions::from(&r.opts),
            collect_keys: false,
            drop_tombstones: false,
            // No folding with a ttl (see `Inner::rules`).
            rules: crate::runs::rules::Rules {
                merge: match r.opts.ttl_secs {
                    0 => r.opts.merge_operator.get().cloned(),
                    _ => None,
                },
                ..Default::default()
            },
        };
        let mut next = || Ok(versions.new_file_number());
        let written = l0.write(&sink, &r.mem, &*r.version, &r.edit, Vec::new(), &mut next)?;
        l0.record(&written, &mut r.edit);
        r.edit.range_dels_added.extend(r.mem.range_dels());
        r.mem = MemTable::with_options(0, &r.opts);
        Ok(())
    };
    // The history has no holes: each record starts at or before the
    // sequence after the newest one seen, first the manifest's (the newest
    // its tables hold, see `flush.rs`), then each record's (a log's first
    // records may repeat flushed ones). A later start means the tail of an
    // older log was lost (cut at a record boundary, so its reader saw a
    // clean end).
    let mut next_seq = versions.last_sequence.saturating_add(1);
    // What the replay leaves out, for `Db::recovery_report` and the stats:
    // where it stopped (a later log is then not replayed).
    let mut stopped: Option<(u64, String)> = None;
    // A log that ended early, and the report of it: replay goes on into
    // the next log, whose first record shows whether the lost tail held a
    // write (a gap: replay stops) or none (a torn sync mark or padding,
    // e.g. a failed append to a log that takes no more writes).
    let mut torn: Option<(u64, String)> = None;
    // Logs that ended early and lost no write.
    let mut healed: Vec<String> = Vec::new();
    let mut skipped_regions = 0u64;
    'logs: for n in wals.iter().copied() {
        let path = wal_path(dir, n);
        let mut reader =
            wal::Reader::new(fs.open_sequential(&path)?, path.clone(), opts.wal_recovery)
                .zero_filled_end();
        loop {
            // Decoding errors are reported relative to where the record starts.
            let start = reader.last_good_offset();
            let Some(rec) = reader.read_record()? else {
                break;
            };
            let batch = match WriteBatch::decode_format(&rec, reader.format_version()) {
                Ok(b) => b,
                Err(_) if opts.wal_recovery == WalRecovery::SkipAnyCorrupted => continue,
                Err(e) => return Err(e.in_file(&path, start)),
            };
            let seq = batch.sequence();
            let count = batch.len() as u64;
            if count > 0 && (seq == 0 || seq.saturating_add(count - 1) > MAX_SEQ) {
                return Err(Error::corruption(
                    &path,
                    start,
                    format!("batch sequence {seq} (+{count}) out of range"),
                ));
            }
            if count > 0 && seq > next_seq && opts.wal_recovery != WalRecovery::SkipAnyCorrupted {
                if opts.wal_recovery == WalRecovery::AbsoluteConsistency {
                    return Err(Error::corruption(
                        &path,
                        start,
                        format!(
                            "history gap: record starts at sequence {seq}, expected {next_seq}"
                        ),
                    ));
                }
                // Like a torn tail: the history ends before the gap.
                let gap = format!(
                    "log {n} at offset {start}: a gap in the history (a record starts at \
                     sequence {seq}, {next_seq} was next): this record and all after it were \
                     not replayed"
                );
                stopped = Some(match torn.take() {
                    Some((t, why)) => (t, format!("{why}; {gap}")),
                    None => (n, gap),
                });
                break 'logs;
            }
            if count > 0 {
                // The history goes on without a hole: a tear before this
                // record lost no write.
                if let Some((_, why)) = torn.take() {
                    healed.push(why);
                }
            }
            next_seq = next_seq.max(seq + count);
            let mut i = 0u64;
            for entry in batch.iter() {
                let e = entry.map_err(|e| e.in_file(&path, start))?;
                // A dropped keyspace's writes, and writes a keyspace's
                // tables already hold (its log number is past this log),
                // are left out; they still take their sequence numbers.
                if let Some(Some(r)) = replays.get_mut(e.keyspace as usize) {
                    if n >= r.record.log_number {
                        r.mem.add(seq + i, e.kind, e.key, e.value);
                    }
                }
                i += 1;
            }
            if i > 0 {
                max_seq = max_seq.max(seq + i - 1);
            }
            for r in replays.iter_mut().flatten() {
                if r.mem.approximate_size() >= r.opts.write_buffer_size {
                    write_out(r, &mut versions)?;
                }
            }
        }
        // A log that ended early (a torn tail after a power loss, damage in
        // point-in-time mode, or a failed append) may have lost writes that
        // later logs build on: the next record with a write decides (the
        // gap check above). No synced write is lost by a stop: a `sync`
        // write makes every older log durable before it is acknowledged.
        skipped_regions += reader.skipped_records();
        if let Some((offset, why)) = reader.dropped() {
            if opts.wal_recovery != WalRecovery::SkipAnyCorrupted {
                let why = format!("log {n} ended early at offset {offset} ({why})");
                // An earlier tear followed by no write: this one reports.
                if let Some((_, older)) = torn.replace((n, why)) {
                    healed.push(older);
                }
            }
        }
    }
    // Only a gap leaves later logs unreplayed.
    let logs_dropped = stopped
        .as_ref()
        .map_or(0, |(n, _)| wals.iter().filter(|&&w| w > *n).count() as u64);
    // A tear no later write followed: the rest of that log is lost.
    let stopped = stopped
        .or_else(|| torn.map(|(n, why)| (n, format!("{why}: the rest of it was not replayed"))));
    let mut report: Vec<String> = healed
        .iter()
        .map(|why| format!("{why}: no write was lost (the next log goes on without a gap)"))
        .collect();
    match &stopped {
        Some((_, what)) if logs_dropped > 0 => report.push(format!(
            "{what}; {logs_dropped} later log(s) were not replayed either"
        )),
        Some((_, what)) => report.push(what.clone()),
        None => {}
    }
    if skipped_regions > 0 {
        report.push(format!(
            "{skipped_regions} damaged region(s) of the logs were skipped (SkipAnyCorrupted)"
        ));
    }
    let recovery_report = (!report.is_empty()).then(|| report.join("; "));
    for r in replays.iter_mut().flatten() {
        if !r.mem.is_empty() {
            write_out(r, &mut versions)?;
        }
    }

    // A fresh WAL, and a fresh manifest naming it: every keyspace's
    // writes are in its tables now.
    let log_number = versions.new_file_number();
    let writer = wal::Writer::new_wal(opts.create_wal(&wal_path(dir, log_number))?, log_number)?;
    let mut parts: Vec<Edit> = replays
        .iter_mut()
        .flatten()
        .map(|r| {
            let mut e = std::mem::take(&mut r.edit);
            e.family = r.record.id;
            e.log_number = Some(log_number);
            // Write times past the recovered history are lowered for good,
            // with or without a ttl (see `ttl::lowered`).
            let times = versions
                .tree(r.record.id)
                .map_or(&[][..], |t| t.write_times.as_slice());
            if !times.is_empty() {
                e.write_times = Some(super::ttl::lowered(times, max_seq));
            }
            e
        })
        .collect();
    let mut edit = if parts.first().is_some_and(|p| p.family == 0) {
        parts.remove(0)
    } else {
        Edit::default()
    };
    edit.others = parts;
    edit.last_sequence = Some(max_seq);
    versions.log_and_apply(&mut edit)?;
    fs.sync_dir(dir)?;

    let tables = versions.table_cache().clone();
    let mut pool = crate::memtable::ChunkPool::for_write_buffer(
        opts.write_buffer_size,
        crate::memtable::MemTable::shards_for(&opts),
    );
    if let Some(bytes) = budget.chunk_pool_bytes(&opts) {
        pool = pool.limited_to(bytes);
    }
    let chunks = Arc::new(pool);
    let num_levels = opts.num_levels;
    // Each keyspace's family, its tree and its first memtable.
    let mut families: Vec<Option<Arc<Family>>> = Vec::new();
    let mut trees: Vec<Option<Tree>> = Vec::new();
    let mut mems: Vec<Option<Arc<MemTable>>> = Vec::new();
    let mut default_designs = Some(designs);
    for r in replays.into_iter().flatten() {
        let id = r.record.id as usize;
        let designs = match r.designs.or_else(|| default_designs.take()) {
            Some(d) => d,
            None => continue,
        };
        let mem = Arc::new(super::family::new_memtable(
            log_number, &r.opts, &opts, &chunks,
        ));
        // Its time to live, from the write times its tables and logs hold.
        let expiry = (r.opts.ttl_secs > 0).then(|| {
            let times = versions
                .tree(r.record.id)
                .map(|t| t.write_times.clone())
                .unwrap_or_default();
            super::ttl::Expiry::new(r.opts.ttl_secs, opts.clock.clone(), times, max_seq)
        });
        let fam = Family::new(
            r.record.id,
            &r.record.name,
            r.opts,
            designs,
            expiry,
            super::SuperVersion {
                mem: mem.clone(),
                imm: Vec::new(),
                version: Arc::new(crate::version::Version::new(num_levels)),
            },
        );
        super::family::set_slot(&mut families, id, Arc::new(fam));
        super::family::set_slot(&mut trees, id, Tree::new(mem.clone()));
        super::family::set_slot(&mut mems, id, mem);
    }
    let Some(Some(default)) = families.first().cloned() else {
        return Err(Error::corruption(
            dir.join(CURRENT),
            0,
            "the manifest has no default keyspace",
        ));
    };
    let inner = Inner {
        dir: dir.to_path_buf(),
        cache,
        chunks,
        budget,
        state: Mutex::new(State {
            versions,
            trees,
            gone: Tree::new(Arc::new(MemTable::with_options(0, &opts))),
            bg_error: None,
            shutting_down: false,
            spare_log: Default::default(),
            compacting_threads: 0,
            flush_cut: None,
        }),
        bg_cv: Condvar::new(),
        done_cv: Condvar::new(),
        last_seq: AtomicU64::new(max_seq),
        logs: Logs::new(LogState {
            writer,
            mems,
            dir_unsynced: false,
        }),
        commit: Default::default(),
        snapshots: Mutex::new(BTreeMap::new()),
        snapshot_gate: Mutex::new(()),
        snapshots_taken: AtomicU64::new(0),
        apply: Mutex::new(()),
        tables,
        default,
        families: parking_lot::RwLock::new(families),
        keyspace_ops: Mutex::new(()),
        stats: Stats::default(),
        closed: AtomicBool::new(false),
        // Opened by the first super-version, installed before any write.
        admission: Admission::new(opts.background_cpus),
        opts,
        recovery_report,
        locks: Mutex::new(std::iter::once(lock).chain(fast_lock).collect()),
    };
    Stats::add(&inner.stats.recovery_stopped, u64::from(stopped.is_some()));
    Stats::add(&inner.stats.recovery_logs_dropped, logs_dropped);
    Stats::add(&inner.stats.recovery_regions_skipped, skipped_regions);
    {
        let mut st = inner.state.lock();
        // Nothing else runs yet: the recovered super-versions are dropped here.
        for fam in inner.live_families() {
            drop(inner.install_super_version(&fam, &mut st));
        }
        remove_obsolete_files(&inner, &st)?;
    }
    Ok(inner)
}

/// Deletes tables no keyspace's version names (a dropped keyspace's
/// too), old WALs and manifests, and temp files.
fn remove_obsolete_files(inner: &Inner, st: &State) -> Result<()> {
    let fs = &inner.opts.fs;
    let versions = st.versions.all_current();
    let live: std::collections::HashSet<u64> = versions
        .iter()
        .flat_map(|v| v.levels.iter().flatten().map(|f| f.id()))
        .collect();
    let oldest_log = st.versions.log_number();
    for name in fs.list_dir(&inner.dir)? {
        let remove = match filename::parse(&name) {
            Some((FileKind::Table, n)) => !live.contains(&n),
            Some((FileKind::Wal, n)) => n < oldest_log,
            Some((FileKind::Manifest, n)) => n != st.versions.manifest_number(),
            Some((FileKind::Temp, _)) => true,
            _ => false,
        };
        if remove {
            let path = inner.dir.join(&name);
            fs.remove_file(&path)?;
        }
    }
    let levels: Vec<&dyn crate::l0::Levels> = versions
        .iter()
        .map(|v| &**v as &dyn crate::l0::Levels)
        .collect();
    inner
        .default
        .designs
        .l0
        .remove_unnamed(&**fs, st.versions.l0_dir(), &levels)
}

/// True when the files of a directory without CURRENT are what a crash
/// while creating the database leaves: no tables and only logs without a
/// record (the open that creates a database writes none before it returns).
/// Nothing acknowledged can be in them; the creation starts over (the
/// leftovers are removed as obsolete once the new manifest is in place).
fn interrupted_creation(
    fs: &dyn crate::io::FileSystem,
    dir: &Path,
    names: &[String],
) -> Result<bool> {
    for name in names {
        match filename::parse(name) {
            Some((FileKind::Table | FileKind::Row, _)) => return Ok(false),
            Some((FileKind::Wal, _)) => {
                let path = dir.join(name);
                let mut r = wal::Reader::new(
                    fs.open_sequential(&path)?,
                    path,
                    WalRecovery::TolerateCorruptedTail,
                )
                .zero_filled_end();
                match r.read_record() {
                    Ok(None) => {}
                    _ => return Ok(false),
                }
            }
            _ => {}
        }
    }
    Ok(true)
}
