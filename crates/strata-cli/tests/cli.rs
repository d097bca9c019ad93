//! Runs the `strata` binary end to end.

use std::path::Path;
use std::process::{Command, Output};

fn strata(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("run strata")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

#[test]
fn put_get_scan_delete_stats_verify() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
        let o = strata(&db, &["put", k, v]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let o = strata(&db, &["get", "b"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "2\n"));
    let o = strata(&db, &["get", "zz"]);
    assert_eq!(code(&o), 1);
    assert_eq!(stdout(&o), "");

    let o = strata(&db, &["scan"]);
    assert_eq!(stdout(&o), "a\t1\nb\t2\nc\t3\n");
    let o = strata(&db, &["scan", "--from", "b", "--to", "c"]);
    assert_eq!(stdout(&o), "b\t2\n");
    let o = strata(&db, &["scan", "--reverse", "--limit", "2"]);
    assert_eq!(stdout(&o), "c\t3\nb\t2\n");
    let o = strata(&db, &["scan", "--hex", "--limit", "1"]);
    assert_eq!(stdout(&o), "61\t31\n");

    let o = strata(&db, &["delete", "b"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(code(&strata(&db, &["get", "b"])), 1);
    assert_eq!(stdout(&strata(&db, &["scan"])), "a\t1\nc\t3\n");
    let o = strata(&db, &["delete-range", "a", "b"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&strata(&db, &["scan"])), "c\t3\n");
    let o = strata(&db, &["delete-range", "c", "a"]);
    assert_ne!(code(&o), 0, "an inverted range is refused");
    assert_eq!(stdout(&strata(&db, &["scan"])), "c\t3\n");

    // Merges need an operator, given at each open.
    let o = strata(&db, &["merge", "c", "4"]);
    assert_ne!(code(&o), 0, "no merge operator");
    let append = ["--opt", "merge_operator=append:+"];
    let o = strata(&db, &[&append[..], &["merge", "c", "4"]].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = strata(&db, &[&append[..], &["get", "c"]].concat());
    assert_eq!(stdout(&o), "3+4\n");
    let o = strata(&db, &["get", "c"]);
    assert_ne!(code(&o), 0, "an operand read without an operator");
    assert!(stderr(&o).contains("merge"), "{}", stderr(&o));
    let o = strata(&db, &[&append[..], &["delete", "c"]].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let counter = ["--opt", "merge_operator=u64add"];
    for n in ["5", "37"] {
        let o = strata(&db, &[&counter[..], &["merge", "--u64", "n", n]].concat());
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let o = strata(&db, &[&counter[..], &["get", "--hex", "n"]].concat());
    assert_eq!(stdout(&o), "2a00000000000000\n");
    let o = strata(&db, &[&counter[..], &["delete", "n"]].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&strata(&db, &["scan"])), "");

    let o = strata(&db, &["stats"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("L0"), "{}", stdout(&o));
    let o = strata(&db, &["stats", "--json"]);
    assert!(stdout(&o).starts_with('{'), "{}", stdout(&o));

    let o = strata(&db, &["compact"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let o = strata(&db, &["verify"]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    assert!(stdout(&o).contains("all ok"), "{}", stdout(&o));
}

#[test]
fn a_checkpoint_opens_on_its_own_and_an_existing_target_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (db, ck) = (tmp.path().join("db"), tmp.path().join("ck"));
    for (k, v) in [("a", "1"), ("b", "2")] {
        assert_eq!(code(&strata(&db, &["put", k, v])), 0);
    }
    let target = ck.to_str().expect("utf-8 path");
    let o = strata(&db, &["checkpoint", target]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("files"), "{}", stdout(&o));
    assert_eq!(stdout(&strata(&ck, &["scan"])), "a\t1\nb\t2\n");
    assert_eq!(code(&strata(&ck, &["verify"])), 0);
    let o = strata(&db, &["checkpoint", target]);
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
}

/// `backup`, `backups` and `restore`: a second backup copies nothing new,
/// each restores what it held, damage is found by `--verify` (exit 1),
/// and `--keep` deletes the older ones.
#[test]
fn backups_restore_list_verify_and_delete() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (db, store) = (tmp.path().join("db"), tmp.path().join("store"));
    let store_arg = store.to_str().expect("utf-8 path");
    assert_eq!(code(&strata(&db, &["put", "a", "1"])), 0);
    let o = strata(&db, &["backup", store_arg]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).starts_with("backup 1 "), "{}", stdout(&o));
    assert_eq!(code(&strata(&db, &["put", "b", "2"])), 0);
    let o = strata(&db, &["backup", store_arg]);
    assert!(stdout(&o).starts_with("backup 2 "), "{}", stdout(&o));
    let o = strata(&db, &["backups", store_arg, "--verify"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o).matches("verified").count(), 2, "{}", stdout(&o));
    for (id, want) in [("1", "a\t1\n"), ("2", "a\t1\nb\t2\n")] {
        let target = tmp.path().join(format!("r{id}"));
        let t = target.to_str().expect("utf-8 path");
        let o = strata(&db, &["restore", store_arg, t, "--id", id]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert_eq!(stdout(&strata(&target, &["scan"])), want, "backup {id}");
    }
    // A restore into an existing directory is refused.
    let o = strata(
        &db,
        &[
            "restore",
            store_arg,
            tmp.path().join("r1").to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
    // Damage one stored file: --verify says so and exits 1.
    let shared = std::fs::read_dir(store.join("shared"))
        .expect("list")
        .flatten()
        .next()
        .expect("a shared file")
        .path();
    let mut bytes = std::fs::read(&shared).expect("read");
    bytes[0] ^= 1;
    std::fs::write(&shared, bytes).expect("write");
    let o = strata(&db, &["backups", store_arg, "--verify"]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    assert!(stdout(&o).contains("DAMAGED"), "{}", stdout(&o));
    let o = strata(&db, &["backups", store_arg, "--keep", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("deleted backups [1]"), "{}", stdout(&o));
}

#[test]
fn missing_database_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("nope");
    for cmd in [&["get", "k"][..], &["scan"], &["stats"], &["verify"]] {
        let o = strata(&missing, cmd);
        assert_eq!(code(&o), 2, "{cmd:?}");
        let err = stderr(&o);
        assert!(
            err.starts_with("error: ") && err.contains("no strata database"),
            "{cmd:?}: {err}"
        );
        assert!(!missing.exists(), "{cmd:?} created the directory");
    }
    // An existing directory that holds no database.
    let o = strata(tmp.path(), &["get", "k"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("no strata database"), "{}", stderr(&o));
    assert!(
        !tmp.path().join("LOCK").exists(),
        "a failed open leaves no LOCK file"
    );

    let o = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["get", "k"])
        .output()
        .expect("run strata");
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--dir"), "{}", stderr(&o));

    let o = strata(tmp.path(), &["--opt", "no_such_option=1", "put", "k", "v"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("no_such_option"), "{}", stderr(&o));
}

#[test]
fn verify_fails_after_a_table_is_corrupted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let o = strata(&db, &["load", "--count", "5000", "--order", "sequential"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("ops/s"), "{}", stdout(&o));
    assert_eq!(code(&strata(&db, &["verify"])), 0);

    let table = std::fs::read_dir(&db)
        .expect("read_dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "table"))
        .expect("the load left a table");
    let mut bytes = std::fs::read(&table).expect("read table");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&table, &bytes).expect("write table");

    let o = strata(&db, &["verify"]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    let name = table.file_name().and_then(|n| n.to_str()).expect("name");
    let out = stdout(&o);
    assert!(
        out.lines()
            .any(|l| l.contains(name) && l.contains("DAMAGED")),
        "{out}"
    );
}

#[test]
fn demo_passes_on_a_small_count() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("demo");
    let o = strata(&db, &["demo", "--count", "3000"]);
    assert_eq!(code(&o), 0, "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("demo passed"), "{}", stdout(&o));
    // Running it again replaces the database.
    let o = strata(&db, &["demo", "--count", "1000"]);
    assert_eq!(code(&o), 0, "{}\n{}", stdout(&o), stderr(&o));

    // It never removes a directory that is not a database.
    std::fs::write(tmp.path().join("notes.txt"), b"keep me").expect("write");
    let o = strata(tmp.path(), &["demo", "--count", "10"]);
    assert_eq!(code(&o), 2);
    assert!(tmp.path().join("notes.txt").exists());
}

/// `--keyspace` reads and writes one keyspace (made by a command that may
/// create, with `--keyspace-opt`); `keyspaces` lists and drops them.
#[test]
fn keyspaces_by_flag_list_and_drop() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let o = strata(&db, &["put", "k", "default-value"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = strata(
        &db,
        &[
            "--keyspace",
            "users",
            "--keyspace-opt",
            "compression=zstd",
            "put",
            "k",
            "user-value",
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = strata(&db, &["--keyspace", "users", "get", "k"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "user-value\n"));
    let o = strata(&db, &["get", "k"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "default-value\n"));
    let o = strata(&db, &["--keyspace", "users", "scan"]);
    assert_eq!(stdout(&o), "k\tuser-value\n");
    // A read of a keyspace the database lacks makes none.
    let o = strata(&db, &["--keyspace", "nope", "get", "k"]);
    assert_eq!(code(&o), 2, "{}", stdout(&o));
    assert!(stderr(&o).contains("no keyspace"), "{}", stderr(&o));
    let o = strata(&db, &["keyspaces"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "default\nusers\n"));
    let o = strata(&db, &["keyspaces", "--drop", "users"]);
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "default\n"));
    let o = strata(&db, &["keyspaces", "--drop", "default"]);
    assert_eq!(code(&o), 2);
    let o = strata(&db, &["get", "k"]);
    assert_eq!(stdout(&o), "default-value\n");
}
