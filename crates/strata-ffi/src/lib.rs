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

// Declared in the order of the header's sections (cbindgen follows it).
mod open;

mod ops;

mod keyspace;

mod iter;

mod misc;

pub use iter::*;
pub use keyspace::*;
pub use misc::*;
pub use open::*;
pub use ops::*;

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
/// A merge could not be folded: no merge operator is set, or the operator
/// refused the stored value or operands.
pub const STRATA_EMERGE: c_int = -11;

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
        Error::Merge(_) => STRATA_EMERGE,
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
