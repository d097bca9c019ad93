//! LevelDB through its C API (`leveldb/c.h`), from a library loaded at run
//! time (see [`super::dl`]): by default a release build of LevelDB 1.23 as
//! `scripts/peers` makes it.

use super::dl::c_library;
use super::{c_path, Api, ErrPtr, FfiError, Handle, Owned, PropertyReader};
use crate::settings::{EngineSettings, OpenEngine};
use crate::BenchError;
use std::ffi::{c_char, c_int, c_uchar, c_void};
use std::path::Path;
use std::sync::OnceLock;

c_library! {
    /// The C API calls the bench makes, resolved from the loaded library.
    struct Fns {
    fn leveldb_options_create() -> Handle;
    fn leveldb_options_destroy(o: Handle);
    fn leveldb_options_set_create_if_missing(o: Handle, v: c_uchar);
    fn leveldb_options_set_write_buffer_size(o: Handle, v: usize);
    fn leveldb_options_set_max_open_files(o: Handle, v: c_int);
    fn leveldb_options_set_cache(o: Handle, c: Handle);
    fn leveldb_options_set_block_size(o: Handle, v: usize);
    fn leveldb_options_set_max_file_size(o: Handle, v: usize);
    fn leveldb_options_set_compression(o: Handle, v: c_int);
    fn leveldb_options_set_filter_policy(o: Handle, p: Handle);
    fn leveldb_filterpolicy_create_bloom(bits_per_key: c_int) -> Handle;
    fn leveldb_filterpolicy_destroy(p: Handle);
    fn leveldb_cache_create_lru(capacity: usize) -> Handle;
    fn leveldb_cache_destroy(c: Handle);
    fn leveldb_open(o: Handle, name: *const c_char, err: ErrPtr) -> Handle;
    fn leveldb_close(db: Handle);
    fn leveldb_put(
        db: Handle,
        wo: Handle,
        k: *const c_char,
        kl: usize,
        v: *const c_char,
        vl: usize,
        err: ErrPtr,
    );
    fn leveldb_get(
        db: Handle,
        ro: Handle,
        k: *const c_char,
        kl: usize,
        vl: *mut usize,
        err: ErrPtr,
    ) -> *mut c_char;
    fn leveldb_delete(db: Handle, wo: Handle, k: *const c_char, kl: usize, err: ErrPtr);
    fn leveldb_write(db: Handle, wo: Handle, b: Handle, err: ErrPtr);
    fn leveldb_writebatch_create() -> Handle;
    fn leveldb_writebatch_destroy(b: Handle);
    fn leveldb_writebatch_put(b: Handle, k: *const c_char, kl: usize, v: *const c_char, vl: usize);
    fn leveldb_writebatch_delete(b: Handle, k: *const c_char, kl: usize);
    fn leveldb_writeoptions_create() -> Handle;
    fn leveldb_writeoptions_destroy(w: Handle);
    fn leveldb_writeoptions_set_sync(w: Handle, v: c_uchar);
    fn leveldb_readoptions_create() -> Handle;
    fn leveldb_readoptions_destroy(r: Handle);
    fn leveldb_create_iterator(db: Handle, ro: Handle) -> Handle;
    fn leveldb_iter_destroy(it: Handle);
    fn leveldb_iter_valid(it: Handle) -> c_uchar;
    fn leveldb_iter_seek_to_first(it: Handle);
    fn leveldb_iter_seek_to_last(it: Handle);
    fn leveldb_iter_seek(it: Handle, k: *const c_char, kl: usize);
    fn leveldb_iter_next(it: Handle);
    fn leveldb_iter_prev(it: Handle);
    fn leveldb_iter_key(it: Handle, kl: *mut usize) -> *const c_char;
    fn leveldb_iter_value(it: Handle, vl: *mut usize) -> *const c_char;
    fn leveldb_iter_get_error(it: Handle, err: ErrPtr);
    fn leveldb_compact_range(db: Handle, s: *const c_char, sl: usize, l: *const c_char, ll: usize);
    fn leveldb_property_value(db: Handle, name: *const c_char) -> *mut c_char;
    fn leveldb_free(p: *mut c_void);
    fn leveldb_major_version() -> c_int;
    fn leveldb_minor_version() -> c_int;
}
}

type Loaded = super::dl::Loaded<Fns>;

static LOADED: OnceLock<Loaded> = OnceLock::new();

/// Loads LevelDB (once per process; see [`super::dl::load_once`]).
fn loaded() -> Result<&'static Loaded, BenchError> {
    super::dl::load_once(&LOADED, "leveldb", Fns::resolve, api_of)
}

/// The [`Api`] table of the resolved calls.
fn api_of(f: &Fns) -> Api {
    Api {
        engine: "leveldb",
        close: f.leveldb_close,
        put: f.leveldb_put,
        get: f.leveldb_get,
        // LevelDB's C API has no pinned get: its get copies twice.
        pinned_get: None,
        delete: f.leveldb_delete,
        write: f.leveldb_write,
        batch_create: f.leveldb_writebatch_create,
        batch_destroy: f.leveldb_writebatch_destroy,
        batch_put: f.leveldb_writebatch_put,
        batch_delete: f.leveldb_writebatch_delete,
        batch_delete_range: None,
        merge: None,
        batch_merge: None,
        checkpoint: None,
        backup: None,
        create_iterator: f.leveldb_create_iterator,
        iter_destroy: f.leveldb_iter_destroy,
        iter_valid: f.leveldb_iter_valid,
        iter_seek_to_first: f.leveldb_iter_seek_to_first,
        iter_seek_to_last: f.leveldb_iter_seek_to_last,
        iter_seek: f.leveldb_iter_seek,
        iter_next: f.leveldb_iter_next,
        iter_prev: f.leveldb_iter_prev,
        iter_key: f.leveldb_iter_key,
        iter_value: f.leveldb_iter_value,
        iter_get_error: f.leveldb_iter_get_error,
        property_value: f.leveldb_property_value,
        free: f.leveldb_free,
        flush,
        files_at_level: "leveldb.num-files-at-level{}",
        idle,
        // 1.6 s for a 64 MiB memtable (meant to outlast a flush of it),
        // down to 2 looks for small ones.
        quiet_looks: |write_buffer| (write_buffer >> 20).div_ceil(2).clamp(2, 40) as u32,
    }
}

/// Checks and loads the library, for the parent's look before any run;
/// returns the line the report prints for it.
pub fn probe() -> Result<String, BenchError> {
    Ok(version_of(loaded()?))
}

/// LevelDB has no public flush: `CompactRange` always compacts the
/// memtable first, and a range above every key (keys are hex text) has no
/// table to compact, so this writes the memtable and nothing else.
///
/// # Safety
/// `db` must be an open LevelDB database.
unsafe fn flush(_api: &Api, db: Handle) -> Result<(), FfiError> {
    let f = &LOADED
        .get()
        .ok_or(FfiError::Null {
            engine: "leveldb",
            call: "compact_range (library not loaded)",
        })?
        .f;
    let lo: &[u8] = b"\xff\xff\xff\xfe";
    let hi: &[u8] = b"\xff\xff\xff\xff";
    // SAFETY: db is open; the bounds outlive the call.
    unsafe {
        f.leveldb_compact_range(
            db,
            lo.as_ptr().cast(),
            lo.len(),
            hi.as_ptr().cast(),
            hi.len(),
        )
    };
    Ok(())
}

/// Idle when no level is due for compaction by LevelDB's own scores (1.23:
/// level 0 at 4 tables, level 1 at 10 MiB, ×10 per level, levels 0–5
/// scored), read from the `leveldb.sstables` listing, which is also the
/// state returned. LevelDB exposes no running-work counts: a compaction
/// keeps its level due until it installs, but a memtable flush shows only
/// once its table is installed, so the caller wants the listing unchanged
/// for longer than a flush takes (`quiet_looks`). Seek-triggered
/// compactions are not visible (the benchmark settles after writes).
fn idle(property: &PropertyReader<'_>) -> Result<Option<String>, String> {
    let listing = property("leveldb.sstables")
        .ok_or_else(|| "property leveldb.sstables unavailable".to_string())?;
    Ok((!sstables_due(&listing)).then_some(listing))
}

/// True if the `leveldb.sstables` listing shows a level over its trigger.
fn sstables_due(listing: &str) -> bool {
    const LEVEL1_BYTES: f64 = 10.0 * 1048576.0;
    let mut files = [0usize; 7];
    let mut bytes = [0u64; 7];
    let mut level = 0;
    for line in listing.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("--- level ") {
            level = rest
                .trim_end_matches(" ---")
                .trim()
                .parse::<usize>()
                .unwrap_or(0)
                .min(6);
        } else if let Some((_, after)) = line.split_once(':') {
            // " 12:2097152['a' @ 1 : 1 .. 'z' @ 9 : 1]": number, size, range.
            let size = after.split('[').next().unwrap_or("").trim();
            if let Ok(size) = size.parse::<u64>() {
                files[level] += 1;
                bytes[level] += size;
            }
        }
    }
    if files[0] >= 4 {
        return true;
    }
    let mut target = LEVEL1_BYTES;
    for &b in &bytes[1..6] {
        if b as f64 >= target {
            return true;
        }
        target *= 10.0;
    }
    false
}

/// The report's name for the loaded library: its own version call, and
/// the build from `peer.json` and the check.
fn version_of(l: &Loaded) -> String {
    // SAFETY: plain getters without arguments.
    let (major, minor) = unsafe { (l.f.leveldb_major_version(), l.f.leveldb_minor_version()) };
    let mut peer = l.peer.describe("LevelDB");
    if l.peer.version == "unknown" {
        peer = peer.replacen("unknown", &format!("{major}.{minor}"), 1);
    }
    peer
}

/// LevelDB 1.23's own defaults (`include/leveldb/options.h`), what
/// `leveldb_options_create` gives: the `--own-defaults` mode sets nothing
/// but `create_if_missing` and the write options' `sync`.
pub mod own {
    /// `write_buffer_size`: 4 MiB.
    pub const WRITE_BUFFER_SIZE: usize = 4 << 20;
    /// `max_file_size`: 2 MiB.
    pub const MAX_FILE_SIZE: usize = 2 << 20;
    /// `block_cache` NULL: LevelDB makes an 8 MiB LRU cache of its own.
    pub const BLOCK_CACHE_SIZE: usize = 8 << 20;
    /// `block_size`: 4 KiB.
    pub const BLOCK_SIZE: usize = 4 << 10;
    /// `max_open_files`.
    pub const MAX_OPEN_FILES: usize = 1000;
    /// The settings line of the report.
    pub fn settings(sync: bool) -> String {
        format!(
            "{} (LevelDB 1.23 Options, nothing set but create_if_missing): write_buffer_size={WRITE_BUFFER_SIZE},\
             max_file_size={MAX_FILE_SIZE},block_size={BLOCK_SIZE},filter_policy=none (NULL),\
             cache=LevelDB's internal lru({BLOCK_CACHE_SIZE}),compression=snappy (the library links \
             libsnappy; a block that snappy does not shrink by 1/8 is stored raw),max_open_files={MAX_OPEN_FILES},\
             wal=on,sync={sync} (fixed in LevelDB: one background thread, L0 triggers 4/8/12, L1 10 MiB x10)",
            crate::settings::OWN_DEFAULTS_PREFIX
        )
    }
}

/// Opens LevelDB in `dir` with its own defaults (`--own-defaults`).
fn open_own(s: &EngineSettings, dir: &Path) -> Result<OpenEngine, BenchError> {
    let l = loaded()?;
    let f = &l.f;
    let name = c_path("leveldb", dir)?;
    // SAFETY: as in `open`; no cache or filter policy is made, so only the
    // read and write options outlive the open.
    unsafe {
        let o = f.leveldb_options_create();
        let ro = f.leveldb_readoptions_create();
        let wo = f.leveldb_writeoptions_create();
        if [o, ro, wo].iter().any(|p| p.is_null()) {
            for (p, destroy) in [
                (o, f.leveldb_options_destroy as unsafe extern "C" fn(Handle)),
                (ro, f.leveldb_readoptions_destroy),
                (wo, f.leveldb_writeoptions_destroy),
            ] {
                if !p.is_null() {
                    destroy(p);
                }
            }
            return Err(FfiError::Null {
                engine: "leveldb",
                call: "*_create",
            }
            .into());
        }
        f.leveldb_options_set_create_if_missing(o, 1);
        f.leveldb_writeoptions_set_sync(wo, u8::from(s.sync));
        let mut err: *mut c_char = std::ptr::null_mut();
        let db = f.leveldb_open(o, name.as_ptr(), &mut err);
        f.leveldb_options_destroy(o);
        let owned = vec![
            Owned {
                handle: ro,
                destroy: f.leveldb_readoptions_destroy,
            },
            Owned {
                handle: wo,
                destroy: f.leveldb_writeoptions_destroy,
            },
        ];
        super::finish_open(
            &l.api,
            err,
            db,
            ro,
            wo,
            owned,
            dir,
            version_of(l),
            own::settings(s.sync),
            own::WRITE_BUFFER_SIZE,
            s,
        )
    }
}

/// Opens LevelDB in `dir` configured like the other engines (or with its
/// own defaults when `s.own_defaults`).
pub fn open(s: &EngineSettings, dir: &Path) -> Result<OpenEngine, BenchError> {
    let l = loaded()?;
    let f = &l.f;
    if s.own_defaults {
        return open_own(s, dir);
    }
    // LevelDB 1.23 compresses with snappy or not at all: a run that asks
    // for LZ4 gets snappy, its one fast compressor (the settings line says so).
    let (compression, compression_name) = match s.compression.as_str() {
        "none" => (0, "none"),
        "lz4" | "snappy" => (1, "snappy (LevelDB has no LZ4)"),
        other => {
            return Err(BenchError::Usage(format!(
                "leveldb: compression {other} is not available (none, or lz4 run as snappy)"
            )))
        }
    };
    let name = c_path("leveldb", dir)?;
    let settings = format!(
        "create_if_missing=true,write_buffer_size={},max_file_size={},block_size={},\
         filter_policy=bloom({} bits/key),cache=lru({}),compression={compression_name},max_open_files=1000,\
         wal=on,sync={} (fixed in LevelDB: one background thread, L0 triggers 4/8/12, L1 10 MiB x10)",
        s.write_buffer_size, s.target_file_size, s.block_size, s.bloom_bits_per_key, s.block_cache_size, s.sync
    );
    // SAFETY: every object is created here, checked for NULL, and either
    // destroyed before returning (the options, which LevelDB copies at
    // open) or handed to the CStore, which destroys it after closing the
    // database (cache and filter policy are referenced by the open db).
    unsafe {
        let o = f.leveldb_options_create();
        let cache = f.leveldb_cache_create_lru(s.block_cache_size);
        let bits = c_int::try_from(s.bloom_bits_per_key).unwrap_or(10);
        let filter = f.leveldb_filterpolicy_create_bloom(bits);
        let ro = f.leveldb_readoptions_create();
        let wo = f.leveldb_writeoptions_create();
        if [o, cache, filter, ro, wo].iter().any(|p| p.is_null()) {
            return Err(FfiError::Null {
                engine: "leveldb",
                call: "*_create",
            }
            .into());
        }
        f.leveldb_options_set_create_if_missing(o, 1);
        f.leveldb_options_set_write_buffer_size(o, s.write_buffer_size);
        f.leveldb_options_set_max_open_files(o, 1000);
        f.leveldb_options_set_cache(o, cache);
        f.leveldb_options_set_block_size(o, s.block_size);
        f.leveldb_options_set_max_file_size(
            o,
            usize::try_from(s.target_file_size).unwrap_or(64 << 20),
        );
        f.leveldb_options_set_compression(o, compression);
        f.leveldb_options_set_filter_policy(o, filter);
        f.leveldb_writeoptions_set_sync(wo, u8::from(s.sync));
        let mut err: *mut c_char = std::ptr::null_mut();
        let db = f.leveldb_open(o, name.as_ptr(), &mut err);
        f.leveldb_options_destroy(o);
        let owned = vec![
            Owned {
                handle: ro,
                destroy: f.leveldb_readoptions_destroy,
            },
            Owned {
                handle: wo,
                destroy: f.leveldb_writeoptions_destroy,
            },
            Owned {
                handle: cache,
                destroy: f.leveldb_cache_destroy,
            },
            Owned {
                handle: filter,
                destroy: f.leveldb_filterpolicy_destroy,
            },
        ];
        super::finish_open(
            &l.api,
            err,
            db,
            ro,
            wo,
            owned,
            dir,
            version_of(l),
            settings,
            s.write_buffer_size,
            s,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::sstables_due;

    #[test]
    fn due_levels_are_read_from_the_listing() {
        let quiet = "--- level 0 ---\n 7:100['a' @ 1 : 1 .. 'b' @ 2 : 1]\n\
                     --- level 1 ---\n 5:9000000['a' @ 1 : 1 .. 'z' @ 2 : 1]\n\
                     --- level 2 ---\n 4:90000000['a:b' @ 1 : 1 .. 'z' @ 2 : 1]\n";
        assert!(!sstables_due(quiet));
        let l0 = "--- level 0 ---\n 1:1[]\n 2:1[]\n 3:1[]\n 4:1[]\n";
        assert!(sstables_due(l0));
        let l1 = "--- level 0 ---\n--- level 1 ---\n 5:6000000[]\n 6:6000000[]\n";
        assert!(sstables_due(l1));
        assert!(!sstables_due(""));
    }
}
