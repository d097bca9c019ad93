//! The C ABI of strata: `include/strata.h` is generated from this file by
//! cbindgen (see `cbindgen.toml`; `tests/header.rs` keeps them in sync).
//!
//! Every call goes through the engine-neutral [`strata::KvStore`] door
//! (`strata::open`): the option `engine=lsm|kvell` picks the engine, and
//! strata_semantics() tells a caller what that engine guarantees (KVell has
//! no snapshots and no atomic multi-key batches).
//!
//! Every entry point catches panics (`guard`), checks its pointers, and
//! reports failures through `errptr` and a numeric code. `unsafe` appears
//! only where a C pointer is turned into a Rust reference or slice.
#![allow(non_camel_case_types)]
// The entry points are called from C, which has no `unsafe`: they take raw
// pointers as safe functions and check them (NULL) before use.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use strata::{Cursor, Error, KvStore, Options, StoreSnapshot, WriteBatch, WriteOptions};

/// Success.
pub const STRATA_OK: c_int = 0;
/// A bad argument: a NULL handle, a NULL pointer with a non-zero length, an
/// unknown option, a key that is too large.
pub const STRATA_EINVAL: c_int = -1;
/// The database handle was closed with strata_close().
pub const STRATA_ECLOSED: c_int = -2;
/// An operating-system I/O call failed.
pub const STRATA_EIO: c_int = -3;
/// Stored bytes are damaged.
pub const STRATA_ECORRUPTION: c_int = -4;
/// Another process holds the database directory.
pub const STRATA_ELOCKED: c_int = -5;
/// No database at the path and create_if_missing is off.
pub const STRATA_ENOTFOUND: c_int = -6;
/// A database exists and error_if_exists is on.
pub const STRATA_EEXISTS: c_int = -7;
/// A background error stopped writes; reopen the database.
pub const STRATA_EPOISONED: c_int = -8;
/// Not supported by this build.
pub const STRATA_ENOTSUP: c_int = -9;
/// A bug in strata (a caught panic); the handle may be unusable.
pub const STRATA_EINTERNAL: c_int = -10;

/// A database handle. Thread-safe: any number of threads may call into one
/// handle at once. Created by strata_open(), released by strata_destroy().
pub struct strata_t {
    db: Box<dyn KvStore>,
}

/// Engine options (create with strata_options_create, release with
/// strata_options_destroy). Not thread-safe.
pub struct strata_options_t {
    opts: Options,
}

/// Write options: the sync flag. Not thread-safe.
pub struct strata_writeoptions_t {
    sync: bool,
}

/// Read options: an optional snapshot. Not thread-safe. The snapshot it
/// refers to must stay alive while the read options are used.
pub struct strata_readoptions_t {
    snapshot: *const strata_snapshot_t,
}

/// A consistent read view; immutable, may be shared between threads.
pub struct strata_snapshot_t {
    snap: StoreSnapshot,
}

/// An atomic group of puts and deletes. Not thread-safe.
pub struct strata_writebatch_t {
    batch: WriteBatch,
}

/// A cursor over the database (at a snapshot, or at its creation time).
/// Not thread-safe.
pub struct strata_iterator_t {
    it: Box<dyn Cursor>,
}

type Res<T> = Result<T, (c_int, String)>;

fn code_of(e: &Error) -> c_int {
    match e {
        Error::Io { .. } => STRATA_EIO,
        Error::Corruption { .. } => STRATA_ECORRUPTION,
        Error::InvalidArgument(_) => STRATA_EINVAL,
        Error::NotSupported(_) => STRATA_ENOTSUP,
        Error::Locked(_) => STRATA_ELOCKED,
        Error::NotFound(_) => STRATA_ENOTFOUND,
        Error::AlreadyExists(_) => STRATA_EEXISTS,
        Error::Poisoned(_) => STRATA_EPOISONED,
        Error::Closed => STRATA_ECLOSED,
        _ => STRATA_EINTERNAL,
    }
}

fn eng(e: Error) -> (c_int, String) {
    (code_of(&e), e.to_string())
}

fn inval<T>(msg: &str) -> Res<T> {
    Err((STRATA_EINVAL, format!("invalid argument: {msg}")))
}

/// Copies `bytes` into a fresh malloc'd buffer (at least one byte, so that
/// an empty result is still a non-NULL pointer). NULL if malloc fails.
fn malloc_copy(bytes: &[u8], nul: bool) -> *mut u8 {
    let n = bytes.len() + usize::from(nul);
    // SAFETY: malloc with a non-zero size; the result is checked for NULL.
    let p = unsafe { libc::malloc(n.max(1)) } as *mut u8;
    if p.is_null() {
        return p;
    }
    // SAFETY: p has room for n >= bytes.len() bytes and does not overlap bytes.
    unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
    if nul {
        // SAFETY: index bytes.len() < n.
        unsafe { *p.add(bytes.len()) = 0 };
    }
    p
}

fn malloc_cstring(s: &str) -> *mut c_char {
    // A message with an interior NUL is cut there by C readers; harmless.
    malloc_copy(s.as_bytes(), true) as *mut c_char
}

/// Stores the outcome in `*errptr` (freeing what was there).
fn set_err(errptr: *mut *mut c_char, err: Option<&str>) {
    if errptr.is_null() {
        return;
    }
    // SAFETY: errptr is non-NULL and, per the header, points to a writable
    // `char *` that is NULL or a string strata malloc'd.
    unsafe {
        let old = *errptr;
        if !old.is_null() {
            libc::free(old as *mut c_void);
        }
        *errptr = match err {
            Some(m) => malloc_cstring(m),
            None => ptr::null_mut(),
        };
    }
}

/// Runs `f` with panics caught; reports its error through `errptr`.
fn guard<T>(errptr: *mut *mut c_char, fail: T, f: impl FnOnce() -> Res<T>) -> (T, c_int) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => {
            set_err(errptr, None);
            (v, STRATA_OK)
        }
        Ok(Err((code, msg))) => {
            set_err(errptr, Some(&msg));
            (fail, code)
        }
        Err(_) => {
            set_err(
                errptr,
                Some("internal error: a panic was caught at the C boundary"),
            );
            (fail, STRATA_EINTERNAL)
        }
    }
}

/// Runs `f` with panics caught, for functions without an error channel.
fn quiet<T>(fail: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fail)
}

fn bytes<'a>(p: *const u8, len: usize, what: &str) -> Res<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return inval(&format!("{what} is NULL with length {len}"));
    }
    // SAFETY: p is non-NULL and the caller promises `len` readable bytes
    // that stay unchanged for the duration of the call.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

fn cstr<'a>(p: *const c_char, what: &str) -> Res<&'a str> {
    if p.is_null() {
        return inval(&format!("{what} is NULL"));
    }
    // SAFETY: p is non-NULL and the caller promises a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|_| {
        (
            STRATA_EINVAL,
            format!("invalid argument: {what} is not UTF-8"),
        )
    })
}

fn obj<'a, T>(p: *const T, what: &str) -> Res<&'a T> {
    if p.is_null() {
        return inval(&format!("{what} is NULL"));
    }
    // SAFETY: non-NULL pointers given to strata are live objects it created
    // (the header's ownership rules).
    Ok(unsafe { &*p })
}

fn obj_mut<'a, T>(p: *mut T, what: &str) -> Res<&'a mut T> {
    if p.is_null() {
        return inval(&format!("{what} is NULL"));
    }
    // SAFETY: as `obj`; the header forbids concurrent use of these objects.
    Ok(unsafe { &mut *p })
}

/// The snapshot `ro` names, if any.
fn read_options<'a>(ro: *const strata_readoptions_t) -> Res<Option<&'a StoreSnapshot>> {
    if ro.is_null() {
        return Ok(None);
    }
    let ro = obj(ro, "read options")?;
    if ro.snapshot.is_null() {
        return Ok(None);
    }
    Ok(Some(&obj(ro.snapshot, "snapshot")?.snap))
}

fn write_options(wo: *const strata_writeoptions_t) -> Res<WriteOptions> {
    if wo.is_null() {
        return Ok(WriteOptions::default());
    }
    Ok(WriteOptions {
        sync: obj(wo, "write options")?.sync,
    })
}

fn boxed<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

fn unbox<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: p came from Box::into_raw in this crate and, per the
        // header, is released exactly once.
        drop(unsafe { Box::from_raw(p) });
    }
}

// ---------------------------------------------------------------- options

/// Creates engine options with every default. Owned by the caller: release
/// with strata_options_destroy(). Never returns NULL unless out of memory.
#[no_mangle]
pub extern "C" fn strata_options_create() -> *mut strata_options_t {
    quiet(ptr::null_mut(), || {
        boxed(strata_options_t {
            opts: Options::default(),
        })
    })
}

/// Releases options (NULL is ignored). Databases opened with them are not
/// affected.
#[no_mangle]
pub extern "C" fn strata_options_destroy(opts: *mut strata_options_t) {
    quiet((), || unbox(opts))
}

/// Sets one option by name from its text form, e.g. ("write_buffer_size",
/// "4M") or ("compression", "lz4"); the names are those of the README's
/// option table. Returns STRATA_OK or STRATA_EINVAL (unknown name or bad
/// value; the options are then unchanged).
#[no_mangle]
pub extern "C" fn strata_options_set(
    opts: *mut strata_options_t,
    name: *const c_char,
    value: *const c_char,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let o = obj_mut(opts, "options")?;
        let name = cstr(name, "name")?;
        let value = cstr(value, "value")?;
        let mut next = o.opts.clone();
        next.set(name, value).map_err(eng)?;
        o.opts = next;
        Ok(())
    })
    .1
}

/// Applies a comma-separated list of name=value pairs (as the command line's
/// --opt). All or nothing: on error the options are unchanged.
#[no_mangle]
pub extern "C" fn strata_options_apply(
    opts: *mut strata_options_t,
    spec: *const c_char,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let o = obj_mut(opts, "options")?;
        let spec = cstr(spec, "spec")?;
        let mut next = o.opts.clone();
        next.apply(spec).map_err(eng)?;
        o.opts = next;
        Ok(())
    })
    .1
}

// ---------------------------------------------------------------- open/close

/// Opens (by default creating) the database in directory `path` with `opts`
/// (NULL means defaults; the options are copied, so they may be destroyed
/// right after). Returns a handle owned by the caller, released with
/// strata_destroy(), or NULL with *errptr set.
#[no_mangle]
pub extern "C" fn strata_open(
    path: *const c_char,
    opts: *const strata_options_t,
    errptr: *mut *mut c_char,
) -> *mut strata_t {
    guard(errptr, ptr::null_mut(), || {
        let path = cstr(path, "path")?;
        let opts = if opts.is_null() {
            Options::default()
        } else {
            obj(opts, "options")?.opts.clone()
        };
        let db = strata::open(path, opts).map_err(eng)?;
        Ok(boxed(strata_t { db }))
    })
    .0
}

/// Flushes the memtable, stops background work and closes the database.
/// The handle stays allocated: later calls on it fail with STRATA_ECLOSED
/// until strata_destroy() releases it. Closing twice is STRATA_OK. Must not
/// race with other calls on the same handle that are still running.
#[no_mangle]
pub extern "C" fn strata_close(db: *mut strata_t, errptr: *mut *mut c_char) -> c_int {
    guard(errptr, (), || {
        let db = obj(db, "database")?;
        db.db.close().map_err(eng)
    })
    .1
}

/// Closes the database if still open (ignoring a close error; call
/// strata_close() first to see it) and releases the handle. NULL is ignored.
/// No other call on the handle may be running or follow. Iterators and
/// snapshots of the database should be released first.
#[no_mangle]
pub extern "C" fn strata_destroy(db: *mut strata_t) {
    quiet((), || unbox(db))
}

// ---------------------------------------------------------------- write options

/// Creates write options (sync off). Release with strata_writeoptions_destroy().
#[no_mangle]
pub extern "C" fn strata_writeoptions_create() -> *mut strata_writeoptions_t {
    quiet(ptr::null_mut(), || {
        boxed(strata_writeoptions_t { sync: false })
    })
}

/// Releases write options (NULL is ignored).
#[no_mangle]
pub extern "C" fn strata_writeoptions_destroy(wo: *mut strata_writeoptions_t) {
    quiet((), || unbox(wo))
}

/// With sync on, a write returns only after the write-ahead log is
/// fdatasync'ed (it survives power loss); off, it survives a process crash.
#[no_mangle]
pub extern "C" fn strata_writeoptions_set_sync(wo: *mut strata_writeoptions_t, sync: bool) {
    quiet((), || {
        if let Ok(w) = obj_mut(wo, "write options") {
            w.sync = sync;
        }
    })
}

// ---------------------------------------------------------------- read options

/// Creates read options (latest state, no snapshot). Release with
/// strata_readoptions_destroy().
#[no_mangle]
pub extern "C" fn strata_readoptions_create() -> *mut strata_readoptions_t {
    quiet(ptr::null_mut(), || {
        boxed(strata_readoptions_t {
            snapshot: ptr::null(),
        })
    })
}

/// Releases read options (NULL is ignored); the snapshot is not released.
#[no_mangle]
pub extern "C" fn strata_readoptions_destroy(ro: *mut strata_readoptions_t) {
    quiet((), || unbox(ro))
}

/// Reads at `snap` (NULL: the latest state). The snapshot is borrowed: it
/// must outlive every read made with these options.
#[no_mangle]
pub extern "C" fn strata_readoptions_set_snapshot(
    ro: *mut strata_readoptions_t,
    snap: *const strata_snapshot_t,
) {
    quiet((), || {
        if let Ok(r) = obj_mut(ro, "read options") {
            r.snapshot = snap;
        }
    })
}

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
/// "atomic_batches")` says which holds). `wo` may be NULL (sync off). The batch is not consumed; clear or destroy it after.
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
/// time). The LSM engine has all three; KVell none. Thread-safe.
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
