//! The report: JSON for machines, a terminal summary and Markdown for people.

use crate::child::RunResult;
use crate::config::Config;
use crate::engine::EngineSettings;
use crate::sys::{self, Machine};
use crate::workload::{Params, Workload};
use serde::{Deserialize, Serialize};

mod render;
mod rows;

pub use render::{markdown, summary};

/// An engine as the report names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineInfo {
    pub name: String,
    pub version: String,
    pub settings: String,
}

/// The whole report (`report.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub date: String,
    pub preset: String,
    pub machine: Machine,
    pub params: Params,
    pub settings: EngineSettings,
    pub settings_summary: String,
    pub cold_reads: bool,
    /// Loads and writing runs waited for the engine's background work.
    #[serde(default)]
    pub settled: bool,
    pub repeats: usize,
    pub comparators_compiled: bool,
    /// Ratios are to this engine (RocksDB when it ran, else the first).
    pub baseline: String,
    pub engines: Vec<EngineInfo>,
    pub notes: Vec<String>,
    pub results: Vec<RunResult>,
    /// The device's 4 KiB random I/O ceilings (the kvell preset).
    #[serde(default)]
    pub device: Option<crate::limits::Ceilings>,
    /// Each peer library loaded: version, build, the release check, path.
    #[serde(default)]
    pub peers: Vec<String>,
}

/// The median repeat of one engine × workload, with the spread of repeats.
#[derive(Debug, Clone)]
pub struct Cell<'a> {
    pub median: &'a RunResult,
    pub min_ops: f64,
    pub max_ops: f64,
    pub repeats: usize,
}

impl Report {
    pub fn new(
        cfg: &Config,
        engines: Vec<String>,
        results: Vec<RunResult>,
        notes: Vec<String>,
    ) -> Self {
        let baseline = engines
            .iter()
            .find(|e| e.as_str() == "rocksdb")
            .or(engines.first())
            .cloned()
            .unwrap_or_default();
        let infos = engines
            .iter()
            .map(|e| {
                let r = results.iter().find(|r| &r.engine == e && r.error.is_none());
                EngineInfo {
                    name: e.clone(),
                    version: r.map(|r| r.version.clone()).unwrap_or_default(),
                    settings: r.map(|r| r.engine_settings.clone()).unwrap_or_default(),
                }
            })
            .collect();
        Report {
            tool: format!("strata-bench {}", env!("CARGO_PKG_VERSION")),
            date: sys::now_utc(),
            preset: cfg.preset.clone(),
            machine: sys::machine(&cfg.out),
            params: cfg.params.clone(),
            settings: cfg.settings.clone(),
            settings_summary: cfg.settings.summary(),
            // A chain evicts the database before every row after its load.
            cold_reads: cfg.cold || cfg.chain,
            settled: cfg.settle,
            repeats: cfg.repeats,
            comparators_compiled: crate::engine::COMPARATORS,
            baseline,
            engines: infos,
            notes,
            results,
            device: None,
            peers: Vec::new(),
        }
    }

    /// Workload names in run order.
    pub fn workloads(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.results {
            if !v.contains(&r.workload) {
                v.push(r.workload.clone());
            }
        }
        v
    }

    /// The median repeat (by ops/s) of `engine` on `workload`.
    pub fn cell(&self, engine: &str, workload: &str) -> Option<Cell<'_>> {
        let mut rs: Vec<&RunResult> = self
            .results
            .iter()
            .filter(|r| r.engine == engine && r.workload == workload && r.error.is_none())
            .collect();
        if rs.is_empty() {
            return None;
        }
        rs.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
        Some(Cell {
            median: rs[rs.len() / 2],
            min_ops: rs[0].ops_per_sec,
            max_ops: rs[rs.len() - 1].ops_per_sec,
            repeats: rs.len(),
        })
    }

    /// Throughput of `engine` ÷ the baseline's on `workload`.
    pub fn ratio(&self, engine: &str, workload: &str) -> Option<f64> {
        let a = self.cell(engine, workload)?.median.ops_per_sec;
        let b = self.cell(&self.baseline, workload)?.median.ops_per_sec;
        (b > 0.0).then(|| a / b)
    }

    /// The fastest comparator (RocksDB, LevelDB, fjall) on `workload`: its
    /// name and median ops/s.
    pub fn best_peer(&self, workload: &str) -> Option<(&str, f64)> {
        self.engines
            .iter()
            .filter(|e| is_peer(&e.name))
            .filter_map(|e| {
                let c = self.cell(&e.name, workload)?;
                Some((e.name.as_str(), c.median.ops_per_sec))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// Throughput of `engine` ÷ the best comparator's on `workload` (every
    /// peer entry counts, so with `peer@own` beside `peer` each peer is
    /// taken at the better of its two views).
    pub fn ratio_to_best(&self, engine: &str, workload: &str) -> Option<f64> {
        let a = self.cell(engine, workload)?.median.ops_per_sec;
        let (_, b) = self.best_peer(workload)?;
        (b > 0.0).then(|| a / b)
    }

    /// As [`Report::ratio_to_best`] on the settle-inclusive rate
    /// ([`sustained`]) of each median run.
    pub fn sustained_ratio_to_best(&self, engine: &str, workload: &str) -> Option<f64> {
        let a = sustained(self.cell(engine, workload)?.median);
        let b = self
            .engines
            .iter()
            .filter(|e| is_peer(&e.name))
            .filter_map(|e| Some(sustained(self.cell(&e.name, workload)?.median)))
            .max_by(f64::total_cmp)?;
        (b > 0.0).then(|| a / b)
    }

    /// Failed repeats of `engine` on `workload`.
    pub fn failures(&self, engine: &str, workload: &str) -> usize {
        self.results
            .iter()
            .filter(|r| r.engine == engine && r.workload == workload && r.error.is_some())
            .count()
    }

    fn errors(&self) -> Vec<&RunResult> {
        self.results.iter().filter(|r| r.error.is_some()).collect()
    }
}

/// Operations per second counting the settle that paid the run's
/// background debt: ops ÷ (run + settle). Equal to the burst rate for a
/// run that wrote nothing (or was not settled).
pub fn sustained(r: &RunResult) -> f64 {
    let secs = r.secs + r.settle_secs.unwrap_or(0.0);
    if secs > 0.0 {
        r.ops as f64 / secs
    } else {
        r.ops_per_sec
    }
}

/// CPU microseconds of the whole process per operation (the run, its
/// settle and the close; every thread).
pub fn cpu_us_per_op(r: &RunResult) -> Option<f64> {
    (r.ops > 0).then(|| r.cpu_secs * 1e6 / r.ops as f64)
}

/// True for the comparators (RocksDB, LevelDB, fjall), false for strata's
/// own configurations.
pub fn is_peer(engine: &str) -> bool {
    crate::engine::EngineKind::parse(engine).is_ok_and(|k| k.is_comparator())
}

/// Workloads the report's write-amplification checks apply to.
pub fn is_write_workload(name: &str) -> bool {
    Workload::parse(name).is_ok_and(|w| w.writes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::OWN_DEFAULTS_PREFIX;
    use crate::runner::{preset, OWN_DEFAULTS_NOTE};
    use crate::BenchError;

    fn report(own_defaults: bool) -> Result<Report, BenchError> {
        let mut cfg = preset("tiny", std::env::temp_dir())?;
        cfg.settings.own_defaults = own_defaults;
        let engines = vec!["strata".to_string(), "rocksdb".to_string()];
        let results = engines
            .iter()
            .map(|e| RunResult {
                engine: e.clone(),
                workload: "fillrandom".into(),
                version: format!("{e} 1"),
                engine_settings: format!("{OWN_DEFAULTS_PREFIX} (test): {e}_buffer=7"),
                ops: 10,
                secs: 1.0,
                ops_per_sec: 10.0,
                ..RunResult::default()
            })
            .collect();
        let notes = if own_defaults {
            vec![OWN_DEFAULTS_NOTE.to_string()]
        } else {
            Vec::new()
        };
        Ok(Report::new(&cfg, engines, results, notes))
    }

    #[test]
    fn own_defaults_runs_say_so_and_list_each_engine() -> Result<(), BenchError> {
        let r = report(true)?;
        let text = summary(&r);
        let header = text.lines().next().unwrap_or_default();
        assert!(header.contains("OWN DEFAULTS"), "{header}");
        assert!(text.contains("NOTE: own-defaults mode"), "{text}");
        assert!(
            text.contains("strata_buffer=7") && text.contains("rocksdb_buffer=7"),
            "{text}"
        );
        let md = markdown(&r, &[]);
        assert!(md.contains("Settings: OWN DEFAULTS"), "{md}");
        assert!(md.contains("## Each engine's own defaults"), "{md}");
        let json = serde_json::to_string(&r)?;
        assert!(json.contains("\"own_defaults\":true"), "{json}");

        // Without the mode the header and the tables are as before.
        let r = report(false)?;
        let text = summary(&r);
        assert!(
            !text.contains("OWN DEFAULTS") && !text.contains("own-defaults"),
            "{text}"
        );
        assert!(!text.contains("rocksdb_buffer=7"), "{text}");
        let md = markdown(&r, &[]);
        assert!(md.contains("Every engine: WAL on"), "{md}");
        assert!(!md.contains("Each engine's own defaults"), "{md}");
        Ok(())
    }

    #[test]
    fn runs_the_host_took_time_from_are_footnoted() -> Result<(), BenchError> {
        let mut r = report(false)?;
        assert!(!summary(&r).contains("Host steal"));
        for (res, steal) in r.results.iter_mut().zip([0.31, 0.01]) {
            res.steal_secs = Some(steal);
        }
        let text = summary(&r);
        assert!(text.contains("Host steal during the median runs"), "{text}");
        assert!(text.contains("strata 0.31"), "{text}");
        assert!(!text.contains("rocksdb 0.01"), "{text}");
        assert!(markdown(&r, &[]).contains("strata 0.31"));
        Ok(())
    }

    /// Linux reports steal (zero on bare metal) in `/proc/stat`.
    #[test]
    #[cfg(target_os = "linux")]
    fn steal_is_read_from_proc_stat() {
        let s = crate::sys::steal_secs().expect("steal in /proc/stat");
        assert!(s >= 0.0 && s.is_finite(), "{s}");
    }
}
