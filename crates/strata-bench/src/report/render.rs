//! The report rendered for people: the terminal summary and `report.md`.

use super::rows::{
    checkpoint_note, compaction_rows, cut_note, kvell_rows, matrix_rows, mix_rows, ratio_rows,
    steal_note, u_series_rows, workload_rows,
};
use super::Report;
use std::fmt::Write as _;

/// `rows` as a fixed-width text table (the first row a header).
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

/// `rows` as a Markdown table (the first row a header).
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
        let notes = [cut_note(r, &w), steal_note(r, &w), checkpoint_note(r, &w)];
        for note in notes.into_iter().flatten() {
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
        let notes = [cut_note(r, &w), steal_note(r, &w), checkpoint_note(r, &w)];
        for note in notes.into_iter().flatten() {
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
