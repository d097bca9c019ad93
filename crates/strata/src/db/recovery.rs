//! Opening a database: lock, load the manifest, replay the WALs, write what
//! they held to L0 tables, start a fresh WAL and manifest, and remove files
//! no version needs.

use super::{Admission, Inner, LogState, Logs, State};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::filename::{self, wal_path, FileKind, CURRENT, LOCK};
use crate::l0::TableSink;
use crate::memtable::MemTable;
use crate::options::{Options, WalRecovery};
use crate::stats::Stats;
use crate::table::{BlockCache, TableOptions};
use crate::types::MAX_SEQ;
use crate::version::{Edit, VersionSet};
use crate::wal;
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

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
    let table_opts = TableOptions::from(&opts);
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
    l0.check_open(&*versions.current())?;

    // Replay every WAL the manifest does not cover, oldest first.
    let mut wals: Vec<u64> = names
        .iter()
        .filter_map(|n| match filename::parse(n) {
            Some((FileKind::Wal, n)) if n >= versions.log_number => Some(n),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    let mut edit = Edit::default();
    let mut max_seq = versions.last_sequence;
    let mut mem = MemTable::with_options(0, &opts);
    let version = versions.current();
    let sink = TableSink {
        dir,
        fs: fs.clone(),
        table_opts,
        collect_keys: false,
        drop_tombstones: false,
        // No folding with a ttl (see `Inner::rules`).
        rules: crate::runs::rules::Rules {
            merge: match opts.ttl_secs {
                0 => opts.merge_operator.get().cloned(),
                _ => None,
            },
            ..Default::default()
        },
    };
    // Recovered data goes straight to level 0 (tables or rows). A
    // tombstone must stay while a piece written earlier in this replay may
    // hold an older version.
    let write_out = |mem: &MemTable, versions: &mut VersionSet, edit: &mut Edit| -> Result<()> {
        let mut next = || Ok(versions.new_file_number());
        let written = l0.write(&sink, mem, &*version, edit, Vec::new(), &mut next)?;
        l0.record(&written, edit);
        edit.range_dels_added.extend(mem.range_dels());
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
                mem.add(seq + i, e.kind, e.key, e.value);
                i += 1;
            }
            if i > 0 {
                max_seq = max_seq.max(seq + i - 1);
            }
            if mem.approximate_size() >= opts.write_buffer_size {
                write_out(&mem, &mut versions, &mut edit)?;
                mem = MemTable::with_options(0, &opts);
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
    if !mem.is_empty() {
        write_out(&mem, &mut versions, &mut edit)?;
    }

    // A fresh WAL, and a fresh manifest naming it.
    let log_number = versions.new_file_number();
    let writer = wal::Writer::new_wal(opts.create_wal(&wal_path(dir, log_number))?, log_number)?;
    edit.log_number = Some(log_number);
    edit.last_sequence = Some(max_seq);
    // Write times past the recovered history are lowered for good, with
    // or without a ttl (see `ttl::lowered`).
    let write_times = super::ttl::lowered(&versions.write_times, max_seq);
    if !versions.write_times.is_empty() {
        edit.write_times = Some(write_times.clone());
    }
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
    let mem = Arc::new(MemTable::with_options_in(
        log_number,
        &opts,
        Some(chunks.clone()),
    ));
    let num_levels = opts.num_levels;
    let expiry = (opts.ttl_secs > 0)
        .then(|| super::ttl::Expiry::new(opts.ttl_secs, opts.clock.clone(), write_times, max_seq));
    let inner = Inner {
        expiry,
        dir: dir.to_path_buf(),
        table_opts,
        cache,
        chunks,
        budget,
        state: Mutex::new(State {
            versions,
            mem: mem.clone(),
            imm: Vec::new(),
            flushing: false,
            in_flight: Default::default(),
            bg_error: None,
            shutting_down: false,
            compaction_debt: 0,
            hold: Default::default(),
            spare_log: Default::default(),
            compacting_threads: 0,
        }),
        bg_cv: Condvar::new(),
        done_cv: Condvar::new(),
        super_version: ArcSwap::from_pointee(super::SuperVersion {
            mem: mem.clone(),
            imm: Vec::new(),
            version: Arc::new(crate::version::Version::new(num_levels)),
        }),
        last_seq: AtomicU64::new(max_seq),
        logs: Logs::new(LogState {
            writer,
            mem,
            dir_unsynced: false,
        }),
        commit: Default::default(),
        snapshots: Mutex::new(BTreeMap::new()),
        snapshot_gate: Mutex::new(()),
        snapshots_taken: AtomicU64::new(0),
        apply: Mutex::new(()),
        tables,
        designs,
        stats: Stats::default(),
        closed: AtomicBool::new(false),
        // Opened by the first super-version, installed before any write.
        admission: Admission::new(opts.background_cpus),
        opts,
        recovery_report,
        _lock: lock,
        _fast_lock: fast_lock,
    };
    Stats::add(&inner.stats.recovery_stopped, u64::from(stopped.is_some()));
    Stats::add(&inner.stats.recovery_logs_dropped, logs_dropped);
    Stats::add(&inner.stats.recovery_regions_skipped, skipped_regions);
    {
        let mut st = inner.state.lock();
        // Nothing else runs yet: the recovered super-version is dropped here.
        drop(inner.install_super_version(&mut st));
        remove_obsolete_files(&inner, &st)?;
    }
    Ok(inner)
}

/// Deletes tables no version names, old WALs and manifests, and temp files.
fn remove_obsolete_files(inner: &Inner, st: &State) -> Result<()> {
    let fs = &inner.opts.fs;
    let version = st.versions.current();
    let live: std::collections::HashSet<u64> =
        version.levels.iter().flatten().map(|f| f.id()).collect();
    for name in fs.list_dir(&inner.dir)? {
        let remove = match filename::parse(&name) {
            Some((FileKind::Table, n)) => !live.contains(&n),
            Some((FileKind::Wal, n)) => n < st.versions.log_number,
            Some((FileKind::Manifest, n)) => n != st.versions.manifest_number(),
            Some((FileKind::Temp, _)) => true,
            _ => false,
        };
        if remove {
            let path = inner.dir.join(&name);
            fs.remove_file(&path)?;
        }
    }
    inner
        .designs
        .l0
        .remove_unnamed(&**fs, st.versions.l0_dir(), &*version)
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
