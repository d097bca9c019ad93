//! The report's tables as rows of cells: per workload, the ratio table,
//! and the design-specific tables (compaction, matrix, KVell).

use super::{cpu_us_per_op, is_peer, sustained, Report};

pub(super) fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.prec$}"))
}

pub(super) fn kops(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        // A row of one long call (a backup): three significant digits.
        format!("{v:.3}")
    }
}

/// Rows of one workload's table: header + one row per engine.
pub(super) fn workload_rows(r: &Report, w: &str) -> Vec<Vec<String>> {
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
pub(super) fn cut_note(r: &Report, w: &str) -> Option<String> {
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

/// The footnote of a checkpoint or backup row: what each engine's median
/// run's checkpoint, or backup directory, holds.
pub(super) fn checkpoint_note(r: &Report, w: &str) -> Option<String> {
    let mb = |b: u64| b as f64 / 1e6;
    let made: Vec<String> = r
        .engines
        .iter()
        .filter_map(|e| {
            let c = r.cell(&e.name, w)?.median.checkpoint.as_ref()?;
            Some(format!(
                "{} {} files, {:.1} MB, {:.1} MB not hard-linked{}",
                e.name,
                c.files,
                mb(c.bytes),
                mb(c.unlinked_bytes),
                c.engine_copied_bytes.map_or(String::new(), |b| format!(
                    " ({:.1} MB of tables and rows copied by its own count)",
                    mb(b)
                ))
            ))
        })
        .collect();
    if !made.is_empty() {
        return Some(format!(
            "Checkpoints (median runs): {}. Not hard-linked: files whose inode is not their \
             same-named database file's (written by the checkpoint, not linked).",
            made.join("; ")
        ));
    }
    let backups: Vec<String> = r
        .engines
        .iter()
        .filter_map(|e| {
            let b = r.cell(&e.name, w)?.median.backup.as_ref()?;
            Some(format!(
                "{} {} files, {:.1} MB{}",
                e.name,
                b.files,
                mb(b.bytes),
                b.engine_copied_bytes.map_or(String::new(), |c| format!(
                    " ({:.1} MB of tables and rows copied by its own count)",
                    mb(c)
                ))
            ))
        })
        .collect();
    (!backups.is_empty()).then(|| {
        format!(
            "Backups (median runs): {}. The backup directory was empty before the call, so every \
             file in it was written by the backup (RocksDB's BackupEngine keeps its own layout in \
             a subdirectory; the files include strata's empty store LOCK for every engine).",
            backups.join("; ")
        )
    })
}

/// Host steal at or above which a median run is footnoted (CPU seconds).
const STEAL_NOTE_SECS: f64 = 0.05;

/// The footnote of a workload whose median runs lost CPU time to the host
/// (`RunResult::steal_secs`): their latency maxima may be the host's.
pub(super) fn steal_note(r: &Report, w: &str) -> Option<String> {
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
pub(super) fn mix_rows(r: &Report, w: &str) -> Option<Vec<Vec<String>>> {
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
pub(super) fn u_series_rows(r: &Report) -> Option<Vec<Vec<String>>> {
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
pub(super) fn compaction_rows(r: &Report) -> Option<Vec<Vec<String>>> {
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
pub(super) fn matrix_rows(r: &Report) -> Option<Vec<Vec<String>>> {
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
                .and_then(|s| s.get("l0_rows"));
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
pub(super) fn kvell_rows(r: &Report) -> Option<Vec<Vec<String>>> {
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

/// Ratio table: one row per workload, one column per engine.
pub(super) fn ratio_rows(r: &Report) -> Vec<Vec<String>> {
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
