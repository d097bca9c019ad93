//! RocksDB through its C API (`rocksdb/c.h`), from a library loaded at run
//! time (see [`super::dl`]): by default RocksDB's own release library as
//! `scripts/peers` installs it.

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
    fn rocksdb_options_create() -> Handle;
    fn rocksdb_options_destroy(o: Handle);
    fn rocksdb_options_set_create_if_missing(o: Handle, v: c_uchar);
    fn rocksdb_options_set_write_buffer_size(o: Handle, v: usize);
    fn rocksdb_options_set_max_write_buffer_number(o: Handle, v: c_int);
    fn rocksdb_options_set_level0_file_num_compaction_trigger(o: Handle, v: c_int);
    fn rocksdb_options_set_level0_slowdown_writes_trigger(o: Handle, v: c_int);
    fn rocksdb_options_set_level0_stop_writes_trigger(o: Handle, v: c_int);
    fn rocksdb_options_set_max_bytes_for_level_base(o: Handle, v: u64);
    fn rocksdb_options_set_max_bytes_for_level_multiplier(o: Handle, v: f64);
    fn rocksdb_options_set_target_file_size_base(o: Handle, v: u64);
    fn rocksdb_options_set_num_levels(o: Handle, v: c_int);
    fn rocksdb_options_set_compression(o: Handle, v: c_int);
    fn rocksdb_options_set_max_background_jobs(o: Handle, v: c_int);
    fn rocksdb_options_set_max_subcompactions(o: Handle, v: u32);
    fn rocksdb_options_set_block_based_table_factory(o: Handle, t: Handle);
    fn rocksdb_block_based_options_create() -> Handle;
    fn rocksdb_block_based_options_destroy(t: Handle);
    fn rocksdb_block_based_options_set_block_size(t: Handle, v: usize);
    fn rocksdb_block_based_options_set_filter_policy(t: Handle, p: Handle);
    fn rocksdb_block_based_options_set_block_cache(t: Handle, c: Handle);
    fn rocksdb_filterpolicy_create_bloom_full(bits_per_key: f64) -> Handle;
    fn rocksdb_cache_create_lru(capacity: usize) -> Handle;
    fn rocksdb_cache_destroy(c: Handle);
    fn rocksdb_open(o: Handle, name: *const c_char, err: ErrPtr) -> Handle;
    fn rocksdb_close(db: Handle);
    fn rocksdb_put(
        db: Handle,
        wo: Handle,
        k: *const c_char,
        kl: usize,
        v: *const c_char,
        vl: usize,
        err: ErrPtr,
    );
    fn rocksdb_get(
        db: Handle,
        ro: Handle,
        k: *const c_char,
        kl: usize,
        vl: *mut usize,
        err: ErrPtr,
    ) -> *mut c_char;
    fn rocksdb_delete(db: Handle, wo: Handle, k: *const c_char, kl: usize, err: ErrPtr);
    fn rocksdb_write(db: Handle, wo: Handle, b: Handle, err: ErrPtr);
    fn rocksdb_writebatch_create() -> Handle;
    fn rocksdb_writebatch_destroy(b: Handle);
    fn rocksdb_writebatch_put(b: Handle, k: *const c_char, kl: usize, v: *const c_char, vl: usize);
    fn rocksdb_writebatch_delete(b: Handle, k: *const c_char, kl: usize);
    fn rocksdb_writebatch_delete_range(
        b: Handle,
        start: *const c_char,
        sl: usize,
        end: *const c_char,
        el: usize,
    );
    fn rocksdb_writeoptions_create() -> Handle;
    fn rocksdb_writeoptions_destroy(w: Handle);
    fn rocksdb_writeoptions_set_sync(w: Handle, v: c_uchar);
    fn rocksdb_readoptions_create() -> Handle;
    fn rocksdb_readoptions_destroy(r: Handle);
    fn rocksdb_create_iterator(db: Handle, ro: Handle) -> Handle;
    fn rocksdb_iter_destroy(it: Handle);
    fn rocksdb_iter_valid(it: Handle) -> c_uchar;
    fn rocksdb_iter_seek_to_first(it: Handle);
    fn rocksdb_iter_seek_to_last(it: Handle);
    fn rocksdb_iter_seek(it: Handle, k: *const c_char, kl: usize);
    fn rocksdb_iter_next(it: Handle);
    fn rocksdb_iter_prev(it: Handle);
    fn rocksdb_iter_key(it: Handle, kl: *mut usize) -> *const c_char;
    fn rocksdb_iter_value(it: Handle, vl: *mut usize) -> *const c_char;
    fn rocksdb_iter_get_error(it: Handle, err: ErrPtr);
    fn rocksdb_flushoptions_create() -> Handle;
    fn rocksdb_flushoptions_destroy(f: Handle);
    fn rocksdb_flushoptions_set_wait(f: Handle, v: c_uchar);
    fn rocksdb_flush(db: Handle, f: Handle, err: ErrPtr);
    fn rocksdb_property_value(db: Handle, name: *const c_char) -> *mut c_char;
    fn rocksdb_free(p: *mut c_void);
    fn rocksdb_get_pinned(
        db: Handle,
        ro: Handle,
        k: *const c_char,
        kl: usize,
        err: ErrPtr,
    ) -> Handle;
    fn rocksdb_pinnableslice_value(p: Handle, vl: *mut usize) -> *const c_char;
    fn rocksdb_pinnableslice_destroy(p: Handle);
    fn rocksdb_options_set_recycle_log_file_num(o: Handle, v: usize);
    fn rocksdb_options_set_uint64add_merge_operator(o: Handle);
    fn rocksdb_merge(
        db: Handle,
        wo: Handle,
        k: *const c_char,
        kl: usize,
        v: *const c_char,
        vl: usize,
        err: ErrPtr,
    );
    fn rocksdb_writebatch_merge(b: Handle, k: *const c_char, kl: usize, v: *const c_char, vl: usize);
}
}

type Loaded = super::dl::Loaded<Fns>;

static LOADED: OnceLock<Loaded> = OnceLock::new();

/// RocksDB's checkpoint calls (`rocksdb/c.h`), resolved apart from [`Fns`]
/// and optional: a library without them runs every other workload, and
/// its checkpoints are `NotSupported`.
#[derive(Clone, Copy)]
struct CheckpointFns {
    object_create: unsafe extern "C" fn(db: Handle, err: ErrPtr) -> Handle,
    create:
        unsafe extern "C" fn(cp: Handle, dir: *const c_char, log_size_for_flush: u64, err: ErrPtr),
    object_destroy: unsafe extern "C" fn(cp: Handle),
}

impl CheckpointFns {
    /// All three calls, or `None` if the library lacks any.
    fn resolve(lib: &'static libloading::Library) -> Option<Self> {
        // SAFETY: each signature is the C header's for its symbol; the
        // library outlives the pointers (never unloaded).
        unsafe {
            Some(CheckpointFns {
                object_create: *lib
                    .get::<unsafe extern "C" fn(Handle, ErrPtr) -> Handle>(
                        b"rocksdb_checkpoint_object_create\0",
                    )
                    .ok()?,
                create: *lib
                    .get::<unsafe extern "C" fn(Handle, *const c_char, u64, ErrPtr)>(
                        b"rocksdb_checkpoint_create\0",
                    )
                    .ok()?,
                object_destroy: *lib
                    .get::<unsafe extern "C" fn(Handle)>(b"rocksdb_checkpoint_object_destroy\0")
                    .ok()?,
            })
        }
    }
}

/// The checkpoint calls of the loaded library (set when it is resolved;
/// `None` inside: it has none).
static CHECKPOINT: OnceLock<Option<CheckpointFns>> = OnceLock::new();

/// RocksDB's backup engine calls (`rocksdb/c.h`), resolved apart from
/// [`Fns`] and optional like [`CheckpointFns`]: a library without them
/// runs every other workload, and its backups are `NotSupported`.
#[derive(Clone, Copy)]
struct BackupFns {
    engine_open: unsafe extern "C" fn(options: Handle, path: *const c_char, err: ErrPtr) -> Handle,
    create_new_backup_flush:
        unsafe extern "C" fn(be: Handle, db: Handle, flush_before_backup: c_uchar, err: ErrPtr),
    engine_close: unsafe extern "C" fn(be: Handle),
}

impl BackupFns {
    /// All three calls, or `None` if the library lacks any.
    fn resolve(lib: &'static libloading::Library) -> Option<Self> {
        // SAFETY: each signature is the C header's for its symbol (the
        // options pointer is `const`, passed as a handle); the library
        // outlives the pointers (never unloaded).
        unsafe {
            Some(BackupFns {
                engine_open: *lib
                    .get::<unsafe extern "C" fn(Handle, *const c_char, ErrPtr) -> Handle>(
                        b"rocksdb_backup_engine_open\0",
                    )
                    .ok()?,
                create_new_backup_flush: *lib
                    .get::<unsafe extern "C" fn(Handle, Handle, c_uchar, ErrPtr)>(
                        b"rocksdb_backup_engine_create_new_backup_flush\0",
                    )
                    .ok()?,
                engine_close: *lib
                    .get::<unsafe extern "C" fn(Handle)>(b"rocksdb_backup_engine_close\0")
                    .ok()?,
            })
        }
    }
}

/// The backup engine calls of the loaded library (set when it is
/// resolved; `None` inside: it has none).
static BACKUP: OnceLock<Option<BackupFns>> = OnceLock::new();

/// Resolves the calls the bench needs ([`Fns`]) and the optional
/// checkpoint and backup calls ([`CHECKPOINT`], [`BACKUP`], which
/// [`api_of`] then reads).
fn resolve(lib: &'static libloading::Library) -> Result<Fns, String> {
    let f = Fns::resolve(lib)?;
    let _ = CHECKPOINT.set(CheckpointFns::resolve(lib));
    let _ = BACKUP.set(BackupFns::resolve(lib));
    Ok(f)
}

/// Loads RocksDB (once per process; see [`super::dl::load_once`]).
fn loaded() -> Result<&'static Loaded, BenchError> {
    super::dl::load_once(&LOADED, "rocksdb", resolve, api_of)
}

/// The [`Api`] table of the resolved calls.
fn api_of(f: &Fns) -> Api {
    Api {
        engine: "rocksdb",
        close: f.rocksdb_close,
        put: f.rocksdb_put,
        get: f.rocksdb_get,
        pinned_get: Some(pinned_get),
        delete: f.rocksdb_delete,
        write: f.rocksdb_write,
        batch_create: f.rocksdb_writebatch_create,
        batch_destroy: f.rocksdb_writebatch_destroy,
        batch_put: f.rocksdb_writebatch_put,
        batch_delete: f.rocksdb_writebatch_delete,
        batch_delete_range: Some(f.rocksdb_writebatch_delete_range),
        merge: Some(f.rocksdb_merge),
        batch_merge: Some(f.rocksdb_writebatch_merge),
        // Resolved just before (see `resolve`): absent from an older library.
        checkpoint: match CHECKPOINT.get() {
            Some(Some(_)) => Some(checkpoint as super::Checkpoint),
            _ => None,
        },
        backup: match BACKUP.get() {
            Some(Some(_)) => Some(backup as super::Backup),
            _ => None,
        },
        create_iterator: f.rocksdb_create_iterator,
        iter_destroy: f.rocksdb_iter_destroy,
        iter_valid: f.rocksdb_iter_valid,
        iter_seek_to_first: f.rocksdb_iter_seek_to_first,
        iter_seek_to_last: f.rocksdb_iter_seek_to_last,
        iter_seek: f.rocksdb_iter_seek,
        iter_next: f.rocksdb_iter_next,
        iter_prev: f.rocksdb_iter_prev,
        iter_key: f.rocksdb_iter_key,
        iter_value: f.rocksdb_iter_value,
        iter_get_error: f.rocksdb_iter_get_error,
        property_value: f.rocksdb_property_value,
        free: f.rocksdb_free,
        flush,
        files_at_level: "rocksdb.num-files-at-level{}",
        idle,
        quiet_looks: |_| 2,
    }
}

/// Checks and loads the library, for the parent's look before any run;
/// returns the line the report prints for it.
pub fn probe() -> Result<String, BenchError> {
    Ok(version_of(loaded()?))
}

/// A get through `rocksdb_get_pinned` (db_bench's `PinnableSlice`): the
/// value is copied once, out of the pinned block.
///
/// # Safety
/// `db` and `ro` must be a live database and read options of this library.
unsafe fn pinned_get(
    _api: &Api,
    db: Handle,
    ro: Handle,
    key: &[u8],
) -> Result<Option<Vec<u8>>, FfiError> {
    let f = &LOADED
        .get()
        .ok_or(FfiError::Null {
            engine: "rocksdb",
            call: "get_pinned (library not loaded)",
        })?
        .f;
    let mut err: *mut c_char = std::ptr::null_mut();
    // SAFETY: db and ro are live (caller); key outlives the call.
    let p = unsafe { f.rocksdb_get_pinned(db, ro, key.as_ptr().cast(), key.len(), &mut err) };
    if !err.is_null() {
        // SAFETY: err is a message of this library; freed by check.
        return unsafe { LOADED.get().map(|l| l.api.check(err)) }
            .unwrap_or(Ok(()))
            .map(|()| None);
    }
    if p.is_null() {
        return Ok(None);
    }
    let mut len = 0usize;
    // SAFETY: p is a live pinnable slice; its value stays valid until it
    // is destroyed, after the copy.
    let v = unsafe {
        let data = f.rocksdb_pinnableslice_value(p, &mut len);
        let v = super::copy(data, len);
        f.rocksdb_pinnableslice_destroy(p);
        v
    };
    Ok(Some(v))
}

/// `rocksdb_flush` with `wait = true`.
///
/// # Safety
/// `db` must be an open RocksDB database.
unsafe fn flush(api: &Api, db: Handle) -> Result<(), FfiError> {
    let f = &LOADED
        .get()
        .ok_or(FfiError::Null {
            engine: "rocksdb",
            call: "flush (library not loaded)",
        })?
        .f;
    // SAFETY: fresh flush options, destroyed below; db is open.
    unsafe {
        let fo = f.rocksdb_flushoptions_create();
        if fo.is_null() {
            return Err(FfiError::Null {
                engine: "rocksdb",
                call: "flushoptions_create",
            });
        }
        f.rocksdb_flushoptions_set_wait(fo, 1);
        let mut err: *mut c_char = std::ptr::null_mut();
        f.rocksdb_flush(db, fo, &mut err);
        f.rocksdb_flushoptions_destroy(fo);
        api.check(err)
    }
}

/// `rocksdb_checkpoint_create` into `target` (a directory that must not
/// exist yet) with `log_size_for_flush` 0: RocksDB flushes the memtable
/// first, as strata's checkpoint does, and hard-links the tables.
///
/// # Safety
/// `db` must be an open RocksDB database.
unsafe fn checkpoint(api: &Api, db: Handle, target: &Path) -> Result<(), FfiError> {
    let Some(c) = CHECKPOINT.get().copied().flatten() else {
        return Err(FfiError::Null {
            engine: "rocksdb",
            call: "checkpoint_object_create (not in this library)",
        });
    };
    let dir = c_path("rocksdb", target)?;
    let mut err: *mut c_char = std::ptr::null_mut();
    // SAFETY: db is open (caller); the checkpoint object is destroyed once
    // it is made, on every path; `dir` outlives the call.
    unsafe {
        let cp = (c.object_create)(db, &mut err);
        api.check(err)?;
        if cp.is_null() {
            return Err(FfiError::Null {
                engine: "rocksdb",
                call: "checkpoint_object_create",
            });
        }
        (c.create)(cp, dir.as_ptr(), 0, &mut err);
        (c.object_destroy)(cp);
        api.check(err)
    }
}

/// A new backup of `db` in `dir` by RocksDB's `BackupEngine`
/// (`rocksdb_backup_engine_create_new_backup_flush` with
/// `flush_before_backup` 1: the memtable is flushed first, as strata's
/// backup does). The engine is opened on `dir` (it creates the directory,
/// whose parent must exist) with fresh default options, which it reads for
/// their environment only, and closed after the one backup.
///
/// # Safety
/// `db` must be an open RocksDB database.
unsafe fn backup(api: &Api, db: Handle, dir: &Path) -> Result<(), FfiError> {
    let Some(b) = BACKUP.get().copied().flatten() else {
        return Err(FfiError::Null {
            engine: "rocksdb",
            call: "backup_engine_open (not in this library)",
        });
    };
    let f = &LOADED
        .get()
        .ok_or(FfiError::Null {
            engine: "rocksdb",
            call: "backup (library not loaded)",
        })?
        .f;
    let path = c_path("rocksdb", dir)?;
    let mut err: *mut c_char = std::ptr::null_mut();
    // SAFETY: db is open (caller); the options are destroyed on every path
    // after the engine that read them is closed (or failed to open), the
    // engine is closed once the backup is made; `path` outlives the calls.
    unsafe {
        let o = f.rocksdb_options_create();
        if o.is_null() {
            return Err(FfiError::Null {
                engine: "rocksdb",
                call: "options_create",
            });
        }
        let be = (b.engine_open)(o, path.as_ptr(), &mut err);
        if let Err(e) = api.check(err) {
            f.rocksdb_options_destroy(o);
            return Err(e);
        }
        if be.is_null() {
            f.rocksdb_options_destroy(o);
            return Err(FfiError::Null {
                engine: "rocksdb",
                call: "backup_engine_open",
            });
        }
        (b.create_new_backup_flush)(be, db, 1, &mut err);
        (b.engine_close)(be);
        f.rocksdb_options_destroy(o);
        api.check(err)
    }
}

/// Idle when no flush or compaction runs and none is pending; a recorded
/// background error is an error (RocksDB would stay "pending" forever).
fn idle(property: &PropertyReader<'_>) -> Result<Option<String>, String> {
    let number = |name: &str| {
        property(name)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("property {name} unavailable"))
    };
    let errors = number("rocksdb.background-errors")?;
    if errors > 0 {
        return Err(format!("{errors} background error(s) reported"));
    }
    for name in [
        "rocksdb.num-running-flushes",
        "rocksdb.num-running-compactions",
        "rocksdb.mem-table-flush-pending",
        "rocksdb.compaction-pending",
    ] {
        if number(name)? > 0 {
            return Ok(None);
        }
    }
    Ok(Some(String::new()))
}

/// The report's name for the loaded library: version and build.
fn version_of(l: &Loaded) -> String {
    l.peer.describe("RocksDB")
}

/// RocksDB's compression type codes (`rocksdb_*_compression`).
fn compression_code(name: &str) -> Result<c_int, BenchError> {
    match name {
        "none" => Ok(0),
        "lz4" => Ok(4),
        "zstd" => Ok(7),
        _ => Err(BenchError::Usage(format!(
            "rocksdb: unknown compression {name}"
        ))),
    }
}

/// Logs RocksDB keeps for reuse in synced runs.
const RECYCLED_LOGS: usize = 4;

fn int(v: usize) -> c_int {
    c_int::try_from(v).unwrap_or(c_int::MAX)
}

/// RocksDB's own defaults (`Options()` as `rocksdb_options_create` makes
/// it): the `--own-defaults` mode sets nothing but `create_if_missing` and
/// the write options' `sync`, then reads the effective values back from
/// the `OPTIONS-*` file RocksDB writes at open and from the
/// `rocksdb.block-cache-capacity` property.
pub mod own {
    use std::path::Path;

    /// The options the report lists, as the `OPTIONS-*` file names them.
    pub const KEYS: &[&str] = &[
        "write_buffer_size",
        "max_write_buffer_number",
        "level0_file_num_compaction_trigger",
        "level0_slowdown_writes_trigger",
        "level0_stop_writes_trigger",
        "max_bytes_for_level_base",
        "max_bytes_for_level_multiplier",
        "num_levels",
        "target_file_size_base",
        "compression",
        "max_background_jobs",
        "max_subcompactions",
        "max_open_files",
        "block_size",
        "filter_policy",
    ];

    /// The block cache RocksDB makes when none is given (32 MiB since
    /// RocksDB 8; the report reads the effective one back).
    pub const BLOCK_CACHE_SIZE: usize = 32 << 20;

    /// The memtable size RocksDB's `Options()` has (64 MiB).
    pub const WRITE_BUFFER_SIZE: usize = 64 << 20;

    /// The values of [`KEYS`] in an `OPTIONS-*` file's text (`key=value`
    /// lines; the first occurrence of each key), in [`KEYS`]' order;
    /// `None` for a key the file lacks.
    pub fn values(text: &str) -> Vec<(&'static str, Option<String>)> {
        KEYS.iter()
            .map(|&key| {
                let v = text.lines().find_map(|l| {
                    let (k, v) = l.trim().split_once('=')?;
                    (k.trim() == key).then(|| v.trim().to_string())
                });
                (key, v)
            })
            .collect()
    }

    /// The newest `OPTIONS-NNNNNN` file in `dir`, read.
    pub fn read_options_file(dir: &Path) -> std::io::Result<String> {
        let mut newest: Option<(u64, std::path::PathBuf)> = None;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(n) = name
                .to_str()
                .and_then(|n| n.strip_prefix("OPTIONS-"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if newest.as_ref().is_none_or(|(m, _)| n > *m) {
                newest = Some((n, entry.path()));
            }
        }
        match newest {
            Some((_, path)) => std::fs::read_to_string(path),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no OPTIONS-* file",
            )),
        }
    }

    /// The settings line of the report: the values read back (`options`:
    /// the `OPTIONS-*` file's text or why it could not be read; `cache`:
    /// the block cache capacity property).
    pub fn settings(options: &Result<String, String>, cache: Option<&str>, sync: bool) -> String {
        let listed = match options {
            Ok(text) => values(text)
                .into_iter()
                .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("?")))
                .collect::<Vec<_>>()
                .join(","),
            Err(e) => format!("(OPTIONS file unread: {e})"),
        };
        format!(
            "{} (RocksDB Options(), nothing set but create_if_missing; read back from the OPTIONS file \
             and rocksdb.block-cache-capacity): {listed},block_cache=RocksDB's internal lru({}),\
             wal=on,sync={sync}",
            crate::settings::OWN_DEFAULTS_PREFIX,
            cache.map(str::trim).unwrap_or("?")
        )
    }
}

/// Opens RocksDB in `dir` with its own defaults (`--own-defaults`).
fn open_own(s: &EngineSettings, dir: &Path) -> Result<OpenEngine, BenchError> {
    let l = loaded()?;
    let f = &l.f;
    let name = c_path("rocksdb", dir)?;
    // SAFETY: as in `open`; no table options, cache or filter are made, so
    // only the read and write options outlive the open.
    unsafe {
        let o = f.rocksdb_options_create();
        let ro = f.rocksdb_readoptions_create();
        let wo = f.rocksdb_writeoptions_create();
        if [o, ro, wo].iter().any(|p| p.is_null()) {
            for (p, destroy) in [
                (o, f.rocksdb_options_destroy as unsafe extern "C" fn(Handle)),
                (ro, f.rocksdb_readoptions_destroy),
                (wo, f.rocksdb_writeoptions_destroy),
            ] {
                if !p.is_null() {
                    destroy(p);
                }
            }
            return Err(FfiError::Null {
                engine: "rocksdb",
                call: "*_create",
            }
            .into());
        }
        f.rocksdb_options_set_create_if_missing(o, 1);
        if s.counters {
            f.rocksdb_options_set_uint64add_merge_operator(o);
        }
        f.rocksdb_writeoptions_set_sync(wo, u8::from(s.sync));
        let mut err: *mut c_char = std::ptr::null_mut();
        let db = f.rocksdb_open(o, name.as_ptr(), &mut err);
        f.rocksdb_options_destroy(o);
        let settings = if err.is_null() && !db.is_null() {
            let options = own::read_options_file(dir).map_err(|e| e.to_string());
            let cache = super::read_property(&l.api, db, "rocksdb.block-cache-capacity");
            own::settings(&options, cache.as_deref(), s.sync)
        } else {
            own::settings(&Err("open failed".into()), None, s.sync)
        };
        let owned = vec![
            Owned {
                handle: ro,
                destroy: f.rocksdb_readoptions_destroy,
            },
            Owned {
                handle: wo,
                destroy: f.rocksdb_writeoptions_destroy,
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
            own::WRITE_BUFFER_SIZE,
            s,
        )
    }
}

/// Opens RocksDB in `dir` configured like the other engines (or with its
/// own defaults when `s.own_defaults`).
pub fn open(s: &EngineSettings, dir: &Path) -> Result<OpenEngine, BenchError> {
    let l = loaded()?;
    let f = &l.f;
    if s.own_defaults {
        return open_own(s, dir);
    }
    let compression = compression_code(&s.compression)?;
    let name = c_path("rocksdb", dir)?;
    // Mirrors strata's defaults (`strata::Options::default`) where RocksDB has the knob.
    let settings = format!(
        "create_if_missing=true,write_buffer_size={},max_write_buffer_number=2,\
         level0_file_num_compaction_trigger=4,level0_slowdown_writes_trigger=20,\
         level0_stop_writes_trigger=36,max_bytes_for_level_base={},max_bytes_for_level_multiplier=10,\
         num_levels=7,target_file_size_base={},compression={},max_background_jobs={},max_subcompactions={},\
         table=block_based(block_size={},filter=bloom_full({} bits/key),block_cache=lru({})),\
         wal=on,sync={}{}",
        s.write_buffer_size,
        s.level_base,
        s.target_file_size,
        s.compression,
        s.background_threads,
        s.subcompactions,
        s.block_size,
        s.bloom_bits_per_key,
        s.block_cache_size,
        s.sync,
        if s.sync {
            format!(",recycle_log_file_num={RECYCLED_LOGS}")
        } else {
            String::new()
        }
    );
    // SAFETY: every object is created here, checked for NULL, configured
    // through its own setters, and either destroyed before returning (the
    // options and table options, which RocksDB copies at open) or handed to
    // the CStore, which destroys it after closing the database. The filter
    // policy is owned by the table options once set.
    unsafe {
        let o = f.rocksdb_options_create();
        let t = f.rocksdb_block_based_options_create();
        let cache = f.rocksdb_cache_create_lru(s.block_cache_size);
        let filter = f.rocksdb_filterpolicy_create_bloom_full(s.bloom_bits_per_key as f64);
        let ro = f.rocksdb_readoptions_create();
        let wo = f.rocksdb_writeoptions_create();
        if [o, t, cache, filter, ro, wo].iter().any(|p| p.is_null()) {
            return Err(FfiError::Null {
                engine: "rocksdb",
                call: "*_create",
            }
            .into());
        }
        f.rocksdb_options_set_create_if_missing(o, 1);
        f.rocksdb_options_set_write_buffer_size(o, s.write_buffer_size);
        f.rocksdb_options_set_max_write_buffer_number(o, 2);
        f.rocksdb_options_set_level0_file_num_compaction_trigger(o, 4);
        f.rocksdb_options_set_level0_slowdown_writes_trigger(o, 20);
        f.rocksdb_options_set_level0_stop_writes_trigger(o, 36);
        f.rocksdb_options_set_max_bytes_for_level_base(o, s.level_base);
        f.rocksdb_options_set_max_bytes_for_level_multiplier(o, 10.0);
        f.rocksdb_options_set_target_file_size_base(o, s.target_file_size);
        f.rocksdb_options_set_num_levels(o, 7);
        f.rocksdb_options_set_compression(o, compression);
        f.rocksdb_options_set_max_background_jobs(o, int(s.background_threads));
        f.rocksdb_options_set_max_subcompactions(o, s.subcompactions.max(1));
        f.rocksdb_block_based_options_set_block_size(t, s.block_size);
        f.rocksdb_block_based_options_set_filter_policy(t, filter);
        f.rocksdb_block_based_options_set_block_cache(t, cache);
        f.rocksdb_options_set_block_based_table_factory(o, t);
        if s.counters {
            // RocksDB's built-in counter operator: the encoding strata's
            // u64add uses.
            f.rocksdb_options_set_uint64add_merge_operator(o);
        }
        if s.sync {
            // Synced writes reuse old log files, so a sync need not commit
            // a growing file's size (strata writes its log ahead for the
            // same reason).
            f.rocksdb_options_set_recycle_log_file_num(o, RECYCLED_LOGS);
        }
        f.rocksdb_writeoptions_set_sync(wo, u8::from(s.sync));
        let mut err: *mut c_char = std::ptr::null_mut();
        let db = f.rocksdb_open(o, name.as_ptr(), &mut err);
        f.rocksdb_block_based_options_destroy(t);
        f.rocksdb_options_destroy(o);
        let owned = vec![
            Owned {
                handle: ro,
                destroy: f.rocksdb_readoptions_destroy,
            },
            Owned {
                handle: wo,
                destroy: f.rocksdb_writeoptions_destroy,
            },
            Owned {
                handle: cache,
                destroy: f.rocksdb_cache_destroy,
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
