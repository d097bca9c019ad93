//! Runs `strata bench --preset tiny` end to end (every engine compiled in)
//! and checks the report's structure and figures.

use serde_json::Value;
use std::process::Command;

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number: {v}"))
}

#[test]
fn tiny_preset_end_to_end() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "--preset", "tiny", "--out"])
        .arg(&out)
        .output()
        .expect("run strata bench");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("throughput ratio to"), "{stdout}");
    for f in [
        "report.json",
        "report.md",
        "throughput.png",
        "throughput.svg",
        "timeline.png",
        "timeline.svg",
        "latency.png",
        "latency.svg",
    ] {
        let p = out.join(f);
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 100, "{f} missing or empty");
    }
    let json = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    let r: Value = serde_json::from_str(&json).expect("report.json parses");
    let comparators = r["comparators_compiled"]
        .as_bool()
        .expect("comparators_compiled");
    let engines: Vec<&str> = r["engines"]
        .as_array()
        .expect("engines")
        .iter()
        .map(|e| e["name"].as_str().expect("engine name"))
        .collect();
    if comparators {
        assert_eq!(engines, ["strata", "rocksdb", "leveldb", "fjall"]);
        assert_eq!(r["baseline"], "rocksdb");
        assert!(
            stdout.contains("RocksDB 10.")
                && stdout.contains("LevelDB 1.")
                && stdout.contains("fjall 3.")
                && stdout.contains("PEER: RocksDB")
                && stdout.contains("release build"),
            "{stdout}"
        );
    } else {
        assert_eq!(engines, ["strata"]);
        assert!(stderr.contains("no comparators"), "{stderr}");
    }
    assert!(num(&r, &["machine", "cores"]) >= 1.0);
    let results = r["results"].as_array().expect("results");
    let workloads = 44;
    assert_eq!(results.len(), workloads * engines.len());
    let writes = [
        "fillseq",
        "fillrandom",
        "overwrite",
        "overwrite-timed",
        "deleterandom",
        "ycsb-load",
        "ycsb-a",
        "ycsb-d",
        "ycsb-f",
        "u5",
        "fluctuation",
        "mergerandom",
        "updaterandom",
    ];
    for res in results {
        let name = format!("{} {}", res["engine"], res["workload"]);
        assert!(res["error"].is_null(), "{name}: {}", res["error"]);
        assert!(num(res, &["ops"]) > 0.0, "{name}");
        assert!(num(res, &["ops_per_sec"]) > 0.0, "{name}");
        let l = |k: &str| num(res, &["latency", k]);
        assert!(l("p50_us") > 0.0, "{name}");
        assert!(
            l("p50_us") <= l("p99_us")
                && l("p99_us") <= l("p999_us")
                && l("p999_us") <= l("max_us"),
            "{name}: {}",
            res["latency"]
        );
        assert!(
            num(res, &["cpu_secs"]) >= 0.0 && num(res, &["max_rss_mib"]) > 0.0,
            "{name}"
        );
        assert!(num(res, &["space_amp"]) > 0.0, "{name}");
        let w = res["workload"].as_str().expect("workload");
        if writes.contains(&w) {
            assert!(num(res, &["user_bytes_written"]) > 0.0, "{name}");
            // Device bytes come from the block device's counter (else
            // /proc/self/io); absent where neither counts them (tmpfs).
            // Every engine logs what it is given: the pages it dirtied
            // (`wa_proc`) are at least the user's bytes. The device may see
            // less — a log written and deleted after its flush before it was
            // written back never reaches it (0.998 once on tiny's 1 s
            // fluctuation over 2,000 hot keys) — but never nothing.
            if let Some(wa) = res["wa_proc"].as_f64() {
                assert!(wa >= 1.0, "{name}: WA of the pages dirtied {wa}");
            }
            if let Some(wa) = res["wa_device"].as_f64() {
                assert!(wa > 0.0, "{name}: device WA {wa}");
            }
            if res["engine"] == "strata" {
                assert!(num(res, &["wa_engine"]) >= 1.0, "{name}");
            }
        }
        if w == "fluctuation" {
            assert!(
                res["timeline"].as_array().is_some_and(|t| !t.is_empty()),
                "{name}"
            );
        }
        if w == "readrandom" {
            assert_eq!(num(res, &["gets_found"]), num(res, &["gets"]), "{name}");
        }
        if w == "deleterange" || w == "deletekeys" {
            // Two blocks of 1,000 keys: 100 deleted from each.
            assert_eq!(num(res, &["ops"]), 200.0, "{name}");
        }
        if w == "readrandom-after-merges" {
            // 2,000 increments of 200 counters: every counter exists.
            let (found, gets) = (num(res, &["gets_found"]), num(res, &["gets"]));
            assert!(found > 0.99 * gets, "{name}: {found} of {gets} found");
        } else if w.starts_with("readrandom-after-") {
            // A tenth of the keys is gone, whichever way it was deleted.
            let (found, gets) = (num(res, &["gets_found"]), num(res, &["gets"]));
            assert!(
                found > 0.8 * gets && found < 0.97 * gets,
                "{name}: {found} of {gets} found"
            );
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains("## Throughput relative to") && md.contains("throughput.svg"),
        "{md}"
    );
}

/// KVell behind `--engines`, with the kvell preset's extras: a memory cap
/// per child (or a note saying why there is none) and the device ceilings.
#[test]
fn kvell_engine_with_memory_cap_and_ceilings() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "bench",
            "--preset",
            "tiny",
            "--engines",
            "kvell,strata",
            "--workloads",
            "ycsb-a,ycsb-e-uniform,readseq,fillrandom",
            "--threads",
            "4",
            "--memory-limit",
            "512M",
            "--ceilings",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run strata bench");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let json = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    let r: Value = serde_json::from_str(&json).expect("report.json parses");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("capped at 512 MiB") || notes.contains("no memory cap ("),
        "{notes}"
    );
    assert!(
        num(&r, &["device", "read_qd64_iops"]) > 0.0,
        "{}",
        r["device"]
    );
    assert!(
        num(&r, &["device", "write_qd1_iops"]) > 0.0,
        "{}",
        r["device"]
    );
    let results = r["results"].as_array().expect("results");
    assert_eq!(results.len(), 8);
    for res in results {
        let name = format!("{} {}", res["engine"], res["workload"]);
        assert!(res["error"].is_null(), "{name}: {}", res["error"]);
        assert!(num(res, &["ops_per_sec"]) > 0.0, "{name}");
        if res["engine"] == "strata" && notes.contains("capped at 512 MiB") {
            // The child was in its cgroup when it opened: its memory budget
            // is half the cap, not half the machine's memory.
            assert_eq!(
                num(res, &["engine_stats", "lsm", "memory", "budget"]),
                (256u64 << 20) as f64,
                "{name}"
            );
        }
        if res["engine"] == "kvell" {
            assert_eq!(res["engine_stats"]["engine"], "kvell", "{name}");
            assert!(
                num(res, &["engine_stats", "kvell", "batches"]) > 0.0,
                "{name}"
            );
        }
    }
    assert!(stdout.contains("KVell and the device"), "{stdout}");
}

/// The bench refuses a peer library built with assertions: a stand-in
/// RocksDB whose C API function calls `assert` (compiled without
/// `NDEBUG`) stops the run before anything is measured, and is accepted
/// with `--allow-debug-peers` as far as the check goes.
#[cfg(feature = "comparators")]
#[test]
fn a_peer_built_with_assertions_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("fake.c");
    std::fs::write(
        &src,
        "#include <assert.h>\nint rocksdb_probe(int x) { assert(x > 0); return x; }\n",
    )
    .expect("write");
    let lib = tmp.path().join("librocksdb.so");
    let cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("cc must be installed for this test (CI installs gcc)");
    assert!(cc.success());
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["bench", "--preset", "tiny", "--workloads", "fillseq"])
            .args(["--engines", "strata,rocksdb", "--rocksdb-lib"])
            .arg(&lib)
            .arg("--out")
            .arg(tmp.path().join("out"))
            .args(extra)
            .env_remove("STRATA_BENCH_ALLOW_DEBUG_PEERS")
            .output()
            .expect("run strata bench")
    };
    let o = run(&[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains("is a debug build")
            && stderr.contains("1 assertion call(s) in rocksdb code"),
        "{stderr}"
    );
    assert!(!tmp.path().join("out/report.json").exists(), "nothing ran");
    // Allowed, the check passes and loading the C API then fails: the
    // stand-in has none of RocksDB's calls.
    let o = run(&["--allow-debug-peers"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(stderr.contains("lacks a C API call"), "{stderr}");
}

/// A chain: one load per engine, then every row on that database. The
/// reads find every record the load wrote (a run on a fresh database would
/// find none), and YCSB-E's inserts carry on to the next row.
#[test]
fn a_chain_runs_every_row_on_one_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "bench",
            "--preset",
            "tiny",
            "--engines",
            "strata",
            "--chain",
            "--workloads",
            "ycsb-load,readrandom,ycsb-e,ycsb-c",
            "--repeats",
            "2",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run strata bench");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let json = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    let r: Value = serde_json::from_str(&json).expect("report.json parses");
    assert!(r["notes"].to_string().contains("chain:"), "{}", r["notes"]);
    let results = r["results"].as_array().expect("results");
    let rows: Vec<&str> = results
        .iter()
        .map(|x| x["workload"].as_str().expect("workload"))
        .collect();
    assert_eq!(
        rows,
        [
            "ycsb-load",
            "readrandom",
            "readrandom",
            "ycsb-e",
            "ycsb-e",
            "ycsb-c",
            "ycsb-c"
        ]
    );
    let mut inserted = 0.0;
    for res in results {
        let name = res["workload"].to_string();
        assert!(res["error"].is_null(), "{name}: {}", res["error"]);
        match res["workload"].as_str() {
            Some("readrandom") | Some("ycsb-c") => {
                let gets = num(res, &["gets"]);
                assert!(gets > 0.0, "{name}");
                assert_eq!(num(res, &["gets_found"]), gets, "{name}: a read missed");
            }
            Some("ycsb-e") => inserted += num(res, &["op_counts", "insert"]),
            _ => {}
        }
    }
    assert!(inserted > 0.0, "YCSB-E inserted nothing");
    // The rows after YCSB-E count its inserts: only a row run on the chain's
    // database (not a load of its own) holds the load's records and them.
    let record = num(&r, &["params", "key_size"]) + num(&r, &["params", "value_size"]);
    for res in results.iter().filter(|x| x["workload"] == "ycsb-c") {
        assert_eq!(
            num(res, &["live_bytes"]),
            (num(&r, &["params", "num"]) + inserted) * record,
            "ycsb-c does not hold the load's records and YCSB-E's inserts"
        );
    }
    assert!(
        !out.join("data").exists(),
        "the chain's databases are removed"
    );
    // A chain must start with its load.
    let o = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "bench",
            "--preset",
            "tiny",
            "--engines",
            "strata",
            "--chain",
        ])
        .args(["--workloads", "readrandom", "--out"])
        .arg(tmp.path().join("refused"))
        .output()
        .expect("run strata bench");
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("ycsb-load"));
}
