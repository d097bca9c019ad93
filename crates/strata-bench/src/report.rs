//! The report: JSON for machines, a terminal summary and Markdown for people.

use crate::child::RunResult;
use crate::engine::EngineSettings;
use crate::runner::Config;
use crate::sys::{self, Machine};
use crate::workload::{Params, Workload};
use crate::BenchError;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

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
            cold_reads: cfg.cold,
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

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.prec$}"))
}

fn kops(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}

/// Rows of one workload's table: header + one row per engine.
fn workload_rows(r: &Report, w: &str) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "engine",
        "ops/s",
        "ratio",
        "spread",
        "sustained",
        "settle s",
        "MB/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
        "WA",
        "WA win",
        "WA eng",
        "space",
        "CPU s",
        "CPU us/op",
        "RSS MiB",
        "stall s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    for e in &r.engines {
        let failed = r.failures(&e.name, w);
        let Some(c) = r.cell(&e.name, w) else {
            rows.push(vec![e.name.clone(), format!("failed ({failed})")]);
            continue;
        };
        let m = c.median;
        let spread = if c.repeats > 1 && m.ops_per_sec > 0.0 {
            format!(
                "±{:.0}%",
                (c.max_ops - c.min_ops) / 2.0 / m.ops_per_sec * 100.0
            )
        } else {
            "-".into()
        };
        // A run its budget cut short is marked: its rate covers fewer
        // operations than the others'.
        let mut rate = if m.cut_short {
            format!("{}*", kops(m.ops_per_sec))
        } else {
            kops(m.ops_per_sec)
        };
        if failed > 0 {
            rate.push_str(&format!(" ({failed} failed)"));
        }
        rows.push(vec![
            e.name.clone(),
            rate,
            opt(r.ratio(&e.name, w), 2),
            spread,
            kops(sustained(m)),
            opt(m.settle_secs, 2),
            format!("{:.1}", m.mb_per_sec),
            format!("{:.1}", m.latency.p50_us),
            format!("{:.1}", m.latency.p99_us),
            format!("{:.1}", m.latency.p999_us),
            format!("{:.0}", m.latency.max_us),
            opt(m.wa_device, 2),
            opt(m.wa_window, 2),
            opt(m.wa_engine, 2),
            opt(m.space_amp, 2),
            format!("{:.1}", m.cpu_secs),
            opt(cpu_us_per_op(m), 2),
            format!("{:.0}", m.max_rss_mib),
            opt(m.stall_secs, 2),
        ]);
    }
    rows
}

/// The footnote of a workload whose median run its budget cut short.
fn cut_note(r: &Report, w: &str) -> Option<String> {
    let cut: Vec<&str> = r
        .engines
        .iter()
        .filter(|e| r.cell(&e.name, w).is_some_and(|c| c.median.cut_short))
        .map(|e| e.name.as_str())
        .collect();
    (!cut.is_empty()).then(|| {
        format!(
            "* {}: stopped by the run budget (--max-run-secs) before all its operations; the rate is over those done.",
            cut.join(", ")
        )
    })
}

/// Host steal at or above which a median run is footnoted (CPU seconds).
const STEAL_NOTE_SECS: f64 = 0.05;

/// The footnote of a workload whose median runs lost CPU time to the host
/// (`RunResult::steal_secs`): their latency maxima may be the host's.
fn steal_note(r: &Report, w: &str) -> Option<String> {
    let lost: Vec<String> = r
        .engines
        .iter()
        .filter_map(|e| {
            let s = r.cell(&e.name, w)?.median.steal_secs?;
            (s >= STEAL_NOTE_SECS).then(|| format!("{} {s:.2}", e.name))
        })
        .collect();
    (!lost.is_empty()).then(|| {
        format!(
            "Host steal during the median runs (CPU s the hypervisor took; no thread here ran): {}.",
            lost.join(", ")
        )
    })
}

/// Rows of the read/write split of a mix workload (YCSB, U1…U9): header +
/// one row per engine; `None` when the workload has no split.
fn mix_rows(r: &Report, w: &str) -> Option<Vec<Vec<String>>> {
    let has = r
        .results
        .iter()
        .any(|x| x.workload == w && x.read_latency.is_some());
    if !has {
        return None;
    }
    let mut rows = vec![[
        "engine",
        "read mean us",
        "read p99 us",
        "write mean us",
        "write p99 us",
        "device MB written",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for e in &r.engines {
        let Some(c) = r.cell(&e.name, w) else {
            continue;
        };
        let m = c.median;
        let l = |x: &Option<crate::child::Latency>, f: fn(&crate::child::Latency) -> f64| {
            x.as_ref().map_or("-".into(), |l| format!("{:.1}", f(l)))
        };
        rows.push(vec![
            e.name.clone(),
            l(&m.read_latency, |l| l.mean_us),
            l(&m.read_latency, |l| l.p99_us),
            l(&m.write_latency, |l| l.mean_us),
            l(&m.write_latency, |l| l.p99_us),
            format!("{:.1}", m.device_write_bytes as f64 / 1e6),
        ]);
    }
    Some(rows)
}

/// Mean / p99 read latency of every U workload run, one column per
/// engine; `None` without U workloads.
fn u_series_rows(r: &Report) -> Option<Vec<Vec<String>>> {
    let us: Vec<String> = r
        .workloads()
        .into_iter()
        .filter(|w| w.starts_with('u'))
        .collect();
    if us.is_empty() {
        return None;
    }
    let mut head = vec!["workload".to_string()];
    head.extend(r.engines.iter().map(|e| e.name.clone()));
    let mut rows = vec![head];
    for w in us {
        let mut row = vec![w.clone()];
        row.extend(r.engines.iter().map(|e| {
            r.cell(&e.name, &w)
                .and_then(|c| c.median.read_latency.clone())
                .map_or("-".into(), |l| {
                    format!("{:.1} / {:.1}", l.mean_us, l.p99_us)
                })
        }));
        rows.push(row);
    }
    Some(rows)
}

/// Compaction figures of every strata run (CoPro): bandwidth =
/// compaction input + output bytes over compaction wall time, CPU seconds
/// of the compaction threads (and per compaction wall second), busy
/// seconds of the read / merge / write stages, sub-tasks (pipelined of
/// them, offloaded of them, fallbacks).
/// `None` unless some run cut a compaction into sub-tasks or pipelined one.
fn compaction_rows(r: &Report) -> Option<Vec<Vec<String>>> {
    let mut rows = vec![[
        "workload",
        "engine",
        "compactions",
        "bandwidth MB/s",
        "CPU s",
        "CPU/wall",
        "busy read/merge/write s",
        "sub-tasks (pipelined, offloaded, fallbacks)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    let mut split = false;
    for w in r.workloads() {
        for e in &r.engines {
            let Some(st) = r
                .cell(&e.name, &w)
                .and_then(|c| c.median.engine_stats.clone())
                .and_then(|s| s.get("lsm").cloned())
            else {
                continue;
            };
            let g = |k: &str| st.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
            let micros = g("compaction_micros");
            let bytes = g("compaction_bytes_read") + g("compaction_bytes_written");
            split |= g("compaction_subtasks") > g("compaction_count")
                || g("compaction_pipelined_subtasks") > 0;
            let bw = if micros == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", bytes as f64 / micros as f64)
            };
            let s = |k: &str| format!("{:.2}", g(k) as f64 / 1e6);
            rows.push(vec![
                w.clone(),
                e.name.clone(),
                g("compaction_count").to_string(),
                bw,
                s("compaction_cpu_micros"),
                if micros == 0 {
                    "-".to_string()
                } else {
                    format!("{:.2}", g("compaction_cpu_micros") as f64 / micros as f64)
                },
                format!(
                    "{} / {} / {}",
                    s("compaction_read_busy_micros"),
                    s("compaction_merge_busy_micros"),
                    s("compaction_write_busy_micros")
                ),
                format!(
                    "{} ({}, {}, {})",
                    g("compaction_subtasks"),
                    g("compaction_pipelined_subtasks"),
                    g("compaction_offloaded_subtasks"),
                    g("compaction_offload_fallbacks")
                ),
            ]);
        }
    }
    (split && rows.len() > 1).then_some(rows)
}

/// The matrix container's figures (MatrixKV), for every run when some
/// engine runs `l0=matrix`: throughput, write amplification (strata's own
/// count: tmpfs writes do not show in `/proc/self/io`; the device's for
/// the others), the deepest non-empty level, stall seconds, the
/// per-second timeline's minimum, mean and seconds below half the mean,
/// and the container's rows, column compactions and their mean size, key
/// comparisons per row searched, rows searched per lookup, segments skipped.
fn matrix_rows(r: &Report) -> Option<Vec<Vec<String>>> {
    if !r.engines.iter().any(|e| e.name.contains("l0=matrix")) {
        return None;
    }
    let mut rows = vec![[
        "workload",
        "engine",
        "ops/s",
        "WA",
        "deepest",
        "stall s",
        "timeline min/mean",
        "s < mean/2",
        "rows",
        "columns (mean MiB)",
        "cmp/row",
        "rows/lookup",
        "segments skipped",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for w in r.workloads() {
        for e in &r.engines {
            let Some(c) = r.cell(&e.name, &w) else {
                continue;
            };
            let m = c.median;
            let deepest = m
                .levels
                .iter()
                .rposition(|l| l.files > 0)
                .map_or("-".to_string(), |l| format!("L{l}"));
            let mx = m
                .engine_stats
                .as_ref()
                .and_then(|s| s.get("lsm"))
                .and_then(|s| s.get("matrix"));
            let g = |k: &str| {
                mx.and_then(|x| x.get(k))
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0)
            };
            let per = |a: u64, b: u64| {
                if b == 0 {
                    "-".to_string()
                } else {
                    format!("{:.1}", a as f64 / b as f64)
                }
            };
            let matrix = mx.is_some() && e.name.contains("l0=matrix");
            let wa = m.wa_engine.or(m.wa_device);
            rows.push(vec![
                w.clone(),
                e.name.clone(),
                kops(m.ops_per_sec),
                opt(wa, 2),
                deepest,
                opt(m.stall_secs, 1),
                format!("{} / {}", kops(m.timeline_min), kops(m.timeline_mean)),
                m.seconds_below_half_mean.to_string(),
                if matrix {
                    g("rows").to_string()
                } else {
                    "-".into()
                },
                if matrix {
                    format!(
                        "{} ({})",
                        g("column_compactions"),
                        per(g("column_bytes") >> 20, g("column_compactions"))
                    )
                } else {
                    "-".into()
                },
                if matrix {
                    per(g("comparisons"), g("rows_searched"))
                } else {
                    "-".into()
                },
                if matrix {
                    per(g("rows_searched"), g("lookups"))
                } else {
                    "-".into()
                },
                if matrix {
                    g("segments_skipped").to_string()
                } else {
                    "-".into()
                },
            ]);
        }
    }
    Some(rows)
}

/// KVell's figures and every engine's share of the device: per
/// workload and engine, ops/s as a share of the device's random 4 KiB
/// QD64 read ceiling, device I/O per op, and for KVell the I/Os per
/// submission and the requests served per worker wake-up.
fn kvell_rows(r: &Report) -> Option<Vec<Vec<String>>> {
    let ceiling = r.device.as_ref().map(|d| d.read_qd64_iops)?;
    let mut rows = vec![[
        "workload",
        "engine",
        "ops/s",
        "% of QD64 read IOPS",
        "dev KiB read/op",
        "dev KiB written/op",
        "p99 us",
        "max us",
        "timeline min/mean",
        "I/Os per batch",
        "requests per wake-up",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for w in r.workloads() {
        for e in &r.engines {
            let Some(c) = r.cell(&e.name, &w) else {
                continue;
            };
            let m = c.median;
            let kv = m.engine_stats.as_ref().and_then(|s| s.get("kvell"));
            let f = |k: &str| {
                kv.and_then(|x| x.get(k))
                    .and_then(serde_json::Value::as_f64)
                    .map_or("-".to_string(), |v| format!("{v:.1}"))
            };
            let per_op = |b: u64| {
                if m.ops == 0 {
                    "-".to_string()
                } else {
                    format!("{:.1}", b as f64 / 1024.0 / m.ops as f64)
                }
            };
            rows.push(vec![
                w.clone(),
                e.name.clone(),
                kops(m.ops_per_sec),
                format!("{:.0}%", m.ops_per_sec / ceiling.max(1.0) * 100.0),
                per_op(m.device_read_bytes),
                per_op(m.device_write_bytes),
                format!("{:.0}", m.latency.p99_us),
                format!("{:.0}", m.latency.max_us),
                format!("{:.0}/{:.0}", m.timeline_min, m.timeline_mean),
                f("mean_batch"),
                f("mean_requests_per_batch"),
            ]);
        }
    }
    Some(rows)
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

/// Ratio table: one row per workload, one column per engine.
fn ratio_rows(r: &Report) -> Vec<Vec<String>> {
    let ours: Vec<&str> = r
        .engines
        .iter()
        .map(|e| e.name.as_str())
        .filter(|e| !is_peer(e))
        .collect();
    let peers = r.engines.iter().any(|e| is_peer(&e.name));
    let mut head = vec!["workload".to_string()];
    head.extend(r.engines.iter().map(|e| format!("{} ops/s", e.name)));
    head.extend(
        r.engines
            .iter()
            .map(|e| format!("{} / {}", e.name, r.baseline)),
    );
    if peers {
        head.push("best peer".into());
        head.extend(ours.iter().map(|e| format!("{e} / best peer")));
        head.extend(ours.iter().map(|e| format!("{e} / best peer, sustained")));
    }
    let mut rows = vec![head];
    for w in r.workloads() {
        let mut row = vec![w.clone()];
        row.extend(r.engines.iter().map(|e| {
            r.cell(&e.name, &w).map_or_else(
                || format!("failed ({})", r.failures(&e.name, &w)),
                |c| kops(c.median.ops_per_sec),
            )
        }));
        row.extend(r.engines.iter().map(|e| opt(r.ratio(&e.name, &w), 2)));
        if peers {
            row.push(r.best_peer(&w).map_or("-".into(), |(n, _)| n.to_string()));
            row.extend(ours.iter().map(|e| opt(r.ratio_to_best(e, &w), 2)));
            row.extend(
                ours.iter()
                    .map(|e| opt(r.sustained_ratio_to_best(e, &w), 2)),
            );
        }
        rows.push(row);
    }
    rows
}

fn text_table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for (i, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == 0 {
                    format!("{v:<w$}", w = widths[c])
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(s, "  {}", line.join("  ").trim_end());
        if i == 0 {
            let _ = writeln!(
                s,
                "  {}",
                "-".repeat(widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1))
            );
        }
    }
    s
}

fn md_table(rows: &[Vec<String>]) -> String {
    let mut s = String::new();
    for (i, r) in rows.iter().enumerate() {
        let _ = writeln!(s, "| {} |", r.join(" | "));
        if i == 0 {
            let _ = writeln!(s, "|{}", " --- |".repeat(r.len()));
        }
    }
    s
}

/// The terminal summary.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "strata bench, preset {} ({}), {}",
        r.preset, r.date, r.settings_summary
    );
    let _ = writeln!(
        s,
        "{} keys of {} B, values of {} B, {} ops, {} thread(s); ratios are ops/s ÷ {}",
        r.params.num,
        r.params.key_size,
        r.params.value_size,
        r.params.ops,
        r.params.threads,
        r.baseline
    );
    for n in &r.notes {
        let _ = writeln!(s, "NOTE: {n}");
    }
    for p in &r.peers {
        let _ = writeln!(s, "PEER: {p}");
    }
    for e in &r.engines {
        if r.settings.own_defaults {
            // The run's point is each engine's own configuration: list it.
            let _ = writeln!(s, "  {:<8} {}: {}", e.name, e.version, e.settings);
        } else {
            let _ = writeln!(s, "  {:<8} {}", e.name, e.version);
        }
    }
    for w in r.workloads() {
        let desc = r
            .results
            .iter()
            .find(|x| x.workload == w && x.error.is_none())
            .map(|x| x.description.clone());
        let _ = writeln!(s, "\n{w}: {}", desc.unwrap_or_default());
        s.push_str(&text_table(&workload_rows(r, &w)));
        for note in [cut_note(r, &w), steal_note(r, &w)].into_iter().flatten() {
            let _ = writeln!(s, "  {note}");
        }
        if let Some(rows) = mix_rows(r, &w) {
            let _ = writeln!(
                s,
                "  reads and writes apart (the median-throughput repeat):"
            );
            s.push_str(&text_table(&rows));
        }
    }
    if let Some(rows) = u_series_rows(r) {
        let _ = writeln!(s, "\nread latency across U1…U9, mean / p99 us:");
        s.push_str(&text_table(&rows));
    }
    if let Some(rows) = compaction_rows(r) {
        let _ = writeln!(s, "\ncompaction (median repeat; strata engines):");
        s.push_str(&text_table(&rows));
    }
    if let Some(rows) = matrix_rows(r) {
        let _ = writeln!(s, "\nmatrix container (MatrixKV; median repeat):");
        s.push_str(&text_table(&rows));
    }
    if let Some(d) = &r.device {
        let _ = writeln!(
            s,
            "\ndevice ceilings (4 KiB random, {}{}): reads {:.0} IOPS at QD1, {:.0} at QD64; writes {:.0} at QD1, {:.0} at QD64",
            d.backend,
            if d.direct { ", O_DIRECT" } else { "" },
            d.read_qd1_iops,
            d.read_qd64_iops,
            d.write_qd1_iops,
            d.write_qd64_iops
        );
    }
    if let Some(rows) = kvell_rows(r) {
        let _ = writeln!(s, "KVell and the device (median repeat):");
        s.push_str(&text_table(&rows));
    }
    let _ = writeln!(
        s,
        "\nthroughput ratio to {} and to the best peer on each workload:",
        r.baseline
    );
    s.push_str(&text_table(&ratio_rows(r)));
    for e in r.errors() {
        let _ = writeln!(
            s,
            "FAILED {} {}: {}",
            e.engine,
            e.workload,
            e.error.as_deref().unwrap_or("")
        );
    }
    s
}

/// `report.md`.
pub fn markdown(r: &Report, charts: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# strata benchmark report\n");
    let _ = writeln!(
        s,
        "Preset **{}**, {}. Machine: {} cores ({}), {:.1} GiB memory, {}; data on {} (read-ahead {}); kernel {}.\n",
        r.preset,
        r.date,
        r.machine.cores,
        r.machine.cpu_model,
        r.machine.memory_bytes as f64 / (1u64 << 30) as f64,
        r.machine.os,
        r.machine.filesystem,
        r.machine
            .read_ahead_kb
            .map_or("unknown".to_string(), |k| format!("{k} KiB")),
        r.machine.kernel
    );
    let _ = writeln!(
        s,
        "Dataset: {} keys × ({} B key + {} B value) = {:.0} MiB of user data; {} ops per run; {} thread(s); \
         {} repeat(s) (median shown). {}: {}. Every row starts with the database files evicted from \
         the page cache: {} (otherwise only rows named `WORKLOAD:cold` do, and runs started from a \
         reused load). Loads and writing runs wait for background work to finish: {}.\n",
        r.params.num,
        r.params.key_size,
        r.params.value_size,
        (r.params.num * (r.params.key_size + r.params.value_size) as u64) as f64 / (1u64 << 20) as f64,
        r.params.ops,
        r.params.threads,
        r.repeats,
        if r.settings.own_defaults {
            "Settings"
        } else {
            "Every engine"
        },
        r.settings_summary,
        r.cold_reads,
        r.settled
    );
    if r.params.compression_ratio < 1.0 {
        let _ = writeln!(
            s,
            "Values compress to about {:.0} % of their size (each 100 bytes: that share random, repeated).\n",
            r.params.compression_ratio * 100.0
        );
    }
    for n in &r.notes {
        let _ = writeln!(s, "> **Note:** {n}\n");
    }
    if !r.peers.is_empty() {
        let _ = writeln!(s, "Peer libraries:\n");
        for p in &r.peers {
            let _ = writeln!(s, "- {p}");
        }
        let _ = writeln!(s);
    }
    if r.settings.own_defaults {
        let _ = writeln!(s, "## Each engine's own defaults (effective settings)\n");
        for e in &r.engines {
            let _ = writeln!(s, "- **{}** ({}): `{}`", e.name, e.version, e.settings);
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "## Throughput relative to {} and to the best peer\n",
        r.baseline
    );
    s.push_str(&md_table(&ratio_rows(r)));
    if let Some(rows) = u_series_rows(r) {
        let _ = writeln!(s, "\n## Read latency across U1…U9 (mean / p99, µs)\n");
        s.push_str(&md_table(&rows));
    }
    if let Some(rows) = compaction_rows(r) {
        let _ = writeln!(
            s,
            "\n## Compaction (CoPro)\n\nBandwidth: compaction input + output bytes ÷ compaction wall time. \
             CPU: seconds of every compaction thread. Busy: seconds each pipeline stage worked (a linear \
             sub-task counts as merge).\n"
        );
        s.push_str(&md_table(&rows));
    }
    if let Some(rows) = matrix_rows(r) {
        let _ = writeln!(
            s,
            "\n## Matrix container (MatrixKV)\n\nWA: strata's own count of bytes written (WAL, flushes \
             into rows or tables, compactions, manifest) ÷ user bytes, since writes to tmpfs do not show in \
             `/proc/self/io`; the device's count for the other engines. deepest: the last non-empty level at \
             the end. timeline: operations per full second of the run. rows: rows in the container at the \
             end; columns: column compactions and the mean row bytes each took; cmp/row: key comparisons \
             per row searched by a lookup (the hints narrow the search); rows/lookup: rows searched per \
             lookup that reached the container; segments skipped: by their bloom filters. `@shm`: the \
             run's directory on tmpfs (`/dev/shm`).\n"
        );
        s.push_str(&md_table(&rows));
    }
    if let (Some(d), Some(rows)) = (&r.device, kvell_rows(r)) {
        let _ = writeln!(
            s,
            "\n## KVell and the device\n\nThe device's own ceilings, 4 KiB random I/O on a {} MiB \
             file ({}{}): reads {:.0} IOPS at queue depth 1 and {:.0} at 64; writes {:.0} at 1 and {:.0} at 64. \
             % of QD64 read IOPS: the engine's ops/s against that read ceiling. dev KiB/op: bytes the \
             process read from or wrote to the device per operation (`/proc/self/io`). I/Os per batch: \
             KVell's page I/Os per submission; requests per wake-up: callers' requests a KVell worker \
             served together.\n",
            d.file_mib,
            d.backend,
            if d.direct { ", O_DIRECT" } else { "" },
            d.read_qd1_iops,
            d.read_qd64_iops,
            d.write_qd1_iops,
            d.write_qd64_iops
        );
        s.push_str(&md_table(&rows));
    }
    for c in charts {
        let _ = writeln!(s, "\n![{c}]({c}.svg)");
    }
    let _ = writeln!(s, "\n## Per workload\n");
    let _ = writeln!(
        s,
        "ratio: ops/s ÷ {}'s. spread: half the min–max range of the repeats. WA: bytes the block device \
         under the run's directory wrote (its sectors-written counter, dirty pages written back by `syncfs` \
         at both ends) from the start of the run until the engine was idle again (its due flushes and \
         compactions done) and closed, ÷ user bytes written; pages written and deleted before they were \
         written back (a log removed after its flush) are not device writes; no engine flushes its \
         memtable at close with the WAL on. Without a block device, the pages the process dirtied \
         (`/proc/self/io` write_bytes). WA win: the pages dirtied over the measured operations only. \
         WA eng: strata's own count over the same span as WA. space: directory size after close ÷ live user bytes. \
         stall: time writes were stopped or slowed (strata only).\n",
        r.baseline
    );
    for w in r.workloads() {
        let desc = r
            .results
            .iter()
            .find(|x| x.workload == w && x.error.is_none())
            .map(|x| x.description.clone());
        let _ = writeln!(s, "### {w}\n\n{}\n", desc.unwrap_or_default());
        s.push_str(&md_table(&workload_rows(r, &w)));
        for note in [cut_note(r, &w), steal_note(r, &w)].into_iter().flatten() {
            let _ = writeln!(s, "\n{note}");
        }
        if let Some(rows) = mix_rows(r, &w) {
            let _ = writeln!(
                s,
                "\nReads and writes apart (the median-throughput repeat):\n"
            );
            s.push_str(&md_table(&rows));
        }
        let shapes: Vec<String> = r
            .engines
            .iter()
            .filter_map(|e| {
                let c = r.cell(&e.name, &w)?;
                let files: Vec<String> = c
                    .median
                    .levels
                    .iter()
                    .map(|l| l.files.to_string())
                    .collect();
                Some(format!("{}: [{}]", e.name, files.join(" ")))
            })
            .collect();
        let _ = writeln!(s, "\nfiles per level at the end: {}\n", shapes.join("; "));
    }
    let errs = r.errors();
    if !errs.is_empty() {
        let _ = writeln!(s, "## Failed runs\n");
        for e in errs {
            let _ = writeln!(
                s,
                "- {} {}: {}",
                e.engine,
                e.workload,
                e.error.as_deref().unwrap_or("")
            );
        }
    }
    let _ = writeln!(s, "\n## Engines\n");
    for e in &r.engines {
        let _ = writeln!(s, "- **{}** ({}): `{}`", e.name, e.version, e.settings);
    }
    let _ = writeln!(
        s,
        "\nRaw figures, per-second timelines and op counts: `report.json`."
    );
    s
}

/// Writes report.json, report.md and the charts into `out`; prints the summary.
/// Writes `report.partial.json`: the runs so far of a bench still going
/// (a run of hours that is stopped keeps what it measured). `write_all`
/// removes it.
pub fn write_partial(r: &Report, out: &Path) -> Result<(), BenchError> {
    let path = out.join("report.partial.json");
    let tmp = out.join("report.partial.json.tmp");
    std::fs::write(&tmp, serde_json::to_string(r)?).map_err(|e| BenchError::Io(tmp.clone(), e))?;
    std::fs::rename(&tmp, &path).map_err(|e| BenchError::Io(path, e))
}

pub fn write_all(r: &Report, out: &Path) -> Result<(), BenchError> {
    let _ = std::fs::remove_file(out.join("report.partial.json"));
    let io = |p: &Path, e| BenchError::Io(p.to_path_buf(), e);
    let json = out.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(r)?).map_err(|e| io(&json, e))?;
    let charts = match crate::charts::write_all(r, out) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warning: charts not written: {e}");
            Vec::new()
        }
    };
    let md = out.join("report.md");
    std::fs::write(&md, markdown(r, &charts)).map_err(|e| io(&md, e))?;
    println!("{}", summary(r));
    println!(
        "wrote {}/report.json, report.md and {} charts (PNG + SVG)",
        out.display(),
        charts.len()
    );
    Ok(())
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
