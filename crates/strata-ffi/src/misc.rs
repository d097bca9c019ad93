//! Statistics, capabilities, flush, freeing what strata returned, and the
//! version.

use super::*;

// ---------------------------------------------------------------- misc

/// The engine statistics as one JSON object, in a NUL-terminated buffer
/// malloc'd by strata (release with strata_free()). NULL on a NULL handle.
/// Thread-safe.
#[no_mangle]
pub extern "C" fn strata_stats_json(db: *const strata_t) -> *mut c_char {
    quiet(ptr::null_mut(), || match obj(db, "database") {
        Ok(db) => malloc_cstring(&db.db.stats().to_json()),
        Err(_) => ptr::null_mut(),
    })
}

/// What the engine guarantees: 1 if it has `what`, 0 if not, STRATA_EINVAL
/// for an unknown name or a NULL handle. Names: "snapshots" (snapshot
/// create works), "atomic_batches" (strata_write applies all or nothing,
/// also across a crash), "snapshot_scans" (an iterator reads one point in
/// time), "range_deletes" (strata_delete_range works), "merges"
/// (strata_merge works: a merge operator is set). The LSM engine has the
/// first four, and merges with an operator; KVell none. Thread-safe.
#[no_mangle]
pub extern "C" fn strata_has(db: *const strata_t, what: *const c_char) -> c_int {
    quiet(STRATA_EINVAL, || {
        let (Ok(db), Ok(what)) = (obj(db, "database"), cstr(what, "what")) else {
            return STRATA_EINVAL;
        };
        let s = db.db.semantics();
        match what {
            "snapshots" => c_int::from(s.snapshots),
            "atomic_batches" => c_int::from(s.atomic_batches),
            "snapshot_scans" => c_int::from(s.snapshot_scans),
            "range_deletes" => c_int::from(s.range_deletes),
            "merges" => c_int::from(s.merges),
            _ => STRATA_EINVAL,
        }
    })
}

/// Makes every acknowledged write durable and part of the engine's files
/// (the LSM flushes its memtable to a table; KVell syncs its slabs).
/// Thread-safe.
#[no_mangle]
pub extern "C" fn strata_flush(db: *const strata_t, errptr: *mut *mut c_char) -> c_int {
    guard(errptr, (), || obj(db, "database")?.db.flush().map_err(eng)).1
}

/// Compacts everything the engine can (the LSM: every level, so a
/// compaction filter sees every entry; KVell: syncs its slabs).
/// Thread-safe.
#[no_mangle]
pub extern "C" fn strata_compact(db: *const strata_t, errptr: *mut *mut c_char) -> c_int {
    guard(errptr, (), || {
        obj(db, "database")?.db.compact().map_err(eng)
    })
    .1
}

/// Writes to the directory `path`, which must not exist, a copy of the
/// database that strata_open() opens on its own, holding every write
/// acknowledged before the call (the LSM: tables hard-linked where the
/// file system allows, copied otherwise; open the copy without
/// `fast_dir`). STRATA_EINVAL when `path` is NULL, exists or lies inside
/// the database's directory; STRATA_ENOTSUP for the KVell engine;
/// STRATA_EIO (remove the partial copy), STRATA_ECLOSED or
/// STRATA_EPOISONED otherwise. Thread-safe.
#[no_mangle]
pub extern "C" fn strata_checkpoint(
    db: *const strata_t,
    path: *const c_char,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        let path = cstr(path, "path")?;
        db.db
            .checkpoint(std::path::Path::new(path))
            .map(|_| ())
            .map_err(eng)
    })
    .1
}

/// Adds to the backup store in the directory `store` (created if
/// missing) a backup of every write acknowledged before the call, copying
/// only the tables and rows no earlier backup there holds, and stores its
/// number in `*id` (when `id` is not NULL). STRATA_EINVAL when `store` is
/// NULL; STRATA_ELOCKED while another process, or another call of this
/// one, has the store open (one backup or restore per store at a time);
/// STRATA_ENOTSUP for the KVell engine; STRATA_EIO (the store keeps the
/// backups it held), STRATA_ECORRUPTION (a damaged table in the database),
/// STRATA_ECLOSED or STRATA_EPOISONED otherwise. Thread-safe.
#[no_mangle]
pub extern "C" fn strata_backup(
    db: *const strata_t,
    store: *const c_char,
    id: *mut u64,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        let store = cstr(store, "store")?;
        let store = strata::BackupStore::open(store).map_err(eng)?;
        let b = db.db.backup(&store).map_err(eng)?;
        if !id.is_null() {
            // SAFETY: the caller passes NULL or a valid u64 to write.
            unsafe { *id = b.id };
        }
        Ok(())
    })
    .1
}

/// Restores backup `id` (the newest when 0) of the backup store in the
/// directory `store` into `target`, a directory that must not exist,
/// checking every file's size and crc32c; strata_open() then opens
/// `target` (with the backed-up database's `l0` and no `fast_dir`).
/// STRATA_EINVAL when a path is NULL or `target` exists; STRATA_ENOTFOUND
/// for an unknown id or an empty store; STRATA_ECORRUPTION when a stored
/// file differs from its record; STRATA_ELOCKED while another process or
/// call has the store open; STRATA_EIO otherwise (remove the partial copy).
#[no_mangle]
pub extern "C" fn strata_restore(
    store: *const c_char,
    id: u64,
    target: *const c_char,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let store = cstr(store, "store")?;
        let target = cstr(target, "target")?;
        let store = strata::BackupStore::open(store).map_err(eng)?;
        store
            .restore((id != 0).then_some(id), std::path::Path::new(target))
            .map(|_| ())
            .map_err(eng)
    })
    .1
}

/// Releases a buffer returned by strata_get() or strata_stats_json() (NULL
/// is ignored). The buffers are malloc'd, so free() works too.
#[no_mangle]
pub extern "C" fn strata_free(p: *mut c_void) {
    // SAFETY: p is NULL or a buffer strata allocated with malloc.
    unsafe { libc::free(p) }
}

/// Releases an error string set through an errptr (NULL is ignored).
#[no_mangle]
pub extern "C" fn strata_free_error(err: *mut c_char) {
    // SAFETY: err is NULL or a string strata allocated with malloc.
    unsafe { libc::free(err as *mut c_void) }
}

/// The library version, a static NUL-terminated string (do not free).
#[no_mangle]
pub extern "C" fn strata_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}
