//! Single puts, deletes and gets; write batches; snapshots.

use super::*;

// ---------------------------------------------------------------- single ops

/// Stores `value` under `key`. `wo` may be NULL (sync off). Returns
/// STRATA_OK or a negative code with *errptr set. Thread-safe.
#[no_mangle]
pub extern "C" fn strata_put(
    db: *const strata_t,
    wo: *const strata_writeoptions_t,
    key: *const u8,
    keylen: usize,
    value: *const u8,
    valuelen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        let wo = write_options(wo)?;
        let key = bytes(key, keylen, "key")?;
        let value = bytes(value, valuelen, "value")?;
        if wo.sync {
            let mut b = WriteBatch::new();
            b.put(key, value);
            db.db.write(b, &wo).map_err(eng)
        } else {
            db.db.put(key, value).map_err(eng)
        }
    })
    .1
}

/// Deletes `key` (deleting an absent key is STRATA_OK). `wo` may be NULL.
/// Thread-safe.
#[no_mangle]
pub extern "C" fn strata_delete(
    db: *const strata_t,
    wo: *const strata_writeoptions_t,
    key: *const u8,
    keylen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        let wo = write_options(wo)?;
        let key = bytes(key, keylen, "key")?;
        if wo.sync {
            let mut b = WriteBatch::new();
            b.delete(key);
            db.db.write(b, &wo).map_err(eng)
        } else {
            db.db.delete(key).map_err(eng)
        }
    })
    .1
}

/// Deletes every key in [start, end) with one range tombstone (an empty
/// range deletes nothing). `wo` may be NULL. STRATA_EINVAL when
/// start > end; STRATA_ENOTSUP where strata_has(db, "range_deletes") is 0
/// (KVell). Thread-safe.
#[no_mangle]
pub extern "C" fn strata_delete_range(
    db: *const strata_t,
    wo: *const strata_writeoptions_t,
    start: *const u8,
    startlen: usize,
    end: *const u8,
    endlen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        let wo = write_options(wo)?;
        let start = bytes(start, startlen, "start")?;
        let end = bytes(end, endlen, "end")?;
        if wo.sync {
            let mut b = WriteBatch::new();
            b.delete_range(start, end);
            db.db.write(b, &wo).map_err(eng)
        } else {
            db.db.delete_range(start, end).map_err(eng)
        }
    })
    .1
}

/// Merges `operand` into `key` by the database's merge operator (the
/// option merge_operator: u64add, max, append, append:SEP). `wo` may be
/// NULL. STRATA_ENOTSUP where strata_has(db, "merges") is 0 (no operator
/// set, or KVell). A read that meets an operand the operator refuses fails
/// with STRATA_EMERGE. Thread-safe.
#[no_mangle]
pub extern "C" fn strata_merge(
    db: *const strata_t,
    wo: *const strata_writeoptions_t,
    key: *const u8,
    keylen: usize,
    operand: *const u8,
    operandlen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        let wo = write_options(wo)?;
        let key = bytes(key, keylen, "key")?;
        let operand = bytes(operand, operandlen, "operand")?;
        if wo.sync {
            let mut b = WriteBatch::new();
            b.merge(key, operand);
            db.db.write(b, &wo).map_err(eng)
        } else {
            db.db.merge(key, operand).map_err(eng)
        }
    })
    .1
}

/// Looks up `key`. `ro` may be NULL (latest state). When the key exists,
/// returns its value in a buffer malloc'd by strata (release with
/// strata_free(); non-NULL even for an empty value), stores its length in
/// *valuelen and sets *found to true. When it does not, or on error, returns
/// NULL with *valuelen = 0 and *found = false (*errptr tells them apart).
/// `valuelen` and `found` may be NULL. Thread-safe.
#[no_mangle]
pub extern "C" fn strata_get(
    db: *const strata_t,
    ro: *const strata_readoptions_t,
    key: *const u8,
    keylen: usize,
    valuelen: *mut usize,
    found: *mut bool,
    errptr: *mut *mut c_char,
) -> *mut u8 {
    let (v, _) = guard(errptr, None, || {
        let db = obj(db, "database")?;
        let ro = read_options(ro)?;
        let key = bytes(key, keylen, "key")?;
        let v = db.db.get_at(key, ro).map_err(eng)?;
        match v {
            None => Ok(None),
            Some(v) => {
                let p = malloc_copy(&v, false);
                if p.is_null() {
                    return Err((STRATA_EINTERNAL, "out of memory".to_string()));
                }
                Ok(Some((p, v.len())))
            }
        }
    });
    let (p, n) = v.unwrap_or((ptr::null_mut(), 0));
    if !valuelen.is_null() {
        // SAFETY: non-NULL out-parameter provided by the caller.
        unsafe { *valuelen = n };
    }
    if !found.is_null() {
        // SAFETY: non-NULL out-parameter provided by the caller.
        unsafe { *found = !p.is_null() };
    }
    p
}

// ---------------------------------------------------------------- batches

/// Creates an empty write batch. Release with strata_writebatch_destroy().
#[no_mangle]
pub extern "C" fn strata_writebatch_create() -> *mut strata_writebatch_t {
    quiet(ptr::null_mut(), || {
        boxed(strata_writebatch_t {
            batch: WriteBatch::new(),
        })
    })
}

/// Releases a batch (NULL is ignored).
#[no_mangle]
pub extern "C" fn strata_writebatch_destroy(b: *mut strata_writebatch_t) {
    quiet((), || unbox(b))
}

/// Adds a put of `value` under `key` to the batch (the bytes are copied).
#[no_mangle]
pub extern "C" fn strata_writebatch_put(
    b: *mut strata_writebatch_t,
    key: *const u8,
    keylen: usize,
    value: *const u8,
    valuelen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let b = obj_mut(b, "batch")?;
        let key = bytes(key, keylen, "key")?;
        let value = bytes(value, valuelen, "value")?;
        b.batch.put(key, value);
        Ok(())
    })
    .1
}

/// Adds a delete of `key` to the batch.
#[no_mangle]
pub extern "C" fn strata_writebatch_delete(
    b: *mut strata_writebatch_t,
    key: *const u8,
    keylen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let b = obj_mut(b, "batch")?;
        let key = bytes(key, keylen, "key")?;
        b.batch.delete(key);
        Ok(())
    })
    .1
}

/// Adds a deletion of every key in [start, end) to the batch (checked
/// when the batch is written: start > end is STRATA_EINVAL; an engine
/// without range deletions refuses the whole batch with STRATA_ENOTSUP).
#[no_mangle]
pub extern "C" fn strata_writebatch_delete_range(
    b: *mut strata_writebatch_t,
    start: *const u8,
    startlen: usize,
    end: *const u8,
    endlen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let b = obj_mut(b, "batch")?;
        let start = bytes(start, startlen, "start")?;
        let end = bytes(end, endlen, "end")?;
        b.batch.delete_range(start, end);
        Ok(())
    })
    .1
}

/// Adds a merge of `operand` into `key` to the batch (an engine without a
/// merge operator refuses the whole batch with STRATA_ENOTSUP when it is
/// written).
#[no_mangle]
pub extern "C" fn strata_writebatch_merge(
    b: *mut strata_writebatch_t,
    key: *const u8,
    keylen: usize,
    operand: *const u8,
    operandlen: usize,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let b = obj_mut(b, "batch")?;
        let key = bytes(key, keylen, "key")?;
        let operand = bytes(operand, operandlen, "operand")?;
        b.batch.merge(key, operand);
        Ok(())
    })
    .1
}

/// Removes every entry from the batch.
#[no_mangle]
pub extern "C" fn strata_writebatch_clear(b: *mut strata_writebatch_t) {
    quiet((), || {
        if let Ok(b) = obj_mut(b, "batch") {
            b.batch.clear();
        }
    })
}

/// The number of entries in the batch (0 for NULL).
#[no_mangle]
pub extern "C" fn strata_writebatch_count(b: *const strata_writebatch_t) -> usize {
    quiet(0, || obj(b, "batch").map(|b| b.batch.len()).unwrap_or(0))
}

/// Applies the batch: on the LSM engine atomically, all of its entries or
/// none, also across a crash; the KVell engine applies each key on its own,
/// so a crash or an error can leave part of it (`strata_has(db,
/// "atomic_batches")` says which holds). On a keyspace handle
/// (strata_keyspace_open()) the entries added without a keyspace go to that
/// keyspace, those added with strata_writebatch_put_in() and the like where
/// they name. `wo` may be NULL (sync off). The batch is not consumed; clear or destroy it after.
/// Thread-safe with respect to the database.
#[no_mangle]
pub extern "C" fn strata_write(
    db: *const strata_t,
    wo: *const strata_writeoptions_t,
    b: *const strata_writebatch_t,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        let wo = write_options(wo)?;
        let b = obj(b, "batch")?;
        db.db.write(b.batch.clone(), &wo).map_err(eng)
    })
    .1
}

// ---------------------------------------------------------------- snapshots

/// Takes a snapshot of the current state. Owned by the caller: release with
/// strata_snapshot_release() (before strata_destroy() of its database).
/// NULL with *errptr set on a NULL or closed handle. Thread-safe.
#[no_mangle]
pub extern "C" fn strata_snapshot_create(
    db: *const strata_t,
    errptr: *mut *mut c_char,
) -> *mut strata_snapshot_t {
    guard(errptr, ptr::null_mut(), || {
        let db = obj(db, "database")?;
        Ok(boxed(strata_snapshot_t {
            snap: db.db.snapshot().map_err(eng)?,
        }))
    })
    .0
}

/// Releases a snapshot (NULL is ignored). Read options pointing at it must
/// not be used afterwards.
#[no_mangle]
pub extern "C" fn strata_snapshot_release(snap: *mut strata_snapshot_t) {
    quiet((), || unbox(snap))
}
