//! Keyspaces (column families): a handle per keyspace, every call of the
//! database handle working on it, and batch entries across keyspaces.

use super::*;

// ---------------------------------------------------------------- keyspaces

/// Opens keyspace `name` of the database `db` (a database handle or another
/// keyspace's), making it with `options` (NULL or "": the database's
/// options; else `name=value` pairs, comma separated, of the options a
/// keyspace may set, e.g. "compression=zstd,bloom_bits_per_key=14") if the
/// database has none of that name; the manifest records it before this
/// returns. "default" is the database's own keyspace. Returns a handle that
/// every call taking a `strata_t *` accepts: its reads, writes, iterators,
/// flush and compaction are the keyspace's; snapshots (one point in time in
/// every keyspace), statistics and strata_checkpoint()/strata_backup() (the
/// whole database; STRATA_ENOTSUP on a keyspace handle) stay the
/// database's. Release it with strata_destroy(), which closes nothing; once
/// the database is closed its calls fail with STRATA_ECLOSED. NULL with
/// *errptr set: STRATA_EINVAL for a bad name (empty, over 255 bytes) or
/// options, STRATA_ENOTSUP for the KVell engine. Thread-safe.
#[no_mangle]
pub extern "C" fn strata_keyspace_open(
    db: *const strata_t,
    name: *const c_char,
    options: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut strata_t {
    guard(errptr, ptr::null_mut(), || {
        let db = obj(db, "database")?;
        let name = cstr(name, "name")?;
        let options = if options.is_null() {
            ""
        } else {
            cstr(options, "options")?
        };
        let ks = db.db.keyspace(name, options).map_err(eng)?;
        Ok(boxed(strata_t { db: ks }))
    })
    .0
}

/// Drops keyspace `name` of the database `db`: its data is gone for every
/// reader (its handles' calls fail with STRATA_EINVAL; destroy them), the
/// manifest records the drop before this returns, and its files are
/// deleted once no iterator holds them. STRATA_EINVAL for "default" or a
/// name the database has no keyspace of; STRATA_ENOTSUP for KVell.
#[no_mangle]
pub extern "C" fn strata_keyspace_drop(
    db: *const strata_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        let name = cstr(name, "name")?;
        db.db.drop_keyspace(name).map_err(eng)
    })
    .1
}

/// The names of the database's keyspaces, "default" first, each ended by
/// a NUL byte, in one malloc'd buffer of `*len` bytes that the caller
/// releases with strata_free(). NULL with *errptr set on an error
/// (STRATA_ENOTSUP for KVell).
#[no_mangle]
pub extern "C" fn strata_keyspace_names(
    db: *const strata_t,
    len: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    guard(errptr, ptr::null_mut(), || {
        let db = obj(db, "database")?;
        if len.is_null() {
            return inval("len is NULL");
        }
        let mut all = Vec::new();
        for n in db.db.keyspace_names().map_err(eng)? {
            all.extend_from_slice(n.as_bytes());
            all.push(0);
        }
        let out = malloc_copy(&all, false);
        if out.is_null() {
            return Err((STRATA_EIO, "out of memory".into()));
        }
        // SAFETY: `len` is not NULL (checked) and the caller passes a
        // valid size_t to write.
        unsafe { *len = all.len() };
        Ok(out.cast())
    })
    .0
}

/// The keyspace id of a handle from strata_open() (0) or
/// strata_keyspace_open().
fn keyspace_of(ks: *const strata_t) -> Res<u32> {
    obj(ks, "keyspace")?.db.keyspace_id().map_err(eng)
}

/// Adds to the batch a put of `value` under `key` in the keyspace of `ks`
/// (a handle from strata_keyspace_open(), or the database's own): written
/// by strata_write() on any handle of the same database, all of the batch
/// or none, whatever keyspaces it spans.
#[no_mangle]
pub extern "C" fn strata_writebatch_put_in(
    b: *mut strata_writebatch_t,
    ks: *const strata_t,
    key: *const u8,
    keylen: usize,
    value: *const u8,
    valuelen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let id = keyspace_of(ks)?;
        let b = obj_mut(b, "batch")?;
        let key = bytes(key, keylen, "key")?;
        let value = bytes(value, valuelen, "value")?;
        b.batch.put_in(&id, key, value);
        Ok(())
    })
    .1
}

/// Adds to the batch a delete of `key` in the keyspace of `ks` (see
/// strata_writebatch_put_in()).
#[no_mangle]
pub extern "C" fn strata_writebatch_delete_in(
    b: *mut strata_writebatch_t,
    ks: *const strata_t,
    key: *const u8,
    keylen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let id = keyspace_of(ks)?;
        let b = obj_mut(b, "batch")?;
        let key = bytes(key, keylen, "key")?;
        b.batch.delete_in(&id, key);
        Ok(())
    })
    .1
}
