//! Loading a peer library at run time: where it is, what it is, and whether
//! it may be benchmarked.
//!
//! The bench links no C library. Each peer is a shared library loaded from a
//! path (`--rocksdb-lib` / `--leveldb-lib`, or `STRATA_ROCKSDB_LIB` /
//! `STRATA_LEVELDB_LIB`, or `DIR/<engine>/lib<engine>.so` under
//! `STRATA_PEERS_DIR`, default `~/.cache/strata/peers`, where `scripts/peers`
//! installs release builds). A `peer.json` beside the library names its
//! version and build. Before any symbol is resolved the file is checked by
//! [`super::build_check`]: a debug build is refused unless
//! `STRATA_BENCH_ALLOW_DEBUG_PEERS=1` (`--allow-debug-peers`).
//!
//! A loaded library is never unloaded: its functions are called through
//! `'static` pointers for the rest of the process.

use super::build_check;
use crate::BenchError;
use std::path::{Path, PathBuf};

/// The environment variable that allows a debug-built peer.
pub const ALLOW_DEBUG_ENV: &str = "STRATA_BENCH_ALLOW_DEBUG_PEERS";

/// The prefix of the environment variable in which a parent hands its
/// children the check it made of `engine`'s library (`path`, a line with
/// `1` for a debug build or `0`, a line describing it), so that a child
/// does not read the whole file again.
const CHECKED_ENV_PREFIX: &str = "STRATA_BENCH_CHECKED_";

/// The environment variable naming the directory `scripts/peers` fills.
pub const PEERS_DIR_ENV: &str = "STRATA_PEERS_DIR";

/// The environment variable that names `engine`'s library (`STRATA_ROCKSDB_LIB`).
pub fn lib_env(engine: &str) -> String {
    format!("STRATA_{}_LIB", engine.to_ascii_uppercase())
}

/// Where `engine`'s library is looked for (see the module doc).
pub fn lib_path(engine: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(lib_env(engine)) {
        return PathBuf::from(p);
    }
    let dir = std::env::var_os(PEERS_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/root"))
                .join(".cache/strata/peers")
        });
    dir.join(engine).join(format!("lib{engine}.so"))
}

/// A loaded peer library and what is known of it.
pub struct Peer {
    pub lib: &'static libloading::Library,
    pub path: PathBuf,
    /// From `peer.json` (`"unknown"` without one).
    pub version: String,
    /// How it was built, from `peer.json`, and the check's verdict.
    pub build: String,
    /// The check found a debug build (loaded because allowed).
    pub debug: bool,
}

impl Peer {
    /// `Name version (build)`, as the report prints it.
    pub fn describe(&self, name: &str) -> String {
        format!(
            "{name} {} ({}; {})",
            self.version,
            self.build,
            self.path.display()
        )
    }
}

fn peer_json(path: &Path) -> (Option<String>, Option<String>) {
    let Some(dir) = path.parent() else {
        return (None, None);
    };
    let Ok(text) = std::fs::read_to_string(dir.join("peer.json")) else {
        return (None, None);
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return (None, None);
    };
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    (field("version"), field("build"))
}

/// Checks and loads `engine`'s library (see the module doc). Errors say
/// what to do: install the peers, or allow a debug build.
pub fn load(engine: &str) -> Result<Peer, BenchError> {
    let path = lib_path(engine);
    if !path.exists() {
        return Err(BenchError::Usage(format!(
            "{engine}: no library at {} (run scripts/peers to install release builds, or pass --{engine}-lib PATH)",
            path.display()
        )));
    }
    let checked_env = format!("{CHECKED_ENV_PREFIX}{}", engine.to_ascii_uppercase());
    let handed = std::env::var(&checked_env).ok().and_then(|v| {
        let mut lines = v.splitn(3, '\n');
        let (p, debug, text) = (lines.next()?, lines.next()?, lines.next()?);
        (Path::new(p) == path).then(|| (debug == "1", text.to_string()))
    });
    let (debug, verdict) = match handed {
        Some(h) => h,
        None => {
            let check = build_check::check(&path, engine)
                .map_err(|e| BenchError::Usage(format!("{engine}: {e}")))?;
            let h = (check.is_debug(), check.describe(engine));
            // Set before any child starts (the parent checks every peer
            // first, on one thread), so that children inherit it.
            std::env::set_var(
                &checked_env,
                format!("{}\n{}\n{}", path.display(), u8::from(h.0), h.1),
            );
            h
        }
    };
    let allowed = std::env::var(ALLOW_DEBUG_ENV).is_ok_and(|v| v == "1");
    if debug && !allowed {
        return Err(BenchError::Usage(format!(
            "{engine}: {} is a debug build ({verdict}); a benchmark against it measures its assertions. \
             Run scripts/peers for release builds, or pass --allow-debug-peers to run it anyway",
            path.display(),
        )));
    }
    // SAFETY: loading runs the library's initialisers; the file is a peer
    // engine's shared library chosen by the user (or scripts/peers), which
    // is what the benchmark exists to run.
    let lib = unsafe { libloading::Library::new(&path) }
        .map_err(|e| BenchError::Usage(format!("{engine}: cannot load {}: {e}", path.display())))?;
    let (version, build) = peer_json(&path);
    Ok(Peer {
        lib: Box::leak(Box::new(lib)),
        version: version.unwrap_or_else(|| "unknown".into()),
        build: format!(
            "{}; {verdict}",
            build.unwrap_or_else(|| "build unknown (no peer.json beside it)".into()),
        ),
        path,
        debug,
    })
}

/// A peer library loaded once per process: its resolved calls `F`, the
/// [`super::Api`] table built from them, and what is known of it.
pub struct Loaded<F> {
    pub f: F,
    pub api: super::Api,
    pub peer: Peer,
}

/// Loads `engine`'s library into `cell` the first time (see [`load`]):
/// resolves its calls with `resolve` and builds its table with `api`;
/// later calls return what the first made.
pub fn load_once<F: Send + Sync>(
    cell: &'static std::sync::OnceLock<Loaded<F>>,
    engine: &str,
    resolve: fn(&'static libloading::Library) -> Result<F, String>,
    api: fn(&F) -> super::Api,
) -> Result<&'static Loaded<F>, BenchError> {
    if let Some(l) = cell.get() {
        return Ok(l);
    }
    let peer = load(engine)?;
    let f = resolve(peer.lib).map_err(|e| {
        BenchError::Usage(format!(
            "{engine}: {} lacks a C API call the bench uses: {e}",
            peer.path.display()
        ))
    })?;
    let api = api(&f);
    Ok(cell.get_or_init(|| Loaded { f, api, peer }))
}

/// Declares a table of C functions resolved from a loaded library: a struct
/// `$name` with one function pointer per declaration, `$name::resolve(lib)`,
/// and a method of the same name per function that calls it.
macro_rules! c_library {
    ($(#[$m:meta])* $vis:vis struct $name:ident {
        $( fn $f:ident ( $($a:ident : $t:ty),* $(,)? ) $(-> $r:ty)? ; )*
    }) => {
        $(#[$m])*
        #[allow(non_snake_case, dead_code)]
        $vis struct $name {
            $( $f: unsafe extern "C" fn($($t),*) $(-> $r)?, )*
        }

        #[allow(clippy::too_many_arguments, dead_code)]
        impl $name {
            /// Resolves every function in `lib`; an error names the first missing one.
            fn resolve(lib: &'static libloading::Library) -> Result<Self, String> {
                Ok($name {
                    $( $f: {
                        // SAFETY: the declared signature is the C header's
                        // for this symbol; the library outlives the pointer
                        // (never unloaded).
                        let s = unsafe {
                            lib.get::<unsafe extern "C" fn($($t),*) $(-> $r)?>(
                                concat!(stringify!($f), "\0").as_bytes(),
                            )
                        }
                        .map_err(|e| format!("{}: {e}", stringify!($f)))?;
                        *s
                    }, )*
                })
            }

            $(
                /// Calls the C function of this name.
                ///
                /// # Safety
                /// As the C API requires of this call.
                $vis unsafe fn $f(&self, $($a: $t),*) $(-> $r)? {
                    // SAFETY: guaranteed by the caller.
                    unsafe { (self.$f)($($a),*) }
                }
            )*
        }
    };
}
pub(crate) use c_library;
