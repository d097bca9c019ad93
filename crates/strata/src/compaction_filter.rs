//! Compaction filters: a user hook that keeps, removes or rewrites the
//! entries compactions write (flushes do not filter).
//!
//! A filter sees an entry only where no reader can tell the difference
//! between the entry and what the filter makes of it, save the reader
//! of the database's current state: the entry must be a value (not a
//! deletion or an unfolded merge operand), the newest version of its key
//! in the compaction, and newer than every snapshot live when the
//! compaction began. A snapshot taken while a filter runs makes the
//! compaction run again without the filter (the counter `filter_reruns`),
//! so a snapshot never sees a filter's work. A later compaction may offer
//! a value the filter already kept or changed: a `Change` should be
//! idempotent. Removing an entry writes
//! a deletion at its sequence number, so an older version in a deeper
//! level does not come back; the deletion goes where deletions go (at the
//! bottom, nowhere).
//!
//! A filter runs on the flush and compaction threads, so it must be quick
//! and must not call back into the database. Compactions run by a worker
//! process (`executor = offload:ADDR`) do not filter: their entries stay
//! until a later flush or compaction in process.

use std::fmt;
use std::sync::Arc;

/// What a [`CompactionFilter`] makes of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write the entry as it is.
    Keep,
    /// Delete the key (a deletion at the entry's sequence number).
    Remove,
    /// Write this value instead.
    Change(Vec<u8>),
}

/// A user hook over the values compactions write; see the module doc for
/// which entries it sees.
pub trait CompactionFilter: Send + Sync {
    /// A name for the options text and logs.
    fn name(&self) -> &str;

    /// What becomes of the value `value` of `key`.
    fn filter(&self, key: &[u8], value: &[u8]) -> Decision;
}

/// The option `compaction_filter`: no filter, or the caller's. Prints as
/// the filter's name (`none` without one); set only from Rust.
#[derive(Clone, Default)]
pub struct FilterOp(Option<Arc<dyn CompactionFilter>>);

impl FilterOp {
    /// No filter.
    pub fn none() -> Self {
        FilterOp(None)
    }

    /// The filter `f`.
    pub fn new(f: impl CompactionFilter + 'static) -> Self {
        FilterOp(Some(Arc::new(f)))
    }

    /// The filter, if one is set.
    pub fn get(&self) -> Option<&Arc<dyn CompactionFilter>> {
        self.0.as_ref()
    }
}

impl From<Arc<dyn CompactionFilter>> for FilterOp {
    fn from(f: Arc<dyn CompactionFilter>) -> Self {
        FilterOp(Some(f))
    }
}

impl fmt::Debug for FilterOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_ref().map_or("none", |o| o.name()))
    }
}

/// A filter from a closure: `FnFilter::new("name", |key, value| ...)`.
pub struct FnFilter<F> {
    name: String,
    f: F,
}

impl<F: Fn(&[u8], &[u8]) -> Decision + Send + Sync> FnFilter<F> {
    /// The filter `name` deciding by `f`.
    pub fn new(name: impl Into<String>, f: F) -> Self {
        FnFilter {
            name: name.into(),
            f,
        }
    }
}

impl<F: Fn(&[u8], &[u8]) -> Decision + Send + Sync> CompactionFilter for FnFilter<F> {
    fn name(&self) -> &str {
        &self.name
    }

    fn filter(&self, key: &[u8], value: &[u8]) -> Decision {
        (self.f)(key, value)
    }
}
