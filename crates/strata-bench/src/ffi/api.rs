//! The C calls a [`CStore`](super::CStore) makes, as a table of function
//! pointers each library fills, and the error a call reports.

use std::ffi::{c_char, c_uchar, c_void, CStr, CString};
use std::path::Path;

/// An error reported by a C library.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FfiError {
    /// The library set `errptr`.
    #[error("{engine}: {message}")]
    Engine {
        engine: &'static str,
        message: String,
    },
    /// A path or key could not be passed as a C string.
    #[error("{engine}: argument contains a NUL byte: {what}")]
    Nul { engine: &'static str, what: String },
    /// The library returned NULL without an error message.
    #[error("{engine}: {call} returned NULL")]
    Null {
        engine: &'static str,
        call: &'static str,
    },
}

impl FfiError {
    pub(super) fn into_strata(self, path: &Path) -> strata::Error {
        strata::Error::io(path, std::io::Error::other(self))
    }
}

pub type Handle = *mut c_void;

/// A get that copies the value once (see [`Api::pinned_get`]): `(api, db,
/// read options, key)`.
pub type PinnedGet = unsafe fn(&Api, Handle, Handle, &[u8]) -> Result<Option<Vec<u8>>, FfiError>;
/// A checkpoint of an open database in a new directory (see
/// [`Api::checkpoint`]): `(api, db, target)`.
pub type Checkpoint = unsafe fn(&Api, Handle, &Path) -> Result<(), FfiError>;
/// A backup of an open database into a backup directory (see
/// [`Api::backup`]): `(api, db, backup directory)`.
pub type Backup = unsafe fn(&Api, Handle, &Path) -> Result<(), FfiError>;
pub type ErrPtr = *mut *mut c_char;

/// The C calls a [`CStore`] uses; both libraries fill it with their own.
pub struct Api {
    pub engine: &'static str,
    pub close: unsafe extern "C" fn(Handle),
    pub put:
        unsafe extern "C" fn(Handle, Handle, *const c_char, usize, *const c_char, usize, ErrPtr),
    pub get: unsafe extern "C" fn(
        Handle,
        Handle,
        *const c_char,
        usize,
        *mut usize,
        ErrPtr,
    ) -> *mut c_char,
    /// A get that copies the value once (RocksDB's `rocksdb_get_pinned`),
    /// used instead of `get` where the library has one.
    pub pinned_get: Option<PinnedGet>,
    pub delete: unsafe extern "C" fn(Handle, Handle, *const c_char, usize, ErrPtr),
    pub write: unsafe extern "C" fn(Handle, Handle, Handle, ErrPtr),
    pub batch_create: unsafe extern "C" fn() -> Handle,
    pub batch_destroy: unsafe extern "C" fn(Handle),
    pub batch_put: unsafe extern "C" fn(Handle, *const c_char, usize, *const c_char, usize),
    pub batch_delete: unsafe extern "C" fn(Handle, *const c_char, usize),
    /// Adds a range deletion `[start, end)` to a batch
    /// (`rocksdb_writebatch_delete_range`); `None` where the library has
    /// none (LevelDB).
    pub batch_delete_range:
        Option<unsafe extern "C" fn(Handle, *const c_char, usize, *const c_char, usize)>,
    /// Merges an operand (`rocksdb_merge`; arguments as `put`); `None`
    /// where the library has none (LevelDB).
    pub merge: Option<
        unsafe extern "C" fn(Handle, Handle, *const c_char, usize, *const c_char, usize, ErrPtr),
    >,
    /// Adds a merge operand to a batch (`rocksdb_writebatch_merge`; the
    /// database has a merge operator when the run counts); `None` where the
    /// library has none (LevelDB).
    pub batch_merge:
        Option<unsafe extern "C" fn(Handle, *const c_char, usize, *const c_char, usize)>,
    /// Writes a checkpoint of the database to a new directory (RocksDB's
    /// `rocksdb_checkpoint_*` calls); `None` where the library has none
    /// (LevelDB, or a RocksDB library without those symbols).
    pub checkpoint: Option<Checkpoint>,
    /// Adds a backup of the database to a backup directory (RocksDB's
    /// `rocksdb_backup_engine_*` calls); `None` where the library has none
    /// (LevelDB, or a RocksDB library without those symbols).
    pub backup: Option<Backup>,
    pub create_iterator: unsafe extern "C" fn(Handle, Handle) -> Handle,
    pub iter_destroy: unsafe extern "C" fn(Handle),
    pub iter_valid: unsafe extern "C" fn(Handle) -> c_uchar,
    pub iter_seek_to_first: unsafe extern "C" fn(Handle),
    pub iter_seek_to_last: unsafe extern "C" fn(Handle),
    pub iter_seek: unsafe extern "C" fn(Handle, *const c_char, usize),
    pub iter_next: unsafe extern "C" fn(Handle),
    pub iter_prev: unsafe extern "C" fn(Handle),
    pub iter_key: unsafe extern "C" fn(Handle, *mut usize) -> *const c_char,
    pub iter_value: unsafe extern "C" fn(Handle, *mut usize) -> *const c_char,
    pub iter_get_error: unsafe extern "C" fn(Handle, ErrPtr),
    pub property_value: unsafe extern "C" fn(Handle, *const c_char) -> *mut c_char,
    pub free: unsafe extern "C" fn(*mut c_void),
    /// Writes the memtable to a table (`rocksdb_flush`, or LevelDB's
    /// memtable compaction through an empty `compact_range`).
    pub flush: unsafe fn(&Api, Handle) -> Result<(), FfiError>,
    /// The property that gives the table count of level N (`{}` = N).
    pub files_at_level: &'static str,
    /// Judges from the engine's properties (the argument reads one) whether
    /// background work runs or is due: `Ok(Some(state))` when none is
    /// visible, with a text that changes whenever the tree does; `Ok(None)`
    /// while some is; `Err` when the engine reports a background error.
    pub idle: fn(&PropertyReader<'_>) -> Result<Option<String>, String>,
    /// Consecutive looks, 50 ms apart, that must find the same idle state,
    /// given the memtable size: long enough to outlast work the properties
    /// cannot show (LevelDB's listing shows a memtable flush only once its
    /// table is installed).
    pub quiet_looks: fn(usize) -> u32,
}

/// Reads one property of an open database (`None` if the engine lacks it).
pub type PropertyReader<'a> = dyn Fn(&str) -> Option<String> + 'a;

impl Api {
    /// Turns a set `errptr` into an error and frees it.
    ///
    /// # Safety
    /// `err` must be NULL or a NUL-terminated string allocated by this library.
    pub unsafe fn check(&self, err: *mut c_char) -> Result<(), FfiError> {
        if err.is_null() {
            return Ok(());
        }
        // SAFETY: the library returns a NUL-terminated malloc'ed message.
        let message = unsafe { CStr::from_ptr(err) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: allocated by this library; freed exactly once here.
        unsafe { (self.free)(err.cast()) };
        Err(FfiError::Engine {
            engine: self.engine,
            message,
        })
    }
}

/// A property of an open database as text, if the library knows it (the
/// returned buffer is copied and freed with the library's `*_free`).
///
/// # Safety
/// `db` must be an open database of `api`'s library.
pub unsafe fn read_property(api: &Api, db: Handle, name: &str) -> Option<String> {
    let c = CString::new(name).ok()?;
    // SAFETY: db is open (guaranteed by the caller); c is NUL-terminated.
    let p = unsafe { (api.property_value)(db, c.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated malloc'ed string from the library.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: allocated by this library, freed once.
    unsafe { (api.free)(p.cast()) };
    Some(s)
}
