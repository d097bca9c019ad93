//! The one error type of the engine.
//!
//! Every variant says what a caller can do about it: retry after fixing the
//! environment (`Io`), restore or repair (`Corruption`), fix the call
//! (`InvalidArgument`), wait for the other process (`Locked`), reopen
//! (`Poisoned`, `Closed`). Absence of a key is `Ok(None)`, never an error.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors returned by strata.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed on `path`.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// Stored bytes do not decode or fail their checksum.
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    /// The call was malformed (key too large, bad option, ...). Nothing was written.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The requested feature or format version is not supported by this build.
    #[error("not supported: {0}")]
    NotSupported(String),
    /// Another process holds the directory's LOCK file.
    #[error("database directory {} is locked by another process", .0.display())]
    Locked(PathBuf),
    /// The directory holds no database and `create_if_missing` is off.
    #[error("no strata database at {}", .0.display())]
    NotFound(PathBuf),
    /// A database exists and `error_if_exists` is on.
    #[error("a database already exists at {}", .0.display())]
    AlreadyExists(PathBuf),
    /// A background flush or compaction, or a WAL sync, failed; the database
    /// refuses writes until it is reopened. Reads keep working.
    #[error("database stopped accepting writes after a background error: {0}")]
    Poisoned(Arc<Error>),
    /// The database was closed.
    #[error("database is closed")]
    Closed,
    /// An [`crate::EventListener`] callback panicked on a background
    /// thread; the database is poisoned with this error.
    #[error("an event listener panicked: {0}")]
    ListenerPanic(String),

    /// A merge could not be folded: no merge operator is set, or the
    /// operator refused the operands (`MergeOperator::full_merge`).
    #[error("merge failed: {0}")]
    Merge(String),
}

impl Error {
    /// Wraps an `std::io::Error` that happened on `path`.
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            source: Arc::new(source),
        }
    }

    /// A corruption found in `file` at byte `offset`.
    pub fn corruption(file: impl AsRef<Path>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.as_ref().to_path_buf(),
            offset,
            reason: reason.into(),
        }
    }

    /// Re-labels a corruption found while decoding an in-memory buffer with the
    /// file it came from and the file offset of that buffer.
    pub fn in_file(self, file: &Path, base_offset: u64) -> Self {
        match self {
            Error::Corruption {
                file: f,
                offset,
                reason,
            } if f.as_os_str().is_empty() => Error::Corruption {
                file: file.to_path_buf(),
                offset: base_offset + offset,
                reason,
            },
            other => other,
        }
    }

    /// True for `Corruption`.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// The `std::io::ErrorKind` of an `Io` error.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Error::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// A corruption in a buffer whose file is not known yet; see [`Error::in_file`].
#[allow(dead_code)]
pub(crate) fn corrupt(offset: u64, reason: impl Into<String>) -> Error {
    Error::corruption(PathBuf::new(), offset, reason)
}

/// The error a caught panic becomes: `what` (a write, a flush, a
/// compaction) panicked, with the panic's message. The database is then
/// poisoned with it, so every caller sees it instead of waiting for work
/// that will never finish.
pub(crate) fn panicked(what: &str, payload: Box<dyn std::any::Any + Send>) -> Error {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string());
    Error::io(
        what,
        std::io::Error::other(format!("{what} panicked: {msg}")),
    )
}
