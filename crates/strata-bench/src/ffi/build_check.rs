//! Tells a release build of a peer library from a debug one, by reading its
//! ELF file: the check db_bench makes of itself ("Assertions are enabled;
//! benchmarks unnecessarily slow"), made from outside.
//!
//! A library counts as a debug build when either
//! - code of the engine itself (a function whose symbol names the engine's
//!   namespace, `7rocksdb`/`7leveldb` in the mangled name, or its C API
//!   `rocksdb_*`/`leveldb_*`) calls `__assert_fail`, which `assert()` only
//!   compiles to without `NDEBUG`; calls from bundled third-party code
//!   (RocksDB's release library links snappy with its asserts) are counted
//!   apart and do not make the engine a debug build; or
//! - it defines RocksDB's test sync point, `rocksdb::SyncPoint::Process`,
//!   which RocksDB compiles only without `NDEBUG`.
//!
//! Call sites are found by scanning executable sections for x86-64 `call` /
//! `jmp` instructions whose target is `__assert_fail`'s PLT stub or GOT
//! slot. The scan reads bytes, not decoded instructions: a false match needs
//! five bytes of other code to spell exactly that target (about one in 2^32
//! positions) and to sit in an engine function. Calls the scan cannot place
//! in a named function (stripped local functions) are counted as
//! `unattributed`; a library with any and no symbol table is judged by them
//! too (see [`BuildCheck::is_debug`]).

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, Rela, SectionHeader};
use object::{Endianness, Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::path::Path;

/// What [`check`] found in one library.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildCheck {
    /// Calls to `__assert_fail` from the engine's own functions.
    pub engine_asserts: usize,
    /// Calls from other named functions (bundled libraries, the C++ standard library).
    pub other_asserts: usize,
    /// Calls the scan could not place in a named function.
    pub unattributed_asserts: usize,
    /// RocksDB's test sync point is compiled in.
    pub sync_points: bool,
    /// The file names its local functions (a `.symtab` with them), so a
    /// call outside every named function is not the engine's.
    pub full_symbols: bool,
    /// It imports `__assert_fail` yet the scan found no call to it: the
    /// check cannot tell, and says debug (fails closed).
    pub unscanned: bool,
}

impl BuildCheck {
    /// True when the library was built without `NDEBUG`: assertions in the
    /// engine's code, sync points, or — in a library stripped of its local
    /// symbols, where most of the engine's functions have no name — any
    /// call the scan could not place outweighing the placed third-party ones.
    pub fn is_debug(&self) -> bool {
        self.engine_asserts > 0
            || self.sync_points
            || self.unscanned
            || (!self.full_symbols && self.unattributed_asserts > self.other_asserts)
    }

    /// One line for the report.
    pub fn describe(&self, engine: &str) -> String {
        let kind = if self.is_debug() {
            "DEBUG BUILD"
        } else {
            "release build"
        };
        format!(
            "{kind}: {} assertion call(s) in {engine} code, {} in bundled code, {} unplaced{}; sync points {}",
            self.engine_asserts,
            self.other_asserts,
            self.unattributed_asserts,
            if self.unscanned {
                " (imports __assert_fail, no call found: cannot tell)"
            } else {
                ""
            },
            if self.sync_points { "compiled in" } else { "absent" }
        )
    }
}

/// Why a library could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a 64-bit ELF file the check understands: {message}")]
    Parse { path: String, message: String },
}

/// Whether a mangled or C symbol name belongs to `engine` (`rocksdb`, `leveldb`).
fn engine_owned(name: &str, engine: &str) -> bool {
    let namespace = format!("{}{engine}", engine.len());
    name.starts_with(&format!("{engine}_")) || name.contains(&namespace)
}

/// Reads the library at `path` and counts its assertion call sites; `engine`
/// names its namespace (`rocksdb` or `leveldb`).
pub fn check(path: &Path, engine: &str) -> Result<BuildCheck, CheckError> {
    let data = std::fs::read(path).map_err(|source| CheckError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let parse_err = |message: String| CheckError::Parse {
        path: path.display().to_string(),
        message,
    };
    let file = ElfFile64::<Endianness>::parse(&*data).map_err(|e| parse_err(e.to_string()))?;
    if file.elf_header().e_machine(file.endian()) != elf::EM_X86_64 {
        return Err(parse_err("not x86-64".into()));
    }
    let mut out = BuildCheck {
        full_symbols: file
            .symbols()
            .any(|s| s.is_local() && s.kind() == SymbolKind::Text && s.is_definition()),
        ..BuildCheck::default()
    };
    out.sync_points = file
        .dynamic_symbols()
        .chain(file.symbols())
        .filter(|s| s.is_definition())
        .filter_map(|s| s.name().ok())
        .any(|n| n.contains("7rocksdb9SyncPoint7Process"));

    // The GOT slots that hold __assert_fail's address.
    let assert_syms: Vec<_> = file
        .dynamic_symbols()
        .filter(|s| s.is_undefined() && s.name() == Ok("__assert_fail"))
        .map(|s| s.index())
        .collect();
    if assert_syms.is_empty() {
        return Ok(out);
    }
    // Every relocation section against the dynamic symbols (.rela.dyn's
    // GLOB_DAT, .rela.plt's JUMP_SLOT), read directly.
    let endian = file.endian();
    let mut got: Vec<u64> = Vec::new();
    for section in file.elf_section_table().iter() {
        let Ok(Some((relas, link))) = section.rela(endian, &*data) else {
            continue;
        };
        if file.elf_symbol_table().is_empty() && file.elf_dynamic_symbol_table().is_empty() {
            break;
        }
        if link != file.elf_dynamic_symbol_table().section() {
            continue;
        }
        for r in relas {
            let sym = r.r_sym(endian, false) as usize;
            if assert_syms.iter().any(|i| i.0 == sym) {
                got.push(r.r_offset(endian));
            }
        }
    }

    // Executable sections, as (address, bytes).
    let exec: Vec<(u64, &[u8], String)> = file
        .sections()
        .filter(|s| {
            s.elf_section_header().sh_flags(file.endian()) & u64::from(elf::SHF_EXECINSTR) != 0
        })
        .filter_map(|s| {
            let name = s.name().unwrap_or("").to_string();
            s.data().ok().map(|d| (s.address(), d, name))
        })
        .collect();

    // PLT stubs that jump through one of those slots: `ff 25 disp32`
    // (`jmp *disp(%rip)`); a call lands up to 8 bytes before it (an
    // `endbr64` and a `bnd` prefix in `.plt.sec`).
    let mut stubs: Vec<(u64, u64)> = Vec::new();
    for (addr, bytes, name) in &exec {
        if !name.starts_with(".plt") {
            continue;
        }
        for i in 0..bytes.len().saturating_sub(5) {
            if bytes[i] == 0xff && bytes[i + 1] == 0x25 {
                let disp =
                    i32::from_le_bytes([bytes[i + 2], bytes[i + 3], bytes[i + 4], bytes[i + 5]]);
                let at = addr.wrapping_add(i as u64);
                let target = at.wrapping_add(6).wrapping_add_signed(i64::from(disp));
                if got.contains(&target) {
                    stubs.push((at.saturating_sub(8), at));
                }
            }
        }
    }

    // Named functions, sorted by address.
    let mut funcs: Vec<(u64, u64, String)> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
        .collect();
    funcs.sort();
    funcs.dedup_by_key(|f| f.0);
    let owner = |at: u64| -> Option<&str> {
        let i = funcs.partition_point(|f| f.0 <= at).checked_sub(1)?;
        let (start, size, name) = &funcs[i];
        let end = if *size > 0 {
            start.saturating_add(*size)
        } else {
            funcs.get(i + 1).map_or(u64::MAX, |f| f.0)
        };
        (at < end).then_some(name.as_str())
    };

    for (addr, bytes, name) in &exec {
        if name.starts_with(".plt") {
            continue;
        }
        // Every start of a 5-byte instruction (a 6-byte one is checked below).
        for i in 0..bytes.len().saturating_sub(4) {
            let op = bytes[i];
            let at = addr.wrapping_add(i as u64);
            let hit = match op {
                // call rel32 / jmp rel32 to a stub
                0xe8 | 0xe9 => {
                    let rel = i32::from_le_bytes([
                        bytes[i + 1],
                        bytes[i + 2],
                        bytes[i + 3],
                        bytes[i + 4],
                    ]);
                    let target = at.wrapping_add(5).wrapping_add_signed(i64::from(rel));
                    stubs.iter().any(|&(lo, hi)| (lo..=hi).contains(&target))
                }
                // a conditional jump rel32 to a stub (`0f 80`..`0f 8f`)
                0x0f if i + 6 <= bytes.len() && (0x80..=0x8f).contains(&bytes[i + 1]) => {
                    let rel = i32::from_le_bytes([
                        bytes[i + 2],
                        bytes[i + 3],
                        bytes[i + 4],
                        bytes[i + 5],
                    ]);
                    let target = at.wrapping_add(6).wrapping_add_signed(i64::from(rel));
                    stubs.iter().any(|&(lo, hi)| (lo..=hi).contains(&target))
                }
                // call/jmp *disp32(%rip) through the slot (-fno-plt)
                0xff if i + 6 <= bytes.len() && matches!(bytes[i + 1], 0x15 | 0x25) => {
                    let disp = i32::from_le_bytes([
                        bytes[i + 2],
                        bytes[i + 3],
                        bytes[i + 4],
                        bytes[i + 5],
                    ]);
                    let target = at.wrapping_add(6).wrapping_add_signed(i64::from(disp));
                    got.contains(&target)
                }
                _ => false,
            };
            if !hit {
                continue;
            }
            match owner(at).map(|n| engine_owned(n, engine)) {
                Some(true) => out.engine_asserts += 1,
                Some(false) => out.other_asserts += 1,
                // Unnamed code: judged by the source file `assert` names.
                None => match assert_file(&file, bytes, i, at).map(|f| bundled_source(&f)) {
                    Some(false) => out.engine_asserts += 1,
                    Some(true) => out.other_asserts += 1,
                    None => out.unattributed_asserts += 1,
                },
            }
        }
    }
    out.unscanned = out.engine_asserts + out.other_asserts + out.unattributed_asserts == 0;
    Ok(out)
}

/// Source paths of code a peer bundles rather than writes (compression and
/// hashing libraries, test frameworks).
const BUNDLED: &[&str] = &[
    "snappy",
    "zstd",
    "lz4",
    "zlib",
    "bzip2",
    "bzlib",
    "xxhash",
    "third-party",
    "third_party",
    "gtest",
    "folly",
];

/// True when an assertion's source file is bundled code.
fn bundled_source(file: &str) -> bool {
    let f = file.to_ascii_lowercase();
    BUNDLED.iter().any(|b| f.contains(b))
}

/// The source file an `assert` call at `at` (offset `i` of `code`) names:
/// `__assert_fail`'s second argument, loaded into `%rsi` by a
/// `lea disp(%rip),%rsi` (`48 8d 35 disp32`) in the 48 bytes before the
/// call, read as a C string from the file's sections.
fn assert_file(file: &ElfFile64<'_, Endianness>, code: &[u8], i: usize, at: u64) -> Option<String> {
    let from = i.saturating_sub(48);
    let j = (from..i.saturating_sub(6))
        .rev()
        .find(|&j| code[j] == 0x48 && code[j + 1] == 0x8d && code[j + 2] == 0x35)?;
    let disp = i32::from_le_bytes([code[j + 3], code[j + 4], code[j + 5], code[j + 6]]);
    let lea_at = at.wrapping_sub((i - j) as u64);
    let addr = lea_at.wrapping_add(7).wrapping_add_signed(i64::from(disp));
    let section = file
        .sections()
        .find(|s| addr >= s.address() && addr - s.address() < s.size())?;
    let data = section.data().ok()?;
    let start = usize::try_from(addr - section.address()).ok()?;
    let rest = data.get(start..)?;
    let end = rest.iter().take(512).position(|&b| b == 0)?;
    let text = std::str::from_utf8(&rest[..end]).ok()?;
    // A source path: printable, with a directory or a C/C++ extension.
    let looks = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_graphic())
        && (text.contains('/')
            || [".c", ".cc", ".cpp", ".h"]
                .iter()
                .any(|x| text.ends_with(x)));
    looks.then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Compiles `source` (C) into a shared library with `flags`.
    fn build(dir: &Path, name: &str, source: &str, flags: &[&str]) -> std::path::PathBuf {
        let c = dir.join(format!("{name}.c"));
        let so = dir.join(format!("lib{name}.so"));
        std::fs::write(&c, source).expect("write the C source");
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1"])
            .args(flags)
            .arg("-o")
            .arg(&so)
            .arg(&c)
            .status()
            .expect("cc must be installed for this test (CI installs gcc)");
        assert!(status.success(), "cc failed");
        so
    }

    const ENGINE: &str = r#"
        #include <assert.h>
        int rocksdb_probe(int x) { assert(x > 0); return x + 1; }
    "#;
    const BUNDLED: &str = r#"
        #include <assert.h>
        int compressor_probe(int x) { assert(x > 0); return x * 2; }
        int rocksdb_probe(int x) { return compressor_probe(x) + 1; }
    "#;

    #[test]
    fn an_assertion_in_engine_code_marks_a_debug_build() {
        let dir = tempfile::tempdir().expect("tempdir");
        let debug = check(&build(dir.path(), "dbg", ENGINE, &[]), "rocksdb").expect("check");
        assert_eq!(debug.engine_asserts, 1, "{debug:?}");
        assert!(debug.is_debug(), "{debug:?}");
        assert!(debug.describe("rocksdb").starts_with("DEBUG BUILD"));
        let release =
            check(&build(dir.path(), "rel", ENGINE, &["-DNDEBUG"]), "rocksdb").expect("check");
        assert_eq!(
            release,
            BuildCheck {
                full_symbols: release.full_symbols,
                ..BuildCheck::default()
            }
        );
        assert!(!release.is_debug());
    }

    #[test]
    fn assertions_in_bundled_code_do_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lib = check(&build(dir.path(), "bundled", BUNDLED, &[]), "rocksdb").expect("check");
        assert_eq!((lib.engine_asserts, lib.other_asserts), (0, 1), "{lib:?}");
        assert!(!lib.is_debug(), "{lib:?}");
    }

    #[test]
    fn sync_points_mark_a_debug_build() {
        let dir = tempfile::tempdir().expect("tempdir");
        let so = build(
            dir.path(),
            "sync",
            "void _ZN7rocksdb9SyncPoint7ProcessEv(void) {}",
            &["-DNDEBUG"],
        );
        let lib = check(&so, "rocksdb").expect("check");
        assert!(lib.sync_points && lib.is_debug(), "{lib:?}");
    }

    #[test]
    fn a_stripped_debug_build_is_still_caught() {
        let dir = tempfile::tempdir().expect("tempdir");
        let source = r#"
            #include <assert.h>
            static int inner(int x) { assert(x > 0); return x - 1; }
            int rocksdb_probe(int x) { return inner(x) + inner(x + 1); }
        "#;
        let so = build(dir.path(), "stripped", source, &["-fno-inline", "-s"]);
        let lib = check(&so, "rocksdb").expect("check");
        assert!(!lib.full_symbols, "{lib:?}");
        // The unnamed function's assertion names an engine source file.
        assert!(lib.engine_asserts > 0 && lib.is_debug(), "{lib:?}");
    }

    #[test]
    fn a_stripped_release_build_with_bundled_assertions_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bundled = r#"
            #include <assert.h>
            static int inner(int x) { assert(x > 0); return x - 1; }
            int snappy_probe(int x) { return inner(x) + inner(x + 1); }
        "#;
        // Named after the bundled library: `assert` records this path.
        let so = build(dir.path(), "snappy", bundled, &["-fno-inline", "-s"]);
        let lib = check(&so, "rocksdb").expect("check");
        assert!(lib.other_asserts > 0 && !lib.is_debug(), "{lib:?}");
    }

    #[test]
    fn assertions_moved_to_cold_code_are_still_the_engine_s() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lib = check(&build(dir.path(), "o2", ENGINE, &["-O2"]), "rocksdb").expect("check");
        assert!(lib.engine_asserts > 0 && lib.is_debug(), "{lib:?}");
    }

    #[test]
    fn a_file_that_is_no_library_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("x.so");
        std::fs::write(&p, b"not an ELF file").expect("write");
        assert!(matches!(
            check(&p, "rocksdb"),
            Err(CheckError::Parse { .. })
        ));
        assert!(matches!(
            check(&dir.path().join("none"), "rocksdb"),
            Err(CheckError::Read { .. })
        ));
    }
}
