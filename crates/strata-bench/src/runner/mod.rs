//! The parent: presets, one child process per engine × workload × repeat,
//! live progress, and the report.

use crate::child::{RunResult, RunSpec};
use crate::engine::{EngineKind, COMPARATORS};
use crate::report::Report;
use crate::workload::{Preload, Workload};
use crate::BenchError;
use std::path::PathBuf;

pub mod chain;
mod output;
mod presets;
mod spawn;

pub use crate::config::Config;
pub use presets::{available_engines, both_views, preset, PRESETS};
pub use spawn::TIME_LIMIT_KILL;
use spawn::{bar, probe_peer, remove_leftovers, run_child, sanitize};

/// The report's note on an `--own-defaults` run.
pub const OWN_DEFAULTS_NOTE: &str =
    "own-defaults mode (the second view of fairness): every engine ran with its own library \
     defaults for write buffer, block cache, block and table sizes, bloom filter, compression, level \
     shape and background threads, not the shared settings (the preset's size fields in report.json's \
     `settings` were ignored); durability was equal (WAL on, the same sync policy). Each engine's \
     effective settings are listed with it.";

/// True for an engine spec that keeps its database outside the run's
/// directory (`db_dir=`, `fast_dir=`, tmpfs): it is neither imaged nor
/// chained.
fn placed_outside(engine: &str) -> bool {
    ["db_dir=", "fast_dir=", crate::engine::SHM]
        .iter()
        .any(|p| engine.contains(p))
}

/// How to start a child: this program plus the hidden subcommand.
#[derive(Debug, Clone)]
pub struct ChildCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Environment variables every child gets (the peer libraries' paths,
    /// whether a debug build may run: see `ffi::dl`); the parent's own
    /// checks read them from here too.
    pub env: Vec<(String, String)>,
}

/// Runs the benchmark; returns the report (already written to `cfg.out`).
pub fn run(cfg: &Config, child: &ChildCommand) -> Result<Report, BenchError> {
    let kinds = cfg
        .engines
        .iter()
        .map(|e| EngineKind::parse(e))
        .collect::<Result<Vec<_>, _>>()?;
    let mut notes = Vec::new();
    let mut engines = Vec::new();
    for (name, kind) in cfg.engines.iter().zip(&kinds) {
        if kind.is_comparator() && !COMPARATORS {
            let msg = format!(
                "{name} skipped: RocksDB/LevelDB/fjall are not compiled in (build with --features comparators, \
                 after scripts/peers installs the peer libraries; `scripts/bench` does both)"
            );
            eprintln!("note: {msg}");
            notes.push(msg);
        } else {
            engines.push(name.clone());
        }
    }
    if engines.is_empty() {
        return Err(BenchError::Usage("no engine to run".into()));
    }
    // The parent looks at each peer library before any run: a missing or
    // debug-built one stops the bench here, and the report names each.
    for (k, v) in &child.env {
        std::env::set_var(k, v);
    }
    let mut peers = Vec::new();
    for name in &engines {
        if let Some(line) = probe_peer(name)? {
            if !peers.contains(&line) {
                peers.push(line);
            }
        }
    }
    if cfg.settings.own_defaults {
        notes.push(OWN_DEFAULTS_NOTE.to_string());
    }
    let workloads = cfg
        .workloads
        .iter()
        .map(|w| Workload::parse(w).map(|parsed| (w.trim().to_string(), parsed)))
        .collect::<Result<Vec<_>, _>>()?;
    cfg.params.validate()?;
    if cfg.chain {
        let parsed: Vec<Workload> = workloads.iter().map(|(_, w)| *w).collect();
        chain::check(&parsed, &engines)?;
        notes.push(
            "chain: one database per engine, loaded by the first row (one run per engine, so its \
             figures are not medians); every later row ran, in the listed order, on what the rows before it \
             left (YCSB's updates and inserts included), its files evicted from the page cache first; \
             readrandom and seekrandom read the YCSB-keyed records"
                .into(),
        );
    }
    std::fs::create_dir_all(&cfg.out).map_err(|e| BenchError::Io(cfg.out.clone(), e))?;
    let data = cfg.out.join("data");
    // Nothing of an earlier bench (its load images above all, made with
    // other parameters) may stand in for this one's.
    if data.exists() {
        std::fs::remove_dir_all(&data).map_err(|e| BenchError::Io(data.clone(), e))?;
    }
    let cap = match cfg.memory_limit {
        None => None,
        Some(bytes) => match crate::limits::MemoryCap::new(bytes) {
            Ok(c) => {
                notes.push(format!(
                    "every run's process is capped at {} MiB of memory, page cache included ({})",
                    bytes >> 20,
                    c.how
                ));
                Some(c)
            }
            // A capped run that ran uncapped would measure another regime
            // under the same name: refuse instead.
            Err(e) => {
                return Err(BenchError::Usage(format!(
                    "cannot cap memory at {} MiB ({e}): run as root on a machine with a memory \
                     cgroup controller, or pass --memory-limit none to run uncapped",
                    bytes >> 20
                )))
            }
        },
    };
    let device = if let Some((mib, secs)) = cfg.ceilings {
        eprintln!("measuring the device's 4 KiB random I/O ceilings ...");
        let c = crate::limits::measure(&data.join("ceilings"), mib, secs)?;
        eprintln!(
            "device: random 4 KiB reads {:.0} IOPS at QD1, {:.0} at QD64; writes {:.0} at QD1, {:.0} at QD64 ({}{})",
            c.read_qd1_iops,
            c.read_qd64_iops,
            c.write_qd1_iops,
            c.write_qd64_iops,
            c.backend,
            if c.direct { ", O_DIRECT" } else { "" }
        );
        Some(c)
    } else {
        None
    };
    if cfg.repeats > 1 && engines.len() > 1 {
        notes.push(
            "the engine order turns by one each repeat (report.json lists the runs in the order they ran)"
                .into(),
        );
    }
    // A chain's load (its first row) runs once per engine.
    let chain_load = |i: usize| cfg.chain && i == 0;
    let repeats_of = |i: usize| if chain_load(i) { 1 } else { cfg.repeats };
    let total = engines.len() * (0..workloads.len()).map(repeats_of).sum::<usize>();
    let mut results = Vec::new();
    // Images whose load failed (a killed or failed child): later runs that
    // would start from them fail at once with the same cause.
    let mut failed_images: Vec<(PathBuf, String)> = Vec::new();
    // Engine × row pairs a repeat of which was killed by the time limit:
    // their later repeats are not run (they would spend the limit again).
    let mut over_limit: Vec<(String, String, String)> = Vec::new();
    let mut chains = cfg.chain.then(|| chain::Chains::new(&data));
    let mut k = 0;
    for (i, (row, wl)) in workloads.iter().enumerate() {
        for rep in 0..repeats_of(i) {
            // The engine order turns by one each repeat, so no engine
            // always runs first (after a cold device) or last.
            for e in engines
                .iter()
                .cycle()
                .skip(rep % engines.len())
                .take(engines.len())
            {
                k += 1;
                let dir = data.join(format!("{}-{}-{rep}", sanitize(e), sanitize(row)));
                // A reused load: the first run of this engine and kind of
                // load keeps an image of it, later ones start from a copy.
                // Engines placed outside the run's directory load every time.
                let image = (cfg.reuse_loads && !placed_outside(e) && !cfg.chain)
                    .then(|| match wl.preload() {
                        // Counters are loaded by each run (no image).
                        Preload::Nothing | Preload::Counters => None,
                        kind => Some(
                            data.join("images")
                                .join(format!("{}-{kind:?}", sanitize(e))),
                        ),
                    })
                    .flatten();
                let mut spec = RunSpec {
                    engine: e.clone(),
                    workload: row.clone(),
                    params: cfg.params.clone(),
                    settings: cfg.settings.clone(),
                    dir: dir.clone(),
                    cold: cfg.cold,
                    settle: cfg.settle,
                    keep_data: cfg.keep_data,
                    preloaded: false,
                    save_image: None,
                    chain_records: None,
                };
                let earlier = image.as_ref().and_then(|img| {
                    failed_images
                        .iter()
                        .find(|(p, _)| p == img)
                        .map(|(_, why)| why.clone())
                });
                let slow = over_limit
                    .iter()
                    .find(|(en, r, _)| en == e && r == row)
                    .map(|(_, _, why)| why.clone());
                let restored = match (&image, &chains) {
                    _ if slow.is_some() => Err(format!(
                        "not run: an earlier repeat of this engine and row was {}",
                        slow.unwrap_or_default()
                    )),
                    _ if earlier.is_some() => Err(format!(
                        "the load it starts from failed in an earlier run of this engine: {}",
                        earlier.unwrap_or_default()
                    )),
                    (_, Some(c)) => c.prepare(&mut spec, i),
                    (Some(img), None) if crate::sys::image_ready(img) => {
                        spec.preloaded = true;
                        crate::sys::restore_image(img, &dir)
                            .map_err(|e| format!("copying the loaded image: {e}"))
                    }
                    (Some(img), None) => {
                        if let Some(parent) = img.parent() {
                            let _ = std::fs::create_dir_all(parent);
                        }
                        spec.save_image = Some(img.clone());
                        Ok(())
                    }
                    (None, None) => Ok(()),
                };
                crate::sys::settle_device();
                let pb = bar();
                pb.set_prefix(format!("[{k}/{total}] {e} {row}"));
                let limit = cfg.time_limit.map(|l| {
                    let l = if spec.save_image.is_some() || chain_load(i) {
                        4.0 * l
                    } else {
                        l
                    };
                    std::time::Duration::from_secs_f64(l)
                });
                let r = match restored {
                    Ok(()) => {
                        let r = run_child(child, &spec, &pb, cap.as_ref(), limit);
                        remove_leftovers(&spec);
                        r
                    }
                    Err(msg) => RunResult {
                        engine: e.clone(),
                        workload: row.clone(),
                        error: Some(msg),
                        ..RunResult::default()
                    },
                };
                pb.finish_and_clear();
                if let Some(c) = chains.as_mut() {
                    c.record(&spec, i, &r);
                }
                if let Some(err) = r
                    .error
                    .as_deref()
                    .filter(|e| e.starts_with(TIME_LIMIT_KILL))
                {
                    over_limit.push((e.clone(), row.clone(), err.to_string()));
                }
                if let (Some(img), Some(err)) = (&spec.save_image, &r.error) {
                    if !crate::sys::image_ready(img) {
                        failed_images.push((img.clone(), err.clone()));
                    }
                }
                let line = match &r.error {
                    Some(err) => format!("[{k}/{total}] {e} {row}: FAILED: {err}"),
                    None => format!(
                        "[{k}/{total}] {e} {row}: {} ops/s, p99 {:.1} us, {:.1} s",
                        if r.ops_per_sec >= 10.0 {
                            format!("{:.0}", r.ops_per_sec)
                        } else {
                            format!("{:.3}", r.ops_per_sec)
                        },
                        r.latency.p99_us,
                        r.secs
                    ),
                };
                eprintln!("{line}");
                results.push(r);
                let partial = Report::new(cfg, engines.clone(), results.clone(), notes.clone());
                if let Err(e) = output::write_partial(&partial, &cfg.out) {
                    eprintln!("warning: the partial report was not written: {e}");
                }
            }
        }
    }
    if !cfg.keep_data {
        let _ = std::fs::remove_dir_all(&data);
    }
    let mut report = Report::new(cfg, engines, results, notes);
    report.peers = peers;
    report.device = device;
    output::write_all(&report, &cfg.out)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineSettings;
    use crate::workload::Params;
    use indicatif::ProgressBar;

    /// A child that outlives the time limit is killed and reported as such
    /// (a shell that sleeps stands in for an engine thrashing under a cap).
    #[test]
    fn a_child_past_the_time_limit_is_killed_and_reported() {
        let child = ChildCommand {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), "exec sleep 600".into()],
            env: Vec::new(),
        };
        let spec = RunSpec {
            engine: "strata".into(),
            workload: "readrandom".into(),
            params: Params::default(),
            settings: EngineSettings::default(),
            dir: PathBuf::from("/nonexistent"),
            cold: false,
            settle: true,
            keep_data: false,
            preloaded: false,
            save_image: None,
            chain_records: None,
        };
        let r = run_child(
            &child,
            &spec,
            &ProgressBar::hidden(),
            None,
            Some(std::time::Duration::from_millis(300)),
        );
        let err = r.error.unwrap_or_default();
        assert!(err.starts_with(TIME_LIMIT_KILL), "{err}");
        // Without a limit a child that ends on its own is not "killed".
        let quick = ChildCommand {
            args: vec!["-c".into(), "exit 3".into()],
            ..child
        };
        let r = run_child(
            &quick,
            &spec,
            &ProgressBar::hidden(),
            None,
            Some(std::time::Duration::from_secs(600)),
        );
        let err = r.error.unwrap_or_default();
        assert!(
            err.contains("no result") && !err.starts_with(TIME_LIMIT_KILL),
            "{err}"
        );
    }

    /// A child killed mid-run leaves neither its directory nor a half-made
    /// image behind; with `keep_data` its directory stays.
    #[test]
    fn a_killed_childs_files_are_removed() {
        let name = format!("strata-bench-clean-{}", std::process::id());
        let root = std::env::temp_dir().join(&name);
        let dir = root.join(&name);
        let img = root.join("image");
        let shm = std::path::Path::new(crate::child::SHM_ROOT).join(format!("{name}-1"));
        let script = format!(
            "mkdir -p {d} {i} {s} && echo x > {d}/f && echo x > {i}/f && exec sleep 600",
            d = dir.display(),
            i = img.display(),
            s = shm.display()
        );
        let child = ChildCommand {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), script],
            env: Vec::new(),
        };
        let mut spec = RunSpec {
            engine: "strata".into(),
            workload: "fillrandom".into(),
            params: Params::default(),
            settings: EngineSettings::default(),
            dir: dir.clone(),
            cold: false,
            settle: true,
            keep_data: false,
            preloaded: false,
            save_image: Some(img.clone()),
            chain_records: None,
        };
        let limit = Some(std::time::Duration::from_secs(2));
        let r = run_child(&child, &spec, &ProgressBar::hidden(), None, limit);
        remove_leftovers(&spec);
        assert!(r.error.unwrap_or_default().starts_with(TIME_LIMIT_KILL));
        assert!(!dir.exists(), "the dead child's directory is left");
        assert!(!img.exists(), "the unfinished image is left");
        assert!(!shm.exists(), "the tmpfs directory is left");
        spec.keep_data = true;
        spec.save_image = None;
        let r = run_child(&child, &spec, &ProgressBar::hidden(), None, limit);
        remove_leftovers(&spec);
        assert!(r.error.is_some());
        assert!(dir.join("f").exists(), "keep_data keeps the directory");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn presets_are_valid() -> Result<(), BenchError> {
        for (name, _) in PRESETS {
            let c = preset(name, PathBuf::from("x"))?;
            c.params.validate()?;
            for w in &c.workloads {
                Workload::parse(w)?;
            }
            assert!(!c.engines.is_empty());
            if c.chain {
                let rows: Vec<Workload> = c
                    .workloads
                    .iter()
                    .map(|w| Workload::parse(w))
                    .collect::<Result<_, _>>()?;
                chain::check(&rows, &c.engines)?;
            }
        }
        assert!(preset("nope", PathBuf::from("x")).is_err());
        Ok(())
    }
}
