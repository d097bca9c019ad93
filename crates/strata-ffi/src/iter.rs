//! Iterators over a store or a snapshot.

use super::*;

// ---------------------------------------------------------------- iterators

/// Creates an unpositioned iterator reading at `ro`'s snapshot (`ro` NULL,
/// or no snapshot: the state at creation). Owned by the caller: release
/// with strata_iter_destroy(). NULL with *errptr set on error.
#[no_mangle]
pub extern "C" fn strata_iter_create(
    db: *const strata_t,
    ro: *const strata_readoptions_t,
    errptr: *mut *mut c_char,
) -> *mut strata_iterator_t {
    guard(errptr, ptr::null_mut(), || {
        let db = obj(db, "database")?;
        let ro = read_options(ro)?;
        let it = db.db.cursor(ro).map_err(eng)?;
        Ok(boxed(strata_iterator_t { it }))
    })
    .0
}

/// Releases an iterator (NULL is ignored).
#[no_mangle]
pub extern "C" fn strata_iter_destroy(it: *mut strata_iterator_t) {
    quiet((), || unbox(it))
}

fn with_iter(it: *mut strata_iterator_t, f: impl FnOnce(&mut dyn Cursor)) {
    quiet((), || {
        if let Ok(i) = obj_mut(it, "iterator") {
            f(i.it.as_mut());
        }
    })
}

/// Positions at the first key. No-op on NULL.
#[no_mangle]
pub extern "C" fn strata_iter_seek_to_first(it: *mut strata_iterator_t) {
    with_iter(it, |i| i.seek_to_first())
}

/// Positions at the last key. No-op on NULL.
#[no_mangle]
pub extern "C" fn strata_iter_seek_to_last(it: *mut strata_iterator_t) {
    with_iter(it, |i| i.seek_to_last())
}

/// Positions at the first key >= `key`. A NULL key with a non-zero length
/// leaves the iterator invalid.
#[no_mangle]
pub extern "C" fn strata_iter_seek(it: *mut strata_iterator_t, key: *const u8, keylen: usize) {
    match bytes(key, keylen, "key") {
        Ok(k) => with_iter(it, |i| i.seek(k)),
        Err(_) => with_iter(it, |i| {
            // Unpositioned: park it past the end.
            i.seek_to_last();
            i.next();
        }),
    }
}

/// Positions at the last key <= `key`.
#[no_mangle]
pub extern "C" fn strata_iter_seek_for_prev(
    it: *mut strata_iterator_t,
    key: *const u8,
    keylen: usize,
) {
    match bytes(key, keylen, "key") {
        Ok(k) => with_iter(it, |i| i.seek_for_prev(k)),
        Err(_) => with_iter(it, |i| {
            i.seek_to_last();
            i.next();
        }),
    }
}

/// True while the iterator is on a key (false for NULL).
#[no_mangle]
pub extern "C" fn strata_iter_valid(it: *const strata_iterator_t) -> bool {
    quiet(false, || {
        obj(it, "iterator").map(|i| i.it.valid()).unwrap_or(false)
    })
}

/// Moves to the next key; no-op unless valid.
#[no_mangle]
pub extern "C" fn strata_iter_next(it: *mut strata_iterator_t) {
    with_iter(it, |i| i.next())
}

/// Moves to the previous key; no-op unless valid.
#[no_mangle]
pub extern "C" fn strata_iter_prev(it: *mut strata_iterator_t) {
    with_iter(it, |i| i.prev())
}

fn iter_bytes(
    it: *const strata_iterator_t,
    len: *mut usize,
    f: impl FnOnce(&dyn Cursor) -> &[u8],
) -> *const u8 {
    let (p, n) = quiet((ptr::null(), 0), || match obj(it, "iterator") {
        Ok(i) if i.it.valid() => {
            let b = f(i.it.as_ref());
            (b.as_ptr(), b.len())
        }
        _ => (ptr::null(), 0),
    });
    if !len.is_null() {
        // SAFETY: non-NULL out-parameter provided by the caller.
        unsafe { *len = n };
    }
    p
}

/// The current key, borrowed: valid until the iterator moves or is
/// destroyed; not NUL-terminated. NULL with *keylen = 0 when not valid.
#[no_mangle]
pub extern "C" fn strata_iter_key(it: *const strata_iterator_t, keylen: *mut usize) -> *const u8 {
    iter_bytes(it, keylen, |i| i.key())
}

/// The current value, borrowed like strata_iter_key().
#[no_mangle]
pub extern "C" fn strata_iter_value(
    it: *const strata_iterator_t,
    valuelen: *mut usize,
) -> *const u8 {
    iter_bytes(it, valuelen, |i| i.value())
}

/// STRATA_OK, or the error (I/O, corruption) that stopped the iterator.
#[no_mangle]
pub extern "C" fn strata_iter_get_error(
    it: *const strata_iterator_t,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || obj(it, "iterator")?.it.status().map_err(eng)).1
}
