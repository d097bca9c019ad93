//! `strata stress`: a short run, and a few crash rounds (SIGKILL at random
//! moments, verification after every reopen).

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
}
