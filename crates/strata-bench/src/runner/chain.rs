//! Chains (`Config::chain`, db_bench's `--use_existing_db`): one database
//! per engine, loaded by the first row and kept for every later row, so a
//! data set too large to copy for each run is loaded once.
//!
//! The first row must be `ycsb-load`, run once per engine into an empty
//! directory (its figures are one run's, not a median). Every later row
//! runs on what the rows before it left, in the listed order: its records
//! (the load's
//! plus every insert since), under YCSB's scattered keys, so db_bench's
//! readrandom and seekrandom read the same records YCSB's rows do. Before
//! each of them the parent evicts the database's files from the page
//! cache, as a copy from an image would be. A failed load fails the
//! engine's later runs at once.

use super::spawn::sanitize;
use crate::child::{RunResult, RunSpec};
use crate::workload::{Preload, Workload};
use crate::BenchError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The first row of a chain.
pub const LOAD_ROW: &str = "ycsb-load";

/// Checks that `rows` (as parsed) can run as a chain for `engines`: the
/// first is `ycsb-load`, every later one reads or writes loaded records
/// (no other load, and no deletes: the chain's count of records only
/// grows), and no engine keeps its database outside the run's directory
/// (`db_dir=`, `fast_dir=`, tmpfs).
pub fn check(rows: &[Workload], engines: &[String]) -> Result<(), BenchError> {
    let usage = |m: String| Err(BenchError::Usage(format!("--chain: {m}")));
    match rows.first() {
        Some(Workload::YcsbLoad) => {}
        _ => return usage(format!("the first row must be {LOAD_ROW}")),
    }
    for w in &rows[1..] {
        if matches!(w, Workload::DeleteRandom | Workload::DeleteBlocks { .. }) {
            return usage(format!(
                "{} deletes records, which the rows after it would still count",
                w.name()
            ));
        }
        match w.preload() {
            Preload::Ycsb | Preload::DbBench => {}
            _ => {
                return usage(format!(
                    "{} does not run on loaded records (a chain has one load, its first row)",
                    w.name()
                ))
            }
        }
    }
    if let Some(e) = engines.iter().find(|e| super::placed_outside(e)) {
        return usage(format!(
            "{e} keeps its database outside the run's directory, which a chain keeps"
        ));
    }
    Ok(())
}

/// The chains of one bench: each engine's database and what it holds.
pub struct Chains {
    root: PathBuf,
    /// Records in each engine's database (the load's plus its inserts).
    records: BTreeMap<String, u64>,
    /// Engines whose last load failed, with why.
    failed: BTreeMap<String, String>,
}

impl Chains {
    /// Chains whose databases live under `data`.
    pub fn new(data: &Path) -> Chains {
        Chains {
            root: data.join("chain"),
            records: BTreeMap::new(),
            failed: BTreeMap::new(),
        }
    }

    /// The database directory of `engine`'s chain.
    pub fn dir(&self, engine: &str) -> PathBuf {
        self.root.join(sanitize(engine))
    }

    /// Makes `spec` (row `row` of the chain, 0 the load) run on its
    /// engine's chain: the load into an empty directory with no run budget
    /// (it must finish), every later row on the kept database, evicted
    /// first. Returns why it cannot run when the engine's load failed.
    pub fn prepare(&self, spec: &mut RunSpec, row: usize) -> Result<(), String> {
        spec.dir = self.dir(&spec.engine);
        spec.keep_data = true;
        spec.save_image = None;
        if row == 0 {
            spec.preloaded = false;
            spec.chain_records = None;
            spec.params.max_run_secs = None;
            return Ok(());
        }
        if let Some(why) = self.failed.get(&spec.engine) {
            return Err(format!("the chain's load failed: {why}"));
        }
        let Some(&records) = self.records.get(&spec.engine) else {
            return Err("the chain has no load for this engine".into());
        };
        spec.preloaded = true;
        spec.chain_records = Some(records);
        crate::sys::drop_cache(&spec.dir);
        Ok(())
    }

    /// Takes in the result of `spec` (row `row`): a load sets the engine's
    /// records (or marks its chain failed and removes what it left); a
    /// later row adds its inserts (a failed one's are not known: later
    /// inserts may then overwrite some of them).
    pub fn record(&mut self, spec: &RunSpec, row: usize, r: &RunResult) {
        let e = spec.engine.clone();
        if row == 0 {
            match &r.error {
                Some(err) => {
                    let _ = std::fs::remove_dir_all(&spec.dir);
                    self.records.remove(&e);
                    self.failed.insert(e, err.clone());
                }
                None => {
                    self.failed.remove(&e);
                    self.records.insert(e, spec.params.num);
                }
            }
            return;
        }
        let inserts = r.op_counts.get("insert").copied().unwrap_or(0);
        if let Some(n) = self.records.get_mut(&e) {
            *n += inserts;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineSettings;
    use crate::workload::Params;

    fn rows(names: &[&str]) -> Vec<Workload> {
        names
            .iter()
            .map(|n| Workload::parse(n).expect("row"))
            .collect()
    }

    #[test]
    fn a_chain_starts_with_its_load_and_has_no_other() {
        let e = vec!["strata".to_string(), "rocksdb".to_string()];
        assert!(check(&rows(&["ycsb-load", "readrandom", "ycsb-e", "ycsb-a"]), &e).is_ok());
        assert!(check(&rows(&["readrandom", "ycsb-c"]), &e).is_err());
        assert!(check(&rows(&["ycsb-load", "fillrandom"]), &e).is_err());
        assert!(check(&rows(&["ycsb-load", "readrandom-after-ranges"]), &e).is_err());
        assert!(check(&rows(&["ycsb-load", "deleterandom"]), &e).is_err());
        assert!(check(&rows(&["ycsb-load", "deleterange"]), &e).is_err());
        let shm = vec![format!("strata{}", crate::engine::SHM)];
        assert!(check(&rows(&["ycsb-load", "ycsb-c"]), &shm).is_err());
    }

    /// The load runs unbudgeted into the chain's directory; later rows run
    /// on it with the records so far; a failed load fails them.
    #[test]
    fn later_rows_run_on_the_kept_load() {
        let root = std::env::temp_dir().join(format!("strata-bench-chain-{}", std::process::id()));
        let mut chains = Chains::new(&root);
        let spec = |w: &str| RunSpec {
            engine: "strata".into(),
            workload: w.into(),
            params: Params {
                num: 1000,
                max_run_secs: Some(5.0),
                ..Params::default()
            },
            settings: EngineSettings::default(),
            dir: root.join("elsewhere"),
            cold: false,
            settle: true,
            keep_data: false,
            preloaded: false,
            save_image: None,
            chain_records: None,
        };
        let mut load = spec("ycsb-load");
        assert!(chains.prepare(&mut load, 0).is_ok());
        assert_eq!(load.dir, chains.dir("strata"));
        assert!(load.keep_data && !load.preloaded && load.params.max_run_secs.is_none());
        let mut early = spec("ycsb-c");
        assert!(chains.prepare(&mut early, 1).is_err(), "no load yet");
        chains.record(&load, 0, &RunResult::default());
        let mut e = spec("ycsb-e");
        assert!(chains.prepare(&mut e, 1).is_ok());
        assert_eq!((e.preloaded, e.chain_records), (true, Some(1000)));
        assert_eq!(
            e.params.max_run_secs,
            Some(5.0),
            "later rows keep the budget"
        );
        let mut done = RunResult::default();
        done.op_counts.insert("insert".into(), 7);
        chains.record(&e, 1, &done);
        let mut a = spec("ycsb-a");
        assert!(chains.prepare(&mut a, 2).is_ok());
        assert_eq!(a.chain_records, Some(1007));
        let failed = RunResult {
            error: Some("killed".into()),
            ..RunResult::default()
        };
        chains.record(&load, 0, &failed);
        let mut after = spec("ycsb-a");
        let why = chains.prepare(&mut after, 2).err().unwrap_or_default();
        assert!(why.contains("killed"), "{why}");
    }
}
