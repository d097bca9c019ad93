//! A run from start to end in the child: where its files go, the load,
//! the timed phase and its settle, and the result.

use super::result::{level_shape, ratio};
use super::{
    background_writer, emit, mark_loaded, new_ctx, preload, progress, worker, BackupFigures,
    CheckpointFigures, Latency, Meter, RunResult, RunSpec, RESULT_PREFIX,
};
use crate::engine::{self, EngineKind, EngineSettings};
use crate::sys;
use crate::workload::{Preload, Workload};
use crate::BenchError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use strata::{KvStore, StoreStats};

/// Where runs keep their tmpfs directories: `<run dir name>-<child pid>`.
pub const SHM_ROOT: &str = "/dev/shm/strata-bench";

/// Removes the tmpfs directories of the run whose directory is `dir`
/// (those a child killed before its end left behind).
pub fn remove_shm_dirs(dir: &Path) {
    let Some(run) = dir.file_name().map(|n| format!("{}-", n.to_string_lossy())) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(SHM_ROOT) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&run) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The run's directory on tmpfs (`@shm` in an engine spec), removed when
/// the run ends: tmpfs holds its bytes in memory.
struct Shm(PathBuf);

impl Drop for Shm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where run `spec` keeps its files: the engine with `@shm` resolved to
/// the run's tmpfs directory, the database directory (`db_dir=` or the
/// run's directory) and the tmpfs directory.
fn placement(spec: &RunSpec) -> Result<(EngineKind, PathBuf, Shm, bool), BenchError> {
    let run = spec
        .dir
        .file_name()
        .map_or_else(|| "run".into(), |n| n.to_string_lossy().to_string());
    let shm = Path::new(SHM_ROOT).join(format!("{run}-{}", std::process::id()));
    let engine = spec.engine.replace(engine::SHM, &shm.display().to_string());
    let kind = EngineKind::parse(&engine)?;
    let db_dir = match &kind {
        EngineKind::Strata(opts) => engine::split_placement(opts).0.map(PathBuf::from),
        _ => None,
    };
    let own = engine::split_view(&spec.engine).1;
    Ok((
        kind,
        db_dir.unwrap_or_else(|| spec.dir.clone()),
        Shm(shm),
        own,
    ))
}

/// Runs `spec` in this process and returns its result.
pub fn run(spec: &RunSpec) -> Result<RunResult, BenchError> {
    let (kind, dir, shm, own_view) = placement(spec)?;
    // `engine@own` runs with its own defaults whatever the run's view.
    let w = Workload::parse(&spec.workload)?;
    let settings = EngineSettings {
        own_defaults: spec.settings.own_defaults || own_view,
        counters: w.counts(),
        ..spec.settings.clone()
    };
    let cold = spec.cold || crate::workload::split_cold(&spec.workload).1;
    let p = &spec.params;
    p.validate()?;
    for d in [&spec.dir, &dir, &shm.0] {
        if spec.preloaded && d == &dir {
            continue;
        }
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| BenchError::Io(d.clone(), e))?;
        }
    }
    // The checkpoint row's target and the backup row's directory: new
    // siblings of the database's directory (the same file system), removed
    // once measured, and on every other path by the guards.
    let checkpoint_target = match w {
        Workload::Checkpoint => Some(fresh_sibling(&dir, "checkpoint")?),
        _ => None,
    };
    let _checkpoint_guard = checkpoint_target.clone().map(Shm);
    let backup_dir = match w {
        Workload::Backup => Some(fresh_sibling(&dir, "backup")?),
        _ => None,
    };
    let _backup_guard = backup_dir.clone().map(Shm);
    // Opened for every engine, since `KvStore::backup` takes a strata
    // store: that only makes its empty skeleton (`LOCK`, `shared/`,
    // `meta/`). strata adds its backup to it; a comparator's library
    // keeps its own backup in a subdirectory of it (`CStore::backup`:
    // `rocksdb/`), never in strata's format. Declared after the guard, so
    // dropped (its lock released) before the guard removes the directory.
    let backup_store = match &backup_dir {
        Some(t) => Some(strata::BackupStore::open(t)?),
        None => None,
    };
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::Io(dir.clone(), e))?;
    let load_start = Instant::now();
    let mut opened = engine::open(&kind, &settings, &dir)?;
    let sync = spec.settings.sync && !kind.is_comparator();
    // A load kept as an image: loaded and settled, then closed, so that the
    // copy is of a database at rest; this run then reopens it, evicted, as
    // every run restored from the image does.
    let mut preloaded = spec.preloaded;
    if let (
        Some(image),
        false,
        Preload::DbBench
        | Preload::Ycsb
        | Preload::Sequential
        | Preload::DeletedRanges
        | Preload::DeletedKeys,
    ) = (&spec.save_image, preloaded, w.preload())
    {
        preload(
            &new_ctx(opened.store.as_ref(), p, w, sync, None),
            w.preload(),
        )?;
        opened.store.wait_for_compactions()?;
        opened.store.close()?;
        drop(opened);
        sys::save_image(&dir, image)?;
        sys::drop_cache(&dir);
        opened = engine::open(&kind, &settings, &dir)?;
        preloaded = true;
    }
    let store: &dyn KvStore = opened.store.as_ref();
    let mut ctx = new_ctx(store, p, w, sync, spec.chain_records);
    ctx.checkpoint_target = checkpoint_target.clone();
    ctx.backup_store = backup_store.as_ref();
    match w.preload() {
        Preload::Nothing => {}
        _ if preloaded => {
            // A database copied from an image: the same records (or a
            // chain's: its own). Work the engine starts at open (log
            // replay, compactions it finds due) is settled before the run,
            // as after a load.
            mark_loaded(&ctx, w.preload(), spec.chain_records.unwrap_or(p.num));
            if spec.settle {
                store.wait_for_compactions()?;
            }
        }
        kind => {
            preload(&ctx, kind)?;
            if spec.settle {
                store.wait_for_compactions()?;
            }
            if cold {
                sys::drop_cache(&dir);
            }
        }
    }
    let load_secs = load_start.elapsed().as_secs_f64();

    let stats0 = store.stats();
    let disk0 = sys::disk_written(&spec.dir);
    let io0 = sys::proc_io();
    let cpu0 = sys::usage();
    let steal0 = sys::steal_secs();
    let timed = w.timed();
    let total = if timed {
        (p.duration_secs * 1000.0) as u64
    } else if matches!(
        w,
        Workload::FillSeq | Workload::FillRandom | Workload::YcsbLoad
    ) {
        p.num
    } else if w.run_as() == Workload::ReadSeq {
        p.ops.min(p.num) * p.threads as u64
    } else if let Workload::DeleteBlocks { .. } = w {
        p.num.div_ceil(crate::workload::DELETE_BLOCK) * crate::workload::DELETED_PER_BLOCK
    } else if matches!(w, Workload::Checkpoint | Workload::Backup) {
        1
    } else {
        p.ops
    };
    let start = Instant::now();
    let deadline = if timed {
        Some(start + Duration::from_secs_f64(p.duration_secs))
    } else {
        // Validated by the parent; a budget past the clock's range is none.
        p.max_run_secs
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .and_then(|d| start.checked_add(d))
    };
    let (meter, writer_ops, elapsed) = std::thread::scope(|s| -> Result<_, BenchError> {
        let ctx = &ctx;
        let reporter = s.spawn(move || {
            while !ctx.stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let done = if timed {
                    start.elapsed().as_millis() as u64
                } else {
                    ctx.done.load(Relaxed)
                };
                progress("run", done.min(total), total);
            }
        });
        let writer =
            (w == Workload::ReadWhileWriting).then(|| s.spawn(move || background_writer(ctx)));
        let workers: Vec<_> = (0..p.threads)
            .map(|t| s.spawn(move || worker(ctx, w, t, start, deadline)))
            .collect();
        let mut total_meter = Meter::new();
        let mut first_err = None;
        for h in workers {
            match h.join() {
                Ok(Ok(m)) => total_meter.merge(m),
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err =
                        first_err.or(Some(BenchError::Usage("a worker thread panicked".into())))
                }
            }
        }
        let elapsed = start.elapsed();
        ctx.stop.store(true, Relaxed);
        let writer_ops = match writer.map(|h| h.join()) {
            Some(Ok(Ok(n))) => Some(n),
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(_)) => return Err(BenchError::Usage("the writer thread panicked".into())),
            None => None,
        };
        let _ = reporter.join();
        match first_err {
            Some(e) => Err(e),
            None => Ok((total_meter, writer_ops, elapsed)),
        }
    })?;

    // The window's own writes; then the compaction they left due and the
    // close are charged to the run too.
    let io_window = sys::proc_io();
    // The checkpoint's files, walked (not timed), then removed: they are
    // not the database's.
    let checkpoint = match &checkpoint_target {
        Some(t) => {
            let walked = checkpoint_files(t, &dir);
            let _ = std::fs::remove_dir_all(t);
            let (files, bytes, unlinked_bytes) =
                walked.map_err(|e| BenchError::Io(t.clone(), e))?;
            Some(CheckpointFigures {
                files,
                bytes,
                unlinked_bytes,
                engine_copied_bytes: if kind.is_comparator() {
                    None
                } else {
                    meter.checkpoint.map(|c| c.copied_bytes)
                },
            })
        }
        None => None,
    };
    // The backup directory's files, walked (not timed), then removed:
    // empty before the call, so all of them are the backup's.
    let backup = match &backup_dir {
        Some(t) => {
            let walked = tree_files(t);
            let _ = std::fs::remove_dir_all(t);
            let (files, bytes) = walked.map_err(|e| BenchError::Io(t.clone(), e))?;
            Some(BackupFigures {
                files,
                bytes,
                engine_copied_bytes: if kind.is_comparator() {
                    None
                } else {
                    meter.backup.map(|b| b.copied_bytes)
                },
            })
        }
        None => None,
    };
    let steal_secs = match (steal0, sys::steal_secs()) {
        (Some(a), Some(b)) => Some((b - a).max(0.0)),
        _ => None,
    };
    let wrote = meter.written > 0 || writer_ops.is_some_and(|n| n > 0);
    let settle_secs = if spec.settle && wrote {
        let t = Instant::now();
        sys::take_settle_overshoot();
        store.wait_for_compactions()?;
        // A polled engine's confirming looks are the harness's, not its own.
        let waited = t.elapsed().saturating_sub(sys::take_settle_overshoot());
        Some(waited.as_secs_f64())
    } else {
        None
    };
    let stats_before_close = store.stats();
    store.close()?;
    let stats1 = if kind.is_comparator() {
        stats_before_close.clone()
    } else {
        store.stats()
    };
    let version = opened.version.clone();
    let settings = opened.settings.clone();
    let live_count = ctx.live.count.load(Relaxed);
    drop(ctx);
    drop(opened);
    let io1 = sys::proc_io();
    let cpu1 = sys::usage();
    let disk_w = match (disk0, sys::disk_written(&spec.dir)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    // Every tier: the run's directory, and its tmpfs part.
    let dir_bytes = sys::dir_size(&spec.dir) + sys::dir_size(&shm.0);

    let secs = elapsed.as_secs_f64().max(1e-9);
    let latency = Latency::of(&meter.hist);
    let mixed = w.mix(p).is_some();
    let read_latency = (mixed && !meter.reads.is_empty()).then(|| Latency::of(&meter.reads));
    let write_latency = (mixed && !meter.writes.is_empty()).then(|| Latency::of(&meter.writes));
    let full = (elapsed.as_secs() as usize).min(meter.buckets.len());
    let timeline: Vec<u64> = meter.buckets[..full].to_vec();
    let tenths = ((elapsed.as_millis() / 100) as usize).min(meter.fine.len());
    let timeline_fine: Vec<u64> = meter.fine[..tenths].to_vec();
    let (tmin, tmean) = if timeline.is_empty() {
        let r = meter.ops as f64 / secs;
        (r, r)
    } else {
        let min = timeline.iter().copied().min().unwrap_or(0) as f64;
        (
            min,
            timeline.iter().sum::<u64>() as f64 / timeline.len() as f64,
        )
    };
    let below = timeline
        .iter()
        .filter(|&&v| (v as f64) < tmean / 2.0)
        .count();
    let mut op_counts: BTreeMap<String, u64> = meter
        .counts
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    if let Some(n) = writer_ops {
        op_counts.insert("background-write".into(), n);
    }
    let written = meter.written + writer_ops.map_or(0, |n| n * (p.key_size + p.value_size) as u64);
    let dev_w = io1.write_bytes.saturating_sub(io0.write_bytes);
    let wa_proc = (dev_w > 0).then(|| ratio(dev_w, written)).flatten();
    let dev_r = io1.read_bytes.saturating_sub(io0.read_bytes);
    // Counters hold 8-byte values.
    let value_len = if w.counts() { 8 } else { p.value_size };
    let live_bytes = live_count * (p.key_size + value_len) as u64;
    let strata_engine = !kind.is_comparator();
    let eng_w = stats1
        .disk_bytes_written
        .saturating_sub(stats0.disk_bytes_written);
    let user_w = stats1
        .user_bytes_written
        .saturating_sub(stats0.user_bytes_written);
    let stalled = |s: &StoreStats| s.lsm().map_or(0, |l| l.stall_micros + l.slowdown_micros);
    let stall = stalled(&stats1).saturating_sub(stalled(&stats0));
    Ok(RunResult {
        engine: spec.engine.clone(),
        workload: spec.workload.trim().to_string(),
        description: w.describe(p),
        version,
        engine_settings: settings,
        error: None,
        ops: meter.ops,
        cut_short: meter.cut,
        secs,
        ops_per_sec: meter.ops as f64 / secs,
        // A checkpoint row's bytes are its checkpoint's; a backup row's,
        // its backup directory's.
        mb_per_sec: checkpoint
            .as_ref()
            .map(|c| c.bytes)
            .or(backup.as_ref().map(|b| b.bytes))
            .unwrap_or(meter.bytes) as f64
            / secs
            / 1e6,
        latency,
        read_latency,
        write_latency,
        timeline,
        timeline_fine,
        timeline_min: tmin,
        timeline_mean: tmean,
        seconds_below_half_mean: below,
        op_counts,
        gets: meter.gets,
        gets_found: meter.found,
        user_bytes_written: written,
        live_bytes,
        dir_bytes,
        device_write_bytes: dev_w,
        device_read_bytes: dev_r,
        cancelled_write_bytes: io1
            .cancelled_write_bytes
            .saturating_sub(io0.cancelled_write_bytes),
        disk_write_bytes: disk_w,
        wa_device: disk_w.and_then(|d| ratio(d, written)).or(wa_proc),
        wa_proc,
        wa_window: if written > 0 {
            ratio(
                io_window.write_bytes.saturating_sub(io0.write_bytes),
                written,
            )
        } else {
            None
        },
        settle_secs,
        slowest_op_at: meter.slowest.map(|(_, at)| crate::sys::monotonic_secs(at)),
        steal_secs,
        wa_engine: if strata_engine {
            ratio(eng_w, user_w)
        } else {
            None
        },
        space_amp: ratio(dir_bytes, live_bytes),
        device_read_bytes_per_get: ratio(dev_r, meter.gets),
        engine_read_bytes_per_get: if strata_engine {
            ratio(
                stats1
                    .disk_bytes_read
                    .saturating_sub(stats0.disk_bytes_read),
                meter.gets,
            )
        } else {
            None
        },
        cpu_secs: cpu1.cpu_secs - cpu0.cpu_secs,
        sys_secs: cpu1.sys_secs - cpu0.sys_secs,
        max_rss_mib: cpu1.max_rss_kib as f64 / 1024.0,
        minor_faults: cpu1.minor_faults.saturating_sub(cpu0.minor_faults),
        major_faults: cpu1.major_faults.saturating_sub(cpu0.major_faults),
        stall_secs: strata_engine.then_some(stall as f64 / 1e6),
        levels: level_shape(&stats_before_close),
        engine_stats: if strata_engine {
            serde_json::from_str(&stats_before_close.to_json()).ok()
        } else {
            None
        },
        load_secs,
        checkpoint,
        backup,
    })
}

/// The files under `dir` (walked, links not followed) and their bytes.
fn tree_files(dir: &Path) -> std::io::Result<(u64, u64)> {
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let m = entry.metadata()?;
            if m.is_dir() {
                dirs.push(entry.path());
                continue;
            }
            files += 1;
            bytes += m.len();
        }
    }
    Ok((files, bytes))
}

/// `<dir>-<suffix>` beside `dir`, removed if a run before left it.
fn fresh_sibling(dir: &Path, suffix: &str) -> Result<PathBuf, BenchError> {
    let name = dir
        .file_name()
        .map_or_else(|| "db".into(), |n| n.to_string_lossy().to_string());
    let t = dir.with_file_name(format!("{name}-{suffix}"));
    if t.exists() {
        std::fs::remove_dir_all(&t).map_err(|e| BenchError::Io(t.clone(), e))?;
    }
    Ok(t)
}

/// The files under `target` (a checkpoint), their bytes, and the bytes of
/// those that are not hard links of the same-named file under `source`
/// (the database's directory): another inode, or no such file.
fn checkpoint_files(target: &Path, source: &Path) -> std::io::Result<(u64, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (mut files, mut bytes, mut unlinked) = (0u64, 0u64, 0u64);
    let mut dirs = vec![PathBuf::new()];
    while let Some(rel) = dirs.pop() {
        for entry in std::fs::read_dir(target.join(&rel))? {
            let entry = entry?;
            let path = rel.join(entry.file_name());
            // Not followed: a link is counted as itself.
            let m = entry.metadata()?;
            if m.is_dir() {
                dirs.push(path);
                continue;
            }
            files += 1;
            bytes += m.len();
            let linked = std::fs::symlink_metadata(source.join(&path))
                .is_ok_and(|s| s.dev() == m.dev() && s.ino() == m.ino());
            if !linked {
                unlinked += m.len();
            }
        }
    }
    Ok((files, bytes, unlinked))
}

/// The environment variable naming the `cgroup.procs` file of the memory
/// cgroup a child runs in: the child writes its pid there before anything
/// else.
pub const CGROUP_PROCS_ENV: &str = "STRATA_BENCH_CGROUP_PROCS";

/// The child's entry point: enters its memory cgroup ([`CGROUP_PROCS_ENV`]),
/// runs the JSON `spec`, prints the result line. Returns the process exit
/// code.
pub fn child_main(spec_json: &str) -> i32 {
    if let Some(procs) = std::env::var_os(CGROUP_PROCS_ENV) {
        if let Err(e) = std::fs::write(&procs, std::process::id().to_string()) {
            eprintln!(
                "error: entering the memory cgroup ({}): {e}",
                std::path::Path::new(&procs).display()
            );
            return 2;
        }
    }
    let spec: RunSpec = match serde_json::from_str(spec_json) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: bad run spec: {e}");
            return 2;
        }
    };
    let result = match run(&spec) {
        Ok(r) => r,
        Err(e) => RunResult {
            engine: spec.engine.clone(),
            workload: spec.workload.clone(),
            error: Some(e.to_string()),
            ..RunResult::default()
        },
    };
    if !spec.keep_data {
        let _ = std::fs::remove_dir_all(&spec.dir);
    }
    match serde_json::to_string(&result) {
        Ok(j) => {
            emit(&format!("{RESULT_PREFIX}{j}"));
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}
