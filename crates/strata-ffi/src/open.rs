//! Options, opening and closing a store, and write and read options.

use super::*;

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

/// A compaction filter's decision: keep the entry.
pub const STRATA_FILTER_KEEP: c_int = 0;
/// A compaction filter's decision: delete the key.
pub const STRATA_FILTER_REMOVE: c_int = 1;
/// A compaction filter's decision: write `*new_value` instead (a buffer the
/// filter allocated with malloc(); strata copies it and frees it).
pub const STRATA_FILTER_CHANGE: c_int = 2;

/// A compaction filter: called with the filter's `state`, a key and its
/// value; returns STRATA_FILTER_KEEP, STRATA_FILTER_REMOVE or
/// STRATA_FILTER_CHANGE, and only with CHANGE sets `*new_value` (a
/// malloc'd buffer strata frees, or NULL with `*new_len` 0 for an empty
/// value) and `*new_len`. A buffer set with another return is not freed;
/// CHANGE with NULL and a non-zero length, or any other return, keeps the
/// entry. It runs on background threads, several at once: it must be
/// thread-safe, quick, and must not call into the database.
pub type strata_filter_fn = Option<
    extern "C" fn(
        state: *mut c_void,
        key: *const u8,
        keylen: usize,
        value: *const u8,
        vallen: usize,
        new_value: *mut *mut u8,
        new_len: *mut usize,
    ) -> c_int,
>;

/// Releases a filter's state once no database or options use the filter.
pub type strata_destructor_fn = Option<extern "C" fn(state: *mut c_void)>;

/// The C filter: the callback and its state.
struct CFilter {
    name: String,
    filter: extern "C" fn(
        *mut c_void,
        *const u8,
        usize,
        *const u8,
        usize,
        *mut *mut u8,
        *mut usize,
    ) -> c_int,
    destructor: strata_destructor_fn,
    state: *mut c_void,
}

// SAFETY: the caller promises (strata_options_set_compaction_filter) that
// the callback and its state may be used from any thread at once.
unsafe impl Send for CFilter {}
// SAFETY: as above.
unsafe impl Sync for CFilter {}

impl Drop for CFilter {
    fn drop(&mut self) {
        if let Some(d) = self.destructor {
            d(self.state);
        }
    }
}

impl strata::CompactionFilter for CFilter {
    fn name(&self) -> &str {
        &self.name
    }

    fn filter(&self, key: &[u8], value: &[u8]) -> strata::compaction_filter::Decision {
        use strata::compaction_filter::Decision;
        let mut out: *mut u8 = ptr::null_mut();
        let mut len = 0usize;
        let r = (self.filter)(
            self.state,
            key.as_ptr(),
            key.len(),
            value.as_ptr(),
            value.len(),
            &mut out,
            &mut len,
        );
        match r {
            STRATA_FILTER_REMOVE => Decision::Remove,
            STRATA_FILTER_CHANGE if !out.is_null() || len == 0 => {
                let v = if out.is_null() {
                    Vec::new()
                } else {
                    // SAFETY: the filter returned a malloc'd buffer of `len`
                    // bytes (its contract); it is read once, then freed.
                    let v = unsafe { std::slice::from_raw_parts(out, len) }.to_vec();
                    // SAFETY: as above; strata owns the buffer now.
                    unsafe { libc::free(out as *mut c_void) };
                    v
                };
                Decision::Change(v)
            }
            _ => Decision::Keep,
        }
    }
}

/// Sets the compaction filter (NULL `filter`: none; `state` and
/// `destructor` are then ignored). Compactions offer it
/// each value newer than every snapshot that is the newest of its key in
/// the compaction (flushes do not; the README's "Compaction filters").
/// `state` is passed to every call; `destructor` (may be NULL) is called
/// with it once no options or database use the filter. `name` may be NULL.
/// The KVell engine refuses to open with a filter (STRATA_ENOTSUP).
/// Returns STRATA_OK, or STRATA_EINVAL (NULL options, a name that is not
/// UTF-8): then nothing is installed and `destructor` is not called, so
/// `state` is still the caller's.
#[no_mangle]
pub extern "C" fn strata_options_set_compaction_filter(
    opts: *mut strata_options_t,
    name: *const c_char,
    filter: strata_filter_fn,
    state: *mut c_void,
    destructor: strata_destructor_fn,
    errptr: *mut *mut c_char,
) -> c_int {
    guard(errptr, (), || {
        let o = obj_mut(opts, "options")?;
        let name = if name.is_null() {
            "c-filter".to_string()
        } else {
            cstr(name, "name")?.to_string()
        };
        o.opts.compaction_filter = match filter {
            None => strata::FilterOp::none(),
            Some(filter) => strata::FilterOp::new(CFilter {
                name,
                filter,
                destructor,
                state,
            }),
        };
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
