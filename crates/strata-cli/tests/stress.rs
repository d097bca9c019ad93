//! `strata stress`: a short run, and a few crash rounds (SIGKILL at random
//! moments after the child opened and acknowledged writes, verification
//! after every reopen).

use std::process::Command;

fn strata(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata")
}

#[test]
fn stress_runs_and_survives_crash_rounds() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let db = db.to_str().expect("utf-8 path");
    let o = strata(&[
        "--dir",
        db,
        "stress",
        "--seconds",
        "2",
        "--threads",
        "3",
        "--keys",
        "2000",
        "--seed",
        "7",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("final check of 2000 keys passed"), "{out}");
    let o = strata(&[
        "--dir",
        db,
        "stress",
        "--crash",
        "--rounds",
        "6",
        "--max-kill-ms",
        "600",
        "--threads",
        "3",
        "--keys",
        "2000",
        "--seed",
        "8",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("6 rounds"), "{out}");
    // Every round acknowledged writes before its kill (the child is killed
    // only after it opened), and the kills hit writes in flight.
    for round in 0..6 {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("round {round}: ")))
            .unwrap_or_else(|| panic!("no line for round {round}:\n{out}"));
        let acked: u64 = number_before(line, " keys written and acknowledged");
        assert!(acked > 0, "{line}");
    }
    let in_flight = number_before(&out, " in-flight writes found");
    assert!(in_flight > 0, "no kill hit a write in flight:\n{out}");
}

/// Crash rounds with level 0 as the matrix container, its rows on a fast
/// directory of their own; then `strata verify` checks the rows (the long
/// run is `docs/DURABILITY.md`'s command with `--opt l0=matrix,...`).
#[test]
fn stress_crash_rounds_with_the_matrix_container() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let db = db.to_str().expect("utf-8 path");
    let opt = format!(
        "l0=matrix,matrix_capacity=512K,matrix_column_bytes=128K,fast_dir={}",
        tmp.path().join("fast").display()
    );
    let o = strata(&[
        "--dir",
        db,
        "--opt",
        &opt,
        "stress",
        "--crash",
        "--rounds",
        "5",
        "--max-kill-ms",
        "800",
        "--threads",
        "3",
        "--keys",
        "3000",
        "--seed",
        "9",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("5 rounds"), "{out}");
    // Whether rows are left after the last round depends on when the last
    // column compaction ran: load a few keys (the load ends with a flush,
    // into a row) with a container too large to start one.
    let opt = format!(
        "l0=matrix,matrix_capacity=64M,matrix_column_bytes=128K,fast_dir={}",
        tmp.path().join("fast").display()
    );
    let o = strata(&["--dir", db, "--opt", &opt, "load", "--count", "50"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = strata(&["--dir", db, "--opt", &opt, "verify"]);
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{report}");
    assert!(
        report.lines().any(|l| l.starts_with("row ")),
        "the rows were checked:\n{report}"
    );
}

/// Kill -9 rounds on the KVell engine, through the same door, under each
/// durability mode and I/O path; every acknowledged write must be there
/// after each reopen, and `strata verify` checks every slab afterwards.
#[test]
fn stress_crash_rounds_on_kvell_under_every_durability_mode() {
    for (i, opt) in [
        "engine=kvell,kvell_durability=written",
        "engine=kvell,kvell_durability=synced,kvell_workers=3",
        "engine=kvell,kvell_io=pread,kvell_batch=4",
    ]
    .iter()
    .enumerate()
    {
        let tmp = tempfile::tempdir().expect("tempdir");
        let db = tmp.path().join("db");
        let db = db.to_str().expect("utf-8 path");
        let seed = (20 + i).to_string();
        let o = strata(&[
            "--dir",
            db,
            "--opt",
            opt,
            "stress",
            "--crash",
            "--rounds",
            "4",
            "--max-kill-ms",
            "600",
            "--threads",
            "4",
            "--keys",
            "2000",
            "--seed",
            &seed,
        ]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{opt}: {out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains("4 rounds"), "{opt}: {out}");
        let o = strata(&["--dir", db, "--opt", opt, "verify"]);
        let report = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{opt}: {report}");
        assert!(
            report.lines().any(|l| l.starts_with("slab ")),
            "{opt}: the slabs were checked:\n{report}"
        );
    }
}

/// The number just before `marker` in `text`.
fn number_before(text: &str, marker: &str) -> u64 {
    let end = text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in:\n{text}"));
    let digits: String = text[..end]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number before {marker:?} in:\n{text}"))
}
