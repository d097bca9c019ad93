//! The module floors, checked: which top-level module of this crate may
//! name which other (`crate::x` in its non-test code, the crate root's
//! re-exports resolved to the module they come from), and that the imports
//! form no cycle. [`ALLOWED`] is the graph as it stands. A new import fails
//! the test until the table says it belongs; an allowed import that closes
//! a cycle fails the cycle test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each module and the modules it may import (besides the leaves every
/// module may use: `error`, `coding`, `types`, `filename`, `sched`).
const ALLOWED: &[(&str, &[&str])] = &[
    ("backup", &["io", "table", "version"]),
    ("batch", &[]),
    ("budget", &["io", "options"]),
    ("coding", &[]),
    (
        "compaction",
        &[
            "io", "iter", "l0", "options", "runs", "stale", "table", "version",
        ],
    ),
    (
        "db",
        &[
            "backup",
            "batch",
            "budget",
            "compaction",
            "events",
            "io",
            "iter",
            "l0",
            "memtable",
            "options",
            "runs",
            "stale",
            "stats",
            "table",
            "version",
            "wal",
        ],
    ),
    ("edit", &[]),
    ("error", &[]),
    ("events", &["edit"]),
    ("filename", &[]),
    (
        "fuzzing",
        &[
            "backup",
            "batch",
            "compaction",
            "edit",
            "io",
            "iter",
            "kvell",
            "l0",
            "options",
            "table",
            "version",
            "wal",
        ],
    ),
    ("io", &[]),
    ("iter", &[]),
    (
        "kvell",
        &[
            "batch", "budget", "io", "options", "report", "stats", "store",
        ],
    ),
    (
        "l0",
        &[
            "edit", "io", "iter", "memtable", "options", "runs", "stats", "table",
        ],
    ),
    ("memtable", &["iter", "options", "table"]),
    ("open", &["db", "kvell", "options", "store"]),
    ("options", &["events", "io", "table"]),
    ("merge", &[]),
    ("compaction_filter", &[]),
    ("clock", &[]),
    ("rangedel", &[]),
    ("report", &[]),
    ("runs", &["edit", "io", "iter", "options", "stats", "table"]),
    ("sched", &[]),
    ("stale", &[]),
    ("stats", &[]),
    (
        "store",
        &["backup", "batch", "db", "iter", "options", "stats"],
    ),
    ("table", &["io", "iter", "stats"]),
    ("types", &[]),
    (
        "verify",
        &[
            "batch", "io", "iter", "kvell", "l0", "options", "report", "table", "version", "wal",
        ],
    ),
    (
        "version",
        &[
            "edit", "io", "iter", "l0", "options", "runs", "stats", "table", "wal",
        ],
    ),
    ("wal", &["io", "options"]),
];

/// Modules every module may import.
const LEAVES: &[&str] = &[
    "error",
    "coding",
    "types",
    "filename",
    "sched",
    "rangedel",
    "merge",
    "compaction_filter",
    "clock",
];

/// The crate's `src` directory.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text of `file` that is compiled outside tests: without comments,
/// and cut at its first inline `#[cfg(test)] mod name {`. A test module
/// declared as a file (`#[cfg(test)] mod tests;`) does not cut: code may
/// follow it.
fn non_test_code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let text = &text[..inline_test_module(&text).unwrap_or(text.len())];
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where the first inline `#[cfg(test)]` module of `text` starts.
fn inline_test_module(text: &str) -> Option<usize> {
    const MARK: &str = "#[cfg(test)]\nmod ";
    let mut from = 0;
    while let Some(i) = text[from..].find(MARK) {
        let at = from + i;
        let rest = &text[at + MARK.len()..];
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if rest[name_end..].trim_start().starts_with('{') {
            return Some(at);
        }
        from = at + MARK.len();
    }
    None
}

/// The first path segment of every `crate::` path in `code`, the
/// segments of a `crate::{a::x, b}` group included.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, up to its closing brace.
            let mut depth = 1;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (depth == 1 && c == ',') {
                    out.push(first_segment(&item));
                    item.clear();
                    if depth == 0 {
                        break;
                    }
                } else {
                    item.push(c);
                }
            }
        } else {
            out.push(first_segment(rest));
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The crate root's re-exports: name → the module it comes from.
fn reexports() -> BTreeMap<String, String> {
    let lib = non_test_code(&src().join("lib.rs"));
    let mut out = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(body) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = first_segment(body);
        let names = match (body.find('{'), body.rfind('}')) {
            (Some(a), Some(b)) if a < b => body[a + 1..b].to_string(),
            _ => body.rsplit("::").next().unwrap_or("").to_string(),
        };
        for n in names.split(',') {
            let n = n
                .trim()
                .rsplit("::")
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
            if !n.is_empty() {
                out.insert(n, module.clone());
            }
        }
    }
    out
}

/// The module graph of the crate as it is: module → modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = src();
    let names = reexports();
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(&root).expect("src").flatten() {
        let p = e.path();
        let stem = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string();
        if p.is_dir() {
            let mut files = Vec::new();
            rust_files(&p, &mut files);
            modules.entry(stem).or_default().extend(files);
        } else if p.extension().is_some_and(|x| x == "rs") && stem != "lib" && stem != "floors" {
            modules.entry(stem).or_default().push(p);
        }
    }
    let mut g = BTreeMap::new();
    for (m, files) in &modules {
        let mut deps = BTreeSet::new();
        for f in files {
            let base = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if base == "tests.rs" || base == "fixtures.rs" {
                continue;
            }
            for seg in crate_paths(&non_test_code(f)) {
                let target = names.get(&seg).cloned().unwrap_or(seg);
                if &target != m && modules.contains_key(&target) {
                    deps.insert(target);
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
}

/// The strongly connected groups of two or more modules of `g` (every
/// module of a group reaches every other), each sorted.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(m) = stack.pop() {
            if seen.insert(m.clone()) {
                stack.extend(g.get(&m).into_iter().flatten().cloned());
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut out = BTreeSet::new();
    for (a, from_a) in &reached {
        let group: Vec<String> = from_a
            .iter()
            .filter(|b| reached.get(b).is_some_and(|r| r.contains(*a)))
            .cloned()
            .collect();
        if group.len() > 1 {
            out.insert(group);
        }
    }
    out
}

#[test]
fn every_import_is_allowed_by_the_floors() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(m, deps)| {
            (
                *m,
                deps.iter().copied().chain(LEAVES.iter().copied()).collect(),
            )
        })
        .collect();
    let g = graph();
    assert!(g.len() > 20, "the modules were found: {g:?}");
    let mut bad = Vec::new();
    for (m, deps) in &g {
        let Some(ok) = allowed.get(m.as_str()) else {
            bad.push(format!("{m}: a module the floors do not list"));
            continue;
        };
        for d in deps {
            if !ok.contains(d.as_str()) {
                bad.push(format!("{m} imports {d}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports outside the floors (src/floors.rs):\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_module_imports_itself_through_others() {
    let found = cycles(&graph());
    assert!(found.is_empty(), "import cycles: {found:?}");
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut edge = |a: &str, b: &str| {
        g.entry(a.to_string()).or_default().insert(b.to_string());
        g.entry(b.to_string()).or_default();
    };
    edge("a", "b");
    edge("b", "c");
    edge("c", "a");
    edge("c", "d");
    let found = cycles(&g);
    let abc: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    assert_eq!(found.into_iter().collect::<Vec<_>>(), vec![abc]);
}

/// The calls that start an OS thread.
const THREAD_STARTS: &[&str] = &["thread::spawn", "thread::Builder", "thread::scope"];

/// Where each file of `src` outside `sched/` (and outside tests) starts a
/// thread.
fn thread_starts_outside_sched() -> Vec<String> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap_or(&f).to_path_buf();
        let base = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if rel.starts_with("sched")
            || rel == Path::new("floors.rs")
            || base == "tests.rs"
            || base == "fixtures.rs"
        {
            continue;
        }
        let code = non_test_code(&f);
        for call in THREAD_STARTS {
            if code.contains(call) {
                found.push(format!("{}: {call}", rel.display()));
            }
        }
    }
    found
}

/// Every thread the engine starts, starts in `sched/` (named, at the
/// priority and with the yield gate of its kind).
#[test]
fn threads_start_only_in_sched() {
    let found = thread_starts_outside_sched();
    assert!(
        found.is_empty(),
        "threads started outside sched/ (use sched::spawn, spawn_background or spawn_scoped):\n{}",
        found.join("\n")
    );
    // The check sees a start where there is one.
    let sched = non_test_code(&src().join("sched").join("threads.rs"));
    assert!(THREAD_STARTS.iter().any(|c| sched.contains(c)));
}

#[test]
fn the_parser_reads_groups_and_plain_paths() {
    let code = "use crate::{options::{Options, X}, table::Table};\nlet x = crate::io::read();";
    assert_eq!(crate_paths(code), vec!["options", "table", "io"]);
}

#[test]
fn a_test_module_declared_as_a_file_does_not_hide_the_code_after_it() {
    let text =
        "mod a;\n#[cfg(test)]\nmod tests;\nuse crate::store::X;\n#[cfg(test)]\nmod inline {\n}\n";
    let cut = inline_test_module(text).expect("the inline module");
    assert!(text[..cut].contains("crate::store"));
    assert!(!text[..cut].contains("mod inline"));
    assert_eq!(inline_test_module("#[cfg(test)]\nmod tests;\n"), None);
}
