//! Compiles `examples/c/basic.c` and `examples/cpp/raii.cpp` against the
//! built library with the machine's `cc`/`c++`, runs them, and runs them
//! under valgrind (zero leaks, zero invalid accesses). A missing compiler
//! or valgrind skips that part with a note, unless `STRATA_REQUIRE_TOOLS=1`
//! (set by `.ci/run`): then it fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding libstrata_ffi.{so,a}: `target/<profile>/deps`
/// (where a test build leaves them) or `target/<profile>` (where a
/// `cargo build` copies them).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test exe in target/<profile>/deps");
    let candidates = [Some(deps), deps.parent()];
    let found = candidates
        .into_iter()
        .flatten()
        .find(|d| d.join("libstrata_ffi.so").exists() && d.join("libstrata_ffi.a").exists());
    match found {
        Some(d) => d.to_path_buf(),
        None => panic!("libstrata_ffi.so/.a not found next to {}", exe.display()),
    }
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// True when `tool` runs; otherwise panics if `STRATA_REQUIRE_TOOLS=1`, or
/// notes the skip of `what` on stderr.
fn require(tool: &str, what: &str) -> bool {
    if have(tool) {
        return true;
    }
    assert!(
        std::env::var("STRATA_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "STRATA_REQUIRE_TOOLS=1 and `{tool}` is missing ({what}): install it (see .ci/run)"
    );
    eprintln!("note: {tool} not found; skipping {what}");
    false
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Compiles `src` with `compiler` and returns the executable (dynamic
/// linking, or static with `static_link`).
fn compile(compiler: &str, std: &str, src: &str, out: &Path, static_link: bool) -> PathBuf {
    let lib = lib_dir();
    let exe = out.join(
        Path::new(src)
            .file_stem()
            .map(|s| {
                format!(
                    "{}{}",
                    s.to_string_lossy(),
                    if static_link { "-static" } else { "" }
                )
            })
            .unwrap_or_default(),
    );
    let mut cmd = Command::new(compiler);
    cmd.arg(std)
        .args(["-Wall", "-Wextra", "-Werror", "-g"])
        .arg("-I")
        .arg(root().join("include"))
        .arg(root().join(src))
        .arg("-o")
        .arg(&exe);
    if static_link {
        cmd.arg(lib.join("libstrata_ffi.a"))
            .args(["-lpthread", "-ldl", "-lm"]);
    } else {
        cmd.arg("-L")
            .arg(&lib)
            .arg("-lstrata_ffi")
            .arg(format!("-Wl,-rpath,{}", lib.display()));
    }
    run(&mut cmd);
    exe
}

/// Builds `src` and runs it with each of `engines` (an option string its
/// second argument takes, "" for the default engine).
fn check_example(compiler: &str, std: &str, src: &str, engines: &[&str]) {
    if !require(compiler, src) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    for static_link in [false, true] {
        let exe = compile(compiler, std, src, tmp.path(), static_link);
        for (i, engine) in engines.iter().enumerate() {
            let db = tmp.path().join(format!("db-{static_link}-{i}"));
            let mut cmd = Command::new(&exe);
            cmd.arg(&db);
            if !engine.is_empty() {
                cmd.arg(engine);
            }
            let out = run(&mut cmd);
            assert!(out.contains("all checks passed"), "{engine}: {out}");
        }
    }
    // Under valgrind, dynamically linked, on a fresh directory.
    if !require("valgrind", &format!("the memory check of {src}")) {
        return;
    }
    let exe = compile(compiler, std, src, tmp.path(), false);
    for (i, engine) in engines.iter().enumerate() {
        let mut cmd = Command::new("valgrind");
        cmd.args([
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect,possible",
            "--error-exitcode=1",
            "--quiet",
        ])
        .arg(format!(
            "--suppressions={}",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/valgrind.supp")
                .display()
        ))
        .arg(&exe)
        .arg(tmp.path().join(format!("db-valgrind-{i}")));
        if !engine.is_empty() {
            cmd.arg(engine);
        }
        let out = run(&mut cmd);
        assert!(out.contains("all checks passed"), "{engine}: {out}");
    }
}

#[test]
fn c_example_runs_clean() {
    // Both engines behind the one door.
    check_example(
        "cc",
        "-std=c11",
        "examples/c/basic.c",
        &["", "engine=kvell"],
    );
}

#[test]
fn cpp_raii_example_runs_clean() {
    check_example("c++", "-std=c++17", "examples/cpp/raii.cpp", &[""]);
}
