//! Executors: a plan plus the version it was picked from become output
//! tables and one version edit, which the caller installs. The executor is
//! chosen once at open from `Options::executor` (`db::compaction_design`);
//! only [`Linear`] exists so far. CoPro's sub-task, pipelined and
//! offloaded executors (seed 001, issue 15) implement the same trait.

mod linear;

pub use linear::{run_linear, Linear};

use super::Plan;
use crate::error::Result;
use crate::io::FileSystem;
use crate::stale::{CompactionChange, Tracker};
use crate::table::TableOptions;
use crate::types::SeqNo;
use crate::version::{Edit, Version};
use std::path::Path;
use std::sync::Arc;

/// Carries out compaction plans.
pub trait Executor: Send + Sync {
    /// Executes `plan` against `version` and returns the edit to install
    /// (never installs it) and the figures of the run.
    fn run(&self, plan: &Plan, version: &Version, ctx: &mut Context<'_>)
        -> Result<(Edit, Outcome)>;
}

/// What a compaction needs from its database.
pub struct Context<'a> {
    pub dir: &'a Path,
    pub fs: Arc<dyn FileSystem>,
    pub table_opts: TableOptions,
    /// Live snapshot sequence numbers.
    pub snapshots: Vec<SeqNo>,
    pub new_file_number: &'a mut dyn FnMut() -> u64,
    /// Record the user keys of each output (for event listeners).
    pub collect_keys: bool,
    /// Where each key's newest version lives ([`crate::stale`]).
    pub tracker: &'a dyn Tracker,
    /// No reader can see a sequence below this: the last published
    /// sequence at the start (read before the snapshot list), or the
    /// oldest live snapshot if lower.
    pub stale_horizon: SeqNo,
}

/// Figures of one executed plan.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub entries_dropped: u64,
    /// Versions dropped because the tracker names a newer one.
    pub stale_dropped: u64,
    /// With `collect_keys`, the user keys of each added table, in edit order.
    pub keys: Vec<Vec<Vec<u8>>>,
    /// What the tracker must learn once the edit is durable (`removed` is
    /// left to the caller).
    pub change: CompactionChange,
}
